//! Test harnesses and doubles, shared by the scenario modules: the built binary over
//! stdio (`binary`) and over HTTP (`http_server`), the CUO children it starts
//! (`cuo_children`), the library over an in-memory pipe (`in_process`), fakes behind the
//! ports (`fakes`), real servers for the upstreams (`memory_server`, `collector`: OTLP
//! receivers), the Prometheus scrape (`scrape`), the MCP schema check (`schema`), the
//! Postgres test databases (`pg`) and a loopback TCP proxy that can be cut (`tcp_proxy`).
//!
//! The acceptance suite (`tests/acceptance`) mounts this module too, so it holds no tests:
//! the harnesses' own checks are in `tests/e2e/harness.rs`.

pub mod binary;
pub mod collector;
pub mod cuo_children;
pub mod cuo_runner;
pub mod fakes;
pub mod http_server;
pub mod in_process;
pub mod jwks_server;
pub mod memory_server;
pub mod module_graph;
pub mod pg;
pub mod proc_status;
pub mod raw_http;
pub mod rust_source;
pub mod schema;
pub mod scrape;
pub mod tcp_proxy;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

/// How long a test waits for one frame before failing.
pub const WAIT: Duration = Duration::from_secs(20);

/// Tries `probe` until it yields `Ok`, for at most `within`: at once, then after pauses
/// growing from 1 ms to 50 ms, so a wait ends soon after its condition holds. When time
/// runs out, the last `Err` (what the probe saw). The pause is the poll interval: the
/// tests' one fixed sleep that is no scenario.
pub fn poll<T>(
    within: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = std::time::Instant::now() + within;
    let mut pause = Duration::from_millis(1);
    loop {
        let last = match probe() {
            Ok(v) => return Ok(v),
            Err(why) => why,
        };
        if std::time::Instant::now() >= deadline {
            return Err(last);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// [`poll`], panicking with the probe's last `Err` when time runs out.
pub fn wait_for<T>(within: Duration, probe: impl FnMut() -> Result<T, String>) -> T {
    poll(within, probe).unwrap_or_else(|why| panic!("gave up after {within:?}: {why}"))
}

/// Waits (see [`poll`]) until `holds`; panics naming `what` when time runs out.
pub fn wait_until(within: Duration, what: &str, mut holds: impl FnMut() -> bool) {
    wait_for(within, || {
        holds().then_some(()).ok_or_else(|| what.to_owned())
    });
}

/// [`wait_for`] for a probe that awaits; on Tokio's clock (a paused clock moves on by
/// itself while the test waits).
pub async fn wait_for_async<T>(
    within: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(1);
    loop {
        let last = match probe().await {
            Ok(v) => return v,
            Err(why) => why,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up after {within:?}: {last}"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// [`wait_until`] for a condition that awaits.
pub async fn wait_until_async(within: Duration, what: &str, mut holds: impl AsyncFnMut() -> bool) {
    wait_for_async(within, async || {
        holds().await.then_some(()).ok_or_else(|| what.to_owned())
    })
    .await;
}

/// The repository's fixture directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// `initialize` params asking for `version`.
pub fn init_params(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {"sampling": {}, "extensions": {"io.example/x": {}}},
        "clientInfo": {"name": "e2e", "version": "0.0.1", "futureField": true}
    })
}

/// Whether `name` follows the tool-name pattern, SEP-986 as the contract narrows it (§4):
/// `^cyberos\.[a-z][a-z0-9]*\.[a-z][a-z0-9_]*$`.
pub fn sep_986(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("cyberos.") else {
        return false;
    };
    let Some((area, verb)) = rest.split_once('.') else {
        return false;
    };
    let ok_area = area.starts_with(|c: char| c.is_ascii_lowercase())
        && area
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ok_verb = verb.starts_with(|c: char| c.is_ascii_lowercase())
        && verb
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    ok_area && ok_verb
}

/// Asserts the contract's envelope and returns `error.data`.
pub fn assert_envelope(frame: &Value, code: i64, class: &str) -> Value {
    let err = &frame["error"];
    assert_eq!(err["code"], code, "{frame}");
    assert_eq!(err["data"]["class"], class, "{frame}");
    let trace = err["data"]["trace_id"]
        .as_str()
        .expect("trace_id in every error");
    assert!(
        trace.len() == 32
            && trace
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{trace}"
    );
    assert!(
        err["data"]["hint"].as_str().is_some_and(|h| !h.is_empty()),
        "{frame}"
    );
    err["data"].clone()
}

/// Serves `app` on 127.0.0.1:0 from a thread of its own (for the synchronous binary
/// tests) and returns the bound address.
pub fn serve_http(app: axum::Router) -> std::net::SocketAddr {
    collector::serve_on_loopback(move |listener| async move {
        axum::serve(listener, app).await.unwrap();
    })
}

/// Whether a process is running; zombies count as gone (/proc shows them as state Z).
/// Writes the skill `name` into the skills dir `skills`: a SKILL.md saying `description`
/// whose entrypoint is the executable shell `script`.
pub fn script_skill(skills: &std::path::Path, name: &str, description: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let folder = skills.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\nentrypoint: run.sh\n---\nRun.\n"),
    )
    .unwrap();
    let run = folder.join("run.sh");
    std::fs::write(&run, script).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Peak resident memory of process `pid` (`VmHWM` in /proc), in KiB.
pub fn peak_rss_kib(pid: i32) -> u64 {
    proc_status::kib(pid.unsigned_abs(), "VmHWM").unwrap()
}

pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Whether `CI` holds a true value: set, and not empty, `0`, `false`, `no` or `off`. In CI
/// a test never skips a part for want of a tool; elsewhere it says so on the terminal.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off"
        )
    })
}

/// A call by `alice` of `tenant`, with a fixed trace (`07…07`, span `03…03`, sampled) and
/// a `tracestate` to pass on, for tests that drive a port directly.
pub fn call_ctx(tenant: &str) -> cyberos_mcp_bridge::domain::CallCtx {
    cyberos_mcp_bridge::domain::CallCtx {
        tenant: cyberos_mcp_bridge::domain::TenantId::parse(tenant).unwrap(),
        actor: "alice".into(),
        trace_id: cyberos_mcp_bridge::domain::TraceId::from_bytes([7; 16]),
        span_id: [3; 8],
        sampled: true,
        tracestate: Some("vendor=opaque".into()),
    }
}
