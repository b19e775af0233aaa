//! The eight tools: the compiled registry, the `tools/call` pipeline, the confirmation
//! gate, and the handlers per area.

mod call;
pub mod confirmation;
mod cuo;
mod long;
mod memory;
pub mod registry;
mod skill;
mod skill_entries;
mod workflows;

pub use skill_entries::SkillEntries;
pub use workflows::WorkflowCatalog;

pub use call::{call, tool_failure};
pub use registry::Registry;
