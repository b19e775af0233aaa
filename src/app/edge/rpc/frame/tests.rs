//! The frame reader and writers.

use super::*;
use crate::domain::TraceId;

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
