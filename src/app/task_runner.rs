//! Runs long tools as tasks: creates the stored task, runs it on a CUO child of its own,
//! records progress and the outcome, and keeps the instance's leases alive.
//!
//! Status only moves forward: the outcome is written with a conditional update, so a run
//! that finishes after a cancel leaves `cancelled` in place. A run stops when it completes,
//! when its deadline passes, when this instance cancels it, or when the store says it
//! stopped elsewhere (another instance cancelled it); stopping drops the adapter's future,
//! which kills the child's process group.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::telemetry::{Outcome, TaskSpan};
use crate::app::trace::random_bytes;
use crate::domain::cuo::Progress;
use crate::domain::task::{Task, TaskFailure, TaskStatus, orphaned};
use crate::domain::{CallCtx, DomainError, JsonText, TaskId, TenantId};
use crate::ports::{NewTask, Ports, ProgressSink, SkillRun, StopSink, TaskOutcome, WorkflowRun};
use tracing::Instrument;

/// How long a lease holds without a heartbeat.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often this instance renews its leases and sweeps.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// How often this instance asks the store whether its runs were stopped elsewhere.
const STOP_POLL: Duration = Duration::from_secs(1);
/// Default cap on one tenant's tasks running on one instance.
pub const DEFAULT_MAX_TASKS_PER_TENANT: usize = 32;
/// The message of the refusal when a tenant is at its cap (HTTP answers it with 429).
pub const TOO_MANY_TASKS: &str = "too many running tasks";

/// What a task runs.
pub enum Work {
    /// A CUO workflow.
    Workflow(WorkflowRun),
    /// A skill.
    Skill(SkillRun),
}

/// Where progress of one run goes besides the store: the client, when it sent a
/// `progressToken`.
pub struct ProgressTarget {
    /// Serialized notifications to the client.
    pub outbound: mpsc::Sender<String>,
    /// The client's token.
    pub token: Value,
}

struct LocalRun {
    tenant: TenantId,
    stop: CancellationToken,
    done: watch::Receiver<bool>,
}

/// This instance's runs.
pub struct TaskRunner {
    owner: String,
    max_per_tenant: usize,
    ports: Ports,
    local: Mutex<HashMap<TaskId, LocalRun>>,
    tracker: TaskTracker,
    /// Bumped whenever a local run finishes, to wake waiters early.
    finished: watch::Sender<u64>,
}

