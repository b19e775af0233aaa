//! How both stores keep a client's answer: its JSON text and whether it was an error
//! object. Imported by both, importing neither.

use crate::domain::JsonText;
use crate::domain::session::ClientAnswer;

/// The `answer` and `is_error` columns of `answer`.
pub(crate) fn columns(answer: &ClientAnswer) -> (&str, bool) {
    match answer {
        Ok(result) => (result.as_str(), false),
        Err(error) => (error.as_str(), true),
    }
}

/// The answer of a row, if it was answered.
pub(crate) fn from_columns(answer: Option<String>, is_error: bool) -> Option<ClientAnswer> {
    let text = JsonText::from_serialized(answer?);
    Some(if is_error { Err(text) } else { Ok(text) })
}
