//! What makes an SSE stream resumable (`sse`): the request it answers, encoded once for
//! its event ids (`event_id`), its task once known, the last progress step it sent, and
//! where its progress comes from.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;

use super::event_id::{self, Door, Origin};
use super::shared::Shared;
use crate::app::edge::rpc::{Method, Request};
use crate::domain::{TaskId, TenantId};
use crate::ports::TaskStore;

/// What makes a stream resumable: the request it answers (encoded for the event ids),
/// its task once known, the last progress step sent, and where progress comes from.
pub(super) struct Resumable {
    origin: String,
    pub(super) token: Option<Value>,
    pub(super) task: Option<TaskId>,
    /// A POST's: the handler names the task when it has one.
    pub(super) named: Option<oneshot::Receiver<TaskId>>,
    pub(super) seq: u64,
    /// Read progress from the task's log (`tasks/result`, a resumed stream); `None` when
    /// it arrives live from the run (a waiting `tools/call`) or there is no token.
    pub(super) follow: Option<(Arc<dyn TaskStore>, TenantId)>,
}

impl Resumable {
    /// For a request that waits for a task and is answered as a stream: what the stream
    /// needs, and what the handler's session names the task with. `None` for other
    /// requests, and for ids and tokens too long to encode.
    pub(super) fn of_request(
        s: &Shared,
        req: &Request,
        tenant: TenantId,
    ) -> Option<(Resumable, oneshot::Sender<TaskId>)> {
        let (door, token) = match &req.method {
            Method::ToolsCall(Ok(call)) => (Door::Call, call.progress_token().cloned()),
            Method::TasksResult(Ok(task)) => (Door::Result, task.progress_token.clone()),
            _ => return None,
        };
        let origin = Origin {
            door,
            request: req.id.clone(),
            token,
        };
        let (tx, rx) = oneshot::channel();
        let follow = (door == Door::Result).then(|| (Arc::clone(&s.app.ports().tasks), tenant));
        let mut resumable = Resumable::new(&origin, None, 0, follow)?;
        resumable.named = Some(rx);
        Some((resumable, tx))
    }

    /// For a `GET` resuming after step `seq` of `task`.
    pub(super) fn resumed(
        s: &Shared,
        origin: &Origin,
        task: TaskId,
        seq: u64,
        tenant: TenantId,
    ) -> Option<Resumable> {
        let follow = Some((Arc::clone(&s.app.ports().tasks), tenant));
        Resumable::new(origin, Some(task), seq, follow)
    }

    fn new(
        origin: &Origin,
        task: Option<TaskId>,
        seq: u64,
        follow: Option<(Arc<dyn TaskStore>, TenantId)>,
    ) -> Option<Resumable> {
        Some(Resumable {
            origin: origin.encode()?,
            token: origin.token.clone(),
            task,
            named: None,
            seq,
            follow: follow.filter(|_| origin.token.is_some()),
        })
    }

    /// The id of the event at step `seq` of the task.
    pub(super) fn id(&self, task: TaskId, seq: u64) -> String {
        event_id::event_id(task, seq, &self.origin)
    }
}
