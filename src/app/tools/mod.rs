//! The tool registry and the `tools/call` pipeline.
//!
//! Every call goes through the same checks in the contract's order (CONTRACT §3): identity
//! → tool exists → scope → argument schema → confirmation → upstream. The confirmation
//! gate is here, not in handlers, so no tool with destructive or external effects can
//! skip it.

pub mod confirmation;
mod cuo;
pub(crate) mod long;
mod memory;
mod skill;

use std::time::Instant;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::app::rpc::{INVALID_PARAMS, RpcError};
use crate::app::server::truncate;
use crate::app::session::Session;
use crate::app::telemetry::{CallSpan, Outcome};
use crate::app::{App, ToolErrors};
use crate::domain::confirm::Confirmation;
use crate::domain::{
    CallCtx, DomainError, ErrorClass, JsonText, Principal, Timestamp, Tool, ToolSpec,
};

/// The compiled tool catalogue: one argument validator per tool, built once, and the
/// `tools/list` result.
pub struct Registry {
    validators: Vec<jsonschema::Validator>,
    listing: Value,
    listing_text: std::sync::Arc<str>,
}

impl Registry {
    /// Compiles every schema. Remote `$ref` resolution is compiled out of `jsonschema`
    /// (no default features), so a schema can never make the bridge fetch anything.
    pub fn build() -> Registry {
        let validators = Tool::ALL
            .iter()
            .map(|tool| {
                let schema = schema_value(tool.spec().input_schema);
                jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .should_validate_formats(true)
                    .build(&schema)
                    .expect("every bundled input schema compiles")
            })
            .collect();
        let listing =
            json!({ "tools": Tool::ALL.iter().map(|t| tool_json(t.spec())).collect::<Vec<_>>() });
        let listing_text = listing.to_string().into();
        Registry {
            validators,
            listing,
            listing_text,
        }
    }

    /// The `tools/list` result.
    pub fn listing(&self) -> &Value {
        &self.listing
    }

    /// The `tools/list` result, serialized once.
    pub fn listing_text(&self) -> std::sync::Arc<str> {
        std::sync::Arc::clone(&self.listing_text)
    }

    /// Checks arguments against the tool's schema; the first violation is reported with
    /// the JSON pointer of the field at fault.
    fn validate(&self, tool: Tool, args: &Value) -> Result<(), DomainError> {
        let index = Tool::ALL
            .iter()
            .position(|t| *t == tool)
            .expect("every tool is in Tool::ALL");
        let Some(error) = self.validators[index].iter_errors(args).next() else {
            return Ok(());
        };
        let path = error.instance_path().as_str().to_owned();
        let (message, pointer) = match error.kind() {
            jsonschema::error::ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                (
                    format!("missing required argument '{}'", truncate(name, 64)),
                    format!("{path}/{}", escape(name)),
                )
            }
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                let name = unexpected.first().map(String::as_str).unwrap_or_default();
                (
                    format!("unknown argument '{}'", truncate(name, 64)),
                    format!("{path}/{}", escape(name)),
                )
            }
            _ => {
                let detail = error.to_string();
                let at = if path.is_empty() {
                    "the arguments"
                } else {
                    path.as_str()
                };
                (
                    format!(
                        "invalid value at {}: {}",
                        truncate(at, 128),
                        truncate(&detail, 200)
                    ),
                    path.clone(),
                )
            }
        };
        let hint = format!(
            "Fix {} to match the input schema of {} (see tools/list).",
            if pointer.is_empty() {
                "the arguments".to_owned()
            } else {
                format!("the argument at {pointer}")
            },
            tool.name()
        );
        Err(DomainError::invalid_at(message, pointer).with_hint(hint))
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn schema_value(text: &str) -> Value {
    serde_json::from_str(text).expect("bundled schemas are valid JSON")
}

fn tool_json(spec: &ToolSpec) -> Value {
    let e = spec.effects;
    let mut tool = json!({
        "name": spec.name.as_str(),
        "title": spec.title,
        "description": spec.description,
        "inputSchema": schema_value(spec.input_schema),
        "annotations": {
            "title": spec.title,
            "readOnlyHint": e.read_only(),
            "destructiveHint": e.destructive,
            "idempotentHint": e.idempotent,
            "openWorldHint": e.open_world,
            // The seed's keys, derived from the same effects value.
            "destructive": e.destructive,
            "write": e.write,
            "external_effect": e.external_effect
        },
        "execution": {"taskSupport": spec.task_support.as_str()},
        "_meta": {"com.cyberos/required_scope": spec.scope.as_str()}
    });
    if let Some(out) = spec.output_schema {
        tool["outputSchema"] = schema_value(out);
    }
    tool
}

/// `tools/call` params after the envelope checks.
pub(crate) struct CallParams {
    pub name: String,
    pub arguments: Value,
    pub meta: Map<String, Value>,
    /// The seed's top-level `"mcp/sampling/elicit_confirm"` flag.
    pub seed_confirm: bool,
    /// `params.task`, when the client asked for a task.
    pub task: Option<Map<String, Value>>,
}

