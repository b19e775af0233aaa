//! Runs long tools as tasks: creates the stored task, runs it on a CUO child of its own,
//! records progress and the outcome; `upkeep` keeps the instance's leases alive.
//!
//! Status only moves forward: the outcome is written with a conditional update, so a run
//! that finishes after a cancel leaves `cancelled` in place. A run stops when it completes,
//! when its deadline passes, when this instance cancels it, or when the store says it
//! stopped elsewhere (another instance cancelled it); stopping drops the adapter's future,
//! which kills the child's process group.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::run::{Work, run, store_outcome};
use super::slots::{Full, Slots};
use crate::app::service::caller::{Begin, Progress};
use crate::app::telemetry::{Outcome, TaskSpan};
use crate::domain::ids::hex_lower;
use crate::domain::task::{Task, TaskStatus, orphaned, panicked};
use crate::domain::{CallCtx, DomainError, JsonText, TaskId, TenantId, Timestamp, Tool, Upstream};
use crate::ports::{NewTask, Ports, TaskOutcome};
use crate::support::random::random_bytes;

/// How long a lease holds without a heartbeat.
pub const LEASE: Duration = Duration::from_secs(15);
/// Default cap on one tenant's tasks running on one instance.
pub const DEFAULT_MAX_TASKS_PER_TENANT: usize = 32;
/// Default cap on the CUO children running tasks on one instance, across tenants.
pub const DEFAULT_MAX_CUO_CHILDREN: usize = 64;
/// How long runs get to finish after SIGTERM before they are killed and failed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long a caller refused at a cap is told to wait (HTTP: `Retry-After`).
const AT_CAP_RETRY: Duration = Duration::from_secs(5);

/// A run to start: everything of its task but the id, which the runner draws.
pub struct NewRun {
    /// The long-running tool.
    pub tool: Tool,
    /// The tool arguments, kept with the task.
    pub input: JsonText,
    /// What to run.
    pub work: Work,
    /// The creation instant (the call's clock reading).
    pub created_at: Timestamp,
    /// The run's deadline, also the task's `timeout_at`.
    pub timeout_at: Timestamp,
    /// When the stored task may be deleted.
    pub expires_at: Timestamp,
    /// Where the run's progress goes besides the store.
    pub progress: Progress,
    /// How many tasks the tenant may have stored, this one included.
    pub max_stored: u32,
}

struct LocalRun {
    tenant: TenantId,
    stop: CancellationToken,
    done: watch::Receiver<bool>,
}

/// This instance's runs.
pub struct TaskRunner {
    pub(super) owner: String,
    slots: Slots,
    pub(super) ports: Ports,
    local: Mutex<HashMap<TaskId, LocalRun>>,
    tracker: TaskTracker,
    /// Bumped whenever a local run finishes, to wake waiters early.
    finished: watch::Sender<u64>,
}

