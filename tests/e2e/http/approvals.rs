//! Approvals for hosts that cannot ask the user (#47): a stateless HTTP client's
//! `append_audit` is refused with a link; the page, trusting the local dev user under
//! `--dev` on loopback, decides it with a one-time form token; the identical retry
//! consumes the verdict once.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::binary::{Bridge, binary};
use crate::support::http_server::Server;

const APPEND: &str = "cyberos.memory.append_audit";
const LOCAL: &str = "00000000-0000-4000-8000-000000000001";
const OTHER: &str = "00000000-0000-4000-8000-0000000000b2";

fn args(n: u32) -> Value {
    json!({"kind": "note", "body": {"n": n, "html": "<b>bold</b>"}})
}

/// The approval link in a refused call's hint.
fn link(frame: &Value) -> String {
    let data = &frame["error"]["data"];
    assert_eq!(data["class"], "authz_denied", "{frame}");
    let hint = data["hint"].as_str().unwrap();
    let start = hint
        .find("http://")
        .unwrap_or_else(|| panic!("no link: {hint}"));
    hint[start..].split_whitespace().next().unwrap().to_owned()
}

/// GETs `url` as a browser (or a model's fetch tool) would: no cookies, no scripts.
async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = reqwest::get(url).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

/// The one-time token of a page's form.
fn form_token(page: &str) -> String {
    let at = page.find("name=\"token\" value=\"").expect("a form token") + 20;
    page[at..at + 64].to_owned()
}

async fn post(url: &str, form: &str) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_owned())
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

fn succeeded(frame: &Value) -> bool {
    frame["result"]["isError"] == false
        && frame["result"]["structuredContent"]["audit_id"].is_string()
}

#[tokio::test]
async fn an_approved_call_runs_once_on_its_identical_retry() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let refused = s.call(&token, APPEND, args(1)).await;
    let url = link(&refused);
    assert!(url.starts_with(&s.url("/approve/")), "{url}");
    assert!(
        refused["error"]["data"]["hint"]
            .as_str()
            .unwrap()
            .contains("call the tool again with exactly the same arguments"),
        "{refused}"
    );
    // Asking again before the user decides gives the same link.
    assert_eq!(link(&s.call(&token, APPEND, args(1)).await), url);

    // A GET (a browser, or a model's fetch tool) shows the call and decides nothing.
    let (status, headers, page) = get(&url).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["cache-control"], "no-store");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    assert!(!page.contains("<script"), "{page}");
    assert!(page.contains(APPEND) && page.contains(LOCAL) && page.contains("local-dev"));
    // The arguments are shown escaped, never as markup.
    assert!(
        page.contains("&lt;b&gt;bold&lt;/b&gt;") && !page.contains("<b>bold"),
        "{page}"
    );
    let (_, _, again) = get(&url).await;
    assert_eq!(
        link(&s.call(&token, APPEND, args(1)).await),
        url,
        "GETs approve nothing"
    );

    // A POST needs the form's one-time token.
    let form = form_token(&page);
    let (status, _) = post(&url, "decision=approve").await;
    assert_eq!(status, 403);
    let (status, _) = post(&url, &format!("token={}&decision=approve", "0".repeat(64))).await;
    assert_eq!(status, 403);
    let (status, body) = post(&url, &format!("token={form}&decision=approve")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Approved"), "{body}");
    // Used once: the same token, or the other page's token, after the decision.
    let (status, _) = post(&url, &format!("token={form}&decision=deny")).await;
    assert_eq!(status, 403, "a used form token is refused");
    let (status, body) = post(&url, &format!("token={}&decision=deny", form_token(&again))).await;
    assert_eq!(status, 409, "decided already: {body}");

    // Other arguments are not approved by it, and its page's token decides nothing else.
    let other = link(&s.call(&token, APPEND, args(2)).await);
    assert_ne!(other, url);
    let (_, _, other_page) = get(&other).await;
    let (status, _) = post(
        &url,
        &format!("token={}&decision=approve", form_token(&other_page)),
    )
    .await;
    assert_eq!(status, 403, "a token of another approval's page");
    // The identical retry runs, once.
    let ran = s.call(&token, APPEND, args(1)).await;
    assert!(succeeded(&ran), "{ran}");
    let after = s.call(&token, APPEND, args(1)).await;
    assert_ne!(link(&after), url, "an approval works once");
    s.log_with(
        "confirmed_by=\"approval\"",
        std::time::Duration::from_secs(5),
    );
    // A used approval's page is the same 404 as an unknown id's.
    let (status, _, used) = get(&url).await;
    let (unknown_status, _, unknown) = get(&s.url(&format!("/approve/{}", "a".repeat(32)))).await;
    assert_eq!((status, unknown_status), (404, 404));
    assert_eq!(used, unknown);
    let (status, _, _) = get(&s.url("/approve/not-an-id")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_denied_call_is_refused_as_declined_once() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let url = link(&s.call(&token, APPEND, args(3)).await);
    let (_, _, page) = get(&url).await;
    let (status, body) = post(&url, &format!("token={}&decision=deny", form_token(&page))).await;
    assert_eq!(status, 200, "{body}");
    let declined = s.call(&token, APPEND, args(3)).await;
    assert_eq!(
        declined["error"]["data"]["class"], "authz_denied",
        "{declined}"
    );
    assert!(
        declined["error"]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("the user declined"),
        "{declined}"
    );
    // The verdict was used: the next try asks again.
    assert_ne!(link(&s.call(&token, APPEND, args(3)).await), url);
}

#[tokio::test]
async fn concurrent_retries_of_one_approval_run_once() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    let url = link(&s.call(&token, APPEND, args(4)).await);
    let (_, _, page) = get(&url).await;
    let (status, _) = post(
        &url,
        &format!("token={}&decision=approve", form_token(&page)),
    )
    .await;
    assert_eq!(status, 200);
    let retries = (0..4).map(|_| s.call(&token, APPEND, args(4)));
    let frames = futures::future::join_all(retries).await;
    let ran = frames.iter().filter(|f| succeeded(f)).count();
    assert_eq!(ran, 1, "{frames:?}");
    for f in frames.iter().filter(|f| !succeeded(f)) {
        assert_eq!(f["error"]["data"]["class"], "authz_denied", "{f}");
    }
}

