//! The contract's four error classes and the one domain error type that carries them.
//!
//! Messages and hints are user-safe by construction: adapters write them, never copy an
//! upstream's text verbatim, and keep the original error only as a `source` for the log.

use std::fmt;
use std::time::Duration;

/// The longest JSON pointer an input error carries, in bytes.
const MAX_POINTER: usize = 256;

/// The four classes a host can tell apart (CONTRACT §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The caller can fix it: bad arguments, unknown tool or task, bad version.
    InputValidation,
    /// Bad or missing identity, missing scope, or an unconfirmed destructive call.
    AuthzDenied,
    /// A dependency is down, slow, or answered garbage; retrying may help.
    UpstreamUnavailable,
    /// A bug, a caught panic, a task timeout, or a lost lease.
    Internal,
}

impl ErrorClass {
    /// The wire name, e.g. `input_validation`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorClass::InputValidation => "input_validation",
            ErrorClass::AuthzDenied => "authz_denied",
            ErrorClass::UpstreamUnavailable => "upstream_unavailable",
            ErrorClass::Internal => "internal_error",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The upstream a failure came from, for logs and hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Upstream {
    /// The CUO orchestrator subprocess.
    Cuo,
    /// The memory audit service.
    Memory,
    /// The skills folders.
    Skills,
    /// The task store.
    TaskStore,
    /// The identity provider's key set.
    IdentityProvider,
}

impl Upstream {
    /// A short user-facing name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Upstream::Cuo => "the CUO orchestrator",
            Upstream::Memory => "the memory service",
            Upstream::Skills => "the skills index",
            Upstream::TaskStore => "the task store",
            Upstream::IdentityProvider => "the identity provider",
        }
    }
}

/// Boxed source error kept for logging only.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every failure the bridge reports, one variant per class.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// The caller can fix the request.
    #[error("{message}")]
    InputValidation {
        /// User-safe, lowercase, no trailing period.
        message: String,
        /// JSON pointer into the tool arguments, when one field is at fault.
        pointer: Option<String>,
        /// A full sentence telling the caller what to do.
        hint: String,
    },
    /// The caller is not allowed to do this (yet).
    #[error("{message}")]
    AuthzDenied {
        /// User-safe message.
        message: String,
        /// What to do about it.
        hint: String,
        /// Scopes the token lacks, if that is the reason.
        missing_scopes: Vec<String>,
        /// The scopes a step-up should ask for: the granted ones and the missing ones.
        step_up: Vec<String>,
    },
    /// A dependency failed; retrying later may help.
    #[error("{message}")]
    UpstreamUnavailable {
        /// Which dependency.
        upstream: Upstream,
        /// User-safe message.
        message: String,
        /// What to do about it.
        hint: String,
        /// When retrying makes sense again, if the bridge knows (it is at a limit).
        retry_after: Option<Duration>,
        /// The underlying failure, for the log only.
        #[source]
        source: Option<BoxError>,
    },
    /// A bug, a timeout, or a lost lease.
    #[error("{message}")]
    Internal {
        /// User-safe message.
        message: String,
        /// What to do about it.
        hint: String,
        /// The underlying failure, for the log only.
        #[source]
        source: Option<BoxError>,
    },
}

impl DomainError {
    /// An input error with the default hint.
    pub fn invalid(message: impl Into<String>) -> DomainError {
        DomainError::InputValidation {
            message: message.into(),
            pointer: None,
            hint: "Check the arguments against the tool's input schema and try again.".into(),
        }
    }

    /// An input error about one field.
    pub fn invalid_at(message: impl Into<String>, pointer: impl Into<String>) -> DomainError {
        DomainError::invalid(message).with_pointer(pointer)
    }

    /// Denied, with a hint.
    pub fn denied(message: impl Into<String>, hint: impl Into<String>) -> DomainError {
        DomainError::AuthzDenied {
            message: message.into(),
            hint: hint.into(),
            missing_scopes: Vec::new(),
            step_up: Vec::new(),
        }
    }

    /// An upstream failure with a generic message naming the upstream.
    pub fn unavailable(upstream: Upstream, source: impl Into<Option<BoxError>>) -> DomainError {
        DomainError::UpstreamUnavailable {
            upstream,
            message: format!("{} is unavailable", upstream.as_str()),
            hint: "Try again in a moment; if it persists, ask an operator to run `cyberos-mcp-bridge check`."
                .into(),
            retry_after: None,
            source: source.into(),
        }
    }

