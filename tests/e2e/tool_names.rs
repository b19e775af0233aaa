//! `--tool-names underscore`: hosts that accept only `^[a-zA-Z0-9_-]{1,64}$` (Claude
//! Desktop, claude.ai, several model APIs) get names they take, and every text that names
//! a tool uses the same spelling; calls work by either spelling in either mode.

use serde_json::json;

use crate::support::assert_envelope;
use crate::support::binary::Bridge;

fn host_safe(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[test]
fn underscore_names_are_listed_and_used_in_every_text() {
    let mut b = Bridge::spawn(&["--tool-names", "underscore"]);
    let init = b.initialize();
    let instructions = init["instructions"].as_str().unwrap();
    assert!(instructions.contains("cyberos_cuo_route"), "{instructions}");
    assert!(!instructions.contains("cyberos."), "{instructions}");
    let list = b.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 8);
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        assert!(host_safe(name), "{name}");
    }
    assert!(
        !list.to_string().contains("cyberos."),
        "a dotted name in the listing"
    );
    // Either spelling calls the tool.
    for name in ["cyberos_skill_list_skills", "cyberos.skill.list_skills"] {
        let resp = b.call(name, json!({}));
        assert!(
            resp["result"]["structuredContent"]["skills"].is_array(),
            "{resp}"
        );
    }
    // An error's text names tools the listed way.
    let resp = b.call(
        "cyberos_skill_invoke_skill",
        json!({"skill": "no-such-skill"}),
    );
    assert_envelope(&resp, -32602, "input_validation");
    let hint = resp["error"]["data"]["hint"].as_str().unwrap();
    assert!(hint.contains("cyberos_skill_list_skills"), "{resp}");
    assert!(!resp.to_string().contains("cyberos."), "{resp}");
}

#[test]
fn dotted_names_stay_the_default_and_underscores_are_accepted() {
    let mut b = Bridge::initialized(&[]);
    let list = b.request("tools/list", json!({}));
    assert_eq!(
        list["result"]["tools"][0]["name"],
        "cyberos.cuo.list_personas"
    );
    let resp = b.call("cyberos_skill_list_skills", json!({}));
    assert!(
        resp["result"]["structuredContent"]["skills"].is_array(),
        "{resp}"
    );
    let unknown = b.call("cyberos_skill_list_skill", json!({}));
    assert_envelope(&unknown, -32602, "input_validation");
}

#[test]
fn errors_sent_as_results_use_the_listed_names_too() {
    let mut b = Bridge::spawn(&["--tool-names", "underscore", "--tool-errors", "result"]);
    b.initialize();
    let resp = b.call(
        "cyberos_skill_invoke_skill",
        json!({"skill": "no-such-skill"}),
    );
    assert_eq!(resp["result"]["isError"], true, "{resp}");
    let hint = resp["result"]["structuredContent"]["hint"]
        .as_str()
        .unwrap();
    assert!(hint.contains("cyberos_skill_list_skills"), "{resp}");
    assert!(!resp.to_string().contains("cyberos."), "{resp}");
}
