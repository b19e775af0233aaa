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
mod tests;
