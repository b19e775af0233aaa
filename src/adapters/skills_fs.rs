//! `SkillIndex` over SKILL folders on disk: `<dir>/<skill>/SKILL.md` with YAML front
//! matter (`name`, `description`, optional `input_schema` and `entrypoint`).
//!
//! A broken skill is skipped with a warning naming its file. Symlinks are followed only
//! when they stay inside the skills dir. Scans are cached for a few seconds so listing
//! is cheap and new folders still show up without a restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::domain::skill::{Skill, split_front_matter};
use crate::domain::{DomainError, JsonText, Upstream};
use crate::ports::SkillIndex;

const RESCAN_AFTER: Duration = Duration::from_secs(5);
const MAX_SKILL_FILE: u64 = 1024 * 1024;

/// Skills from one or more directories.
pub struct FsSkillIndex {
    dirs: Vec<PathBuf>,
    cache: Mutex<Option<(Instant, Arc<Vec<Skill>>)>>,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: String,
    description: String,
    #[serde(default)]
    input_schema: Option<serde_json::Value>,
    #[serde(default)]
    entrypoint: Option<String>,
}

impl FsSkillIndex {
    /// An index over `dirs`; nothing is read until the first call.
    pub fn new(dirs: Vec<PathBuf>) -> FsSkillIndex {
        FsSkillIndex {
            dirs,
            cache: Mutex::new(None),
        }
    }

    async fn skills(&self) -> Result<Arc<Vec<Skill>>, DomainError> {
        if let Some((at, skills)) = &*self.cache.lock().unwrap_or_else(|e| e.into_inner())
            && at.elapsed() < RESCAN_AFTER
        {
            return Ok(Arc::clone(skills));
        }
        let dirs = self.dirs.clone();
        let scanned = tokio::task::spawn_blocking(move || scan_all(&dirs))
            .await
            .map_err(|e| DomainError::internal("skill scan failed", Some(e.into())))??;
        let scanned = Arc::new(scanned);
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), Arc::clone(&scanned)));
        Ok(scanned)
    }
}

#[async_trait::async_trait]
impl SkillIndex for FsSkillIndex {
    async fn list(&self, query: Option<&str>, limit: usize) -> Result<Vec<Skill>, DomainError> {
        let skills = self.skills().await?;
        Ok(skills
            .iter()
            .filter(|s| query.is_none_or(|q| s.matches(q)))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn get(&self, name: &str) -> Result<Option<Skill>, DomainError> {
        Ok(self
            .skills()
            .await?
            .iter()
            .find(|s| s.name == name)
            .cloned())
    }

    async fn check(&self) -> Result<(), DomainError> {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.skills().await.map(|_| ())
    }
}

fn scan_all(dirs: &[PathBuf]) -> Result<Vec<Skill>, DomainError> {
    let mut skills: Vec<Skill> = Vec::new();
    for dir in dirs {
        let root = dir
            .canonicalize()
            .map_err(|e| DomainError::unavailable(Upstream::Skills, Some(e.into())))?;
        let entries = std::fs::read_dir(&root)
            .map_err(|e| DomainError::unavailable(Upstream::Skills, Some(e.into())))?;
        let mut found: Vec<Skill> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| load_skill(&root, &entry.path()))
            .collect();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        for skill in found {
            if skills.iter().any(|s| s.name == skill.name) {
                tracing::warn!(skill = %skill.name, path = %skill.path, "skipping skill: the name is already taken");
            } else {
                skills.push(skill);
            }
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

/// Loads `<folder>/SKILL.md`, or `None` (with a warning when the file exists but is bad).
fn load_skill(root: &Path, folder: &Path) -> Option<Skill> {
    let file = folder.join("SKILL.md");
    // Resolve symlinks (of the folder or the file) and refuse anything outside the root.
    let real = match file.canonicalize() {
        Ok(real) => real,
        Err(_) => return None,
    };
    if !real.starts_with(root) {
        tracing::warn!(path = %file.display(), "skipping skill: it links outside the skills dir");
        return None;
    }
    let skip = |why: &str| {
        tracing::warn!(path = %file.display(), "skipping skill: {why}");
        None
    };
    match std::fs::metadata(&real) {
        Ok(m) if m.is_file() && m.len() <= MAX_SKILL_FILE => {}
        Ok(m) if m.is_file() => return skip("SKILL.md is larger than 1 MiB"),
        _ => return None,
    }
    let text = match std::fs::read_to_string(&real) {
        Ok(t) => t,
        Err(_) => return skip("SKILL.md is not readable UTF-8"),
    };
    let Some((yaml, _)) = split_front_matter(&text) else {
        return skip("SKILL.md has no YAML front matter between --- lines");
    };
    let fm: FrontMatter = match serde_norway::from_str(yaml) {
        Ok(fm) => fm,
        Err(e) => return skip(&format!("bad front matter: {e}")),
    };
    if fm.name.is_empty()
        || fm.name.len() > 128
        || fm.name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return skip("name must be 1 to 128 characters without spaces");
    }
    let input_schema = match fm.input_schema {
        None => None,
        Some(v @ serde_json::Value::Object(_)) => Some(JsonText::from_serialized(v.to_string())),
        Some(_) => return skip("input_schema must be a mapping"),
    };
    let skill_dir = real.parent().unwrap_or(root);
    if let Some(entry) = &fm.entrypoint {
        match skill_dir.join(entry).canonicalize() {
            Ok(p) if p.starts_with(skill_dir) && p.is_file() => {}
            _ => return skip("entrypoint must name a file inside the skill's folder"),
        }
    }
    Some(Skill {
        name: fm.name,
        description: fm.description.trim().to_owned(),
        input_schema,
        path: skill_dir.display().to_string(),
        entrypoint: fm.entrypoint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_found_between_dashes() {
        let yaml = |t| split_front_matter(t).map(|(y, _)| y);
        assert_eq!(yaml("---\nname: a\n---\nbody"), Some("name: a\n"));
        assert_eq!(yaml("---\r\nname: a\r\n---\r\n"), Some("name: a\r\n"));
        assert_eq!(yaml("name: a\n---\n"), None);
        assert_eq!(yaml("---\nname: a\n"), None);
    }
}
