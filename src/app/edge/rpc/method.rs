//! The closed set of methods the bridge serves, each with its params read once, where the
//! frame is parsed (mini-redis's `Command::from_frame` is the model). Dispatchers match
//! variants; no method name is compared as text after this module.

use serde_json::{Map, Value};

use super::error::{INVALID_PARAMS, RpcError};
use super::id::RequestId;
use crate::domain::TraceId;
use crate::domain::confirm::Confirmation;

pub use crate::domain::PROTOCOL_VERSION;

/// RFC 5424 levels used by `logging/setLevel`, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A request's method and its params.
///
/// Params a method cannot use are kept as the error they produce: the dispatcher answers
/// "not initialized" (and, for tasks, checks identity) before it reports them, so the
/// order of answers stays the contract's.
#[derive(Debug)]
pub enum Method {
    /// `initialize`.
    Initialize(InitializeParams),
    /// `ping`.
    Ping,
    /// `logging/setLevel`: the index into [`LOG_LEVELS`].
    SetLevel(Result<u8, BadParams>),
    /// `tools/list` (one page: a cursor is refused).
    ToolsList(Result<(), BadParams>),
    /// `tools/call`.
    ToolsCall(Result<CallParams, BadParams>),
    /// `tasks/get`.
    TasksGet(Result<TaskRef, BadParams>),
    /// `tasks/result`.
    TasksResult(Result<TaskRef, BadParams>),
    /// `tasks/list` with its cursor.
    TasksList(Result<Option<String>, BadParams>),
    /// `tasks/cancel`.
    TasksCancel(Result<TaskRef, BadParams>),
    /// `server/discover`, a newer client's probe: unknown here like any other method, but
    /// HTTP answers it with 400 so the client falls back to `initialize` (CONTRACT §3).
    Discover,
    /// A method the bridge does not serve (the name, shortened).
    Unknown(String),
}

/// Params that do not fit their method: `-32602` with this message and hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadParams {
    /// What is wrong.
    pub message: String,
    /// What to send instead.
    pub hint: &'static str,
}

impl BadParams {
    fn new(message: impl Into<String>, hint: &'static str) -> BadParams {
        BadParams {
            message: message.into(),
            hint,
        }
    }

    /// The protocol error (`invalid params`) that answers the request, in `trace`.
    pub fn to_error(&self, trace: TraceId) -> RpcError {
        RpcError::protocol(INVALID_PARAMS, self.message.clone(), self.hint, trace)
    }
}

/// What `initialize` needs of its params; the version policy is the handler's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitializeParams {
    /// `protocolVersion`, when it is a string.
    pub protocol_version: Option<String>,
    /// Whether the client declared the `elicitation` capability.
    pub elicitation: bool,
    /// `clientInfo.name`, clipped.
    pub client_name: Option<String>,
}

/// The task a `tasks/get|result|cancel` names: the spec's `{taskId}` or the seed's `{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// The id as sent (parsed by the handler, so a malformed one is "not found").
    pub id: String,
    /// Whether the seed's shape (`{id}`) was used, which answers in the seed's shape.
    pub seed_shape: bool,
    /// `params._meta.progressToken` (a string or a number): a waiting `tasks/result`
    /// streams the task's progress with it.
    pub progress_token: Option<Value>,
}

/// `tools/call` params after the envelope checks.
#[derive(Debug, Clone, PartialEq)]
pub struct CallParams {
    /// The tool name as sent.
    pub name: String,
    /// The arguments (an object).
    pub arguments: Value,
    /// `params._meta`.
    pub meta: Map<String, Value>,
    /// The seed's top-level `"mcp/sampling/elicit_confirm"` flag.
    pub seed_confirm: bool,
    /// `params.task`, when the client asked for a task.
    pub task: Option<Map<String, Value>>,
}

impl Method {
    /// Reads `name` and its `params`; `meta` is `params._meta` (already taken out).
    pub fn parse(name: &str, params: &Value, meta: Map<String, Value>) -> Method {
        match name {
            "initialize" => Method::Initialize(InitializeParams {
                protocol_version: params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                elicitation: params
                    .pointer("/capabilities/elicitation")
                    .is_some_and(Value::is_object),
                client_name: params
                    .pointer("/clientInfo/name")
                    .and_then(Value::as_str)
                    .map(|n| crate::domain::text::clip(n, 128).into_owned()),
            }),
            "ping" => Method::Ping,
            "logging/setLevel" => Method::SetLevel(level(params)),
            "tools/list" => Method::ToolsList(match params.get("cursor") {
                Some(c) if !c.is_null() => Err(BadParams::new(
                    "invalid cursor",
                    "tools/list has a single page; call it without a cursor.",
                )),
                _ => Ok(()),
            }),
            "tools/call" => Method::ToolsCall(CallParams::parse(params, meta)),
            "tasks/get" => Method::TasksGet(TaskRef::parse("tasks/get", params)),
            "tasks/result" => Method::TasksResult(TaskRef::parse("tasks/result", params)),
            "tasks/cancel" => Method::TasksCancel(TaskRef::parse("tasks/cancel", params)),
            "tasks/list" => Method::TasksList(match params.get("cursor") {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(c)) => Ok(Some(c.clone())),
                Some(_) => Err(BadParams::new(
                    "invalid cursor",
                    "Pass nextCursor unchanged.",
                )),
            }),
            "server/discover" => Method::Discover,
            other => Method::Unknown(crate::domain::text::clip(other, 64).into_owned()),
        }
    }

    /// The method name, for logs.
    pub fn name(&self) -> &str {
        match self {
            Method::Unknown(name) => name,
            known => known.known_name().unwrap_or_default(),
        }
    }

    /// The name of a method this bridge knows (`None` for an unknown one, whose name is
    /// the client's text).
    pub fn known_name(&self) -> Option<&'static str> {
        Some(match self {
            Method::Initialize(_) => "initialize",
            Method::Ping => "ping",
            Method::SetLevel(_) => "logging/setLevel",
            Method::ToolsList(_) => "tools/list",
            Method::ToolsCall(_) => "tools/call",
            Method::TasksGet(_) => "tasks/get",
            Method::TasksResult(_) => "tasks/result",
            Method::TasksList(_) => "tasks/list",
            Method::TasksCancel(_) => "tasks/cancel",
            Method::Discover => "server/discover",
            Method::Unknown(_) => return None,
        })
    }
}

