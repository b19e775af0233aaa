//! Handlers of the four `cyberos.cuo.*` tools.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::app::service::output::{ToolOutput, json_value, structured};
use crate::domain::{CallCtx, DomainError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::app::service) struct ListWorkflowsArgs {
    persona: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::app::service) struct RouteArgs {
    query: String,
    limit: Option<u8>,
}

pub(in crate::app::service) async fn list_personas(
    app: &App,
    ctx: &CallCtx,
) -> Result<ToolOutput, DomainError> {
    let personas = app.ports().cuo.list_personas(ctx).await?;
    let personas: Vec<Value> = personas
        .into_iter()
        .map(|p| {
            json!({
                "id": p.id, "title": p.title, "short_name": p.short_name,
                "description": p.description, "workflows": p.workflows
            })
        })
        .collect();
    structured(&json!({ "personas": personas }))
}

pub(in crate::app::service) async fn list_workflows(
    app: &App,
    ctx: &CallCtx,
    args: ListWorkflowsArgs,
) -> Result<ToolOutput, DomainError> {
    let workflows = app
        .ports()
        .cuo
        .list_workflows(ctx, args.persona.as_deref())
        .await?;
    let workflows = workflows
        .into_iter()
        .map(|w| {
            Ok(json!({
                "persona": w.persona, "id": w.id, "title": w.title, "description": w.description,
                "input_schema": json_value(&w.input_schema)?, "typical_duration_s": w.typical_duration_s
            }))
        })
        .collect::<Result<Vec<Value>, DomainError>>()?;
    structured(&json!({ "workflows": workflows }))
}

pub(in crate::app::service) async fn route(
    app: &App,
    ctx: &CallCtx,
    args: RouteArgs,
) -> Result<ToolOutput, DomainError> {
    let route = app
        .ports()
        .cuo
        .route(ctx, &args.query, args.limit.unwrap_or(3))
        .await?;
    structured(&json!({
        "persona": route.persona, "workflow": route.workflow,
        "confidence": route.confidence, "alternates": route.alternates
    }))
}
