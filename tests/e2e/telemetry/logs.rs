//! JSON logs carry the trace and span ids of the call.

use std::io::{BufRead, BufReader, Write};

use serde_json::{Value, json};

use super::envelope_trace;
use crate::support::binary::spawn_logged;
use crate::support::init_params;

#[test]
fn json_logs_carry_the_trace_and_span_ids_of_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = spawn_logged(&["--log-format", "json"], dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "cyberos.cuo.route", "arguments": {"query": ""}}}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    drop(stdin);
    let frames: Vec<Value> = BufReader::new(stdout)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    let trace = envelope_trace(&frames[1]);
    let logs: Vec<Value> = lines
        .try_iter()
        .map(|l| serde_json::from_str(&l).unwrap_or_else(|_| panic!("not a JSON log line: {l}")))
        .collect();
    let line = logs
        .iter()
        .find(|l| l["fields"]["message"] == "tool call")
        .expect("a tool call log line");
    assert_eq!(line["span"]["cyberos.trace_id"], trace.as_str(), "{line}");
    let span_id = line["span"]["span_id"].as_str().unwrap();
    assert!(
        span_id.len() == 16 && span_id != "0000000000000000",
        "{line}"
    );
}
