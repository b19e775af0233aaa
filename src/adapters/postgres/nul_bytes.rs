//! What Postgres cannot keep that other stores can: NUL characters (`\u0000` in `jsonb`,
//! `\0` in text columns).

use crate::domain::DomainError;
use crate::domain::ErrorClass;
use crate::domain::task::{TaskFailure, TaskStatus};
use crate::ports::TaskOutcome;

/// `jsonb` cannot hold `\u0000` (SQLSTATE 22P05); other stores can.
pub(super) fn is_unstorable_json(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "22P05")
}

pub(super) fn unstorable_arguments() -> DomainError {
    DomainError::invalid("the arguments contain a \\u0000 character, which tasks cannot keep")
        .with_hint("Remove \\u0000 characters from the arguments and call the tool again.")
}

/// Recorded instead of a result the store cannot keep, so the task does not stay running.
pub(super) fn unstorable_result() -> TaskOutcome {
    TaskOutcome {
        status: TaskStatus::Failed,
        output: None,
        failure: Some(TaskFailure {
            class: ErrorClass::Internal,
            message: "the task's result could not be stored".into(),
            hint: "The result contained a \\u0000 character, which the task store cannot keep."
                .into(),
        }),
    }
}

/// Text columns cannot hold NUL characters.
pub(super) fn storable_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        s.replace('\0', "").into()
    } else {
        s.into()
    }
}
