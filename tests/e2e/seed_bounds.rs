//! Two seed criteria that are bounds rather than behaviours: a long tool answers its task
//! handle at once (criterion 4; the 100 ms target is measured by `benches/tasks.rs`, this
//! is the correctness bound), and a stdio bridge binds no port (criterion 20).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::binary::{Bridge, paced};
use crate::support::http_server::Server;

#[test]
fn a_long_tool_answers_its_handle_long_before_the_run_ends() {
    // Three steps of 3 s: a call that waited for the run would take 9 s.
    let mut b = Bridge::initialized(&["--cuo-command", &paced(3000)]);
    // The shared CUO child is started by the catalogue lookup of the first call; a short
    // call first keeps its start-up out of the measurement.
    b.call("cyberos.cuo.list_personas", json!({}));
    let started = Instant::now();
    let resp = b.call(
        "cyberos.cuo.execute_workflow",
        json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture",
               "inputs": {"title": "t"}}),
    );
    let took = started.elapsed();
    let handle = &resp["result"]["structuredContent"];
    assert_eq!(handle["status"], "running", "{resp}");
    assert!(
        handle["task_id"]
            .as_str()
            .is_some_and(|t| t.starts_with("t-"))
    );
    assert!(
        took < Duration::from_secs(3),
        "the handle took {took:?}; it must not wait for the run"
    );
}

#[test]
fn a_stdio_bridge_binds_no_port_and_the_check_sees_an_http_one() {
    let mut b = Bridge::initialized(&[]);
    // A call that reaches an upstream, so everything the bridge opens lazily is open.
    b.call("cyberos.cuo.list_personas", json!({}));
    let sockets = inet_sockets(b.pid());
    assert!(
        sockets.is_empty(),
        "the stdio bridge has inet sockets: {}",
        describe(&sockets)
    );

    // The same check on an HTTP bridge finds its listener, so it can fail.
    let http = Server::start(&[]);
    let sockets = inet_sockets(http.pid());
    assert!(
        sockets.iter().any(|s| s.listening),
        "the check found no listener of an HTTP bridge: {}",
        describe(&sockets)
    );
}

fn describe(sockets: &[InetSocket]) -> String {
    let list: Vec<String> = sockets
        .iter()
        .map(|s| format!("{} {} listening={}", s.table, s.local, s.listening))
        .collect();
    format!("[{}]", list.join(", "))
}

struct InetSocket {
    table: &'static str,
    local: String,
    listening: bool,
}

/// The TCP and UDP sockets (IPv4 and IPv6) process `pid` holds: its socket descriptors,
/// looked up by inode in the kernel's tables.
fn inet_sockets(pid: i32) -> Vec<InetSocket> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc is readable")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut found = Vec::new();
    for table in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if cols.len() > 9 && inodes.contains(cols[9]) {
                found.push(InetSocket {
                    table,
                    local: cols[1].to_owned(),
                    listening: cols[3] == "0A",
                });
            }
        }
    }
    found
}
