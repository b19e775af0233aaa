//! The eight tools: their compiled argument schemas (`registry`) and the handlers per area.

pub(super) mod cuo;
pub(super) mod long;
pub(super) mod memory;
pub mod registry;
pub(super) mod skill;
mod skill_entries;
mod workflows;

pub use registry::Registry;
pub use skill_entries::SkillEntries;
pub use workflows::WorkflowCatalog;
