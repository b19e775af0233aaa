//! Skills' listing entries (`list_skills`), each rendered once per skill the index hands
//! out: its JSON and that JSON escaped for the result's text.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use quick_cache::Equivalent;
use quick_cache::sync::Cache;

use crate::app::service::output::escaped;
use crate::domain::skill::Skill;

/// Skills' listing entries, rendered once: the JSON of each (`name`, `description`, and
/// `input_schema` when declared; never its path or entrypoint) and that JSON escaped for
/// the result's text, so a call does not render and escape the same skills again.
///
/// Keyed by the skill's identity: the index shares one `Arc` per skill until it reads the
/// folders again, and the key holds that `Arc`, so its address cannot be reused while the
/// entry lives, and a skill read again is a new key. Entries of skills no longer listed
/// wait to be evicted, bounded by `ENTRIES`.
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
    /// The entry of `skill`, rendered now if it is not kept.
    pub fn of(&self, skill: &Arc<Skill>) -> Arc<Entry> {
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
pub struct Entry {
    json: String,
    escaped: String,
}

impl Entry {
    /// The entry's JSON.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The entry's JSON escaped as the inside of a JSON string.
    pub fn escaped(&self) -> &str {
        &self.escaped
    }

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
