//! `workflow.execute`: validate the inputs against the workflow's schema, then run its
//! steps in order, rendering each template, collecting artifacts and sending a progress
//! notification after each step. Also the deadline and input-validation helpers that
//! `skill.invoke` shares.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::AsyncWrite;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::catalog::Catalog;
use super::protocol::{self, ECHO_MAX, Failure, Out, RpcError, clip};
use super::template;

/// Deadlines further out than this are treated as this far out; it keeps `Instant`
/// arithmetic far from overflow whatever year the client sends.
const MAX_WAIT: Duration = Duration::from_secs(30 * 24 * 3600);

/// Media type of every artifact the runner produces.
pub const MARKDOWN: &str = "text/markdown";

/// Runs `workflow.execute`.
///
/// # Errors
/// -32602 for unknown ids or bad inputs, -32001 when the deadline passes before a step,
/// `Abandoned` when stdin closes while pacing, `Io` when progress cannot be written.
pub async fn execute<W: AsyncWrite + Unpin>(
    catalog: &Catalog,
    params: &Map<String, Value>,
    pace: Duration,
    out: &mut Out<W>,
    eof: &CancellationToken,
) -> Result<Value, Failure> {
    let persona_id = protocol::required_str(params, "persona")?;
    let workflow_id = protocol::required_str(params, "workflow")?;
    let persona = catalog.persona(persona_id).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "unknown persona '{}'; call personas.list for valid ids",
            clip(persona_id, ECHO_MAX)
        ))
    })?;
    let workflow = persona
        .workflows
        .iter()
        .find(|w| w.id == workflow_id)
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "unknown workflow '{}'; call workflows.list with this persona for valid ids",
                clip(workflow_id, ECHO_MAX)
            ))
        })?;
    let inputs = protocol::required_object(params, "inputs")?;
    let deadline = deadline(params)?;
    let validator = workflow
        .validator()
        .map_err(|_| RpcError::internal("the workflow's input schema does not compile"))?;
    check_inputs(validator, params.get("inputs").unwrap_or(&Value::Null))?;

    let total = workflow.steps.len();
    let mut artifacts = Vec::new();
    for (i, step) in workflow.steps.iter().enumerate() {
        if !pace.is_zero() {
            // Simulated work: wake early for the deadline, and give up at once when the
            // bridge closes stdin, since nobody is waiting for this run any more.
            let wake = Instant::now()
                .checked_add(pace)
                .map_or(deadline, |t| t.min(deadline));
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {}
                () = eof.cancelled() => return Err(Failure::Abandoned),
            }
        }
        if Instant::now() >= deadline {
            return Err(RpcError::deadline().into());
        }
        let rendered = template::render(&step.template, inputs);
        if let Some(name) = &step.artifact {
            artifacts.push(json!({
                "name": name,
                "media_type": MARKDOWN,
                "content": format!("# {}\n\n{rendered}", step.title),
            }));
        }
        out.progress(i + 1, total, &step.title)
            .await
            .map_err(Failure::Io)?;
    }
    Ok(json!({ "steps_executed": total, "final_artifacts": artifacts }))
}

/// Reads `params.deadline` (RFC 3339) as an `Instant`; a past deadline is `now`.
///
/// # Errors
/// -32602 when it is missing or not RFC 3339.
pub fn deadline(params: &Map<String, Value>) -> Result<Instant, RpcError> {
    let text = protocol::required_str(params, "deadline")?;
    let at = chrono::DateTime::parse_from_rfc3339(text)
        .map_err(|_| RpcError::invalid_params("params.deadline must be an rfc 3339 timestamp"))?;
    let left = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    let left = left.to_std().unwrap_or(Duration::ZERO).min(MAX_WAIT);
    let now = Instant::now();
    Ok(now.checked_add(left).unwrap_or(now))
}

