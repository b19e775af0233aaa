//! Long-running tool calls as MCP tasks: starting them (`launch`), running them on this
//! instance (`runner`, `run`) within its caps (`slots`), keeping their leases and sweeping
//! (`upkeep`), the `tasks/*` methods, and their wire shapes.

mod launch;
pub mod methods;
mod run;
pub mod runner;
mod slots;
mod upkeep;

pub use launch::launch;
pub use run::Work;
pub use runner::{
    DEFAULT_MAX_CUO_CHILDREN, DEFAULT_MAX_TASKS_PER_TENANT, LEASE, SHUTDOWN_GRACE, TaskRunner,
};