impl TaskRunner {
    /// A runner for a new instance (its owner id is random) that runs at most
    /// `max_per_tenant` tasks of one tenant at a time.
    pub fn new(ports: Ports, max_per_tenant: usize) -> Arc<TaskRunner> {
        let owner: String = random_bytes::<8>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Arc::new(TaskRunner {
            owner: format!("bridge-{owner}"),
            max_per_tenant,
            ports,
            local: Mutex::new(HashMap::new()),
            tracker: TaskTracker::new(),
            finished: watch::channel(0).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, LocalRun>> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates the task (retrying a colliding id) and starts running it.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down.
    pub async fn start(
        self: &Arc<Self>,
        ctx: CallCtx,
        mut task: Task,
        input: JsonText,
        work: Work,
        progress: Option<ProgressTarget>,
    ) -> Result<Task, DomainError> {
        let running = self
            .lock()
            .values()
            .filter(|r| r.tenant == task.tenant)
            .count();
        if running >= self.max_per_tenant {
            return Err(DomainError::UpstreamUnavailable {
                upstream: crate::domain::Upstream::TaskStore,
                message: TOO_MANY_TASKS.into(),
                hint: format!(
                    "At most {} of your tasks run at once here; wait for some to finish or cancel them, then retry.",
                    self.max_per_tenant
                ),
                source: None,
            });
        }
        let now = self.ports.clock.now();
        let lease_until = now.plus_millis(LEASE.as_millis() as i64);
        let mut created = false;
        for _ in 0..3 {
            task.id = TaskId::from_random(random_bytes());
            let new = NewTask {
                task: task.clone(),
                input: input.clone(),
                owner: self.owner.clone(),
                lease_until,
            };
            if self.ports.tasks.create(&new).await? {
                created = true;
                break;
            }
            tracing::warn!(task_id = %task.id, "task id collision; drawing a new id");
        }
        if !created {
            return Err(DomainError::internal("could not allocate a task id", None));
        }
        let stop = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        self.lock().insert(
            task.id,
            LocalRun {
                tenant: task.tenant,
                stop: stop.clone(),
                done: done_rx,
            },
        );
        let runner = Arc::clone(self);
        let running = task.clone();
        let span = TaskSpan::start(&task, &ctx);
        let in_span = span.span().clone();
        self.tracker.spawn(async move {
            let outcome = runner
                .run(ctx, running.clone(), work, progress, stop)
                .instrument(in_span)
                .await;
            span.finish(outcome);
            runner.lock().remove(&running.id);
            let _ = done_tx.send(true);
            runner.finished.send_modify(|n| *n += 1);
        });
        tracing::info!(task_id = %task.id, tool = task.tool.name(), tenant = %task.tenant, trace_id = %task.trace_id, "task started");
        Ok(task)
    }

    async fn run(
        &self,
        ctx: CallCtx,
        task: Task,
        work: Work,
        progress: Option<ProgressTarget>,
        stop: CancellationToken,
    ) -> Outcome {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink = ChannelSink(tx);
        let cuo = Arc::clone(&self.ports.cuo);
        let mut call = Box::pin(async {
            match &work {
                Work::Workflow(run) => cuo.execute_workflow(&ctx, run, &sink).await.map(|o| {
                    json!({
                        "steps_executed": o.steps_executed,
                        "final_artifacts": o.final_artifacts.iter().map(|a| json!({
                            "name": a.name, "media_type": a.media_type, "content": a.content
                        })).collect::<Vec<_>>()
                    })
                    .to_string()
                }),
                Work::Skill(run) => cuo
                    .invoke_skill(&ctx, run, &sink)
                    .await
                    .map(JsonText::into_string),
            }
        });
        let now_ms = self.ports.clock.now().unix_millis();
        // The adapter enforces the deadline itself; this is the backstop.
        let backstop = Duration::from_millis(
            u64::try_from(task.timeout_at.unix_millis() - now_ms).unwrap_or(0),
        ) + Duration::from_secs(5);
        let deadline = tokio::time::sleep(backstop);
        tokio::pin!(deadline);
        let mut last_step = 0u64;
        let outcome = loop {
            tokio::select! {
                result = &mut call => break Some(result),
                () = stop.cancelled() => break None,
                () = &mut deadline => break Some(Err(timeout_error(&task))),
                Some(p) = rx.recv() => {
                    if p.step > last_step {
                        last_step = p.step;
                        self.report(&task, &p, progress.as_ref()).await;
                    }
                }
            }
        };
        // Dropping the call future kills the child's process group.
        drop(call);
        let Some(result) = outcome else {
            tracing::info!(task_id = %task.id, "task stopped");
            return Outcome::Cancelled;
        };
        let outcome = match result {
            Ok(output) => TaskOutcome {
                status: TaskStatus::Completed,
                output: Some(JsonText::from_serialized(output)),
                failure: None,
            },
            Err(e) => {
                tracing::info!(task_id = %task.id, class = %e.class(), "task failed: {e}");
                TaskOutcome {
                    status: TaskStatus::Failed,
                    output: None,
                    failure: Some(failure_of(&e)),
                }
            }
        };
        self.store_outcome(&task, &outcome).await;
        if task.tool == crate::domain::Tool::ExecuteWorkflow {
            self.audit_invocation(&ctx, &task, &outcome).await;
        }
        match &outcome.failure {
            None => Outcome::Success,
            Some(f) => Outcome::Failed(f.class),
        }
    }

    async fn report(&self, task: &Task, p: &Progress, target: Option<&ProgressTarget>) {
        let message = p
            .message
            .clone()
            .unwrap_or_else(|| format!("step {}", p.step));
        let now = self.ports.clock.now();
        if let Err(e) = self
            .ports
            .tasks
            .record_progress(&task.tenant, task.id, &message, now)
            .await
        {
            tracing::warn!(task_id = %task.id, "cannot record progress: {e}");
        }
        if let Some(target) = target {
            let mut params = json!({
                "progressToken": target.token, "progress": p.step, "message": message,
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task.id.to_string()}}
            });
            if let Some(total) = p.total {
                params["total"] = total.into();
            }
            let _ = target.outbound.try_send(crate::app::rpc::notification(
                "notifications/progress",
                params,
            ));
        }
    }

    /// Appends the seed's `plugin.invoked` row for a finished workflow. The task's outcome
    /// never depends on it: a down memory service is retried with the same idempotency key
    /// (so nothing is written twice), then logged.
    async fn audit_invocation(&self, ctx: &CallCtx, task: &Task, outcome: &TaskOutcome) {
        let now = self.ports.clock.now();
        let result = match &outcome.failure {
            None => "success",
            Some(f) => f.class.as_str(),
        };
        let body = json!({
            "plugin_id": "cyberos",
            "plugin_version": env!("CARGO_PKG_VERSION"),
            "tool_name": task.tool.name(),
            "trace_id": task.trace_id.to_string(),
            "duration_ms": now.millis_since(task.created_at),
            "outcome": result,
            "task_id": task.id.to_string()
        });
        let entry = crate::domain::memory::NewAuditEntry {
            kind: "plugin.invoked".into(),
            subject: Some(task.id.to_string()),
            body: JsonText::from_serialized(body.to_string()),
        };
        let key = format!("plugin.invoked:{}", task.id);
        for attempt in 0..3u64 {
            match self.ports.memory.append(ctx, &entry, &key).await {
                Ok(_) => return,
                Err(e) if attempt < 2 => {
                    tracing::debug!(task_id = %task.id, "plugin.invoked audit row failed, retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(500 * (attempt + 1))).await;
                }
                Err(e) => {
                    tracing::warn!(task_id = %task.id, "plugin.invoked audit row not recorded: {e}")
                }
            }
        }
    }

    /// Writes the outcome, retrying briefly if the store blinks.
    async fn store_outcome(&self, task: &Task, outcome: &TaskOutcome) {
        for attempt in 0..5u64 {
            match self
                .ports
                .tasks
                .finish(&task.tenant, task.id, outcome, self.ports.clock.now())
                .await
            {
                Ok(stored) => {
                    tracing::info!(task_id = %task.id, status = stored.status.as_str(), "task finished");
                    return;
                }
                Err(e) => {
                    tracing::warn!(task_id = %task.id, "cannot store the outcome (attempt {}): {e}", attempt + 1);
                    tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
                }
            }
        }
    }

    /// Stops a run of this instance and waits (briefly) until its child is gone. Returns
    /// whether it was running here.
    pub async fn stop_local(&self, id: TaskId) -> bool {
        let found = self
            .lock()
            .get(&id)
            .map(|r| (r.stop.clone(), r.done.clone()));
        let Some((stop, mut done)) = found else {
            return false;
        };
        stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), done.wait_for(|d| *d)).await;
        true
    }

