//! The checks of a POST before its body is read: Origin and Host (403), and the `Accept`
//! and `Content-Type` media types; and the bearer token it carries.

use axum::http::HeaderMap;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::response::Response;

use super::origin::{Origin, OriginPolicy};
use super::reply;

/// `MCP-Protocol-Version`, parsed once: a name looked up as text is parsed and hashed on
/// every request.
pub(super) const MCP_PROTOCOL_VERSION: axum::http::HeaderName =
    axum::http::HeaderName::from_static("mcp-protocol-version");

/// Headers that carry one value: a request with two of any is refused (400), so no check
/// reads one copy while another part of the stack reads the other.
const SINGLE: [axum::http::HeaderName; 7] = [
    axum::http::header::AUTHORIZATION,
    axum::http::header::HOST,
    axum::http::header::ORIGIN,
    CONTENT_TYPE,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    LAST_EVENT_ID,
];

/// `MCP-Session-Id` and `Last-Event-ID`: which session, and where a stream resumes.
const MCP_SESSION_ID: axum::http::HeaderName =
    axum::http::HeaderName::from_static("mcp-session-id");
const LAST_EVENT_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("last-event-id");

/// The first single-value header the request repeats, if any.
pub fn duplicated(headers: &HeaderMap) -> Option<&'static str> {
    // As many values as names: no header repeats at all, the usual case.
    if headers.len() == headers.keys_len() {
        return None;
    }
    SINGLE
        .iter()
        .find(|name| headers.get_all(*name).iter().nth(1).is_some())
        .map(|name| match name.as_str() {
            "authorization" => "Authorization",
            "host" => "Host",
            "origin" => "Origin",
            "content-type" => "Content-Type",
            "mcp-session-id" => "MCP-Session-Id",
            "last-event-id" => "Last-Event-ID",
            _ => "MCP-Protocol-Version",
        })
}

/// The Origin and Host checks (403).
pub fn admit(policy: &OriginPolicy, origin: Origin, headers: &HeaderMap) -> Option<Response> {
    if origin == Origin::Denied {
        return Some(reply::forbidden(
            "origin not allowed",
            "Browser pages may call this bridge only from its --public-url origin, a --cors-origin, or (on a loopback bind) localhost.",
        ));
    }
    if !policy.host_allowed(headers) {
        return Some(reply::forbidden(
            "host not allowed",
            "This bridge listens on a loopback address and answers only requests addressed to localhost, 127.0.0.1 or [::1].",
        ));
    }
    None
}

/// The client's product name from `User-Agent` (the token before its first `/` or space,
/// e.g. `claude-code` in `claude-code/2.1.332 (sdk-cli)`): stateless HTTP carries no
/// `clientInfo` after `initialize`, and hosts name themselves here the same way.
pub fn user_agent_product(headers: &HeaderMap) -> Option<&str> {
    let ua = headers.get(axum::http::header::USER_AGENT)?.to_str().ok()?;
    let product = ua.trim_start().split(['/', ' ']).next()?;
    (!product.is_empty() && product.len() <= 64).then_some(product)
}

/// The media types a client accepts for the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accept {
    /// `application/json` (or a wildcard covering it).
    pub json: bool,
    /// `text/event-stream` named explicitly (or `text/*`): streams are opt-in.
    pub sse: bool,
}

impl Accept {
    /// Reads the `Accept` headers; absent means anything, answered as JSON.
    pub fn parse(headers: &HeaderMap) -> Accept {
        let values = headers.get_all(ACCEPT);
        let mut iter = values.iter();
        let Some(first) = iter.next() else {
            return Accept {
                json: true,
                sse: false,
            };
        };
        // What MCP clients send (the spec has them list both), matched whole.
        if iter.next().is_none() && first.as_bytes() == b"application/json, text/event-stream" {
            return Accept {
                json: true,
                sse: true,
            };
        }
        let mut accept = Accept {
            json: false,
            sse: false,
        };
        for range in values
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
        {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            if refused {
                continue;
            }
            let is = |names: &[&str]| names.iter().any(|n| media.eq_ignore_ascii_case(n));
            if is(&["application/json", "application/*", "*/*"]) {
                accept.json = true;
            } else if is(&["text/event-stream", "text/*"]) {
                accept.sse = true;
            }
        }
        accept
    }

