//! The subcommands; serving is the default when none is given.

use std::path::PathBuf;

use clap::Subcommand;

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the tools/list result as JSON.
    Tools,
    /// Check the configuration (printed with where each value came from), the HTTP
    /// options and listen address, the keys, the store and upstreams; exit 0 when all are
    /// fine, 1 otherwise.
    Check {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the checklist of docs/cuo-protocol.md §7 against --cuo-command (the bundled
    /// runner by default): one PASS/FAIL line per rule; exit 0 when none fails, 1 otherwise.
    CheckCuo {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Seconds a workflow or skill run may take; its deadline is this far ahead.
        #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
        run_timeout: u64,
    },
    /// Check the memory service at --memory-url against docs/memory-openapi.yaml, writing
    /// under fresh random tenants: one PASS/FAIL line per rule; exit 0 when none fails.
    CheckMemory {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the bundled reference CUO runner on stdin/stdout (the default --cuo-command).
    CuoRunner {
        /// Load persona JSON files from this directory instead of the bundled catalogue.
        #[arg(long, value_name = "DIR")]
        catalog: Option<PathBuf>,
        /// Simulated work time per workflow step, in milliseconds (demos and load tests).
        #[arg(long, value_name = "MS", default_value_t = 0)]
        pace_ms: u64,
    },
    /// Apply the Postgres task-store migrations to --database-url (an owner/admin URL).
    Migrate,
    /// Print a token signed with the dev key of --data-dir (created if missing).
    DevToken {
        /// Tenant UUID.
        #[arg(long)]
        tenant: String,
        /// Space-separated scopes (default: every scope).
        #[arg(long)]
        scopes: Option<String>,
        /// Lifetime, e.g. 30s, 15m, 1h, 30d (default 1h; at most 5m with --confirm).
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// Subject (actor); the default is the --dev token's, so confirmation tokens
        /// minted without --sub confirm that token's calls.
        #[arg(long, default_value = "local-dev")]
        sub: String,
        /// Mint a confirmation token for this tool instead of a bearer token.
        #[arg(long, value_name = "TOOL", requires = "args")]
        confirm: Option<String>,
        /// The exact arguments (JSON object) the confirmation token is for.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
    },
    /// Show a pending approval (the call a host could not ask you about) and approve it,
    /// after asking yes/no at this terminal.
    Approve {
        /// The approval's id, from the refusal the assistant was given.
        id: String,
        /// Approve without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Show a pending approval and deny it, after asking yes/no at this terminal.
    Deny {
        /// The approval's id.
        id: String,
        /// Deny without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Call one tool in-process and print its result (or error envelope) as JSON.
    Call {
        /// Tool name, e.g. cyberos.skill.list_skills.
        tool: String,
        /// Arguments as a JSON object (default {}).
        args: Option<String>,
        /// You, at this terminal, confirm the call: for tools that need the user's
        /// confirmation (cyberos.memory.append_audit).
        #[arg(long)]
        confirm: bool,
    },
}
