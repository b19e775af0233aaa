//! The catalogue: personas, workflows and routing, and the catalogue directory.

use std::process::{Command, Stdio};

use serde_json::json;

use super::with_ctx;
use crate::support::cuo_runner::Runner;

#[test]
fn personas_list_returns_the_whole_catalogue_in_order() {
    let mut r = Runner::spawn(&[]);
    let result = r.ok("personas.list", with_ctx(json!({})));
    let personas = result["personas"].as_array().expect("personas");
    assert_eq!(personas.len(), 47);
    assert_eq!(personas[0]["id"], "chief-ai-officer");
    let cto = personas
        .iter()
        .find(|p| p["id"] == "chief-technology-officer")
        .expect("the cto");
    assert_eq!(cto["short_name"], "CTO");
    assert!(cto["title"].is_string() && cto["description"].is_string());
    assert!(
        cto["workflows"]
            .as_array()
            .is_some_and(|w| w.contains(&json!("architect-new-system")))
    );
}

#[test]
fn workflows_list_covers_all_or_one_persona_and_refuses_unknown_ones() {
    let mut r = Runner::spawn(&[]);
    let all = r.ok("workflows.list", with_ctx(json!({})));
    let all = all["workflows"].as_array().expect("workflows").len();
    let one = r.ok(
        "workflows.list",
        with_ctx(json!({"persona": "chief-technology-officer"})),
    );
    let one = one["workflows"].as_array().expect("workflows").clone();
    assert!(!one.is_empty() && one.len() < all);
    for w in &one {
        assert_eq!(w["persona"], "chief-technology-officer");
        for key in ["id", "title", "description"] {
            assert!(w[key].is_string(), "{w}");
        }
        assert!(w["input_schema"].is_object() && w["typical_duration_s"].is_u64());
    }
    let (code, message) = r.err(
        "workflows.list",
        with_ctx(json!({"persona": "no-such-persona"})),
    );
    assert_eq!(code, -32602);
    assert_eq!(
        message,
        "unknown persona 'no-such-persona'; call personas.list for valid ids"
    );
}

#[test]
fn route_sends_the_payment_routing_query_to_the_cto_with_high_confidence() {
    let mut r = Runner::spawn(&[]);
    let query = "Architect a new payment routing system for Southeast Asian markets";
    let route = r.ok("route", with_ctx(json!({"query": query, "limit": 4})));
    assert_eq!(route["persona"], "chief-technology-officer");
    assert_eq!(route["workflow"], "architect-new-system");
    assert!(
        route["confidence"]
            .as_f64()
            .is_some_and(|c| (0.8..=1.0).contains(&c))
    );
    let alternates = route["alternates"].as_array().expect("alternates");
    assert_eq!(alternates.len(), 3);
    assert!(
        alternates
            .iter()
            .all(|a| a.as_str().is_some_and(|a| a.contains('/')))
    );

    let (code, message) = r.err("route", with_ctx(json!({"query": "zqxv wprtl"})));
    assert_eq!(code, -32602);
    assert_eq!(
        message,
        "no persona or workflow matches the query; rephrase it or browse workflows.list"
    );
    let (code, _) = r.err("route", with_ctx(json!({"query": "security", "limit": 11})));
    assert_eq!(code, -32602);
}

#[test]
fn a_bad_catalogue_directory_exits_2_and_a_good_one_is_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let persona = json!({
        "id": "tester", "title": "Tester", "short_name": "T", "description": "Tests things.",
        "keywords": ["qa"],
        "workflows": [{
            "id": "smoke", "title": "Run a smoke test", "description": "Quick check.",
            "keywords": ["smoke"], "typical_duration_s": 1,
            "input_schema": {"type": "object", "properties": {"target": {"type": "string"}}},
            "steps": [{"id": "s", "title": "Smoke", "template": "Check {{target}}", "artifact": "smoke.md"}]
        }]
    });
    std::fs::write(dir.path().join("tester.json"), persona.to_string()).expect("write");
    let mut r = Runner::spawn(&["--catalog", &dir.path().display().to_string()]);
    let route = r.ok("route", with_ctx(json!({"query": "smoke test"})));
    assert_eq!(route["workflow"], "smoke");

    let mut bad = persona.clone();
    bad["workflows"][0]["steps"][0]["template"] = json!("Check {{nothing}}");
    std::fs::write(dir.path().join("tester.json"), bad.to_string()).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_cyberos-mcp-bridge"))
        .args(["cuo-runner", "--catalog", &dir.path().display().to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tester.json") && stderr.contains("{{nothing}}"),
        "{stderr}"
    );
}
