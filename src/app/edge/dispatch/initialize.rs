//! `initialize`: the version policy, the capabilities and the server's instructions.

use serde_json::{Value, json};

use crate::app::edge::rpc::{
    INVALID_PARAMS, INVALID_REQUEST, InitializeParams, PROTOCOL_VERSION, RpcError,
};
use crate::app::edge::session::Session;
use crate::domain::TraceId;

/// Earlier revisions a client may ask for; we answer with ours and the client decides.
const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", PROTOCOL_VERSION];

pub(super) fn initialize(
    session: &Session,
    params: &InitializeParams,
    trace: TraceId,
    instructions: String,
) -> Result<Value, RpcError> {
    let version = params.protocol_version.as_deref();
    if !version.is_some_and(is_supported_request) {
        let echoed = match version {
            Some(v) if v.len() <= 64 => {
                Value::String(crate::domain::text::clip(v, 64).into_owned())
            }
            _ => Value::Null,
        };
        return Err(RpcError::protocol(
            INVALID_PARAMS,
            "unsupported protocol version",
            "This bridge speaks MCP 2025-11-25 only; upgrade the client or ask for 2025-11-25.",
            trace,
        )
        .with_data("supported", json!([PROTOCOL_VERSION]))
        .with_data("requested", echoed));
    }
    if let Some(name) = &params.client_name {
        session.set_client_name(name.clone());
    }
    if !session.mark_initialized(params.elicitation) {
        return Err(RpcError::protocol(
            INVALID_REQUEST,
            "the session is already initialized",
            "Send initialize once per connection.",
            trace,
        ));
    }
    Ok(json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {
            "tools": {"listChanged": false},
            "logging": {},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        },
        "serverInfo": {
            "name": "cyberos-mcp-bridge",
            "title": "CyberOS MCP Bridge",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "CyberOS personas, workflows, audit log and skills as MCP tools"
        },
        "instructions": instructions
    }))
}

/// The server instructions, true for how this connection's plain calls of long tools end.
pub(super) fn instructions(plain_calls_wait: bool) -> &'static str {
    if plain_calls_wait {
        "CyberOS tools. cyberos.cuo.route finds the persona and workflow for a request; \
cyberos.cuo.execute_workflow and cyberos.skill.invoke_skill are long-running: called plainly they return \
their result when the run ends (send a progress token to follow it), or run as MCP tasks when the call \
carries params.task. cyberos.memory.append_audit writes a permanent record and needs the user's \
confirmation: the host asks them when it can; when it cannot, the refusal says what to tell the user \
(open a link, or run a command, to approve that exact call); once they have approved, make the same call \
again with the same arguments."
    } else {
        "CyberOS tools. cyberos.cuo.route finds the persona and workflow for a request; \
cyberos.cuo.execute_workflow and cyberos.skill.invoke_skill are long-running: called plainly they return \
{task_id, status} at once (poll tasks/get, then tasks/result), or run as MCP tasks when the call carries \
params.task. cyberos.memory.append_audit writes a permanent record and needs the user's confirmation: the \
host asks them when it can; when it cannot, the refusal says what to tell the user (open a link, or run a \
command, to approve that exact call); once they have approved, make the same call again with the same \
arguments."
    }
}

/// Whether a client's requested version gets a successful answer (CONTRACT §3): a known
/// revision, or a well-formed date after ours (the client then decides).
fn is_supported_request(v: &str) -> bool {
    KNOWN_VERSIONS.contains(&v)
        || (v.len() == 10
            && chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d").is_ok()
            && v > PROTOCOL_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_policy_matches_the_contract() {
        for ok in [
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05",
            "2026-07-28",
            "2031-01-01",
        ] {
            assert!(is_supported_request(ok), "{ok}");
        }
        for bad in [
            "2024-01-01",
            "2025-11-24",
            "1.0.0",
            "",
            "2026-13-01",
            "2026-02-30",
            "2026-7-28",
            "latest",
        ] {
            assert!(!is_supported_request(bad), "{bad}");
        }
    }
}
