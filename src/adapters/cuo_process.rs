//! `CuoRunner` over a child process speaking JSON-RPC 2.0, one message per line on its
//! stdin/stdout (CONTRACT §8, `docs/cuo-protocol.md`).
//!
//! Short calls share one long-lived child, multiplexed by request id; when it dies,
//! wedges past the call timeout or writes garbage, the call fails `upstream_unavailable`
//! and the next call spawns a fresh child. Each workflow or skill run gets a child of its
//! own, killed with its whole process group when the run ends or is dropped. Children get
//! a scrubbed environment and never see the client's token.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::domain::cuo::{Artifact, Persona, Progress, Route, Workflow, WorkflowOutcome};
use crate::domain::{CallCtx, DomainError, JsonText, TenantId, Timestamp, TraceId, Upstream};
use crate::lines::{Line, LineReader};
use crate::ports::{CuoRunner, ProgressSink, SkillRun, WorkflowRun};

/// Longest line accepted from a child (CONTRACT §8).
pub const MAX_CHILD_LINE: usize = 8 * 1024 * 1024;
/// Variables a child inherits from the bridge, besides `LC_*` and `--cuo-env` names.
const INHERITED_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "TZ", "TMPDIR"];

/// How to start and talk to CUO children.
#[derive(Debug, Clone)]
pub struct CuoSettings {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra variable names passed through to children.
    pub pass_env: Vec<String>,
    /// Timeout of a short call.
    pub call_timeout: Duration,
}

/// The CUO orchestrator as child processes.
pub struct ProcessCuoRunner {
    program: String,
    args: Vec<String>,
    env: Vec<(OsString, OsString)>,
    call_timeout: Duration,
    shared: Mutex<Option<Arc<Conn>>>,
}

/// Why a call to a child did not produce a result.
#[derive(Debug)]
enum CallError {
    Spawn(std::io::Error),
    Closed,
    Timeout,
    Rpc { code: i64, message: String },
}

type Reply = Result<Value, (i64, String)>;

/// One running child.
struct Conn {
    pgid: i32,
    writer: mpsc::Sender<String>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    next_id: AtomicU64,
    closed: CancellationToken,
}

impl Conn {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Kills the child's whole process group; pending calls fail.
    fn kill(&self) {
        self.closed.cancel();
        kill_group(self.pgid);
    }
}

fn kill_group(pgid: i32) {
    use nix::sys::signal::{Signal, killpg};
    // ESRCH (already gone) is fine.
    let _ = killpg(nix::unistd::Pid::from_raw(pgid), Signal::SIGKILL);
}

/// Asks the kernel to SIGKILL the child if the bridge dies without cleaning up. The signal
/// fires when the *thread* that spawned the child exits; children are spawned from the
/// runtime's long-lived threads (the main thread on stdio), and every normal exit path
/// kills the group anyway.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(command: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only makes the
    // async-signal-safe prctl(2) system call.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

/// Kills a per-run child when the run ends or its future is dropped (cancellation).
struct KillOnDrop(Arc<Conn>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}

/// Forgets a pending request when its caller goes away.
struct PendingGuard<'a>(&'a Conn, u64);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}

impl ProcessCuoRunner {
    /// A runner for `settings`; no child starts until the first call.
    ///
    /// # Panics
    /// When `settings.command` is empty (configuration refuses that earlier).
    pub fn new(settings: CuoSettings) -> ProcessCuoRunner {
        let mut words = settings.command.into_iter();
        let program = words.next().expect("the CUO command is not empty");
        let env = std::env::vars_os()
            .filter(|(k, _)| {
                let k = k.to_string_lossy();
                INHERITED_ENV.contains(&k.as_ref())
                    || k.starts_with("LC_")
                    || settings.pass_env.iter().any(|p| *p == k)
            })
            .collect();
        ProcessCuoRunner {
            program,
            args: words.collect(),
            env,
            call_timeout: settings.call_timeout,
            shared: Mutex::new(None),
        }
    }

