//! The audit log's records.

use crate::domain::{JsonText, Timestamp, TraceId};

/// An entry to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAuditEntry {
    /// Event kind, `^[a-z][a-z0-9_.]*$`.
    pub kind: String,
    /// Optional subject.
    pub subject: Option<String>,
    /// The payload, a JSON object.
    pub body: JsonText,
}

/// What an append returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReceipt {
    /// The new entry's id.
    pub audit_id: String,
    /// When it was recorded.
    pub recorded_at: Timestamp,
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Its id.
    pub audit_id: String,
    /// Event kind.
    pub kind: String,
    /// Who appended it.
    pub actor_id: String,
    /// Optional subject.
    pub subject: Option<String>,
    /// The payload, a JSON object.
    pub body: JsonText,
    /// When it was recorded.
    pub recorded_at: Timestamp,
    /// Trace of the call that appended it.
    pub trace_id: TraceId,
}

/// A page request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this kind.
    pub kind: Option<String>,
    /// Only entries at or after this time.
    pub since: Option<Timestamp>,
    /// Page size, 1..=200.
    pub limit: u32,
    /// Opaque cursor from the previous page.
    pub cursor: Option<String>,
}

/// A page of entries, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    /// The entries.
    pub entries: Vec<AuditEntry>,
    /// Cursor for the next page, if there is one.
    pub next_cursor: Option<String>,
}
