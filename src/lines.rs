//! Newline-delimited framing with a length bound, shared by the stdio transport and the
//! CUO child adapter. An over-long line is skipped to its end without being buffered.
//! Also the one helper that bounds text echoed into messages and logs.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One read from a [`LineReader`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A non-blank line without its terminator (and without a trailing `\r`).
    Frame(Vec<u8>),
    /// A line longer than the bound; its bytes were discarded.
    TooLong,
    /// End of input.
    Eof,
}

/// Reads bounded lines from a buffered reader.
pub struct LineReader<R> {
    inner: R,
    max: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// Lines longer than `max` bytes are reported as [`Line::TooLong`].
    pub fn new(inner: R, max: usize) -> Self {
        LineReader { inner, max }
    }

    /// The next non-blank line. Not cancel-safe: a partly read line is lost if the future
    /// is dropped, so callers only drop it when they stop reading altogether.
    ///
    /// # Errors
    /// Read errors of the underlying reader.
    pub async fn next_line(&mut self) -> std::io::Result<Line> {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                // The last line may lack its terminator; it is read like any other.
                return Ok(match (too_long, trimmed(line)) {
                    (true, _) => Line::TooLong,
                    (false, None) => Line::Eof,
                    (false, Some(line)) => Line::Frame(line),
                });
            }
            let (chunk, found, used) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], true, i + 1),
                None => (buf, false, buf.len()),
            };
            if !too_long {
                if line.len() + chunk.len() > self.max {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            self.inner.consume(used);
            if found {
                if too_long {
                    return Ok(Line::TooLong);
                }
                match trimmed(std::mem::take(&mut line)) {
                    Some(line) => return Ok(Line::Frame(line)),
                    None => continue,
                }
            }
        }
    }
}

/// A line without its trailing `\r`, or `None` when nothing but whitespace is left.
fn trimmed(mut line: Vec<u8>) -> Option<Vec<u8>> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    (!line.iter().all(u8::is_ascii_whitespace)).then_some(line)
}

/// Text from outside (a client, an upstream) made safe to put in a message or a log
/// line: control, format and bidi characters become `\u{…}` escapes (so no ESC, BEL,
/// carriage return or U+202E reaches a terminal or a reader), and the result is at most
/// `max` bytes, cut at a character.
pub fn clip(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max && !s.chars().any(unsafe_to_show) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().min(max));
    for c in s.chars() {
        let piece = if unsafe_to_show(c) {
            format!("\\u{{{:04x}}}", u32::from(c))
        } else {
            c.to_string()
        };
        if out.len() + piece.len() > max {
            break;
        }
        out.push_str(&piece);
    }
    std::borrow::Cow::Owned(out)
}

/// Control characters (Unicode Cc) and the invisible format and bidi characters that can
/// reorder or hide text (the Cf ones that occur in attacks, and the line separators).
fn unsafe_to_show(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00ad}' | '\u{061c}' | '\u{180e}' | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}'
            | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], max: usize) -> Vec<Line> {
        let mut r = LineReader::new(tokio::io::BufReader::with_capacity(4, input), max);
        let mut out = Vec::new();
        loop {
            let line = r.next_line().await.unwrap();
            let end = line == Line::Eof;
            out.push(line);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_split_bounded_and_blank_ones_skipped() {
        let got = read_all(b"ab\r\n\n  \ntoolongline\ncd", 5).await;
        assert_eq!(
            got,
            [
                Line::Frame(b"ab".to_vec()),
                Line::TooLong,
                Line::Frame(b"cd".to_vec()),
                Line::Eof
            ]
        );
    }

    #[test]
    fn truncation_respects_character_boundaries() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("héllo", 2), "h");
    }

    #[tokio::test]
    async fn an_over_long_last_line_is_reported() {
        assert_eq!(read_all(b"abcdefgh", 3).await, [Line::TooLong, Line::Eof]);
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_and_bidi_come_back_escaped() {
        assert_eq!(
            clip("a\u{1b}[31mb\u{7}\r\u{202e}c", 100),
            "a\\u{001b}[31mb\\u{0007}\\u{000d}\\u{202e}c"
        );
        assert_eq!(clip("plain", 3), "pla");
    }

    /// What the reader must return for `lines` joined by `\n`, read with bound `max`.
    fn expected(lines: &[Vec<u8>], max: usize) -> Vec<Line> {
        let mut out = Vec::new();
        for line in lines {
            if line.len() > max {
                out.push(Line::TooLong);
                continue;
            }
            let mut line = line.clone();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                out.push(Line::Frame(line));
            }
        }
        out.push(Line::Eof);
        out
    }

    fn read_all(input: Vec<u8>, max: usize, buffer: usize) -> Vec<Line> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let reader = tokio::io::BufReader::with_capacity(buffer, input.as_slice());
            let mut lines = LineReader::new(reader, max);
            let mut out = Vec::new();
            loop {
                let line = lines.next_line().await.unwrap();
                let end = line == Line::Eof;
                out.push(line);
                if end {
                    return out;
                }
            }
        })
    }

    proptest! {
        /// Every line comes back whole, over-long lines as `TooLong` without losing the
        /// lines after them, however the input is chunked by the buffer.
        #[test]
        fn lines_come_back_whole_or_too_long(
            lines in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b' '), any::<u8>()], 0..40)
                    .prop_map(|l| l.into_iter().filter(|b| *b != b'\n').collect::<Vec<u8>>()),
                0..12,
            ),
            max in 0usize..48,
            buffer in 1usize..16,
        ) {
            let mut input = lines.join(&b'\n');
            // The last line needs no terminator; give one half the time.
            if buffer % 2 == 0 {
                input.push(b'\n');
            }
            // With or without the final newline, the last line ends at EOF.
            prop_assert_eq!(read_all(input, max, buffer), expected(&lines, max));
        }

        /// Clipped text is bounded and shows no control, format or bidi character.
        #[test]
        fn clipped_text_is_bounded_and_inert(s in "\\PC{0,40}|[\\x00-\\x1f\\u{202a}-\\u{202e}a-z]{0,40}", max in 0usize..60) {
            let c = clip(&s, max);
            prop_assert!(c.len() <= max);
            prop_assert!(!c.chars().any(unsafe_to_show));
            if s.len() <= max && !s.chars().any(unsafe_to_show) {
                prop_assert_eq!(&*c, s.as_str());
            }
        }

        #[test]
        fn truncation_keeps_a_char_boundary_prefix(s in "\\PC{0,40}", max in 0usize..50) {
            let t = truncate(&s, max);
            prop_assert!(t.len() <= max);
            prop_assert!(s.starts_with(t));
            prop_assert!(t.len() == s.len() || s.len() > max);
        }
    }
}
