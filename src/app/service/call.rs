//! The `tools/call` pipeline, in the contract's order (CONTRACT §3): identity → tool
//! exists → scope → argument schema → confirmation → upstream. The confirmation gate is
//! here, not in handlers, so no tool with destructive or external effects can skip it.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::caller::Caller;
use super::confirmation;
use super::request::{CallError, CallOutcome, ToolCall};
use super::tools::{cuo, long, memory, skill};
use crate::app::App;
use crate::app::telemetry::{CallSpan, Outcome};
use crate::domain::text::clip;
use crate::domain::{CallCtx, DomainError, Principal, Tool};

/// Answers one `tools/call` inside its span.
///
/// # Errors
/// [`CallError`]: refused before the tool, or failed in it.
pub async fn call(
    app: &App,
    caller: &dyn Caller,
    call: ToolCall<'_>,
    span: &CallSpan,
) -> Result<CallOutcome, CallError> {
    let tool = Tool::from_name(call.name);
    span.tool(tool, call.name);
    let principal = match app.principal(caller).await {
        Ok(p) => p,
        Err(e) => {
            span.finish(Outcome::Failed(e.class()));
            return Err(CallError::Refused(e));
        }
    };
    span.tenant(&principal.tenant);
    let Some(tool) = tool else {
        // MCP: an unknown tool is a protocol error, whatever --tool-errors says.
        return Err(CallError::Refused(
            DomainError::invalid(format!("unknown tool: {}", clip(call.name, 128)))
                .with_hint("Call tools/list to see the available tools."),
        ));
    };
    let outcome = run_tool(app, caller, &principal, tool, call, span).await;
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
    outcome.map_err(CallError::Failed)
}

async fn run_tool(
    app: &App,
    caller: &dyn Caller,
    principal: &Principal,
    tool: Tool,
    call: ToolCall<'_>,
    span: &CallSpan,
) -> Result<CallOutcome, DomainError> {
    let trace = span.trace_id();
    let spec = tool.spec();
    if !principal.has(spec.scope) {
        let what = format!("tool '{}'", tool.name());
        return Err(principal.lacks(spec.scope, &what));
    }
    app.registry().validate(tool, call.arguments)?;
    if let Some(how) = confirmation::confirm(app, caller, principal, tool, &call).await? {
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
    let args = call.arguments;
    // The long tools' futures (a task's launch) are boxed: inline, they would set the size
    // of every call's future, also one that waits for the user's answer.
    let output = match tool {
        Tool::ListPersonas => cuo::list_personas(app, &ctx).await,
        Tool::ListWorkflows => cuo::list_workflows(app, &ctx, decode(args)?).await,
        Tool::Route => cuo::route(app, &ctx, decode(args)?).await,
        Tool::ExecuteWorkflow => {
            return Box::pin(long::execute_workflow(
                app,
                caller,
                &ctx,
                call,
                decode(args)?,
            ))
            .await;
        }
        Tool::AppendAudit => memory::append_audit(app, &ctx, decode(args)?).await,
        Tool::ReadAudit => memory::read_audit(app, &ctx, decode(args)?).await,
        Tool::ListSkills => skill::list_skills(app, decode(args)?).await,
        Tool::InvokeSkill => {
            return Box::pin(long::invoke_skill(app, caller, &ctx, call, decode(args)?)).await;
        }
    };
    output.map(CallOutcome::Output)
}

/// Decodes validated arguments into a handler's `Args`.
fn decode<T: DeserializeOwned>(args: &Value) -> Result<T, DomainError> {
    T::deserialize(args).map_err(|e| {
        DomainError::invalid(format!("invalid arguments: {}", clip(&e.to_string(), 200)))
    })
}
