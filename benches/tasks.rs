//! Task benchmarks against the built binary: time from `tools/call` to the task handle
//! (p50/p99), and 200 concurrent workflow tasks (completion time, peak concurrency, peak
//! RSS, nothing lost or left running). SQLite always; Postgres too when
//! `BENCH_DATABASE_URL` is a URL that may create databases: each run gets a fresh one,
//! migrated by the built binary and dropped afterwards, so runs neither see each other's
//! tasks nor fill the per-tenant task limit.
//!
//! The bridge runs with a cap of its own (`--cap N`, default: the number of concurrent
//! tasks) as both `--max-tasks-per-tenant` and `--max-cuo-children`, so the 200 tasks are
//! admitted by configuration, not by a race; a call refused at the cap is counted, not
//! retried. Peak concurrency is the largest number of tasks whose runs overlapped, from
//! their stored creation and last-update instants.
//!
//! `BENCH_BRIDGE=<binary>` measures another build (an older commit's, say) with this harness.
//!
//! Run: `cargo bench --bench tasks` (`-- --quick` for a short run, `-- --cap 32` to see the
//! cap at work). Bounded: a fixed number of tasks, loopback only, a 120 s cap on waiting.
//!
//! `-- --pin` (needs 2+ CPUs and `taskset`) keeps this process and the bridge on CPU 0 and
//! the CUO children on the others: the bridge's own latency, apart from the children's
//! start-up (hundreds of processes exec'd within a second), which on a machine this small
//! otherwise holds the bridge's threads off a CPU for milliseconds at a time.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../tests/e2e/support/proc_status.rs"]
mod proc_status;
#[path = "../tests/e2e/support/pg/url.rs"]
#[allow(dead_code)]
mod url;

/// The binary under test: `BENCH_BRIDGE` when set (another build, e.g. an older commit's
/// release binary, measured by the same harness on the same machine), else this build's.
fn bridge_bin() -> String {
    std::env::var("BENCH_BRIDGE")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_cyberos-mcp-bridge").to_owned())
}

