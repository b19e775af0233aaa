//! Test doubles for the ports, used through the library API (never by the binary).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cyberos_mcp_bridge::domain::confirm::ConfirmationClaims;
use cyberos_mcp_bridge::domain::cuo::{Persona, Route, Workflow, WorkflowOutcome};
use cyberos_mcp_bridge::domain::memory::{
    AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry,
};
use cyberos_mcp_bridge::domain::skill::Skill;
use cyberos_mcp_bridge::domain::task::{Task, TaskStatus};
use cyberos_mcp_bridge::domain::{
    CallCtx, DomainError, JsonText, Principal, Scope, TaskId, TenantId, Timestamp, TokenRejection,
    Upstream,
};
use cyberos_mcp_bridge::ports::{
    Clock, ConfirmationLedger, CuoRunner, Finished, MemoryClient, NewTask, ProgressEntry,
    ProgressSink, SkillIndex, SkillRun, SweepReport, TaskOutcome, TaskPage, TaskStore,
    TokenVerifier, WorkflowRun,
};

/// What a scripted upstream does on each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answer at once.
    Answer,
    /// Answer after a delay.
    Slow(Duration),
    /// Panic (a bug in a handler's path).
    Panic,
    /// Report the upstream as down.
    Down,
    /// Fail with an internal error (a broken upstream answer).
    Broken,
}

/// Where the latest call into [`StaticSkills`] is, for tests that must know a call is in
/// flight, or that it was abandoned (its future dropped) rather than finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Running,
    Finished,
    Dropped,
}

/// Turns a `Running` phase into `Dropped` when the call's future goes before it ends.
struct PhaseGuard<'a>(&'a tokio::sync::watch::Sender<Phase>);

impl Drop for PhaseGuard<'_> {
    fn drop(&mut self) {
        self.0.send_if_modified(|p| {
            let running = *p == Phase::Running;
            if running {
                *p = Phase::Dropped;
            }
            running
        });
    }
}

/// A skill index over a fixed list.
pub struct StaticSkills {
    pub skills: Vec<Skill>,
    pub behaviour: Behaviour,
    pub phase: tokio::sync::watch::Sender<Phase>,
}

impl StaticSkills {
    pub fn new(behaviour: Behaviour) -> StaticSkills {
        let skill = |name: &str, description: &str| Skill {
            name: name.into(),
            description: description.into(),
            input_schema: None,
            path: format!("/skills/{name}"),
            entrypoint: None,
        };
        StaticSkills {
            skills: vec![skill("alpha", "First skill"), skill("beta", "Second skill")],
            behaviour,
            phase: tokio::sync::watch::Sender::new(Phase::Idle),
        }
    }

    async fn act(&self) -> Result<(), DomainError> {
        self.phase.send_replace(Phase::Running);
        let guard = PhaseGuard(&self.phase);
        let result = self.behave().await;
        self.phase.send_replace(Phase::Finished);
        drop(guard);
        result
    }

    async fn behave(&self) -> Result<(), DomainError> {
        match self.behaviour {
            Behaviour::Answer => Ok(()),
            Behaviour::Slow(d) => {
                // The delay is the scenario: an upstream that takes `d` to answer.
                tokio::time::sleep(d).await;
                Ok(())
            }
            Behaviour::Panic => panic!("scripted panic in the skill index"),
            Behaviour::Down => Err(DomainError::unavailable(Upstream::Skills, None)),
            Behaviour::Broken => Err(DomainError::internal("the skill index is corrupt", None)),
        }
    }
}

