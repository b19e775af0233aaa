//! Skills found in SKILL folders.

use crate::domain::JsonText;

/// A skill folder's declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Unique name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its inputs, when declared.
    pub input_schema: Option<JsonText>,
    /// The skill's folder, where its instructions and entrypoint live.
    pub path: String,
    /// A program in the folder to run with the inputs on stdin, when declared.
    pub entrypoint: Option<String>,
}

/// Splits a `SKILL.md` into the YAML between a leading `---` line and the next `---`
/// line, and the body after it (a leading byte-order mark and CRLF lines are accepted).
pub fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = rest.strip_prefix("---")?;
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

impl Skill {
    /// Whether every word of `query` appears in the name or description (case-insensitive).
    pub fn matches(&self, query: &str) -> bool {
        let hay = format!("{} {}", self.name, self.description).to_lowercase();
        query
            .split_whitespace()
            .all(|w| hay.contains(&w.to_lowercase()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_matches_when_every_word_appears() {
        let s = Skill {
            name: "pdf-summary".into(),
            description: "Summarise a PDF report".into(),
            input_schema: None,
            path: "/s".into(),
            entrypoint: None,
        };
        assert!(s.matches("pdf"));
        assert!(s.matches("SUMMARISE report"));
        assert!(s.matches(""));
        assert!(!s.matches("pdf spreadsheet"));
    }
}
