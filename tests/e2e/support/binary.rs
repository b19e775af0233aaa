//! The built binary over real stdin/stdout: every frame it writes is checked against the
//! MCP schema.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::schema::Requests;
use crate::support::{WAIT, fixtures, init_params};

/// The path of the built binary.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_cyberos-mcp-bridge")
}

/// A `--cuo-command` for the bundled runner, pacing each workflow step (so runs last long
/// enough to observe).
pub fn paced(ms: u64) -> String {
    format!("{} cuo-runner --pace-ms {ms}", binary())
}

/// The bridge binary on stdio.
pub struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<String>,
    sent: Requests,
    next_id: i64,
    _data_dir: Option<tempfile::TempDir>,
}

impl Bridge {
    /// Starts the binary with `--dev`, a fresh data dir, the fixture skills and `extra`
    /// flags.
    pub fn spawn(extra: &[&str]) -> Bridge {
        let mut args = vec!["--dev"];
        args.extend_from_slice(extra);
        Bridge::spawn_with_env(&args, &[])
    }

    /// Starts the binary with exactly `extra` flags (plus data dir and skills) and extra
    /// environment variables.
    pub fn spawn_with_env(extra: &[&str], env: &[(&str, &str)]) -> Bridge {
        Bridge::spawn_in(tempfile::tempdir().unwrap(), extra, env)
    }

    /// As [`Bridge::spawn_with_env`], in a data dir shared with other bridges (the caller
    /// keeps it alive).
    pub fn spawn_at(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Bridge {
        let (child, stdin, frames) = Bridge::launch(data_dir, extra, env, None);
        Bridge {
            child,
            stdin,
            frames,
            sent: Requests::default(),
            next_id: 1,
            _data_dir: None,
        }
    }

    /// As [`Bridge::spawn_with_env`], in a given data dir.
    pub fn spawn_in(data_dir: tempfile::TempDir, extra: &[&str], env: &[(&str, &str)]) -> Bridge {
        Bridge::spawn_logging(data_dir, extra, env, None)
    }

    /// As [`Bridge::spawn_in`], sending each stderr line to `log` when given.
    pub fn spawn_logging(
        data_dir: tempfile::TempDir,
        extra: &[&str],
        env: &[(&str, &str)],
        log: Option<mpsc::Sender<String>>,
    ) -> Bridge {
        let (child, stdin, frames) = Bridge::launch(data_dir.path(), extra, env, log);
        Bridge {
            child,
            stdin,
            frames,
            sent: Requests::default(),
            next_id: 1,
            _data_dir: Some(data_dir),
        }
    }

    fn launch(
        data_dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        log: Option<mpsc::Sender<String>>,
    ) -> (Child, Option<ChildStdin>, mpsc::Receiver<String>) {
        Bridge::launch_program(binary(), data_dir, extra, env, log)
    }

    /// Runs `program` (a program built on the library, taking the bridge's flags) as
    /// [`Bridge::spawn_at`] runs the bridge, sending each stderr line to `log` when given.
    pub fn spawn_program(
        program: &Path,
        data_dir: &Path,
        extra: &[&str],
        log: Option<mpsc::Sender<String>>,
    ) -> Bridge {
        let (child, stdin, frames) = Bridge::launch_program(program, data_dir, extra, &[], log);
        Bridge {
            child,
            stdin,
            frames,
            sent: Default::default(),
            next_id: 1,
            _data_dir: None,
        }
    }

    fn launch_program(
        program: impl AsRef<std::ffi::OsStr>,
        data_dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        log: Option<mpsc::Sender<String>>,
    ) -> (Child, Option<ChildStdin>, mpsc::Receiver<String>) {
        let mut cmd = Command::new(program);
        cmd.arg("--data-dir")
            .arg(data_dir)
            .arg("--skills-dir")
            .arg(fixtures().join("skills"))
            .args(extra)
            .env("RUST_LOG", "debug")
            .env_remove("CYBEROS_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if log.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        let mut child = cmd.spawn().expect("the bridge binary starts");
        if let (Some(log), Some(stderr)) = (log, child.stderr.take()) {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let _ = log.send(line);
                }
            });
        }
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, stdin, frames)
    }

    /// Kills the bridge without warning (a crash).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the binary and completes the handshake.
    pub fn initialized(extra: &[&str]) -> Bridge {
        let mut b = Bridge::spawn(extra);
        b.initialize();
        b
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self) -> Value {
        let resp = self.request("initialize", init_params("2025-11-25"));
        assert_eq!(resp["result"]["protocolVersion"], "2025-11-25", "{resp}");
        self.notify("notifications/initialized", json!({}));
        resp["result"].clone()
    }

    /// Writes one raw line.
    pub fn send_raw(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a message, remembering the method of requests for schema checks.
    pub fn send(&mut self, message: &Value) {
        self.sent.sent(message);
        self.send_raw(message.to_string().as_bytes());
    }

    /// Sends a request with a fresh id and returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its response (other frames in between are checked
    /// and dropped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        loop {
            let frame = self.recv();
            if frame.get("id") == Some(&id) && frame.get("method").is_none() {
                return frame;
            }
        }
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// `tools/call` and its response.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// The next frame on stdout, checked against the schema.
    pub fn recv(&mut self) -> Value {
        let line = self
            .frames
            .recv_timeout(WAIT)
            .expect("a frame on stdout in time");
        let frame: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("stdout carried a non-JSON line: {line}"));
        self.sent.check(&frame);
        frame
    }

    /// Whether another frame arrives within `wait`.
    pub fn recv_within(&mut self, wait: Duration) -> Option<Value> {
        let line = self.frames.recv_timeout(wait).ok()?;
        Some(serde_json::from_str(&line).unwrap())
    }

    /// The bridge's process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits up to `within` for the process to exit by itself (stdin stays open).
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        crate::support::poll(within, || {
            self.child.try_wait().unwrap().ok_or_else(String::new)
        })
        .ok()
    }

    /// Closes stdin and waits for the exit status.
    pub fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.wait_exit(Duration::from_secs(10))
            .expect("the bridge did not exit within 10 s of EOF")
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the bridge's stderr lines into a shared buffer.
pub fn spawn_logged(
    args: &[&str],
    data: &std::path::Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(binary())
        .arg("--dev")
        .arg("--data-dir")
        .arg(data)
        .arg("--skills-dir")
        .arg(fixtures().join("skills"))
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("CYBEROS_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}
