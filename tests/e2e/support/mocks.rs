//! `mockall` doubles of every port, and the library's stdio transport over an in-memory
//! pipe with them behind it: for tests where an expectation (which port, with which
//! tenant, how many times, or never) says more than a fake's behaviour.
//!
//! A mock with no expectation panics when called. The dispatcher catches a handler's
//! panic and answers `internal_error`, so a test must also assert the class it expects;
//! and [`MockClient::finish`] ends the connection and awaits the server task, so a
//! `.times(n)` left unmet (checked when the mocks drop with the `App`) fails the test.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mockall::mock;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use cyberos_mcp_bridge::app::edge::stdio;
use cyberos_mcp_bridge::app::service::identity::{Identity, StdioToken};
use cyberos_mcp_bridge::app::{App, Settings};
use cyberos_mcp_bridge::domain::confirm::ConfirmationClaims;
use cyberos_mcp_bridge::domain::cuo::{Persona, Route, Workflow, WorkflowOutcome};
use cyberos_mcp_bridge::domain::memory::{
    AuditEntry, AuditPage, AuditQuery, AuditReceipt, NewAuditEntry,
};
use cyberos_mcp_bridge::domain::skill::Skill;
use cyberos_mcp_bridge::domain::task::Task;
use cyberos_mcp_bridge::domain::{
    CallCtx, DomainError, JsonText, Principal, TaskId, TenantId, Timestamp,
};
use cyberos_mcp_bridge::ports::{
    Clock, ConfirmationLedger, CuoRunner, Finished, MemoryClient, NewTask, Ports, ProgressEntry,
    ProgressSink, SkillIndex, SkillRun, SweepReport, TaskOutcome, TaskPage, TaskStore,
    TokenVerifier, WorkflowRun,
};

use crate::support::in_process::Client;
use crate::support::init_params;

// `mockall` cannot mock an `#[async_trait]` method with an `Option<&str>` or a
// `&dyn ProgressSink` argument, so the CUO runner, the skill index and the task store are
// mocked through synchronous mirrors of their traits (`Option<String>`, no sink), each
// port method delegating one-to-one to its mirror.

/// [`CuoRunner`], one mock method per port method.
pub trait CuoCalls: Send + Sync + 'static {
    fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError>;
    fn list_workflows(
        &self,
        ctx: &CallCtx,
        persona: Option<String>,
    ) -> Result<Vec<Workflow>, DomainError>;
    fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError>;
    fn execute_workflow(
        &self,
        ctx: &CallCtx,
        run: &WorkflowRun,
    ) -> Result<WorkflowOutcome, DomainError>;
    fn invoke_skill(&self, ctx: &CallCtx, run: &SkillRun) -> Result<JsonText, DomainError>;
    fn check(&self) -> Result<(), DomainError>;
}

/// [`SkillIndex`], one mock method per port method.
pub trait SkillCalls: Send + Sync + 'static {
    fn list(&self, query: Option<String>, limit: usize) -> Result<Vec<Skill>, DomainError>;
    fn get(&self, name: &str) -> Result<Option<Skill>, DomainError>;
    fn check(&self) -> Result<(), DomainError>;
}

/// [`TaskStore`], one mock method per port method (`watch_stops` keeps its default).
pub trait TaskCalls: Send + Sync + 'static {
    fn create(&self, new: &NewTask) -> Result<bool, DomainError>;
    fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError>;
    fn list(
        &self,
        tenant: &TenantId,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<TaskPage, DomainError>;
    fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Finished, DomainError>;
    fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        entry: &ProgressEntry,
        now: Timestamp,
    ) -> Result<(), DomainError>;
    fn progress_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError>;
    fn renew_leases(
        &self,
        owner: &str,
        ids: &[TaskId],
        until: Timestamp,
    ) -> Result<(), DomainError>;
    fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError>;
    fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError>;
    fn check(&self) -> Result<(), DomainError>;
}

mock! {
    pub Cuo {}
    impl CuoCalls for Cuo {
        fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError>;
        fn list_workflows(&self, ctx: &CallCtx, persona: Option<String>) -> Result<Vec<Workflow>, DomainError>;
        fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError>;
        fn execute_workflow(&self, ctx: &CallCtx, run: &WorkflowRun) -> Result<WorkflowOutcome, DomainError>;
        fn invoke_skill(&self, ctx: &CallCtx, run: &SkillRun) -> Result<JsonText, DomainError>;
        fn check(&self) -> Result<(), DomainError>;
    }
}

