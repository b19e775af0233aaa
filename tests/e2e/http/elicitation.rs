//! Elicitation over HTTP: a `tools/call` that needs confirmation, in a session whose
//! client declared `elicitation`, asks on its own SSE stream; the client's answer is a POST
//! of its own, which may reach another instance and finds the waiting one through the
//! store. Only the session's own "yes" confirms; decline and cancel refuse as on stdio;
//! an answer under another tenant's token, another session, or for an id never asked goes
//! nowhere. On SQLite (instances sharing a data dir) and on Postgres.

use std::time::Duration;

use serde_json::{Value, json};

use super::sessions::{SESSION, initialize, post};
use super::{LOCAL, OTHER};
use crate::support::http_server::{Reply, Server, error_body, open_stream_with, read, rpc};
use crate::support::schema::check_frame;
use crate::support::{assert_envelope, wait_for_async};
use cyberos_mcp_bridge::domain::session::MAX_OPEN_QUESTIONS;

const APPEND: &str = "cyberos.memory.append_audit";

/// A `tools/call` POSTed in a session, its SSE response read event by event.
struct Call {
    resp: reqwest::Response,
    buffered: String,
}

impl Call {
    async fn start(s: &Server, token: &str, session: &str, arguments: Value) -> Call {
        Call::try_start(s, token, session, arguments)
            .await
            .unwrap_or_else(|quick| panic!("answered at once: {} {}", quick.status, quick.text))
    }

    /// The call as a stream, or the quick answer it got instead.
    async fn try_start(
        s: &Server,
        token: &str,
        session: &str,
        arguments: Value,
    ) -> Result<Call, Reply> {
        let body = rpc(
            7,
            "tools/call",
            json!({"name": APPEND, "arguments": arguments}),
        );
        let resp = open_stream_with(
            &s.client,
            s.url("/mcp"),
            token,
            &body,
            &[(SESSION, session)],
        )
        .await;
        if resp.headers().get("content-type").unwrap() != "text/event-stream" {
            return Err(read(resp).await);
        }
        assert_eq!(resp.status(), 200);
        Ok(Call {
            resp,
            buffered: String::new(),
        })
    }

    /// The next JSON-RPC frame on the stream (the priming event and keepalives skipped).
    async fn next(&mut self) -> Value {
        let read = async {
            loop {
                if let Some(end) = self.buffered.find("\n\n") {
                    let event: String = self.buffered.drain(..end + 2).collect();
                    let data = event
                        .lines()
                        .find_map(|l| l.strip_prefix("data:"))
                        .map(str::trim)
                        .unwrap_or_default();
                    if !data.is_empty() {
                        return serde_json::from_str(data).unwrap();
                    }
                    continue;
                }
                let chunk = self
                    .resp
                    .chunk()
                    .await
                    .unwrap()
                    .expect("the stream goes on");
                self.buffered.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .expect("an event in time")
    }

    /// The confirmation form, checked against the schema.
    async fn question(&mut self) -> Value {
        let ask = self.next().await;
        check_frame(&ask, None, false);
        assert_eq!(ask["method"], "elicitation/create", "{ask}");
        assert_eq!(
            ask["params"]["requestedSchema"]["properties"]["confirm"]["type"],
            "boolean"
        );
        let id = ask["id"].as_str().expect("a string id");
        assert!(id.starts_with("cyberos-e-") && id.len() == 42, "{id}");
        ask
    }

    /// The call's response, checked against the schema.
    async fn response(&mut self) -> Value {
        let out = self.next().await;
        check_frame(&out, Some("tools/call"), false);
        assert_eq!(out["id"], 7, "{out}");
        out
    }
}

fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn yes() -> Value {
    json!({"action": "accept", "content": {"confirm": true}})
}

fn note(n: u32) -> Value {
    json!({"kind": "note", "body": {"n": n}})
}

/// A refusal with stdio's wording for `why`.
fn assert_not_confirmed(out: &Value, why: &str) {
    let data = assert_envelope(out, -32000, "authz_denied");
    assert_eq!(
        data["message"],
        format!("the user did not confirm the call ({why})"),
        "{out}"
    );
}

#[tokio::test]
async fn a_call_asks_on_its_stream_and_only_the_users_yes_confirms() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let id = initialize(&s, &token, "my-agent").await;

    let mut call = Call::start(&s, &token, &id, note(1)).await;
    let ask = call.question().await;
    let delivered = post(&s, &token, Some(&id), &answer(&ask["id"], yes())).await;
    assert_eq!(delivered.status, 202, "{}", delivered.text);
    let out = call.response().await;
    let audit_id = out["result"]["structuredContent"]["audit_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"));
    let read = s
        .call(
            &token,
            "cyberos.memory.read_audit",
            json!({"audit_id": audit_id}),
        )
        .await;
    assert_eq!(
        read["result"]["structuredContent"]["entries"][0]["body"],
        json!({"n": 1}),
        "{read}"
    );

