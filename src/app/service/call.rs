//! The `tools/call` pipeline, in the contract's order (CONTRACT §3): identity → tool
//! exists → scope → argument schema → confirmation → upstream. The confirmation gate is
//! here, not in handlers, so no tool with destructive or external effects can skip it.

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::confirmation;
use super::tools::{cuo, long, memory, skill};
use crate::app::edge::rpc::{BadParams, CallParams, INVALID_PARAMS, Reply, RpcError};
use crate::app::edge::session::Session;
use crate::app::telemetry::{CallSpan, Outcome};
use crate::app::{App, ToolErrors};
use crate::domain::text::clip;
use crate::domain::{CallCtx, DomainError, ErrorClass, Principal, Tool, TraceId};

/// Answers one `tools/call` inside its span.
pub async fn call(
    app: &App,
    session: &Session,
    params: &Result<CallParams, BadParams>,
    span: &CallSpan,
) -> Result<Reply, RpcError> {
    let trace = span.trace_id();
    let call = params
        .as_ref()
        .map_err(|e| RpcError::protocol(INVALID_PARAMS, e.message.clone(), e.hint, trace))?;
    let tool = Tool::from_name(&call.name);
    span.tool(tool, &call.name);
    let principal = match app.principal(session).await {
        Ok(p) => p,
        Err(e) => {
            span.finish(Outcome::Failed(e.class()));
            return Err(RpcError::logged(&e, trace));
        }
    };
    span.tenant(&principal.tenant);
    let Some(tool) = tool else {
        // MCP: an unknown tool is a protocol error, whatever --tool-errors says.
        return Err(RpcError::protocol(
            INVALID_PARAMS,
            format!("unknown tool: {}", clip(&call.name, 128)),
            "Call tools/list to see the available tools.",
            trace,
        ));
    };
    let outcome = run_tool(app, session, &principal, tool, call, span).await;
    let result = outcome
        .as_ref()
        .map_or_else(|e| Outcome::Failed(e.class()), |_| Outcome::Success);
    // The call's duration, as its span records it.
    let duration_ms = span
        .finish(result)
        .map_or(0, |took| took.as_millis() as u64);
    // The tenant is the span's (`cyberos.tenant_id`), printed with it. Display, not
    // Debug: a `&str` field is Debug-escaped for the log line otherwise.
    tracing::info!(tool = %tool.name(), outcome = %result.as_str(), duration_ms, "tool call");
    outcome.or_else(|err| tool_failure(app, &err, trace).map(Reply::Json))
}

/// How a `tools/call` answers its tool's error: a `CallToolResult` with `isError` under
/// `--tool-errors result` for the classes a model can act on, else a JSON-RPC error.
/// Also what a resumed stream of a waiting call ends with.
pub fn tool_failure(app: &App, err: &DomainError, trace: TraceId) -> Result<Value, RpcError> {
    let as_result = app.settings().tool_errors == ToolErrors::Result
        && matches!(
            err.class(),
            ErrorClass::InputValidation | ErrorClass::UpstreamUnavailable
        );
    let mut wire = RpcError::logged(err, trace);
    if as_result {
        // An error sent as JSON-RPC is respelled where every error frame is built.
        wire.respell(app.settings().tool_names);
        Ok(error_result(&wire))
    } else {
        Err(wire)
    }
}

async fn run_tool(
    app: &App,
    session: &Session,
    principal: &Principal,
    tool: Tool,
    call: &CallParams,
    span: &CallSpan,
) -> Result<Reply, DomainError> {
    let trace = span.trace_id();
    let spec = tool.spec();
    if !principal.has(spec.scope) {
        let scope = spec.scope.as_str();
        return Err(DomainError::AuthzDenied {
            message: format!(
                "tool '{}' requires scope '{scope}' which is not in your token",
                tool.name()
            ),
            hint: format!(
                "Re-authorise the plugin with the '{scope}' scope, or have an admin grant it."
            ),
            missing_scopes: vec![scope.to_owned()],
        });
    }
    app.registry().validate(tool, &call.arguments)?;
    if let Some(how) = confirmation::confirm(app, session, principal, tool, call).await? {
        tracing::info!(tool = tool.name(), confirmed_by = how.as_str(), trace_id = %trace, "call confirmed");
    }
    let ctx = CallCtx {
        tenant: principal.tenant,
        actor: principal.actor.clone(),
        trace_id: trace,
        span_id: span.span_id(),
        sampled: span.sampled(),
        tracestate: span.tracestate(),
    };
    let args = &call.arguments;
    match tool {
        Tool::ListPersonas => cuo::list_personas(app, &ctx).await,
        Tool::ListWorkflows => cuo::list_workflows(app, &ctx, decode(args)?).await,
        Tool::Route => cuo::route(app, &ctx, decode(args)?).await,
        Tool::ExecuteWorkflow => {
            long::execute_workflow(app, session, &ctx, call, decode(args)?).await
        }
        Tool::AppendAudit => memory::append_audit(app, &ctx, decode(args)?).await,
        Tool::ReadAudit => memory::read_audit(app, &ctx, decode(args)?).await,
        Tool::ListSkills => skill::list_skills(app, decode(args)?).await,
        Tool::InvokeSkill => long::invoke_skill(app, session, &ctx, call, decode(args)?).await,
    }
}

/// Decodes validated arguments into a handler's `Args`.
fn decode<T: DeserializeOwned>(args: &Value) -> Result<T, DomainError> {
    T::deserialize(args).map_err(|e| {
        DomainError::invalid(format!("invalid arguments: {}", clip(&e.to_string(), 200)))
    })
}

/// `--tool-errors result`: the envelope's data as `structuredContent`, the message as text.
fn error_result(err: &RpcError) -> Value {
    json!({
        "content": [{"type": "text", "text": err.text()}],
        "structuredContent": Value::Object(err.data()),
        "isError": true
    })
}