    fn spawn(
        &self,
        notifications: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Arc<Conn>, CallError> {
        let mut command = Command::new(&self.program);
        die_with_parent(&mut command);
        let mut child = command
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so a kill reaches everything it started.
            .process_group(0)
            .spawn()
            .map_err(CallError::Spawn)?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or(CallError::Closed)?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => return Err(CallError::Closed),
            };
        let (writer, mut lines_out) = mpsc::channel::<String>(64);
        let conn = Arc::new(Conn {
            pgid,
            writer,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: CancellationToken::new(),
        });
        tracing::debug!(pid = pgid, program = %self.program, "started a CUO child");

        let mut stdin = stdin;
        let closed = conn.closed.clone();
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    line = lines_out.recv() => line,
                    () = closed.cancelled() => None,
                };
                let Some(line) = line else { break };
                if stdin.write_all(line.as_bytes()).await.is_err()
                    || stdin.write_all(b"\n").await.is_err()
                    || stdin.flush().await.is_err()
                {
                    break;
                }
            }
            // Dropping stdin closes it: the protocol's signal to exit.
        });

        let reader_conn = Arc::clone(&conn);
        tokio::spawn(async move {
            let mut lines = LineReader::new(BufReader::new(stdout), MAX_CHILD_LINE);
            let why = loop {
                match lines.next_line().await {
                    Ok(Line::Frame(bytes)) => {
                        if let Err(why) = route_line(&reader_conn, &bytes, notifications.as_ref()) {
                            break why;
                        }
                    }
                    Ok(Line::TooLong) => break "wrote a line over 8 MiB",
                    Ok(Line::Eof) | Err(_) => break "closed its stdout",
                }
            };
            if !reader_conn.closed.is_cancelled() {
                tracing::warn!(
                    pid = reader_conn.pgid,
                    "CUO child {why}; it will be replaced"
                );
            }
            reader_conn.kill();
            reader_conn.lock().clear();
        });

        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "cuo", pid = pgid, "{}", crate::lines::truncate(&line, 2000));
            }
        });

        let closed = conn.closed.clone();
        tokio::spawn(async move {
            tokio::select! {
                status = child.wait() => {
                    tracing::debug!(pid = pgid, ?status, "CUO child exited");
                    closed.cancel();
                    // Grandchildren may outlive it; the group still names them.
                    kill_group(pgid);
                }
                () = closed.cancelled() => {
                    kill_group(pgid);
                    let _ = child.wait().await;
                }
            }
        });
        Ok(conn)
    }

    fn shared_conn(&self) -> Result<Arc<Conn>, CallError> {
        let mut slot = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(conn) = slot.as_ref()
            && !conn.closed.is_cancelled()
        {
            return Ok(Arc::clone(conn));
        }
        let conn = self.spawn(None)?;
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    async fn request(
        conn: &Conn,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        conn.lock().insert(id, tx);
        let _guard = PendingGuard(conn, id);
        let line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        if conn.closed.is_cancelled() || conn.writer.send(line).await.is_err() {
            return Err(CallError::Closed);
        }
        match tokio::time::timeout(timeout, rx).await {
            Err(_) => Err(CallError::Timeout),
            Ok(Err(_)) => Err(CallError::Closed),
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err((code, message)))) => Err(CallError::Rpc { code, message }),
        }
    }

    /// A short call on the shared child.
    async fn short_call(&self, method: &str, params: Value) -> Result<Value, DomainError> {
        let conn = self.shared_conn().map_err(|e| short_error(e, method))?;
        match Self::request(&conn, method, params, self.call_timeout).await {
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
        let (events, mut incoming) = mpsc::unbounded_channel();
        let conn = self
            .spawn(Some(events))
            .map_err(|e| short_error(e, method))?;
        let _kill = KillOnDrop(Arc::clone(&conn));
        let now = chrono::Utc::now().timestamp_millis();
        let left = Duration::from_millis(u64::try_from(deadline.unix_millis() - now).unwrap_or(0));
        let call = Self::request(&conn, method, params, left);
        tokio::pin!(call);
        let outcome = loop {
            tokio::select! {
                outcome = &mut call => break outcome,
                Some(event) = incoming.recv() => {
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

/// Routes one line from a child: a response to its caller, a notification to the run's
/// listener. Anything else means the child is broken.
fn route_line(
    conn: &Conn,
    bytes: &[u8],
    notifications: Option<&mpsc::UnboundedSender<Value>>,
) -> Result<(), &'static str> {
    let Ok(Value::Object(mut msg)) = serde_json::from_slice::<Value>(bytes) else {
        return Err("wrote a line that is not a JSON object");
    };
    if let Some(id) = msg.get("id").and_then(Value::as_u64) {
        let reply = match (msg.remove("result"), msg.remove("error")) {
            (Some(result), None) => Ok(result),
            (None, Some(err)) => {
                let code = err.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                let message = err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                Err((code, message))
            }
            _ => return Err("wrote a response with neither result nor error"),
        };
        // An unknown id is a late answer to a call that gave up: drop it.
        if let Some(tx) = conn.lock().remove(&id) {
            let _ = tx.send(reply);
        }
        return Ok(());
    }
    if msg.get("method").is_some_and(Value::is_string) && msg.get("id").is_none() {
        if let Some(tx) = notifications {
            let _ = tx.send(Value::Object(msg));
        }
        return Ok(());
    }
    Err("wrote a message that is neither a response nor a notification")
}

fn progress_of(event: &Value) -> Option<Progress> {
    if event.get("method").and_then(Value::as_str) != Some("progress") {
        return None;
    }
    let p = event.get("params")?;
    Some(Progress {
        step: p.get("step").and_then(Value::as_u64)?,
        total: p.get("total").and_then(Value::as_u64),
        message: p
            .get("message")
            .and_then(Value::as_str)
            .map(|m| crate::lines::truncate(m, 500).to_owned()),
    })
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

fn ctx_json(ctx: &CallCtx) -> Value {
    let mut v = json!({"tenant_id": ctx.tenant.to_string(), "actor_id": ctx.actor, "traceparent": ctx.traceparent()});
    if let Some(state) = &ctx.tracestate {
        v["tracestate"] = Value::from(&**state);
    }
    v
}

fn rfc3339(ts: Timestamp) -> String {
    chrono::DateTime::from_timestamp_millis(ts.unix_millis())
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn malformed(method: &str, e: impl std::fmt::Display) -> DomainError {
    DomainError::unavailable(
        Upstream::Cuo,
        Some(format!("{method} answered a malformed result: {e}").into()),
    )
}

#[derive(Deserialize)]
struct PersonasDto {
    personas: Vec<PersonaDto>,
}

#[derive(Deserialize)]
struct PersonaDto {
    id: String,
    title: String,
    short_name: String,
    description: String,
    workflows: Vec<String>,
}

#[derive(Deserialize)]
struct WorkflowsDto {
    workflows: Vec<WorkflowDto>,
}

#[derive(Deserialize)]
struct WorkflowDto {
    persona: String,
    id: String,
    title: String,
    description: String,
    input_schema: serde_json::Map<String, Value>,
    typical_duration_s: u64,
}

#[derive(Deserialize)]
struct RouteDto {
    persona: String,
    workflow: String,
    confidence: f64,
    alternates: Vec<String>,
}

#[derive(Deserialize)]
struct OutcomeDto {
    steps_executed: u64,
    final_artifacts: Vec<ArtifactDto>,
}

#[derive(Deserialize)]
struct ArtifactDto {
    name: String,
    media_type: String,
    content: String,
}

#[derive(Deserialize)]
struct SkillOutcomeDto {
    output: Value,
    artifacts: Vec<Value>,
}

fn decode<T: serde::de::DeserializeOwned>(method: &str, v: Value) -> Result<T, DomainError> {
    T::deserialize(v).map_err(|e| malformed(method, e))
}

#[async_trait::async_trait]
impl CuoRunner for ProcessCuoRunner {
    async fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        let v = self
            .short_call("personas.list", json!({"ctx": ctx_json(ctx)}))
            .await?;
        let dto: PersonasDto = decode("personas.list", v)?;
        Ok(dto
            .personas
            .into_iter()
            .map(|p| Persona {
                id: p.id,
                title: p.title,
                short_name: p.short_name,
                description: p.description,
                workflows: p.workflows,
            })
            .collect())
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
        let dto: WorkflowsDto = decode(
            "workflows.list",
            self.short_call("workflows.list", params).await?,
        )?;
        Ok(dto
            .workflows
            .into_iter()
            .map(|w| Workflow {
                persona: w.persona,
                id: w.id,
                title: w.title,
                description: w.description,
                input_schema: JsonText::from_serialized(Value::Object(w.input_schema).to_string()),
                typical_duration_s: w.typical_duration_s,
            })
            .collect())
    }

    async fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError> {
        let params = json!({"ctx": ctx_json(ctx), "query": query, "limit": limit});
        let dto: RouteDto = decode("route", self.short_call("route", params).await?)?;
        if !(0.0..=1.0).contains(&dto.confidence) {
            return Err(malformed("route", "confidence outside [0, 1]"));
        }
        Ok(Route {
            persona: dto.persona,
            workflow: dto.workflow,
            confidence: dto.confidence,
            alternates: dto.alternates,
        })
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
            "inputs": inputs, "deadline": rfc3339(run.deadline)
        });
        let dto: OutcomeDto = decode(
            "workflow.execute",
            self.run("workflow.execute", params, run.deadline, progress)
                .await?,
        )?;
        Ok(WorkflowOutcome {
            steps_executed: dto.steps_executed,
            final_artifacts: dto
                .final_artifacts
                .into_iter()
                .map(|a| Artifact {
                    name: a.name,
                    media_type: a.media_type,
                    content: a.content,
                })
                .collect(),
        })
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
            "inputs": inputs, "deadline": rfc3339(run.deadline)
        });
        let dto: SkillOutcomeDto = decode(
            "skill.invoke",
            self.run("skill.invoke", params, run.deadline, progress)
                .await?,
        )?;
        let out = json!({"output": dto.output, "artifacts": dto.artifacts});
        Ok(JsonText::from_serialized(out.to_string()))
    }

    async fn check(&self) -> Result<(), DomainError> {
        let ctx = CallCtx {
            tenant: TenantId::parse("00000000-0000-0000-0000-000000000000")
                .expect("the nil UUID parses"),
            actor: "cyberos-mcp-bridge check".into(),
            trace_id: TraceId::from_bytes([1; 16]),
            span_id: [1; 8],
            sampled: true,
            tracestate: None,
        };
        self.list_personas(&ctx).await.map(|_| ())
    }
}
