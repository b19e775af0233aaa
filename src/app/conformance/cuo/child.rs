//! One CUO program under check, started as the bridge starts it (its own process group,
//! the bridge's scrubbed environment, death with the checker), with every line it writes
//! recorded as seen on the wire.
//!
//! Unlike the bridge, the checker does not give up on a child that writes a bad line: it
//! notes the fault for the framing rule and reads on (`frames`).

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use super::frames::{Frame, Frames};
use super::record::{Answer, Garbage, Message, Record, Reply, id_number, reply_of};
use crate::support::ndjson::{Line, LineReader};

/// Longest line the protocol allows.
const MAX_LINE: usize = 8 * 1024 * 1024;
/// How long the rest of a killed child's output may take to drain.
const DRAIN: Duration = Duration::from_secs(1);

/// The program and the environment each child gets.
pub(super) struct Program {
    pub(super) program: String,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(OsString, OsString)>,
}

/// A running child.
pub(super) struct Child {
    process: tokio::process::Child,
    pub(super) pgid: i32,
    stdin: Option<ChildStdin>,
    events: mpsc::UnboundedReceiver<Frame>,
    /// Responses that arrived while another id was awaited, by id.
    early: HashMap<u64, Reply>,
    next_id: u64,
    closed: bool,
    record: Record,
}

