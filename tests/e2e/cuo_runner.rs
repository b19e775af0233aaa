//! The bundled reference CUO runner (`cyberos-mcp-bridge cuo-runner`) driven over its real
//! stdin/stdout, as the bridge's CUO adapter and the Python supervisor's clients see it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a test waits for one frame before failing.
const WAIT: Duration = Duration::from_secs(20);

/// A running `cuo-runner` child with a line reader on its stdout.
struct Runner {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<String>,
    next_id: i64,
}

impl Runner {
    fn spawn(args: &[&str]) -> Runner {
        Runner::spawn_with_env(args, &[])
    }

    /// Starts the runner the way the bridge does: leading a process group of its own.
    fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> Runner {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(env!("CARGO_BIN_EXE_cyberos-mcp-bridge"))
            .process_group(0)
            .arg("cuo-runner")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Runner {
            child,
            stdin,
            frames,
            next_id: 1,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to the runner");
        stdin.flush().expect("flush");
    }

    /// The next frame; every stdout line must be one JSON-RPC 2.0 object.
    fn recv(&self) -> Value {
        let line = self.frames.recv_timeout(WAIT).expect("a frame in time");
        let frame: Value = serde_json::from_str(&line).expect("stdout carries only JSON");
        assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
        frame
    }

    /// Sends a request; returns the notifications that came first and the response.
    fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(format!("{request}\n").as_bytes());
        let mut notifications = Vec::new();
        loop {
            let frame = self.recv();
            if frame.get("id").is_some() {
                assert_eq!(frame["id"], id, "{frame}");
                return (notifications, frame);
            }
            notifications.push(frame);
        }
    }

    /// `call` for a method that must succeed; returns its result.
    fn ok(&mut self, method: &str, params: Value) -> Value {
        let (_, resp) = self.call(method, params);
        assert!(resp.get("error").is_none(), "{resp}");
        resp["result"].clone()
    }

    /// `call` for a method that must fail; returns (code, message).
    fn err(&mut self, method: &str, params: Value) -> (i64, String) {
        let (_, resp) = self.call(method, params);
        error_of(&resp)
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                start.elapsed() < within,
                "the runner did not exit in {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn error_of(resp: &Value) -> (i64, String) {
    let code = resp["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{resp}"));
    let message = resp["error"]["message"].as_str().unwrap_or_default();
    (code, message.to_owned())
}

fn ctx() -> Value {
    json!({"tenant_id": "t-1", "actor_id": "a-1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
}

/// `params` with `ctx` added.
fn with_ctx(mut params: Value) -> Value {
    params["ctx"] = ctx();
    params
}

fn rfc3339_in(offset: chrono::TimeDelta) -> String {
    (chrono::Utc::now() + offset).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn far_deadline() -> String {
    rfc3339_in(chrono::TimeDelta::minutes(10))
}

fn adr_params(inputs: Value, deadline: &str) -> Value {
    with_ctx(json!({
        "persona": "chief-technology-officer", "workflow": "adr-quick-capture",
        "inputs": inputs, "deadline": deadline
    }))
}

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
fn execute_sends_progress_for_every_step_before_the_result() {
    let mut r = Runner::spawn(&[]);
    let params = with_ctx(json!({
        "persona": "chief-technology-officer", "workflow": "architect-new-system",
        "inputs": {"context": "Payments in Southeast Asia"}, "deadline": far_deadline()
    }));
    let (progress, resp) = r.call("workflow.execute", params);
    let result = &resp["result"];
    let steps = result["steps_executed"].as_u64().expect("steps_executed");
    assert_eq!(progress.len() as u64, steps);
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["method"], "progress");
        assert!(p.get("id").is_none());
        assert_eq!(p["params"]["step"], i as u64 + 1);
        assert_eq!(p["params"]["total"], steps);
        assert!(p["params"]["message"].is_string());
    }
    assert_eq!(progress[0]["params"]["message"], "Gather requirements");
    let artifacts = result["final_artifacts"].as_array().expect("artifacts");
    let requirements = artifacts
        .iter()
        .find(|a| a["name"] == "requirements.md")
        .expect("requirements.md");
    assert_eq!(requirements["media_type"], "text/markdown");
    let content = requirements["content"].as_str().unwrap_or_default();
    assert!(
        content.starts_with("# Gather requirements\n\n"),
        "{content}"
    );
    assert!(content.contains("Context: Payments in Southeast Asia"));
    assert!(content.contains("Known constraints: (not provided)"));
}

#[test]
fn execute_refuses_unknown_ids_and_inputs_that_break_the_schema() {
    let mut r = Runner::spawn(&[]);
    let deadline = far_deadline();
    let mut params = adr_params(json!({"title": "x"}), &deadline);
    params["persona"] = json!("nobody");
    assert_eq!(r.err("workflow.execute", params).0, -32602);
    let mut params = adr_params(json!({"title": "x"}), &deadline);
    params["workflow"] = json!("nothing");
    let (code, message) = r.err("workflow.execute", params);
    assert_eq!(code, -32602);
    assert!(
        message.starts_with("unknown workflow 'nothing'"),
        "{message}"
    );

    let (_, resp) = r.call("workflow.execute", adr_params(json!({}), &deadline));
    assert_eq!(error_of(&resp).0, -32602);
    assert!(error_of(&resp).1.contains("'/title'"), "{resp}");
    assert_eq!(resp["error"]["data"]["pointer"], "/title");
    let (code, message) = r.err(
        "workflow.execute",
        adr_params(json!({"title": "x", "extra": 1}), &deadline),
    );
    assert_eq!(code, -32602);
    assert!(message.contains("'/extra'"), "{message}");
    let (code, _) = r.err(
        "workflow.execute",
        adr_params(json!({"title": "x"}), "soon"),
    );
    assert_eq!(code, -32602);
}

#[test]
fn protocol_errors_get_their_codes_and_the_runner_keeps_serving() {
    let mut r = Runner::spawn(&[]);
    assert_eq!(r.err("no.such.method", with_ctx(json!({}))).0, -32601);
    assert_eq!(r.err("personas.list", json!({})).0, -32602);
    let bad_ctx = json!({"ctx": {"tenant_id": "t", "actor_id": "a"}});
    assert_eq!(r.err("route", bad_ctx).0, -32602);

    for (line, code) in [
        ("{not json", -32700),
        ("[1, 2]", -32600),
        ("\"just a string\"", -32600),
    ] {
        r.send_raw(format!("{line}\n").as_bytes());
        let frame = r.recv();
        assert_eq!(error_of(&frame).0, code, "{line}");
        assert!(frame.get("id").is_none(), "{frame}");
    }
    // Notifications get no answer: the next frame answers the next request.
    r.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"hello\"}\n");
    assert!(r.ok("personas.list", with_ctx(json!({})))["personas"].is_array());
}

