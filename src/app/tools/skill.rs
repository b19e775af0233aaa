//! Handlers of the two `cyberos.skill.*` tools.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::app::json::{json_value, structured};
use crate::domain::DomainError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListSkillsArgs {
    query: Option<String>,
    limit: Option<usize>,
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
