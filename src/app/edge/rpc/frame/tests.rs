//! The frame reader and writers, and properties of the parser over any input.

use super::*;
use crate::domain::TraceId;
use proptest::prelude::*;

fn frame_error(bytes: &str) -> FrameError {
    parse_frame(bytes.as_bytes()).unwrap_err()
}

#[test]
fn malformed_json_is_a_parse_error_without_id() {
    let e = frame_error("{\"jsonrpc\":\"2.0\",");
    assert_eq!((e.code, e.id), (PARSE_ERROR, None));
}

#[test]
fn arrays_and_scalars_are_invalid_requests_without_id() {
    for text in [
        "[]",
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
        "1",
        "\"x\"",
        "null",
    ] {
        let e = frame_error(text);
        assert_eq!((e.code, e.id), (INVALID_REQUEST, None), "{text}");
    }
}

#[test]
fn a_bad_id_is_not_echoed() {
    for id in ["null", "1.5", "true", "{}", "[]"] {
        let e = frame_error(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}"
        ));
        assert_eq!((e.code, e.id), (INVALID_REQUEST, None), "{id}");
    }
}

#[test]
fn a_wrong_version_keeps_the_id() {
    let e = frame_error("{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}");
    assert_eq!((e.code, e.id), (INVALID_REQUEST, Some(RequestId::Int(7))));
}

#[test]
fn requests_notifications_and_responses_are_told_apart() {
    let r = parse_frame(br#"{"jsonrpc":"2.0","id":"a","method":"ping","extra":1}"#).unwrap();
    assert!(matches!(r, Incoming::Request(Request { id: RequestId::Str(ref s), .. }) if s == "a"));
    let n = parse_frame(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
    assert!(matches!(n, Incoming::Notification(_)));
    let p = parse_frame(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#).unwrap();
    assert!(matches!(
        p,
        Incoming::Response(PeerResponse { outcome: Ok(_), .. })
    ));
    let big =
        parse_frame(br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#).unwrap();
    assert!(matches!(
        big,
        Incoming::Request(Request {
            id: RequestId::UInt(u64::MAX),
            ..
        })
    ));
}

#[test]
fn a_request_carries_its_parsed_method_and_trace_context() {
    let r = parse_frame(
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"tp","tracestate":"a=1"}}}"#,
    )
    .unwrap();
    let Incoming::Request(r) = r else { panic!() };
    assert!(matches!(&r.method, Method::ToolsCall(Ok(c)) if c.name == "x" && c.meta.len() == 2));
    assert_eq!(r.trace.traceparent.as_deref(), Some("tp"));
    assert_eq!(r.trace.tracestate.as_deref(), Some("a=1"));
}

#[test]
fn error_frames_omit_an_unknown_id() {
    let err = RpcError::protocol(PARSE_ERROR, "x", "y", TraceId::from_bytes([1; 16]));
    let frame: Value = serde_json::from_str(&failure(None, &err)).unwrap();
    assert!(frame.get("id").is_none());
    assert_eq!(frame["error"]["data"]["trace_id"], "01".repeat(16));
}

#[test]
fn success_frames_carry_the_id_as_sent_around_either_kind_of_result() {
    let ids = [
        RequestId::Int(-7),
        RequestId::UInt(u64::MAX),
        RequestId::Str("a \"quoted\" id\n".into()),
    ];
    let result = json!({"ok": [1, "two"]});
    for id in ids {
        for reply in [
            Reply::Json(result.clone()),
            Reply::Raw(result.to_string().into()),
        ] {
            let frame: Value = serde_json::from_str(&success(&id, &reply)).unwrap();
            assert_eq!(
                frame,
                json!({"jsonrpc": "2.0", "id": id.to_value(), "result": result})
            );
        }
        let output = crate::app::service::output::structured(&result).unwrap();
        let frame: Value = serde_json::from_str(&success(&id, &Reply::Tool(output))).unwrap();
        let text = result.to_string();
        assert_eq!(
            frame,
            json!({"jsonrpc": "2.0", "id": id.to_value(), "result": {
                "content": [{"type": "text", "text": text}],
                "structuredContent": result,
                "isError": false
            }})
        );
    }
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                "[a-z_]{1,8}|jsonrpc|id|method|params|result|error",
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<i64>().prop_map(RequestId::Int),
        (i64::MAX as u64 + 1..=u64::MAX).prop_map(RequestId::UInt),
        "\\PC{0,12}".prop_map(RequestId::Str),
    ]
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("initialize".to_owned()),
        Just("ping".to_owned()),
        Just("tools/call".to_owned()),
        Just("tools/list".to_owned()),
        Just("tasks/get".to_owned()),
        Just("logging/setLevel".to_owned()),
        "[a-z/]{1,20}",
    ]
}