impl CallParams {
    fn parse(params: &Value) -> Result<CallParams, &'static str> {
        let Value::Object(p) = params else {
            return Err("tools/call params must be an object");
        };
        let Some(Value::String(name)) = p.get("name") else {
            return Err("tools/call needs params.name, a string");
        };
        let arguments = match p.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err("tools/call params.arguments must be an object"),
        };
        let task = match p.get("task") {
            None | Some(Value::Null) => None,
            Some(Value::Object(t)) => Some(t.clone()),
            Some(_) => return Err("tools/call params.task must be an object"),
        };
        // Liberal in: a non-object `_meta` is ignored rather than refused.
        let meta = p
            .get("_meta")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let seed_confirm = p.get("mcp/sampling/elicit_confirm") == Some(&Value::Bool(true));
        Ok(CallParams {
            name: name.clone(),
            arguments,
            meta,
            seed_confirm,
            task,
        })
    }

    /// The confirmation the host sent, if any (tokens and elicitation arrive with #4).
    fn confirmation(&self) -> Option<Confirmation> {
        if self.meta.get("com.cyberos/confirmed") == Some(&Value::Bool(true)) {
            Some(Confirmation::HostMeta)
        } else if self.seed_confirm
            || self.meta.get("mcp/sampling/elicit_confirm") == Some(&Value::Bool(true))
        {
            Some(Confirmation::SeedFlag)
        } else {
            None
        }
    }
}

impl App {
    pub(crate) async fn tools_call(
        &self,
        session: &Session,
        params: &Value,
        span: &CallSpan,
    ) -> Result<Value, RpcError> {
        let trace = span.trace_id();
        let call = CallParams::parse(params).map_err(|m| {
            RpcError::protocol(
                INVALID_PARAMS,
                m,
                "Send {\"name\": \"<tool>\", \"arguments\": {...}}.",
                trace,
            )
        })?;
        span.tool(&call.name);
        let principal = match self.principal(session).await {
            Ok(p) => p,
            Err(e) => {
                span.finish(Outcome::Failed(e.class()));
                return Err(self.domain_failure(&e, trace));
            }
        };
        span.tenant(&principal.tenant);
        let Some(tool) = Tool::from_name(&call.name) else {
            // MCP: an unknown tool is a protocol error, whatever --tool-errors says.
            return Err(RpcError::protocol(
                INVALID_PARAMS,
                format!("unknown tool: {}", truncate(&call.name, 128)),
                "Call tools/list to see the available tools.",
                trace,
            ));
        };
        let started = Instant::now();
        let outcome = self.run_tool(session, &principal, tool, &call, span).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let result = outcome
            .as_ref()
            .map_or_else(|e| Outcome::Failed(e.class()), |_| Outcome::Success);
        span.finish(result);
        tracing::info!(tool = tool.name(), tenant = %principal.tenant, outcome = result.as_str(), duration_ms, "tool call");
        match outcome {
            Ok(result) => Ok(result),
            Err(err) => {
                let as_result = self.settings().tool_errors == ToolErrors::Result
                    && matches!(
                        err.class(),
                        ErrorClass::InputValidation | ErrorClass::UpstreamUnavailable
                    );
                let wire = self.domain_failure(&err, trace);
                if as_result {
                    Ok(error_result(&wire))
                } else {
                    Err(wire)
                }
            }
        }
    }

    async fn run_tool(
        &self,
        session: &Session,
        principal: &Principal,
        tool: Tool,
        call: &CallParams,
        span: &CallSpan,
    ) -> Result<Value, DomainError> {
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
        self.registry().validate(tool, &call.arguments)?;
        if let Some(how) = self.confirmation(session, principal, tool, call).await? {
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
            Tool::ListPersonas => cuo::list_personas(self, &ctx).await,
            Tool::ListWorkflows => cuo::list_workflows(self, &ctx, decode(args)?).await,
            Tool::Route => cuo::route(self, &ctx, decode(args)?).await,
            Tool::ExecuteWorkflow => {
                long::execute_workflow(self, session, &ctx, call, decode(args)?).await
            }
            Tool::AppendAudit => memory::append_audit(self, &ctx, decode(args)?).await,
            Tool::ReadAudit => memory::read_audit(self, &ctx, decode(args)?).await,
            Tool::ListSkills => skill::list_skills(self, decode(args)?).await,
            Tool::InvokeSkill => long::invoke_skill(self, session, &ctx, call, decode(args)?).await,
        }
    }
}

/// Decodes validated arguments into a handler's `Args`.
fn decode<T: DeserializeOwned>(args: &Value) -> Result<T, DomainError> {
    T::deserialize(args).map_err(|e| {
        DomainError::invalid(format!(
            "invalid arguments: {}",
            truncate(&e.to_string(), 200)
        ))
    })
}

/// A successful `CallToolResult` whose `structuredContent` is `value`, with the same JSON
/// as text for clients that read only `content`.
pub(crate) fn structured(value: Value) -> Value {
    let text = value.to_string();
    json!({ "content": [{"type": "text", "text": text}], "structuredContent": value, "isError": false })
}

/// `--tool-errors result`: the envelope's data as `structuredContent`, the message as text.
fn error_result(err: &RpcError) -> Value {
    json!({
        "content": [{"type": "text", "text": err.message}],
        "structuredContent": Value::Object(err.data.clone()),
        "isError": true
    })
}

/// RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(ts: Timestamp) -> String {
    chrono::DateTime::from_timestamp_millis(ts.unix_millis())
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A JSON document produced by an adapter, back as a value.
pub(crate) fn json_value(text: &JsonText) -> Result<Value, DomainError> {
    serde_json::from_str(text.as_str())
        .map_err(|e| DomainError::internal("an upstream document is not JSON", Some(e.into())))
}

/// A value as opaque JSON text for a port.
pub(crate) fn json_text(value: &Value) -> JsonText {
    JsonText::from_serialized(value.to_string())
}
