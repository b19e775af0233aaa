//! `check-cuo`: the checklist of `docs/cuo-protocol.md` §7 run against a CUO command.
//!
//! The program is started as the bridge starts it: short calls on one shared child
//! (`personas.list`, `workflows.list`, `route`, several at once, then EOF), each run
//! (`workflow.execute`, `skill.invoke`) on a child of its own with id 1, killed with its
//! process group once answered. The wire rules (`wire`) are judged over every line of
//! every child; the rest per probe. Runs use the quickest workflow whose `input_schema`
//! the checker can fill, and a SKILL folder it writes for the purpose.

mod child;
mod frames;
#[cfg(target_os = "linux")]
mod probe;
mod reaper;
mod record;
mod runs;
mod shapes;
mod wire;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::app::conformance::report::{self, Check, Report, Status};
use child::{Child, Program};
use probe::{ctx, describe, error_check, result_check, with_ctx};
use record::{Record, Reply};
use shapes::Workflow;

/// How long a child may take to exit once its stdin is closed.
const EOF_WITHIN: Duration = Duration::from_secs(3);
/// A persona id no catalogue holds.
const NO_SUCH_PERSONA: &str = "cyberos-check-no-such-persona";
/// `route`'s limit in the checks: the best pair and at most one alternate.
const ROUTE_LIMIT: usize = 2;

/// The checklist's rules, in the order of §7.
const RULES: [&str; 19] = [
    "answers by id",
    "single-line JSON",
    "integer ids, no requests",
    "ctx required",
    "personas.list result",
    "workflows.list result",
    "route result",
    "workflow.execute result",
    "skill.invoke result",
    "unknown persona",
    "unknown workflow",
    "unknown skill",
    "bad inputs",
    "bad skill inputs",
    "several requests at once",
    "progress before the response",
    "deadline",
    "killed with the process group",
    "EOF exit",
];

/// What `check-cuo` runs.
#[derive(Debug, Clone)]
pub struct CuoCheckOptions {
    /// The CUO program and its arguments (`--cuo-command`).
    pub command: Vec<String>,
    /// Variables passed through besides the bridge's own few (`--cuo-env`).
    pub pass_env: Vec<String>,
    /// The wait for a short call (`--cuo-timeout`).
    pub call_timeout: Duration,
    /// The wait for a run; its `deadline` is this far ahead.
    pub run_timeout: Duration,
}

/// Runs the checklist; every child is gone when it returns.
pub async fn check_cuo(options: &CuoCheckOptions) -> Report {
    let mut words = options.command.iter().cloned();
    let program = Program {
        program: words.next().unwrap_or_default(),
        args: words.collect(),
        env: crate::support::children::cuo_env(&options.pass_env),
    };
    let mut checklist = Checklist {
        options: options.clone(),
        program,
        checks: HashMap::new(),
        records: Vec::new(),
    };
    #[cfg(target_os = "linux")]
    if let Err(e) = reaper::adopt_orphans() {
        tracing::warn!("{e}: helpers that leave a child's process group go unnoticed");
    }
    let catalogue = match checklist.shared().await {
        Ok(catalogue) => catalogue,
        Err(why) => {
            // The program only: its arguments may carry secrets.
            let program = options.command.first().map_or("", String::as_str);
            return Report {
                subject: "check-cuo",
                checks: vec![Check::fail(
                    "start",
                    format!("nothing (starting {})", report::clip(program)),
                    why,
                    "a program that starts",
                )],
            };
        }
    };
    checklist.runs(&catalogue).await;
    checklist.report()
}

/// The checks so far and what every child wrote.
struct Checklist {
    options: CuoCheckOptions,
    program: Program,
    checks: HashMap<&'static str, Check>,
    records: Vec<Record>,
}

/// What the short calls told about the catalogue.
struct Catalogue {
    personas: Vec<String>,
    workflows: Vec<Workflow>,
}

impl Checklist {
    fn set(&mut self, check: Check) {
        self.checks.insert(check.name, check);
    }

    fn report(mut self) -> Report {
        self.set(wire::answers(&self.records));
        self.set(wire::framing(&self.records));
        self.set(wire::ids(&self.records));
        let escaped: Vec<String> = self
            .records
            .iter()
            .flat_map(|r| r.escaped.clone())
            .collect();
        if let Some(first) = escaped.first()
            && let Some(killed) = self.checks.get_mut("killed with the process group")
        {
            *killed = Check::fail(
                killed.name,
                killed.sent.clone(),
                first.clone(),
                "helpers kept in the child's process group, so the group's kill ends them",
            );
        }
        let checks = RULES
            .iter()
            .map(|name| {
                self.checks.remove(name).unwrap_or_else(|| {
                    Check::fail(
                        name,
                        "nothing",
                        "nothing",
                        "not checked: an earlier step failed",
                    )
                })
            })
            .collect();
        Report {
            subject: "check-cuo",
            checks,
        }
    }

