//! Handlers of the two `cyberos.skill.*` tools.

use std::sync::Arc;

use serde::Deserialize;

use crate::app::App;
use crate::app::json::structured_json;
use crate::app::rpc::Reply;
use crate::domain::DomainError;
use crate::domain::skill::Skill;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListSkillsArgs {
    query: Option<String>,
    limit: Option<usize>,
}

pub(super) async fn list_skills(app: &App, args: ListSkillsArgs) -> Result<Reply, DomainError> {
    let query = args.query.as_deref().filter(|q| !q.trim().is_empty());
    let skills = app
        .ports()
        .skills
        .list(query, args.limit.unwrap_or(50))
        .await?;
    structured_json(listing(&skills))
}

/// `{"skills":[{"name":…,"description":…,"input_schema":…},…]}`, `input_schema` only
/// when the skill declares one.
///
/// Written here rather than derived: a schema is JSON text the index produced when it
/// read the skill (`JsonText`), copied in as it is. Through serde it would have to become
/// a `RawValue`, which parses the text again on every call (a third of this tool's cost).
fn listing(skills: &[Arc<Skill>]) -> String {
    let size: usize = skills
        .iter()
        .map(|s| {
            s.name.len()
                + s.description.len()
                + s.input_schema.as_ref().map_or(0, |j| j.as_str().len())
                + 64
        })
        .sum();
    let mut out = Vec::with_capacity(size + 16);
    out.extend_from_slice(br#"{"skills":["#);
    for (i, skill) in skills.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"name":"#);
        string(&mut out, &skill.name);
        out.extend_from_slice(br#","description":"#);
        string(&mut out, &skill.description);
        if let Some(schema) = &skill.input_schema {
            debug_assert!(
                serde_json::from_str::<serde::de::IgnoredAny>(schema.as_str()).is_ok(),
                "an input_schema that is not JSON"
            );
            out.extend_from_slice(br#","input_schema":"#);
            out.extend_from_slice(schema.as_str().as_bytes());
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    // Only UTF-8 went in: strings, their escapes, and JSON text.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `text` as a JSON string.
fn string(out: &mut Vec<u8>, text: &str) {
    // Writing a `&str` to a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::domain::JsonText;

    fn skill(name: &str, description: &str, schema: Option<Value>) -> Arc<Skill> {
        Arc::new(Skill {
            name: name.into(),
            description: description.into(),
            input_schema: schema.map(|v| JsonText::from_serialized(v.to_string())),
            path: "/skills/x".into(),
            entrypoint: Some("run.sh".into()),
        })
    }

    #[test]
    fn the_listing_is_the_json_of_each_skill_without_its_path_or_entrypoint() {
        let skills = [
            skill(
                "a",
                "quotes \" and \\ and \n and é",
                Some(json!({"type": "object", "properties": {"q": {"pattern": "^\\d+$"}}})),
            ),
            skill("b", "", None),
        ];
        let listed: Value = serde_json::from_str(&listing(&skills)).unwrap();
        assert_eq!(
            listed,
            json!({"skills": [
                {"name": "a", "description": "quotes \" and \\ and \n and é",
                 "input_schema": {"type": "object", "properties": {"q": {"pattern": "^\\d+$"}}}},
                {"name": "b", "description": ""}
            ]})
        );
        assert_eq!(listing(&[]), r#"{"skills":[]}"#);
    }
}
