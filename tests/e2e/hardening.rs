//! Hostile and unlucky inputs (#14): each test fails on the bridge before its fix.

use std::time::Instant;

use serde_json::json;

use crate::support::binary::binary;
use crate::support::http_server::Server;

const TENANT: &str = "00000000-0000-4000-8000-0000000000aa";

/// What a terminal or a log viewer would act on or reorder.
fn inert(text: &str) -> bool {
    !text.chars().any(|c| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

#[tokio::test]
async fn client_strings_come_back_escaped_in_messages_and_logs() {
    let s = Server::start(&[]);
    let token = s.token(TENANT, None);
    let evil = "x\u{1b}[2J\u{7}\u{202e}lave\r\nforged: line";
    let tool = s.call(&token, evil, json!({})).await;
    let message = tool["error"]["data"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.starts_with("unknown tool: x"), "{message}");
    let method = s.rpc(&token, 2, evil, json!({})).await;
    let arg = s
        .call(&token, "cyberos.skill.list_skills", json!({ evil: 1 }))
        .await;
    for resp in [&tool, &method, &arg] {
        let text = resp["error"]["data"]["message"].as_str().unwrap();
        assert!(
            text.contains("\\u{001b}") || text.contains("\\u{202e}"),
            "{text:?}"
        );
    }
    for resp in [&tool, &method, &arg] {
        // Every string of the error: the message, data.message, the hint, the pointer.
        let mut strings = Vec::new();
        collect_strings(&resp["error"], &mut strings);
        assert!(strings.len() >= 3, "{resp}");
        for text in strings {
            assert!(
                inert(&text),
                "raw control or bidi characters: {text:?} in {resp}"
            );
        }
    }
    let log = s.log();
    assert!(inert(&log), "raw control or bidi characters in the log");
    assert!(
        !log.contains("\nforged: line"),
        "a client string forged a log line"
    );
}

#[tokio::test]
async fn cuo_stderr_is_drained_whatever_it_writes() {
    // Before serving, the child writes 64 MiB without a newline, a line that is not
    // UTF-8, escapes, and 1 MiB of ordinary lines: more than a pipe holds, so a bridge
    // that stops draining (or buffers a line whole) hangs the child or grows by 64 MiB.
    let script = format!(
        "head -c 67108864 /dev/zero | tr '\\000' x >&2; printf '\\n\\377\\376 not utf-8\\n\\033[31mred\\r\\n' >&2; \
         yes 'an ordinary log line' | head -c 1048576 >&2; exec '{}' cuo-runner",
        binary()
    );
    let command = shell_words::join(["sh", "-c", &script]);
    let s = Server::start(&["--cuo-command", &command]);
    let token = s.token(TENANT, None);
    let started = Instant::now();
    let resp = s.call(&token, "cyberos.cuo.list_personas", json!({})).await;
    assert!(
        resp["result"]["structuredContent"]["personas"].is_array(),
        "{resp} after {:?}\n{}",
        started.elapsed(),
        tail(&s.log())
    );
    let hwm_kib = crate::support::peak_rss_kib(s.pid());
    assert!(
        hwm_kib < 60 * 1024,
        "peak RSS {hwm_kib} KiB: the long line was buffered"
    );
    let log = s.log();
    assert!(log.contains("an ordinary log line"), "{}", tail(&log));
    assert!(
        log.contains("not utf-8"),
        "the non-UTF-8 line is logged lossily"
    );
    assert!(inert(&log), "raw escapes from the child reached the log");
}

fn collect_strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[tokio::test]
async fn a_repeated_single_value_header_is_refused() {
    let s = Server::start(&[]);
    let good = s.token(TENANT, None);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    for (name, first, second) in [
        (
            "authorization",
            format!("Bearer {good}"),
            "Bearer forged".to_owned(),
        ),
        (
            "mcp-protocol-version",
            "2025-11-25".into(),
            "2025-06-18".into(),
        ),
        (
            "content-type",
            "application/json".into(),
            "text/plain".into(),
        ),
    ] {
        let mut req = s
            .client
            .post(s.url("/mcp"))
            .header("accept", "application/json")
            .body(body.clone());
        if name != "authorization" {
            req = req.header("authorization", format!("Bearer {good}"));
        }
        if name != "content-type" {
            req = req.header("content-type", "application/json");
        }
        let reply = s.send(req.header(name, first).header(name, second)).await;
        assert_eq!(reply.status, 400, "{name}: {}", reply.json());
        assert_eq!(reply.json()["error"]["data"]["class"], "input_validation");
    }
}

/// `/readyz` is unauthenticated: a flood of probes costs one store and one CUO check a
/// second.
#[tokio::test(start_paused = true)]
async fn readiness_probes_share_one_store_check_a_second() {
    use crate::support::fakes::{
        CallLog, FixedClock, InMemoryAudit, InMemoryLedger, InMemoryTasks, Recorded, ScriptedCuo,
        StaticSkills,
    };
    use axum::body::Body;
    use cyberos_mcp_bridge::app::edge::http::{HttpSettings, Limits, OriginPolicy, router};
    use cyberos_mcp_bridge::app::service::identity::{Identity, StdioToken};
    use cyberos_mcp_bridge::app::{App, Settings};
    use std::sync::Arc;
    use tower::ServiceExt;

    let log = CallLog::default();
    let ports = cyberos_mcp_bridge::ports::Ports {
        tasks: Recorded::new(InMemoryTasks::default(), &log),
        cuo: Recorded::new(ScriptedCuo, &log),
        memory: Recorded::new(InMemoryAudit::default(), &log),
        skills: Recorded::new(
            StaticSkills::new(crate::support::fakes::Behaviour::Answer),
            &log,
        ),
        clock: Arc::new(FixedClock(
            cyberos_mcp_bridge::domain::Timestamp::from_unix_millis(0),
        )),
        ledger: Recorded::new(InMemoryLedger::default(), &log),
        answers: Arc::new(cyberos_mcp_bridge::adapters::unavailable::Unavailable::new(
            cyberos_mcp_bridge::domain::Upstream::TaskStore,
            "no answers in this test",
        )),
        approvals: Arc::new(cyberos_mcp_bridge::adapters::unavailable::Unavailable::new(
            cyberos_mcp_bridge::domain::Upstream::TaskStore,
            "no approvals in this test",
        )),
    };
    let identity = Identity::new(
        Arc::new(crate::support::fakes::StaticTokens),
        StdioToken::None,
    );
    let app = App::new(ports, Settings::default(), identity);
    let settings = HttpSettings {
        public_url: "http://127.0.0.1:3000/mcp".into(),
        policy: OriginPolicy {
            loopback: true,
            public_origin: "http://127.0.0.1:3000".into(),
            cors: vec![],
        },
        authorization_servers: vec![],
        limits: Limits::default(),
        sessions: cyberos_mcp_bridge::app::edge::http::SessionKey::new(&[7; 32]),
        approval_trust: cyberos_mcp_bridge::app::edge::http::PageTrust::None,
    };
    let routes = router(app, settings, tokio_util::sync::CancellationToken::new());
    let probe = |routes: cyberos_mcp_bridge::app::edge::http::Routes| async move {
        let req = axum::http::Request::get("/readyz")
            .header("host", "127.0.0.1:3000")
            .body(Body::empty())
            .unwrap();
        routes.oneshot(req).await.unwrap().status().as_u16()
    };
    let burst: Vec<_> = (0..50)
        .map(|_| tokio::spawn(probe(routes.clone())))
        .collect();
    for p in burst {
        assert_eq!(p.await.unwrap(), 200);
    }
    // Exactly one check of each for the burst, and nothing else asked.
    let checks = || {
        (
            log.count("tasks.check"),
            log.count("cuo.check"),
            log.calls().len(),
        )
    };
    assert_eq!(checks(), (1, 1, 2), "{:?}", log.calls());
    // The paused clock moves past the answer's second of reuse.
    tokio::time::advance(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        probe(routes.clone()).await,
        200,
        "a stale answer is checked again"
    );
    assert_eq!(checks(), (2, 2, 4), "{:?}", log.calls());
}
