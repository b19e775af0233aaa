//! The bundled reference CUO runner (`cyberos-mcp-bridge cuo-runner`) as a child over its
//! real stdin/stdout, leading a process group of its own as under the bridge.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::WAIT;

/// A running `cuo-runner` child with a line reader on its stdout.
pub struct Runner {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<String>,
    next_id: i64,
}

impl Runner {
    pub fn spawn(args: &[&str]) -> Runner {
        Runner::spawn_with_env(args, &[])
    }

    /// Starts the runner the way the bridge does: leading a process group of its own.
    pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> Runner {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(env!("CARGO_BIN_EXE_cyberos-mcp-bridge"))
            .process_group(0)
            .arg("cuo-runner")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Runner {
            child,
            stdin,
            frames,
            next_id: 1,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to the runner");
        stdin.flush().expect("flush");
    }

    /// The next frame; every stdout line must be one JSON-RPC 2.0 object.
    pub fn recv(&self) -> Value {
        let line = self.frames.recv_timeout(WAIT).expect("a frame in time");
        let frame: Value = serde_json::from_str(&line).expect("stdout carries only JSON");
        assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
        frame
    }

    /// Sends a request; returns the notifications that came first and the response.
    pub fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(format!("{request}\n").as_bytes());
        let mut notifications = Vec::new();
        loop {
            let frame = self.recv();
            if frame.get("id").is_some() {
                assert_eq!(frame["id"], id, "{frame}");
                return (notifications, frame);
            }
            notifications.push(frame);
        }
    }

    /// `call` for a method that must succeed; returns its result.
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let (_, resp) = self.call(method, params);
        assert!(resp.get("error").is_none(), "{resp}");
        resp["result"].clone()
    }

    /// `call` for a method that must fail; returns (code, message).
    pub fn err(&mut self, method: &str, params: Value) -> (i64, String) {
        let (_, resp) = self.call(method, params);
        error_of(&resp)
    }

    /// Every frame still to come, once the runner has exited (its stdout closed).
    pub fn rest(&self) -> Vec<Value> {
        let mut rest = Vec::new();
        while let Ok(line) = self.frames.recv_timeout(WAIT) {
            rest.push(serde_json::from_str(&line).expect("stdout carries only JSON"));
        }
        rest
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        crate::support::wait_for(within, || {
            self.child
                .try_wait()
                .expect("try_wait")
                .ok_or_else(|| "the runner did not exit".to_owned())
        })
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn error_of(resp: &Value) -> (i64, String) {
    let code = resp["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{resp}"));
    let message = resp["error"]["message"].as_str().unwrap_or_default();
    (code, message.to_owned())
}