#[async_trait::async_trait]
impl SkillIndex for StaticSkills {
    async fn list(
        &self,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Arc<Skill>>, DomainError> {
        self.act().await?;
        Ok(self
            .skills
            .iter()
            .filter(|s| query.is_none_or(|q| s.matches(q)))
            .take(limit)
            .map(|s| Arc::new(s.clone()))
            .collect())
    }
    async fn get(&self, name: &str) -> Result<Option<Skill>, DomainError> {
        self.act().await?;
        Ok(self.skills.iter().find(|s| s.name == name).cloned())
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.act().await
    }
}

/// A CUO with one persona and one workflow.
pub struct ScriptedCuo;

#[async_trait::async_trait]
impl CuoRunner for ScriptedCuo {
    async fn list_personas(&self, _: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        Ok(vec![Persona {
            id: "chief-technology-officer".into(),
            title: "Chief Technology Officer".into(),
            short_name: "CTO".into(),
            description: "Owns technology.".into(),
            workflows: vec!["architect-new-system".into()],
        }])
    }
    async fn list_workflows(
        &self,
        _: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        if persona.is_some_and(|p| p != "chief-technology-officer") {
            return Err(DomainError::invalid("unknown persona"));
        }
        Ok(vec![Workflow {
            persona: "chief-technology-officer".into(),
            id: "architect-new-system".into(),
            title: "Architect a new system".into(),
            description: "Design it.".into(),
            input_schema: JsonText::from_serialized(r#"{"type":"object"}"#.into()),
            typical_duration_s: 30,
        }])
    }
    async fn route(&self, _: &CallCtx, _: &str, _: u8) -> Result<Route, DomainError> {
        Ok(Route {
            persona: "chief-technology-officer".into(),
            workflow: "architect-new-system".into(),
            confidence: 0.9,
            alternates: vec![],
        })
    }
    async fn execute_workflow(
        &self,
        _: &CallCtx,
        _: &WorkflowRun,
        _: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        Ok(WorkflowOutcome {
            steps_executed: 1,
            final_artifacts: vec![],
        })
    }
    async fn invoke_skill(
        &self,
        _: &CallCtx,
        _: &SkillRun,
        _: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        Ok(JsonText::from_serialized(
            r#"{"output":null,"artifacts":[]}"#.into(),
        ))
    }
    async fn check(&self) -> Result<(), DomainError> {
        Ok(())
    }
}

/// [`ScriptedCuo`] whose workflow runs panic (a bug in an adapter, inside a task's run).
pub struct PanickingWorkflows;

#[async_trait::async_trait]
impl CuoRunner for PanickingWorkflows {
    async fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        ScriptedCuo.list_personas(ctx).await
    }
    async fn list_workflows(
        &self,
        ctx: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        ScriptedCuo.list_workflows(ctx, persona).await
    }
    async fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError> {
        ScriptedCuo.route(ctx, query, limit).await
    }
    async fn execute_workflow(
        &self,
        _: &CallCtx,
        _: &WorkflowRun,
        _: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        panic!("a bug inside the run");
    }
    async fn invoke_skill(
        &self,
        ctx: &CallCtx,
        run: &SkillRun,
        progress: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        ScriptedCuo.invoke_skill(ctx, run, progress).await
    }
    async fn check(&self) -> Result<(), DomainError> {
        Ok(())
    }
}

/// A CUO whose runs take time, with the bundled runner's two workflows the tests use:
/// persona `chief-technology-officer`, workflows `adr-quick-capture` (inputs `{title}`) and
/// `architect-new-system`. A run takes three steps of `pace` each, reports each step, ends
/// with the artifact `adr.md`, and keeps to its deadline (`Internal` with a timeout hint
/// past it, as the port requires). It counts the calls that reach it and the runs in
/// flight: a run whose future is dropped (a cancel) is in flight no more.
pub struct PacedCuo {
    pace: Duration,
    clock: Arc<dyn Clock>,
    calls: std::sync::atomic::AtomicUsize,
    live: Arc<std::sync::atomic::AtomicUsize>,
}

/// One run in flight of a [`PacedCuo`], until dropped.
struct LiveRun(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for LiveRun {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl PacedCuo {
    /// Runs pace each step by `pace` and read the time for their deadlines from `clock`.
    pub fn new(pace: Duration, clock: Arc<dyn Clock>) -> PacedCuo {
        PacedCuo {
            pace,
            clock,
            calls: Default::default(),
            live: Default::default(),
        }
    }

    /// How many calls reached this CUO.
    pub fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many runs are in flight.
    pub fn live_runs(&self) -> usize {
        self.live.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn called(&self) {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn workflows() -> Vec<Workflow> {
        let workflow = |id: &str, title: &str| {
            Workflow {
            persona: "chief-technology-officer".into(),
            id: id.into(),
            title: title.into(),
            description: format!("{title}."),
            input_schema: JsonText::from_serialized(
                r#"{"type":"object","properties":{"title":{"type":"string","minLength":1}},"required":["title"]}"#
                    .into(),
            ),
            typical_duration_s: 20,
        }
        };
        vec![
            workflow(
                "adr-quick-capture",
                "Capture an architecture decision record",
            ),
            workflow("architect-new-system", "Architect a new system"),
        ]
    }

    /// Three steps of `pace`, each reported, within `deadline`.
    async fn run(
        &self,
        deadline: Timestamp,
        progress: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        self.live.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _live = LiveRun(Arc::clone(&self.live));
        let left = Duration::from_millis(deadline.millis_since(self.clock.now()));
        let steps = async {
            for step in 1..=3 {
                // The pace is the scenario: work that takes this long.
                tokio::time::sleep(self.pace).await;
                progress.report(cyberos_mcp_bridge::domain::cuo::Progress {
                    step,
                    total: Some(3),
                    message: Some(format!("step {step} of 3")),
                });
            }
        };
        match tokio::time::timeout(left, steps).await {
            Ok(()) => Ok(WorkflowOutcome {
                steps_executed: 3,
                final_artifacts: vec![cyberos_mcp_bridge::domain::cuo::Artifact {
                    name: "adr.md".into(),
                    media_type: "text/markdown".into(),
                    content: "# Decision\n".into(),
                }],
            }),
            Err(_) => Err(DomainError::internal("the run timed out", None).with_hint(
                "It ran past its timeout_s; run it again with a longer timeout_s if the work needs it.",
            )),
        }
    }
}

#[async_trait::async_trait]
impl CuoRunner for PacedCuo {
    async fn list_personas(&self, _: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        self.called();
        Ok(vec![Persona {
            id: "chief-technology-officer".into(),
            title: "Chief Technology Officer".into(),
            short_name: "CTO".into(),
            description: "Owns technology.".into(),
            workflows: PacedCuo::workflows().into_iter().map(|w| w.id).collect(),
        }])
    }
    async fn list_workflows(
        &self,
        _: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        self.called();
        if persona.is_some_and(|p| p != "chief-technology-officer") {
            return Err(DomainError::invalid("unknown persona"));
        }
        Ok(PacedCuo::workflows())
    }
    async fn route(&self, _: &CallCtx, _: &str, _: u8) -> Result<Route, DomainError> {
        self.called();
        Ok(Route {
            persona: "chief-technology-officer".into(),
            workflow: "architect-new-system".into(),
            confidence: 0.9,
            alternates: vec![],
        })
    }
    async fn execute_workflow(
        &self,
        _: &CallCtx,
        run: &WorkflowRun,
        progress: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        self.called();
        if !PacedCuo::workflows()
            .iter()
            .any(|w| w.persona == run.persona && w.id == run.workflow)
        {
            return Err(DomainError::invalid("unknown workflow"));
        }
        self.run(run.deadline, progress).await
    }
    async fn invoke_skill(
        &self,
        _: &CallCtx,
        run: &SkillRun,
        progress: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        self.called();
        self.run(run.deadline, progress).await?;
        Ok(JsonText::from_serialized(
            r#"{"output":null,"artifacts":[]}"#.into(),
        ))
    }
    async fn check(&self) -> Result<(), DomainError> {
        Ok(())
    }
}

/// An in-memory audit log, per tenant, idempotent by key, paged newest first; or, when
/// `down`, a log that cannot be reached.
#[derive(Default)]
pub struct InMemoryAudit {
    entries: Mutex<Vec<(String, String, AuditEntry)>>,
    pub down: bool,
}

impl InMemoryAudit {
    /// A log that answers every call as unreachable, as a memory service that is down.
    pub fn unreachable() -> InMemoryAudit {
        InMemoryAudit {
            down: true,
            ..InMemoryAudit::default()
        }
    }

    fn reachable(&self) -> Result<(), DomainError> {
        if self.down {
            return Err(DomainError::unavailable(Upstream::Memory, None));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl MemoryClient for InMemoryAudit {
    async fn append(
        &self,
        ctx: &CallCtx,
        entry: &NewAuditEntry,
        key: &str,
    ) -> Result<AuditReceipt, DomainError> {
        self.reachable()?;
        let mut entries = self.entries.lock().unwrap();
        let tenant = ctx.tenant.to_string();
        if let Some((_, _, e)) = entries.iter().find(|(t, k, _)| *t == tenant && k == key) {
            return Ok(AuditReceipt {
                audit_id: e.audit_id.clone(),
                recorded_at: e.recorded_at,
            });
        }
        let id = format!("a-{}", entries.len() + 1);
        let recorded_at = Timestamp::from_unix_millis(1_700_000_000_000);
        entries.push((
            tenant,
            key.to_owned(),
            AuditEntry {
                audit_id: id.clone(),
                kind: entry.kind.clone(),
                actor_id: ctx.actor.to_string(),
                subject: entry.subject.clone(),
                body: entry.body.clone(),
                recorded_at,
                trace_id: ctx.trace_id,
            },
        ));
        Ok(AuditReceipt {
            audit_id: id,
            recorded_at,
        })
    }
    async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry, DomainError> {
        self.reachable()?;
        let entries = self.entries.lock().unwrap();
        entries
            .iter()
            .find(|(t, _, e)| *t == ctx.tenant.to_string() && e.audit_id == audit_id)
            .map(|(_, _, e)| e.clone())
            .ok_or_else(|| DomainError::invalid("audit entry not found"))
    }
    async fn list(&self, ctx: &CallCtx, q: &AuditQuery) -> Result<AuditPage, DomainError> {
        self.reachable()?;
        let entries = self.entries.lock().unwrap();
        let tenant = ctx.tenant.to_string();
        let start = match &q.cursor {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .map_err(|_| DomainError::invalid_at("invalid cursor", "/cursor"))?,
        };
        let matching: Vec<&AuditEntry> = entries
            .iter()
            .rev()
            .filter(|(t, _, e)| *t == tenant && q.kind.as_ref().is_none_or(|k| *k == e.kind))
            .filter(|(_, _, e)| q.since.is_none_or(|s| e.recorded_at >= s))
            .map(|(_, _, e)| e)
            .collect();
        let limit = q.limit as usize;
        let page = matching
            .iter()
            .skip(start)
            .take(limit)
            .map(|e| (*e).clone())
            .collect();
        let next_cursor = (start + limit < matching.len()).then(|| (start + limit).to_string());
        Ok(AuditPage {
            entries: page,
            next_cursor,
        })
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.reachable()
    }
}

/// A clock that never moves.
pub struct FixedClock(pub Timestamp);

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0
    }
}

/// A clock that moves only when the test moves it; clones share the time.
#[derive(Clone)]
pub struct TestClock(Arc<std::sync::atomic::AtomicI64>);

impl TestClock {
    /// A clock showing `at`.
    pub fn at(at: Timestamp) -> TestClock {
        TestClock(Arc::new(std::sync::atomic::AtomicI64::new(
            at.unix_millis(),
        )))
    }

    /// Sets the time to `at`.
    pub fn set(&self, at: Timestamp) {
        self.0
            .store(at.unix_millis(), std::sync::atomic::Ordering::SeqCst);
    }

    /// Moves the time on by `ms` milliseconds.
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// The clock as a port.
    pub fn port(&self) -> Arc<dyn Clock> {
        Arc::new(self.clone())
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// Accepts a fixed set of opaque tokens: `full` (every scope) and `read-only`, both for
/// tenant `00000000-0000-4000-8000-000000000001`.
pub struct StaticTokens;

#[async_trait::async_trait]
impl cyberos_mcp_bridge::ports::TokenVerifier for StaticTokens {
    async fn verify(
        &self,
        token: &str,
    ) -> Result<cyberos_mcp_bridge::domain::Principal, DomainError> {
        use cyberos_mcp_bridge::domain::{Principal, Scope, TenantId, TokenRejection};
        let tenant = TenantId::parse("00000000-0000-4000-8000-000000000001").unwrap();
        match token {
            "full" => Ok(Principal::new(tenant, "tester", &Scope::ALL)),
            "read-only" => {
                let read: Vec<Scope> = Scope::ALL
                    .into_iter()
                    .filter(|s| s.as_str().ends_with(":read"))
                    .collect();
                Ok(Principal::new(tenant, "tester", &read))
            }
            _ => Err(TokenRejection::BadSignature.into_error()),
        }
    }
    async fn verify_confirmation(
        &self,
        _: &str,
    ) -> Result<cyberos_mcp_bridge::domain::confirm::ConfirmationClaims, DomainError> {
        Err(cyberos_mcp_bridge::domain::TokenRejection::BadSignature.into_error())
    }
}

/// Remembers used confirmation ids in memory.
#[derive(Default)]
pub struct InMemoryLedger(Mutex<std::collections::HashSet<String>>);

#[async_trait::async_trait]
impl cyberos_mcp_bridge::ports::ConfirmationLedger for InMemoryLedger {
    async fn claim(
        &self,
        tenant: &cyberos_mcp_bridge::domain::TenantId,
        jti: &str,
        _: Timestamp,
    ) -> Result<bool, DomainError> {
        Ok(self.0.lock().unwrap().insert(format!("{tenant}/{jti}")))
    }

    async fn used(
        &self,
        tenant: &cyberos_mcp_bridge::domain::TenantId,
        jti: &str,
    ) -> Result<bool, DomainError> {
        Ok(self.0.lock().unwrap().contains(&format!("{tenant}/{jti}")))
    }
}

/// The calls that reached a test's ports, in order, shared by its [`Recorded`] doubles:
/// one line per call, `port.method tenant/actor argument`, so a test asserts "never
/// called", "called once, as tenant X" or an order of calls on the record itself.
#[derive(Clone, Default)]
pub struct CallLog(Arc<Mutex<Vec<String>>>);

impl CallLog {
    fn push(&self, call: String) {
        self.0.lock().unwrap().push(call);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The calls so far but those whose line starts with `prefix` (say `clock.`).
    pub fn calls_but(&self, prefix: &str) -> Vec<String> {
        let mut calls = self.calls();
        calls.retain(|c| !c.starts_with(prefix));
        calls
    }

    /// How many calls so far start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }
}

/// Who a call runs as, in a [`CallLog`] line.
fn who(ctx: &CallCtx) -> String {
    format!("{}/{}", ctx.tenant, ctx.actor)
}

/// The port double `inner`, writing each call into `log` before `inner` answers it.
pub struct Recorded<P> {
    pub inner: P,
    pub log: CallLog,
}

impl<P> Recorded<P> {
    pub fn new(inner: P, log: &CallLog) -> Arc<Recorded<P>> {
        Arc::new(Recorded {
            inner,
            log: log.clone(),
        })
    }
}

#[async_trait::async_trait]
impl<C: CuoRunner> CuoRunner for Recorded<C> {
    async fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        self.log.push(format!("cuo.list_personas {}", who(ctx)));
        self.inner.list_personas(ctx).await
    }
    async fn list_workflows(
        &self,
        ctx: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        self.log
            .push(format!("cuo.list_workflows {} {persona:?}", who(ctx)));
        self.inner.list_workflows(ctx, persona).await
    }
    async fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError> {
        self.log.push(format!("cuo.route {} {query:?}", who(ctx)));
        self.inner.route(ctx, query, limit).await
    }
    async fn execute_workflow(
        &self,
        ctx: &CallCtx,
        run: &WorkflowRun,
        progress: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        self.log.push(format!(
            "cuo.execute_workflow {} {}/{}",
            who(ctx),
            run.persona,
            run.workflow
        ));
        self.inner.execute_workflow(ctx, run, progress).await
    }
    async fn invoke_skill(
        &self,
        ctx: &CallCtx,
        run: &SkillRun,
        progress: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        self.log
            .push(format!("cuo.invoke_skill {} {}", who(ctx), run.skill.name));
        self.inner.invoke_skill(ctx, run, progress).await
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.log.push("cuo.check".into());
        self.inner.check().await
    }
}

#[async_trait::async_trait]
impl<M: MemoryClient> MemoryClient for Recorded<M> {
    async fn append(
        &self,
        ctx: &CallCtx,
        entry: &NewAuditEntry,
        key: &str,
    ) -> Result<AuditReceipt, DomainError> {
        self.log
            .push(format!("memory.append {} {}", who(ctx), entry.kind));
        self.inner.append(ctx, entry, key).await
    }
    async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry, DomainError> {
        self.log.push(format!("memory.get {} {audit_id}", who(ctx)));
        self.inner.get(ctx, audit_id).await
    }
    async fn list(&self, ctx: &CallCtx, q: &AuditQuery) -> Result<AuditPage, DomainError> {
        self.log
            .push(format!("memory.list {} limit={}", who(ctx), q.limit));
        self.inner.list(ctx, q).await
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.log.push("memory.check".into());
        self.inner.check().await
    }
}

#[async_trait::async_trait]
impl<S: SkillIndex> SkillIndex for Recorded<S> {
    async fn list(
        &self,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Arc<Skill>>, DomainError> {
        self.log
            .push(format!("skills.list {query:?} limit={limit}"));
        self.inner.list(query, limit).await
    }
    async fn get(&self, name: &str) -> Result<Option<Skill>, DomainError> {
        self.log.push(format!("skills.get {name}"));
        self.inner.get(name).await
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.log.push("skills.check".into());
        self.inner.check().await
    }
}

#[async_trait::async_trait]
impl<T: TaskStore> TaskStore for Recorded<T> {
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError> {
        self.log
            .push(format!("tasks.create {} {}", new.task.tenant, new.task.id));
        self.inner.create(new).await
    }
    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError> {
        self.log.push(format!("tasks.get {tenant} {id}"));
        self.inner.get(tenant, id).await
    }
    async fn list(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, DomainError> {
        self.log.push(format!("tasks.list {tenant} {cursor:?}"));
        self.inner.list(tenant, cursor, limit).await
    }
    async fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Finished, DomainError> {
        self.log.push(format!("tasks.finish {tenant} {id}"));
        self.inner.finish(tenant, id, outcome, now).await
    }
    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        entry: &ProgressEntry,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        self.log
            .push(format!("tasks.record_progress {tenant} {id}"));
        self.inner.record_progress(tenant, id, entry, now).await
    }
    async fn progress_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError> {
        self.log.push(format!("tasks.progress_after {tenant} {id}"));
        self.inner.progress_after(tenant, id, after, limit).await
    }
    async fn renew_leases(
        &self,
        owner: &str,
        ids: &[TaskId],
        until: Timestamp,
    ) -> Result<(), DomainError> {
        self.log.push(format!("tasks.renew_leases {owner}"));
        self.inner.renew_leases(owner, ids, until).await
    }
    async fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError> {
        self.log.push(format!("tasks.stopped_among {owner}"));
        self.inner.stopped_among(owner, ids).await
    }
    async fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError> {
        self.log.push("tasks.sweep".into());
        self.inner.sweep(now).await
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.log.push("tasks.check".into());
        self.inner.check().await
    }
}

#[async_trait::async_trait]
impl<L: ConfirmationLedger> ConfirmationLedger for Recorded<L> {
    async fn claim(
        &self,
        tenant: &TenantId,
        jti: &str,
        expires_at: Timestamp,
    ) -> Result<bool, DomainError> {
        self.log.push(format!("ledger.claim {tenant} {jti}"));
        self.inner.claim(tenant, jti, expires_at).await
    }
    async fn used(&self, tenant: &TenantId, jti: &str) -> Result<bool, DomainError> {
        self.log.push(format!("ledger.used {tenant} {jti}"));
        self.inner.used(tenant, jti).await
    }
}

impl<C: Clock> Clock for Recorded<C> {
    fn now(&self) -> Timestamp {
        self.log.push("clock.now".into());
        self.inner.now()
    }
}

/// Records confirmation checks only: every request checks its bearer token, which says
/// nothing about the call.
#[async_trait::async_trait]
impl<V: TokenVerifier> TokenVerifier for Recorded<V> {
    async fn verify(&self, token: &str) -> Result<Principal, DomainError> {
        self.inner.verify(token).await
    }
    async fn verify_confirmation(&self, token: &str) -> Result<ConfirmationClaims, DomainError> {
        self.log
            .push(format!("verifier.verify_confirmation {token}"));
        self.inner.verify_confirmation(token).await
    }
}

/// A CUO over a catalogue the test can grow: personas are the workflows' personas, a
/// route goes to the first workflow, runs take one step.
#[derive(Default)]
pub struct CatalogueCuo(Mutex<Vec<Workflow>>);

impl CatalogueCuo {
    pub fn new(workflows: Vec<Workflow>) -> CatalogueCuo {
        CatalogueCuo(Mutex::new(workflows))
    }

    /// Adds `workflow` to the catalogue.
    pub fn add(&self, workflow: Workflow) {
        self.0.lock().unwrap().push(workflow);
    }
}

#[async_trait::async_trait]
impl CuoRunner for CatalogueCuo {
    async fn list_personas(&self, _: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        let workflows = self.0.lock().unwrap();
        let mut personas: Vec<Persona> = Vec::new();
        for w in workflows.iter() {
            match personas.iter_mut().find(|p| p.id == w.persona) {
                Some(p) => p.workflows.push(w.id.clone()),
                None => personas.push(Persona {
                    id: w.persona.clone(),
                    title: w.persona.to_uppercase(),
                    short_name: w.persona.to_uppercase(),
                    description: format!("Runs {}.", w.id),
                    workflows: vec![w.id.clone()],
                }),
            }
        }
        Ok(personas)
    }
    async fn list_workflows(
        &self,
        _: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        let workflows = self.0.lock().unwrap();
        let listed: Vec<Workflow> = workflows
            .iter()
            .filter(|w| persona.is_none_or(|p| p == w.persona))
            .cloned()
            .collect();
        if persona.is_some() && listed.is_empty() {
            return Err(DomainError::invalid("unknown persona"));
        }
        Ok(listed)
    }
    async fn route(&self, _: &CallCtx, _: &str, _: u8) -> Result<Route, DomainError> {
        let workflows = self.0.lock().unwrap();
        let w = workflows
            .first()
            .ok_or_else(|| DomainError::invalid("no workflow to route to"))?;
        Ok(Route {
            persona: w.persona.clone(),
            workflow: w.id.clone(),
            confidence: 0.9,
            alternates: vec![],
        })
    }
    async fn execute_workflow(
        &self,
        ctx: &CallCtx,
        run: &WorkflowRun,
        progress: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        ScriptedCuo.execute_workflow(ctx, run, progress).await
    }
    async fn invoke_skill(
        &self,
        ctx: &CallCtx,
        run: &SkillRun,
        progress: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        ScriptedCuo.invoke_skill(ctx, run, progress).await
    }
    async fn check(&self) -> Result<(), DomainError> {
        Ok(())
    }
}

/// An in-memory task store: tasks per tenant, newest first, with their progress logs.
/// Leases are not kept (one process, never stopped by another), so `stopped_among` and
/// `sweep` find nothing.
#[derive(Default)]
pub struct InMemoryTasks(Mutex<Vec<(Task, Vec<ProgressEntry>)>>);

impl InMemoryTasks {
    /// A store holding `tasks`.
    pub fn with(tasks: Vec<Task>) -> InMemoryTasks {
        InMemoryTasks(Mutex::new(
            tasks.into_iter().map(|t| (t, Vec::new())).collect(),
        ))
    }
}

#[async_trait::async_trait]
impl TaskStore for InMemoryTasks {
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError> {
        let mut tasks = self.0.lock().unwrap();
        let stored = tasks
            .iter()
            .filter(|(t, _)| t.tenant == new.task.tenant)
            .count();
        if stored >= new.max_stored as usize {
            return Ok(false);
        }
        tasks.push((new.task.clone(), Vec::new()));
        Ok(true)
    }
    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError> {
        let tasks = self.0.lock().unwrap();
        tasks
            .iter()
            .find(|(t, _)| t.tenant == *tenant && t.id == id)
            .map(|(t, _)| t.clone())
            .ok_or_else(DomainError::task_not_found)
    }
    async fn list(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, DomainError> {
        let tasks = self.0.lock().unwrap();
        let start = match cursor {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .map_err(|_| DomainError::invalid_at("invalid cursor", "/cursor"))?,
        };
        let mine: Vec<&Task> = tasks
            .iter()
            .rev()
            .filter(|(t, _)| t.tenant == *tenant)
            .map(|(t, _)| t)
            .collect();
        let limit = limit as usize;
        Ok(TaskPage {
            tasks: mine
                .iter()
                .skip(start)
                .take(limit)
                .map(|t| (*t).clone())
                .collect(),
            next_cursor: (start + limit < mine.len()).then(|| (start + limit).to_string()),
        })
    }
    async fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Finished, DomainError> {
        let mut tasks = self.0.lock().unwrap();
        let (task, _) = tasks
            .iter_mut()
            .find(|(t, _)| t.tenant == *tenant && t.id == id)
            .ok_or_else(DomainError::task_not_found)?;
        let changed = task.status == TaskStatus::Running;
        if changed {
            task.status = outcome.status;
            task.output = outcome.output.clone();
            task.failure = outcome.failure.clone();
            task.updated_at = now;
        }
        Ok(Finished {
            task: task.clone(),
            changed,
        })
    }
    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        entry: &ProgressEntry,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        let mut tasks = self.0.lock().unwrap();
        let (task, log) = tasks
            .iter_mut()
            .find(|(t, _)| t.tenant == *tenant && t.id == id)
            .ok_or_else(DomainError::task_not_found)?;
        if task.status == TaskStatus::Running {
            task.status_message = Some(entry.message.clone());
            task.updated_at = now;
            log.push(entry.clone());
        }
        Ok(())
    }
    async fn progress_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError> {
        let tasks = self.0.lock().unwrap();
        let (_, log) = tasks
            .iter()
            .find(|(t, _)| t.tenant == *tenant && t.id == id)
            .ok_or_else(DomainError::task_not_found)?;
        Ok(log
            .iter()
            .filter(|e| e.seq > after)
            .take(limit as usize)
            .cloned()
            .collect())
    }
    async fn renew_leases(&self, _: &str, _: &[TaskId], _: Timestamp) -> Result<(), DomainError> {
        Ok(())
    }
    async fn stopped_among(&self, _: &str, _: &[TaskId]) -> Result<Vec<TaskId>, DomainError> {
        Ok(Vec::new())
    }
    async fn sweep(&self, _: Timestamp) -> Result<SweepReport, DomainError> {
        Ok(SweepReport::default())
    }
    async fn check(&self) -> Result<(), DomainError> {
        Ok(())
    }
}

/// Bearer tokens for one principal of `tenant`, `alice`: `tok-a` holds every scope,
/// `tok-ro` the read scopes, anything else is refused. Confirmation tokens all carry
/// `confirmation`, or are refused when there is none.
pub struct TenantTokens {
    pub tenant: TenantId,
    pub confirmation: Option<ConfirmationClaims>,
}

#[async_trait::async_trait]
impl TokenVerifier for TenantTokens {
    async fn verify(&self, token: &str) -> Result<Principal, DomainError> {
        let scopes = match token {
            "tok-a" => Scope::ALL.to_vec(),
            "tok-ro" => Scope::ALL
                .into_iter()
                .filter(|s| s.as_str().ends_with(":read"))
                .collect(),
            _ => return Err(TokenRejection::BadSignature.into_error()),
        };
        Ok(Principal::new(self.tenant, "alice", &scopes))
    }
    async fn verify_confirmation(&self, _: &str) -> Result<ConfirmationClaims, DomainError> {
        self.confirmation
            .clone()
            .ok_or_else(|| TokenRejection::BadSignature.into_error())
    }
}
