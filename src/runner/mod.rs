//! The bundled reference CUO runner (`cyberos-mcp-bridge cuo-runner`): a real upstream
//! for the bridge's CUO tools, speaking the same line-delimited JSON-RPC protocol as the
//! Python supervisor. It serves the authored persona catalogue, ranks workflows with
//! BM25, runs workflow steps and SKILL folders, and exits 0 when stdin closes.

mod bm25;
mod catalog;
mod entrypoint;
mod execute;
mod methods;
#[cfg(target_os = "linux")]
mod orphan;
mod protocol;
mod skill;
mod template;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::support::ndjson::{Line, LineReader};
use catalog::Catalog;
use methods::Runner;
use protocol::Failure;
use protocol::{Incoming, Out, RpcError};

/// Exit code when the catalogue is invalid.
pub const EXIT_BAD_CATALOG: i32 = 2;
/// Exit code when stdout cannot be written (the peer is gone mid-reply).
pub const EXIT_WRITE_FAILED: i32 = 1;

/// Lines read ahead of the one being handled. Small: the bridge sends one request at a
/// time, and a full queue only delays noticing EOF.
const READ_AHEAD: usize = 4;

/// Options of the `cuo-runner` subcommand.
#[derive(Debug, Clone, Default)]
pub struct RunnerOptions {
    /// Load persona files from here instead of the bundled catalogue.
    pub catalog: Option<PathBuf>,
    /// Simulated work time per workflow step, in milliseconds.
    pub pace_ms: u64,
}

/// Serves the CUO protocol on stdin/stdout until EOF; returns the exit code: 0 after
/// EOF, 2 for a bad catalogue, 1 when stdout fails.
pub async fn run(options: RunnerOptions) -> i32 {
    #[cfg(target_os = "linux")]
    orphan::die_with_parent();
    let catalog = match &options.catalog {
        Some(dir) => match Catalog::from_dir(dir) {
            Ok(catalog) => catalog,
            Err(e) => {
                eprintln!("cyberos-mcp-bridge cuo-runner: invalid catalogue: {e}");
                return EXIT_BAD_CATALOG;
            }
        },
        None => Catalog::bundled(),
    };
    tracing::info!(
        catalog = options
            .catalog
            .as_deref()
            .map_or_else(|| "bundled".into(), |dir| dir.display().to_string()),
        pace_ms = options.pace_ms,
        "cuo runner ready"
    );
    let runner = Runner::new(catalog, Duration::from_millis(options.pace_ms));
    serve(&runner, tokio::io::stdin(), tokio::io::stdout()).await
}

/// The request loop over any byte streams (stdin/stdout in production).
///
/// A reader task reads ahead so that EOF is noticed while a request runs; requests are
/// still handled strictly one at a time, in arrival order. Every line received before
/// EOF is answered, except that a workflow run that is only pacing is abandoned at EOF,
/// and the runner exits at once.
async fn serve<R, W>(runner: &Runner, input: R, output: W) -> i32
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Unpin,
{
    let eof = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel(READ_AHEAD);
    let reader_eof = eof.clone();
    let reader = tokio::spawn(async move {
        let mut input = LineReader::new(BufReader::new(input), protocol::MAX_LINE);
        loop {
            match input.next_line().await {
                Ok(Line::Eof) => break,
                Ok(line) => {
                    if tx.send(line).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read stdin; treating it as closed");
                    break;
                }
            }
        }
        reader_eof.cancel();
    });
    let mut out = Out::new(output);
    let mut code = 0;
    while let Some(frame) = rx.recv().await {
        match handle_frame(runner, frame, &mut out, &eof).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!("stdin closed during a paced run; abandoning it");
                break;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot write to stdout; exiting");
                code = EXIT_WRITE_FAILED;
                break;
            }
        }
    }
    reader.abort();
    code
}

