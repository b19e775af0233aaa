//! Skills: rendered instructions without an entrypoint; an entrypoint's stdin and
//! environment; failing, escaping and hanging entrypoints.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{far_deadline, rfc3339_in, with_ctx};
use crate::support::cuo_children::wait_gone;
use crate::support::cuo_runner::{Runner, error_of};

/// A skill folder with a SKILL.md and, when `script` is given, an executable `run.sh`
/// declared as its entrypoint.
fn skill_folder(root: &Path, name: &str, front: &str, body: &str, script: Option<&str>) -> String {
    let folder = root.join(name);
    std::fs::create_dir_all(&folder).expect("mkdir");
    let entry = if script.is_some() {
        "entrypoint: run.sh\n"
    } else {
        ""
    };
    let text = format!("---\nname: {name}\ndescription: test skill\n{front}{entry}---\n{body}");
    std::fs::write(folder.join("SKILL.md"), text).expect("write SKILL.md");
    if let Some(script) = script {
        let path = folder.join("run.sh");
        std::fs::write(&path, script).expect("write run.sh");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    folder.display().to_string()
}

impl Runner {
    /// `skill.invoke` of the skill `name` at `path`; returns the response.
    fn invoke(&mut self, name: &str, path: &str, inputs: Value, deadline: &str) -> Value {
        let params = with_ctx(json!({
            "skill": {"name": name, "description": "test skill", "path": path},
            "inputs": inputs, "deadline": deadline
        }));
        self.call("skill.invoke", params).1
    }
}

#[test]
fn a_skill_without_an_entrypoint_returns_its_rendered_instructions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let front = "input_schema:\n  type: object\n  properties:\n    quarter: {type: string, pattern: \"^[0-9]{4}-Q[1-4]$\"}\n  required: [quarter]\n";
    let body = "# Report\n\nFor {{quarter}}; notes: {{notes}}.\n";
    let path = skill_folder(dir.path(), "report", front, body, None);
    let mut r = Runner::spawn(&[]);
    let deadline = far_deadline();
    let resp = r.invoke("report", &path, json!({"quarter": "2025-Q3"}), &deadline);
    let text = "# Report\n\nFor 2025-Q3; notes: (not provided).\n";
    assert_eq!(resp["result"]["output"], text, "{resp}");
    let artifact = json!({"name": "report.md", "media_type": "text/markdown", "content": text});
    assert_eq!(resp["result"]["artifacts"], json!([artifact]));

    let resp = r.invoke("report", &path, json!({"quarter": "Q3"}), &deadline);
    assert_eq!(error_of(&resp).0, -32602);
    assert!(error_of(&resp).1.contains("'/quarter'"), "{resp}");
    let resp = r.invoke(
        "other-name",
        &path,
        json!({"quarter": "2025-Q3"}),
        &deadline,
    );
    assert_eq!(error_of(&resp).0, -32602);
    let past = rfc3339_in(chrono::TimeDelta::seconds(-1));
    let resp = r.invoke("report", &path, json!({"quarter": "2025-Q3"}), &past);
    assert_eq!(error_of(&resp).0, -32001);
    let missing = dir.path().join("missing").display().to_string();
    assert_eq!(
        error_of(&r.invoke("report", &missing, json!({}), &deadline)).0,
        -32602
    );
}

#[test]
fn a_skill_entrypoint_gets_inputs_on_stdin_and_a_scrubbed_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "#!/bin/sh\ninput=$(cat)\nprintf '{\"got\":%s,\"secret\":\"%s\",\"cwd\":\"%s\"}' \"$input\" \"${RUNNER_TEST_SECRET:-none}\" \"$(basename \"$(pwd)\")\"\necho 'to the log' >&2\n";
    let path = skill_folder(dir.path(), "echoer", "", "Echo {{word}}\n", Some(script));
    let mut r = Runner::spawn_with_env(&[], &[("RUNNER_TEST_SECRET", "leaked")]);
    let resp = r.invoke("echoer", &path, json!({"word": "hi"}), &far_deadline());
    let expected = json!({"got": {"word": "hi"}, "secret": "none", "cwd": "echoer"});
    assert_eq!(resp["result"]["output"], expected, "{resp}");
    assert_eq!(resp["result"]["artifacts"][0]["content"], "Echo hi\n");

    let plain = skill_folder(
        dir.path(),
        "plain",
        "",
        "x",
        Some("#!/bin/sh\necho not json\n"),
    );
    let resp = r.invoke("plain", &plain, json!({}), &far_deadline());
    assert_eq!(resp["result"]["output"], "not json\n", "{resp}");
}

#[test]
fn a_failing_escaping_or_hanging_entrypoint_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut r = Runner::spawn(&[]);
    let failing = skill_folder(dir.path(), "failing", "", "x", Some("#!/bin/sh\nexit 3\n"));
    let resp = r.invoke("failing", &failing, json!({}), &far_deadline());
    let expected = (-32000, "skill entrypoint failed with status 3".to_owned());
    assert_eq!(error_of(&resp), expected);

    let front = "entrypoint: ../failing/run.sh\n";
    let escaping = skill_folder(dir.path(), "escaping", front, "x", None);
    let resp = r.invoke("escaping", &escaping, json!({}), &far_deadline());
    assert_eq!(error_of(&resp).0, -32602);

    // The script's background child must die too: it is in the script's process group.
    let pid_file = dir.path().join("background.pid");
    let script = format!(
        "#!/bin/sh\nsleep 300 &\necho $! > '{}'\nsleep 30\n",
        pid_file.display()
    );
    let hanging = skill_folder(dir.path(), "hanging", "", "x", Some(&script));
    let start = Instant::now();
    let soon = rfc3339_in(chrono::TimeDelta::milliseconds(500));
    let resp = r.invoke("hanging", &hanging, json!({}), &soon);
    assert_eq!(error_of(&resp), (-32001, "deadline exceeded".to_owned()));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let background: i32 = std::fs::read_to_string(&pid_file)
        .expect("the entrypoint ran")
        .trim()
        .parse()
        .unwrap();
    wait_gone(&[background], Duration::from_secs(2));
}
