//! Optional sessions over stateless HTTP: a successful `initialize` gets a sealed
//! `MCP-Session-Id` that any instance sharing the key opens; it remembers the client; it
//! must come with a token of the same tenant and subject; forged, foreign and ended ids get
//! 404; `DELETE` ends one on every instance. On SQLite and on Postgres.

use serde_json::{Value, json};

use super::{LOCAL, OTHER, adr};
use crate::support::binary::paced;
use crate::support::http_server::{Reply, Server, rpc};
use crate::support::schema::check_frame;

pub(super) const SESSION: &str = "mcp-session-id";

pub(super) async fn post(s: &Server, token: &str, session: Option<&str>, body: &Value) -> Reply {
    let mut headers = vec![("user-agent", "node")];
    if let Some(id) = session {
        headers.push((SESSION, id));
    }
    s.post_with(Some(token), body.to_string(), &headers).await
}

/// `initialize` as `clientInfo.name` = `client`; returns the session id.
pub(super) async fn initialize(s: &Server, token: &str, client: &str) -> String {
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                      "clientInfo": {"name": client, "version": "1"}});
    let reply = post(s, token, None, &rpc(1, "initialize", init)).await;
    check_frame(&reply.frame(), Some("initialize"), false);
    let id = reply.header(SESSION).expect("a session id").to_owned();
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
    id
}

fn assert_not_found(reply: &Reply) {
    assert_eq!(reply.status, 404, "{}", reply.text);
    let frame = reply.json();
    assert_eq!(frame["error"]["code"], -32001, "{frame}");
    assert!(
        frame["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize again"),
        "{frame}"
    );
}

#[tokio::test]
async fn a_session_opened_on_one_instance_serves_on_another_until_deleted() {
    // The Postgres URL is made on a blocking thread (its setup runs a runtime of its own).
    let stores = tokio::task::spawn_blocking(crate::tasks::stores)
        .await
        .unwrap();
    for store in stores {
        let dir = tempfile::tempdir().unwrap();
        let pace = paced(100);
        let mut flags: Vec<&str> = store.iter().map(String::as_str).collect();
        flags.extend(["--cuo-command", &pace]);
        // One data dir: the same dev key and session key, as a cluster shares them.
        let a = Server::start_at(dir.path(), &flags);
        let b = Server::start_at(dir.path(), &flags);
        let token = a.token(LOCAL, None);
        let id = initialize(&a, &token, "claude-code").await;
        // On B, with A's session: the session remembers the client (a host that never
        // polls), so a plain long call waits for its result even from User-Agent `node`.
        let call = rpc(
            2,
            "tools/call",
            json!({"name": "cyberos.cuo.execute_workflow", "arguments": adr()}),
        );
        let out = post(&b, &token, Some(&id), &call).await.frame();
        check_frame(&out, Some("tools/call"), false);
        assert_eq!(
            out["result"]["structuredContent"]["steps_executed"], 3,
            "{out}"
        );
        // Without the session the same request gets the handle: nothing else remembered it.
        let out = post(&b, &token, None, &call).await.frame();
        assert_eq!(
            out["result"]["structuredContent"]["status"], "running",
            "{out}"
        );
        // Ended on A, refused on B.
        let ended = a
            .send(
                a.client
                    .delete(a.url("/mcp"))
                    .bearer_auth(&token)
                    .header(SESSION, &id),
            )
            .await;
        assert_eq!(ended.status, 204, "{}", ended.text);
        assert_not_found(&post(&b, &token, Some(&id), &rpc(3, "ping", json!({}))).await);
        // Requests without a session keep working.
        assert!(
            post(&b, &token, None, &rpc(4, "ping", json!({})))
                .await
                .frame()["result"]
                .is_object()
        );
    }
}

#[tokio::test]
async fn forged_foreign_and_replayed_session_ids_are_refused() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let id = initialize(&s, &token, "my-agent").await;
    let ping = rpc(2, "ping", json!({}));
    assert!(post(&s, &token, Some(&id), &ping).await.frame()["result"].is_object());
    // One character changed in the signed state.
    let (body, tag) = id.split_once('.').unwrap();
    let flipped = if body.ends_with('A') { 'B' } else { 'A' };
    let tampered = format!("{}{flipped}.{tag}", &body[..body.len() - 1]);
    assert_not_found(&post(&s, &token, Some(&tampered), &ping).await);
    assert_not_found(&post(&s, &token, Some("not-a-session"), &ping).await);
    // Another tenant's token, and the same tenant's other subject, replaying the id.
    assert_not_found(&post(&s, &s.token(OTHER, None), Some(&id), &ping).await);
    let bob = s.token_with(LOCAL, &["--sub", "bob"]);
    assert_not_found(&post(&s, &bob, Some(&id), &ping).await);
    // Only the session's own principal ends it.
    let foreign = s
        .send(
            s.client
                .delete(s.url("/mcp"))
                .bearer_auth(s.token(OTHER, None))
                .header(SESSION, &id),
        )
        .await;
    assert_eq!(foreign.status, 404, "{}", foreign.text);
    assert!(post(&s, &token, Some(&id), &ping).await.frame()["result"].is_object());
    let bare = s
        .send(s.client.delete(s.url("/mcp")).bearer_auth(&token))
        .await;
    assert_eq!(bare.status, 400, "{}", bare.text);
    let anonymous = s
        .send(s.client.delete(s.url("/mcp")).header(SESSION, &id))
        .await;
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.header("www-authenticate").is_some());
    // A failed initialize opens no session.
    let bad = rpc(
        5,
        "initialize",
        json!({"protocolVersion": "1999-01-01", "capabilities": {}}),
    );
    let reply = post(&s, &token, None, &bad).await;
    assert!(reply.header(SESSION).is_none(), "{}", reply.text);
}

#[tokio::test]
async fn opening_and_ending_sessions_and_answering_obey_the_tenant_rate() {
    // A burst of three, then one per 100 s: the fourth is refused however slow the rest.
    let s = Server::start(&["--http-call-rate", "0.01/3"]);
    let token = s.token(LOCAL, None);
    let end = |id: String| {
        s.send(
            s.client
                .delete(s.url("/mcp"))
                .bearer_auth(&token)
                .header(SESSION, id),
        )
    };
    let first = initialize(&s, &token, "loop").await;
    let second = initialize(&s, &token, "loop").await;
    assert_eq!(end(first).await.status, 204);
    let refused = [
        post(
            &s,
            &token,
            None,
            &rpc(
                7,
                "initialize",
                json!({"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "loop", "version": "1"}}),
            ),
        )
        .await,
        end(second.clone()).await,
        // An answer to a question nobody asked: refused by the rate before the store is
        // asked about it.
        post(
            &s,
            &token,
            Some(&second),
            &json!({"jsonrpc": "2.0", "id": 9, "result": {}}),
        )
        .await,
    ];
    for reply in refused {
        assert_eq!(reply.status, 429, "{}", reply.text);
        assert!(reply.header("retry-after").is_some(), "{}", reply.text);
        assert_eq!(
            reply.json()["error"]["data"]["class"],
            "upstream_unavailable"
        );
    }
    // The session the refused DELETE named is still open, and the rate is per tenant.
    assert!(
        post(&s, &token, Some(&second), &rpc(8, "ping", json!({})))
            .await
            .frame()["result"]
            .is_object()
    );
    initialize(&s, &s.token(OTHER, None), "other").await;
}