mock! {
    pub Skills {}
    impl SkillCalls for Skills {
        fn list(&self, query: Option<String>, limit: usize) -> Result<Vec<Skill>, DomainError>;
        fn get(&self, name: &str) -> Result<Option<Skill>, DomainError>;
        fn check(&self) -> Result<(), DomainError>;
    }
}

mock! {
    pub Tasks {}
    impl TaskCalls for Tasks {
        fn create(&self, new: &NewTask) -> Result<bool, DomainError>;
        fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError>;
        fn list(&self, tenant: &TenantId, cursor: Option<String>, limit: u32) -> Result<TaskPage, DomainError>;
        fn finish(&self, tenant: &TenantId, id: TaskId, outcome: &TaskOutcome, now: Timestamp) -> Result<Finished, DomainError>;
        fn record_progress(&self, tenant: &TenantId, id: TaskId, entry: &ProgressEntry, now: Timestamp) -> Result<(), DomainError>;
        fn progress_after(&self, tenant: &TenantId, id: TaskId, after: u64, limit: u32) -> Result<Vec<ProgressEntry>, DomainError>;
        fn renew_leases(&self, owner: &str, ids: &[TaskId], until: Timestamp) -> Result<(), DomainError>;
        fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError>;
        fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError>;
        fn check(&self) -> Result<(), DomainError>;
    }
}

/// A port backed by the mock of its mirror trait.
pub struct Port<M>(pub M);

#[async_trait]
impl<M: CuoCalls> CuoRunner for Port<M> {
    async fn list_personas(&self, ctx: &CallCtx) -> Result<Vec<Persona>, DomainError> {
        self.0.list_personas(ctx)
    }
    async fn list_workflows(
        &self,
        ctx: &CallCtx,
        persona: Option<&str>,
    ) -> Result<Vec<Workflow>, DomainError> {
        self.0.list_workflows(ctx, persona.map(str::to_owned))
    }
    async fn route(&self, ctx: &CallCtx, query: &str, limit: u8) -> Result<Route, DomainError> {
        self.0.route(ctx, query, limit)
    }
    async fn execute_workflow(
        &self,
        ctx: &CallCtx,
        run: &WorkflowRun,
        _: &dyn ProgressSink,
    ) -> Result<WorkflowOutcome, DomainError> {
        self.0.execute_workflow(ctx, run)
    }
    async fn invoke_skill(
        &self,
        ctx: &CallCtx,
        run: &SkillRun,
        _: &dyn ProgressSink,
    ) -> Result<JsonText, DomainError> {
        self.0.invoke_skill(ctx, run)
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.0.check()
    }
}

