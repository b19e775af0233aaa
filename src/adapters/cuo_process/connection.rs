//! One CUO child process and the JSON-RPC connection to it: spawning (scrubbed
//! environment, own process group, killed with the bridge), the writer, reader and stderr
//! tasks, requests multiplexed by id, and routing of the child's lines.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::spawner::Spawner;
use crate::support::ndjson::{Line, LineReader};

/// The longest CUO stderr line logged whole.
const STDERR_LINE: usize = 2000;

/// Longest line accepted from a child (CONTRACT §8).
pub const MAX_CHILD_LINE: usize = 8 * 1024 * 1024;

/// How to start a child: program, arguments and the whole environment it gets.
pub(super) struct ChildCommand {
    pub(super) program: String,
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(OsString, OsString)>,
}

/// Why a call to a child did not produce a result.
#[derive(Debug)]
pub(super) enum CallError {
    Spawn(std::io::Error),
    Closed,
    Timeout,
    Rpc { code: i64, message: String },
}

type Reply = Result<Value, (i64, String)>;

/// One running child.
pub(super) struct Conn {
    pub(super) pgid: i32,
    writer: mpsc::Sender<String>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    next_id: AtomicU64,
    pub(super) closed: CancellationToken,
}

impl Conn {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Kills the child's whole process group; pending calls fail.
    pub(super) fn kill(&self) {
        self.closed.cancel();
        kill_group(self.pgid);
    }

    /// Sends one request and waits at most `timeout` for its answer.
    pub(super) async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        let _guard = PendingGuard(self, id);
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        if self.closed.is_cancelled() || self.writer.send(line).await.is_err() {
            return Err(CallError::Closed);
        }
        match tokio::time::timeout(timeout, rx).await {
            Err(_) => Err(CallError::Timeout),
            Ok(Err(_)) => Err(CallError::Closed),
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err((code, message)))) => Err(CallError::Rpc { code, message }),
        }
    }
}

fn kill_group(pgid: i32) {
    use nix::sys::signal::{Signal, killpg};
    // ESRCH (already gone) is fine.
    let _ = killpg(nix::unistd::Pid::from_raw(pgid), Signal::SIGKILL);
}

/// Kills a per-run child when the run ends or its future is dropped (cancellation).
pub(super) struct KillOnDrop(pub(super) Arc<Conn>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}

/// Forgets a pending request when its caller goes away.
struct PendingGuard<'a>(&'a Conn, u64);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}

