//! (b) A call the pipeline refuses touches no port: the record of the ports' calls stays
//! empty, and the answer's class is asserted.

use serde_json::{Value, json};

use cyberos_mcp_bridge::app::service::confirmation::args_sha256;
use cyberos_mcp_bridge::domain::confirm::{ConfirmationClaims, PURPOSE};

use super::{Fakes, NOW, tenant};
use crate::support::assert_envelope;
use crate::support::fakes::CallLog;
use crate::support::in_process::Client;

/// Ends `c` and asserts that no port saw a call.
async fn untouched(c: Client, log: CallLog) {
    c.finish().await;
    assert_eq!(log.calls(), Vec::<String>::new());
}

/// Calls `tool` with `args` and, unless null, `_meta`.
async fn refused(c: &mut Client, id: i64, tool: &str, args: Value, meta: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": args});
    if !meta.is_null() {
        params["_meta"] = meta;
    }
    c.request(id, "tools/call", params).await
}

#[tokio::test]
async fn arguments_the_schema_refuses_touch_no_port() {
    let (mut c, log) = Fakes::default().start().await;
    let confirmed = json!({"com.cyberos/confirmed": true});
    let cases = [
        // Unknown argument, on a handler that ignores its arguments.
        (
            "cyberos.cuo.list_personas",
            json!({"bogus": 1}),
            Value::Null,
        ),
        // Missing required argument.
        ("cyberos.cuo.route", json!({}), Value::Null),
        (
            "cyberos.memory.append_audit",
            json!({"kind": "decision"}),
            confirmed.clone(),
        ),
        // Constraints only the schema knows: the handlers would pass them on.
        (
            "cyberos.memory.read_audit",
            json!({"limit": 0}),
            Value::Null,
        ),
        (
            "cyberos.memory.append_audit",
            json!({"kind": "Not A Kind", "body": {}}),
            confirmed,
        ),
        (
            "cyberos.skill.list_skills",
            json!({"limit": 0}),
            Value::Null,
        ),
    ];
    for (n, (tool, args, meta)) in cases.into_iter().enumerate() {
        let frame = refused(&mut c, n as i64 + 2, tool, args, meta).await;
        assert_envelope(&frame, -32602, "input_validation");
    }
    untouched(c, log).await;
}

#[tokio::test]
async fn an_unknown_tool_touches_no_port() {
    let (mut c, log) = Fakes::default().start().await;
    let frame = refused(&mut c, 2, "cyberos.cuo.nope", json!({}), Value::Null).await;
    assert_envelope(&frame, -32602, "input_validation");
    untouched(c, log).await;
}

#[tokio::test]
async fn a_missing_scope_or_a_bad_token_touches_no_port() {
    let confirmed = json!({"com.cyberos/confirmed": true});
    let audit = json!({"kind": "decision", "body": {}});
    let (mut ro, ro_log) = Fakes::default().start_as("tok-ro").await;
    let frame = refused(
        &mut ro,
        2,
        "cyberos.memory.append_audit",
        audit.clone(),
        confirmed.clone(),
    )
    .await;
    let data = assert_envelope(&frame, -32000, "authz_denied");
    assert_eq!(data["missing_scopes"], json!(["cyberos:memory:write"]));
    let run = json!({"persona": "cto", "workflow": "adr", "inputs": {}});
    let frame = refused(&mut ro, 3, "cyberos.cuo.execute_workflow", run, Value::Null).await;
    assert_envelope(&frame, -32000, "authz_denied");
    untouched(ro, ro_log).await;

    let (mut bad, bad_log) = Fakes::default().start_as("tok-bad").await;
    let frame = refused(&mut bad, 2, "cyberos.memory.append_audit", audit, confirmed).await;
    assert_envelope(&frame, -32000, "authz_denied");
    let frame = refused(
        &mut bad,
        3,
        "cyberos.cuo.list_personas",
        json!({}),
        Value::Null,
    )
    .await;
    assert_envelope(&frame, -32000, "authz_denied");
    untouched(bad, bad_log).await;
}

#[tokio::test]
async fn an_unconfirmed_append_touches_no_port() {
    let (mut c, log) = Fakes::default().start().await;
    let audit = json!({"kind": "decision", "body": {}});
    let frame = refused(&mut c, 2, "cyberos.memory.append_audit", audit, Value::Null).await;
    assert_envelope(&frame, -32000, "authz_denied");
    untouched(c, log).await;
}

#[tokio::test]
async fn a_confirmation_token_for_other_arguments_reaches_neither_ledger_nor_log() {
    let claims = ConfirmationClaims {
        tenant: tenant(),
        subject: "alice".into(),
        purpose: Some(PURPOSE.into()),
        tool: "cyberos.memory.append_audit".into(),
        args_sha256: args_sha256(&json!({"kind": "decision", "body": {"x": 1}})),
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
    let other = json!({"kind": "decision", "body": {"x": 2}});
    let meta = json!({"com.cyberos/confirmation_token": "confirm-1"});
    let frame = refused(&mut c, 2, "cyberos.memory.append_audit", other, meta).await;
    assert_envelope(&frame, -32000, "authz_denied");
    c.finish().await;
    // Reading the clock to check the expiry is fine; the ledger and the log stay untouched.
    assert_eq!(
        log.calls_but("clock."),
        ["verifier.verify_confirmation confirm-1"]
    );
}

#[tokio::test]
async fn a_task_id_that_does_not_parse_touches_no_store() {
    let (mut c, log) = Fakes::default().start().await;
    let frame = c.request(2, "tasks/get", json!({"taskId": "t-nope"})).await;
    assert_envelope(&frame, -32602, "input_validation");
    untouched(c, log).await;
}
