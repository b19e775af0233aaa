//! Newline-delimited framing with a length bound, shared by the stdio transport, the CUO
//! child adapter and the bundled runner. An over-long line is skipped to its end without
//! being buffered.

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    #[tokio::test]
    async fn an_over_long_last_line_is_reported() {
        assert_eq!(read_all(b"abcdefgh", 3).await, [Line::TooLong, Line::Eof]);
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

    fn read_all_chunked(input: Vec<u8>, max: usize, buffer: usize) -> Vec<Line> {
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
            prop_assert_eq!(read_all_chunked(input, max, buffer), expected(&lines, max));
        }
    }
}