/// Checks `inputs` against a compiled schema; the first violation is reported with its
/// JSON pointer, in the message and as `data.pointer`. The validator's own message is not
/// used: it quotes the offending value, which may be long or sensitive.
///
/// # Errors
/// -32602 on the first violation.
pub fn check_inputs(validator: &jsonschema::Validator, inputs: &Value) -> Result<(), RpcError> {
    let Some(error) = validator.iter_errors(inputs).next() else {
        return Ok(());
    };
    use jsonschema::error::ValidationErrorKind as Kind;
    let path = error.instance_path().as_str().to_owned();
    let (pointer, what) = match error.kind() {
        Kind::Required { property } => (
            format!("{path}/{}", escape(property.as_str().unwrap_or_default())),
            "missing required property".to_owned(),
        ),
        Kind::AdditionalProperties { unexpected } => (
            format!(
                "{path}/{}",
                escape(unexpected.first().map_or("", String::as_str))
            ),
            "property not allowed".to_owned(),
        ),
        Kind::Type { .. } => (path, "wrong type".to_owned()),
        Kind::MinLength { limit } => (path, format!("shorter than {limit} characters")),
        Kind::MaxLength { limit } => (path, format!("longer than {limit} characters")),
        Kind::Pattern { .. } => (path, "does not match the pattern".to_owned()),
        Kind::Enum { .. } => (path, "not one of the allowed values".to_owned()),
        other => (path, format!("fails '{}'", other.keyword())),
    };
    let shown = if pointer.is_empty() { "/" } else { &pointer };
    let mut err = RpcError::invalid_params(format!(
        "inputs do not match the input schema at '{}': {what}",
        clip(shown, ECHO_MAX)
    ));
    err.data = Some(json!({ "pointer": clip(&pointer, 1024) }));
    Err(err)
}

/// Escapes one JSON pointer segment (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validator() -> jsonschema::Validator {
        let schema = json!({
            "type": "object",
            "properties": {
                "context": {"type": "string", "minLength": 1, "maxLength": 5},
                "n": {"type": "integer", "minimum": 1}
            },
            "required": ["context"],
            "additionalProperties": false
        });
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
            .expect("test schema compiles")
    }

    fn violation(inputs: Value) -> (String, Value) {
        match check_inputs(&validator(), &inputs) {
            Ok(()) => ("valid".into(), Value::Null),
            Err(e) => (e.message, e.data.unwrap_or_default()),
        }
    }

    #[test]
    fn valid_inputs_pass() {
        assert_eq!(violation(json!({"context": "abc", "n": 2})).0, "valid");
    }

    #[test]
    fn each_violation_names_its_json_pointer() {
        let cases = [
            (json!({}), "/context", "missing required property"),
            (
                json!({"context": "a", "zz": 1}),
                "/zz",
                "property not allowed",
            ),
            (json!({"context": 5}), "/context", "wrong type"),
            (
                json!({"context": ""}),
                "/context",
                "shorter than 1 characters",
            ),
            (
                json!({"context": "toolong"}),
                "/context",
                "longer than 5 characters",
            ),
            (json!({"context": "a", "n": 0}), "/n", "fails 'minimum'"),
            (json!([]), "/", "wrong type"),
        ];
        for (inputs, pointer, what) in cases {
            let (message, data) = violation(inputs);
            assert_eq!(
                message,
                format!("inputs do not match the input schema at '{pointer}': {what}")
            );
            assert_eq!(data["pointer"], if pointer == "/" { "" } else { pointer });
        }
    }

    #[test]
    fn long_or_odd_property_names_are_clipped_and_escaped() {
        let key = format!("a/b~{}", "x".repeat(500));
        let (message, data) = violation(json!({"context": "a", key.clone(): 1}));
        assert!(message.len() < 150, "{message}");
        assert!(
            data["pointer"]
                .as_str()
                .is_some_and(|p| p.starts_with("/a~1b~0x"))
        );
    }

    #[test]
    fn deadlines_must_be_rfc_3339_and_past_ones_are_due_now() {
        let past = Map::from_iter([("deadline".to_owned(), json!("2000-01-01T00:00:00Z"))]);
        assert!(deadline(&past).is_ok_and(|d| d <= Instant::now()));
        let far = Map::from_iter([("deadline".to_owned(), json!("9999-12-31T23:59:59Z"))]);
        assert!(deadline(&far).is_ok_and(|d| d > Instant::now() + Duration::from_secs(3600)));
        for bad in [json!("tomorrow"), json!(5), json!("")] {
            let params = Map::from_iter([("deadline".to_owned(), bad)]);
            assert_eq!(
                deadline(&params).err().map(|e| e.code),
                Some(protocol::INVALID_PARAMS)
            );
        }
    }
}
