//! The wire types of `docs/cuo-protocol.md`: the call context and deadlines sent to a
//! child, the results it answers, and its progress notifications.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::cuo::{Artifact, Persona, Progress, Route, Workflow, WorkflowOutcome};
use crate::domain::{CallCtx, DomainError, JsonText, Upstream};

/// The `ctx` every request carries.
pub(super) fn ctx_json(ctx: &CallCtx) -> Value {
    let mut v = json!({"tenant_id": ctx.tenant.to_string(), "actor_id": &*ctx.actor, "traceparent": ctx.traceparent()});
    if let Some(state) = &ctx.tracestate {
        v["tracestate"] = Value::from(&**state);
    }
    v
}

fn malformed(method: &str, e: impl std::fmt::Display) -> DomainError {
    DomainError::unavailable(
        Upstream::Cuo,
        Some(format!("{method} answered a malformed result: {e}").into()),
    )
}

#[derive(Deserialize)]
struct PersonasDto {
    personas: Vec<PersonaDto>,
}

#[derive(Deserialize)]
struct PersonaDto {
    id: String,
    title: String,
    short_name: String,
    description: String,
    workflows: Vec<String>,
}

#[derive(Deserialize)]
struct WorkflowsDto {
    workflows: Vec<WorkflowDto>,
}

#[derive(Deserialize)]
struct WorkflowDto {
    persona: String,
    id: String,
    title: String,
    description: String,
    input_schema: serde_json::Map<String, Value>,
    typical_duration_s: u64,
}

#[derive(Deserialize)]
struct RouteDto {
    persona: String,
    workflow: String,
    confidence: f64,
    alternates: Vec<String>,
}

#[derive(Deserialize)]
struct OutcomeDto {
    steps_executed: u64,
    final_artifacts: Vec<ArtifactDto>,
}

#[derive(Deserialize)]
struct ArtifactDto {
    name: String,
    media_type: String,
    content: String,
}

#[derive(Deserialize)]
struct SkillOutcomeDto {
    output: Value,
    artifacts: Vec<Value>,
}

fn decode<T: serde::de::DeserializeOwned>(method: &str, v: Value) -> Result<T, DomainError> {
    T::deserialize(v).map_err(|e| malformed(method, e))
}

/// The progress a `progress` notification reports, if it is one.
pub(super) fn progress_of(event: &Value) -> Option<Progress> {
    if event.get("method").and_then(Value::as_str) != Some("progress") {
        return None;
    }
    let p = event.get("params")?;
    Some(Progress {
        step: p.get("step").and_then(Value::as_u64)?,
        total: p.get("total").and_then(Value::as_u64),
        message: p
            .get("message")
            .and_then(Value::as_str)
            .map(|m| crate::domain::text::clip(m, 500).into_owned()),
    })
}

/// The `personas.list` result.
pub(super) fn personas(v: Value) -> Result<Vec<Persona>, DomainError> {
    let dto: PersonasDto = decode("personas.list", v)?;
    Ok(dto
        .personas
        .into_iter()
        .map(|p| Persona {
            id: p.id,
            title: p.title,
            short_name: p.short_name,
            description: p.description,
            workflows: p.workflows,
        })
        .collect())
}

/// The `workflows.list` result.
pub(super) fn workflows(v: Value) -> Result<Vec<Workflow>, DomainError> {
    let dto: WorkflowsDto = decode("workflows.list", v)?;
    Ok(dto
        .workflows
        .into_iter()
        .map(|w| Workflow {
            persona: w.persona,
            id: w.id,
            title: w.title,
            description: w.description,
            input_schema: JsonText::from_serialized(Value::Object(w.input_schema).to_string()),
            typical_duration_s: w.typical_duration_s,
        })
        .collect())
}

/// The `route` result.
pub(super) fn route(v: Value) -> Result<Route, DomainError> {
    let dto: RouteDto = decode("route", v)?;
    if !(0.0..=1.0).contains(&dto.confidence) {
        return Err(malformed("route", "confidence outside [0, 1]"));
    }
    Ok(Route {
        persona: dto.persona,
        workflow: dto.workflow,
        confidence: dto.confidence,
        alternates: dto.alternates,
    })
}

/// The `workflow.execute` result.
pub(super) fn workflow_outcome(v: Value) -> Result<WorkflowOutcome, DomainError> {
    let dto: OutcomeDto = decode("workflow.execute", v)?;
    Ok(WorkflowOutcome {
        steps_executed: dto.steps_executed,
        final_artifacts: dto
            .final_artifacts
            .into_iter()
            .map(|a| Artifact {
                name: a.name,
                media_type: a.media_type,
                content: a.content,
            })
            .collect(),
    })
}

/// The `skill.invoke` result, as the tool answers it.
pub(super) fn skill_outcome(v: Value) -> Result<JsonText, DomainError> {
    let dto: SkillOutcomeDto = decode("skill.invoke", v)?;
    let out = json!({"output": dto.output, "artifacts": dto.artifacts});
    Ok(JsonText::from_serialized(out.to_string()))
}
