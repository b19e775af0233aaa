//! The load limits: the tenant call rate, the concurrency limit, the request deadline,
//! the task cap, and a client that never finishes its headers.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{LOCAL, OTHER, adr};
use crate::support::binary::paced;
use crate::support::http_server::{Server, error_body, open_stream, read, rpc};
use crate::support::raw_http::ping_on;

#[tokio::test]
async fn tools_calls_beyond_the_tenant_rate_get_429_with_retry_after() {
    // One token per 20 s: a slow machine cannot refill the bucket during the test.
    let s = Server::start_env(&[], &[("CYBEROS_HTTP_CALL_RATE", "0.05/2")]);
    let t = s.token(LOCAL, None);
    let call = rpc(
        3,
        "tools/call",
        json!({"name": "cyberos.skill.list_skills", "arguments": {}}),
    );
    for _ in 0..2 {
        assert_eq!(s.post(Some(&t), &call).await.status, 200);
    }
    let limited = s.post(Some(&t), &call).await;
    let frame = error_body(&limited, 429, -32050, "upstream_unavailable");
    assert_eq!(frame["id"], 3);
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 1);
    // Other methods and other tenants are not limited.
    assert_eq!(
        s.post(Some(&t), &rpc(1, "tools/list", json!({})))
            .await
            .status,
        200
    );
    let other = s.token(OTHER, None);
    assert_eq!(s.post(Some(&other), &call).await.status, 200);
}

#[tokio::test]
async fn requests_beyond_the_concurrency_limit_are_shed_with_503() {
    // A CUO that never answers: a plain call holds the only slot until its 10 s timeout.
    // (A waiting tasks/result would not: waits have their own pool.)
    let s = Server::start_env(
        &["--cuo-command", "sleep 60"],
        &[("CYBEROS_HTTP_MAX_INFLIGHT", "1")],
    );
    let t = s.token(LOCAL, None);
    let body = rpc(
        1,
        "tools/call",
        json!({"name": "cyberos.cuo.list_personas", "arguments": {}}),
    );
    let hold = || {
        let (client, url, t, body) = (s.client.clone(), s.url("/mcp"), t.clone(), body.clone());
        tokio::spawn(async move { read(open_stream(&client, url, &t, &body).await).await })
    };
    let mut hanging = hold();
    // Until the server holds it, the probe may still get through: retries bounded in time.
    // A probe in the slot when the call came sheds the call instead: send it again.
    let shed = crate::support::wait_for_async(Duration::from_secs(5), async || {
        if hanging.is_finished() {
            hanging = hold();
        }
        let reply = s.post(Some(&t), &rpc(2, "tools/list", json!({}))).await;
        if reply.status == 503 {
            return Ok(reply);
        }
        Err("a request shed while the slot is held (never shed)".to_owned())
    })
    .await;
    error_body(&shed, 503, -32050, "upstream_unavailable");
    assert_eq!(shed.header("retry-after"), Some("1"));
    hanging.abort();
}

#[tokio::test]
async fn a_plain_request_past_the_deadline_gets_504() {
    // A CUO that never answers: the short call would wait for its own 10 s timeout.
    let s = Server::start_env(
        &["--cuo-command", "sleep 60"],
        &[("CYBEROS_HTTP_REQUEST_TIMEOUT_MS", "500")],
    );
    let t = s.token(LOCAL, None);
    let started = Instant::now();
    let reply = s
        .post(
            Some(&t),
            &rpc(
                5,
                "tools/call",
                json!({"name": "cyberos.cuo.list_personas", "arguments": {}}),
            ),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let frame = error_body(&reply, 504, -32050, "upstream_unavailable");
    assert_eq!(frame["id"], 5);
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let s = Server::start(&[]);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = conn.read_to_end(&mut buf);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(20),
        "closed after {waited:?}"
    );
}

#[tokio::test]
async fn a_tenant_at_its_task_cap_gets_429_with_retry_after() {
    let s = Server::start_env(
        &["--cuo-command", &paced(3000)],
        &[("CYBEROS_MAX_TASKS_PER_TENANT", "1")],
    );
    let t = s.token(LOCAL, None);
    let start = rpc(
        4,
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr()}),
    );
    assert_eq!(s.post(Some(&t), &start).await.status, 200);
    let refused = s.post(Some(&t), &start).await;
    let frame = error_body(&refused, 429, -32050, "upstream_unavailable");
    assert_eq!(frame["error"]["data"]["message"], "too many running tasks");
    assert!(refused.header("retry-after").is_some());
    // Another tenant is not held back.
    let other = s.token("bbbbbbbb-0000-4000-8000-00000000000b", None);
    assert_eq!(s.post(Some(&other), &start).await.status, 200);
}

#[tokio::test]
async fn a_connection_past_the_cap_gets_503_with_retry_after_and_is_closed() {
    let s = Server::start(&["--http-max-connections", "2"]);
    let t = s.token(LOCAL, None);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let served = tokio::task::spawn_blocking(move || {
        let connect = || {
            let c = std::net::TcpStream::connect(&addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c
        };
        // Two connections kept open: the cap.
        let mut open: Vec<_> = (0..2).map(|_| connect()).collect();
        for c in &mut open {
            let answer = ping_on(c, &addr, &t);
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        }
        // The third is answered at once, with a JSON-RPC error, and closed.
        let mut third = connect();
        let answer = ping_on(&mut third, &addr, &t);
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("retry-after: 1"), "{answer}");
        let body: serde_json::Value =
            serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(
            body["error"]["data"]["class"], "upstream_unavailable",
            "{body}"
        );
        assert!(body["error"]["data"]["trace_id"].is_string(), "{body}");
        let mut rest = Vec::new();
        assert_eq!(
            third.read_to_end(&mut rest).unwrap(),
            0,
            "closed after the answer"
        );
        // A connection that ends frees its place.
        drop(open.pop());
        crate::support::poll(Duration::from_secs(10), || {
            let answer = ping_on(&mut connect(), &addr, &t);
            if answer.starts_with("HTTP/1.1 200") {
                Ok(())
            } else {
                Err(answer)
            }
        })
        .unwrap();
    });
    served.await.unwrap();
}

#[tokio::test]
async fn an_http2_client_past_the_cap_gets_503_with_retry_after_on_its_stream() {
    let s = Server::start(&["--http-max-connections", "1"]);
    let t = s.token(LOCAL, None);
    let addr = s.base.trim_start_matches("http://").to_owned();
    // One HTTP/1.1 connection kept open, answered: the cap.
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let t = t.clone();
        std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let answer = ping_on(&mut c, &addr, &t);
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            held_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(Duration::from_secs(30));
        })
    };
    tokio::task::spawn_blocking(move || held_rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the first connection is answered");
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let resp = h2
        .post(s.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(&t)
        .body(rpc(1, "ping", json!({})).to_string())
        .send()
        .await
        .expect("an answer, not a broken connection");
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(
        body["error"]["data"]["class"], "upstream_unavailable",
        "{body}"
    );
    assert!(body["error"]["data"]["trace_id"].is_string(), "{body}");
    release_tx.send(()).unwrap();
    holder.join().unwrap();
}
