//! What `check` prints is masked: a URL's password, fragment and every query value but
//! those of a few connection settings that never carry a credential, in the settings and
//! inside any text that names a URL (an HTTP client's error quotes the URL it called);
//! then every secret the configuration holds (those values, `--cuo-command`'s arguments,
//! `--cuo-env` values, the memory token) is replaced wherever it still appears.
//!
//! Query values are masked by default rather than by a list of credential names: such a
//! list (`token`, `password`, `api_key`, `sig` …) misses the names nobody foresaw
//! (`X-Amz-Signature`, `sv`, `code`), while the settings worth showing are few and known.

use crate::app::config::Config;

/// Query parameters shown as given: connection settings of Postgres and SQLite URLs that
/// name modes, paths, ports and labels, never a credential.
const SHOWN_PARAMETERS: [&str; 14] = [
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslnegotiation",
    "application_name",
    "connect_timeout",
    "target_session_attrs",
    "statement_cache_capacity",
    "host",
    "port",
    "dbname",
    "mode",
    "cache",
];

/// A secret shorter than this is not searched for in free text (it would mask ordinary
/// words); the structured masks still hide it where it sits in a URL.
const MIN_SEARCHED: usize = 4;

const MASK: &str = "***";

/// `url` with its password, fragment and query values (but [`SHOWN_PARAMETERS`]')
/// replaced by `***`; unparsable text is shown as `(unparsable)` rather than echoed,
/// since it may hold a secret.
pub(super) fn mask_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some(MASK));
            }
            if u.query().is_some() {
                let pairs: Vec<(String, String)> = u
                    .query_pairs()
                    .map(|(k, v)| {
                        let v = if shown(&k) {
                            v.into_owned()
                        } else {
                            MASK.into()
                        };
                        (k.into_owned(), v)
                    })
                    .collect();
                u.query_pairs_mut().clear().extend_pairs(pairs);
            }
            if u.fragment().is_some() {
                u.set_fragment(Some(MASK));
            }
            u.to_string()
        }
        Err(_) => "(unparsable)".into(),
    }
}

fn shown(key: &str) -> bool {
    SHOWN_PARAMETERS.iter().any(|k| k.eq_ignore_ascii_case(key))
}

/// Masks every secret of one configuration in free text.
pub(super) struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// The secrets of `config`.
    pub(super) fn new(config: &Config) -> Redactor {
        let mut secrets = Vec::new();
        let id = &config.identity;
        let urls = [
            config.database_url.as_deref(),
            config.memory_url.as_deref(),
            id.jwks_url.as_deref(),
            config.otlp_traces.as_ref().map(|t| t.endpoint.as_str()),
            config.otlp_metrics.as_ref().map(|t| t.endpoint.as_str()),
            config.public_url.as_deref(),
            config.authorization_server.as_deref(),
        ];
        for url in urls.into_iter().flatten() {
            url_secrets(url, &mut secrets);
        }
        secrets.extend(config.cuo_command.iter().skip(1).cloned());
        secrets.extend(
            config
                .cuo_env
                .iter()
                .filter_map(|kv| kv.split_once('=').map(|(_, v)| v.to_owned())),
        );
        if let Some(path) = &config.memory_token_file
            && let Ok(token) = std::fs::read_to_string(path)
        {
            secrets.push(token.trim().to_owned());
        }
        secrets.retain(|s| s.len() >= MIN_SEARCHED);
        // Longest first, so a secret that contains another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// `text` with every URL in it masked, then every known secret replaced.
    pub(super) fn text(&self, text: &str) -> String {
        let mut out = mask_urls_in(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }
}

/// The password, fragment and masked query values of `url`, raw and decoded.
fn url_secrets(url: &str, out: &mut Vec<String>) {
    let Ok(u) = reqwest::Url::parse(url) else {
        // Unparsable: it is never shown, and nothing in it can be told apart.
        out.push(url.to_owned());
        return;
    };
    if let Some(p) = u.password() {
        out.push(p.to_owned());
        out.extend(decoded(p));
    }
    if let Some(q) = u.query() {
        for pair in q.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = form_decoded(k);
            if !shown(&key) {
                out.push(v.to_owned());
                out.push(form_decoded(v));
            }
        }
    }
    if let Some(f) = u.fragment() {
        out.push(f.to_owned());
        out.extend(decoded(f));
    }
}

fn decoded(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

/// A query key or value as `application/x-www-form-urlencoded` decodes it (`+` a space).
fn form_decoded(s: &str) -> String {
    decoded(&s.replace('+', " ")).unwrap_or_else(|| s.to_owned())
}

/// `text` with each `scheme://…` in it passed through [`mask_url`]; a URL ends at
/// whitespace, a quote, `(`, `)`, `<` or `>`.
fn mask_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let head = &rest[..at];
        let scheme_len = head
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            .count();
        let start = at - scheme_len;
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || "\"'`()<>".contains(c))
            .map_or(rest.len(), |n| at + n);
        let starts_with_letter = rest[start..].starts_with(|c: char| c.is_ascii_alphabetic());
        if scheme_len == 0 || !starts_with_letter {
            out.push_str(&rest[..at + 3]);
            rest = &rest[at + 3..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str(&mask_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            mask_url("postgres://app:s3cret@db:5432/cyberos"),
            "postgres://app:***@db:5432/cyberos"
        );
        assert_eq!(mask_url("https://mem.example/v1"), "https://mem.example/v1");
        assert_eq!(mask_url("not a url s3cret"), "(unparsable)");
    }

    #[test]
    fn query_values_are_masked_but_known_settings() {
        assert_eq!(
            mask_url("postgres://app@db/c?sslmode=verify-full&password=s3cret&X-Amz-Signature=ab"),
            "postgres://app@db/c?sslmode=verify-full&password=***&X-Amz-Signature=***"
        );
        assert_eq!(
            mask_url("https://otel.example/v1/traces?api_key=k3y#frag"),
            "https://otel.example/v1/traces?api_key=***#***"
        );
    }

    #[test]
    fn urls_inside_text_are_masked() {
        assert_eq!(
            mask_urls_in(
                "error sending request for url (http://u:pw@mem:9/v1/health?token=t0k3n): refused"
            ),
            "error sending request for url (http://u:***@mem:9/v1/health?token=***): refused"
        );
        assert_eq!(mask_urls_in("no url :// here"), "no url :// here");
    }

    #[test]
    fn decoding_handles_escapes_and_plus() {
        assert_eq!(form_decoded("a%2Bb+c"), "a+b c");
        assert_eq!(decoded("p%40ss").as_deref(), Some("p@ss"));
        assert_eq!(decoded("100%").as_deref(), Some("100%"));
    }
}
