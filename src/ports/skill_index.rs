use std::sync::Arc;

use crate::domain::DomainError;
use crate::domain::skill::Skill;

/// The SKILL folders the bridge serves.
#[async_trait::async_trait]
pub trait SkillIndex: Send + Sync + 'static {
    /// Skills matching every word of `query` (all when `None`), sorted by name, at most
    /// `limit`: shared with the index, not copied, since every `list_skills` call reads
    /// them.
    ///
    /// # Errors
    /// MUST return `UpstreamUnavailable` when the folders cannot be read at all; a broken
    /// skill is skipped, not an error.
    async fn list(&self, query: Option<&str>, limit: usize)
    -> Result<Vec<Arc<Skill>>, DomainError>;

    /// One skill by name, or `None`.
    ///
    /// # Errors
    /// As for [`SkillIndex::list`].
    async fn get(&self, name: &str) -> Result<Option<Skill>, DomainError>;

    /// Whether the folders can be read.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when they cannot.
    async fn check(&self) -> Result<(), DomainError>;
}
