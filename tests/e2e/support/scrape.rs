//! The Prometheus scrape of the built binary: its address (read from its log line
//! `serving metrics at URL`), a `GET` of it over a plain TCP connection, and samples read
//! back by metric name and labels.

use std::io::{Read, Write};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::WAIT;

/// The scrape URL the bridge logged, waiting up to [`WAIT`].
pub fn metrics_url(log: &Receiver<String>) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = log
            .recv_timeout(left)
            .expect("a `serving metrics at` line on stderr");
        if let Some(rest) = line.split("serving metrics at ").nth(1) {
            return rest.split_whitespace().next().unwrap_or("").to_owned();
        }
    }
}

/// `GET url` (`http://HOST:PORT/PATH`): the status, the `Content-Type` and the body.
pub fn get(url: &str) -> (u16, String, String) {
    get_as(url, None)
}

/// [`get`] with `host` as the Host header instead of the URL's.
pub fn get_as(url: &str, host_header: Option<&str>) -> (u16, String, String) {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut conn = std::net::TcpStream::connect(host).unwrap();
    let host = host_header.unwrap_or(host);
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    (status, content_type, body.to_owned())
}

/// The scrape's text, checked to be the Prometheus text format.
pub fn scrape(url: &str) -> String {
    let (status, content_type, body) = get(url);
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    body
}

/// The sum of the samples of `name` whose labels include every one of `labels`, or `None`
/// when there is none.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
            let wanted = metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            wanted.then(|| value.parse().ok()).flatten()
        })
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}
