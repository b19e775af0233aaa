//! One checklist's findings: a line per rule (what was sent, what was seen, what was
//! expected), the summary, text and JSON.

use serde::Serialize;
use serde_json::{Value, json};

/// Longest excerpt of an upstream's output shown in a line.
const SEEN_MAX: usize = 240;

/// The verdict on one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The upstream kept the rule.
    Pass,
    /// The upstream broke the rule (or did not answer in time).
    Fail,
    /// The rule could not be tested with what was given (the line says why).
    Skip,
}

/// One rule: what was sent, what was seen, and, when it failed, what was expected.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// The rule, as the checklist names it.
    pub name: &'static str,
    /// The verdict.
    pub status: Status,
    /// What the checker sent.
    pub sent: String,
    /// What came back (clipped, inert).
    pub seen: String,
    /// What the rule wants, when it failed or was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
}

impl Check {
    /// A kept rule.
    pub(super) fn pass(
        name: &'static str,
        sent: impl Into<String>,
        seen: impl Into<String>,
    ) -> Check {
        Check {
            name,
            status: Status::Pass,
            sent: sent.into(),
            seen: clip(&seen.into()),
            expected: None,
        }
    }

    /// A broken rule.
    pub(super) fn fail(
        name: &'static str,
        sent: impl Into<String>,
        seen: impl Into<String>,
        expected: impl Into<String>,
    ) -> Check {
        Check {
            name,
            status: Status::Fail,
            sent: sent.into(),
            seen: clip(&seen.into()),
            expected: Some(expected.into()),
        }
    }

    /// A rule that could not be tested.
    pub(super) fn skip(name: &'static str, why: impl Into<String>) -> Check {
        Check {
            name,
            status: Status::Skip,
            sent: "nothing".into(),
            seen: "nothing".into(),
            expected: Some(why.into()),
        }
    }

    /// `pass` when `fault` is `None`, else `fail` with the fault as what was expected.
    pub(super) fn verdict(
        name: &'static str,
        sent: impl Into<String>,
        seen: impl Into<String>,
        fault: Option<String>,
    ) -> Check {
        match fault {
            None => Check::pass(name, sent, seen),
            Some(want) => Check::fail(name, sent, seen, want),
        }
    }
}

/// `n` and `word`, with an `s` unless `n` is 1.
pub(super) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Outside text bounded and made inert for a report line.
pub(super) fn clip(text: &str) -> String {
    let clipped = crate::domain::text::clip(text, SEEN_MAX);
    if clipped.len() < text.len() {
        format!("{clipped}…")
    } else {
        clipped.into_owned()
    }
}

/// What a checklist found.
#[derive(Debug)]
pub struct Report {
    /// What was checked (`check-cuo`, `check-memory`).
    pub subject: &'static str,
    /// One entry per rule, in the checklist's order.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether no rule failed.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    fn failed(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.name)
            .collect()
    }

    /// The summary: counts, and the names of the rules that failed.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{}: {} checks, {} passed, {} failed",
            self.subject,
            self.checks.len(),
            self.count(Status::Pass),
            self.count(Status::Fail)
        );
        let skipped = self.count(Status::Skip);
        if skipped > 0 {
            line.push_str(&format!(", {skipped} skipped"));
        }
        let failed = self.failed();
        if !failed.is_empty() {
            line.push_str(&format!(" ({})", failed.join(", ")));
        }
        line
    }

    /// One line per rule (`PASS`/`FAIL`/`SKIP  name: sent …; saw …; expected …`), then
    /// the summary as the last line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let status = match c.status {
                Status::Pass => "PASS",
                Status::Fail => "FAIL",
                Status::Skip => "SKIP",
            };
            out.push_str(&format!(
                "{status}  {}: sent {}; saw {}",
                c.name, c.sent, c.seen
            ));
            if let Some(want) = &c.expected {
                out.push_str(&format!("; expected {want}"));
            }
            out.push('\n');
        }
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// `{"ok", "checks": [{name, status, sent, seen, expected?}], "summary"}`.
    pub fn json(&self) -> Value {
        json!({"ok": self.ok(), "checks": self.checks, "summary": self.summary()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_has_a_line_per_rule_and_the_summary_last() {
        let report = Report {
            subject: "check-cuo",
            checks: vec![
                Check::pass("a", "x", "y"),
                Check::fail("b", "x", "z\u{1b}[31m", "w"),
                Check::skip("c", "no token"),
            ],
        };
        let text = report.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "PASS  a: sent x; saw y");
        assert_eq!(lines[1], "FAIL  b: sent x; saw z\\u{001b}[31m; expected w");
        assert!(lines[2].starts_with("SKIP  c: "));
        assert_eq!(
            lines[3],
            "check-cuo: 3 checks, 1 passed, 1 failed, 1 skipped (b)"
        );
        assert!(!report.ok());
        assert_eq!(report.json()["checks"][1]["status"], "fail");
    }

    #[test]
    fn long_output_is_clipped() {
        let c = Check::pass("a", "x", "y".repeat(1000));
        assert!(c.seen.len() < SEEN_MAX + 4 && c.seen.ends_with('…'));
    }
}