    /// An internal error with a generic message.
    pub fn internal(
        message: impl Into<String>,
        source: impl Into<Option<BoxError>>,
    ) -> DomainError {
        DomainError::Internal {
            message: message.into(),
            hint: "This is a bug in the bridge; report it with the trace id.".into(),
            source: source.into(),
        }
    }

    /// The answer for a task id that does not parse, does not exist, or belongs to another
    /// tenant: one wording for all three, so a foreign task looks exactly like a missing one.
    pub fn task_not_found() -> DomainError {
        DomainError::invalid("task not found")
            .with_hint("Check the task id; tasks are kept for their ttl, then deleted.")
    }

    /// Marks an upstream failure as "retry after `wait`" (the bridge is at a limit);
    /// other classes are unchanged.
    pub fn with_retry_after(mut self, wait: Duration) -> DomainError {
        if let DomainError::UpstreamUnavailable { retry_after, .. } = &mut self {
            *retry_after = Some(wait);
        }
        self
    }

    /// Replaces the hint.
    pub fn with_hint(mut self, new: impl Into<String>) -> DomainError {
        match &mut self {
            DomainError::InputValidation { hint, .. }
            | DomainError::AuthzDenied { hint, .. }
            | DomainError::UpstreamUnavailable { hint, .. }
            | DomainError::Internal { hint, .. } => *hint = new.into(),
        }
        self
    }

    /// Sets the JSON pointer of an input error; other classes are unchanged. The pointer
    /// names the client's own keys, so it is made inert and bounded like any echoed text
    /// (a key with a control or bidi character shows it as a `\u{…}` escape).
    pub fn with_pointer(mut self, p: impl Into<String>) -> DomainError {
        if let DomainError::InputValidation { pointer, .. } = &mut self {
            let p = p.into();
            *pointer = Some(crate::domain::text::clip(&p, MAX_POINTER).into_owned());
        }
        self
    }

    /// The JSON pointer of an input error, as [`DomainError::with_pointer`] set it.
    pub fn pointer(&self) -> Option<&str> {
        match self {
            DomainError::InputValidation { pointer, .. } => pointer.as_deref(),
            _ => None,
        }
    }

    /// The class of this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            DomainError::InputValidation { .. } => ErrorClass::InputValidation,
            DomainError::AuthzDenied { .. } => ErrorClass::AuthzDenied,
            DomainError::UpstreamUnavailable { .. } => ErrorClass::UpstreamUnavailable,
            DomainError::Internal { .. } => ErrorClass::Internal,
        }
    }

    /// The hint sentence.
    pub fn hint(&self) -> &str {
        match self {
            DomainError::InputValidation { hint, .. }
            | DomainError::AuthzDenied { hint, .. }
            | DomainError::UpstreamUnavailable { hint, .. }
            | DomainError::Internal { hint, .. } => hint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_has_its_contract_name() {
        let cases = [
            (ErrorClass::InputValidation, "input_validation"),
            (ErrorClass::AuthzDenied, "authz_denied"),
            (ErrorClass::UpstreamUnavailable, "upstream_unavailable"),
            (ErrorClass::Internal, "internal_error"),
        ];
        for (class, name) in cases {
            assert_eq!(class.as_str(), name);
        }
    }

    #[test]
    fn upstream_messages_do_not_show_the_source() {
        let err = DomainError::unavailable(
            Upstream::Memory,
            Some("connect to 10.0.0.7:5432 refused".into()),
        );
        assert_eq!(err.to_string(), "the memory service is unavailable");
        assert_eq!(err.class(), ErrorClass::UpstreamUnavailable);
    }

    #[test]
    fn a_pointer_is_inert_and_bounded() {
        let err = DomainError::invalid("bad").with_pointer("/x\u{1b}[2J\u{202e}\n");
        assert_eq!(err.pointer(), Some("/x\\u{001b}[2J\\u{202e}\\u{000a}"));
        let long = DomainError::invalid("bad").with_pointer(format!("/{}", "a".repeat(1000)));
        assert_eq!(long.pointer().unwrap().len(), MAX_POINTER);
    }

    #[test]
    fn a_pointer_only_attaches_to_input_errors() {
        let err = DomainError::invalid("bad").with_pointer("/persona");
        assert!(
            matches!(err, DomainError::InputValidation { pointer: Some(ref p), .. } if p == "/persona")
        );
        let err = DomainError::internal("x", None).with_pointer("/a");
        assert!(matches!(err, DomainError::Internal { .. }));
    }
}