fn level(params: &Value) -> Result<u8, BadParams> {
    let level = params.get("level").and_then(Value::as_str);
    match level.and_then(|l| LOG_LEVELS.iter().position(|x| *x == l)) {
        Some(index) => Ok(index as u8),
        None => Err(BadParams::new(
            "invalid log level",
            "Use one of debug, info, notice, warning, error, critical, alert, emergency.",
        )),
    }
}

impl TaskRef {
    fn parse(method: &str, params: &Value) -> Result<TaskRef, BadParams> {
        let progress_token = params
            .pointer("/_meta/progressToken")
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        match (params.get("taskId"), params.get("id")) {
            (Some(Value::String(id)), _) => Ok(TaskRef {
                id: id.clone(),
                seed_shape: false,
                progress_token,
            }),
            (None, Some(Value::String(id))) => Ok(TaskRef {
                id: id.clone(),
                seed_shape: true,
                progress_token,
            }),
            _ => Err(BadParams::new(
                format!("{method} needs params.taskId, a string"),
                "Pass the taskId returned when the task was created.",
            )),
        }
    }
}

/// The members of `tools/call` params the bridge reads, each as sent (`None` when absent).
#[derive(Debug, Default)]
pub(super) struct CallMembers {
    pub(super) name: Option<Value>,
    pub(super) arguments: Option<Value>,
    pub(super) task: Option<Value>,
    /// The seed's top-level `"mcp/sampling/elicit_confirm"`.
    pub(super) seed_confirm: Option<Value>,
}

impl CallParams {
    /// The hint for any malformed `tools/call` params.
    const HINT: &'static str = "Send {\"name\": \"<tool>\", \"arguments\": {...}}.";

    fn parse(params: &Value, meta: Map<String, Value>) -> Result<CallParams, BadParams> {
        let Value::Object(p) = params else {
            return Err(BadParams::new(
                "tools/call params must be an object",
                Self::HINT,
            ));
        };
        let member = |key: &str| p.get(key).cloned();
        CallParams::from_members(
            CallMembers {
                name: member("name"),
                arguments: member("arguments"),
                task: member("task"),
                seed_confirm: member("mcp/sampling/elicit_confirm"),
            },
            meta,
        )
    }

    /// The params from their members (each as sent, `null` included), by the one set of
    /// rules both frame readers share.
    pub(super) fn from_members(
        members: CallMembers,
        meta: Map<String, Value>,
    ) -> Result<CallParams, BadParams> {
        let bad = |m: &str| BadParams::new(m, CallParams::HINT);
        let Some(Value::String(name)) = members.name else {
            return Err(bad("tools/call needs params.name, a string"));
        };
        let arguments = match members.arguments {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(bad("tools/call params.arguments must be an object")),
        };
        let task = match members.task {
            None | Some(Value::Null) => None,
            Some(Value::Object(t)) => Some(t),
            Some(_) => return Err(bad("tools/call params.task must be an object")),
        };
        Ok(CallParams {
            name,
            arguments,
            meta,
            seed_confirm: members.seed_confirm == Some(Value::Bool(true)),
            task,
        })
    }

    /// The client's `progressToken`, when it is one (a string or a number).
    pub fn progress_token(&self) -> Option<&Value> {
        self.meta
            .get("progressToken")
            .filter(|t| t.is_string() || t.is_number())
    }

    /// The task retention the client asked for (`params.task.ttl`, ms).
    pub fn requested_ttl(&self) -> Option<i64> {
        self.task.as_ref()?.get("ttl")?.as_i64()
    }

    /// The confirmation the host sent with the call, if any.
    pub fn confirmation(&self) -> Option<Confirmation> {
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

    /// The single-use confirmation token sent in `_meta`, if any.
    pub fn confirmation_token(&self) -> Option<&str> {
        self.meta
            .get("com.cyberos/confirmation_token")
            .and_then(Value::as_str)
    }
}

/// A notification from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// `notifications/initialized`: nothing to do.
    Initialized,
    /// `notifications/cancelled` for this request id (if it named one we can read).
    Cancelled(Option<RequestId>),
    /// Anything else: ignored, as MCP asks.
    Other,
}

impl Notice {
    /// Reads a notification's method and params.
    pub fn parse(name: &str, params: &Value) -> Notice {
        match name {
            "notifications/initialized" => Notice::Initialized,
            "notifications/cancelled" => {
                Notice::Cancelled(params.get("requestId").and_then(RequestId::from_value))
            }
            _ => Notice::Other,
        }
    }
}

#[cfg(test)]
mod tests;
