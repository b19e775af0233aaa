//! Handlers of the two `cyberos.skill.*` tools.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::app::tools::{json_value, structured};
use crate::domain::{CallCtx, DomainError, Upstream};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListSkillsArgs {
    query: Option<String>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // Read by the task runner (#5).
pub(super) struct InvokeSkillArgs {
    skill: String,
    #[serde(default)]
    inputs: serde_json::Map<String, Value>,
    timeout_s: Option<u32>,
}

pub(super) async fn list_skills(app: &App, args: ListSkillsArgs) -> Result<Value, DomainError> {
    let query = args.query.as_deref().filter(|q| !q.trim().is_empty());
    let skills = app
        .ports()
        .skills
        .list(query, args.limit.unwrap_or(50))
        .await?;
    let skills = skills
        .into_iter()
        .map(|s| {
            let mut v = json!({ "name": s.name, "description": s.description });
            if let Some(schema) = &s.input_schema {
                v["input_schema"] = json_value(schema)?;
            }
            Ok(v)
        })
        .collect::<Result<Vec<_>, DomainError>>()?;
    Ok(structured(json!({ "skills": skills })))
}

pub(super) async fn invoke_skill(
    _app: &App,
    _ctx: &CallCtx,
    _args: InvokeSkillArgs,
) -> Result<Value, DomainError> {
    Err(DomainError::unavailable(Upstream::TaskStore, None)
        .with_hint("Long-running tools need the task runner, which this build of the bridge does not include yet."))
}
