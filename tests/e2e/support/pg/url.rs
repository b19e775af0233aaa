//! Postgres URLs with another database or login, and migrating a database with the built
//! binary (also used by `benches/tasks.rs`).

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

/// Applies the migrations to `url` with `binary migrate`, as an operator would.
pub fn migrate_with(binary: &str, url: &str) {
    let out = std::process::Command::new(binary)
        .args(["migrate", "--database-url", url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "migrate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
