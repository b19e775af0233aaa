//! The text line against tracing-subscriber's own full format (no colours): the same
//! events, in the same spans, must print the same bytes.

use std::io;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::layer::SubscriberExt;

use super::{TextFields, TextLine};

/// A constant timestamp, so two runs compare.
#[derive(Clone)]
struct Fixed;

impl FormatTime for Fixed {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        w.write_str("2026-12-06T00:00:00.000000Z")
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// What `emit` logs through each formatter: (stock, ours).
fn both(emit: impl Fn()) -> (String, String) {
    let stock = Captured::default();
    let subscriber = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_timer(Fixed)
            .with_writer(stock.clone()),
    );
    tracing::subscriber::with_default(subscriber, &emit);
    let ours = Captured::default();
    let subscriber = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .event_format(TextLine::new(Fixed))
            .fmt_fields(TextFields)
            .with_writer(ours.clone()),
    );
    tracing::subscriber::with_default(subscriber, &emit);
    let text = |c: Captured| String::from_utf8(c.0.lock().unwrap().clone()).unwrap();
    (text(stock), text(ours))
}

#[derive(Debug)]
struct Failure {
    source: io::Error,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the upstream failed")
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[derive(Debug)]
#[allow(dead_code)] // read by its Debug
struct Shape {
    name: &'static str,
    sides: u8,
}

fn events() {
    tracing::info!("a plain message");
    tracing::trace!(n = 1u64, "trace");
    tracing::debug!(n = -1i64, "debug");
    tracing::warn!(flag = true, other = false, "warn {}", 42);
    tracing::error!(f = 1.5f64, big = u128::MAX, "error");
    tracing::info!(tool = "cyberos.skill.list_skills", outcome = %"success", duration_ms = 3u64, "tool call");
    tracing::info!(
        quoted = "say \"hi\" \\ there",
        unicode = "é☃",
        controls = "a\nb\tc\u{1b}",
        empty = "",
        "strings"
    );
    tracing::info!(
        "{}",
        "escapes \u{1b}[31m red \u{7}\u{8}\u{c}\u{7f} \u{85} é \n next"
    );
    tracing::info!(shape = ?Shape { name: "tri", sides: 3 }, shown = %Shape { name: "x", sides: 0 }.name, "values");
    let failure = Failure {
        source: io::Error::other("connection refused"),
    };
    tracing::warn!(
        error = &failure as &(dyn std::error::Error + 'static),
        "with an error"
    );
    let lone = io::Error::other("alone");
    tracing::warn!(error = &lone as &(dyn std::error::Error + 'static));
    tracing::info!(r#type = "raw", "raw identifier");
    tracing::info!(only = 1u64);
    tracing::info!(message = "a message field", after = 2u64);
    tracing::info!(target: "custom::target", "another target");
    tracing::info!(message = "bad \u{1b} str", "message twice");

    let outer = tracing::info_span!("tools/call", cyberos.trace_id = %"4bf92f3577b34da6a3ce929d0e0e4736", span_id = %"00f067aa0ba902b7", cyberos.tenant_id = tracing::field::Empty);
    let _o = outer.enter();
    tracing::info!("in one span");
    outer.record(
        "cyberos.tenant_id",
        tracing::field::display("00000000-0000-4000-8000-000000000001"),
    );
    tracing::info!("after a record");
    let bare = tracing::info_span!("bare");
    let _b = bare.enter();
    tracing::info!(x = "y", "in two spans");
    let late = tracing::info_span!("late", v = tracing::field::Empty);
    let _l = late.enter();
    late.record("v", "quoted \"value\"");
    tracing::warn!("in three spans");
}

#[test]
fn every_kind_of_event_prints_as_the_stock_format_prints_it() {
    let (stock, ours) = both(events);
    assert!(stock.lines().count() >= 20, "{stock}");
    for (s, o) in stock.lines().zip(ours.lines()) {
        assert_eq!(o, s);
    }
    assert_eq!(ours, stock);
}

#[test]
fn a_log_record_prints_as_the_stock_format_prints_it() {
    let (stock, ours) = both(|| {
        let record = log::Record::builder()
            .args(format_args!("from the log crate \u{1b}"))
            .level(log::Level::Warn)
            .target("sqlx::query")
            .module_path_static(Some("sqlx::query"))
            .file_static(Some("src/query.rs"))
            .line(Some(7))
            .build();
        tracing_log::format_trace(&record).unwrap();
    });
    assert!(stock.contains("sqlx::query: from the log crate"), "{stock}");
    assert_eq!(ours, stock);
}

proptest! {
    #[test]
    fn any_message_and_value_print_as_the_stock_format_prints_them(
        message in any::<String>(),
        value in any::<String>(),
        n in any::<i64>(),
    ) {
        let (stock, ours) = both(|| {
            let span = tracing::info_span!("s", v = value.as_str());
            let _s = span.enter();
            tracing::info!(v = value.as_str(), n, "{message}");
            tracing::info!(message = value.as_str());
        });
        prop_assert_eq!(ours, stock);
    }
}
