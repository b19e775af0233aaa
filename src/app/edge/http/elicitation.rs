//! Elicitation over HTTP (MCP 2025-11-25 §7.4): a `tools/call` in a session whose client
//! declared `elicitation`, from a client that accepts SSE, may ask the user on its
//! response's stream; the client POSTs its answer, which any instance may receive and
//! delivers through the store (`ports::ClientAnswers`) to the one waiting. The answer is
//! tenant-checked twice: the POST's token must open the session (`sessions::open`), and the
//! store finds the question only under that session's tenant and nonce.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;

use super::gate::Accept;
use super::reply;
use super::sessions::store_down;
use super::shared::Shared;
use crate::app::edge::rpc::{INVALID_REQUEST, Method, PeerResponse};
use crate::app::edge::session::AnswerRoute;
use crate::app::service::output::json_text;
use crate::domain::session::{QuestionKey, SessionState};

/// Where the answers to a request's questions come back, when it may ask at all: a
/// `tools/call`, in a session that declared `elicitation`, whose response can be a
/// stream. A client that accepts only JSON could never see the question, so it is not
/// asked and gets the refusal a client without elicitation gets.
pub(super) fn route(
    s: &Shared,
    session: Option<&SessionState>,
    accept: Accept,
    method: &Method,
) -> Option<AnswerRoute> {
    let state = session.filter(|state| state.elicitation)?;
    (accept.sse && matches!(method, Method::ToolsCall(_))).then(|| AnswerRoute {
        answers: s.app.ports().answers.clone(),
        tenant: state.tenant,
        session: state.nonce.clone(),
        subject: state.subject.clone(),
    })
}

/// A POSTed response to one of our requests, in `session`: 202 when it answered an open
/// question. One that answers none (an id never asked, another session's, answered
/// already, or past its wait) is refused with 400 and a JSON-RPC error, as the transport
/// allows for a response it does not accept: the client learns its answer went nowhere.
/// Not 404, which tells a client its session is gone.
pub(super) async fn deliver(s: &Shared, session: &SessionState, resp: PeerResponse) -> Response {
    let key = QuestionKey {
        session: session.nonce.clone(),
        request: resp.id.to_text(),
    };
    let answer = match &resp.outcome {
        Ok(result) => Ok(json_text(result)),
        Err(error) => Err(json_text(error)),
    };
    match s
        .app
        .ports()
        .answers
        .deliver(&session.tenant, &key, &answer)
        .await
    {
        Ok(true) => {
            let mut accepted = Response::new(Body::empty());
            *accepted.status_mut() = StatusCode::ACCEPTED;
            accepted
        }
        Ok(false) => reply::protocol(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "no open request with this id in this session",
            "Answer only a request this session received, once, within its wait; send the response with the MCP-Session-Id of the session it came on.",
        ),
        Err(e) => store_down(&e),
    }
}