    for (result, why) in [
        (json!({"action": "decline"}), "declined"),
        (json!({"action": "cancel"}), "cancelled"),
        (
            json!({"action": "accept", "content": {"confirm": false}}),
            "answered no",
        ),
    ] {
        let mut call = Call::start(&s, &token, &id, note(2)).await;
        let ask = call.question().await;
        let delivered = post(&s, &token, Some(&id), &answer(&ask["id"], result)).await;
        assert_eq!(delivered.status, 202, "{}", delivered.text);
        assert_not_confirmed(&call.response().await, why);
    }
    // The client could not ask (an error response): refused too.
    let mut call = Call::start(&s, &token, &id, note(3)).await;
    let ask = call.question().await;
    let failed =
        json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32602, "message": "no"}});
    assert_eq!(post(&s, &token, Some(&id), &failed).await.status, 202);
    assert_not_confirmed(&call.response().await, "the client could not ask");
}

#[tokio::test]
async fn answers_of_another_tenant_another_session_or_to_no_question_do_not_confirm() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let id = initialize(&s, &token, "my-agent").await;
    let other_session = initialize(&s, &token, "my-agent").await;
    let mut call = Call::start(&s, &token, &id, note(4)).await;
    let ask = call.question().await;
    let yes = answer(&ask["id"], yes());
    // Another tenant's token cannot use the session at all.
    let foreign = post(&s, &s.token(OTHER, None), Some(&id), &yes).await;
    assert_eq!(foreign.status, 404, "{}", foreign.text);
    // The same principal's other session has no such question.
    let astray = post(&s, &token, Some(&other_session), &yes).await;
    assert_no_question(&astray);
    // An id never asked.
    let unasked = answer(&json!(format!("cyberos-e-{}", "0".repeat(32))), self::yes());
    assert_no_question(&post(&s, &token, Some(&id), &unasked).await);
    // None of those confirmed: the user's own "decline" decides.
    let declined = answer(&ask["id"], json!({"action": "decline"}));
    assert_eq!(post(&s, &token, Some(&id), &declined).await.status, 202);
    assert_not_confirmed(&call.response().await, "declined");
    // A second answer to the same question goes nowhere.
    assert_no_question(&post(&s, &token, Some(&id), &yes).await);
    // Outside a session a response is accepted and ignored, as before.
    assert_eq!(post(&s, &token, None, &yes).await.status, 202);
}

fn assert_no_question(reply: &Reply) {
    let frame = error_body(reply, 400, -32600, "input_validation");
    assert!(
        frame["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no open request with this id in this session"),
        "{frame}"
    );
}

#[tokio::test]
async fn a_client_that_accepts_only_json_is_not_asked() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let id = initialize(&s, &token, "my-agent").await;
    let call = rpc(
        7,
        "tools/call",
        json!({"name": APPEND, "arguments": note(5)}),
    );
    let reply = s
        .post_with(
            Some(&token),
            call.to_string(),
            &[("accept", "application/json"), (SESSION, &id)],
        )
        .await;
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let out = reply.json();
    check_frame(&out, Some("tools/call"), false);
    let data = assert_envelope(&out, -32000, "authz_denied");
    assert!(
        data["message"]
            .as_str()
            .unwrap()
            .contains("needs the user's confirmation"),
        "{out}"
    );
}

#[tokio::test]
async fn an_answer_posted_to_another_instance_reaches_the_waiting_call() {
    // The Postgres URL is made on a blocking thread (its setup runs a runtime of its own).
    let stores = tokio::task::spawn_blocking(crate::tasks::stores)
        .await
        .unwrap();
    for store in stores {
        let dir = tempfile::tempdir().unwrap();
        let flags: Vec<&str> = store.iter().map(String::as_str).collect();
        // One data dir: the same dev key and session key, as a cluster shares them.
        let a = Server::start_at(dir.path(), &flags);
        let b = Server::start_at(dir.path(), &flags);
        let token = a.token(LOCAL, None);
        let id = initialize(&a, &token, "my-agent").await;
        let mut call = Call::start(&b, &token, &id, note(6)).await;
        let ask = call.question().await;
        let delivered = post(&a, &token, Some(&id), &answer(&ask["id"], yes())).await;
        assert_eq!(delivered.status, 202, "{store:?}: {}", delivered.text);
        let out = call.response().await;
        assert!(
            out["result"]["structuredContent"]["audit_id"].is_string(),
            "{store:?}: {out}"
        );
    }
}

