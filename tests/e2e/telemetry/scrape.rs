//! The Prometheus scrape of the built binary on stdio (`--metrics-listen`): after a few
//! calls and a task, `/metrics` shows the named metrics with bounded labels, and the
//! tenant only with `--metrics-tenant-label`.

use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use super::TENANT;
use crate::support::binary::Bridge;
use crate::support::poll;
use crate::support::scrape::{metrics_url, sample, scrape};

/// A stdio bridge serving the scrape on an ephemeral port, and the scrape's URL.
fn scraped(extra: &[&str]) -> (Bridge, String) {
    let (tx, log) = mpsc::channel();
    let mut args = vec!["--dev", "--metrics-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut b = Bridge::spawn_logging(tempfile::tempdir().unwrap(), &args, &[], Some(tx));
    let url = metrics_url(&log);
    b.initialize();
    (b, url)
}

/// Scrapes until `ready` holds (the run's metrics are recorded just after its row is
/// written), at most a few seconds.
fn scrape_until(url: &str, ready: impl Fn(&str) -> bool) -> String {
    poll(Duration::from_secs(10), || {
        let text = scrape(url);
        if ready(&text) { Ok(text) } else { Err(text) }
    })
    .unwrap_or_else(|text| text)
}

#[test]
fn a_scrape_after_calls_and_a_task_shows_the_named_metrics_without_tenants() {
    let (mut b, url) = scraped(&[]);
    assert!(b.request("ping", json!({}))["result"].is_object());
    assert!(b.call("cyberos.skill.list_skills", json!({}))["result"].is_object());
    // Starts the shared CUO child of short calls.
    assert!(b.call("cyberos.cuo.list_personas", json!({}))["result"].is_object());
    let bad = b.call("cyberos.cuo.route", json!({"query": ""}));
    assert_eq!(bad["error"]["data"]["class"], "input_validation");
    let unknown = b.call("no.such.tool", json!({}));
    assert!(unknown["error"].is_object(), "{unknown}");
    let created = b.request(
        "tools/call",
        json!({"name": "cyberos.cuo.execute_workflow", "task": {},
               "arguments": {"persona": "chief-technology-officer", "workflow": "adr-quick-capture",
                             "inputs": {"title": "metrics"}}}),
    );
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let result = b.request("tasks/result", json!({"taskId": id}));
    assert!(result["result"].is_object(), "{result}");

    let workflow = ("gen_ai_tool_name", "cyberos.cuo.execute_workflow");
    // The run's child is reaped just after the run ends.
    let ended = |text: &str| {
        sample(text, "cyberos_tasks_ended_total", &[workflow]).is_some()
            && sample(text, "cyberos_cuo_children", &[]) == Some(1.0)
    };
    let text = scrape_until(&url, ended);
    let duration = "mcp_server_operation_duration_seconds_count";
    let tools_call = ("mcp_method_name", "tools/call");
    let listed = [
        tools_call,
        ("gen_ai_tool_name", "cyberos.skill.list_skills"),
    ];
    assert_eq!(sample(&text, duration, &listed), Some(1.0), "{text}");
    let refused = [
        ("gen_ai_tool_name", "cyberos.cuo.route"),
        ("error_type", "input_validation"),
    ];
    assert_eq!(sample(&text, duration, &refused), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, duration, &[("mcp_method_name", "ping")]),
        Some(1.0)
    );
    assert!(sample(&text, duration, &[("mcp_method_name", "tasks/result")]).is_some());
    // The semantic conventions' buckets, in seconds.
    assert!(
        text.contains("le=\"0.01\"") && text.contains("le=\"300\""),
        "{text}"
    );
    let calls = "cyberos_tool_calls_total";
    let other = [
        ("gen_ai_tool_name", "_OTHER"),
        ("cyberos_outcome", "input_validation"),
    ];
    assert_eq!(sample(&text, calls, &other), Some(1.0), "{text}");
    assert!(
        !text.contains("no.such.tool"),
        "an unknown name is no label"
    );
    assert_eq!(
        sample(&text, calls, &[workflow, ("cyberos_outcome", "success")]),
        Some(1.0)
    );
    let completed = [workflow, ("cyberos_task_status", "completed")];
    assert_eq!(
        sample(&text, "cyberos_tasks_ended_total", &completed),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "cyberos_tasks_running", &[workflow]),
        Some(0.0)
    );
    // The shared child for short calls is still alive; the run's child is gone.
    assert_eq!(
        sample(&text, "cyberos_cuo_children", &[]),
        Some(1.0),
        "{text}"
    );
    assert!(
        !text.contains("cyberos_tenant_id"),
        "no tenant label by default"
    );
    assert!(b.close().success());
}

#[test]
fn with_the_opt_in_metrics_carry_the_tenant() {
    let (mut b, url) = scraped(&["--metrics-tenant-label"]);
    assert!(b.call("cyberos.skill.list_skills", json!({}))["result"].is_object());
    let text = scrape(&url);
    let tenant = ("cyberos_tenant_id", TENANT);
    let listed = [("gen_ai_tool_name", "cyberos.skill.list_skills"), tenant];
    assert_eq!(
        sample(&text, "cyberos_tool_calls_total", &listed),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "mcp_server_operation_duration_seconds_count",
            &listed
        ),
        Some(1.0)
    );
    assert!(b.close().success());
}

#[test]
fn the_scrape_answers_only_get_metrics_and_a_taken_address_is_a_failed_start() {
    let (_b, url) = scraped(&[]);
    let (status, _, _) = crate::support::scrape::get(&url.replace("/metrics", "/other"));
    assert_eq!(status, 404);
    let taken = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned();
    let out = std::process::Command::new(crate::support::binary::binary())
        .args(["--dev", "--metrics-listen", &taken])
        .arg("--data-dir")
        .arg(tempfile::tempdir().unwrap().path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--metrics-listen"), "{err}");
}

#[test]
fn a_loopback_scrape_answers_only_a_local_host() {
    let (_b, url) = scraped(&[]);
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/metrics");
    for local in [
        format!("localhost:{port}"),
        "127.0.0.1".into(),
        format!("[::1]:{port}"),
    ] {
        let (status, _, body) = crate::support::scrape::get_as(&url, Some(&local));
        assert_eq!(status, 200, "{local}: {body}");
    }
    // What a DNS-rebound page sends: its own name.
    let (status, _, body) = crate::support::scrape::get_as(&url, Some("rebound.example:80"));
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("cyberos_"), "{body}");
}

#[test]
fn dev_refuses_a_non_loopback_scrape() {
    let out = std::process::Command::new(crate::support::binary::binary())
        .args(["--dev", "--metrics-listen", "0.0.0.0:0"])
        .arg("--data-dir")
        .arg(tempfile::tempdir().unwrap().path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--dev refuses a non-loopback --metrics-listen"),
        "{err}"
    );
}

#[test]
fn the_spans_a_down_collector_refuses_are_counted_in_the_scrape() {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (mut b, url) = scraped(&["--otlp-endpoint", &refused]);
    assert!(b.call("cyberos.skill.list_skills", json!({}))["result"].is_object());
    // The export thread sends its batch within a second and counts it as dropped.
    let dropped = |text: &str| sample(text, "cyberos_spans_dropped_total", &[]);
    let text = scrape_until(&url, |t| dropped(t).is_some_and(|n| n >= 1.0));
    assert!(dropped(&text) >= Some(1.0), "{text}");
    assert!(b.close().success());
}
