//! (a) Every port call of the pipeline and the task methods runs as the verified
//! principal's tenant and actor: `.withf` on them, `.times(1)`.

use serde_json::json;

use cyberos_mcp_bridge::app::service::confirmation::args_sha256;
use cyberos_mcp_bridge::domain::confirm::{ConfirmationClaims, PURPOSE};
use cyberos_mcp_bridge::domain::cuo::{Persona, Route, Workflow};
use cyberos_mcp_bridge::domain::memory::{AuditPage, AuditReceipt};
use cyberos_mcp_bridge::domain::task::{Task, TaskStatus};
use cyberos_mcp_bridge::domain::{JsonText, TaskId, Tool, TraceId};
use cyberos_mcp_bridge::ports::TaskPage;

use super::{NOW, as_alice, entry, start, structured, tenant, verifier};
use crate::support::mocks::{MockClient, MockPorts};

#[tokio::test]
async fn cuo_tools_call_the_runner_as_the_tokens_tenant() {
    let mut ports = MockPorts::default();
    ports
        .cuo
        .expect_list_personas()
        .withf(as_alice)
        .times(1)
        .returning(|_| {
            Ok(vec![Persona {
                id: "cto".into(),
                title: "CTO".into(),
                short_name: "CTO".into(),
                description: "Owns technology.".into(),
                workflows: vec!["adr".into()],
            }])
        });
    ports
        .cuo
        .expect_list_workflows()
        .withf(|ctx, persona| as_alice(ctx) && persona.as_deref() == Some("cto"))
        .times(1)
        .returning(|_, _| {
            Ok(vec![Workflow {
                persona: "cto".into(),
                id: "adr".into(),
                title: "ADR".into(),
                description: "Capture a decision.".into(),
                input_schema: JsonText::from_serialized(r#"{"type":"object"}"#.into()),
                typical_duration_s: 5,
            }])
        });
    ports
        .cuo
        .expect_route()
        .withf(|ctx, query, _| as_alice(ctx) && query == "write an adr")
        .times(1)
        .returning(|_, _, _| {
            Ok(Route {
                persona: "cto".into(),
                workflow: "adr".into(),
                confidence: 0.9,
                alternates: vec![],
            })
        });
    let mut c = start(ports).await;
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
}

#[tokio::test]
async fn memory_tools_call_the_log_as_the_tokens_tenant() {
    let mut ports = MockPorts::default();
    ports
        .memory
        .expect_get()
        .withf(|ctx, id| as_alice(ctx) && id == "a-1")
        .times(1)
        .returning(|_, id| Ok(entry(id)));
    ports
        .memory
        .expect_list()
        .withf(|ctx, q| as_alice(ctx) && q.limit == 5)
        .times(1)
        .returning(|_, _| {
            Ok(AuditPage {
                entries: vec![entry("a-2")],
                next_cursor: None,
            })
        });
    ports
        .memory
        .expect_append()
        .withf(|ctx, new, _| as_alice(ctx) && new.kind == "decision")
        .times(1)
        .returning(|_, _, _| {
            Ok(AuditReceipt {
                audit_id: "a-3".into(),
                recorded_at: NOW,
            })
        });
    let mut c = start(ports).await;
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
    let mut v = verifier();
    v.expect_verify_confirmation()
        .withf(|t| t == "confirm-1")
        .times(1)
        .returning(move |_| Ok(claims.clone()));
    let mut ports = MockPorts::default();
    ports.clock.expect_now().return_const(NOW);
    ports
        .ledger
        .expect_claim()
        .withf(|t, jti, _| *t == tenant() && jti == "j-1")
        .times(1)
        .returning(|_, _, _| Ok(true));
    ports
        .memory
        .expect_append()
        .withf(|ctx, _, _| as_alice(ctx))
        .times(1)
        .returning(|_, _, _| {
            Ok(AuditReceipt {
                audit_id: "a-1".into(),
                recorded_at: NOW,
            })
        });
    let mut c = MockClient::start(ports, v, "tok-a").await;
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
    let mut ports = MockPorts::default();
    let stored = task.clone();
    ports
        .tasks
        .expect_get()
        .withf(move |t, got| *t == tenant() && *got == id)
        .times(1)
        .returning(move |_, _| Ok(stored.clone()));
    ports
        .tasks
        .expect_list()
        .withf(|t, cursor, _| *t == tenant() && cursor.is_none())
        .times(1)
        .returning(move |_, _, _| {
            Ok(TaskPage {
                tasks: vec![task.clone()],
                next_cursor: None,
            })
        });
    let mut c = start(ports).await;
    let got = c
        .request(2, "tasks/get", json!({"taskId": id.to_string()}))
        .await;
    assert_eq!(got["result"]["taskId"], id.to_string(), "{got}");
    assert_eq!(got["result"]["status"], "working", "{got}");
    let listed = c.request(3, "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["taskId"], id.to_string());
    c.finish().await;
}
