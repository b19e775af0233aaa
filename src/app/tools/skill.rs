//! Handlers of the two `cyberos.skill.*` tools.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::app::App;
use crate::app::json::{raw_json, structured};
use crate::app::rpc::Reply;
use crate::domain::DomainError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListSkillsArgs {
    query: Option<String>,
    limit: Option<usize>,
}

/// One skill of `list_skills`' result.
#[derive(Serialize)]
struct Listed<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_schema: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct Skills<'a> {
    skills: Vec<Listed<'a>>,
}

pub(super) async fn list_skills(app: &App, args: ListSkillsArgs) -> Result<Reply, DomainError> {
    let query = args.query.as_deref().filter(|q| !q.trim().is_empty());
    let skills = app
        .ports()
        .skills
        .list(query, args.limit.unwrap_or(50))
        .await?;
    let skills = skills
        .iter()
        .map(|s| {
            Ok(Listed {
                name: &s.name,
                description: &s.description,
                input_schema: s.input_schema.as_ref().map(raw_json).transpose()?,
            })
        })
        .collect::<Result<Vec<_>, DomainError>>()?;
    structured(&Skills { skills })
}
