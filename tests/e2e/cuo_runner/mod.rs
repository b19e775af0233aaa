//! The bundled reference CUO runner (`cyberos-mcp-bridge cuo-runner`) driven over its real
//! stdin/stdout, as the bridge's CUO adapter and the Python supervisor's clients see it:
//! the catalogue (`catalogue`), workflow runs and pacing (`execute`), protocol errors
//! (`protocol`) and skills (`skills`). The harness is `support::cuo_runner`.

mod catalogue;
mod execute;
mod protocol;
mod skills;

use serde_json::{Value, json};

pub(crate) fn ctx() -> Value {
    json!({"tenant_id": "t-1", "actor_id": "a-1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
}

/// `params` with `ctx` added.
pub(crate) fn with_ctx(mut params: Value) -> Value {
    params["ctx"] = ctx();
    params
}

pub(crate) fn rfc3339_in(offset: chrono::TimeDelta) -> String {
    (chrono::Utc::now() + offset).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(crate) fn far_deadline() -> String {
    rfc3339_in(chrono::TimeDelta::minutes(10))
}

pub(crate) fn adr_params(inputs: Value, deadline: &str) -> Value {
    with_ctx(json!({
        "persona": "chief-technology-officer", "workflow": "adr-quick-capture",
        "inputs": inputs, "deadline": deadline
    }))
}