#[test]
fn an_over_long_line_is_refused_and_reading_goes_on() {
    let mut r = Runner::spawn(&[]);
    let mut line = vec![b'x'; 8 * 1024 * 1024 + 10];
    line.push(b'\n');
    r.send_raw(&line);
    let frame = r.recv();
    assert_eq!(error_of(&frame).0, -32600);
    assert!(frame.get("id").is_none());
    assert!(r.ok("personas.list", with_ctx(json!({})))["personas"].is_array());
}

#[test]
fn pacing_stops_at_a_deadline_in_the_past_or_the_near_future() {
    let mut r = Runner::spawn(&["--pace-ms", "300"]);
    let past = rfc3339_in(chrono::TimeDelta::seconds(-5));
    let (progress, resp) = r.call("workflow.execute", adr_params(json!({"title": "t"}), &past));
    assert!(progress.is_empty());
    assert_eq!(error_of(&resp), (-32001, "deadline exceeded".to_owned()));

    // Three steps of 300 ms against a 500 ms deadline: one step runs, then it is over.
    let soon = rfc3339_in(chrono::TimeDelta::milliseconds(500));
    let start = Instant::now();
    let (progress, resp) = r.call("workflow.execute", adr_params(json!({"title": "t"}), &soon));
    assert_eq!(error_of(&resp).0, -32001);
    assert_eq!(progress.len(), 1, "{progress:?}");
    assert!(start.elapsed() < Duration::from_secs(2));

    let (progress, resp) = r.call(
        "workflow.execute",
        adr_params(json!({"title": "t"}), &far_deadline()),
    );
    assert_eq!(resp["result"]["steps_executed"], 3);
    assert_eq!(progress.len(), 3);
}

#[test]
fn eof_exits_zero_even_in_the_middle_of_a_paced_run() {
    let mut r = Runner::spawn(&[]);
    r.ok("personas.list", with_ctx(json!({})));
    r.close_stdin();
    assert_eq!(r.wait_exit(Duration::from_secs(5)).code(), Some(0));

    let mut r = Runner::spawn(&["--pace-ms", "10000"]);
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "workflow.execute",
        "params": adr_params(json!({"title": "t"}), &far_deadline())});
    r.send_raw(format!("{request}\n").as_bytes());
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    r.close_stdin();
    assert_eq!(r.wait_exit(Duration::from_secs(5)).code(), Some(0));
    assert!(start.elapsed() < Duration::from_secs(3));
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
    let marker = dir.path().join("survived");
    let script = format!(
        "#!/bin/sh\n(sleep 3; touch '{}') &\nsleep 30\n",
        marker.display()
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
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        !marker.exists(),
        "a process of the killed entrypoint lived on"
    );
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
