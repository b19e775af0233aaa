//! The same port contracts run against the test fakes and the real adapters, so a fake
//! cannot drift from what the product does: the CUO runner (the real child-process
//! adapter over the bundled runner) and the skill index (the real folder scanner).

use std::sync::Arc;

use cyberos_mcp_bridge::adapters::cuo_process::{CuoSettings, ProcessCuoRunner, STARTING_FOR};
use cyberos_mcp_bridge::adapters::skills_fs::FsSkillIndex;
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::domain::cuo::Progress;
use cyberos_mcp_bridge::domain::{CallCtx, DomainError, ErrorClass, JsonText, Timestamp};
use cyberos_mcp_bridge::ports::{Clock, CuoRunner, ProgressSink, SkillIndex, WorkflowRun};

use crate::support::binary::binary;
use crate::support::fakes::{Behaviour, PacedCuo, ScriptedCuo, StaticSkills};
use crate::support::{call_ctx, fixtures};

fn ctx() -> CallCtx {
    call_ctx("00000000-0000-4000-8000-000000000001")
}

fn class<T: std::fmt::Debug>(r: Result<T, DomainError>) -> ErrorClass {
    r.expect_err("an error").class()
}

/// What every `CuoRunner` must do for the short calls.
async fn cuo_contract(cuo: &dyn CuoRunner) {
    let ctx = ctx();
    let personas = cuo.list_personas(&ctx).await.unwrap();
    let cto = personas
        .iter()
        .find(|p| p.id == "chief-technology-officer")
        .expect("the CTO persona");
    assert!(
        !cto.title.is_empty()
            && !cto.short_name.is_empty()
            && cto.workflows.contains(&"architect-new-system".into())
    );
    let workflows = cuo
        .list_workflows(&ctx, Some("chief-technology-officer"))
        .await
        .unwrap();
    assert!(
        workflows
            .iter()
            .all(|w| w.persona == "chief-technology-officer")
    );
    let schema: serde_json::Value =
        serde_json::from_str(workflows[0].input_schema.as_str()).unwrap();
    assert_eq!(schema["type"], "object");
    assert_eq!(
        class(cuo.list_workflows(&ctx, Some("no-such-persona")).await),
        ErrorClass::InputValidation
    );
    let route = cuo
        .route(
            &ctx,
            "Architect a new payment routing system for Southeast Asian markets",
            3,
        )
        .await
        .unwrap();
    assert_eq!(
        (route.persona.as_str(), route.workflow.as_str()),
        ("chief-technology-officer", "architect-new-system")
    );
    assert!((0.0..=1.0).contains(&route.confidence));
    assert!(route.alternates.len() <= 2);
    cuo.check().await.unwrap();
}

#[tokio::test]
async fn the_scripted_cuo_satisfies_the_cuo_contract() {
    cuo_contract(&ScriptedCuo).await;
}

#[tokio::test]
async fn the_process_adapter_over_the_bundled_runner_satisfies_the_cuo_contract() {
    cuo_contract(&process_cuo(&[])).await;
}

/// The real child-process adapter over the bundled runner, run with `runner_args`.
fn process_cuo(runner_args: &[&str]) -> ProcessCuoRunner {
    let mut command = vec![binary().to_owned(), "cuo-runner".into()];
    command.extend(runner_args.iter().map(|a| (*a).to_owned()));
    ProcessCuoRunner::new(
        CuoSettings {
            command,
            pass_env: Vec::new(),
            call_timeout: std::time::Duration::from_secs(10),
            starting: 1,
            starting_for: STARTING_FOR,
        },
        Arc::new(SystemClock),
    )
}

/// Progress reports, kept.
#[derive(Default)]
struct Reports(std::sync::Mutex<Vec<Progress>>);

impl ProgressSink for Reports {
    fn report(&self, progress: Progress) {
        self.0.lock().unwrap().push(progress);
    }
}