#[tokio::test]
async fn a_question_whose_stream_the_client_closed_no_longer_counts_against_the_cap() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let id = initialize(&s, &token, "my-agent").await;
    // The user's cap, filled and then given up by the client.
    let mut calls = Vec::new();
    for n in 0..MAX_OPEN_QUESTIONS {
        let mut call = Call::start(&s, &token, &id, note(n)).await;
        call.question().await;
        calls.push(call);
    }
    let refused = Call::try_start(&s, &token, &id, note(99))
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert!(refused.header("retry-after").is_some());
    let frame = refused.json();
    check_frame(&frame, Some("tools/call"), false);
    let data = assert_envelope(&frame, -32050, "upstream_unavailable");
    assert!(
        data["hint"]
            .as_str()
            .unwrap()
            .contains("16 confirmation forms may be open per user"),
        "{frame}"
    );
    // The cap is this user's: another user of the tenant is still asked.
    let bob = s.token_with(LOCAL, &["--sub", "bob"]);
    let bobs = initialize(&s, &bob, "my-agent").await;
    let mut other = Call::start(&s, &bob, &bobs, note(98)).await;
    other.question().await;
    drop(other);
    drop(calls);
    // Each closed stream closes its question, well before the 5-minute wait ends.
    let mut call = wait_for_async(Duration::from_secs(10), async || {
        Call::try_start(&s, &token, &id, note(100))
            .await
            .map_err(|still| format!("still refused: {}", still.text))
    })
    .await;
    call.question().await;
}

/// A question whose waiter died with its instance (opened through the store, never
/// waited on or closed) is deleted by a running bridge's sweep once it has expired.
#[tokio::test]
async fn a_running_bridge_sweeps_the_expired_question_of_a_dead_instance() {
    use cyberos_mcp_bridge::adapters::sqlite::SqliteStore;
    use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
    use cyberos_mcp_bridge::domain::TenantId;
    use cyberos_mcp_bridge::domain::session::QuestionKey;
    use cyberos_mcp_bridge::ports::ClientAnswers;
    use sqlx::Connection;

    let dir = tempfile::tempdir().unwrap();
    let s = Server::start_at(dir.path(), &[]);
    let path = dir.path().join("bridge.sqlite3");
    let dead = SqliteStore::open(&path, std::sync::Arc::new(SystemClock))
        .await
        .unwrap();
    let key = QuestionKey {
        session: "gone".into(),
        request: "cyberos-e-dead".into(),
    };
    let tenant = TenantId::parse(LOCAL).unwrap();
    assert!(
        dead.open(&tenant, "someone", &key, Duration::ZERO)
            .await
            .unwrap()
    );
    drop(dead);
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
    let mut db = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    // The bridge sweeps every 5 s.
    wait_for_async(Duration::from_secs(20), async || {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM client_answers")
            .fetch_one(&mut db)
            .await
            .unwrap();
        if left == 0 {
            return Ok(());
        }
        Err(format!("not swept: {}", s.log()))
    })
    .await;
    // The sweep logs after it deletes, and the line is written in a batch after that.
    let log = s.log_with("client answers sweep", Duration::from_secs(5));
    assert!(log.contains("client answers sweep"), "{log}");
}

/// SIGTERM while a call waits for the user's answer: a stream with no task to hand over
/// waits out the runs' grace, then ends with the "shutting down" error (nothing was
/// written), and the bridge exits 0.
#[tokio::test]
async fn sigterm_ends_a_call_waiting_for_the_user_with_the_shutting_down_error() {
    let mut s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let id = initialize(&s, &token, "my-agent").await;
    let mut call = Call::start(&s, &token, &id, note(9)).await;
    call.question().await;
    s.sigterm();
    let out = call.response().await;
    let data = assert_envelope(&out, -32050, "upstream_unavailable");
    assert_eq!(data["message"], "the bridge is shutting down", "{out}");
    assert_eq!(s.wait_exit().code(), Some(0), "{}", s.log());
}
