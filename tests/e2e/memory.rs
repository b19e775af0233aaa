//! The audit log: one contract run against the fake, the embedded SQLite log and the
//! HTTP client talking to a real HTTP server; the HTTP client's faults; and the memory
//! tools through the built binary.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use cyberos_mcp_bridge::adapters::memory_http::HttpMemoryClient;
use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::domain::memory::{AuditQuery, NewAuditEntry};
use cyberos_mcp_bridge::domain::{DomainError, ErrorClass, JsonText};
use cyberos_mcp_bridge::ports::MemoryClient;

use crate::support::binary::Bridge;
use crate::support::fakes::InMemoryAudit;
use crate::support::memory_server::{ERROR_BODY_SECRETS, Fault, MemoryServer, refused_url};
use crate::support::{assert_envelope, call_ctx};

const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

fn entry(kind: &str, n: u32) -> NewAuditEntry {
    NewAuditEntry {
        kind: kind.into(),
        subject: Some(format!("s{n}")),
        body: JsonText::from_serialized(format!("{{\"n\":{n}}}")),
    }
}

fn query(limit: u32) -> AuditQuery {
    AuditQuery {
        kind: None,
        since: None,
        limit,
        cursor: None,
    }
}

fn assert_class(r: Result<impl std::fmt::Debug, DomainError>, class: ErrorClass) -> DomainError {
    let err = r.expect_err("an error");
    assert_eq!(err.class(), class, "{err:?}");
    err
}

/// What every `MemoryClient` must do.
async fn audit_log_contract(memory: &dyn MemoryClient) {
    let (a, b) = (call_ctx(A), call_ctx(B));
    let first = memory
        .append(&a, &entry("decision", 1), "key-1")
        .await
        .unwrap();
    let again = memory
        .append(&a, &entry("decision", 1), "key-1")
        .await
        .unwrap();
    assert_eq!(first, again, "the same idempotency key records one entry");
    memory.append(&a, &entry("note", 2), "key-2").await.unwrap();
    memory
        .append(&a, &entry("decision", 3), "key-3")
        .await
        .unwrap();
    memory
        .append(&b, &entry("decision", 9), "key-1")
        .await
        .unwrap();

    let got = memory.get(&a, &first.audit_id).await.unwrap();
    assert_eq!(
        (
            got.kind.as_str(),
            got.actor_id.as_str(),
            got.subject.as_deref()
        ),
        ("decision", "alice", Some("s1"))
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(got.body.as_str()).unwrap(),
        json!({"n": 1})
    );
    assert_eq!(got.trace_id, a.trace_id);

    // Another tenant's id and a missing id look the same.
    let foreign = assert_class(
        memory.get(&b, &first.audit_id).await,
        ErrorClass::InputValidation,
    );
    let missing = assert_class(
        memory.get(&a, "no-such-entry").await,
        ErrorClass::InputValidation,
    );
    assert_eq!(foreign.to_string(), "audit entry not found");
    assert_eq!(missing.to_string(), foreign.to_string());

    let page1 = memory.list(&a, &query(2)).await.unwrap();
    let bodies: Vec<String> = page1
        .entries
        .iter()
        .map(|e| e.body.as_str().to_owned())
        .collect();
    assert_eq!(bodies, ["{\"n\":3}", "{\"n\":2}"], "newest first");
    let cursor = page1.next_cursor.expect("a second page");
    let page2 = memory
        .list(
            &a,
            &AuditQuery {
                cursor: Some(cursor),
                ..query(2)
            },
        )
        .await
        .unwrap();
    assert_eq!(page2.entries.len(), 1);
    assert!(page2.next_cursor.is_none());

    let decisions = memory
        .list(
            &a,
            &AuditQuery {
                kind: Some("decision".into()),
                ..query(50)
            },
        )
        .await
        .unwrap();
    assert_eq!(decisions.entries.len(), 2);
    assert!(decisions.entries.iter().all(|e| e.kind == "decision"));

    let b_page = memory.list(&b, &query(50)).await.unwrap();
    assert_eq!(
        b_page.entries.len(),
        1,
        "tenants see only their own entries"
    );

    let bad = memory
        .list(
            &a,
            &AuditQuery {
                cursor: Some("garbage!".into()),
                ..query(2)
            },
        )
        .await;
    assert_class(bad, ErrorClass::InputValidation);
    memory.check().await.unwrap();
}