/// What every `CuoRunner` does with a run of `adr-quick-capture` paced at 100 ms a step
/// (the acceptance suite relies on it): three steps, each reported, the artifact
/// `adr.md`; past its deadline, `internal_error` with a hint that names the timeout.
async fn paced_run_contract(cuo: &dyn CuoRunner) {
    let run = |ms: i64| WorkflowRun {
        persona: "chief-technology-officer".into(),
        workflow: "adr-quick-capture".into(),
        inputs: JsonText::from_serialized(r#"{"title":"t"}"#.into()),
        deadline: Timestamp::from_unix_millis(SystemClock.now().unix_millis() + ms),
    };
    let reports = Reports::default();
    let done = cuo
        .execute_workflow(&ctx(), &run(10_000), &reports)
        .await
        .unwrap();
    assert_eq!(done.steps_executed, 3);
    assert_eq!(done.final_artifacts[0].name, "adr.md");
    let steps: Vec<u64> = reports.0.lock().unwrap().iter().map(|p| p.step).collect();
    assert_eq!(steps, [1, 2, 3]);
    let late = cuo
        .execute_workflow(&ctx(), &run(150), &Reports::default())
        .await
        .expect_err("past its deadline");
    assert_eq!(late.class(), ErrorClass::Internal, "{late:?}");
    assert!(late.hint().contains("timeout"), "{late:?}");
}

#[tokio::test]
async fn the_paced_cuo_satisfies_the_cuo_contracts() {
    let cuo = PacedCuo::new(std::time::Duration::from_millis(100), Arc::new(SystemClock));
    cuo_contract(&cuo).await;
    paced_run_contract(&cuo).await;
    assert_eq!(cuo.live_runs(), 0, "every run ended");
    assert!(cuo.calls() > 0);
}

#[tokio::test]
async fn paced_runs_of_the_process_adapter_over_the_bundled_runner_keep_the_contract() {
    paced_run_contract(&process_cuo(&["--pace-ms", "100"])).await;
}

/// What every `SkillIndex` must do.
async fn skills_contract(skills: &dyn SkillIndex, expected: &[&str]) {
    let all = skills.list(None, 50).await.unwrap();
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, expected, "sorted by name");
    assert_eq!(skills.list(None, 1).await.unwrap().len(), 1, "limit holds");
    let first = skills
        .get(expected[0])
        .await
        .unwrap()
        .expect("get finds a listed skill");
    assert_eq!(first.name, expected[0]);
    let word = first
        .description
        .split_whitespace()
        .next()
        .unwrap()
        .to_uppercase();
    assert!(
        skills
            .list(Some(&word), 50)
            .await
            .unwrap()
            .iter()
            .any(|s| s.name == first.name),
        "queries ignore case"
    );
    assert!(
        skills
            .list(Some("zzz-no-such-word"), 50)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(skills.get("no-such-skill").await.unwrap(), None);
    skills.check().await.unwrap();
}

#[tokio::test]
async fn the_static_skills_satisfy_the_skill_index_contract() {
    skills_contract(&StaticSkills::new(Behaviour::Answer), &["alpha", "beta"]).await;
}

#[tokio::test]
async fn the_folder_scanner_satisfies_the_skill_index_contract() {
    let index = FsSkillIndex::new(vec![fixtures().join("skills")]);
    skills_contract(&index, &["quarterly-report", "release-notes"]).await;
    let missing = Arc::new(FsSkillIndex::new(vec![fixtures().join("no-such-dir")]));
    assert_eq!(
        class(missing.list(None, 5).await),
        ErrorClass::UpstreamUnavailable
    );
}

/// Hosts drop schema keywords before their model sees a tool (Codex strips `maxLength`,
/// `minLength`, `minimum`, `maximum`, `pattern` and `format`, tests/hosts): each limit is
/// also written in its property's description, which they keep.
#[test]
fn every_schema_limit_is_also_in_its_description() {
    use cyberos_mcp_bridge::domain::Tool;
    for tool in Tool::ALL {
        let schema: serde_json::Value = serde_json::from_str(tool.spec().input_schema).unwrap();
        let Some(props) = schema["properties"].as_object() else {
            continue;
        };
        for (name, prop) in props {
            let text = prop["description"].as_str().unwrap_or_default();
            let at = format!("{}/{name}", tool.name());
            for key in ["maxLength", "maximum"] {
                if let Some(n) = prop[key].as_u64() {
                    assert!(
                        text.contains(&n.to_string()),
                        "{at}: {key} {n} not in {text:?}"
                    );
                }
            }
            for key in ["minLength", "minimum"] {
                if let Some(n) = prop[key].as_u64().filter(|n| *n > 0) {
                    assert!(
                        text.contains(&format!("{n} to")),
                        "{at}: {key} {n} not in {text:?}"
                    );
                }
            }
            if prop.get("pattern").is_some() {
                assert!(
                    text.contains("letters"),
                    "{at}: the pattern is not in {text:?}"
                );
            }
            if prop.get("format").is_some() {
                assert!(
                    text.contains("RFC 3339"),
                    "{at}: the format is not in {text:?}"
                );
            }
        }
    }
}
