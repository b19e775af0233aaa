//! This process's stdin and stdout as async streams, and its stop signals.

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// Exit code of a process that ends at once on a second stop signal.
const EXIT_FORCED: i32 = 1;

type Input = Box<dyn AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin and stdout as async streams. Hosts connect us with pipes, which are read and
/// written directly on the reactor; anything else (a terminal, a file) goes through
/// tokio's blocking-thread adapters, which cost a thread hand-off per read or write.
pub(super) fn stdio_streams() -> (Input, Output) {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use tokio::net::unix::pipe;
        let input: Input = match std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(pipe::Receiver::from_owned_fd)
        {
            Ok(Ok(rx)) => Box::new(rx),
            _ => Box::new(tokio::io::stdin()),
        };
        let output: Output = match std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(pipe::Sender::from_owned_fd)
        {
            Ok(Ok(tx)) => Box::new(tx),
            _ => Box::new(tokio::io::stdout()),
        };
        (input, output)
    }
    #[cfg(not(unix))]
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// SIGTERM or Ctrl-C starts the graceful stop; a second one ends the process at once,
/// for an operator who will not wait for the grace and the drain.
pub(super) async fn cancel_on_signal(token: CancellationToken) {
    if !stop_signal().await {
        return;
    }
    tracing::info!("shutting down (a second SIGTERM or Ctrl-C exits at once)");
    token.cancel();
    if stop_signal().await {
        tracing::warn!("second stop signal: exiting without waiting for runs or requests");
        crate::app::telemetry::logs::flush();
        std::process::exit(EXIT_FORCED);
    }
}

/// Waits for SIGTERM or Ctrl-C; `false` when they cannot be listened for.
async fn stop_signal() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return false;
        };
        tokio::select! {
            _ = term.recv() => true,
            r = tokio::signal::ctrl_c() => r.is_ok(),
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await.is_ok()
}
