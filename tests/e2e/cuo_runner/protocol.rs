//! JSON-RPC protocol errors and over-long lines: the runner answers and keeps serving.

use serde_json::json;

use super::with_ctx;
use crate::support::cuo_runner::{Runner, error_of};

#[test]
fn protocol_errors_get_their_codes_and_the_runner_keeps_serving() {
    let mut r = Runner::spawn(&[]);
    assert_eq!(r.err("no.such.method", with_ctx(json!({}))).0, -32601);
    assert_eq!(r.err("personas.list", json!({})).0, -32602);
    let bad_ctx = json!({"ctx": {"tenant_id": "t", "actor_id": "a"}});
    assert_eq!(r.err("route", bad_ctx).0, -32602);

    for (line, code) in [
        ("{not json", -32700),
        ("[1, 2]", -32600),
        ("\"just a string\"", -32600),
    ] {
        r.send_raw(format!("{line}\n").as_bytes());
        let frame = r.recv();
        assert_eq!(error_of(&frame).0, code, "{line}");
        assert!(frame.get("id").is_none(), "{frame}");
    }
    // Notifications get no answer: the next frame answers the next request.
    r.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"hello\"}\n");
    assert!(r.ok("personas.list", with_ctx(json!({})))["personas"].is_array());
}

#[test]
fn an_over_long_line_is_refused_and_reading_goes_on() {
    let mut r = Runner::spawn(&[]);
    let mut line = vec![b'x'; 8 * 1024 * 1024 + 10];
    line.push(b'\n');
    r.send_raw(&line);
    let frame = r.recv();
    assert_eq!(error_of(&frame).0, -32600);
    assert!(frame.get("id").is_none());
    assert!(r.ok("personas.list", with_ctx(json!({})))["personas"].is_array());
}
