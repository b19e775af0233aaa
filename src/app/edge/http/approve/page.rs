//! The approval page's HTML: one escaped page with the security headers, and how the
//! store keeps the page's secrets (by digest).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use sha2::{Digest, Sha256};

use crate::domain::DomainError;

/// Hex SHA-256 of a secret's value: how the store keeps it.
pub(super) fn digest(value: &str) -> String {
    data_encoding::HEXLOWER.encode(&Sha256::digest(value.as_bytes()))
}

pub(super) fn store_down(e: &DomainError) -> Response {
    tracing::warn!(error = %e, "the approval page cannot reach the store");
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again",
        "<p>The bridge cannot reach its store right now; try again in a moment.</p>",
    )
}

/// The page's one style sheet, inline: the policy admits exactly this text by its hash.
const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0}\
pre{background:#f4f4f4;padding:.75rem;overflow:auto;border-radius:4px}\
button{font:inherit;padding:.4rem 1.2rem;margin-right:.5rem;border-radius:4px;border:1px solid #888;cursor:pointer}\
button[value=approve]{background:#1f6f3f;color:#fff;border-color:#1f6f3f}.note{color:#555;font-size:.9rem}";

/// The page's security headers: no script, no style but [`STYLE`], nothing loaded from
/// anywhere, no framing, no form target but this origin, no caching, no referrer (the
/// link is a capability).
fn csp() -> &'static str {
    static CSP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSP.get_or_init(|| {
        let hash = data_encoding::BASE64.encode(&Sha256::digest(STYLE.as_bytes()));
        format!(
            "default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'"
        )
    })
}

/// A whole HTML page with the security headers.
pub(super) fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{t} · CyberOS</title>\
         <style>{STYLE}</style></head>\
         <body><h1>{t}</h1>{body}</body></html>",
        t = escape(title)
    );
    let mut resp = Response::new(Body::from(html));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp()),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// `text` safe inside HTML text and double-quoted attributes.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            escape(r#"<script>"a" & 'b'</script>"#),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn every_page_forbids_scripts_framing_and_caching() {
        let resp = page(StatusCode::OK, "t", "");
        let h = resp.headers();
        let policy = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(policy.starts_with("default-src 'none'"), "{policy}");
        assert!(
            !policy.contains("unsafe") && !policy.contains("script-src"),
            "{policy}"
        );
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
    }

    #[tokio::test]
    async fn the_policy_admits_exactly_the_pages_style() {
        let resp = page(StatusCode::OK, "t", "");
        let policy = resp.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_owned();
        let html = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let html = std::str::from_utf8(&html).unwrap();
        let style = html
            .split("<style>")
            .nth(1)
            .unwrap()
            .split("</style>")
            .next()
            .unwrap();
        let hash = data_encoding::BASE64.encode(&Sha256::digest(style.as_bytes()));
        assert!(
            policy.contains(&format!("style-src 'sha256-{hash}'")),
            "{policy}"
        );
    }
}