impl ChildCommand {
    /// Starts a child; `notifications` receives what it sends besides responses.
    pub(super) async fn spawn(
        &self,
        spawner: &Spawner,
        notifications: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Arc<Conn>, CallError> {
        let mut command = Command::new(&self.program);
        // Killed by the kernel if the bridge dies without cleaning up (`kill -9`).
        crate::support::children::die_with_parent(&mut command);
        command
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so a kill reaches everything it started.
            .process_group(0);
        let mut child = spawner.spawn(command).await.map_err(CallError::Spawn)?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or(CallError::Closed)?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => return Err(CallError::Closed),
            };
        let (writer, mut lines_out) = mpsc::channel::<String>(64);
        let conn = Arc::new(Conn {
            pgid,
            writer,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: CancellationToken::new(),
        });
        tracing::debug!(pid = pgid, program = %self.program, "started a CUO child");

        let mut stdin = stdin;
        let closed = conn.closed.clone();
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    line = lines_out.recv() => line,
                    () = closed.cancelled() => None,
                };
                let Some(line) = line else { break };
                if stdin.write_all(line.as_bytes()).await.is_err()
                    || stdin.write_all(b"\n").await.is_err()
                    || stdin.flush().await.is_err()
                {
                    break;
                }
            }
            // Dropping stdin closes it: the protocol's signal to exit.
        });

        let reader_conn = Arc::clone(&conn);
        tokio::spawn(async move {
            let mut lines = LineReader::new(BufReader::new(stdout), MAX_CHILD_LINE);
            let why = loop {
                match lines.next_line().await {
                    Ok(Line::Frame(bytes)) => {
                        if let Err(why) = route_line(&reader_conn, &bytes, notifications.as_ref()) {
                            break why;
                        }
                    }
                    Ok(Line::TooLong) => break "wrote a line over 8 MiB",
                    Ok(Line::Eof) | Err(_) => break "closed its stdout",
                }
            };
            if !reader_conn.closed.is_cancelled() {
                tracing::warn!(
                    pid = reader_conn.pgid,
                    "CUO child {why}; it will be replaced"
                );
            }
            reader_conn.kill();
            reader_conn.lock().clear();
        });

        // The child's stderr goes to the log line by line, drained to EOF whatever it
        // writes: bounded lines (a longer one is noted and skipped), any bytes decoded
        // lossily, escapes and bidi characters shown inert.
        tokio::spawn(async move {
            let mut lines = LineReader::new(BufReader::new(stderr), STDERR_LINE);
            loop {
                match lines.next_line().await {
                    Ok(Line::Frame(bytes)) => {
                        let text = String::from_utf8_lossy(&bytes);
                        tracing::info!(target: "cuo", pid = pgid, "{}", crate::domain::text::clip(&text, STDERR_LINE));
                    }
                    Ok(Line::TooLong) => {
                        tracing::info!(target: "cuo", pid = pgid, "(a stderr line over {STDERR_LINE} bytes, skipped)");
                    }
                    Ok(Line::Eof) | Err(_) => break,
                }
            }
        });

        let closed = conn.closed.clone();
        let alive = Alive::counted();
        tokio::spawn(async move {
            let _alive = alive;
            tokio::select! {
                status = child.wait() => {
                    tracing::debug!(pid = pgid, ?status, "CUO child exited");
                    closed.cancel();
                    // Grandchildren may outlive it; the group still names them.
                    kill_group(pgid);
                }
                () = closed.cancelled() => {
                    kill_group(pgid);
                    let _ = child.wait().await;
                }
            }
        });
        Ok(conn)
    }
}

/// One child counted in the metric `cyberos.cuo.children` from its start until it is
/// reaped (or the task waiting for it is dropped with the runtime).
struct Alive;

impl Alive {
    fn gauge() -> &'static opentelemetry::metrics::UpDownCounter<i64> {
        static GAUGE: std::sync::OnceLock<opentelemetry::metrics::UpDownCounter<i64>> =
            std::sync::OnceLock::new();
        GAUGE.get_or_init(|| {
            opentelemetry::global::meter(env!("CARGO_PKG_NAME"))
                .i64_up_down_counter("cyberos.cuo.children")
                .with_unit("{process}")
                .with_description("CUO child processes alive (the shared one and one per task run)")
                .build()
        })
    }

    fn counted() -> Alive {
        Alive::gauge().add(1, &[]);
        Alive
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        Alive::gauge().add(-1, &[]);
    }
}

/// Routes one line from a child: a response to its caller, a notification to the run's
/// listener. Anything else means the child is broken.
fn route_line(
    conn: &Conn,
    bytes: &[u8],
    notifications: Option<&mpsc::UnboundedSender<Value>>,
) -> Result<(), &'static str> {
    let Ok(Value::Object(mut msg)) = serde_json::from_slice::<Value>(bytes) else {
        return Err("wrote a line that is not a JSON object");
    };
    if let Some(id) = msg.get("id").and_then(Value::as_u64) {
        let reply = match (msg.remove("result"), msg.remove("error")) {
            (Some(result), None) => Ok(result),
            (None, Some(err)) => {
                let code = err.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                let message = err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                Err((code, message))
            }
            _ => return Err("wrote a response with neither result nor error"),
        };
        // An unknown id is a late answer to a call that gave up: drop it.
        if let Some(tx) = conn.lock().remove(&id) {
            let _ = tx.send(reply);
        }
        return Ok(());
    }
    if msg.get("method").is_some_and(Value::is_string) && msg.get("id").is_none() {
        if let Some(tx) = notifications {
            let _ = tx.send(Value::Object(msg));
        }
        return Ok(());
    }
    Err("wrote a message that is neither a response nor a notification")
}
