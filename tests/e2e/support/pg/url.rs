//! Postgres URLs with another database or login (also used by `benches/tasks.rs`).

/// `url` with its database replaced by `name` (query parameters kept).
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let root = match base[authority..].find('/') {
        Some(i) => &base[..authority + i],
        None => base,
    };
    format!("{root}/{name}{query}")
}

/// `url` with `user:password` as its credentials.
pub fn with_user(url: &str, user: &str, password: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let host_end = url[authority..]
        .find(['/', '?'])
        .map_or(url.len(), |i| authority + i);
    let host = match url[authority..host_end].rfind('@') {
        Some(i) => &url[authority + i + 1..],
        None => &url[authority..],
    };
    format!("{}{user}:{password}@{host}", &url[..authority])
}
