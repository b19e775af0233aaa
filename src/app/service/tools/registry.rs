//! The tools' input schemas, each compiled once into an argument validator.

use serde_json::Value;

use crate::domain::text::clip;
use crate::domain::{DomainError, Tool};

/// One compiled argument validator per tool.
pub struct Registry {
    validators: Vec<jsonschema::Validator>,
}

impl Registry {
    /// Compiles every schema. Remote `$ref` resolution is compiled out of `jsonschema`
    /// (no default features), so a schema can never make the bridge fetch anything.
    pub fn build() -> Registry {
        let validators = Tool::ALL
            .iter()
            .map(|tool| {
                let schema = schema_value(tool.spec().input_schema);
                jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .should_validate_formats(true)
                    .build(&schema)
                    .expect("every bundled input schema compiles")
            })
            .collect();
        Registry { validators }
    }

    /// Checks arguments against the tool's schema; the first violation is reported with
    /// the JSON pointer of the field at fault.
    pub fn validate(&self, tool: Tool, args: &Value) -> Result<(), DomainError> {
        let index = Tool::ALL
            .iter()
            .position(|t| *t == tool)
            .expect("every tool is in Tool::ALL");
        let Some(error) = self.validators[index].iter_errors(args).next() else {
            return Ok(());
        };
        let (message, pointer) = violation(&error, "");
        let err = DomainError::invalid_at(message, pointer);
        let hint = format!(
            "Fix {} to match the input schema of {} (see tools/list).",
            match err.pointer() {
                Some(p) if !p.is_empty() => format!("the argument at {p}"),
                _ => "the arguments".to_owned(),
            },
            tool.name()
        );
        Err(err.with_hint(hint))
    }
}

/// A user-safe message for `error` and the JSON pointer of the value at fault, under
/// `prefix` (the pointer of the validated value within the arguments). Values are never
/// quoted whole: only names, clipped, and the validator's text, clipped.
pub(crate) fn violation(error: &jsonschema::ValidationError<'_>, prefix: &str) -> (String, String) {
    let path = format!("{prefix}{}", error.instance_path().as_str());
    match error.kind() {
        jsonschema::error::ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            (
                format!("missing required argument '{}'", clip(name, 64)),
                format!("{path}/{}", escape(name)),
            )
        }
        jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
            let name = unexpected.first().map(String::as_str).unwrap_or_default();
            (
                format!("unknown argument '{}'", clip(name, 64)),
                format!("{path}/{}", escape(name)),
            )
        }
        _ => {
            let detail = error.to_string();
            let at = if path.is_empty() {
                "the arguments"
            } else {
                path.as_str()
            };
            (
                format!("invalid value at {}: {}", clip(at, 128), clip(&detail, 200)),
                path.clone(),
            )
        }
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// A bundled schema as a value.
pub(crate) fn schema_value(text: &str) -> Value {
    serde_json::from_str(text).expect("bundled schemas are valid JSON")
}