/// Handles one line; `Ok(false)` means stop now (EOF during pacing).
async fn handle_frame<W: AsyncWrite + Unpin>(
    runner: &Runner,
    frame: Line,
    out: &mut Out<W>,
    eof: &CancellationToken,
) -> std::io::Result<bool> {
    let line = match frame {
        Line::TooLong => {
            let error = RpcError::new(
                protocol::INVALID_REQUEST,
                "invalid request: the line is longer than 8 MiB",
            );
            out.error(None, &error).await?;
            return Ok(true);
        }
        Line::Frame(line) => line,
        Line::Eof => return Ok(true),
    };
    let (id, method, params) = match protocol::parse(&line) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Ignored(what)) => {
            tracing::debug!("ignoring {what}");
            return Ok(true);
        }
        Err((id, error)) => {
            out.error(id.as_ref(), &error).await?;
            return Ok(true);
        }
    };
    // A panic is a runner bug: answer -32603 and keep serving rather than dying.
    let handled = AssertUnwindSafe(runner.handle(&method, &params, out, eof))
        .catch_unwind()
        .await;
    match handled {
        Ok(Ok(result)) => out.result(&id, result).await?,
        Ok(Err(Failure::Rpc(error))) => out.error(Some(&id), &error).await?,
        Ok(Err(Failure::Io(e))) => return Err(e),
        Ok(Err(Failure::Abandoned)) => return Ok(false),
        Err(_) => {
            tracing::error!(method = %protocol::clip(&method, 64), "handler panicked");
            let error = RpcError::internal("internal error in the cuo runner");
            out.error(Some(&id), &error).await?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use tokio::io::AsyncWriteExt;

    /// Feeds `input` to a bundled-catalogue runner and returns every frame it wrote.
    async fn session(input: &[u8], pace_ms: u64) -> (i32, Vec<Value>) {
        let catalog = Catalog::bundled();
        let runner = Runner::new(catalog, Duration::from_millis(pace_ms));
        let (mut client, server_in) = tokio::io::duplex(1024);
        let input = input.to_vec();
        let writer = tokio::spawn(async move {
            let _ = client.write_all(&input).await;
        });
        let mut output = Vec::new();
        let code = serve(&runner, server_in, &mut output).await;
        let _ = writer.await;
        let frames = String::from_utf8_lossy(&output)
            .lines()
            .map(|l| serde_json::from_str(l).expect("every frame is json"))
            .collect();
        (code, frames)
    }

    #[tokio::test]
    async fn every_line_received_before_eof_is_answered_in_order() {
        let ctx = json!({"tenant_id": "t", "actor_id": "a", "traceparent": "p"});
        let mut input = String::new();
        for (id, method) in [(1, "personas.list"), (2, "nope"), (3, "route")] {
            let params = json!({"ctx": ctx, "query": "architect a new system"});
            let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            input.push_str(&format!("{req}\n"));
        }
        input.push_str("\n{oops\n");
        let (code, frames) = session(input.as_bytes(), 0).await;
        assert_eq!(code, 0);
        assert_eq!(frames.len(), 4);
        assert_eq!(frames[0]["id"], 1);
        assert_eq!(frames[1]["error"]["code"], -32601);
        assert_eq!(frames[2]["result"]["workflow"], "architect-new-system");
        assert_eq!(frames[3]["error"]["code"], -32700);
        assert!(frames[3].get("id").is_none());
    }

    #[tokio::test]
    async fn odd_inputs_never_crash_the_loop() {
        let odd: &[&[u8]] = &[
            b"\xff\xfe\n",
            b"null\n",
            b"\"x\"\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"route\"}\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"route\",\"params\":[]}\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"workflow.execute\",\"params\":{\"ctx\":1}}\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"method\":\"x\"}\n",
        ];
        let (code, frames) = session(&odd.concat(), 0).await;
        assert_eq!(code, 0);
        assert_eq!(frames.len(), odd.len());
        assert!(frames.iter().all(|f| f["error"]["code"].is_i64()));
    }

    #[tokio::test]
    async fn random_requests_always_get_exactly_one_well_formed_answer() {
        // Requests assembled from random valid and invalid members with a fixed-seed
        // xorshift, a few of them cut short: no panics, every request answered once.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut pick = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % n as u64).unwrap_or(0)
        };
        let choices: [(&str, Vec<Value>); 9] = [
            (
                "ctx",
                vec![
                    json!({"tenant_id": "t", "actor_id": "a", "traceparent": "p"}),
                    json!(1),
                ],
            ),
            (
                "query",
                vec![
                    json!("architect a system"),
                    json!("{{x}} \u{0} é"),
                    json!(5),
                ],
            ),
            (
                "limit",
                vec![json!(0), json!(3), json!(10), json!("2"), json!(1e300)],
            ),
            (
                "persona",
                vec![json!("chief-technology-officer"), json!(""), json!(null)],
            ),
            (
                "workflow",
                vec![json!("adr-quick-capture"), json!("architect-new-system")],
            ),
            (
                "inputs",
                vec![
                    json!({"title": "t"}),
                    json!({"title": []}),
                    json!([]),
                    json!({}),
                ],
            ),
            (
                "deadline",
                vec![json!("2999-01-01T00:00:00Z"), json!("2000-01-01T00:00:00Z")],
            ),
            (
                "skill",
                vec![json!({"name": "", "path": "/"}), json!({"name": 1})],
            ),
            ("other", vec![json!({"deep": [[[]]]})]),
        ];
        let methods = [
            "personas.list",
            "workflows.list",
            "route",
            "workflow.execute",
            "skill.invoke",
            "x",
        ];
        let (mut input, mut expected) = (String::new(), 0);
        for id in 0..300 {
            let mut params = serde_json::Map::new();
            for (name, values) in &choices {
                if pick(3) > 0 {
                    params.insert((*name).to_owned(), values[pick(values.len())].clone());
                }
            }
            let method = methods[pick(methods.len())];
            let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let mut line = line.to_string();
            if pick(10) == 0 {
                line.truncate(pick(line.len()));
            }
            // A cut line is a parse error unless nothing is left (a blank line).
            expected += usize::from(!line.is_empty());
            input.push_str(&line);
            input.push('\n');
        }
        let (code, frames) = session(input.as_bytes(), 0).await;
        assert_eq!(code, 0);
        let answers: Vec<&Value> = frames
            .iter()
            .filter(|f| f.get("method").is_none())
            .collect();
        assert_eq!(answers.len(), expected);
        assert!(
            answers
                .iter()
                .all(|f| f["result"].is_object() ^ f["error"]["code"].is_i64())
        );
        assert!(answers.iter().any(|f| f["result"].is_object()));
        assert!(!answers.iter().any(|f| f["error"]["code"] == -32603));
    }
}
