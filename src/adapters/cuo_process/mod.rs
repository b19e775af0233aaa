//! `CuoRunner` over a child process speaking JSON-RPC 2.0, one message per line on its
//! stdin/stdout (CONTRACT §8, `docs/cuo-protocol.md`).
//!
//! Short calls share one long-lived child, multiplexed by request id; when it dies,
//! wedges past the call timeout or writes garbage, the call fails `upstream_unavailable`
//! and the next call spawns a fresh child. Each workflow or skill run gets a child of its
//! own, killed with its whole process group when the run ends or is dropped; run children
//! start a few at a time (`CuoSettings::starting`). Children get a scrubbed environment
//! and never see the client's token.
//!
//! `connection` is one child and its JSON-RPC connection; `wire` the message types of
//! `docs/cuo-protocol.md`; this module the port on top of them.

mod connection;
mod spawner;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::domain::cuo::{Persona, Route, Workflow, WorkflowOutcome};
use crate::domain::{CallCtx, DomainError, JsonText, TenantId, Timestamp, TraceId, Upstream};
use crate::ports::{Clock, CuoRunner, ProgressSink, SkillRun, WorkflowRun};
use connection::{CallError, ChildCommand, Conn, KillOnDrop};
use spawner::Spawner;
use wire::{ctx_json, progress_of};

pub use connection::MAX_CHILD_LINE;

/// The longest a run child counts as starting when it writes nothing sooner: a slow
/// starter delays the next by this much at most.
pub const STARTING_FOR: Duration = Duration::from_millis(20);

/// How to start and talk to CUO children.
#[derive(Debug, Clone)]
pub struct CuoSettings {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra variable names passed through to children.
    pub pass_env: Vec<String>,
    /// Timeout of a short call.
    pub call_timeout: Duration,
    /// How many run children may be starting at once ([`starting_children`]).
    pub starting: usize,
    /// How long a silent run child counts as starting ([`STARTING_FOR`]).
    pub starting_for: Duration,
}

/// How many run children may be starting at once on this machine: one per CPU but one,
/// which is left to the bridge itself (at least one).
pub fn starting_children() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.saturating_sub(1).max(1)
}

/// The CUO orchestrator as child processes.
pub struct ProcessCuoRunner {
    command: ChildCommand,
    spawner: Spawner,
    call_timeout: Duration,
    /// Held while a replacement starts, so concurrent calls share it.
    shared: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// Run children starting now, at most `CuoSettings::starting` (`run`).
    starting: tokio::sync::Semaphore,
    /// `CuoSettings::starting_for`.
    starting_for: Duration,
    /// What a run's deadline is measured against.
    clock: Arc<dyn Clock>,
}

impl ProcessCuoRunner {
    /// A runner for `settings`, measuring runs' deadlines against `clock`; no child
    /// starts until the first call.
    ///
    /// # Panics
    /// When `settings.command` is empty (configuration refuses that earlier).
    pub fn new(settings: CuoSettings, clock: Arc<dyn Clock>) -> ProcessCuoRunner {
        let mut words = settings.command.into_iter();
        let program = words.next().expect("the CUO command is not empty");
        let env = crate::support::children::cuo_env(&settings.pass_env);
        ProcessCuoRunner {
            command: ChildCommand {
                program,
                args: words.collect(),
                env,
            },
            spawner: Spawner::default(),
            call_timeout: settings.call_timeout,
            shared: tokio::sync::Mutex::new(None),
            starting: tokio::sync::Semaphore::new(settings.starting.max(1)),
            starting_for: settings.starting_for,
            clock,
        }
    }