    /// The short calls on one shared child, then several at once, then EOF.
    async fn shared(&mut self) -> Result<Catalogue, String> {
        let wait = self.options.call_timeout;
        let mut child = Child::start(&self.program, "the shared child")?;

        let params = with_ctx(json!({}));
        let answer = child.call("personas.list", params.clone(), wait).await;
        let (check, personas) = result_check(
            "personas.list result",
            describe("personas.list", &params),
            &answer,
            |r| {
                shapes::personas(r).map(|ids| {
                    let seen = format!(
                        "{} personas, each with id, title, short_name, description and workflows",
                        ids.len()
                    );
                    (ids, seen)
                })
            },
        );
        self.set(check);
        let personas = personas.unwrap_or_default();
        let first = personas.first().cloned().unwrap_or_default();

        let all = with_ctx(json!({}));
        let answer = child.call("workflows.list", all.clone(), wait).await;
        let one = with_ctx(json!({"persona": first}));
        let of_one = child.call("workflows.list", one.clone(), wait).await;
        let sent = format!(
            "{} and {}",
            describe("workflows.list", &all),
            describe("workflows.list", &one)
        );
        let (check, workflows) =
            result_check("workflows.list result", sent.clone(), &answer, |r| {
                let list = shapes::workflows(r, &personas, None)?;
                let seen = format!("{} workflows of {} personas", list.len(), personas.len());
                Ok((list, seen))
            });
        let check = match (&check.status, workflows.as_ref()) {
            (Status::Pass, Some(list)) => {
                let (narrow, _) = result_check("workflows.list result", sent, &of_one, |r| {
                    let mine = shapes::workflows(r, &personas, Some(&first))?;
                    let seen =
                        format!("{} workflows in all, {} of {first}", list.len(), mine.len());
                    Ok(((), seen))
                });
                narrow
            }
            _ => check,
        };
        self.set(check);
        let workflows = workflows.unwrap_or_default();

        let bad_ctx =
            json!({"ctx": {"tenant_id": ctx()["tenant_id"], "actor_id": ctx()["actor_id"]}});
        let answer = child.call("personas.list", bad_ctx, wait).await;
        self.set(error_check(
            "ctx required",
            "personas.list with a ctx that lacks traceparent".into(),
            &answer,
            -32602,
            |_| None,
        ));

        let params = with_ctx(json!({"persona": NO_SUCH_PERSONA}));
        let answer = child.call("workflows.list", params.clone(), wait).await;
        self.set(error_check(
            "unknown persona",
            describe("workflows.list", &params),
            &answer,
            -32602,
            |_| None,
        ));

        let query = shapes::chosen(&workflows).map_or_else(
            || "plan the architecture of a new system".to_owned(),
            |(w, _)| w.title.clone(),
        );
        let params = with_ctx(json!({"query": query, "limit": ROUTE_LIMIT}));
        let answer = child.call("route", params.clone(), wait).await;
        let (check, _) = result_check("route result", describe("route", &params), &answer, |r| {
            shapes::route(r, ROUTE_LIMIT, &workflows)?;
            let alternates =
                report::plural(r["alternates"].as_array().map_or(0, Vec::len), "alternate");
            let (p, w) = (
                r["persona"].as_str().unwrap_or(""),
                r["workflow"].as_str().unwrap_or(""),
            );
            Ok((
                (),
                format!(
                    "{p}/{w} with confidence {} and {alternates}",
                    r["confidence"]
                ),
            ))
        });
        self.set(check);

        self.set(at_once(&mut child, &personas, &first, &query, wait).await);

        let check = match child.close_and_wait(EOF_WITHIN).await {
            Some((took, status)) => Check::pass(
                "EOF exit",
                "EOF on stdin (stdin closed)",
                format!("exited {:.2} s later ({status})", took.as_secs_f64()),
            ),
            None => Check::fail(
                "EOF exit",
                "EOF on stdin (stdin closed)",
                format!("still running {} s later", EOF_WITHIN.as_secs()),
                "an exit soon after stdin closes",
            ),
        };
        self.set(check);
        self.records.push(child.finish().await);
        Ok(Catalogue {
            personas,
            workflows,
        })
    }
}

/// `several requests at once`: four short calls in one write, each answered by its id
/// with the answer its method gives.
async fn at_once(
    child: &mut Child,
    personas: &[String],
    persona: &str,
    query: &str,
    wait: Duration,
) -> Check {
    const NAME: &str = "several requests at once";
    let requests = [
        ("personas.list", with_ctx(json!({}))),
        ("workflows.list", with_ctx(json!({"persona": persona}))),
        (
            "route",
            with_ctx(json!({"query": query, "limit": ROUTE_LIMIT})),
        ),
        ("workflows.list", with_ctx(json!({}))),
    ];
    let until = std::time::Instant::now() + wait;
    let ids = child.send(&requests, wait).await;
    let sent = format!(
        "{} in one write (ids {})",
        requests
            .iter()
            .map(|(m, _)| *m)
            .collect::<Vec<_>>()
            .join(", "),
        ids.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (id, (method, params)) in ids.iter().zip(&requests) {
        let answer = child.answer(*id, until).await;
        let fits = match (&answer.reply, *method) {
            (Reply::Result(r), "personas.list") => shapes::personas(r).map(|_| ()),
            (Reply::Result(r), "workflows.list") => {
                shapes::workflows(r, personas, params.get("persona").and_then(Value::as_str))
                    .map(|_| ())
            }
            (Reply::Result(r), _) => r
                .get("persona")
                .and_then(Value::as_str)
                .map(|_| ())
                .ok_or_else(|| "a route result".to_owned()),
            _ => Err("a result".into()),
        };
        if let Err(want) = fits {
            return Check::fail(
                NAME,
                sent,
                format!("for {method} (id {id}): {}", answer.reply.describe()),
                format!(
                    "each answered by its id within {} s: {want}",
                    wait.as_secs()
                ),
            );
        }
    }
    Check::pass(
        NAME,
        sent,
        "each answered by its id with its own method's result",
    )
}
