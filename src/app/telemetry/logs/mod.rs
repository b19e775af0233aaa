//! Where a serving bridge's log lines go: stderr, in batches. A request appends its
//! formatted line to a shared buffer; a writer thread writes whatever has gathered every
//! few milliseconds, in one `write`. Written in place, each line would be a system call
//! under the global stderr lock, which the HTTP workers would queue for; handed to a
//! writer thread one by one (tracing-appender's `non_blocking`), each line would wake
//! that thread. Batching wakes it once per batch.
//!
//! stderr that is not read (a host that never drains the pipe) must not stall requests:
//! past [`CAPACITY`] bytes waiting, lines are dropped and counted, and the count is
//! written once stderr moves again. What waits is written by [`flush`] on the way out; a
//! process killed outright loses at most its last [`INTERVAL`] of lines.

mod text;
mod timestamp;

pub use text::{TextFields, TextLine};
pub use timestamp::UtcMicros;

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long a batch gathers before it is written.
pub const INTERVAL: Duration = Duration::from_millis(10);
/// The most bytes that wait to be written (about ten thousand lines).
pub const CAPACITY: usize = 4 * 1024 * 1024;
/// How long [`flush`] waits for the last batch to be written.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    dropped: u64,
    closed: bool,
    done: bool,
}

/// The buffer, shared by the writers and the writer thread.
#[derive(Default)]
struct Batch {
    pending: Mutex<Pending>,
    /// Something to write, or the end.
    ready: Condvar,
    /// The writer thread has written everything and stopped.
    stopped: Condvar,
}

impl Batch {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn append(&self, line: &[u8]) {
        let mut p = self.lock();
        if p.closed {
            return;
        }
        if p.bytes.len() + line.len() > CAPACITY {
            p.dropped += 1;
            return;
        }
        let first = p.bytes.is_empty();
        p.bytes.extend_from_slice(line);
        drop(p);
        // Only the first line of a batch wakes the writer thread.
        if first {
            self.ready.notify_one();
        }
    }

    /// The writer thread: waits for a first line, lets the batch gather, writes it.
    fn run<W: Write>(&self, mut out: W) {
        loop {
            let mut p = self.lock();
            while p.bytes.is_empty() && p.dropped == 0 && !p.closed {
                p = self.ready.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            if !p.closed {
                drop(p);
                std::thread::sleep(INTERVAL);
                p = self.lock();
            }
            let bytes = std::mem::take(&mut p.bytes);
            let dropped = std::mem::take(&mut p.dropped);
            let closed = p.closed;
            drop(p);
            // A write error (stderr closed) loses the batch; there is nowhere else to say so.
            let _ = out.write_all(&bytes);
            if dropped > 0 {
                let _ = writeln!(
                    out,
                    "cyberos-mcp-bridge: {dropped} log lines dropped: stderr was not read fast enough"
                );
            }
            let _ = out.flush();
            if closed && self.lock().bytes.is_empty() {
                break;
            }
        }
        self.lock().done = true;
        self.stopped.notify_all();
    }

    fn close(&self) {
        let mut p = self.lock();
        p.closed = true;
        self.ready.notify_one();
        while !p.done {
            let (next, waited) = self
                .stopped
                .wait_timeout(p, FLUSH_WAIT)
                .unwrap_or_else(|e| e.into_inner());
            p = next;
            if waited.timed_out() {
                break;
            }
        }
    }
}

/// The writer a log layer formats into (one `write_all` per line).
#[derive(Clone)]
pub struct BatchedWriter(Arc<Batch>);

/// One line on its way into the batch.
pub struct Line<'a>(&'a Batch);

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BatchedWriter {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line(&self.0)
    }
}

/// The process's batched writer, for [`flush`].
static STDERR: OnceLock<BatchedWriter> = OnceLock::new();

/// A writer into batches that a thread of their own writes to `out`.
fn batched<W: Write + Send + 'static>(out: W) -> BatchedWriter {
    let batch = Arc::new(Batch::default());
    let thread = Arc::clone(&batch);
    let started = std::thread::Builder::new()
        .name("cyberos-logs".into())
        .spawn(move || thread.run(out));
    if started.is_err() {
        // No thread, no batches: every line is dropped rather than kept forever.
        batch.lock().closed = true;
    }
    BatchedWriter(batch)
}

/// The writer a serving bridge's log layer formats into: stderr, batched.
pub fn stderr_writer() -> BatchedWriter {
    STDERR.get_or_init(|| batched(std::io::stderr())).clone()
}

/// Writes every waiting line (within a second) and stops the writer thread; later lines
/// are not written. Called on the way out, since `std::process::exit` runs no destructors.
pub fn flush() {
    if let Some(writer) = STDERR.get() {
        writer.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output the test reads back, recording each `write_all` batch.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut writes = self.0.lock().unwrap();
            match writes.last_mut() {
                Some(last) if !buf.is_empty() => last.extend_from_slice(buf),
                _ => writes.push(buf.to_vec()),
            }
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            // A flush ends a batch.
            self.0.lock().unwrap().push(Vec::new());
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            let writes = self.0.lock().unwrap();
            String::from_utf8(writes.concat()).unwrap()
        }

        fn batches(&self) -> usize {
            self.0
                .lock()
                .unwrap()
                .iter()
                .filter(|w| !w.is_empty())
                .count()
        }
    }

    #[test]
    fn lines_written_together_leave_in_one_batch_in_order_and_flush_waits_for_them() {
        let sink = Sink::default();
        let writer = batched(sink.clone());
        for i in 0..1000 {
            writeln!(writer.make_writer(), "line {i}").unwrap();
        }
        writer.0.close();
        let expected: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(sink.text(), expected);
        assert!(sink.batches() <= 2, "{} batches", sink.batches());
        // Closed: later lines go nowhere.
        writeln!(writer.make_writer(), "late").unwrap();
        assert!(!sink.text().contains("late"));
    }

    #[test]
    fn a_line_alone_is_written_within_the_interval() {
        let sink = Sink::default();
        let writer = batched(sink.clone());
        writeln!(writer.make_writer(), "alone").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while sink.text().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sink.text(), "alone\n");
        writer.0.close();
    }

    /// An output that blocks until the test opens it, like a pipe nobody reads.
    struct Stuck(Arc<(Mutex<bool>, Condvar)>, Sink);

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (open, cv) = &*self.0;
            let mut o = open.lock().unwrap();
            while !*o {
                o = cv.wait(o).unwrap();
            }
            self.1.write(buf)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            self.1.flush()
        }
    }

    #[test]
    fn an_unread_stderr_drops_lines_past_the_capacity_and_says_how_many() {
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let sink = Sink::default();
        let writer = batched(Stuck(Arc::clone(&gate), sink.clone()));
        // The first line is taken by the writer thread, which then blocks on it.
        writeln!(writer.make_writer(), "first").unwrap();
        std::thread::sleep(INTERVAL * 5);
        let mut line = vec![b'x'; 1023];
        line.push(b'\n');
        let fit = CAPACITY / 1024;
        for _ in 0..fit + 7 {
            writer.make_writer().write_all(&line).unwrap();
        }
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        writer.0.close();
        let text = sink.text();
        assert!(text.starts_with("first\n"));
        assert_eq!(text.matches(&"x".repeat(1023)).count(), fit, "lines kept");
        assert!(
            text.contains("cyberos-mcp-bridge: 7 log lines dropped"),
            "{}",
            &text[text.len() - 200..]
        );
    }
}