struct Bridge {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Bridge {
    fn start(data: &std::path::Path, store: &[String], cap: usize) -> Bridge {
        let cap = cap.to_string();
        let mut child = Command::new(bridge_bin())
            .arg("--dev")
            .arg("--data-dir")
            .arg(data)
            .args(store)
            .args(["--max-tasks-per-tenant", &cap, "--max-cuo-children", &cap])
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
        proc_status::kib(self.child.id(), "VmHWM").unwrap_or(0)
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

/// Whether `resp` is a refusal at one of the bridge's caps.
fn at_cap(resp: &Value) -> bool {
    resp["error"]["code"] == -32050
        && resp["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("too many running"))
}

/// Polls `ids` until each is terminal (at most 120 s); returns the terminal tasks (seed
/// shape), how many did not complete, and the ids still running at the cap.
fn wait_all(b: &mut Bridge, ids: &[String]) -> (Vec<Value>, usize, Vec<String>) {
    let mut pending = ids.to_vec();
    let mut done = Vec::with_capacity(ids.len());
    let mut failed = 0;
    let cap = Instant::now() + Duration::from_secs(120);
    while !pending.is_empty() && Instant::now() < cap {
        let mut still = Vec::new();
        for id in pending {
            let v = b.call("tasks/get", json!({"id": id}));
            match v["result"]["status"].as_str() {
                Some("running") => still.push(id),
                Some("completed") => done.push(v["result"].clone()),
                _ => {
                    failed += 1;
                    done.push(v["result"].clone());
                }
            }
        }
        pending = still;
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    (done, failed, pending)
}

/// The largest number of tasks whose runs overlapped: each task runs from its creation to
/// its last update (its end, for a terminal task).
fn peak_concurrency(tasks: &[Value]) -> usize {
    let instant = |t: &Value, field: &str| {
        t[field]
            .as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
            .map(|d| d.timestamp_micros())
    };
    let mut edges: Vec<(i64, i32)> = Vec::with_capacity(tasks.len() * 2);
    for t in tasks {
        if let (Some(start), Some(end)) = (instant(t, "created_at"), instant(t, "updated_at")) {
            edges.push((start, 1));
            edges.push((end, -1));
        }
    }
    // Ends before starts at the same instant: touching runs did not overlap.
    edges.sort_unstable();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, delta) in edges {
        now += delta;
        peak = peak.max(now);
    }
    usize::try_from(peak).unwrap_or(0)
}

fn run(label: &str, store: &[String], handles: usize, concurrent: usize, cap: usize) {
    let dir = std::env::temp_dir().join(format!(
        "cyberos-bench-tasks-{}-{label}",
        std::process::id()
    ));
    let mut b = Bridge::start(&dir, store, cap);
    // Warm the CUO catalogue check.
    b.call(
        "tools/call",
        json!({"name": "cyberos.cuo.list_personas", "arguments": {}}),
    );
    let mut lat = Vec::with_capacity(handles);
    let mut first = Vec::with_capacity(handles);
    let mut refused = 0;
    while first.len() < handles {
        let t = Instant::now();
        let resp = b.call("tools/call", workflow());
        if at_cap(&resp) {
            // Sequential calls outran the runs: wait for room, as a client would.
            refused += 1;
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let id = resp["result"]["structuredContent"]["task_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no task handle: {resp}"));
        lat.push(t.elapsed());
        first.push(id.to_owned());
    }
    lat.sort_unstable();
    println!(
        "{label:<8} tools/call → task handle: p50 {:.2} ms, p99 {:.2} ms ({handles} calls, {refused} refused at the cap of {cap} and retried)",
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
    // The next figure counts only its own runs.
    let (_, _, left) = wait_all(&mut b, &first);
    assert!(left.is_empty(), "{} tasks never ended", left.len());

    let t = Instant::now();
    for _ in 0..concurrent {
        b.send("tools/call", workflow());
    }
    b.stdin.flush().unwrap();
    let mut ids = Vec::with_capacity(concurrent);
    let mut refused = 0;
    let mut answered = 0;
    while answered < concurrent {
        let v = b.recv();
        if v.get("id").is_none() {
            continue;
        }
        answered += 1;
        if let Some(id) = v["result"]["structuredContent"]["task_id"].as_str() {
            ids.push(id.to_owned());
        } else if at_cap(&v) {
            refused += 1;
        } else {
            panic!("a task was refused: {v}");
        }
    }
    let accepted = t.elapsed();
    let (done, failed, pending) = wait_all(&mut b, &ids);
    println!(
        "{label:<8} {concurrent} concurrent tasks (cap {cap}): {} accepted in {:.2} s, {refused} refused at the cap, all terminal in {:.2} s, failed {failed}, still running {}, peak concurrency {}, peak RSS {} KiB",
        ids.len(),
        accepted.as_secs_f64(),
        t.elapsed().as_secs_f64(),
        pending.len(),
        peak_concurrency(&done),
        b.peak_rss_kib()
    );
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let (handles, concurrent) = if quick { (50, 40) } else { (300, 200) };
    let children = if args.iter().any(|a| a == "--pin") {
        pin()
    } else {
        Vec::new()
    };
    let cap = args
        .iter()
        .position(|a| a == "--cap")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse::<usize>().expect("--cap takes a positive number"))
        .unwrap_or(concurrent);
    run("sqlite", &children, handles, concurrent, cap);
    if let Ok(admin) = std::env::var("BENCH_DATABASE_URL") {
        let name = format!("cyberos_bench_{}", std::process::id());
        let url = fresh_database(&admin, &name);
        let mut store = vec!["--database-url".into(), url];
        store.extend(children);
        run("postgres", &store, handles, concurrent, cap);
        admin_sql(&admin, &format!("DROP DATABASE \"{name}\" WITH (FORCE)"));
    }
}

/// Creates database `name` and migrates it with the built binary; returns its URL.
fn fresh_database(admin: &str, name: &str) -> String {
    admin_sql(
        admin,
        &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
    );
    admin_sql(admin, &format!("CREATE DATABASE \"{name}\""));
    let url = url::with_database(admin, name);
    url::migrate_with(&bridge_bin(), &url);
    url
}

fn admin_sql(admin: &str, sql: &str) {
    use sqlx::{AssertSqlSafe, Connection, Executor};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conn = sqlx::PgConnection::connect(admin)
            .await
            .expect("BENCH_DATABASE_URL accepts connections");
        conn.execute(AssertSqlSafe(sql.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let _ = conn.close().await;
    });
}

/// Moves this process (and so the bridge it starts) to CPU 0; returns the bridge options
/// that start CUO children on the other CPUs.
fn pin() -> Vec<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        cpus >= 2,
        "--pin needs at least 2 CPUs, this machine has {cpus}"
    );
    let me = std::process::id().to_string();
    let status = Command::new("taskset")
        .args(["-pc", "0", &me])
        .stdout(Stdio::null())
        .status()
        .expect("--pin needs taskset (util-linux)");
    assert!(status.success(), "taskset could not pin this process");
    println!(
        "pinned: this process and the bridge on CPU 0, CUO children on CPUs 1-{}",
        cpus - 1
    );
    let command = format!("taskset -c 1-{} {} cuo-runner", cpus - 1, bridge_bin());
    vec!["--cuo-command".into(), command]
}
