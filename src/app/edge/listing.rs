//! The `tools/list` result: the catalogue as MCP lists it, serialized once per spelling of
//! tool names.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use crate::app::service::tools::registry::schema_value;
use crate::domain::{Tool, ToolNaming, ToolSpec, respell};

/// The `tools/list` result naming tools, in names and texts alike, as `naming` spells them.
pub fn tools_list(naming: ToolNaming) -> Arc<str> {
    static LISTINGS: [OnceLock<Arc<str>>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = match naming {
        ToolNaming::Dotted => &LISTINGS[0],
        ToolNaming::Underscore => &LISTINGS[1],
    };
    Arc::clone(slot.get_or_init(|| {
        let canonical = json!({
            "tools": Tool::ALL.iter().map(|t| tool_json(t.spec())).collect::<Vec<_>>()
        });
        respell(&canonical.to_string(), naming).into()
    }))
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
