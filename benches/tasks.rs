//! Task benchmarks against the built binary: time from `tools/call` to the task handle
//! (p50/p99), and 200 concurrent workflow tasks (completion time, peak RSS, nothing lost
//! or left running). SQLite always; Postgres too when `BENCH_DATABASE_URL` names a
//! migrated database (`cyberos-mcp-bridge migrate --database-url …`).
//!
//! Run: `cargo bench --bench tasks` (`-- --quick` for a short run). Bounded: a fixed number
//! of tasks, loopback only, a 120 s cap on waiting.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BRIDGE: &str = env!("CARGO_BIN_EXE_cyberos-mcp-bridge");

struct Bridge {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Bridge {
    fn start(data: &std::path::Path, store: &[String]) -> Bridge {
        let mut child = Command::new(BRIDGE)
            .arg("--dev")
            .arg("--data-dir")
            .arg(data)
            .args(store)
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = BufWriter::new(child.stdin.take().unwrap());
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut b = Bridge {
            child,
            stdin,
            stdout,
            next: 1,
        };
        b.call("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}));
        b
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        serde_json::to_writer(
            &mut self.stdin,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        self.stdin.write_all(b"\n").unwrap();
        id
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params);
        self.stdin.flush().unwrap();
        loop {
            let v = self.recv();
            if v.get("id").is_some() {
                return v;
            }
        }
    }

    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workflow() -> Value {
    json!({"name": "cyberos.cuo.execute_workflow",
           "arguments": {"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": {"title": "bench"}}})
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn run(label: &str, store: &[String], handles: usize, concurrent: usize) {
    let dir = std::env::temp_dir().join(format!(
        "cyberos-bench-tasks-{}-{label}",
        std::process::id()
    ));
    let mut b = Bridge::start(&dir, store);
    // Warm the CUO catalogue check.
    b.call(
        "tools/call",
        json!({"name": "cyberos.cuo.list_personas", "arguments": {}}),
    );
    let mut lat = Vec::with_capacity(handles);
    for _ in 0..handles {
        let t = Instant::now();
        let resp = b.call("tools/call", workflow());
        assert!(
            resp["result"]["structuredContent"]["task_id"].is_string(),
            "{resp}"
        );
        lat.push(t.elapsed());
    }
    lat.sort_unstable();
    println!(
        "{label:<8} tools/call → task handle: p50 {:.2} ms, p99 {:.2} ms ({handles} calls)",
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );

    let t = Instant::now();
    for _ in 0..concurrent {
        b.send("tools/call", workflow());
    }
    b.stdin.flush().unwrap();
    let mut ids = Vec::with_capacity(concurrent);
    while ids.len() < concurrent {
        let v = b.recv();
        if let Some(id) = v["result"]["structuredContent"]["task_id"].as_str() {
            ids.push(id.to_owned());
        } else if v.get("id").is_some() {
            panic!("a task was refused: {v}");
        }
    }
    let accepted = t.elapsed();
    let mut pending = ids.clone();
    let cap = Instant::now() + Duration::from_secs(120);
    let mut failed = 0;
    while !pending.is_empty() && Instant::now() < cap {
        let mut still = Vec::new();
        for id in pending {
            let v = b.call("tasks/get", json!({"id": id}));
            match v["result"]["status"].as_str() {
                Some("running") => still.push(id),
                Some("completed") => {}
                _ => failed += 1,
            }
        }
        pending = still;
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    println!(
        "{label:<8} {concurrent} concurrent tasks: accepted in {:.2} s, all terminal in {:.2} s, failed {failed}, still running {}, peak RSS {} KiB",
        accepted.as_secs_f64(),
        t.elapsed().as_secs_f64(),
        pending.len(),
        b.peak_rss_kib()
    );
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (handles, concurrent) = if quick { (50, 40) } else { (300, 200) };
    run("sqlite", &[], handles, concurrent);
    if let Ok(url) = std::env::var("BENCH_DATABASE_URL") {
        run(
            "postgres",
            &["--database-url".into(), url],
            handles,
            concurrent,
        );
    }
}
