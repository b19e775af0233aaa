//! The built binary over Streamable HTTP, with reqwest as the client (the harness is
//! `support::http_server`): the handshake and the tools, tokens and scopes (401/403 with
//! their challenges), tenancy, Origin/Host/CORS, the order of the transport's checks,
//! tasks across two instances on one data dir, SSE, elicitation in a session (answers
//! routed between instances), the load limits (and their refusals
//! counted in the metrics), slowloris, SIGTERM and the caller's trace context. Every JSON-RPC frame that comes back is checked
//! against the MCP schema.

mod approvals;
mod auth;
mod elicitation;
mod gate;
mod gate_order;
mod keepalive;
mod limits;
mod refusals;
mod resume;
mod serving;
mod sessions;
mod shutdown;
mod sse;
mod tasks;
mod trace_context;
mod unauthenticated;
mod waits;

use serde_json::{Value, json};

use crate::support::http_server::Server;

pub(crate) const LOCAL: &str = "00000000-0000-4000-8000-000000000001";
pub(crate) const OTHER: &str = "bbbbbbbb-0000-4000-8000-00000000000b";

pub(crate) fn adr() -> Value {
    json!({"persona": "chief-technology-officer", "workflow": "adr-quick-capture", "inputs": {"title": "x"}})
}

/// Starts `execute_workflow` as a task; returns its id.
pub(crate) async fn start_task(s: &Server, token: &str) -> String {
    let created = s
        .rpc(
            token,
            1,
            "tools/call",
            json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr(), "task": {}}),
        )
        .await;
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a CreateTaskResult: {created}"))
        .to_owned()
}

pub(crate) async fn task_status(s: &Server, token: &str, id: &str) -> String {
    let got = s.rpc(token, 2, "tasks/get", json!({"taskId": id})).await;
    got["result"]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"))
        .to_owned()
}
