//! 401 for a request whose bearer token is missing or refused (POST, GET, DELETE alike):
//! logged once (rate-limited by the identity), counted, and answered with the RFC 9728
//! challenge and the envelope of why.

use axum::http::StatusCode;
use axum::response::Response;

use super::reply;
use super::shared::Shared;
use crate::app::edge::rpc::{Method, Request as RpcRequest, RequestId, RpcError};
use crate::app::telemetry::{self, CallSpan, Outcome};
use crate::domain::{DomainError, Tool};

/// 401 with the RFC 9728 challenge and the envelope of why. A refused `tools/call` still
/// gets its span (tenant `unknown`, outcome `authz_denied`).
pub(super) fn refuse(
    s: &Shared,
    presented: bool,
    err: &DomainError,
    id: Option<&RequestId>,
    req: Option<&RpcRequest>,
    parent: Option<telemetry::Parent>,
) -> Response {
    let call = req.and_then(|r| match &r.method {
        Method::ToolsCall(params) => {
            let call = CallSpan::start(parent.as_ref(), || r.id.to_text(), "tcp", None);
            if let Ok(params) = params {
                call.tool(Tool::from_name(&params.name), &params.name);
            }
            Some(call)
        }
        _ => None,
    });
    let trace = telemetry::request_trace_id(call.as_ref(), parent.as_ref());
    {
        let _in = call.as_ref().map(|c| c.span().enter());
        s.app.identity().log_refusal(err, trace);
    }
    telemetry::refused(telemetry::Refusal::Auth, None);
    let rpc = RpcError::from_domain(err, trace);
    if let Some(call) = &call {
        call.finish(Outcome::Failed(err.class()));
    }
    let resp = reply::rpc_error(StatusCode::UNAUTHORIZED, id, &rpc);
    if presented {
        reply::challenge(resp, &format!("{}, error=\"invalid_token\"", s.challenge))
    } else {
        reply::challenge(resp, &s.challenge)
    }
}
