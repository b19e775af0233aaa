//! The hexagon's driven ports: one trait per capability, in domain types only.
//!
//! Ports are `#[async_trait]` traits used as `Arc<dyn Port>`: every call is IO, so one
//! box per call costs nothing measurable, and trait objects keep type parameters out of
//! every handler. `Clock` is a plain sync trait.

mod approvals;
mod client_answers;
mod clock;
mod cuo_runner;
mod memory_client;
mod skill_index;
mod task_store;
mod token_verifier;

use std::sync::Arc;

pub use approvals::Approvals;
pub use client_answers::ClientAnswers;
pub use clock::Clock;
pub use cuo_runner::{CuoRunner, ProgressSink, SkillRun, WorkflowRun};
pub use memory_client::MemoryClient;
pub use skill_index::SkillIndex;
pub use task_store::{
    Finished, NewTask, ProgressEntry, StopSink, SweepReport, TaskOutcome, TaskPage, TaskStore,
};
pub use token_verifier::{ConfirmationLedger, TokenVerifier};

/// Everything the application needs from the outside world.
#[derive(Clone)]
pub struct Ports {
    /// Durable tasks.
    pub tasks: Arc<dyn TaskStore>,
    /// The CUO orchestrator.
    pub cuo: Arc<dyn CuoRunner>,
    /// The audit log.
    pub memory: Arc<dyn MemoryClient>,
    /// SKILL folders.
    pub skills: Arc<dyn SkillIndex>,
    /// Wall-clock time.
    pub clock: Arc<dyn Clock>,
    /// Used confirmation-token ids.
    pub ledger: Arc<dyn ConfirmationLedger>,
    /// Clients' answers to our requests over HTTP, routed to the waiting instance.
    pub answers: Arc<dyn ClientAnswers>,
    /// Approvals kept for users whose host cannot ask them.
    pub approvals: Arc<dyn Approvals>,
}