#[tokio::test]
async fn another_users_approval_is_not_theirs_to_see_decide_or_use() {
    let s = Server::start(&[]);
    let local = s.token(LOCAL, None);
    let other = s.token(OTHER, None);
    // Tenant B's call: the page (trusting only the local dev user) will not decide it.
    let theirs = link(&s.call(&other, APPEND, args(5)).await);
    let (status, _, page) = get(&theirs).await;
    assert_eq!(status, 403, "{page}");
    assert!(
        !page.contains("name=\"token\""),
        "no form for another user: {page}"
    );
    // The local user's approval of the same arguments does not let tenant B's retry run.
    let mine = link(&s.call(&local, APPEND, args(5)).await);
    assert_ne!(mine, theirs);
    let (_, _, page) = get(&mine).await;
    let (status, _) = post(
        &mine,
        &format!("token={}&decision=approve", form_token(&page)),
    )
    .await;
    assert_eq!(status, 200);
    let b = s.call(&other, APPEND, args(5)).await;
    assert_eq!(link(&b), theirs, "tenant B is still asked: {b}");
    // Another subject of the local tenant neither.
    let bob = s.token_with(LOCAL, &["--sub", "bob"]);
    assert!(!succeeded(&s.call(&bob, APPEND, args(5)).await));
    assert!(succeeded(&s.call(&local, APPEND, args(5)).await));
}

