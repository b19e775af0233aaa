//! The upkeep of this instance's runs, until shutdown: lease renewal for the runs live
//! here, the sweep, and stops made elsewhere (polled every second; on Postgres also
//! notified, each notification checked against the row before a child is killed).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::runner::{LEASE, TaskRunner};
use crate::domain::TaskId;
use crate::ports::StopSink;

/// How often this instance renews its leases and sweeps.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// How often this instance asks the store whether its runs were stopped elsewhere.
const STOP_POLL: Duration = Duration::from_secs(1);

impl TaskRunner {
    /// Heartbeats, stop polling and sweeps, until `shutdown`.
    pub async fn maintain(self: Arc<Self>, shutdown: CancellationToken) {
        self.ports
            .tasks
            .watch_stops(Arc::new(StopWaker(Arc::downgrade(&self))))
            .await;
        let mut beat = tokio::time::interval(HEARTBEAT);
        let mut poll = tokio::time::interval(STOP_POLL);
        let mut quiet_until = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = beat.tick() => self.heartbeat(&mut quiet_until).await,
                _ = poll.tick() => self.poll_stops().await,
            }
        }
    }

    /// Renews the leases of the runs live here (a row whose run ended is not renewed, so
    /// it cannot stay `running` on a lease nobody needs), then sweeps.
    ///
    /// No sweep runs until a whole lease has passed since this instance last failed to
    /// reach the store: during an outage every instance's leases lapse, and a sweep at
    /// the moment the store is back would fail runs that are alive here or elsewhere;
    /// one lease later, every live instance has renewed (it does every [`HEARTBEAT`]).
    async fn heartbeat(&self, quiet_until: &mut Option<Instant>) {
        let now = self.ports.clock.now();
        let until = now.plus_millis(LEASE.as_millis() as i64);
        let live = self.live();
        // With nothing to renew, a check tells whether the store is there.
        let reached = if live.is_empty() {
            self.ports.tasks.check().await
        } else {
            self.ports
                .tasks
                .renew_leases(&self.owner, &live, until)
                .await
        };
        if let Err(e) = reached {
            tracing::warn!(
                "cannot renew task leases; sweeps pause until the store is back for a lease: {e}"
            );
            *quiet_until = Some(Instant::now() + LEASE);
            return;
        }
        if quiet_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        *quiet_until = None;
        match self.ports.tasks.sweep(now).await {
            Ok(r) if r.orphaned + r.overdue + r.expired > 0 => {
                tracing::info!(
                    orphaned = r.orphaned,
                    overdue = r.overdue,
                    expired = r.expired,
                    "task sweep"
                );
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("task sweep failed: {e}");
                *quiet_until = Some(Instant::now() + LEASE);
                return;
            }
        }
        match self.ports.answers.sweep(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired = n, "client answers sweep"),
            Err(e) => tracing::warn!("client answers sweep failed: {e}"),
        }
        match self.ports.approvals.sweep().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired = n, "approvals sweep"),
            Err(e) => tracing::warn!("approvals sweep failed: {e}"),
        }
    }

    /// A stop notification (Postgres NOTIFY, which any session may send): the store is
    /// asked again whether the run really stopped before its child is killed.
    async fn confirm_stop(&self, id: TaskId) {
        if !self.is_live(id) {
            return;
        }
        match self.ports.tasks.stopped_among(&self.owner, &[id]).await {
            Ok(stopped) if stopped.contains(&id) => self.stop_signal(id),
            Ok(_) => {
                tracing::warn!(task_id = %id, "a stop notification for a task still running here; ignored")
            }
            Err(e) => {
                tracing::warn!(task_id = %id, "cannot check a stop notification; the stop poll will: {e}")
            }
        }
    }

    async fn poll_stops(&self) {
        let ids = self.live();
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
}

struct StopWaker(std::sync::Weak<TaskRunner>);

impl StopSink for StopWaker {
    fn stopped(&self, id: TaskId) {
        if let Some(runner) = self.0.upgrade() {
            tokio::spawn(async move { runner.confirm_stop(id).await });
        }
    }
}
