//! Where log lines go: stderr, written by a thread of their own. A request formats its
//! line and queues it; the writer thread writes whatever is queued in one `write` when
//! the queue runs dry. Written in place, each line cost a system call under the global
//! stderr lock, which the HTTP workers queued for (bench/http.sh: about a seventh of a
//! `tools/call`'s CPU at the default `info`).
//!
//! No line is dropped: a full queue (128k lines) makes the writers wait. What is queued
//! is written when the process exits through [`flush`]; a process killed outright loses
//! at most the lines of its last moments.

use std::io::BufWriter;
use std::sync::Mutex;

use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};

/// The writer thread's guard: dropping it writes what is queued and stops the thread.
static WRITER: Mutex<Option<WorkerGuard>> = Mutex::new(None);

/// The writer the log layer formats into, its thread started.
pub fn stderr_writer() -> NonBlocking {
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("cyberos-logs")
        .finish(BufWriter::new(std::io::stderr()));
    *WRITER.lock().unwrap_or_else(|e| e.into_inner()) = Some(guard);
    writer
}

/// Writes every queued line (waiting up to a second) and stops the writer thread; later
/// lines are not written. Called on the way out, since `std::process::exit` runs no
/// destructors.
pub fn flush() {
    let guard = WRITER.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(guard);
}
