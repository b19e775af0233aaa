//! The approval page (`/approve/<id>`): where a user approves or denies, out of band, a
//! call their host could not ask them about (`domain::approval`).
//!
//! The person must be the call's subject in the call's tenant: an OpenID Connect login
//! proves it (`approve/login.rs`) when `--approval-client-id` is set; otherwise, with
//! `--dev` on loopback, the page trusts the local dev subject (as `--dev` trusts this
//! machine). No cookie: the login's state and
//! the one-time token the form carries live in the store, each used once, bound to the
//! approval and to the subject proved. A `GET` never decides anything. The page has no
//! script, may not be framed, and is never cached.

mod login;
mod page;
pub(super) mod trust;

pub use login::OidcLogin;
pub use trust::PageTrust;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

use super::shared::Shared;
use crate::domain::approval::{
    Approval, ApprovalId, PageSecret, SECRET_LIFETIME_MS, SecretKind, Verdict,
};
use page::{digest, escape, page, store_down};

/// The page's path prefix; an approval's link is this followed by its id.
pub const PREFIX: &str = "/approve/";

/// `GET /approve/<id>`: the call, and a way to decide it once the person is known.
pub(super) async fn show(State(s): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    if let Err(wait) = s.gauges.take_page() {
        return too_many(wait);
    }
    let Some(id) = ApprovalId::parse(&id) else {
        return unknown();
    };
    let approval = match s.app.ports().approvals.find(&id).await {
        Ok(Some(a)) => a,
        Ok(None) => return unknown(),
        Err(e) => return store_down(&e),
    };
    match &s.approval_trust {
        PageTrust::Dev { tenant, subject } => {
            if !approval.may_be_decided_by(tenant, subject) {
                return page(
                    StatusCode::FORBIDDEN,
                    "Not yours to decide",
                    "<p>This call was made by another user. This bridge runs with <code>--dev</code> and trusts only the local dev user; the call's own user must approve it where they can sign in.</p>",
                );
            }
            let note = "<p class=\"note\">This bridge runs with <code>--dev</code> on this machine, so it trusts whoever can open this page here (the dev key is on this disk) and asks for no sign-in.</p>";
            decision_page(&s, &approval, subject, note).await
        }
        PageTrust::Oidc(login) => {
            let ports = s.app.ports();
            login
                .start(&*ports.approvals, &*ports.clock, &approval)
                .await
        }
        PageTrust::None => page(
            StatusCode::OK,
            "Approve at a terminal",
            &format!(
                "<p>This bridge has no sign-in configured for approvals. To decide this call, run <code>cyberos-mcp-bridge approve {id}</code> (or <code>deny {id}</code>) in a terminal where the bridge's store is reachable.</p>"
            ),
        ),
    }
}

/// The page with the call and the Approve and Deny forms, for `subject` (proved), with a
/// fresh one-time form token bound to it.
async fn decision_page(s: &Shared, approval: &Approval, subject: &str, note: &str) -> Response {
    if !approval.decidable(s.app.ports().clock.now()) {
        return already_decided(approval);
    }
    let token = data_encoding::HEXLOWER.encode(&crate::support::random::random_bytes::<32>());
    let secret = PageSecret {
        kind: SecretKind::Form,
        digest: digest(&token),
        approval: approval.id,
        tenant: approval.binding.tenant,
        subject: Some(subject.to_owned()),
        payload: String::new(),
        expires_at: s.app.ports().clock.now().plus_millis(SECRET_LIFETIME_MS),
    };
    if let Err(e) = s.app.ports().approvals.keep_secret(&secret).await {
        return store_down(&e);
    }
    let b = &approval.binding;
    let tool = b.tool.spec();
    let pretty = serde_json::from_str::<serde_json::Value>(&approval.arguments)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|_| approval.arguments.clone());
    let body = format!(
        "<p>An assistant asked to run a tool that changes durable state. It did not run: it waits for your decision.</p>\
         <dl><dt>Tool</dt><dd>{title} (<code>{name}</code>)</dd>\
         <dt>Tenant</dt><dd><code>{tenant}</code></dd>\
         <dt>User</dt><dd><code>{subject}</code></dd>\
         <dt>Expires</dt><dd>{expires}</dd></dl>\
         <h2>Arguments</h2><pre>{pretty}</pre>\
         <details><summary>Exact JSON (canonical, as hashed)</summary><pre>{exact}</pre></details>\
         <form method=\"post\" action=\"{PREFIX}{id}\">\
         <input type=\"hidden\" name=\"token\" value=\"{token}\">\
         <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button> \
         <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form>{note}",
        title = escape(tool.title),
        name = escape(b.tool.name()),
        tenant = b.tenant,
        subject = escape(subject),
        expires = approval.expires_at.to_rfc3339(),
        pretty = escape(&pretty),
        exact = escape(&approval.arguments),
        id = approval.id,
    );
    page(StatusCode::OK, "Approve this call?", &body)
}

