//! Waits for tasks and `tasks/*` are bounded per tenant (#14 item 6): a tenant's waits
//! hold no in-flight slot and only its own share of the wait pool, and its task calls
//! count against its rate.

use serde_json::json;

use super::{LOCAL, OTHER, start_task};
use crate::support::binary::paced;
use crate::support::http_server::{Server, error_body, held_task_result, rpc};

#[tokio::test]
async fn one_tenants_waits_neither_starve_others_nor_exceed_its_share() {
    let s = Server::start_env(
        &["--cuo-command", &paced(3000)],
        &[
            ("CYBEROS_HTTP_MAX_INFLIGHT", "2"),
            ("CYBEROS_HTTP_MAX_WAITS_PER_TENANT", "2"),
        ],
    );
    let a = s.token(LOCAL, None);
    let b = s.token(OTHER, None);
    let id = start_task(&s, &a).await;
    // The first tenant fills its waits (as many as there are in-flight slots).
    let held = [
        held_task_result(&s, &a, &id).await,
        held_task_result(&s, &a, &id).await,
    ];
    // Its next wait is refused, clearly, with when to retry.
    let refused = s
        .post(Some(&a), &rpc(7, "tasks/result", json!({"taskId": id})))
        .await;
    let frame = error_body(&refused, 429, -32050, "upstream_unavailable");
    assert_eq!(frame["id"], 7);
    assert_eq!(
        frame["error"]["data"]["message"],
        "too many requests waiting for tasks"
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    // Another tenant is served: plain requests and a wait of its own.
    let list = s.post(Some(&b), &rpc(2, "tools/list", json!({}))).await;
    assert_eq!(list.status, 200, "{}", list.text);
    let own = start_task(&s, &b).await;
    let other = held_task_result(&s, &b, &own).await;
    // So is the first tenant's own plain request.
    let get = s
        .post(Some(&a), &rpc(3, "tasks/get", json!({"taskId": id})))
        .await;
    assert_eq!(get.status, 200, "{}", get.text);
    for h in held {
        h.abort();
    }
    other.abort();
}

#[tokio::test]
async fn task_calls_count_against_the_tenant_rate() {
    let s = Server::start_env(
        &["--cuo-command", &paced(3000)],
        // One token per 20 s: a slow machine cannot refill the bucket during the test.
        &[("CYBEROS_HTTP_CALL_RATE", "0.05/3")],
    );
    let t = s.token(LOCAL, None);
    let id = start_task(&s, &t).await;
    let get = rpc(4, "tasks/get", json!({"taskId": id}));
    for _ in 0..2 {
        assert_eq!(s.post(Some(&t), &get).await.status, 200);
    }
    let limited = s.post(Some(&t), &get).await;
    let frame = error_body(&limited, 429, -32050, "upstream_unavailable");
    assert_eq!(frame["id"], 4);
    assert!(limited.header("retry-after").is_some());
    // Other tenants keep their own rate.
    let other = s.token(OTHER, None);
    let list = rpc(5, "tasks/list", json!({}));
    assert_eq!(s.post(Some(&other), &list).await.status, 200);
}

#[tokio::test]
async fn a_resumed_stream_takes_one_of_the_tenants_waits() {
    let s = Server::start_env(
        &["--cuo-command", &paced(3000)],
        &[("CYBEROS_HTTP_MAX_WAITS_PER_TENANT", "1")],
    );
    let a = s.token(LOCAL, None);
    let id = start_task(&s, &a).await;
    // The priming id of a `tasks/result` with request id 1 and no progress token.
    let pair = data_encoding::BASE64URL_NOPAD.encode(b"[1,null]");
    let last = format!("{id}.0.r.{pair}");
    let get = || {
        s.client
            .get(s.url("/mcp"))
            .header("accept", "text/event-stream")
            .header("authorization", format!("Bearer {a}"))
            .header("last-event-id", &last)
    };
    let held = get().send().await.unwrap();
    assert_eq!(held.status(), 200);
    let refused = s.send(get()).await;
    let frame = error_body(&refused, 429, -32050, "upstream_unavailable");
    assert_eq!(frame["id"], 1);
    drop(held);
}