#[tokio::test]
async fn the_fake_satisfies_the_audit_log_contract() {
    audit_log_contract(&InMemoryAudit::default()).await;
}

#[tokio::test]
async fn the_embedded_sqlite_log_satisfies_the_audit_log_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bridge.sqlite3"), Arc::new(SystemClock))
        .await
        .unwrap();
    audit_log_contract(&store).await;
    // Reopening (another bridge process on the same data dir) migrates nothing twice.
    let again = SqliteStore::open(&dir.path().join("bridge.sqlite3"), Arc::new(SystemClock))
        .await
        .unwrap();
    assert_eq!(
        again
            .list(&call_ctx(A), &query(50))
            .await
            .unwrap()
            .entries
            .len(),
        3
    );
}

#[tokio::test]
async fn concurrent_openers_of_one_data_dir_migrate_safely() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.sqlite3");
    let opens = (0..4).map(|_| SqliteStore::open(&path, Arc::new(SystemClock)));
    for store in futures::future::join_all(opens).await {
        store.unwrap().check().await.unwrap();
    }
}

#[tokio::test]
async fn the_http_client_satisfies_the_audit_log_contract() {
    let server = MemoryServer::start();
    let client = HttpMemoryClient::new(&server.url, Some("bridge-secret".into())).unwrap();
    audit_log_contract(&client).await;
    let headers = server.headers();
    let post = headers
        .iter()
        .find(|h| h.contains_key("idempotency-key"))
        .expect("appends carry Idempotency-Key");
    assert_eq!(
        post["authorization"], "Bearer bridge-secret",
        "the bridge's own credential"
    );
    assert!(
        post["traceparent"]
            .to_str()
            .unwrap()
            .starts_with(&format!("00-{}-", "07".repeat(16)))
    );
    assert_eq!(post["tracestate"], "vendor=opaque");
}

#[tokio::test]
async fn a_transient_failure_is_retried_once_without_writing_twice() {
    let server = MemoryServer::start();
    let client = HttpMemoryClient::new(&server.url, None).unwrap();
    server.set_fault(Fault::FailOnce);
    client
        .append(&call_ctx(A), &entry("decision", 1), "k")
        .await
        .unwrap();
    client
        .append(&call_ctx(A), &entry("decision", 1), "k")
        .await
        .unwrap();
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn past_its_inflight_cap_a_call_is_refused_at_once_with_retry_after() {
    let server = MemoryServer::start();
    let client = Arc::new(
        HttpMemoryClient::new(&server.url, None)
            .unwrap()
            .with_max_inflight(1),
    );
    server.set_fault(Fault::Slow(Duration::from_millis(1500)));
    let first = {
        let client = Arc::clone(&client);
        tokio::spawn(async move { client.list(&call_ctx(A), &query(5)).await })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.headers().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the first call never reached the service"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let refused = assert_class(
        client.list(&call_ctx(A), &query(5)).await,
        ErrorClass::UpstreamUnavailable,
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "refused at once, not queued behind the first"
    );
    let DomainError::UpstreamUnavailable { retry_after, .. } = &refused else {
        unreachable!()
    };
    assert_eq!(*retry_after, Some(Duration::from_secs(1)));
    assert_eq!(server.headers().len(), 1, "the refused call never left");
    first.await.unwrap().unwrap();
    // The place is free again once the first has its answer.
    server.set_fault(Fault::None);
    client.list(&call_ctx(A), &query(5)).await.unwrap();
}

/// What every `MemoryClient` that cannot reach its log answers: `upstream_unavailable`, for
/// every call.
async fn unreachable_log_contract(memory: &dyn MemoryClient) {
    let ctx = call_ctx(A);
    let unavailable = ErrorClass::UpstreamUnavailable;
    assert_class(
        memory.append(&ctx, &entry("decision", 1), "k").await,
        unavailable,
    );
    assert_class(memory.get(&ctx, "a-1").await, unavailable);
    assert_class(memory.list(&ctx, &query(5)).await, unavailable);
    assert_class(memory.check().await, unavailable);
}

#[tokio::test]
async fn a_down_fake_and_a_refused_http_client_answer_alike() {
    unreachable_log_contract(&InMemoryAudit::unreachable()).await;
    unreachable_log_contract(&HttpMemoryClient::new(&refused_url(), None).unwrap()).await;
}

#[tokio::test]
async fn http_faults_are_upstream_unavailable() {
    let refused = HttpMemoryClient::new(&refused_url(), None).unwrap();
    assert_class(
        refused.list(&call_ctx(A), &query(5)).await,
        ErrorClass::UpstreamUnavailable,
    );

    let server = MemoryServer::start();
    let client = HttpMemoryClient::new(&server.url, None).unwrap();
    for fault in [Fault::ServerError, Fault::Huge, Fault::NotJson] {
        server.set_fault(fault);
        let err = assert_class(
            client.list(&call_ctx(A), &query(5)).await,
            ErrorClass::UpstreamUnavailable,
        );
        assert_eq!(
            err.to_string(),
            "the memory service is unavailable",
            "{fault:?}"
        );
    }
    server.set_fault(Fault::Slow(Duration::from_secs(7)));
    let started = Instant::now();
    assert_class(
        client.get(&call_ctx(A), "x").await,
        ErrorClass::UpstreamUnavailable,
    );
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "the 5 s budget holds"
    );
}

