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
    cache: Mutex<Option<(Instant, Scan)>>,
    /// Held by the one call that rescans; see [`FsSkillIndex::skills`].
    rescan: tokio::sync::Mutex<()>,
}

type Scan = Arc<Vec<Arc<Skill>>>;

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
            rescan: tokio::sync::Mutex::new(()),
        }
    }

    /// The last scan, if it is at most `max_age` old.
    fn cached(&self, max_age: Duration) -> Option<Scan> {
        match &*self.cache.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((at, skills)) if at.elapsed() <= max_age => Some(Arc::clone(skills)),
            _ => None,
        }
    }

    /// The skills, rescanned when the last scan is older than [`RESCAN_AFTER`]. One call
    /// rescans at a time: while it does, the others are answered from the scan before,
    /// or, when there is none yet, wait for it. (Each stale call rescanning for itself
    /// made a busy bridge run dozens of scans at once, each on its own blocking thread,
    /// and log each broken skill as many times.)
    async fn skills(&self) -> Result<Scan, DomainError> {
        if let Some(fresh) = self.cached(RESCAN_AFTER) {
            return Ok(fresh);
        }
        let _rescanning = match self.rescan.try_lock() {
            Ok(guard) => guard,
            Err(_) => match self.cached(Duration::MAX) {
                Some(stale) => return Ok(stale),
                None => self.rescan.lock().await,
            },
        };
        // A rescan that ended while this call waited for the lock is fresh enough.
        if let Some(fresh) = self.cached(RESCAN_AFTER) {
            return Ok(fresh);
        }
        let dirs = self.dirs.clone();
        let scanned = tokio::task::spawn_blocking(move || scan_all(&dirs))
            .await
            .map_err(|e| DomainError::internal("skill scan failed", Some(e.into())))??;
        let scanned: Scan = Arc::new(scanned.into_iter().map(Arc::new).collect());
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), Arc::clone(&scanned)));
        Ok(scanned)
    }
}

#[async_trait::async_trait]
impl SkillIndex for FsSkillIndex {
    async fn list(
        &self,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Arc<Skill>>, DomainError> {
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
            .map(|s| Skill::clone(s)))
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

    fn add_skill(dir: &Path, name: &str) {
        let folder = dir.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill.\n---\nDo it.\n"),
        )
        .unwrap();
    }

    async fn names(index: &FsSkillIndex) -> Vec<String> {
        let listed = index.list(None, 50).await.unwrap();
        listed.iter().map(|s| s.name.clone()).collect()
    }

    /// Makes the last scan look older than `RESCAN_AFTER`.
    fn age(index: &FsSkillIndex) {
        let mut cache = index.cache.lock().unwrap();
        let (at, _) = cache.as_mut().unwrap();
        *at = Instant::now().checked_sub(RESCAN_AFTER * 2).unwrap();
    }

    #[tokio::test]
    async fn one_call_rescans_while_the_others_read_the_scan_before() {
        let dir = tempfile::tempdir().unwrap();
        add_skill(dir.path(), "alpha");
        let index = FsSkillIndex::new(vec![dir.path().to_owned()]);
        assert_eq!(names(&index).await, ["alpha"]);

        add_skill(dir.path(), "beta");
        assert_eq!(names(&index).await, ["alpha"], "a fresh scan is reused");
        age(&index);
        let rescanning = index.rescan.try_lock().unwrap();
        let stale = tokio::time::timeout(Duration::from_secs(5), names(&index))
            .await
            .expect("while another call rescans, a stale scan answers at once");
        assert_eq!(stale, ["alpha"]);
        drop(rescanning);
        assert_eq!(
            names(&index).await,
            ["alpha", "beta"],
            "then a call rescans"
        );
    }

    #[tokio::test]
    async fn with_no_scan_yet_a_call_waits_for_the_one_under_way() {
        let dir = tempfile::tempdir().unwrap();
        add_skill(dir.path(), "alpha");
        let index = FsSkillIndex::new(vec![dir.path().to_owned()]);
        let rescanning = index.rescan.try_lock().unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(50), names(&index)).await;
        assert!(waiting.is_err(), "nothing to answer from: it waits");
        drop(rescanning);
        assert_eq!(names(&index).await, ["alpha"]);
    }

    #[test]
    fn front_matter_is_found_between_dashes() {
        let yaml = |t| split_front_matter(t).map(|(y, _)| y);
        assert_eq!(yaml("---\nname: a\n---\nbody"), Some("name: a\n"));
        assert_eq!(yaml("---\r\nname: a\r\n---\r\n"), Some("name: a\r\n"));
        assert_eq!(yaml("name: a\n---\n"), None);
        assert_eq!(yaml("---\nname: a\n"), None);
    }
}
