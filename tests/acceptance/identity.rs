//! Confirmation and tenancy per request: criteria 15 and 16.

use serde_json::{Value, json};

use crate::harness::{ALL_SCOPES, Adapters, Stack};
use crate::support::assert_envelope;

const APPEND: &str = "cyberos.memory.append_audit";
const READ: &str = "cyberos.memory.read_audit";

/// Criterion 15: A destructive tool requires confirmation: append_audit without the host's
/// confirmation is `authz_denied`; with the seed's `mcp/sampling/elicit_confirm: true`, in
/// the call's `_meta` or its params (CONTRACT §5), it runs.
pub async fn c15_an_unconfirmed_destructive_call_is_authz_denied(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let mut b = stack.bridge().stdio().await;
    let arguments = json!({"kind": "decision", "body": {"adr": 15}});
    let unconfirmed = b.call_tool(APPEND, arguments.clone()).await;
    assert_envelope(&unconfirmed, -32000, "authz_denied");
    let read = b.call_tool(READ, json!({})).await;
    assert_eq!(
        read["result"]["structuredContent"]["entries"],
        json!([]),
        "an unconfirmed call appended: {read}"
    );
    let in_meta = b.call_confirmed(APPEND, arguments.clone()).await;
    let in_params = b
        .request(
            "tools/call",
            json!({"name": APPEND, "arguments": arguments,
                   "mcp/sampling/elicit_confirm": true}),
        )
        .await;
    for confirmed in [in_meta, in_params] {
        assert!(
            confirmed["result"]["structuredContent"]["audit_id"].is_string(),
            "{confirmed}"
        );
    }
}

/// Criterion 16: Stateless across requests: on one bridge, a call with a new token for
/// another tenant gets that tenant's results.
pub async fn c16_each_request_gets_the_results_of_its_own_tokens_tenant(adapters: Adapters) {
    let stack = Stack::new(adapters).up();
    let http = stack.bridge().tenant("a").http().await;
    let a = http.token().to_owned();
    let b = stack.token("b", ALL_SCOPES);
    let bodies = async |token: &str| -> Vec<Value> {
        let read = http.call_tool(token, READ, json!({})).await;
        read["result"]["structuredContent"]["entries"]
            .as_array()
            .unwrap_or_else(|| panic!("entries: {read}"))
            .iter()
            .map(|e| e["body"].clone())
            .collect()
    };
    let appended = http
        .call_confirmed(
            &a,
            APPEND,
            json!({"kind": "test.note", "body": {"owner": "a"}}),
        )
        .await;
    assert!(
        appended["result"]["structuredContent"]["audit_id"].is_string(),
        "{appended}"
    );
    assert_eq!(bodies(&b).await, Vec::<Value>::new(), "B sees A's entry");
    http.call_confirmed(
        &b,
        APPEND,
        json!({"kind": "test.note", "body": {"owner": "b"}}),
    )
    .await;
    assert_eq!(bodies(&a).await, [json!({"owner": "a"})]);
    assert_eq!(bodies(&b).await, [json!({"owner": "b"})]);
}