#[test]
fn a_stdio_host_that_cannot_ask_is_approved_at_the_terminal() {
    let data = tempfile::tempdir().unwrap();
    let mut bridge = Bridge::spawn_at(data.path(), &["--dev"], &[]);
    bridge.initialize();
    let refused = bridge.call(APPEND, args(6));
    let hint = refused["error"]["data"]["hint"]
        .as_str()
        .unwrap()
        .to_owned();
    let at = hint
        .find("cyberos-mcp-bridge approve ")
        .expect("the terminal command")
        + 27;
    let id = hint[at..at + 32].to_owned();

    // `approve` shows the call and records nothing unless the person says yes.
    let run = |answer: &str, verb: &str| {
        let mut child = Command::new(binary())
            .arg("--data-dir")
            .arg(data.path())
            .args(["--dev", verb, &id])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(answer.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let no = run("n\n", "approve");
    assert!(!no.status.success(), "{no:?}");
    let shown = String::from_utf8_lossy(&no.stdout);
    assert!(
        shown.contains(APPEND) && shown.contains("\"n\": 6"),
        "{shown}"
    );
    let still = bridge.call(APPEND, args(6));
    assert_eq!(still["error"]["data"]["class"], "authz_denied", "{still}");
    let yes = run("y\n", "approve");
    assert!(yes.status.success(), "{yes:?}");
    let ran = bridge.call(APPEND, args(6));
    assert!(succeeded(&ran), "{ran}");
    // Decided and used: a second approve finds nothing.
    assert!(!run("y\n", "approve").status.success());
    bridge.close();
}

#[tokio::test]
async fn pending_approvals_and_page_requests_are_bounded() {
    let s = Server::start(&[]);
    let token = s.token(LOCAL, None);
    for n in 100..108 {
        link(&s.call(&token, APPEND, args(n)).await);
    }
    // The ninth pending approval of one user: 429 with Retry-After, nothing recorded.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": APPEND, "arguments": args(108)}});
    let reply = s.post(Some(&token), &body).await;
    assert_eq!(reply.status, 429, "{}", reply.text);
    assert!(reply.header("retry-after").is_some());
    assert_eq!(
        reply.frame()["error"]["data"]["class"],
        "upstream_unavailable"
    );
    // Another user is not held by it.
    let bob = s.token_with(LOCAL, &["--sub", "bob"]);
    link(&s.call(&bob, APPEND, args(108)).await);

    // A flood of page requests (unknown ids) is shed with 429, never served unbounded.
    let unknown = s.url(&format!("/approve/{}", "b".repeat(32)));
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..150 {
        statuses.push(client.get(&unknown).send().await.unwrap().status().as_u16());
    }
    assert!(statuses.contains(&429), "no request was shed: {statuses:?}");
    assert!(
        statuses.iter().all(|st| *st == 404 || *st == 429),
        "{statuses:?}"
    );
}

/// With `--approval-client-id` the page signs in at the `--jwt-issuer`: the bridge starts
/// (its sign-in's HTTP client gets a TLS provider even when it is the first client made),
/// and the link sends the person to the issuer's authorization endpoint by the code flow
/// with PKCE S256, a nonce and scope `openid`, back to `/approve/callback`.
#[tokio::test]
async fn a_configured_sign_in_sends_the_user_to_the_issuer() {
    let issuer = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let iss = std::sync::Arc::clone(&issuer);
    let discovery = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || {
                let iss = iss.get().cloned().unwrap_or_default();
                async move {
                    axum::Json(json!({
                        "issuer": iss,
                        "authorization_endpoint": format!("{iss}/authorize"),
                        "token_endpoint": format!("{iss}/token"),
                        "jwks_uri": format!("{iss}/jwks"),
                        "response_types_supported": ["code"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"]
                    }))
                }
            }),
        )
        .route(
            "/jwks",
            axum::routing::get(|| async { axum::Json(json!({"keys": []})) }),
        );
    let addr = crate::support::serve_http(discovery);
    issuer.set(format!("http://{addr}")).unwrap();
    let iss = issuer.get().unwrap();
    let s = Server::start(&["--jwt-issuer", iss, "--approval-client-id", "bridge-test"]);
    let token = s.token(LOCAL, None);
    let url = link(&s.call(&token, APPEND, args(7)).await);
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 303);
    let to = reqwest::Url::parse(resp.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(
        format!("{}{}", to.origin().ascii_serialization(), to.path()),
        format!("{iss}/authorize")
    );
    let q: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "bridge-test");
    assert_eq!(q["scope"], "openid");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["redirect_uri"], s.url("/approve/callback"));
    assert!(q.contains_key("code_challenge") && q.contains_key("nonce") && q.contains_key("state"));
    // The page did not fall back to --dev's trust: no form without the sign-in.
    let (_, _, page) = get(&url).await;
    assert!(!page.contains("name=\"token\""), "{page}");
}
