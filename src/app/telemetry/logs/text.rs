//! The text log line: tracing-subscriber's full format without colours, character for
//! character, but written piece by piece with `write_str`. The stock formatter writes
//! every piece, and every field, through `write!` with styling wrappers (even when the
//! styles are off), and its span fields through the same visitor; a serving bridge
//! writes such a line, in its call span, for every tool call, so that work is on every
//! call's path. What the fast paths here do not cover (events bridged from the `log`
//! crate, error values, strings that need escaping) is handed to tracing-subscriber's
//! own formatter and visitor, so the output is theirs by construction; the tests
//! (`text/tests.rs`) hold the two side by side.

use std::cell::RefCell;
use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultVisitor, Format, Full, Writer};
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format: `<time> <LEVEL> <span>{<fields>}:…: <target>: <message> <fields>`.
pub struct TextLine<T> {
    timer: T,
    /// For the events this format does not write itself.
    full: Format<Full, T>,
}

impl<T: FormatTime + Clone> TextLine<T> {
    pub fn new(timer: T) -> TextLine<T> {
        TextLine {
            full: tracing_subscriber::fmt::format()
                .with_ansi(false)
                .with_timer(timer.clone()),
            timer,
        }
    }
}

impl<S, N, T> FormatEvent<S, N> for TextLine<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        // A `log` record: its target and level are in its fields, which the full format
        // normalizes.
        if meta.target() == "log" && meta.fields().field("log.target").is_some() {
            return self.full.format_event(ctx, w, event);
        }
        if self.timer.format_time(&mut w).is_err() {
            w.write_str("<unknown time>")?;
        }
        w.write_str(match *meta.level() {
            Level::TRACE => " TRACE ",
            Level::DEBUG => " DEBUG ",
            Level::INFO => "  INFO ",
            Level::WARN => "  WARN ",
            Level::ERROR => " ERROR ",
        })?;
        if let Some(scope) = ctx.event_scope() {
            let mut seen = false;
            for span in scope.from_root() {
                w.write_str(span.metadata().name())?;
                seen = true;
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    w.write_char('{')?;
                    w.write_str(fields)?;
                    w.write_char('}')?;
                }
                w.write_char(':')?;
            }
            if seen {
                w.write_char(' ')?;
            }
        }
        w.write_str(meta.target())?;
        w.write_str(": ")?;
        ctx.format_fields(w.by_ref(), event)?;
        w.write_char('\n')
    }
}

/// The fields of events and spans: `message name=value …`, as `DefaultFields` writes
/// them.
#[derive(Debug, Default, Clone, Copy)]
pub struct TextFields;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        // Written into a buffer this thread reuses, then handed over in one piece: a
        // span's fields go into a new `String`, which would otherwise grow (and move) a
        // few times over a call span's three ids.
        thread_local! {
            static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
        }
        SCRATCH.with(|scratch| {
            let Ok(mut buf) = scratch.try_borrow_mut() else {
                // A field's formatting logged something: written in place.
                return record(writer, fields);
            };
            buf.clear();
            let result =
                record(Writer::new(&mut *buf), fields).and_then(|()| writer.write_str(&buf));
            if buf.capacity() > SCRATCH_KEPT {
                *buf = String::new();
            }
            result
        })
    }
}

/// The most a thread's field buffer keeps between uses.
const SCRATCH_KEPT: usize = 16 * 1024;

fn record<R: RecordFields>(w: Writer<'_>, fields: R) -> fmt::Result {
    let mut v = Fields {
        w,
        is_empty: true,
        result: Ok(()),
    };
    fields.record(&mut v);
    v.result
}

struct Fields<'w> {
    w: Writer<'w>,
    is_empty: bool,
    result: fmt::Result,
}

impl Fields<'_> {
    /// The space before every field but the first.
    fn pad(&mut self) -> fmt::Result {
        if self.is_empty {
            self.is_empty = false;
            Ok(())
        } else {
            self.w.write_char(' ')
        }
    }

    /// ` name=`.
    fn name(&mut self, field: &Field) -> fmt::Result {
        self.pad()?;
        let name = field.name();
        self.w.write_str(name.strip_prefix("r#").unwrap_or(name))?;
        self.w.write_char('=')
    }

    /// ` name=text`, for a value written as it is (numbers, booleans).
    fn plain(&mut self, field: &Field, text: &str) {
        if !self.skipped(field) {
            self.result = self.name(field).and_then(|()| self.w.write_str(text));
        }
    }

    /// A field this visitor does not write itself, written by tracing-subscriber's.
    fn stock(&mut self, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        let mut v = DefaultVisitor::new(self.w.by_ref(), self.is_empty);
        record(&mut v);
        self.is_empty = false;
        self.result = v.finish();
    }

    /// Whether a field is written at all: `log.*` fields are the `log` record's metadata,
    /// written as the line's target and level.
    fn skipped(&self, field: &Field) -> bool {
        self.result.is_err() || field.name().starts_with("log.")
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.skipped(field) {
            return;
        }
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else if value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
        {
            // What `{:?}` writes for a string with nothing to escape.
            self.result = self.name(field).and_then(|()| {
                self.w.write_char('"')?;
                self.w.write_str(value)?;
                self.w.write_char('"')
            });
        } else {
            self.stock(|v| v.record_str(field, value));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.plain(field, itoa::Buffer::new().format(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.plain(field, itoa::Buffer::new().format(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.plain(field, if value { "true" } else { "false" });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.result.is_ok() {
            self.stock(|v| v.record_error(field, value));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.skipped(field) {
            return;
        }
        self.result = if field.name() == "message" {
            self.pad()
                .and_then(|()| write!(Sanitized(&mut self.w), "{value:?}"))
        } else {
            self.name(field).and_then(|()| write!(self.w, "{value:?}"))
        };
    }
}

/// The message as tracing-subscriber sanitizes it: the C0 controls a terminal acts on
/// (ESC, BEL, BS, FF), DEL and the C1 controls escaped, so a logged value cannot drive
/// the terminal that shows the log.
struct Sanitized<'a, 'w>(&'a mut Writer<'w>);

impl fmt::Write for Sanitized<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if s.bytes()
            .all(|b| b.is_ascii() && !matches!(b, 0x1b | 0x07 | 0x08 | 0x0c | 0x7f))
        {
            return self.0.write_str(s);
        }
        for ch in s.chars() {
            match ch {
                '\x1b' => self.0.write_str("\\x1b")?,
                '\x07' => self.0.write_str("\\x07")?,
                '\x08' => self.0.write_str("\\x08")?,
                '\x0c' => self.0.write_str("\\x0c")?,
                '\x7f' => self.0.write_str("\\x7f")?,
                '\u{80}'..='\u{9f}' => write!(self.0, "\\u{{{:x}}}", ch as u32)?,
                _ => self.0.write_char(ch)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
