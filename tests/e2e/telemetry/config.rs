//! Export under adverse or explicit configuration: a down or hung collector never fails a
//! call, a bad endpoint is a usage error, and the standard OTel variables switch export.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::envelope_trace;
use crate::support::binary::{Bridge, binary};
use crate::support::collector::{Collector, black_hole, hex};

/// Runs `n` sequential tools/call through the binary and returns (calls/s, exit time).
fn run_calls(extra: &[&str], n: usize) -> (Duration, Duration) {
    let mut b = Bridge::initialized(extra);
    let started = Instant::now();
    for _ in 0..n {
        let r = b.call("cyberos.skill.list_skills", json!({}));
        assert!(r["result"].is_object(), "{r}");
    }
    let calls = started.elapsed();
    let closing = Instant::now();
    assert!(b.close().success());
    (calls, closing.elapsed())
}

#[test]
fn a_down_or_hung_collector_never_fails_a_call_and_exit_waits_a_bounded_time() {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let hung = black_hole();
    for endpoint in [refused, hung] {
        let (calls, exit) = run_calls(&["--otlp-endpoint", &endpoint], 200);
        // Correctness bounds, not a benchmark (`cargo bench --bench stdio -- --collector-down` is): the calls went
        // through, and the flush on EOF gave up within its wait.
        assert!(calls < Duration::from_secs(20), "{endpoint}: {calls:?}");
        assert!(
            exit < Duration::from_secs(8),
            "{endpoint}: exit took {exit:?}"
        );
    }
}

#[test]
fn a_bad_otlp_endpoint_is_a_usage_error() {
    let out = Command::new(binary())
        .args(["--dev", "--otlp-endpoint", "localhost:4317"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--otlp-endpoint"), "{err}");
}

#[test]
fn the_standard_otel_variable_alone_turns_export_on() {
    let collector = Collector::start();
    let mut b = Bridge::spawn_with_env(
        &["--dev"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "bridge-under-test"),
        ],
    );
    b.initialize();
    let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
    let trace = envelope_trace(&bad);
    assert!(b.close().success());
    let got = collector.wait_for(Duration::from_secs(1), |s| hex(&s.trace_id) == trace);
    assert_eq!(got.service, "bridge-under-test");
}

#[test]
fn the_standard_switches_turn_env_export_off_and_http_json_is_refused() {
    let collector = Collector::start();
    for off in [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ] {
        let mut b = Bridge::spawn_with_env(
            &["--dev"],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
                off,
            ],
        );
        b.initialize();
        let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
        assert_eq!(bad["error"]["data"]["class"], "input_validation");
        // Exit flushes whatever was exported: nothing was.
        assert!(b.close().success());
        assert!(collector.spans().is_empty(), "{off:?}");
    }
    let out = Command::new(binary())
        .arg("--dev")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("grpc or http/protobuf"), "{err}");
}
