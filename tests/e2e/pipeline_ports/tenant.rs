//! (a) Every port call of the pipeline and the task methods runs as the verified
//! principal's tenant and actor: the record holds each expected call once, as them, and
//! no other call.

use serde_json::json;

use cyberos_mcp_bridge::app::service::confirmation::args_sha256;
use cyberos_mcp_bridge::domain::confirm::{ConfirmationClaims, PURPOSE};
use cyberos_mcp_bridge::domain::cuo::Workflow;
use cyberos_mcp_bridge::domain::memory::NewAuditEntry;
use cyberos_mcp_bridge::domain::task::{Task, TaskStatus};
use cyberos_mcp_bridge::domain::{CallCtx, JsonText, TaskId, Tool, TraceId};
use cyberos_mcp_bridge::ports::MemoryClient;

use super::{Fakes, NOW, TENANT, as_alice, structured, tenant};
use crate::support::fakes::{CatalogueCuo, InMemoryAudit, InMemoryTasks};

#[tokio::test]
async fn cuo_tools_call_the_runner_as_the_tokens_tenant() {
    let cuo = CatalogueCuo::new(vec![Workflow {
        persona: "cto".into(),
        id: "adr".into(),
        title: "ADR".into(),
        description: "Capture a decision.".into(),
        input_schema: JsonText::from_serialized(r#"{"type":"object"}"#.into()),
        typical_duration_s: 5,
    }]);
    let (mut c, log) = Fakes {
        cuo,
        ..Fakes::default()
    }
    .start()
    .await;
    let personas = c.call(2, "cyberos.cuo.list_personas", json!({})).await;
    assert_eq!(structured(&personas)["personas"][0]["id"], "cto");
    let workflows = c
        .call(3, "cyberos.cuo.list_workflows", json!({"persona": "cto"}))
        .await;
    assert_eq!(structured(&workflows)["workflows"][0]["id"], "adr");
    let route = c
        .call(4, "cyberos.cuo.route", json!({"query": "write an adr"}))
        .await;
    assert_eq!(structured(&route)["workflow"], "adr", "{route}");
    c.finish().await;
    assert_eq!(
        log.calls(),
        [
            as_alice("cuo.list_personas"),
            as_alice("cuo.list_workflows") + r#" Some("cto")"#,
            as_alice("cuo.route") + r#" "write an adr""#,
        ]
    );
}

#[tokio::test]
async fn memory_tools_call_the_log_as_the_tokens_tenant() {
    // Two entries already logged for the tenant: `a-1`, then `a-2`.
    let memory = InMemoryAudit::default();
    let ctx = CallCtx {
        tenant: tenant(),
        actor: "alice".into(),
        trace_id: TraceId::from_bytes([7; 16]),
        span_id: [3; 8],
        sampled: true,
        tracestate: None,
    };
    for key in ["k-1", "k-2"] {
        let entry = NewAuditEntry {
            kind: "decision".into(),
            subject: None,
            body: JsonText::from_serialized("{}".into()),
        };
        memory.append(&ctx, &entry, key).await.unwrap();
    }
    let (mut c, log) = Fakes {
        memory,
        ..Fakes::default()
    }
    .start()
    .await;
    let one = c
        .call(2, "cyberos.memory.read_audit", json!({"audit_id": "a-1"}))
        .await;
    assert_eq!(structured(&one)["entries"][0]["audit_id"], "a-1");
    let page = c
        .call(3, "cyberos.memory.read_audit", json!({"limit": 5}))
        .await;
    assert_eq!(structured(&page)["entries"][0]["audit_id"], "a-2");
    let appended = c
        .request(
            4,
            "tools/call",
            json!({"name": "cyberos.memory.append_audit",
                   "arguments": {"kind": "decision", "body": {}},
                   "_meta": {"com.cyberos/confirmed": true}}),
        )
        .await;
    assert_eq!(structured(&appended)["audit_id"], "a-3");
    c.finish().await;
    assert_eq!(
        log.calls(),
        [
            as_alice("memory.get") + " a-1",
            as_alice("memory.list") + " limit=5",
            as_alice("memory.append") + " decision",
        ]
    );
}

#[tokio::test]
async fn a_confirmation_token_is_claimed_in_the_tokens_tenant() {
    let args = json!({"kind": "decision", "body": {"x": 1}});
    let claims = ConfirmationClaims {
        tenant: tenant(),
        subject: "alice".into(),
        purpose: Some(PURPOSE.into()),
        tool: "cyberos.memory.append_audit".into(),
        args_sha256: args_sha256(&args),
        jti: "j-1".into(),
        expires_at: NOW.plus_millis(60_000),
        issued_at: Some(NOW),
    };
    let (mut c, log) = Fakes {
        confirmation: Some(claims),
        ..Fakes::default()
    }
    .start()
    .await;
    let appended = c
        .request(
            2,
            "tools/call",
            json!({"name": "cyberos.memory.append_audit", "arguments": args,
                   "_meta": {"com.cyberos/confirmation_token": "confirm-1"}}),
        )
        .await;
    assert_eq!(structured(&appended)["audit_id"], "a-1", "{appended}");
    c.finish().await;
    // Reading the clock (to check the expiry) is not a tenant's call.
    assert_eq!(
        log.calls_but("clock."),
        [
            "verifier.verify_confirmation confirm-1".to_owned(),
            format!("ledger.claim {TENANT} j-1"),
            as_alice("memory.append") + " decision",
        ]
    );
}

#[tokio::test]
async fn task_methods_read_the_store_as_the_tokens_tenant() {
    let id = TaskId::from_random([9; 16]);
    let task = Task {
        id,
        tenant: tenant(),
        tool: Tool::ExecuteWorkflow,
        status: TaskStatus::Running,
        output: None,
        failure: None,
        status_message: None,
        trace_id: TraceId::from_bytes([7; 16]),
        created_at: NOW,
        updated_at: NOW,
        timeout_at: NOW.plus_millis(60_000),
        expires_at: NOW.plus_millis(3_600_000),
    };
    let (mut c, log) = Fakes {
        tasks: InMemoryTasks::with(vec![task]),
        ..Fakes::default()
    }
    .start()
    .await;
    let got = c
        .request(2, "tasks/get", json!({"taskId": id.to_string()}))
        .await;
    assert_eq!(got["result"]["taskId"], id.to_string(), "{got}");
    assert_eq!(got["result"]["status"], "working", "{got}");
    let listed = c.request(3, "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["taskId"], id.to_string());
    c.finish().await;
    assert_eq!(
        log.calls(),
        [
            format!("tasks.get {TENANT} {id}"),
            format!("tasks.list {TENANT} None"),
        ]
    );
}