impl TaskRunner {
    /// A runner for a new instance (its owner id is random) that runs at most
    /// `max_per_tenant` tasks of one tenant, and `max_children` tasks in all, at a time.
    pub fn new(ports: Ports, max_per_tenant: usize, max_children: usize) -> Arc<TaskRunner> {
        let owner = hex_lower(&random_bytes::<8>());
        Arc::new(TaskRunner {
            owner: format!("bridge-{owner}"),
            slots: Slots::new(max_per_tenant, max_children),
            ports,
            local: Mutex::new(HashMap::new()),
            tracker: TaskTracker::new(),
            finished: watch::channel(0).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, LocalRun>> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ids of the runs live here: running, or holding an outcome the store has not
    /// taken yet.
    pub(super) fn live(&self) -> Vec<TaskId> {
        self.lock().keys().copied().collect()
    }

    /// Whether `id` is live here: its outcome will be known here, not only in the store.
    pub fn is_live(&self, id: TaskId) -> bool {
        self.lock().contains_key(&id)
    }

    /// Creates the task (drawing its id, again on a collision) and starts running it as
    /// soon as the returned [`Begin`] is dropped.
    ///
    /// # Errors
    /// `UpstreamUnavailable` when the store is down, or (with a retry delay) when the
    /// tenant already runs as many tasks here as it may, or this instance as many CUO
    /// children as it may, or this instance is shutting down.
    pub async fn start(
        self: &Arc<Self>,
        ctx: CallCtx,
        new: NewRun,
    ) -> Result<(Task, Begin), DomainError> {
        // A start counts as a run for the shutdown's wait until its run is spawned (then
        // the run counts), so a start under way when the grace begins is waited for and
        // then stopped with the others. Taken before the check: a shutdown that found
        // nothing to wait for had closed the tracker before it.
        let _starting = self.tracker.token();
        if self.tracker.is_closed() {
            return Err(shutting_down());
        }
        // Taken before the first await, given back when the run ends or this start fails.
        let slot = self.slots.reserve(ctx.tenant).map_err(at_cap)?;
        let NewRun {
            tool,
            input,
            work,
            created_at,
            timeout_at,
            expires_at,
            progress,
            max_stored,
        } = new;
        let mut task = Task {
            id: draw_id(),
            tenant: ctx.tenant,
            tool,
            status: TaskStatus::Running,
            output: None,
            failure: None,
            status_message: Some("started".into()),
            trace_id: ctx.trace_id,
            created_at,
            updated_at: created_at,
            timeout_at,
            expires_at,
        };
        let lease_until = self.ports.clock.now().plus_millis(LEASE.as_millis() as i64);
        let mut created = false;
        for attempt in 0..3 {
            if attempt > 0 {
                tracing::warn!(task_id = %task.id, "task id collision; drawing a new id");
                task.id = draw_id();
            }
            let new = NewTask {
                task: task.clone(),
                input: input.clone(),
                owner: self.owner.clone(),
                lease_until,
                max_stored,
            };
            if self.ports.tasks.create(&new).await? {
                created = true;
                break;
            }
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
        let (begin, begun) = Begin::new();
        self.tracker.spawn(async move {
            // Sent or dropped, either way the answer is on its way.
            let _ = begun.await;
            let ran = run(
                &runner.ports,
                ctx,
                running.clone(),
                work,
                progress,
                stop.clone(),
            );
            let ran = AssertUnwindSafe(ran.instrument(in_span.clone()))
                .catch_unwind()
                .await;
            let outcome = match ran {
                Ok(outcome) => outcome,
                // A panic unwound through the run (its child was killed on the way): the
                // task still ends, as an internal error, and the slot below is given back.
                Err(_) => {
                    tracing::error!(task_id = %running.id, "the task's run panicked; failing the task");
                    let failed = TaskOutcome {
                        status: TaskStatus::Failed,
                        output: None,
                        failure: Some(panicked()),
                    };
                    store_outcome(&runner.ports, &running, &failed, &stop)
                        .instrument(in_span)
                        .await;
                    Outcome::Panic
                }
            };
            span.finish(outcome);
            runner.lock().remove(&running.id);
            drop(slot);
            let _ = done_tx.send(true);
            runner.finished.send_modify(|n| *n += 1);
        });
        tracing::info!(task_id = %task.id, tool = task.tool.name(), tenant = %task.tenant, trace_id = %task.trace_id, "task started");
        Ok((task, begin))
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

    /// Kills the child of a run of this instance that stopped elsewhere.
    pub(super) fn stop_signal(&self, id: TaskId) {
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

    /// SIGTERM: gives runs `grace` to finish, then kills the rest and fails them (all at
    /// once, so the last is failed as soon as the first).
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
        let orphan = |(id, tenant): (TaskId, TenantId)| async move {
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
            // Waiters on this run learn its outcome now, not at their next poll.
            self.finished.send_modify(|n| *n += 1);
        };
        futures::future::join_all(remaining.into_iter().map(orphan)).await;
    }
}

/// The refusal of a run past a cap: `upstream_unavailable` with a retry delay.
fn at_cap(full: Full) -> DomainError {
    let (upstream, message, hint) = match full {
        Full::Tenant(n) => (
            Upstream::TaskStore,
            "too many running tasks",
            format!(
                "At most {n} of your tasks run at once here; wait for some to finish or cancel them, then retry."
            ),
        ),
        Full::Instance(n) => (
            Upstream::Cuo,
            "too many running CUO children",
            format!(
                "This bridge runs at most {n} workflow and skill runs at once, across all callers; retry after a few seconds."
            ),
        ),
    };
    DomainError::UpstreamUnavailable {
        upstream,
        message: message.into(),
        hint,
        retry_after: Some(AT_CAP_RETRY),
        source: None,
    }
}

/// The refusal of a run once SIGTERM has come: the caller retries, elsewhere or later.
fn shutting_down() -> DomainError {
    DomainError::UpstreamUnavailable {
        upstream: Upstream::Cuo,
        message: "the bridge is shutting down".into(),
        hint: "It starts no new runs; retry in a moment (another instance, or this one restarted, takes the call).".into(),
        retry_after: Some(Duration::from_secs(1)),
        source: None,
    }
}

/// A fresh task id: 128 bits from the CSPRNG (the only place task ids are drawn).
fn draw_id() -> TaskId {
    TaskId::from_random(random_bytes())
}
