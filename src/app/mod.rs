//! The driving side and the composition root: configuration, wiring, JSON-RPC dispatch,
//! the tool registry and handlers, and the stdio transport. The only layer that knows
//! MCP and JSON-RPC.

pub mod cli;
pub mod config;
pub mod http;
pub mod identity;
pub mod rpc;
pub mod server;
pub mod session;
pub mod stdio;
pub mod task_runner;
pub mod tasks;
pub mod telemetry;
pub mod tools;
pub mod trace;
pub mod wiring;

use std::sync::Arc;

use crate::ports::Ports;
use identity::Identity;
use tools::Registry;

/// How `tools/call` failures of the fixable classes reach the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolErrors {
    /// As JSON-RPC errors with the envelope (default).
    Jsonrpc,
    /// `input_validation` and `upstream_unavailable` as `isError: true` results (SEP-1303).
    Result,
}

/// How plain (non-task) calls of long-running tools answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LongRunning {
    /// At once, with a task handle.
    Handle,
    /// With the final result.
    Wait,
}

/// Behaviour switches of the protocol layer.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Error carrier for fixable tool errors.
    pub tool_errors: ToolErrors,
    /// Plain-call behaviour of long-running tools.
    pub long_running: LongRunning,
    /// Cap on one tenant's tasks running on this instance.
    pub max_tasks_per_tenant: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            tool_errors: ToolErrors::Jsonrpc,
            long_running: LongRunning::Handle,
            max_tasks_per_tenant: task_runner::DEFAULT_MAX_TASKS_PER_TENANT,
        }
    }
}

/// The application: ports, settings, identity and the compiled tool registry. Cloning is
/// one reference-count bump; handlers borrow it.
#[derive(Clone)]
pub struct App(Arc<Inner>);

struct Inner {
    ports: Ports,
    settings: Settings,
    identity: Identity,
    registry: Registry,
    runner: Arc<task_runner::TaskRunner>,
}

impl App {
    /// Builds the application; compiles every tool schema once.
    pub fn new(ports: Ports, settings: Settings, identity: Identity) -> App {
        let runner = task_runner::TaskRunner::new(ports.clone(), settings.max_tasks_per_tenant);
        App(Arc::new(Inner {
            ports,
            settings,
            identity,
            registry: Registry::build(),
            runner,
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

    /// The task runner of this instance.
    pub fn runner(&self) -> &Arc<task_runner::TaskRunner> {
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
}
