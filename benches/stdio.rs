//! Stdio round-trip benchmark of the built binary, against a bare serde_json echo server
//! measured in the same run (this file re-executes itself as that echo server).
//!
//! Run: `cargo bench --bench stdio` (add `-- --quick` for a short run). Reports p50/p99
//! latency and messages/s, sequential and with 64 requests in flight, server CPU time per
//! request, time from process start to the first `initialize` answer, and idle RSS.
//! Bounded: a fixed number of requests per scenario, loopback pipes only.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BRIDGE: &str = env!("CARGO_BIN_EXE_cyberos-mcp-bridge");

#[path = "stdio/echo.rs"]
mod echo;

#[path = "../tests/e2e/support/collector.rs"]
#[allow(dead_code)]
mod collector;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--echo-server") {
        echo::serve();
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let n = if quick { 2_000 } else { 20_000 };
    let skills = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/skills");
    let data = std::env::temp_dir().join(format!("cyberos-bench-{}", std::process::id()));

    println!("cyberos-mcp-bridge stdio benchmark ({n} requests per scenario)\n");
    if args.iter().any(|a| a == "--collector-down") {
        let call = json!({"method": "tools/call", "params": {"name": "cyberos.skill.list_skills", "arguments": {"limit": 5}}});
        collector_down(&data, skills, &call, n);
        let _ = std::fs::remove_dir_all(&data);
        return;
    }
    let start = startup(&data, skills, if quick { 5 } else { 20 });
    println!(
        "startup to first initialize answer: p50 {:.2} ms, max {:.2} ms",
        ms(start.0),
        ms(start.1)
    );

    let echo = Server::echo();
    let mut bridge = Server::bridge(&data, skills);
    println!("idle RSS after initialize: {} KiB\n", bridge.rss_kib());

    let ping = json!({"method": "ping"});
    let list = json!({"method": "tools/list"});
    let call = json!({"method": "tools/call", "params": {"name": "cyberos.skill.list_skills", "arguments": {"limit": 5}}});
    println!(
        "{:<44} {:>10} {:>9} {:>9} {:>12}",
        "scenario", "msgs/s", "p50 µs", "p99 µs", "CPU µs/req"
    );
    let mut echo = echo;
    // Warm the CUO child so its start-up is not measured as a call.
    bridge.sequential(&json!({"method": "tools/call", "params": {"name": "cyberos.cuo.list_personas", "arguments": {}}}), 1);
    report(
        "bare serde_json echo, sequential",
        echo.sequential(&ping, n),
    );
    report(
        "bare serde_json echo, 64 in flight",
        echo.pipelined(&ping, n * 5, 64),
    );
    report("bridge ping, sequential", bridge.sequential(&ping, n));
    report(
        "bridge ping, 64 in flight",
        bridge.pipelined(&ping, n * 5, 64),
    );
    report("bridge tools/list, sequential", bridge.sequential(&list, n));
    report(
        "bridge tools/list, 64 in flight",
        bridge.pipelined(&list, n * 2, 64),
    );
    report(
        "bridge tools/call list_skills, sequential",
        bridge.sequential(&call, n),
    );
    report(
        "bridge tools/call list_skills, 64 in flight",
        bridge.pipelined(&call, n * 2, 64),
    );
    // Through the pooled CUO child (the bundled reference runner).
    let route = json!({"method": "tools/call", "params": {"name": "cyberos.cuo.route",
        "arguments": {"query": "Architect a new payment routing system for Southeast Asian markets"}}});
    let personas = json!({"method": "tools/call", "params": {"name": "cyberos.cuo.list_personas", "arguments": {}}});
    report(
        "bridge cuo.route, sequential",
        bridge.sequential(&route, n / 4),
    );
    report(
        "bridge cuo.route, 16 in flight",
        bridge.pipelined(&route, n / 2, 16),
    );
    report(
        "bridge cuo.list_personas, sequential",
        bridge.sequential(&personas, n / 4),
    );
    report(
        "bridge cuo.list_personas, 16 in flight",
        bridge.pipelined(&personas, n / 2, 16),
    );
    drop(bridge);
    collector_down(&data, skills, &call, n);
    let _ = std::fs::remove_dir_all(&data);
}

/// CONTRACT §9: a down collector never slows a call. The same tools/call with no exporter,
/// with only the metrics scrape on, with a working OTLP receiver (the test suite's; gRPC
/// and HTTP), with `--otlp-endpoint` at a port nobody listens on (both protocols), and at
/// a listener that accepts and never answers; three interleaved rounds each, so the
/// spread between rounds shows the noise.
fn collector_down(data: &std::path::Path, skills: &str, call: &Value, n: u64) {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hung_url = format!("http://{}", hung.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = hung.incoming().flatten().collect();
        drop(held);
    });
    let up = collector::Collector::start();
    let up_http = collector::Collector::start_http();
    let http = ["--otlp-protocol", "http/protobuf", "--otlp-endpoint"];
    let mut configs = [
        ("no exporter", Vec::<&str>::new()),
        (
            "metrics scraped, no exporter",
            vec!["--metrics-listen", "127.0.0.1:0"],
        ),
        (
            "collector up",
            vec!["--otlp-endpoint", up.endpoint.as_str()],
        ),
        (
            "collector up (http)",
            [&http[..], &[up_http.endpoint.as_str()]].concat(),
        ),
        (
            "collector refused",
            vec!["--otlp-endpoint", refused.as_str()],
        ),
        (
            "collector refused (http)",
            [&http[..], &[refused.as_str()]].concat(),
        ),
        (
            "collector never answers",
            vec!["--otlp-endpoint", hung_url.as_str()],
        ),
    ]
    .map(|(name, args)| {
        let dir = data.join(name.replace(' ', "-"));
        (name, Server::bridge_initialized_with(&dir, skills, &args))
    });
    println!("\nspan export with the collector down: tools/call list_skills, sequential");
    for (_, server) in configs.iter_mut() {
        server.sequential(call, n / 10);
    }
    for round in 1..=3 {
        for (name, server) in configs.iter_mut() {
            report(
                &format!("round {round}: {name}"),
                server.sequential(call, n / 2),
            );
        }
    }
}