    /// Whether any response we could send is acceptable.
    pub fn any(self) -> bool {
        self.json || self.sse
    }
}

/// Whether the body is declared as JSON (`application/json`, any parameters).
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The token of an `Authorization: Bearer …` header; any other scheme counts as none.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    // UTF-8, not `to_str`'s visible ASCII, checked a word at a time rather than a byte at
    // a time (a token is a few hundred bytes): a token with other bytes is then refused
    // as a token, by the verifier, instead of read as none.
    let value =
        std::str::from_utf8(headers.get(axum::http::header::AUTHORIZATION)?.as_bytes()).ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::edge::http::origin::tests::headers;

    #[test]
    fn accept_headers_are_read_with_wildcards_and_q_zero() {
        let acc = |v: &str| Accept::parse(&headers(&[(ACCEPT, v)]));
        assert_eq!(
            acc("application/json, text/event-stream"),
            Accept {
                json: true,
                sse: true
            }
        );
        assert!(acc("*/*").json && !acc("*/*").sse);
        assert!(!acc("text/html").any());
        assert!(!acc("application/json;q=0").any());
        assert!(acc("text/event-stream").sse);
        assert!(Accept::parse(&HeaderMap::new()).json);
        let two = headers(&[
            (ACCEPT, "application/json, text/event-stream"),
            (ACCEPT, "application/json;q=0"),
        ]);
        assert!(Accept::parse(&two).sse, "a second Accept is read too");
    }

    #[test]
    fn repeated_single_value_headers_are_found() {
        let auth = axum::http::header::AUTHORIZATION;
        let once = headers(&[(auth.clone(), "Bearer a"), (ACCEPT, "a/b"), (ACCEPT, "c/d")]);
        assert_eq!(duplicated(&once), None);
        let twice = headers(&[(auth.clone(), "Bearer a"), (auth, "Bearer b")]);
        assert_eq!(duplicated(&twice), Some("Authorization"));
        let twice = headers(&[
            (MCP_PROTOCOL_VERSION, "2025-11-25"),
            (MCP_PROTOCOL_VERSION, "2025-11-25"),
        ]);
        assert_eq!(duplicated(&twice), Some("MCP-Protocol-Version"));
        for (name, shown) in [
            (MCP_SESSION_ID, "MCP-Session-Id"),
            (LAST_EVENT_ID, "Last-Event-ID"),
        ] {
            let twice = headers(&[(name.clone(), "a"), (name, "b")]);
            assert_eq!(duplicated(&twice), Some(shown));
        }
    }

    #[test]
    fn only_json_bodies_and_bearer_tokens_count() {
        assert!(is_json(&headers(&[(
            CONTENT_TYPE,
            "Application/JSON; charset=utf-8"
        )])));
        assert!(!is_json(&headers(&[(CONTENT_TYPE, "text/plain")])));
        assert!(!is_json(&HeaderMap::new()));
        let auth = axum::http::header::AUTHORIZATION;
        assert_eq!(
            bearer_token(&headers(&[(auth.clone(), "Bearer abc")])),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&headers(&[(auth.clone(), "bearer  abc ")])),
            Some("abc")
        );
        assert_eq!(bearer_token(&headers(&[(auth.clone(), "Basic abc")])), None);
        assert_eq!(bearer_token(&headers(&[(auth, "Bearer ")])), None);
    }

    #[test]
    fn the_user_agent_product_is_its_first_token() {
        let ua = axum::http::header::USER_AGENT;
        let product = |v: &str| user_agent_product(&headers(&[(ua.clone(), v)])).map(str::to_owned);
        assert_eq!(
            product("claude-code/2.1.332 (sdk-cli)").as_deref(),
            Some("claude-code")
        );
        assert_eq!(
            product("codex-mcp-client/0.171.0").as_deref(),
            Some("codex-mcp-client")
        );
        assert_eq!(product("node").as_deref(), Some("node"));
        assert_eq!(
            product(" python-httpx/0.28").as_deref(),
            Some("python-httpx")
        );
        assert_eq!(product("/1.0"), None);
        assert_eq!(product(&"x".repeat(65)), None);
        assert_eq!(user_agent_product(&HeaderMap::new()), None);
    }
}