proptest! {
    #[test]
    fn any_bytes_parse_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_frame(&bytes);
    }

    /// An error is -32700 or -32600, and a refused frame's id is echoed only when the
    /// frame had a readable one.
    #[test]
    fn any_json_parses_or_fails_with_a_json_rpc_code(value in json()) {
        let text = value.to_string();
        if let Err(e) = parse_frame(text.as_bytes()) {
            prop_assert!(e.code == PARSE_ERROR || e.code == INVALID_REQUEST);
            if let Some(id) = &e.id {
                prop_assert_eq!(Some(id.to_value()), value.get("id").cloned());
            }
        }
    }

    /// What the parser accepts it reads back faithfully: the id, the method, and
    /// whether it is a request, a notification or a response.
    #[test]
    fn requests_notifications_and_responses_round_trip(
        id in id(),
        method in method(),
        params in json(),
        kind in 0u8..3,
    ) {
        let mut frame = json!({"jsonrpc": "2.0"});
        match kind {
            0 => {
                frame["id"] = id.to_value();
                frame["method"] = method.clone().into();
                frame["params"] = params;
            }
            1 => {
                frame["method"] = method.clone().into();
                frame["params"] = params;
            }
            _ => {
                frame["id"] = id.to_value();
                frame["result"] = params;
            }
        }
        let parsed = parse_frame(frame.to_string().as_bytes());
        match (kind, parsed) {
            (0, Ok(Incoming::Request(r))) => {
                prop_assert_eq!(&r.id, &id);
                let name = match &r.method {
                    Method::Unknown(n) => n.clone(),
                    known => known.name().to_owned(),
                };
                prop_assert_eq!(name, crate::domain::text::clip(&method, 64));
            }
            (1, Ok(Incoming::Notification(_))) => {}
            (2, Ok(Incoming::Response(r))) => {
                prop_assert_eq!(r.id, id);
                prop_assert!(r.outcome.is_ok());
            }
            (kind, other) => prop_assert!(false, "kind {kind}: {other:?}"),
        }
    }
}

/// A member of a frame as text: the envelope's members (valid and not) and others.
fn member() -> impl Strategy<Value = (String, Value)> {
    let call_params = (
        prop_oneof![Just(json!("cyberos.skill.list_skills")), json()],
        prop_oneof![Just(json!({})), json()],
        proptest::option::of(json()),
        proptest::option::of(prop_oneof![
            Just(json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "progressToken": 1})),
            json(),
        ]),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(name, arguments, task, meta, seed)| {
            let mut p = json!({"name": name, "arguments": arguments});
            if let Some(t) = task {
                p["task"] = t;
            }
            if let Some(m) = meta {
                p["_meta"] = m;
            }
            if let Some(s) = seed {
                p["mcp/sampling/elicit_confirm"] = s.into();
            }
            p
        });
    prop_oneof![
        3 => prop_oneof![Just(json!("2.0")), Just(json!("1.0")), Just(json!(2)), Just(Value::Null)]
            .prop_map(|v| ("jsonrpc".to_owned(), v)),
        3 => prop_oneof![id().prop_map(|id| id.to_value()), json()].prop_map(|v| ("id".to_owned(), v)),
        3 => prop_oneof![method().prop_map(Value::from), json()].prop_map(|v| ("method".to_owned(), v)),
        3 => prop_oneof![call_params, json()].prop_map(|v| ("params".to_owned(), v)),
        1 => json().prop_map(|v| ("result".to_owned(), v)),
        1 => json().prop_map(|v| ("error".to_owned(), v)),
        1 => ("[a-z_]{1,6}", json()).prop_map(|(k, v)| (k, v)),
    ]
}

/// A frame's text from its members, in order, duplicates kept; strings now and then
/// written with `\u` escapes, as some clients send them.
fn frame_text(members: &[(String, Value)], escape: bool) -> String {
    let body: Vec<String> = members
        .iter()
        .map(|(k, v)| {
            let v = v.to_string();
            let v = if escape {
                v.replace("2.0", "\\u0032.0").replace("ping", "p\\u0069ng")
            } else {
                v
            };
            format!("{}:{v}", Value::from(k.as_str()))
        })
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Members of frames: mostly a well-formed request, notification or response with a few
/// odd members added (or repeated), else any members at all.
fn members() -> impl Strategy<Value = Vec<(String, Value)>> {
    let well_formed = (
        0u8..3,
        id(),
        prop_oneof![Just("tools/call".to_owned()), method()],
        member().prop_filter_map("params", |(k, v)| (k == "params").then_some(v)),
        proptest::collection::vec(member(), 0..2),
    )
        .prop_map(|(kind, id, method, params, extra)| {
            let mut m = vec![("jsonrpc".to_owned(), json!("2.0"))];
            if kind != 1 {
                m.push(("id".to_owned(), id.to_value()));
            }
            if kind == 2 {
                m.push(("result".to_owned(), params));
            } else {
                m.push(("method".to_owned(), method.into()));
                m.push(("params".to_owned(), params));
            }
            m.extend(extra);
            m
        });
    prop_oneof![
        3 => well_formed,
        1 => proptest::collection::vec(member(), 0..7),
    ]
}

proptest! {
    /// The in-place reader answers every frame it takes exactly as the tree reader does.
    #[test]
    fn the_in_place_reader_agrees_with_the_tree_reader(
        members in members(),
        escape in any::<bool>(),
    ) {
        let text = frame_text(&members, escape);
        if let Some(fast) = read_in_place(text.as_bytes()) {
            prop_assert_eq!(format!("{fast:?}"), format!("{:?}", parse_tree(text.as_bytes())), "{}", text);
        }
    }
}

#[test]
fn the_common_frames_are_read_in_place() {
    for frame in [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"t","arguments":{"q":"x"},"_meta":{"progressToken":1}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
        r#"{"jsonrpc":"2\u002e0","id":1,"method":"p\u0069ng"}"#,
    ] {
        let fast = read_in_place(frame.as_bytes()).expect(frame);
        assert_eq!(
            format!("{fast:?}"),
            format!("{:?}", parse_tree(frame.as_bytes())),
            "{frame}"
        );
    }
    // Handed back: not JSON, not an object, a member twice.
    for frame in [
        "{",
        "[]",
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
    ] {
        assert!(read_in_place(frame.as_bytes()).is_none(), "{frame}");
    }
}
