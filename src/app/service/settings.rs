//! The behaviour switches of the protocol layer.

/// How `tools/call` failures of the fixable classes reach the client.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolErrors {
    /// As JSON-RPC errors with the envelope (default).
    Jsonrpc,
    /// `input_validation` and `upstream_unavailable` as `isError: true` results (SEP-1303).
    Result,
}

/// How plain (non-task) calls of long-running tools answer.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum LongRunning {
    /// At once, with a task handle.
    Handle,
    /// With the final result.
    Wait,
    /// With the final result for clients known not to poll tasks (`--wait-client`), with a
    /// handle for the others.
    Auto,
}

/// Names of hosts that never poll tasks (nor let their model do it), as they send them in
/// `clientInfo.name` and as the product of their HTTP `User-Agent`: Claude Code, the
/// Codex CLI and the Gemini CLI (all seen by tests/hosts), Claude Desktop, Cursor, VS Code,
/// Windsurf.
/// `--wait-client` adds names.
pub const WAIT_CLIENTS: &[&str] = &[
    "claude-code",
    "codex-mcp-client",
    "gemini-cli-mcp-client",
    "claude-ai",
    "cursor-vscode",
    "Visual Studio Code",
    "windsurf-client",
];

/// How tools are named in `tools/list` (`--tool-names`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolNames {
    /// The seed's names: `cyberos.cuo.route`.
    Dotted,
    /// `cyberos_cuo_route`, for hosts and model APIs that refuse dots in tool names.
    Underscore,
}

impl From<ToolNames> for crate::domain::ToolNaming {
    fn from(names: ToolNames) -> Self {
        match names {
            ToolNames::Dotted => crate::domain::ToolNaming::Dotted,
            ToolNames::Underscore => crate::domain::ToolNaming::Underscore,
        }
    }
}

impl Settings {
    /// Whether a plain call of a long-running tool from `client` (its `clientInfo.name`, if
    /// known) waits for the result instead of answering with a task handle.
    pub fn plain_calls_wait(&self, client: Option<&str>) -> bool {
        match self.long_running {
            LongRunning::Handle => false,
            LongRunning::Wait => true,
            LongRunning::Auto => client.is_some_and(|c| {
                WAIT_CLIENTS.iter().any(|w| w.eq_ignore_ascii_case(c))
                    || self.wait_clients.iter().any(|w| w.eq_ignore_ascii_case(c))
            }),
        }
    }
}

/// Behaviour switches of the protocol layer.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Error carrier for fixable tool errors.
    pub tool_errors: ToolErrors,
    /// Plain-call behaviour of long-running tools.
    pub long_running: LongRunning,
    /// More `clientInfo.name`s that get the final result under `LongRunning::Auto`.
    pub wait_clients: Vec<String>,
    /// The spelling of tool names in listings and in every text that names a tool.
    pub tool_names: crate::domain::ToolNaming,
    /// Cap on one tenant's tasks running on this instance.
    pub max_tasks_per_tenant: usize,
    /// Cap on one tenant's tasks kept in the store (any status).
    pub max_stored_tasks_per_tenant: u32,
    /// Cap on the CUO children running tasks on this instance, across tenants.
    pub max_cuo_children: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            tool_errors: ToolErrors::Jsonrpc,
            long_running: LongRunning::Auto,
            wait_clients: Vec::new(),
            tool_names: crate::domain::ToolNaming::Dotted,
            max_tasks_per_tenant: crate::app::service::tasks::runner::DEFAULT_MAX_TASKS_PER_TENANT,
            max_stored_tasks_per_tenant: crate::domain::task::DEFAULT_MAX_STORED_PER_TENANT,
            max_cuo_children: crate::app::service::tasks::runner::DEFAULT_MAX_CUO_CHILDREN,
        }
    }
}
