//! The `tools/list` result: the catalogue as MCP lists it, serialized once per spelling of
//! tool names.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use crate::app::service::tools::registry::schema_value;
use crate::domain::{TaskSupport, Tool, ToolNaming, ToolSpec, respell};

/// The `tools/list` result naming tools, in names and texts alike, as `naming` spells them,
/// and telling how a plain call of a long tool ends on the connection it is sent on
/// (`plain_calls_wait`: the result when the run ends, else a task handle at once).
pub fn tools_list(naming: ToolNaming, plain_calls_wait: bool) -> Arc<str> {
    static LISTINGS: [OnceLock<Arc<str>>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let slot = &LISTINGS
        [usize::from(naming == ToolNaming::Underscore) * 2 + usize::from(plain_calls_wait)];
    Arc::clone(slot.get_or_init(|| {
        let canonical = json!({
            "tools": Tool::ALL.iter().map(|t| tool_json(t.spec(), plain_calls_wait)).collect::<Vec<_>>()
        });
        respell(&canonical.to_string(), naming).into()
    }))
}

/// How a plain call of a long tool ends, in the words a model can act on.
fn long_running(plain_calls_wait: bool) -> &'static str {
    if plain_calls_wait {
        " A plain call returns that result when the run ends (send a progress token to follow \
         it); with params.task it runs as an MCP task."
    } else {
        " A plain call returns a task handle {task_id, status} at once: poll it with tasks/get, \
         then fetch the result with tasks/result; with params.task it runs as an MCP task."
    }
}

fn tool_json(spec: &ToolSpec, plain_calls_wait: bool) -> Value {
    let description = if spec.task_support == TaskSupport::Optional {
        format!("{}{}", spec.description, long_running(plain_calls_wait))
    } else {
        spec.description.to_owned()
    };
    let e = spec.effects;
    let mut tool = json!({
        "name": spec.name.as_str(),
        "title": spec.title,
        "description": description,
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
