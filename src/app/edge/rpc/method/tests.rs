use super::*;
use serde_json::json;

fn parse(name: &str, params: Value) -> Method {
    let meta = params
        .get("_meta")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    Method::parse(name, &params, meta)
}

#[test]
fn every_served_method_parses_to_its_variant_and_back_to_its_name() {
    for name in [
        "initialize",
        "ping",
        "logging/setLevel",
        "tools/list",
        "tools/call",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "server/discover",
    ] {
        let method = parse(name, json!({}));
        assert!(!matches!(method, Method::Unknown(_)), "{name}");
        assert_eq!(method.name(), name);
    }
    assert!(
        matches!(parse("resources/list", json!({})), Method::Unknown(n) if n == "resources/list")
    );
}

#[test]
fn tools_call_params_are_read_once() {
    let m = parse(
        "tools/call",
        json!({"name": "t", "arguments": {"a": 1}, "task": {"ttl": 5000},
               "_meta": {"progressToken": 7}, "mcp/sampling/elicit_confirm": true}),
    );
    let Method::ToolsCall(Ok(call)) = m else {
        panic!("{m:?}")
    };
    assert_eq!(call.name, "t");
    assert_eq!(call.arguments, json!({"a": 1}));
    assert_eq!(call.requested_ttl(), Some(5000));
    assert_eq!(call.progress_token(), Some(&json!(7)));
    assert_eq!(call.confirmation(), Some(Confirmation::SeedFlag));
    for bad in [
        json!([]),
        json!({}),
        json!({"name": 1}),
        json!({"name": "t", "arguments": []}),
        json!({"name": "t", "task": true}),
    ] {
        assert!(
            matches!(parse("tools/call", bad.clone()), Method::ToolsCall(Err(_))),
            "{bad}"
        );
    }
}

#[test]
fn task_refs_take_the_spec_or_the_seed_shape() {
    let get = |p| match parse("tasks/get", p) {
        Method::TasksGet(r) => r,
        other => panic!("{other:?}"),
    };
    assert!(!get(json!({"taskId": "t-1"})).unwrap().seed_shape);
    assert!(get(json!({"id": "t-1"})).unwrap().seed_shape);
    assert!(get(json!({"taskId": 1})).is_err());
    let Method::TasksList(Err(e)) = parse("tasks/list", json!({"cursor": 3})) else {
        panic!()
    };
    assert_eq!(e.message, "invalid cursor");
}

#[test]
fn notifications_are_told_apart() {
    assert_eq!(
        Notice::parse("notifications/cancelled", &json!({"requestId": 4})),
        Notice::Cancelled(Some(RequestId::Int(4)))
    );
    assert_eq!(
        Notice::parse("notifications/initialized", &Value::Null),
        Notice::Initialized
    );
    assert_eq!(Notice::parse("x", &Value::Null), Notice::Other);
}
