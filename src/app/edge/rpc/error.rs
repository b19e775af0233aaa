//! The JSON-RPC error value and the contract's envelope (CONTRACT §7).
//!
//! An [`RpcError`] stays typed until it is serialised: its class, missing scopes and
//! "retry later" delay are fields, so the transports decide statuses and headers from
//! them, never from text. [`RpcError::new`] is the one constructor of the envelope.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::domain::{DomainError, ErrorClass, TraceId};

/// JSON-RPC parse error.
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC invalid request.
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC method not found.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC invalid params.
pub const INVALID_PARAMS: i32 = -32602;

/// The JSON-RPC code of each class (CONTRACT §7).
pub const fn class_code(class: ErrorClass) -> i32 {
    match class {
        ErrorClass::InputValidation => INVALID_PARAMS,
        ErrorClass::AuthzDenied => -32000,
        ErrorClass::UpstreamUnavailable => -32050,
        ErrorClass::Internal => -32603,
    }
}

/// A JSON-RPC error object, typed until serialisation.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// Error code.
    pub code: i32,
    /// The contract class (`data.class`).
    pub class: ErrorClass,
    /// One user-safe sentence.
    pub message: String,
    /// What to do about it (`data.hint`).
    pub hint: String,
    /// The request's trace (`data.trace_id`).
    pub trace: TraceId,
    /// Retry after this long (HTTP: 429 and `Retry-After`).
    pub retry_after: Option<Duration>,
    /// What few errors carry, boxed to keep the common `Result` small.
    details: Option<Box<Details>>,
}

#[derive(Debug, Clone, Default)]
struct Details {
    /// The argument at fault (`data.pointer`).
    pointer: Option<String>,
    /// Scopes the token lacks (`data.missing_scopes`).
    missing_scopes: Vec<String>,
    /// The scopes a step-up challenge asks for: granted and missing.
    step_up: Vec<String>,
    /// Further `data` members (`supported`, `requested`, `_meta`).
    extra: Vec<(&'static str, Value)>,
}

impl RpcError {
    /// The envelope of `class` with `code`.
    pub fn new(
        code: i32,
        class: ErrorClass,
        message: impl Into<String>,
        hint: impl Into<String>,
        trace: TraceId,
    ) -> RpcError {
        RpcError {
            code,
            class,
            message: message.into(),
            hint: hint.into(),
            trace,
            retry_after: None,
            details: None,
        }
    }

    /// A protocol-level error (bad frame, unknown method, bad params): class
    /// `input_validation`, since the client can fix it.
    pub fn protocol(
        code: i32,
        message: impl Into<String>,
        hint: impl Into<String>,
        trace: TraceId,
    ) -> RpcError {
        RpcError::new(code, ErrorClass::InputValidation, message, hint, trace)
    }

    /// A failure the bridge itself made (overload, timeout, shutdown) with its class's code.
    pub fn of_class(
        class: ErrorClass,
        message: impl Into<String>,
        hint: impl Into<String>,
        trace: TraceId,
    ) -> RpcError {
        RpcError::new(class_code(class), class, message, hint, trace)
    }

    /// The answer to a request whose handler panicked; the bridge keeps serving.
    pub fn panicked(trace: TraceId) -> RpcError {
        RpcError::of_class(
            ErrorClass::Internal,
            "internal error",
            "This is a bug in the bridge; retry, and report it with the trace_id if it persists.",
            trace,
        )
    }

    /// The envelope of a domain error. The match has no wildcard arm, so a new variant
    /// fails to compile until it is mapped here.
    pub fn from_domain(err: &DomainError, trace: TraceId) -> RpcError {
        let mut rpc = RpcError::of_class(err.class(), err.to_string(), err.hint(), trace);
        match err {
            DomainError::InputValidation { pointer, .. } => {
                if let Some(p) = pointer {
                    rpc.details_mut().pointer = Some(p.clone());
                }
            }
            DomainError::AuthzDenied {
                missing_scopes,
                step_up,
                ..
            } => {
                if !missing_scopes.is_empty() {
                    let details = rpc.details_mut();
                    details.missing_scopes = missing_scopes.clone();
                    details.step_up = step_up.clone();
                }
            }
            DomainError::UpstreamUnavailable { retry_after, .. } => rpc.retry_after = *retry_after,
            DomainError::Internal { .. } => {}
        }
        rpc
    }

    /// [`RpcError::from_domain`], logging the error once with its source chain (which
    /// never reaches the client).
    pub fn logged(err: &DomainError, trace: TraceId) -> RpcError {
        let source = std::error::Error::source(err)
            .map(|s| s.to_string())
            .unwrap_or_default();
        match err.class() {
            ErrorClass::InputValidation | ErrorClass::AuthzDenied => {
                tracing::info!(class = %err.class(), trace_id = %trace, "{err}");
            }
            ErrorClass::UpstreamUnavailable => {
                tracing::warn!(class = %err.class(), trace_id = %trace, source, "{err}")
            }
            ErrorClass::Internal => {
                tracing::error!(class = %err.class(), trace_id = %trace, source, "{err}")
            }
        }
        RpcError::from_domain(err, trace)
    }

    /// Adds a member to `data`.
    pub fn with_data(mut self, key: &'static str, value: Value) -> RpcError {
        self.details_mut().extra.push((key, value));
        self
    }

