//! Handlers of the two `cyberos.skill.*` tools.

use std::sync::Arc;

use serde::Deserialize;

use super::skill_entries::{Entry, SkillEntries};
use crate::app::App;
use crate::app::service::output::{OutputBuilder, ToolOutput};
use crate::domain::DomainError;
use crate::domain::skill::Skill;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::app::service) struct ListSkillsArgs {
    query: Option<String>,
    limit: Option<usize>,
}

pub(in crate::app::service) async fn list_skills(
    app: &App,
    args: ListSkillsArgs,
) -> Result<ToolOutput, DomainError> {
    let query = args.query.as_deref().filter(|q| !q.trim().is_empty());
    let skills = app
        .ports()
        .skills
        .list(query, args.limit.unwrap_or(50))
        .await?;
    Ok(listing(app.skill_entries(), &skills))
}

/// `{"skills":[{"name":…,"description":…,"input_schema":…},…]}` as a tool result, each
/// entry rendered once per skill ([`SkillEntries`]).
fn listing(entries: &SkillEntries, skills: &[Arc<Skill>]) -> ToolOutput {
    let rendered: Vec<Arc<Entry>> = skills.iter().map(|s| entries.of(s)).collect();
    let size = rendered.iter().map(|e| e.json().len() + 1).sum::<usize>() + 16;
    let mut result = OutputBuilder::with_capacity(size);
    result.push(r#"{"skills":["#, r#"{\"skills\":["#);
    for (i, entry) in rendered.iter().enumerate() {
        if i > 0 {
            result.push_plain(",");
        }
        result.push(entry.json(), entry.escaped());
    }
    result.push_plain("]}");
    result.finish()
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

    /// The output's structured content, after checking that its escaped text is the
    /// same JSON.
    fn structured(output: &ToolOutput) -> Value {
        let json: Value = serde_json::from_str(output.json()).unwrap();
        let text: String = serde_json::from_str(&format!("\"{}\"", output.escaped())).unwrap();
        let shown: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(shown, json, "the text is the same JSON");
        json
    }

    #[test]
    fn the_listing_is_the_json_of_each_skill_without_its_path_or_entrypoint() {
        let entries = SkillEntries::default();
        let skills = [
            skill(
                "a",
                "quotes \" and \\ and \n and é and \u{1}",
                Some(json!({"type": "object", "properties": {"q": {"pattern": "^\\d+$"}}})),
            ),
            skill("b", "", None),
        ];
        let expected = json!({"skills": [
            {"name": "a", "description": "quotes \" and \\ and \n and é and \u{1}",
             "input_schema": {"type": "object", "properties": {"q": {"pattern": "^\\d+$"}}}},
            {"name": "b", "description": ""}
        ]});
        assert_eq!(structured(&listing(&entries, &skills)), expected);
        // Again, from the rendered entries.
        assert_eq!(structured(&listing(&entries, &skills)), expected);
        assert_eq!(structured(&listing(&entries, &[])), json!({"skills": []}));
    }

    #[test]
    fn an_entry_is_rendered_once_per_skill_and_a_skill_read_again_is_rendered_afresh() {
        let entries = SkillEntries::default();
        let first = skill("a", "old", None);
        assert!(Arc::ptr_eq(&entries.of(&first), &entries.of(&first)));
        // The index read the folder again: same name, new description, new `Arc`.
        let again = skill("a", "new", None);
        assert_eq!(
            structured(&listing(&entries, &[again]))["skills"][0]["description"],
            "new"
        );
        assert_eq!(
            structured(&listing(&entries, &[first]))["skills"][0]["description"],
            "old"
        );
    }
}
