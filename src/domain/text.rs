//! Text from outside (a client, an upstream) bounded and made inert before it is echoed
//! into a message or a log line.

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
    use proptest::prelude::*;

    #[test]
    fn escapes_and_bidi_come_back_escaped() {
        assert_eq!(
            clip("a\u{1b}[31mb\u{7}\r\u{202e}c", 100),
            "a\\u{001b}[31mb\\u{0007}\\u{000d}\\u{202e}c"
        );
        assert_eq!(clip("plain", 3), "pla");
    }

    #[test]
    fn truncation_respects_character_boundaries() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("héllo", 2), "h");
    }

    proptest! {
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
