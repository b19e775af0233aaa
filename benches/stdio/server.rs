//! One server under test (the bridge or the echo floor) driven over its stdin/stdout,
//! with its CPU time read from /proc.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::bridge_bin;

pub struct Stats {
    pub per_sec: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub cpu_us_per_req: f64,
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub struct Server {
    child: Child,
    pub stdin: BufWriter<ChildStdin>,
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

    /// This bench binary re-executed as one of its floors (`args` pick it, see `main`).
    fn floor(args: &[&std::ffi::OsStr]) -> Server {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(args);
        Server::spawn(cmd)
    }

    pub fn echo() -> Server {
        Server::floor(&["--echo-server".as_ref()])
    }

    /// The echo on the bridge's stdio plumbing (`echo::serve_async`).
    pub fn async_echo() -> Server {
        Server::floor(&["--async-echo-server".as_ref()])
    }

    /// [`Server::async_echo`] answering every request with the result in the file at
    /// `result` (`echo::serve_answer`).
    pub fn answer_floor(result: &std::path::Path) -> Server {
        Server::floor(&["--answer-server".as_ref(), result.as_os_str()])
    }

    /// A bridge past the handshake, settled.
    pub fn bridge(data: &std::path::Path, skills: &str) -> Server {
        Server::bridge_initialized_with(data, skills, &[])
    }

    /// As [`Server::bridge`], with extra flags.
    pub fn bridge_initialized_with(data: &std::path::Path, skills: &str, extra: &[&str]) -> Server {
        let mut s = Server::bridge_with(data, skills, extra);
        s.initialize();
        s.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        s.stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        s
    }

    /// A freshly started bridge, before the handshake.
    pub fn bridge_uninitialized(data: &std::path::Path, skills: &str) -> Server {
        Server::bridge_with(data, skills, &[])
    }

    fn bridge_with(data: &std::path::Path, skills: &str, extra: &[&str]) -> Server {
        let mut cmd = Command::new(bridge_bin());
        cmd.arg("--dev")
            .arg("--data-dir")
            .arg(data)
            .arg("--skills-dir")
            .arg(skills)
            .args(extra)
            // The level a serving bridge logs at by default, so each call writes its
            // `tool call` line as it would for a user (to /dev/null here).
            .env("RUST_LOG", "info")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        Server::spawn(cmd)
    }

    /// Sends `initialize` and waits for its answer.
    pub fn initialize(&mut self) {
        self.ask(&json!({"method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}));
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

    /// CPU time of all the server's threads so far, in ns: the sum of each thread's
    /// `/proc/PID/task/TID/schedstat` run time (ns-precise, where utime+stime count 10 ms
    /// ticks, too coarse for a floor of a few µs per message). Threads that exit during a
    /// scenario would be missed; the servers here keep theirs.
    fn cpu_ns(&self) -> u64 {
        let dir = format!("/proc/{}/task", self.child.id());
        std::fs::read_dir(dir)
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                    .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Sends one request and returns its response.
    pub fn ask(&mut self, template: &Value) -> Value {
        self.send(1, template);
        self.stdin.flush().unwrap();
        self.recv()
    }

    pub fn rss_kib(&self) -> u64 {
        crate::proc_status::kib(self.child.id(), "VmRSS").unwrap_or(0)
    }

    pub fn sequential(&mut self, template: &Value, n: u64) -> Stats {
        let mut lat = Vec::with_capacity(n as usize);
        let cpu0 = self.cpu_ns();
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

    pub fn pipelined(&mut self, template: &Value, n: u64, window: u64) -> Stats {
        let mut sent_at = std::collections::HashMap::with_capacity(window as usize * 2);
        let mut lat = Vec::with_capacity(n as usize);
        let cpu0 = self.cpu_ns();
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
        let cpu_ns = self.cpu_ns() - cpu0;
        Stats {
            per_sec: n as f64 / total.as_secs_f64(),
            p50: percentile(&lat, 0.5),
            p99: percentile(&lat, 0.99),
            cpu_us_per_req: cpu_ns as f64 / 1e3 / n as f64,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