#[async_trait]
impl<M: SkillCalls> SkillIndex for Port<M> {
    async fn list(
        &self,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Vec<std::sync::Arc<Skill>>, DomainError> {
        let skills = self.0.list(query.map(str::to_owned), limit)?;
        Ok(skills.into_iter().map(std::sync::Arc::new).collect())
    }
    async fn get(&self, name: &str) -> Result<Option<Skill>, DomainError> {
        self.0.get(name)
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.0.check()
    }
}

#[async_trait]
impl<M: TaskCalls> TaskStore for Port<M> {
    async fn create(&self, new: &NewTask) -> Result<bool, DomainError> {
        self.0.create(new)
    }
    async fn get(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError> {
        self.0.get(tenant, id)
    }
    async fn list(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<TaskPage, DomainError> {
        self.0.list(tenant, cursor.map(str::to_owned), limit)
    }
    async fn finish(
        &self,
        tenant: &TenantId,
        id: TaskId,
        outcome: &TaskOutcome,
        now: Timestamp,
    ) -> Result<Finished, DomainError> {
        self.0.finish(tenant, id, outcome, now)
    }
    async fn record_progress(
        &self,
        tenant: &TenantId,
        id: TaskId,
        entry: &ProgressEntry,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        self.0.record_progress(tenant, id, entry, now)
    }
    async fn progress_after(
        &self,
        tenant: &TenantId,
        id: TaskId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ProgressEntry>, DomainError> {
        self.0.progress_after(tenant, id, after, limit)
    }
    async fn renew_leases(
        &self,
        owner: &str,
        ids: &[TaskId],
        until: Timestamp,
    ) -> Result<(), DomainError> {
        self.0.renew_leases(owner, ids, until)
    }
    async fn stopped_among(&self, owner: &str, ids: &[TaskId]) -> Result<Vec<TaskId>, DomainError> {
        self.0.stopped_among(owner, ids)
    }
    async fn sweep(&self, now: Timestamp) -> Result<SweepReport, DomainError> {
        self.0.sweep(now)
    }
    async fn check(&self) -> Result<(), DomainError> {
        self.0.check()
    }
}

mock! {
    pub Memory {}
    #[async_trait]
    impl MemoryClient for Memory {
        async fn append(&self, ctx: &CallCtx, entry: &NewAuditEntry, idempotency_key: &str) -> Result<AuditReceipt, DomainError>;
        async fn get(&self, ctx: &CallCtx, audit_id: &str) -> Result<AuditEntry, DomainError>;
        async fn list(&self, ctx: &CallCtx, query: &AuditQuery) -> Result<AuditPage, DomainError>;
        async fn check(&self) -> Result<(), DomainError>;
    }
}

mock! {
    pub Ledger {}
    #[async_trait]
    impl ConfirmationLedger for Ledger {
        async fn claim(&self, tenant: &TenantId, jti: &str, expires_at: Timestamp) -> Result<bool, DomainError>;
        async fn used(&self, tenant: &TenantId, jti: &str) -> Result<bool, DomainError>;
    }
}

mock! {
    pub Clock {}
    impl Clock for Clock {
        fn now(&self) -> Timestamp;
    }
}

mock! {
    pub Verifier {}
    #[async_trait]
    impl TokenVerifier for Verifier {
        async fn verify(&self, token: &str) -> Result<Principal, DomainError>;
        async fn verify_confirmation(&self, token: &str) -> Result<ConfirmationClaims, DomainError>;
    }
}

/// One mock per port, without expectations: any call to them panics until a test sets
/// what it expects.
#[derive(Default)]
pub struct MockPorts {
    pub cuo: MockCuo,
    pub memory: MockMemory,
    pub skills: MockSkills,
    pub tasks: MockTasks,
    pub ledger: MockLedger,
    pub clock: MockClock,
}

impl MockPorts {
    pub fn into_ports(self) -> Ports {
        Ports {
            tasks: Arc::new(Port(self.tasks)),
            cuo: Arc::new(Port(self.cuo)),
            memory: Arc::new(self.memory),
            skills: Arc::new(Port(self.skills)),
            clock: Arc::new(self.clock),
            ledger: Arc::new(self.ledger),
            // The stdio path keeps its answers in memory; nothing here may ask the store.
            answers: Arc::new(cyberos_mcp_bridge::adapters::unavailable::Unavailable::new(
                cyberos_mcp_bridge::domain::Upstream::TaskStore,
                "stdio keeps its answers in memory",
            )),
            approvals: Arc::new(cyberos_mcp_bridge::adapters::unavailable::Unavailable::new(
                cyberos_mcp_bridge::domain::Upstream::TaskStore,
                "no approvals in these tests",
            )),
        }
    }
}

/// The stdio transport over an in-memory pipe with `ports` behind it, the stdio token
/// `token` checked by `verifier`; initialized.
pub struct MockClient(pub Client);

impl MockClient {
    pub async fn start(ports: MockPorts, verifier: MockVerifier, token: &str) -> MockClient {
        let identity = Identity::new(Arc::new(verifier), StdioToken::Literal(token.into()));
        let app = App::new(ports.into_ports(), Settings::default(), identity);
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let server = tokio::spawn(stdio::serve(
            app,
            server_read,
            server_write,
            CancellationToken::new(),
        ));
        let (read, write) = tokio::io::split(client);
        let mut c = Client {
            write,
            read: BufReader::new(read).lines(),
            methods: Default::default(),
            server,
            skills: None,
        };
        let init = c.request(1, "initialize", init_params("2025-11-25")).await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        MockClient(c)
    }

    pub async fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.0.call(id, tool, args).await
    }

    pub async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.0.request(id, method, params).await
    }

    /// Closes the pipe and awaits the server: the `App` and its mocks drop inside the
    /// server task, so an unmet `.times(n)` or any panic there fails here.
    pub async fn finish(self) {
        let Client {
            write,
            read,
            server,
            ..
        } = self.0;
        drop((write, read));
        let served = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server stops at EOF");
        match served {
            Ok(io) => io.expect("the server ends cleanly"),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}