struct Stats {
    per_sec: f64,
    p50: Duration,
    p99: Duration,
    cpu_us_per_req: f64,
}

fn report(name: &str, s: Stats) {
    println!(
        "{name:<44} {:>10.0} {:>9.1} {:>9.1} {:>12.1}",
        s.per_sec,
        s.p50.as_secs_f64() * 1e6,
        s.p99.as_secs_f64() * 1e6,
        s.cpu_us_per_req
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

struct Server {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Server {
    fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = BufWriter::new(child.stdin.take().unwrap());
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    fn echo() -> Server {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.arg("--echo-server");
        Server::spawn(cmd)
    }

    /// A bridge past the handshake, settled.
    fn bridge(data: &std::path::Path, skills: &str) -> Server {
        let mut s = Server::bridge_uninitialized(data, skills);
        s.initialize();
        s.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        s.stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        s
    }

    fn send(&mut self, id: u64, template: &Value) {
        let mut msg = template.clone();
        msg["jsonrpc"] = "2.0".into();
        msg["id"] = id.into();
        serde_json::to_writer(&mut self.stdin, &msg).unwrap();
        self.stdin.write_all(b"\n").unwrap();
    }

    fn recv(&mut self) -> Value {
        self.line.clear();
        self.stdout.read_line(&mut self.line).unwrap();
        let v: Value = serde_json::from_str(&self.line).expect("a JSON frame");
        assert!(v.get("error").is_none(), "benchmark request failed: {v}");
        assert!(
            v["result"].get("isError") != Some(&Value::Bool(true)),
            "benchmark call failed: {v}"
        );
        v
    }

    fn cpu_ticks(&self) -> u64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
        f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    fn sequential(&mut self, template: &Value, n: u64) -> Stats {
        let mut lat = Vec::with_capacity(n as usize);
        let cpu0 = self.cpu_ticks();
        let t0 = Instant::now();
        for i in 0..n {
            let t = Instant::now();
            self.send(1000 + i, template);
            self.stdin.flush().unwrap();
            self.recv();
            lat.push(t.elapsed());
        }
        let total = t0.elapsed();
        self.stats(lat, n, total, cpu0)
    }

    fn pipelined(&mut self, template: &Value, n: u64, window: u64) -> Stats {
        let mut sent_at = std::collections::HashMap::with_capacity(window as usize * 2);
        let mut lat = Vec::with_capacity(n as usize);
        let cpu0 = self.cpu_ticks();
        let t0 = Instant::now();
        let mut next = 0u64;
        let mut done = 0u64;
        while done < n {
            while next < n && next - done < window {
                sent_at.insert(next, Instant::now());
                self.send(next, template);
                next += 1;
            }
            self.stdin.flush().unwrap();
            let v = self.recv();
            let id = v["id"].as_u64().unwrap();
            lat.push(sent_at.remove(&id).unwrap().elapsed());
            done += 1;
        }
        let total = t0.elapsed();
        self.stats(lat, n, total, cpu0)
    }

    fn stats(&self, mut lat: Vec<Duration>, n: u64, total: Duration, cpu0: u64) -> Stats {
        lat.sort_unstable();
        let ticks = self.cpu_ticks() - cpu0;
        // Linux reports CPU time in clock ticks of 10 ms.
        let cpu_us = ticks as f64 * 10_000.0 / n as f64;
        Stats {
            per_sec: n as f64 / total.as_secs_f64(),
            p50: percentile(&lat, 0.5),
            p99: percentile(&lat, 0.99),
            cpu_us_per_req: cpu_us,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Time from spawn to the first `initialize` answer: (p50, max).
fn startup(data: &std::path::Path, skills: &str, runs: usize) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let mut s = Server::bridge_uninitialized(data, skills);
            s.initialize();
            t.elapsed()
        })
        .collect();
    times.sort_unstable();
    (percentile(&times, 0.5), *times.last().unwrap())
}

impl Server {
    /// Sends `initialize` and waits for its answer.
    fn initialize(&mut self) {
        self.send(1, &json!({"method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}));
        self.stdin.flush().unwrap();
        self.recv();
    }

    /// A freshly started bridge, before the handshake.
    fn bridge_uninitialized(data: &std::path::Path, skills: &str) -> Server {
        Server::bridge_with(data, skills, &[])
    }

    fn bridge_with(data: &std::path::Path, skills: &str, extra: &[&str]) -> Server {
        let mut cmd = Command::new(BRIDGE);
        cmd.arg("--dev")
            .arg("--data-dir")
            .arg(data)
            .arg("--skills-dir")
            .arg(skills)
            .args(extra)
            .env("RUST_LOG", "error")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        Server::spawn(cmd)
    }

    /// As [`Server::bridge`], with extra flags.
    fn bridge_initialized_with(data: &std::path::Path, skills: &str, extra: &[&str]) -> Server {
        let mut s = Server::bridge_with(data, skills, extra);
        s.initialize();
        s.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        s.stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        s
    }
}
