//! Children are started on one thread of their own, not on the runtime's threads.
//!
//! A spawn blocks its thread until the child has exec'd: the fork path (taken because
//! `children::die_with_parent` sets a pre-exec hook) waits on a pipe for the exec's
//! verdict, and on a busy machine the new child may wait milliseconds for a CPU before it
//! gets that far. On the stdio runtime's only thread that stall would be paid by whatever
//! request came next (docs/performance.md, "Task handles").
//!
//! The thread lives as long as the adapter, which lives as long as the process: children
//! get `PR_SET_PDEATHSIG` against the thread that started them, so it must not be a
//! pooled thread that exits when idle.

use std::sync::OnceLock;
use std::sync::mpsc as sync_mpsc;

use tokio::process::{Child, Command};
use tokio::sync::oneshot;

struct Job {
    command: Command,
    reply: oneshot::Sender<std::io::Result<Child>>,
}

/// The spawning thread, started with the first child.
#[derive(Default)]
pub(super) struct Spawner {
    jobs: OnceLock<std::io::Result<sync_mpsc::Sender<Job>>>,
}

impl Spawner {
    /// Starts `command` on the spawning thread, inside the runtime of the caller (the
    /// child's pipes and reaping belong to it).
    pub(super) async fn spawn(&self, command: Command) -> std::io::Result<Child> {
        let jobs = self
            .jobs
            .get_or_init(|| start(tokio::runtime::Handle::current()));
        let jobs = jobs.as_ref().map_err(|e| gone(e.kind()))?;
        let (reply, answer) = oneshot::channel();
        jobs.send(Job { command, reply })
            .map_err(|_| gone(std::io::ErrorKind::BrokenPipe))?;
        answer
            .await
            .map_err(|_| gone(std::io::ErrorKind::BrokenPipe))?
    }
}

fn start(runtime: tokio::runtime::Handle) -> std::io::Result<sync_mpsc::Sender<Job>> {
    let (tx, rx) = sync_mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("cuo-spawner".into())
        .spawn(move || {
            let _runtime = runtime.enter();
            // Ends when the adapter (every sender) is gone; its children go with it.
            while let Ok(Job { mut command, reply }) = rx.recv() {
                let _ = reply.send(command.spawn());
            }
        })?;
    Ok(tx)
}

fn gone(kind: std::io::ErrorKind) -> std::io::Error {
    std::io::Error::new(kind, "the CUO spawning thread is not running")
}
