//! The six short tools end to end on the embedded defaults (bundled CUO runner, embedded
//! audit log, fixture skills): each result's `structuredContent` matches the tool's
//! declared `outputSchema`, and the text block carries the same JSON.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::support::assert_envelope;
use crate::support::binary::Bridge;

fn output_validators(b: &mut Bridge) -> HashMap<String, jsonschema::Validator> {
    let list = b.request("tools/list", json!({}));
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| {
            let schema = t.get("outputSchema")?;
            Some((
                t["name"].as_str().unwrap().to_owned(),
                jsonschema::validator_for(schema).unwrap(),
            ))
        })
        .collect()
}

fn checked(validators: &HashMap<String, jsonschema::Validator>, tool: &str, resp: &Value) -> Value {
    let result = &resp["result"];
    assert_eq!(result["isError"], false, "{tool}: {resp}");
    let structured = result["structuredContent"].clone();
    let errors: Vec<String> = validators[tool]
        .iter_errors(&structured)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{tool} output violates its outputSchema: {errors:?}"
    );
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        text, structured,
        "{tool}: text and structuredContent differ"
    );
    structured
}

#[test]
fn the_six_short_tools_work_end_to_end_on_the_embedded_defaults() {
    let mut b = Bridge::initialized(&[]);
    let v = output_validators(&mut b);
    assert_eq!(v.len(), 6);

    let personas = checked(
        &v,
        "cyberos.cuo.list_personas",
        &b.call("cyberos.cuo.list_personas", json!({})),
    );
    let personas = personas["personas"].as_array().unwrap();
    assert_eq!(personas.len(), 47);
    let cto = personas
        .iter()
        .find(|p| p["id"] == "chief-technology-officer")
        .unwrap();
    assert_eq!(cto["short_name"], "CTO");

    let workflows = checked(
        &v,
        "cyberos.cuo.list_workflows",
        &b.call(
            "cyberos.cuo.list_workflows",
            json!({"persona": "chief-technology-officer"}),
        ),
    );
    let ids: Vec<&str> = workflows["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"architect-new-system") && ids.contains(&"adr-quick-capture"),
        "{ids:?}"
    );
    let all = checked(
        &v,
        "cyberos.cuo.list_workflows",
        &b.call("cyberos.cuo.list_workflows", json!({})),
    );
    assert!(all["workflows"].as_array().unwrap().len() > 100);

    let route = checked(
        &v,
        "cyberos.cuo.route",
        &b.call(
            "cyberos.cuo.route",
            json!({"query": "Architect a new payment routing system for Southeast Asian markets"}),
        ),
    );
    assert_eq!(route["persona"], "chief-technology-officer");
    assert_eq!(route["workflow"], "architect-new-system");
    assert!(route["confidence"].as_f64().unwrap() >= 0.8, "{route}");
    assert_eq!(
        route["alternates"].as_array().unwrap().len(),
        2,
        "limit defaults to 3"
    );

    let receipt = checked(
        &v,
        "cyberos.memory.append_audit",
        &b.request(
            "tools/call",
            json!({"name": "cyberos.memory.append_audit",
                   "arguments": {"kind": "decision", "body": {"adr": 1}, "subject": "payments"},
                   "_meta": {"com.cyberos/confirmed": true}}),
        ),
    );
    let read = checked(
        &v,
        "cyberos.memory.read_audit",
        &b.call(
            "cyberos.memory.read_audit",
            json!({"audit_id": receipt["audit_id"]}),
        ),
    );
    assert_eq!(read["entries"][0]["subject"], "payments");
    checked(
        &v,
        "cyberos.memory.read_audit",
        &b.call("cyberos.memory.read_audit", json!({"kind": "decision"})),
    );

    checked(
        &v,
        "cyberos.skill.list_skills",
        &b.call("cyberos.skill.list_skills", json!({})),
    );
}

#[test]
fn unknown_personas_point_to_the_discovery_tools() {
    let mut b = Bridge::initialized(&[]);
    let resp = b.call(
        "cyberos.cuo.list_workflows",
        json!({"persona": "chief-vibes-officer"}),
    );
    let data = assert_envelope(&resp, -32602, "input_validation");
    assert!(
        data["hint"]
            .as_str()
            .unwrap()
            .contains("cyberos.cuo.list_personas"),
        "{data}"
    );
    let vague = b.call("cyberos.cuo.route", json!({"query": "zzzz qqqq"}));
    assert_envelope(&vague, -32602, "input_validation");
}

/// A skill edited on disk is listed as it now reads once the index has read the folders
/// again (at most 5 s after its last read): the listing's entries, rendered once per skill,
/// follow the skills the index hands out, never an earlier read of them.
#[test]
fn an_edited_skill_is_listed_as_it_now_reads() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    let script = "#!/bin/sh\necho '{}'\n";
    crate::support::script_skill(&skills, "zz-edited", "Before the edit.", script);
    let mut b = Bridge::initialized(&["--skills-dir", skills.to_str().unwrap()]);
    let described = |b: &mut Bridge| {
        let resp = b.call("cyberos.skill.list_skills", json!({}));
        let text: Value =
            serde_json::from_str(resp["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, resp["result"]["structuredContent"], "{resp}");
        text["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "zz-edited")
            .map(|s| s["description"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(described(&mut b), "Before the edit.");
    assert_eq!(described(&mut b), "Before the edit.");
    crate::support::script_skill(&skills, "zz-edited", "After the edit.", script);
    crate::support::wait_until(
        std::time::Duration::from_secs(20),
        "the edit was not listed",
        || described(&mut b) == "After the edit.",
    );
}