    async fn shared_conn(&self) -> Result<Arc<Conn>, CallError> {
        let mut slot = self.shared.lock().await;
        if let Some(conn) = slot.as_ref()
            && !conn.closed.is_cancelled()
        {
            return Ok(Arc::clone(conn));
        }
        let conn = self.command.spawn(&self.spawner, None).await?;
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// A short call on the shared child.
    async fn short_call(&self, method: &str, params: Value) -> Result<Value, DomainError> {
        let conn = self
            .shared_conn()
            .await
            .map_err(|e| short_error(e, method))?;
        match conn.request(method, params, self.call_timeout).await {
            Ok(v) => Ok(v),
            Err(CallError::Timeout) => {
                // A wedged child serves nobody: replace it.
                tracing::warn!(
                    pid = conn.pgid,
                    method,
                    "CUO call timed out; killing the child"
                );
                conn.kill();
                Err(short_error(CallError::Timeout, method))
            }
            Err(e) => Err(short_error(e, method)),
        }
    }

    /// A run on a child of its own, with progress, until `deadline`.
    async fn run(
        &self,
        method: &str,
        params: Value,
        deadline: Timestamp,
        progress: &dyn ProgressSink,
    ) -> Result<Value, DomainError> {
        // A child's start-up (exec, loading, its first request) wants a CPU; hundreds of
        // runs started at once would hold the bridge's own threads off the CPUs
        // (docs/performance.md, "Task handles"). So only a few
        // children are starting at any moment: each until its first line, or for
        // `starting_for` when it says nothing sooner.
        let mut starting = Some(
            self.starting
                .acquire()
                .await
                .map_err(|_| short_error(CallError::Closed, method))?,
        );
        let (events, mut incoming) = mpsc::unbounded_channel();
        let conn = self
            .command
            .spawn(&self.spawner, Some(events))
            .await
            .map_err(|e| short_error(e, method))?;
        let started = tokio::time::sleep(self.starting_for);
        tokio::pin!(started);
        let _kill = KillOnDrop(Arc::clone(&conn));
        let left = Duration::from_millis(deadline.millis_since(self.clock.now()));
        let call = conn.request(method, params, left);
        tokio::pin!(call);
        let outcome = loop {
            tokio::select! {
                outcome = &mut call => break outcome,
                () = &mut started, if starting.is_some() => starting = None,
                Some(event) = incoming.recv() => {
                    starting = None;
                    if let Some(p) = progress_of(&event) {
                        progress.report(p);
                    }
                }
            }
        };
        // Deliver progress that arrived just before the result.
        while let Ok(event) = incoming.try_recv() {
            if let Some(p) = progress_of(&event) {
                progress.report(p);
            }
        }
        match outcome {
            Ok(v) => Ok(v),
            Err(CallError::Timeout) | Err(CallError::Rpc { code: -32001, .. }) => Err(timed_out()),
            Err(e) => Err(short_error(e, method)),
        }
    }
}

fn short_error(e: CallError, method: &str) -> DomainError {
    match e {
        CallError::Rpc { code: -32602, message } => {
            DomainError::invalid(sanitize(&message)).with_hint(discovery_hint(method))
        }
        CallError::Rpc { code, message } => {
            let source: crate::domain::error::BoxError =
                format!("{method} answered error {code}: {}", sanitize(&message)).into();
            DomainError::unavailable(Upstream::Cuo, Some(source))
        }
        CallError::Timeout => DomainError::unavailable(Upstream::Cuo, Some(format!("{method} timed out").into()))
            .with_hint("The CUO orchestrator did not answer in time; try again in a moment."),
        CallError::Spawn(err) => DomainError::unavailable(Upstream::Cuo, Some(err.into()))
            .with_hint("The CUO orchestrator could not be started; ask an operator to check --cuo-command."),
        CallError::Closed => {
            DomainError::unavailable(Upstream::Cuo, Some(format!("the child exited during {method}").into()))
        }
    }
}

fn discovery_hint(method: &str) -> &'static str {
    match method {
        "skill.invoke" => {
            "Check the skill name with cyberos.skill.list_skills and its inputs against its input_schema."
        }
        _ => {
            "Find valid persona ids with cyberos.cuo.list_personas and workflow ids and inputs with \
              cyberos.cuo.list_workflows."
        }
    }
}

fn timed_out() -> DomainError {
    DomainError::Internal {
        message: "the run timed out".into(),
        hint:
            "It ran past its timeout_s; run it again with a longer timeout_s if the work needs it."
                .into(),
        source: None,
    }
}

/// A child's error message, made safe to show: printable characters only, bounded.
fn sanitize(message: &str) -> String {
    let clean: String = message
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    if clean.is_empty() {
        "the CUO orchestrator refused the request".into()
    } else {
        clean
    }
}

#[async_trait::async_trait]
impl CuoRunner for ProcessCuoRunner {
    async fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        let v = self
            .short_call("personas.list", json!({"ctx": ctx_json(ctx)}))
            .await?;
        wire::personas(v)
    }

    async fn list_workflows(
        &self,
        ctx: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        let mut params = json!({"ctx": ctx_json(ctx)});
        if let Some(p) = persona {
            params["persona"] = p.into();
        }
        wire::workflows(self.short_call("workflows.list", params).await?)
    }

    async fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError> {
        let params = json!({"ctx": ctx_json(ctx), "query": query, "limit": limit});
        wire::route(self.short_call("route", params).await?)
    }

    async fn execute_workflow(
        &self,
        ctx: &CallCtx,
        run: &WorkflowRun,
        progress: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        let inputs: Value = serde_json::from_str(run.inputs.as_str())
            .map_err(|e| DomainError::internal("inputs are not JSON", Some(e.into())))?;
        let params = json!({
            "ctx": ctx_json(ctx), "persona": run.persona, "workflow": run.workflow,
            "inputs": inputs, "deadline": run.deadline.to_rfc3339()
        });
        wire::workflow_outcome(
            self.run("workflow.execute", params, run.deadline, progress)
                .await?,
        )
    }

    async fn invoke_skill(
        &self,
        ctx: &CallCtx,
        run: &SkillRun,
        progress: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        let inputs: Value = serde_json::from_str(run.inputs.as_str())
            .map_err(|e| DomainError::internal("inputs are not JSON", Some(e.into())))?;
        let params = json!({
            "ctx": ctx_json(ctx),
            "skill": {"name": run.skill.name, "description": run.skill.description, "path": run.skill.path},
            "inputs": inputs, "deadline": run.deadline.to_rfc3339()
        });
        wire::skill_outcome(
            self.run("skill.invoke", params, run.deadline, progress)
                .await?,
        )
    }

    async fn check(&self) -> Result<(), DomainError> {
        let ctx = CallCtx {
            // A placeholder no identity provider issues (the nil UUID is refused).
            tenant: TenantId::parse("00000000-0000-4000-8000-000000000000")
                .expect("a fixed UUID parses"),
            actor: "cyberos-mcp-bridge check".into(),
            trace_id: TraceId::from_bytes([1; 16]),
            span_id: [1; 8],
            sampled: true,
            tracestate: None,
        };
        self.list_personas(&ctx).await.map(|_| ())
    }
}
