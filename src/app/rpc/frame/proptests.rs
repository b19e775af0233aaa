//! Properties of the frame parser over any input.

use super::*;
use proptest::prelude::*;

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
                prop_assert_eq!(name, crate::lines::clip(&method, 64));
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