    /// Scopes the token lacks, when that is why the request failed.
    pub fn missing_scopes(&self) -> &[String] {
        self.details
            .as_ref()
            .map_or(&[], |d| d.missing_scopes.as_slice())
    }

    /// When the token lacks scopes, the scopes a step-up asks for (HTTP: 403 with a
    /// challenge): those granted and those missing.
    pub fn step_up(&self) -> &[String] {
        self.details
            .as_ref()
            .filter(|d| !d.missing_scopes.is_empty())
            .map_or(&[], |d| {
                if d.step_up.is_empty() {
                    d.missing_scopes.as_slice()
                } else {
                    d.step_up.as_slice()
                }
            })
    }

    fn details_mut(&mut self) -> &mut Details {
        self.details.get_or_insert_with(Box::default)
    }

    /// Marks the error as "retry after `wait`".
    pub fn with_retry_after(mut self, wait: Duration) -> RpcError {
        self.retry_after = Some(wait);
        self
    }

    /// The envelope: `message` (the bare sentence), `class`, `trace_id`, `hint`, and what
    /// else applies.
    pub fn data(&self) -> Map<String, Value> {
        let mut data = Map::new();
        data.insert("message".into(), self.message.clone().into());
        data.insert("class".into(), self.class.as_str().into());
        data.insert("trace_id".into(), self.trace.to_string().into());
        data.insert("hint".into(), self.hint.clone().into());
        let Some(details) = &self.details else {
            return data;
        };
        if let Some(p) = &details.pointer {
            data.insert("pointer".into(), p.clone().into());
        }
        if !details.missing_scopes.is_empty() {
            data.insert("missing_scopes".into(), json!(details.missing_scopes));
        }
        for (key, value) in &details.extra {
            data.insert((*key).into(), value.clone());
        }
        data
    }

    /// Names tools in the message and hint as `naming` spells them.
    pub fn respell(&mut self, naming: crate::domain::ToolNaming) {
        use crate::domain::respell;
        if let std::borrow::Cow::Owned(m) = respell(&self.message, naming) {
            self.message = m;
        }
        if let std::borrow::Cow::Owned(h) = respell(&self.hint, naming) {
            self.hint = h;
        }
    }

    /// The text a host shows its model or user, which is often all it shows (Claude Code
    /// drops `data`): what went wrong, what to do, and the class and trace id to report.
    pub fn text(&self) -> String {
        let mut text = self.message.clone();
        if !self.hint.is_empty() {
            text.push_str(" — ");
            text.push_str(&self.hint);
        }
        text.push_str(&format!(" [{}, trace {}]", self.class.as_str(), self.trace));
        text
    }

    /// The error object: the self-sufficient text as `message`, the parts in `data`.
    pub fn to_value(&self) -> Value {
        json!({ "code": self.code, "message": self.text(), "data": self.data() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_has_its_contract_code() {
        let cases = [
            (ErrorClass::InputValidation, -32602),
            (ErrorClass::AuthzDenied, -32000),
            (ErrorClass::UpstreamUnavailable, -32050),
            (ErrorClass::Internal, -32603),
        ];
        for (class, code) in cases {
            assert_eq!(class_code(class), code);
        }
    }

    #[test]
    fn the_envelope_carries_class_trace_hint_and_extras() {
        let trace = TraceId::from_bytes([2; 16]);
        let e = RpcError::from_domain(&DomainError::invalid_at("bad persona", "/persona"), trace);
        assert_eq!(e.code, -32602);
        let data = e.data();
        assert_eq!(data["class"], "input_validation");
        assert_eq!(data["pointer"], "/persona");
        assert_eq!(data["trace_id"], "02".repeat(16));
        let denied = DomainError::AuthzDenied {
            message: "m".into(),
            hint: "h".into(),
            missing_scopes: vec!["s".into()],
            step_up: vec!["r".into(), "s".into()],
        };
        let e = RpcError::from_domain(&denied, trace);
        assert_eq!(e.code, -32000);
        assert_eq!(e.missing_scopes(), ["s"]);
        assert_eq!(e.data()["missing_scopes"], json!(["s"]));
        let e = e.with_data("supported", json!(["x"]));
        assert_eq!(e.to_value()["data"]["supported"], json!(["x"]));
    }

    #[test]
    fn the_message_says_what_to_do_and_what_to_report() {
        let trace = TraceId::from_bytes([2; 16]);
        let e = RpcError::from_domain(
            &DomainError::invalid_at("unknown argument 'bogus'", "/bogus").with_hint("Fix it."),
            trace,
        );
        let v = e.to_value();
        assert_eq!(
            v["message"],
            format!(
                "unknown argument 'bogus' — Fix it. [input_validation, trace {}]",
                "02".repeat(16)
            )
        );
        assert_eq!(v["data"]["message"], "unknown argument 'bogus'");
        assert_eq!(v["data"]["hint"], "Fix it.");
    }

    #[test]
    fn a_retry_marker_travels_typed_and_stays_out_of_the_envelope() {
        let busy = DomainError::unavailable(crate::domain::Upstream::TaskStore, None)
            .with_retry_after(Duration::from_secs(5));
        let e = RpcError::from_domain(&busy, TraceId::from_bytes([3; 16]));
        assert_eq!(e.retry_after, Some(Duration::from_secs(5)));
        assert_eq!(
            e.data().len(),
            4,
            "message, class, trace_id, hint only: {:?}",
            e.data()
        );
    }
}
