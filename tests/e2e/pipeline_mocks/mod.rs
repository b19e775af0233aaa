//! The `tools/call` pipeline and the task methods through the real dispatcher (stdio over
//! an in-memory pipe), with `mockall` mocks behind every port:
//!
//! - every port call runs as the verified principal's tenant (and actor): `.withf` on
//!   the tenant, `.times(1)`;
//! - a call refused by the pipeline (unknown or missing argument, a constraint only the
//!   schema knows, a missing scope, an unknown tool, no confirmation, a bad token, a
//!   confirmation token for other arguments) touches no port: the mocks have no
//!   expectations, and the answer's class is asserted, since a mock's panic would be
//!   caught by the dispatcher and answered as `internal_error`.

mod tenant;
mod untouched;

use serde_json::Value;

use cyberos_mcp_bridge::domain::memory::AuditEntry;
use cyberos_mcp_bridge::domain::{
    CallCtx, JsonText, Principal, Scope, TenantId, Timestamp, TokenRejection, TraceId,
};

use crate::support::mocks::{MockClient, MockPorts, MockVerifier};

/// The tenant of the test's tokens: not the `--dev` tenant, so a constant could not pass.
pub(crate) const TENANT: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
pub(crate) const NOW: Timestamp = Timestamp::from_unix_millis(1_700_000_000_000);

pub(crate) fn tenant() -> TenantId {
    TenantId::parse(TENANT).unwrap()
}

/// The call runs as the token's principal.
pub(crate) fn as_alice(ctx: &CallCtx) -> bool {
    ctx.tenant == tenant() && &*ctx.actor == "alice"
}

/// `tok-a`: every scope; `tok-ro`: the read scopes; anything else is refused.
pub(crate) fn verifier() -> MockVerifier {
    let mut v = MockVerifier::new();
    v.expect_verify().returning(|token| {
        let scopes = match token {
            "tok-a" => Scope::ALL.to_vec(),
            "tok-ro" => Scope::ALL
                .into_iter()
                .filter(|s| s.as_str().ends_with(":read"))
                .collect(),
            _ => return Err(TokenRejection::BadSignature.into_error()),
        };
        Ok(Principal {
            tenant: tenant(),
            actor: "alice".into(),
            scopes: scopes.into(),
        })
    });
    v
}

pub(crate) async fn start(ports: MockPorts) -> MockClient {
    MockClient::start(ports, verifier(), "tok-a").await
}

pub(crate) fn structured(frame: &Value) -> &Value {
    let content = &frame["result"]["structuredContent"];
    assert!(content.is_object(), "{frame}");
    content
}

pub(crate) fn entry(id: &str) -> AuditEntry {
    AuditEntry {
        audit_id: id.into(),
        kind: "decision".into(),
        actor_id: "alice".into(),
        subject: None,
        body: JsonText::from_serialized("{}".into()),
        recorded_at: NOW,
        trace_id: TraceId::from_bytes([7; 16]),
    }
}
