//! Handlers of the two `cyberos.skill.*` tools.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use quick_cache::Equivalent;
use quick_cache::sync::Cache;
use serde::Deserialize;

use crate::app::App;
use crate::app::json::{StructuredText, escaped};
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
    Ok(listing(app.skill_entries(), &skills))
}

/// `{"skills":[{"name":…,"description":…,"input_schema":…},…]}` as a tool result, each
/// entry rendered once per skill ([`SkillEntries`]).
fn listing(entries: &SkillEntries, skills: &[Arc<Skill>]) -> Reply {
    let rendered: Vec<Arc<Entry>> = skills.iter().map(|s| entries.of(s)).collect();
    let size = rendered.iter().map(|e| e.json.len() + 1).sum::<usize>() + 16;
    let mut result = StructuredText::with_capacity(size);
    result.push(r#"{"skills":["#, r#"{\"skills\":["#);
    for (i, entry) in rendered.iter().enumerate() {
        if i > 0 {
            result.push_plain(",");
        }
        result.push(&entry.json, &entry.escaped);
    }
    result.push_plain("]}");
    result.into_reply()
}

/// Skills' listing entries, rendered once: the JSON of each (`name`, `description`, and
/// `input_schema` when declared; never its path or entrypoint) and that JSON escaped for
/// the result's text. Rendering and escaping were most of the instructions of a call.
///
/// Keyed by the skill's identity: the index shares one `Arc` per skill until it reads the
/// folders again, and the key holds that `Arc`, so its address cannot be reused while the
/// entry lives, and a skill read again is a new key. Entries of skills no longer listed
/// wait to be evicted, bounded by [`ENTRIES`].
pub struct SkillEntries {
    rendered: Cache<BySkill, Arc<Entry>>,
}

/// Entries kept: far more skills than an index serves; past it, entries are rendered
/// again as they are needed.
const ENTRIES: usize = 4096;

impl Default for SkillEntries {
    fn default() -> SkillEntries {
        SkillEntries {
            rendered: Cache::new(ENTRIES),
        }
    }
}

impl SkillEntries {
    fn of(&self, skill: &Arc<Skill>) -> Arc<Entry> {
        if let Some(entry) = self.rendered.get(&Address::of(skill)) {
            return entry;
        }
        let entry = Arc::new(Entry::render(skill));
        self.rendered
            .insert(BySkill(Arc::clone(skill)), Arc::clone(&entry));
        entry
    }
}

/// One skill's listing entry, as JSON and escaped.
struct Entry {
    json: String,
    escaped: String,
}

impl Entry {
    /// Written here rather than derived: a schema is JSON text the index produced when it
    /// read the skill (`JsonText`), copied in as it is.
    fn render(skill: &Skill) -> Entry {
        let size = skill.name.len()
            + skill.description.len()
            + skill.input_schema.as_ref().map_or(0, |j| j.as_str().len())
            + 64;
        let mut out = Vec::with_capacity(size);
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
        // Only UTF-8 went in: strings, their escapes, and JSON text.
        let json = String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        // Escaping a `&str` cannot fail.
        let escaped = escaped(&json).unwrap_or_default();
        Entry { json, escaped }
    }
}

/// A cache key: the skill, compared and hashed by address.
#[derive(Clone)]
struct BySkill(Arc<Skill>);

impl PartialEq for BySkill {
    fn eq(&self, other: &BySkill) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for BySkill {}

impl Hash for BySkill {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Address::of(&self.0).hash(state);
    }
}

/// A lookup by address, without touching the `Arc`'s count.
#[derive(Hash)]
struct Address(usize);

impl Address {
    fn of(skill: &Arc<Skill>) -> Address {
        Address(Arc::as_ptr(skill).addr())
    }
}

impl Equivalent<BySkill> for Address {
    fn equivalent(&self, key: &BySkill) -> bool {
        self.0 == Arc::as_ptr(&key.0).addr()
    }
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

    /// The result's `structuredContent`, after checking that its text is the same JSON.
    fn structured(reply: &Reply) -> Value {
        let Reply::Text(text) = reply else {
            panic!("a listing is serialized text")
        };
        let result: Value = serde_json::from_str(text).unwrap();
        let shown: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            shown, result["structuredContent"],
            "the text is the same JSON"
        );
        assert_eq!(result["isError"], false);
        result["structuredContent"].clone()
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
