//! The application value every handler borrows: ports, settings, identity, the compiled
//! tool registry and this instance's task runner.

use std::sync::Arc;

use crate::app::service::caller::Caller;
use crate::app::service::identity::Identity;
use crate::app::service::settings::Settings;
use crate::app::service::tasks::runner::TaskRunner;
use crate::app::service::tools::registry::Registry;
use crate::domain::{DomainError, Principal};
use crate::ports::Ports;

/// The application: ports, settings, identity and the compiled tool registry. Cloning is
/// one reference-count bump; handlers borrow it.
#[derive(Clone)]
pub struct App(Arc<Inner>);

struct Inner {
    ports: Ports,
    settings: Settings,
    identity: Identity,
    registry: Registry,
    runner: Arc<TaskRunner>,
    workflows: crate::app::service::tools::WorkflowCatalog,
    skill_entries: crate::app::service::tools::SkillEntries,
    /// Where the approval page is served (`<origin>/approve/`), once a listener is bound.
    approval_page: std::sync::OnceLock<String>,
}

impl App {
    /// Builds the application; compiles every tool schema once.
    pub fn new(ports: Ports, settings: Settings, identity: Identity) -> App {
        let runner = TaskRunner::new(
            ports.clone(),
            settings.max_tasks_per_tenant,
            settings.max_cuo_children,
        );
        let registry = Registry::build();
        App(Arc::new(Inner {
            ports,
            settings,
            identity,
            registry,
            runner,
            workflows: Default::default(),
            skill_entries: Default::default(),
            approval_page: std::sync::OnceLock::new(),
        }))
    }

    /// The ports.
    pub fn ports(&self) -> &Ports {
        &self.0.ports
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.0.settings
    }

    /// Records where this instance serves the approval page (`<origin>/approve/`), so
    /// refusals link to it; without it they name the terminal command.
    pub fn serve_approvals_at(&self, base: String) {
        let _ = self.0.approval_page.set(base);
    }

    /// The link of approval `id`'s page, when this instance serves it.
    pub(crate) fn approval_link(&self, id: &crate::domain::approval::ApprovalId) -> Option<String> {
        self.0.approval_page.get().map(|base| format!("{base}{id}"))
    }

    /// The task runner of this instance.
    pub fn runner(&self) -> &Arc<TaskRunner> {
        &self.0.runner
    }

    /// Starts the background work of the task runner (leases, stop polling, sweeps).
    pub fn start_background(&self, shutdown: tokio_util::sync::CancellationToken) {
        tokio::spawn(Arc::clone(&self.0.runner).maintain(shutdown));
    }

    pub(crate) fn identity(&self) -> &Identity {
        &self.0.identity
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.0.registry
    }

    /// The CUO workflow catalogue `execute_workflow` checks against.
    pub(crate) fn workflows(&self) -> &crate::app::service::tools::WorkflowCatalog {
        &self.0.workflows
    }

    /// The skills' rendered listing entries.
    pub(crate) fn skill_entries(&self) -> &crate::app::service::tools::SkillEntries {
        &self.0.skill_entries
    }

    /// The principal of a request: verified by the transport (HTTP), or from the stdio
    /// token source.
    ///
    /// # Errors
    /// `authz_denied` when the stdio token is missing, unreadable or does not verify.
    pub async fn principal(&self, caller: &dyn Caller) -> Result<Principal, DomainError> {
        match caller.principal() {
            Some(p) => Ok(p.clone()),
            None => self.identity().stdio_principal().await,
        }
    }
}
