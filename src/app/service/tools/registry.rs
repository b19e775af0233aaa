//! The compiled tool catalogue: one argument validator per tool, built once, and the
//! `tools/list` result serialized once.

use serde_json::{Value, json};

use crate::domain::text::clip;
use crate::domain::{DomainError, Tool, ToolNaming, ToolSpec, respell};

/// The compiled tool catalogue: one argument validator per tool, built once, and the
/// `tools/list` result.
pub struct Registry {
    validators: Vec<jsonschema::Validator>,
    listing: Value,
    listing_text: std::sync::Arc<str>,
}

impl Registry {
    /// Compiles every schema. Remote `$ref` resolution is compiled out of `jsonschema`
    /// (no default features), so a schema can never make the bridge fetch anything. The
    /// listing names tools, in names and texts alike, as `naming` spells them.
    pub fn build(naming: ToolNaming) -> Registry {
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
        let canonical =
            json!({ "tools": Tool::ALL.iter().map(|t| tool_json(t.spec())).collect::<Vec<_>>() });
        let listing_text: std::sync::Arc<str> = respell(&canonical.to_string(), naming).into();
        let listing = serde_json::from_str(&listing_text).expect("a respelled listing is JSON");
        Registry {
            validators,
            listing,
            listing_text,
        }
    }

    /// The `tools/list` result.
    pub fn listing(&self) -> &Value {
        &self.listing
    }

    /// The `tools/list` result, serialized once.
    pub fn listing_text(&self) -> std::sync::Arc<str> {
        std::sync::Arc::clone(&self.listing_text)
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
        let hint = format!(
            "Fix {} to match the input schema of {} (see tools/list).",
            if pointer.is_empty() {
                "the arguments".to_owned()
            } else {
                format!("the argument at {pointer}")
            },
            tool.name()
        );
        Err(DomainError::invalid_at(message, pointer).with_hint(hint))
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

fn schema_value(text: &str) -> Value {
    serde_json::from_str(text).expect("bundled schemas are valid JSON")
}

fn tool_json(spec: &ToolSpec) -> Value {
    let e = spec.effects;
    let mut tool = json!({
        "name": spec.name.as_str(),
        "title": spec.title,
        "description": spec.description,
        "inputSchema": schema_value(spec.input_schema),
        "annotations": {
            "title": spec.title,
            "readOnlyHint": e.read_only(),
            "destructiveHint": e.destructive,
            "idempotentHint": e.idempotent,
            "openWorldHint": e.open_world,
            // The seed's keys, derived from the same effects value.
            "destructive": e.destructive,
            "write": e.write,
            "external_effect": e.external_effect
        },
        "execution": {"taskSupport": spec.task_support.as_str()},
        "_meta": {"com.cyberos/required_scope": spec.scope.as_str()}
    });
    if let Some(out) = spec.output_schema {
        tool["outputSchema"] = schema_value(out);
    }
    tool
}
