//! The `tools/call` pipeline and the task methods through the real dispatcher (stdio over
//! an in-memory pipe), with recorded fakes behind every port:
//!
//! - every port call runs as the verified principal's tenant (and actor): the record
//!   holds each expected call once, as that tenant, and no other;
//! - a call refused by the pipeline (unknown or missing argument, a constraint only the
//!   schema knows, a missing scope, an unknown tool, no confirmation, a bad token, a
//!   confirmation token for other arguments) touches no port: the record stays empty, and
//!   the answer's class is asserted too.

mod tenant;
mod untouched;

use std::sync::Arc;

use serde_json::Value;

use cyberos_mcp_bridge::adapters::unavailable::Unavailable;
use cyberos_mcp_bridge::app::Settings;
use cyberos_mcp_bridge::app::service::identity::StdioToken;
use cyberos_mcp_bridge::domain::confirm::ConfirmationClaims;
use cyberos_mcp_bridge::domain::{TenantId, Timestamp, Upstream};
use cyberos_mcp_bridge::ports::Ports;

use crate::support::fakes::{
    Behaviour, CallLog, CatalogueCuo, FixedClock, InMemoryAudit, InMemoryLedger, InMemoryTasks,
    Recorded, StaticSkills, TenantTokens,
};
use crate::support::in_process::Client;

/// The tenant of the test's tokens: not the `--dev` tenant, so a constant could not pass.
pub(crate) const TENANT: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
pub(crate) const NOW: Timestamp = Timestamp::from_unix_millis(1_700_000_000_000);

pub(crate) fn tenant() -> TenantId {
    TenantId::parse(TENANT).unwrap()
}

/// The fakes behind the ports, each recorded into one log when the client starts.
#[derive(Default)]
pub(crate) struct Fakes {
    pub cuo: CatalogueCuo,
    pub memory: InMemoryAudit,
    pub tasks: InMemoryTasks,
    pub ledger: InMemoryLedger,
    /// What every confirmation token carries (none: every one is refused).
    pub confirmation: Option<ConfirmationClaims>,
}

impl Fakes {
    /// A client over these fakes whose stdio token is `token` (see [`TenantTokens`]),
    /// and the log of the calls its ports see after `initialize`.
    pub(crate) async fn start_as(self, token: &str) -> (Client, CallLog) {
        let log = CallLog::default();
        let ports = Ports {
            tasks: Recorded::new(self.tasks, &log),
            cuo: Recorded::new(self.cuo, &log),
            memory: Recorded::new(self.memory, &log),
            skills: Recorded::new(StaticSkills::new(Behaviour::Answer), &log),
            clock: Recorded::new(FixedClock(NOW), &log),
            ledger: Recorded::new(self.ledger, &log),
            // The stdio path keeps its answers in memory; nothing here may ask the store.
            answers: Arc::new(Unavailable::new(
                Upstream::TaskStore,
                "stdio keeps its answers in memory",
            )),
            // No approvals are kept here: an unconfirmed call is refused as unconfirmed.
            approvals: Arc::new(Unavailable::new(
                Upstream::TaskStore,
                "no approvals in these tests",
            )),
        };
        let verifier = Recorded::new(
            TenantTokens {
                tenant: tenant(),
                confirmation: self.confirmation,
            },
            &log,
        );
        let c = Client::start_on(
            ports,
            Settings::default(),
            verifier,
            StdioToken::Literal(token.into()),
        )
        .await;
        (c, log)
    }

    pub(crate) async fn start(self) -> (Client, CallLog) {
        self.start_as("tok-a").await
    }
}

/// `port.method tenant/alice`, the start of a [`CallLog`] line for a call as the
/// token's principal.
pub(crate) fn as_alice(call: &str) -> String {
    format!("{call} {TENANT}/alice")
}

pub(crate) fn structured(frame: &Value) -> &Value {
    let content = &frame["result"]["structuredContent"];
    assert!(content.is_object(), "{frame}");
    content
}