    /// Waits until `tenant`'s task `id` is terminal and returns it.
    ///
    /// # Errors
    /// As for `TaskStore::get`.
    pub async fn wait_terminal(&self, tenant: &TenantId, id: TaskId) -> Result<Task, DomainError> {
        let mut finished = self.finished.subscribe();
        loop {
            let task = self.ports.tasks.get(tenant, id).await?;
            if task.status.is_terminal() {
                return Ok(task);
            }
            // Local runs wake us when they finish; runs elsewhere are polled.
            let _ = tokio::time::timeout(Duration::from_millis(500), finished.changed()).await;
        }
    }

    /// Heartbeats, stop polling and sweeps, until `shutdown`.
    pub async fn maintain(self: Arc<Self>, shutdown: CancellationToken) {
        self.ports
            .tasks
            .watch_stops(Arc::new(StopWaker(Arc::downgrade(&self))))
            .await;
        let mut beat = tokio::time::interval(HEARTBEAT);
        let mut poll = tokio::time::interval(STOP_POLL);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = beat.tick() => {
                    let now = self.ports.clock.now();
                    let until = now.plus_millis(LEASE.as_millis() as i64);
                    if let Err(e) = self.ports.tasks.renew_leases(&self.owner, until).await {
                        tracing::warn!("cannot renew task leases: {e}");
                    }
                    match self.ports.tasks.sweep(now).await {
                        Ok(r) if r.orphaned + r.expired > 0 => {
                            tracing::info!(orphaned = r.orphaned, expired = r.expired, "task sweep");
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!("task sweep failed: {e}"),
                    }
                }
                _ = poll.tick() => self.poll_stops().await,
            }
        }
    }

    async fn poll_stops(&self) {
        let ids: Vec<TaskId> = self.lock().keys().copied().collect();
        if ids.is_empty() {
            return;
        }
        match self.ports.tasks.stopped_among(&self.owner, &ids).await {
            Ok(stopped) => {
                for id in stopped {
                    self.stop_signal(id);
                }
            }
            Err(e) => tracing::warn!("cannot poll task stops: {e}"),
        }
    }

    fn stop_signal(&self, id: TaskId) {
        if let Some(run) = self.lock().get(&id) {
            tracing::info!(task_id = %id, "task stopped elsewhere; killing its child");
            run.stop.cancel();
        }
    }

    /// Waits for every local run to end by itself (stdin EOF: runs are bounded by their
    /// timeouts).
    pub async fn drain(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// SIGTERM: gives runs `grace` to finish, then kills the rest and fails them.
    pub async fn shutdown(&self, grace: Duration) {
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
        {
            return;
        }
        let remaining: Vec<(TaskId, TenantId)> =
            self.lock().iter().map(|(id, r)| (*id, r.tenant)).collect();
        for (id, tenant) in remaining {
            self.stop_local(id).await;
            let outcome = TaskOutcome {
                status: TaskStatus::Failed,
                output: None,
                failure: Some(orphaned()),
            };
            if let Err(e) = self
                .ports
                .tasks
                .finish(&tenant, id, &outcome, self.ports.clock.now())
                .await
            {
                tracing::warn!(task_id = %id, "cannot fail the task on shutdown: {e}");
            }
        }
    }
}

struct StopWaker(std::sync::Weak<TaskRunner>);

impl StopSink for StopWaker {
    fn stopped(&self, id: TaskId) {
        if let Some(runner) = self.0.upgrade() {
            runner.stop_signal(id);
        }
    }
}

struct ChannelSink(mpsc::UnboundedSender<Progress>);

impl ProgressSink for ChannelSink {
    fn report(&self, progress: Progress) {
        let _ = self.0.send(progress);
    }
}

fn timeout_error(task: &Task) -> DomainError {
    let f = crate::domain::task::timed_out(task.timeout_at.millis_since(task.created_at) / 1000);
    DomainError::Internal {
        message: f.message,
        hint: f.hint,
        source: None,
    }
}

/// The stored failure of a run's error.
pub fn failure_of(e: &DomainError) -> TaskFailure {
    TaskFailure {
        class: e.class(),
        message: e.to_string(),
        hint: e.hint().to_owned(),
    }
}
