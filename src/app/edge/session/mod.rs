//! Per-connection protocol state: whether `initialize` happened, what the client
//! declared, the log level, in-flight requests that `notifications/cancelled` may stop,
//! the outbound channel for notifications, and the task runs held back until the answer
//! that announces them is on its way.
//!
//! Locks here are std mutexes that are never held across an `.await`.

mod questions;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::app::edge::rpc::RequestId;
use crate::app::service::caller::{Answer, Begin, Caller};
use crate::app::telemetry::Parent;
use crate::domain::DomainError;
pub use questions::AnswerRoute;
use questions::Questions;

/// Runs held until the answers announcing them are written: stdio's writer releases them
/// after each flush; otherwise they go with the session (an HTTP request's ends once its
/// answer is built).
#[derive(Default)]
pub struct Held(Mutex<Vec<Begin>>);

impl Held {
    /// Lets every held run start.
    pub fn release(&self) {
        let held = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        drop(held);
    }
}

/// One client connection.
pub struct Session {
    initialized: AtomicBool,
    client_elicitation: AtomicBool,
    /// `clientInfo.name` from `initialize` (stdio), or the `User-Agent` product of an HTTP
    /// request (whose later requests carry no `clientInfo`).
    client_name: std::sync::OnceLock<String>,
    log_level: AtomicU8,
    inflight: Mutex<HashMap<RequestId, CancellationToken>>,
    outbound: mpsc::Sender<String>,
    /// Our requests to the client (elicitation) awaiting its response.
    questions: Questions,
    /// The principal the transport already verified (HTTP); stdio reads its token source.
    principal: Option<crate::domain::Principal>,
    /// OTel `network.transport`: `pipe` for stdio, `tcp` for HTTP.
    network: &'static str,
    /// The HTTP request's `traceparent` header.
    traceparent: Option<Parent>,
    held: Arc<Held>,
    /// Told which task this request waits for (HTTP: the stream's event ids name it).
    waits_for: Mutex<Option<oneshot::Sender<crate::domain::TaskId>>>,
}

impl Session {
    /// A new, uninitialized session whose notifications go to `outbound`.
    pub fn new(outbound: mpsc::Sender<String>) -> Session {
        Session {
            initialized: AtomicBool::new(false),
            client_elicitation: AtomicBool::new(false),
            client_name: std::sync::OnceLock::new(),
            log_level: AtomicU8::new(1),
            inflight: Mutex::new(HashMap::new()),
            outbound,
            questions: Questions::default(),
            principal: None,
            network: "pipe",
            traceparent: None,
            held: Arc::default(),
            waits_for: Mutex::new(None),
        }
    }

    /// Tells `tx` the task this request comes to wait for, if it does.
    pub fn telling_waited_task(self, tx: oneshot::Sender<crate::domain::TaskId>) -> Session {
        *self.waits_for.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        self
    }

    /// Holds runs in `held`, which the transport releases once answers are written.
    pub fn releasing_runs_with(mut self, held: Arc<Held>) -> Session {
        self.held = held;
        self
    }

    /// Lets the held runs start (a request that gets no answer).
    pub fn release_held(&self) {
        self.held.release();
    }

    /// A session for one stateless HTTP request: its principal verified by the transport,
    /// already initialized unless the request is `initialize` itself.
    pub fn stateless(
        outbound: mpsc::Sender<String>,
        principal: crate::domain::Principal,
        initialize: bool,
        user_agent_product: Option<&str>,
    ) -> Session {
        let mut s = Session::new(outbound);
        s.principal = Some(principal);
        s.network = "tcp";
        if let Some(product) = user_agent_product {
            s.set_client_name(product.to_owned());
        }
        if !initialize {
            s.mark_initialized(false);
        }
        s
    }

    /// An HTTP request of a session whose client declared `elicitation`, on a response
    /// that can carry our requests (SSE): it may ask, and the answers come back by `route`.
    pub fn asking_through(mut self, route: AnswerRoute) -> Session {
        self.client_elicitation.store(true, Ordering::Release);
        self.questions = Questions::through(route);
        self
    }

    /// Continues the trace of the request's `traceparent` header.
    pub fn with_traceparent(mut self, parent: Option<Parent>) -> Session {
        self.traceparent = parent;
        self
    }

    /// The trace context the transport received, if any.
    pub fn traceparent(&self) -> Option<&Parent> {
        self.traceparent.as_ref()
    }

