//! The refusals the transport makes itself, counted by reason in the scrape
//! (`cyberos_http_refusals_total`): origin (403), auth (401), size (413), rate (429) and
//! shed (503).

use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::LOCAL;
use super::gate::headers_only;
use crate::support::http_server::{Server, rpc};
use crate::support::scrape::{sample, scrape};

#[tokio::test]
async fn each_refusal_is_counted_by_its_reason() {
    let s = Server::start(&[
        "--metrics-listen",
        "127.0.0.1:0",
        "--http-call-rate",
        // One call, then none for 100 s: the second is refused however slow the first.
        "0.01/1",
        "--http-max-inflight",
        "1",
    ]);
    let log = s.log();
    let url = log
        .split("serving metrics at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no `serving metrics at` line: {log}"))
        .to_owned();
    let t = s.token(LOCAL, None);
    let ping = rpc(1, "ping", json!({})).to_string();
    let origin = [("origin", "https://evil.example")];
    assert_eq!(
        s.post_with(Some(&t), ping.clone(), &origin).await.status,
        403
    );
    assert_eq!(s.post_with(None, ping, &[]).await.status, 401);
    assert_eq!(headers_only(&s, &t, 4 * 1024 * 1024 + 1).await.status, 413);
    let call = rpc(
        2,
        "tools/call",
        json!({"name": "cyberos.skill.list_skills", "arguments": {}}),
    );
    assert_eq!(s.post(Some(&t), &call).await.status, 200);
    assert_eq!(s.post(Some(&t), &call).await.status, 429);
    // A request whose body never comes holds the only in-flight slot, and a probe is shed.
    // The held request itself may meet a probe holding the slot and be shed first: then it
    // is sent again (each attempt bounded).
    let addr = s.base.trim_start_matches("http://").to_owned();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nAuthorization: Bearer {t}\r\nContent-Length: 100\r\n\r\n"
    );
    let mut shed = false;
    'attempts: for _ in 0..10 {
        let mut held = tokio::net::TcpStream::connect(&addr).await.unwrap();
        held.write_all(head.as_bytes()).await.unwrap();
        for _ in 0..25 {
            let probe = s.post(Some(&t), &rpc(3, "tools/list", json!({}))).await;
            if probe.status == 503 {
                shed = true;
                break 'attempts;
            }
            let mut answered = [0u8; 1];
            let read = tokio::time::timeout(
                std::time::Duration::from_millis(20),
                tokio::io::AsyncReadExt::read(&mut held, &mut answered),
            );
            if read.await.is_ok() {
                continue 'attempts; // the held request was answered: hold again
            }
        }
    }
    assert!(shed, "a request shed while the slot is held");

    let text = scrape(&url);
    let refusals = "cyberos_http_refusals_total";
    for reason in ["origin", "auth", "size", "rate"] {
        let got = sample(&text, refusals, &[("cyberos_refusal_reason", reason)]);
        assert_eq!(got, Some(1.0), "{reason}: {text}");
    }
    let shed = sample(&text, refusals, &[("cyberos_refusal_reason", "shed")]);
    assert!(shed >= Some(1.0), "{text}");
    assert!(!text.contains("cyberos_tenant_id"), "{text}");
}
