//! The bridge's questions to the client (elicitation): asked on the session's outbound
//! channel, answered over stdio through [`Questions::resolve`], or over HTTP through the
//! store, which any instance may receive the answer on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::app::edge::rpc::RequestId;
use crate::app::service::output::json_value;
use crate::domain::session::{QuestionKey, too_many_open_questions};
use crate::domain::{DomainError, TenantId};
use crate::ports::ClientAnswers;

/// How the answers to an HTTP session's requests come back: as POSTs that any instance
/// may receive, which deliver them through the store to the one waiting here.
pub struct AnswerRoute {
    /// The store that carries answers between instances.
    pub answers: Arc<dyn ClientAnswers>,
    /// The session's tenant.
    pub tenant: TenantId,
    /// The session's nonce.
    pub session: String,
    /// The session's subject, whom the questions are asked of.
    pub subject: String,
}

/// A question whose wait has not ended: when the wait is dropped instead (the client
/// closed the stream), the question is closed in the background, so it stops counting
/// against the tenant's cap at once rather than when it expires.
struct Open<'a>(Option<(&'a AnswerRoute, QuestionKey)>);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let (Some((route, key)), Ok(runtime)) =
            (self.0.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (answers, tenant) = (Arc::clone(&route.answers), route.tenant);
        runtime.spawn(async move {
            let _ = answers.wait(&tenant, &key, std::time::Duration::ZERO).await;
        });
    }
}

/// A session's questions to its client that await an answer, and how answers come back.
#[derive(Default)]
pub(super) struct Questions {
    /// Our requests to the client awaiting its response (answered through `resolve`).
    awaiting: Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, Value>>>>,
    /// Set when the answers come back through the store (HTTP) instead of `resolve`.
    route: Option<AnswerRoute>,
}

impl Questions {
    /// Questions whose answers come back through `route`.
    pub(super) fn through(route: AnswerRoute) -> Questions {
        Questions {
            awaiting: Mutex::default(),
            route: Some(route),
        }
    }

    /// Sends a request to the client and waits for its response: `Ok(result)` or
    /// `Err(error object)`; `None` when the connection closed or `wait` passed. Our request
    /// ids are random (`cyberos-e-` + 128 bits), so an answer cannot be aimed at another
    /// client's question, whichever instance receives it.
    ///
    /// # Errors
    /// Over HTTP, the store's failure, or the tenant's cap on open questions.
    pub(super) async fn ask(
        &self,
        outbound: &mpsc::Sender<String>,
        method: &str,
        params: Value,
        wait: std::time::Duration,
    ) -> Result<Option<Result<Value, Value>>, DomainError> {
        let id = RequestId::Str(format!(
            "cyberos-e-{}",
            data_encoding::HEXLOWER.encode(&crate::support::random::random_bytes::<16>())
        ));
        let frame = request_frame(&id, method, params);
        let Some(route) = &self.route else {
            let (tx, rx) = oneshot::channel();
            self.lock_awaiting().insert(id.clone(), tx);
            let _ = outbound.send(frame).await;
            let answer = tokio::time::timeout(wait, rx)
                .await
                .ok()
                .and_then(Result::ok);
            self.lock_awaiting().remove(&id);
            return Ok(answer);
        };
        let key = QuestionKey {
            session: route.session.clone(),
            request: id.to_text(),
        };
        // Opened before it is sent, so its answer finds it.
        if !route
            .answers
            .open(&route.tenant, &route.subject, &key, wait)
            .await?
        {
            return Err(too_many_open_questions());
        }
        let mut open = Open(Some((route, key)));
        let _ = outbound.send(frame).await;
        let (route, key) = open.0.as_ref().expect("set above");
        let answer = route.answers.wait(&route.tenant, key, wait).await;
        open.0 = None;
        Ok(match answer? {
            Some(Ok(result)) => Some(Ok(json_value(&result)?)),
            Some(Err(error)) => Some(Err(json_value(&error)?)),
            None => None,
        })
    }

    /// Delivers the client's response to one of our requests; unknown ids are ignored.
    pub(super) fn resolve(&self, id: &RequestId, outcome: Result<Value, Value>) {
        if let Some(tx) = self.lock_awaiting().remove(id) {
            let _ = tx.send(outcome);
        }
    }

    fn lock_awaiting(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, oneshot::Sender<Result<Value, Value>>>> {
        self.awaiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Our request as text. `params` is moved in (`json!` would copy it and leave the
/// argument alive), so the question waits as text, not as a tree of maps.
fn request_frame(id: &RequestId, method: &str, params: Value) -> String {
    let mut frame = serde_json::Map::new();
    frame.insert("jsonrpc".into(), "2.0".into());
    frame.insert("id".into(), id.to_value());
    frame.insert("method".into(), method.into());
    frame.insert("params".into(), params);
    Value::Object(frame).to_string()
}