impl Child {
    /// Starts `program`: stdin, stdout and stderr piped, leading a process group of its
    /// own, killed by the kernel if the checker dies.
    pub(super) fn start(program: &Program, label: &'static str) -> Result<Child, String> {
        let mut command = tokio::process::Command::new(&program.program);
        crate::support::children::die_with_parent(&mut command);
        command
            .args(&program.args)
            .env_clear()
            .envs(program.env.iter().cloned())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut process = command
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", program.program))?;
        let pgid = process
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or("the program exited at once")?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            process.stdin.take(),
            process.stdout.take(),
            process.stderr.take(),
        ) else {
            return Err("the program's pipes are missing".into());
        };
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(read_stdout(stdout, tx));
        tokio::spawn(async move {
            // Its log: drained so it never blocks, kept at debug level.
            let mut lines = LineReader::new(BufReader::new(stderr), 2000);
            loop {
                match lines.next_line().await {
                    Ok(Line::Frame(bytes)) => {
                        let text = String::from_utf8_lossy(&bytes);
                        tracing::debug!(target: "cuo", pid = pgid, "{}", crate::domain::text::clip(&text, 2000));
                    }
                    Ok(Line::TooLong) => {}
                    Ok(Line::Eof) | Err(_) => break,
                }
            }
        });
        Ok(Child {
            process,
            pgid,
            stdin: Some(stdin),
            events,
            early: HashMap::new(),
            next_id: 1,
            closed: false,
            record: Record {
                label,
                sent: Vec::new(),
                messages: Vec::new(),
                garbage: Vec::new(),
                escaped: Vec::new(),
            },
        })
    }

    /// Sends requests in one write (so they are all in flight at once); their ids.
    pub(super) async fn send(&mut self, requests: &[(&str, Value)], within: Duration) -> Vec<u64> {
        let mut bytes = Vec::new();
        let mut ids = Vec::new();
        for (method, params) in requests {
            let id = self.next_id;
            self.next_id += 1;
            let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            bytes.extend_from_slice(line.to_string().as_bytes());
            bytes.push(b'\n');
            self.record.sent.push((id, (*method).to_owned()));
            ids.push(id);
        }
        if let Some(stdin) = self.stdin.as_mut() {
            let write = async {
                stdin.write_all(&bytes).await?;
                stdin.flush().await
            };
            // A child that reads nothing fills the pipe; the wait for its answer says so.
            let _ = tokio::time::timeout(within, write).await;
        }
        ids
    }

    /// Sends one request and waits at most `within` for its answer.
    pub(super) async fn call(&mut self, method: &str, params: Value, within: Duration) -> Answer {
        let started = Instant::now();
        let ids = self.send(&[(method, params)], within).await;
        self.answer(ids[0], started + within).await
    }

    /// The answer to request `id`, waiting until `until`.
    pub(super) async fn answer(&mut self, id: u64, until: Instant) -> Answer {
        let started = Instant::now();
        let mut notifications = Vec::new();
        if let Some(reply) = self.early.remove(&id) {
            return Answer {
                reply,
                notifications,
            };
        }
        loop {
            let Some(message) = self.next_message(until).await else {
                return Answer {
                    reply: Reply::Silent {
                        waited: until.saturating_duration_since(started),
                        exited: self.closed,
                    },
                    notifications,
                };
            };
            if message.contains_key("method") {
                if !message.contains_key("id") {
                    notifications.push(Value::Object(message));
                }
                continue;
            }
            let Some(got) = message.get("id").and_then(id_number) else {
                continue;
            };
            let reply = reply_of(&message);
            if got == id {
                return Answer {
                    reply,
                    notifications,
                };
            }
            self.early.entry(got).or_insert(reply);
        }
    }

    /// The notifications the child writes within `window` (after a run's response).
    pub(super) async fn linger(&mut self, window: Duration) -> Vec<Value> {
        let until = Instant::now() + window;
        let mut late = Vec::new();
        while let Some(message) = self.next_message(until).await {
            late.push(Value::Object(message));
        }
        late
    }

    /// The next message, recording it (and any garbage before it); `None` at `until` or
    /// when stdout is closed.
    async fn next_message(&mut self, until: Instant) -> Option<Map<String, Value>> {
        loop {
            if self.closed {
                return None;
            }
            let left = until.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.events.recv()).await {
                Err(_) => return None,
                Ok(None) => {
                    self.closed = true;
                    return None;
                }
                Ok(Some(Frame::Garbage(why, excerpt))) => self.record.garbage.push(Garbage {
                    why,
                    excerpt,
                    after: self.last_sent(),
                }),
                Ok(Some(Frame::Message(value, lines))) => {
                    self.record.messages.push(Message {
                        value: value.clone(),
                        lines,
                        after: self.last_sent(),
                    });
                    return Some(value);
                }
            }
        }
    }

    fn last_sent(&self) -> Option<String> {
        self.record.sent.last().map(|(_, m)| m.clone())
    }

    /// Closes the child's stdin and waits at most `within` for it to exit: how long it
    /// took and its status, or `None`.
    pub(super) async fn close_and_wait(
        &mut self,
        within: Duration,
    ) -> Option<(Duration, std::process::ExitStatus)> {
        self.stdin = None;
        let started = Instant::now();
        match tokio::time::timeout(within, self.process.wait()).await {
            Ok(Ok(status)) => Some((started.elapsed(), status)),
            _ => None,
        }
    }

    /// SIGKILLs the child's process group and waits at most `within` for the child to be
    /// gone; how long that took.
    pub(super) async fn kill_group(&mut self, within: Duration) -> Option<Duration> {
        kill_group(self.pgid);
        let started = Instant::now();
        match tokio::time::timeout(within, self.process.wait()).await {
            Ok(Ok(_)) => Some(started.elapsed()),
            _ => None,
        }
    }

    /// Kills the group, ends what escaped it, reads what is left of the child's output
    /// and returns the record.
    pub(super) async fn finish(mut self) -> Record {
        kill_group(self.pgid);
        let _ = tokio::time::timeout(DRAIN, self.process.wait()).await;
        #[cfg(target_os = "linux")]
        {
            // The child is reaped, so its orphans are the checker's children by now.
            let orphans = super::reaper::orphans(self.pgid);
            for o in orphans.iter().filter(|o| o.running && o.pgid != self.pgid) {
                self.record.escaped.push(format!(
                    "{}: process {} ({}) had left process group {} and outlived its kill",
                    self.record.label,
                    o.pid,
                    crate::domain::text::clip(&o.comm, 32),
                    self.pgid
                ));
            }
            super::reaper::end(&orphans).await;
        }
        let until = Instant::now() + DRAIN;
        while self.next_message(until).await.is_some() {}
        // What came after the last awaited answer: counted by the id rules.
        let label = self.record.label;
        std::mem::replace(
            &mut self.record,
            Record {
                label,
                sent: Vec::new(),
                messages: Vec::new(),
                garbage: Vec::new(),
                escaped: Vec::new(),
            },
        )
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        kill_group(self.pgid);
    }
}

/// SIGKILL to a process group; gone already is fine.
pub(super) fn kill_group(pgid: i32) {
    use nix::sys::signal::{Signal, killpg};
    let _ = killpg(nix::unistd::Pid::from_raw(pgid), Signal::SIGKILL);
}

/// Reads stdout into frames until it closes (`frames`).
async fn read_stdout(stdout: tokio::process::ChildStdout, tx: mpsc::UnboundedSender<Frame>) {
    let mut lines = LineReader::new(BufReader::new(stdout), MAX_LINE);
    let mut frames = Frames::default();
    loop {
        let out = match lines.next_line().await {
            Ok(Line::Frame(bytes)) => frames.line(bytes),
            Ok(Line::TooLong) => frames.too_long(),
            Ok(Line::Eof) | Err(_) => {
                if let Some(last) = frames.end() {
                    let _ = tx.send(last);
                }
                return;
            }
        };
        for frame in out {
            if tx.send(frame).is_err() {
                return;
            }
        }
    }
}
