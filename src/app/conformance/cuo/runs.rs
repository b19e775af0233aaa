//! The runs: `workflow.execute` and `skill.invoke`, each on a child of its own with id 1
//! as the bridge sends them, against the quickest workflow the checker can fill in and a
//! SKILL folder it writes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::child::Child;
use super::probe::{describe, error_check, result_check, with_ctx};
use super::record::{Answer, Reply};
use super::shapes::{self, Workflow};
use super::{Catalogue, Checklist};
use crate::app::conformance::report::{Check, plural};

/// How long a run child is watched after its response, for messages it should have sent
/// before it.
const LINGER: Duration = Duration::from_millis(500);
/// How long a killed child may take to be gone.
const KILL_WITHIN: Duration = Duration::from_secs(3);
/// A workflow id no catalogue holds.
const NO_SUCH_WORKFLOW: &str = "cyberos-check-no-such-workflow";
/// The name of the skill the checker writes.
const SKILL: &str = "cyberos-check-skill";

/// An RFC 3339 UTC timestamp with milliseconds, `offset` from now.
fn deadline(offset: chrono::TimeDelta) -> String {
    (chrono::Utc::now() + offset).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A folder holding one SKILL.md, removed on drop.
struct SkillDir {
    root: PathBuf,
    folder: PathBuf,
}

impl SkillDir {
    fn create() -> std::io::Result<SkillDir> {
        let tag: String = crate::support::random::random_bytes::<8>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let root = std::env::temp_dir().join(format!("cyberos-check-{tag}"));
        std::fs::create_dir(&root)?;
        let dir = SkillDir {
            folder: root.join(SKILL),
            root,
        };
        std::fs::create_dir(&dir.folder)?;
        // The schema as one line of JSON, which is YAML too.
        let schema = json!({"type": "object",
            "properties": {"topic": {"type": "string", "minLength": 1, "maxLength": 200}},
            "required": ["topic"], "additionalProperties": false});
        std::fs::write(
            dir.folder.join("SKILL.md"),
            format!(
                "---\nname: {SKILL}\ndescription: A skill written by cyberos-mcp-bridge check-cuo.\ninput_schema: {schema}\n---\n# Notes\n\nWrite notes about {{{{topic}}}}.\n"
            ),
        )?;
        let mut dir = dir;
        dir.folder = dir.folder.canonicalize()?;
        Ok(dir)
    }
}

impl Drop for SkillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn skill_params(name: &str, path: &Path, inputs: Value, deadline: &str) -> Value {
    with_ctx(json!({
        "skill": {"name": name, "description": "A skill written by cyberos-mcp-bridge check-cuo.", "path": path.display().to_string()},
        "inputs": inputs, "deadline": deadline
    }))
}

impl Checklist {
    /// One request on a child of its own; the child is killed once it has answered.
    async fn once(&mut self, method: &str, params: Value, wait: Duration) -> Answer {
        let mut child = match Child::start(&self.program, "a run child") {
            Ok(child) => child,
            Err(why) => {
                return Answer {
                    reply: Reply::Error {
                        code: None,
                        message: why,
                    },
                    notifications: Vec::new(),
                };
            }
        };
        let answer = child.call(method, params, wait).await;
        self.records.push(child.finish().await);
        answer
    }

    fn run_wait(&self) -> Duration {
        self.options.run_timeout + Duration::from_secs(2)
    }

    fn run_deadline(&self) -> String {
        let ahead =
            chrono::TimeDelta::from_std(self.options.run_timeout).unwrap_or(chrono::TimeDelta::MAX);
        deadline(ahead)
    }

    /// Every run check.
    pub(super) async fn runs(&mut self, catalogue: &Catalogue) {
        match shapes::chosen(&catalogue.workflows) {
            Some((workflow, inputs)) => self.workflow_runs(workflow, inputs).await,
            None => {
                let why = if catalogue.personas.is_empty() {
                    "a workflow to run: personas.list gave none".to_owned()
                } else {
                    "a workflow whose input_schema the checker can fill in (required properties of simple types)".to_owned()
                };
                for name in [
                    "workflow.execute result",
                    "unknown workflow",
                    "bad inputs",
                    "progress before the response",
                    "deadline",
                    "killed with the process group",
                ] {
                    self.set(Check::skip(name, why.clone()));
                }
            }
        }
        self.skill_runs().await;
    }

    async fn workflow_runs(&mut self, workflow: &Workflow, inputs: Value) {
        let run = |inputs: &Value, deadline: &str| {
            with_ctx(
                json!({"persona": workflow.persona, "workflow": workflow.id, "inputs": inputs, "deadline": deadline}),
            )
        };
        let params = run(&inputs, &self.run_deadline());
        let sent = describe("workflow.execute", &params);
        match Child::start(&self.program, "the run child") {
            Err(why) => self.set(Check::fail(
                "workflow.execute result",
                sent,
                why,
                "a program that starts",
            )),
            Ok(mut child) => {
                let answer = child
                    .call("workflow.execute", params, self.run_wait())
                    .await;
                let late = child.linger(LINGER).await;
                let (check, steps) =
                    result_check("workflow.execute result", sent.clone(), &answer, |r| {
                        let steps = shapes::outcome(r)?;
                        let artifacts = plural(
                            r["final_artifacts"].as_array().map_or(0, Vec::len),
                            "artifact",
                        );
                        Ok((
                            steps,
                            format!(
                                "{} executed, {artifacts}",
                                plural(usize::try_from(steps).unwrap_or(usize::MAX), "step")
                            ),
                        ))
                    });
                self.set(check);
                self.set(progress_check(
                    sent.clone(),
                    &answer,
                    steps.is_some(),
                    &late,
                ));
                let pgid = child.pgid;
                let check = match child.kill_group(KILL_WITHIN).await {
                    Some(took) => Check::pass(
                        "killed with the process group",
                        format!("SIGKILL to process group {pgid} after the run's response"),
                        format!(
                            "the child was gone {:.2} s later, and no helper of any child outlived its group",
                            took.as_secs_f64()
                        ),
                    ),
                    None => Check::fail(
                        "killed with the process group",
                        format!("SIGKILL to process group {pgid} after the run's response"),
                        format!(
                            "the child was still there {} s later",
                            KILL_WITHIN.as_secs()
                        ),
                        "a child that dies with its group",
                    ),
                };
                self.set(check);
                self.records.push(child.finish().await);
            }
        }

        let wait = self.run_wait();
        let mut params = run(&inputs, &self.run_deadline());
        params["workflow"] = json!(NO_SUCH_WORKFLOW);
        let answer = self.once("workflow.execute", params.clone(), wait).await;
        self.set(error_check(
            "unknown workflow",
            describe("workflow.execute", &params),
            &answer,
            -32602,
            |_| None,
        ));

        match shapes::invalid_inputs(&workflow.input_schema, &inputs) {
            Some((bad, how)) => {
                let params = run(&bad, &self.run_deadline());
                let answer = self.once("workflow.execute", params.clone(), wait).await;
                let sent = format!("{} ({how})", describe("workflow.execute", &params));
                self.set(error_check("bad inputs", sent, &answer, -32602, |_| None));
            }
            None => self.set(Check::skip(
                "bad inputs",
                "inputs the workflow's input_schema refuses: it accepts anything",
            )),
        }

        let params = run(&inputs, &deadline(chrono::TimeDelta::seconds(-5)));
        let started = Instant::now();
        let answer = self
            .once(
                "workflow.execute",
                params.clone(),
                self.options.call_timeout,
            )
            .await;
        let sent = format!(
            "{} with a deadline 5 s past",
            describe("workflow.execute", &params)
        );
        let seen = format!(
            "{} after {:.2} s",
            answer.reply.describe(),
            started.elapsed().as_secs_f64()
        );
        let check = match &answer.reply {
            Reply::Error {
                code: Some(-32001), ..
            } => Check::pass("deadline", sent, seen),
            _ => Check::fail(
                "deadline",
                sent,
                seen,
                "error -32001 \"deadline exceeded\" at once",
            ),
        };
        self.set(check);
    }

    async fn skill_runs(&mut self) {
        let dir = match SkillDir::create() {
            Ok(dir) => dir,
            Err(e) => {
                let why = format!(
                    "a SKILL folder in the temporary directory, which could not be written: {e}"
                );
                for name in ["skill.invoke result", "bad skill inputs", "unknown skill"] {
                    self.set(Check::skip(name, why.clone()));
                }
                return;
            }
        };
        let wait = self.run_wait();
        let params = skill_params(
            SKILL,
            &dir.folder,
            json!({"topic": "conformance"}),
            &self.run_deadline(),
        );
        let answer = self.once("skill.invoke", params.clone(), wait).await;
        let (check, _) = result_check(
            "skill.invoke result",
            describe("skill.invoke", &params),
            &answer,
            |r| {
                shapes::skill_outcome(r)?;
                let n = r["artifacts"].as_array().map_or(0, Vec::len);
                Ok(((), format!("an output and {}", plural(n, "artifact"))))
            },
        );
        self.set(check);

        let params = skill_params(
            SKILL,
            &dir.folder,
            json!({"topic": 7}),
            &self.run_deadline(),
        );
        let answer = self.once("skill.invoke", params.clone(), wait).await;
        let sent = format!(
            "{} (topic must be a string)",
            describe("skill.invoke", &params)
        );
        self.set(error_check(
            "bad skill inputs",
            sent,
            &answer,
            -32602,
            |_| None,
        ));

        let missing = dir.root.join("no-such-skill");
        let shown = missing.display().to_string();
        let params = skill_params("no-such-skill", &missing, json!({}), &self.run_deadline());
        let answer = self.once("skill.invoke", params.clone(), wait).await;
        self.set(error_check(
            "unknown skill",
            describe("skill.invoke", &params),
            &answer,
            -32602,
            |m| {
                m.contains(&shown)
                    .then(|| "a message that does not show the folder's path".to_owned())
            },
        ));
    }
}

/// `progress before the response`: a successful run reported progress, in shape, before
/// its response, and nothing after it.
fn progress_check(sent: String, answer: &Answer, succeeded: bool, late: &[Value]) -> Check {
    const NAME: &str = "progress before the response";
    if !succeeded {
        return Check::fail(
            NAME,
            sent,
            answer.reply.describe(),
            "a successful run to watch",
        );
    }
    let before = match shapes::progress(&answer.notifications) {
        Ok(steps) => steps,
        Err(want) => return Check::fail(NAME, sent, "progress of the wrong shape", want),
    };
    let after: Vec<&Value> = late.iter().filter(|n| n["method"] == "progress").collect();
    if let Some(first) = after.first() {
        return Check::fail(
            NAME,
            sent,
            format!(
                "{} progress after the response, the first: {first}",
                after.len()
            ),
            "every progress before the response (the bridge kills the child once it has the response)",
        );
    }
    match (before.first(), before.last()) {
        (Some(first), Some(last)) => Check::pass(
            NAME,
            sent,
            format!(
                "{} progress notifications (steps {first} to {last}) before the response, none after",
                before.len()
            ),
        ),
        _ => Check::fail(
            NAME,
            sent,
            "no progress before the response",
            "progress {step, total, message} as the run advances",
        ),
    }
}