    /// OTel `network.transport` of this session.
    pub fn network(&self) -> &'static str {
        self.network
    }

    /// The transport-verified principal, if any.
    pub fn principal(&self) -> Option<&crate::domain::Principal> {
        self.principal.as_ref()
    }

    /// Whether `initialize` succeeded.
    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// Marks the session initialized; `false` if it already was.
    pub fn mark_initialized(&self, client_elicitation: bool) -> bool {
        let first = !self.initialized.swap(true, Ordering::AcqRel);
        if first {
            self.client_elicitation
                .store(client_elicitation, Ordering::Release);
        }
        first
    }

    /// Records `clientInfo.name` (once).
    pub fn set_client_name(&self, name: String) {
        let _ = self.client_name.set(name);
    }

    /// Whether this session outlives one request, so what `initialize` said holds for the
    /// calls after it (stdio); an HTTP request's session does not.
    pub fn remembers_client(&self) -> bool {
        self.network == "pipe"
    }

    /// The client's name: `clientInfo.name` from `initialize` on stdio, the `User-Agent`
    /// product on HTTP.
    pub fn client_name(&self) -> Option<&str> {
        self.client_name.get().map(String::as_str)
    }

    /// Whether the client declared the `elicitation` capability.
    pub fn client_elicitation(&self) -> bool {
        self.client_elicitation.load(Ordering::Acquire)
    }

    /// Sets the minimum level of `notifications/message`.
    pub fn set_log_level(&self, index: u8) {
        self.log_level.store(index, Ordering::Release);
    }

    /// The minimum level index of `notifications/message`.
    pub fn log_level(&self) -> u8 {
        self.log_level.load(Ordering::Acquire)
    }

    /// Registers an in-flight request; the token fires on `notifications/cancelled`.
    pub fn track(&self, id: &RequestId) -> CancellationToken {
        let token = CancellationToken::new();
        self.lock_inflight().insert(id.clone(), token.clone());
        token
    }

    /// Forgets a finished request.
    pub fn untrack(&self, id: &RequestId) {
        self.lock_inflight().remove(id);
    }

    /// Cancels an in-flight request; unknown or finished ids are ignored (MCP allows it).
    pub fn cancel(&self, id: &RequestId) -> bool {
        match self.lock_inflight().remove(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// A handle for sending notifications from work that outlives this request.
    pub fn outbound(&self) -> mpsc::Sender<String> {
        self.outbound.clone()
    }

    /// Queues a serialized notification to the client; dropped if the connection is gone.
    pub async fn notify(&self, frame: String) {
        let _ = self.outbound.send(frame).await;
    }

    /// Sends a request to the client and waits for its response: `Ok(result)` or
    /// `Err(error object)`; `None` when the connection closed or `wait` passed.
    ///
    /// # Errors
    /// Over HTTP, the store's failure, or the tenant's cap on open questions.
    pub async fn ask(
        &self,
        method: &str,
        params: Value,
        wait: std::time::Duration,
    ) -> Result<Option<Result<Value, Value>>, DomainError> {
        self.questions
            .ask(&self.outbound, method, params, wait)
            .await
    }

    /// Delivers the client's response to one of our requests; unknown ids are ignored.
    pub fn resolve(&self, id: &RequestId, outcome: Result<Value, Value>) {
        self.questions.resolve(id, outcome);
    }

    fn lock_inflight(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        // A panic while holding this lock cannot leave the map inconsistent, so poisoning
        // is ignored.
        self.inflight.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl Caller for Session {
    fn principal(&self) -> Option<&crate::domain::Principal> {
        self.principal.as_ref()
    }

    fn client_name(&self) -> Option<&str> {
        Session::client_name(self)
    }

    fn can_ask(&self) -> bool {
        self.client_elicitation()
    }

    /// A form elicitation with one boolean, `confirm`; only `accept` with `true` is a yes.
    async fn confirm(
        &self,
        question: &str,
        wait: std::time::Duration,
    ) -> Result<Answer, DomainError> {
        let params = serde_json::json!({
            "mode": "form",
            "message": question,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "confirm": {"type": "boolean", "title": "Allow this call", "default": false}
                },
                "required": ["confirm"]
            }
        });
        Ok(match self.ask("elicitation/create", params, wait).await? {
            Some(Ok(result)) => match (
                result.get("action").and_then(Value::as_str),
                result.pointer("/content/confirm"),
            ) {
                (Some("accept"), Some(Value::Bool(true))) => Answer::Yes,
                (Some("accept"), _) => Answer::No,
                (Some("decline"), _) => Answer::Declined,
                (Some("cancel"), _) => Answer::Cancelled,
                _ => Answer::Unreadable,
            },
            Some(Err(_)) => Answer::CouldNotAsk,
            None => Answer::None,
        })
    }

    fn hold(&self, run: Begin) {
        self.held
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(run);
    }

    fn waits_for_task(&self, task: crate::domain::TaskId) {
        let tx = self
            .waits_for
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(tx) = tx {
            let _ = tx.send(task);
        }
    }
}
