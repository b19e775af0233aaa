//! Test doubles for the ports, used through the library API (never by the binary).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cyberos_mcp_bridge::domain::cuo::{Persona, Route, Workflow, WorkflowOutcome};
use cyberos_mcp_bridge::domain::memory::{
    AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry,
};
use cyberos_mcp_bridge::domain::skill::Skill;
use cyberos_mcp_bridge::domain::{CallCtx, DomainError, JsonText, Timestamp, Upstream};
use cyberos_mcp_bridge::ports::{
    Clock, CuoRunner, MemoryClient, ProgressSink, SkillIndex, SkillRun, WorkflowRun,
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

/// An in-memory audit log, per tenant, idempotent by key, paged newest first.
#[derive(Default)]
pub struct InMemoryAudit {
    entries: Mutex<Vec<(String, String, AuditEntry)>>,
}

#[async_trait::async_trait]
impl MemoryClient for InMemoryAudit {
    async fn append(
        &self,
        ctx: &CallCtx,
        entry: &NewAuditEntry,
        key: &str,
    ) -> Result<AuditReceipt, DomainError> {
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
        let entries = self.entries.lock().unwrap();
        entries
            .iter()
            .find(|(t, _, e)| *t == ctx.tenant.to_string() && e.audit_id == audit_id)
            .map(|(_, _, e)| e.clone())
            .ok_or_else(|| DomainError::invalid("audit entry not found"))
    }
    async fn list(&self, ctx: &CallCtx, q: &AuditQuery) -> Result<AuditPage, DomainError> {
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
        Ok(())
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
            "full" => Ok(Principal {
                tenant,
                actor: "tester".into(),
                scopes: Scope::ALL.into(),
            }),
            "read-only" => Ok(Principal {
                tenant,
                actor: "tester".into(),
                scopes: Scope::ALL
                    .iter()
                    .copied()
                    .filter(|s| s.as_str().ends_with(":read"))
                    .collect(),
            }),
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