#[test]
fn a_failing_memory_service_leaks_nothing_of_its_error_body() {
    let server = MemoryServer::start();
    server.set_fault(Fault::ServerError);
    let mut b = Bridge::initialized(&["--memory-url", &server.url]);
    for resp in [
        b.call("cyberos.memory.read_audit", json!({"audit_id": "m-1"})),
        b.call("cyberos.memory.read_audit", json!({"kind": "decision"})),
        b.request(
            "tools/call",
            json!({"name": "cyberos.memory.append_audit", "arguments": {"kind": "decision", "body": {}},
                   "_meta": {"com.cyberos/confirmed": true}}),
        ),
    ] {
        assert_envelope(&resp, -32050, "upstream_unavailable");
        let text = resp.to_string();
        for leak in ERROR_BODY_SECRETS.iter().chain(&["boom", "127.0.0.1"]) {
            assert!(!text.contains(leak), "{leak} leaked: {text}");
        }
    }
}

#[test]
fn append_and_read_round_trip_through_the_binary_on_the_embedded_log() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.request(
        "tools/call",
        json!({"name": "cyberos.memory.append_audit", "arguments": {"kind": "decision", "body": {"adr": 12}},
               "_meta": {"com.cyberos/confirmed": true}}),
    );
    let receipt = &resp["result"]["structuredContent"];
    let id = receipt["audit_id"]
        .as_str()
        .expect("an audit id")
        .to_owned();
    let read = b.call("cyberos.memory.read_audit", json!({"audit_id": id}));
    let entries = &read["result"]["structuredContent"]["entries"];
    assert_eq!(entries[0]["body"], json!({"adr": 12}));
    assert_eq!(entries[0]["recorded_at"], receipt["recorded_at"]);
    let page = b.call(
        "cyberos.memory.read_audit",
        json!({"kind": "decision", "limit": 10}),
    );
    assert_eq!(
        page["result"]["structuredContent"]["entries"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let bad = b.call("cyberos.memory.read_audit", json!({"cursor": "nope"}));
    assert_eq!(
        assert_envelope(&bad, -32602, "input_validation")["pointer"],
        "/cursor"
    );
}

#[test]
fn an_audit_id_is_one_plain_path_segment() {
    // `..` once turned a read of one entry into a list call on the memory service.
    let server = MemoryServer::start();
    server.seed(
        "00000000-0000-4000-8000-000000000001",
        json!({
            "audit_id": "m-1", "kind": "decision", "actor_id": "bob",
            "body": {}, "recorded_at": "2026-01-01T00:00:00Z", "trace_id": "ab".repeat(16)
        }),
    );
    let mut b = Bridge::initialized(&["--memory-url", &server.url]);
    let before = server.headers().len();
    for id in [
        "..",
        ".",
        "../m-1",
        "m-1/..",
        "%2e%2e",
        "m-1?kind=x",
        "m 1",
        "m-\u{e9}",
        "\u{202e}1",
    ] {
        let resp = b.call("cyberos.memory.read_audit", json!({"audit_id": id}));
        let data = assert_envelope(&resp, -32602, "input_validation");
        assert_eq!(data["pointer"], "/audit_id", "{id:?}: {resp}");
    }
    assert_eq!(
        server.headers().len(),
        before,
        "no request reached the service"
    );
    let read = b.call("cyberos.memory.read_audit", json!({"audit_id": "m-1"}));
    assert_eq!(
        read["result"]["structuredContent"]["entries"][0]["audit_id"], "m-1",
        "{read}"
    );
}