/// `POST /approve/<id>`: the decision of a form, with its one-time token.
pub(super) async fn decide(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(wait) = s.gauges.take_page() {
        return too_many(wait);
    }
    let Some(id) = ApprovalId::parse(&id) else {
        return unknown();
    };
    let (mut token, mut decision) = (None, None);
    for (k, v) in form_urlencoded::parse(&body) {
        match &*k {
            "token" if token.is_none() => token = Some(v.into_owned()),
            "decision" if decision.is_none() => decision = Some(v.into_owned()),
            _ => {}
        }
    }
    let approve = match decision.as_deref() {
        Some("approve") => true,
        Some("deny") => false,
        _ => return refused("The form did not say Approve or Deny."),
    };
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return refused("The form carried no one-time token. Open the link again.");
    };
    let approvals = &s.app.ports().approvals;
    let secret = match approvals
        .take_secret(SecretKind::Form, &digest(&token))
        .await
    {
        Ok(Some(secret)) if secret.approval == id => secret,
        Ok(_) => {
            return refused(
                "This form was used already, expired, or belongs to another approval. Open the link again.",
            );
        }
        Err(e) => return store_down(&e),
    };
    let Some(subject) = secret.subject else {
        return refused("This form was not issued after a sign-in. Open the link again.");
    };
    let approval = match approvals.find(&id).await {
        Ok(Some(a)) => a,
        Ok(None) => return unknown(),
        Err(e) => return store_down(&e),
    };
    if !approval.may_be_decided_by(&secret.tenant, &subject) {
        return refused("Only the user who made the call may decide it.");
    }
    match approvals
        .decide(&secret.tenant, &id, &subject, approve)
        .await
    {
        Ok(true) if approve => {
            tracing::info!(approval = %id, tool = approval.binding.tool.name(), "call approved");
            page(
                StatusCode::OK,
                "Approved",
                "<p>The call is approved. Tell the assistant to call the tool again with the same arguments; the approval works once, within its life.</p>",
            )
        }
        Ok(true) => {
            tracing::info!(approval = %id, tool = approval.binding.tool.name(), "call denied");
            page(
                StatusCode::OK,
                "Denied",
                "<p>The call is denied. If the assistant tries it again, it is told that you declined.</p>",
            )
        }
        Ok(false) => already_decided(&approval),
        Err(e) => store_down(&e),
    }
}

fn already_decided(approval: &Approval) -> Response {
    let said = match approval.verdict {
        Verdict::Approved => "It was approved already.",
        Verdict::Denied => "It was denied already.",
        Verdict::Pending => "It has expired.",
    };
    page(
        StatusCode::CONFLICT,
        "Already decided",
        &format!("<p>This call can no longer be decided. {said}</p>"),
    )
}

/// The one answer for an id that is malformed, unknown, expired or used: nothing tells
/// them apart.
fn unknown() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "No such approval",
        "<p>This approval does not exist, has expired, or was used. Ask the assistant to call the tool again for a new link.</p>",
    )
}

fn refused(why: &str) -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Refused",
        &format!("<p>{}</p>", escape(why)),
    )
}

fn too_many(wait: std::time::Duration) -> Response {
    let mut resp = page(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests",
        "<p>Too many approval pages were asked for just now; try again in a moment.</p>",
    );
    let secs = wait.as_secs().max(1).to_string();
    if let Ok(v) = HeaderValue::from_str(&secs) {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// `GET /approve/callback`: the identity provider's redirect back after a login.
pub(super) async fn callback(State(s): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    if let Err(wait) = s.gauges.take_page() {
        return too_many(wait);
    }
    let PageTrust::Oidc(login) = &s.approval_trust else {
        return unknown();
    };
    let Some((approval, tenant, subject)) = login
        .finish(&*s.app.ports().approvals, query.as_deref().unwrap_or(""))
        .await
    else {
        return refused("The sign-in did not complete. Open the link again.");
    };
    if !approval.may_be_decided_by(&tenant, &subject) {
        return refused("You signed in as another user than the one who made this call.");
    }
    decision_page(&s, &approval, &subject, "").await
}
