//! Method dispatch and the catalogue queries: `personas.list`, `workflows.list` and
//! `route`. Runs (`workflow.execute`, `skill.invoke`) live in their own files.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::AsyncWrite;
use tokio_util::sync::CancellationToken;

use super::bm25::{self, Index};
use super::catalog::Catalog;
use super::protocol::{self, ECHO_MAX, Failure, METHOD_NOT_FOUND, Out, RpcError, clip};
use super::{execute, skill};

/// Weight of persona-level fields (title, short name, keywords) relative to the
/// workflow's own: they are shared by all of a persona's workflows, so they should tip a
/// close call rather than decide it.
const PERSONA_WEIGHT: f64 = 0.4;
/// `route` limit when the request gives none.
const DEFAULT_LIMIT: u64 = 3;
/// Largest `route` limit.
const MAX_LIMIT: u64 = 10;

/// The runner's state: the catalogue and its routing index.
pub struct Runner {
    catalog: Catalog,
    /// Built by the first `route`: a run's child (one workflow or skill, then exit) never
    /// routes, so it never pays for the index.
    index: OnceLock<Routes>,
    pace: Duration,
}

/// The routing index and, per index document, its (persona index, workflow index).
struct Routes {
    index: Index,
    pairs: Vec<(usize, usize)>,
}

impl Runner {
    /// A runner of `catalog`; `pace` is slept before each workflow step.
    pub fn new(catalog: Catalog, pace: Duration) -> Runner {
        Runner {
            index: OnceLock::new(),
            catalog,
            pace,
        }
    }

    /// The routing index: one document per (persona, workflow).
    fn routes(&self) -> &Routes {
        self.index.get_or_init(|| {
            let personas = self.catalog.personas();
            let pairs: Vec<(usize, usize)> = personas
                .iter()
                .enumerate()
                .flat_map(|(p, persona)| (0..persona.workflows.len()).map(move |w| (p, w)))
                .collect();
            let documents: Vec<_> = pairs
                .iter()
                .map(|&(p, w)| {
                    let persona = &personas[p];
                    let workflow = &persona.workflows[w];
                    vec![
                        (workflow.title.clone(), 1.0),
                        (workflow.description.clone(), 1.0),
                        (workflow.keywords.join(" "), 1.0),
                        (persona.title.clone(), PERSONA_WEIGHT),
                        (persona.short_name.clone(), PERSONA_WEIGHT),
                        (persona.keywords.join(" "), PERSONA_WEIGHT),
                    ]
                })
                .collect();
            Routes {
                index: Index::build(&documents),
                pairs,
            }
        })
    }

    /// Answers one request. Progress notifications go to `out` while it runs; `eof`
    /// fires when stdin closes.
    ///
    /// # Errors
    /// The error to send, or why nothing can be sent.
    pub async fn handle<W: AsyncWrite + Unpin>(
        &self,
        method: &str,
        params: &Value,
        out: &mut Out<W>,
        eof: &CancellationToken,
    ) -> Result<Value, Failure> {
        const METHODS: [&str; 5] = [
            "personas.list",
            "workflows.list",
            "route",
            "workflow.execute",
            "skill.invoke",
        ];
        if !METHODS.contains(&method) {
            let message = format!("unknown method '{}'", clip(method, ECHO_MAX));
            return Err(RpcError::new(METHOD_NOT_FOUND, message).into());
        }
        let (params, ctx) = protocol::params_and_ctx(params)?;
        tracing::debug!(
            method,
            tenant = %clip(&ctx.tenant_id, ECHO_MAX),
            actor = %clip(&ctx.actor_id, ECHO_MAX),
            traceparent = %clip(&ctx.traceparent, 128),
            "request"
        );
        match method {
            "personas.list" => Ok(self.personas()),
            "workflows.list" => Ok(self.workflows(params)?),
            "route" => Ok(self.route(params)?),
            "workflow.execute" => {
                execute::execute(&self.catalog, params, self.pace, out, eof).await
            }
            _ => Ok(skill::invoke(params).await?),
        }
    }

    fn personas(&self) -> Value {
        let personas: Vec<Value> = self
            .catalog
            .personas()
            .iter()
            .map(|p| {
                let workflows: Vec<&str> = p.workflows.iter().map(|w| w.id.as_str()).collect();
                json!({
                    "id": p.id, "title": p.title, "short_name": p.short_name,
                    "description": p.description, "workflows": workflows,
                })
            })
            .collect();
        json!({ "personas": personas })
    }

    fn workflows(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let personas: Vec<_> = match params.get("persona") {
            None | Some(Value::Null) => self.catalog.personas().iter().collect(),
            Some(Value::String(id)) => vec![self.catalog.persona(id).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "unknown persona '{}'; call personas.list for valid ids",
                    clip(id, ECHO_MAX)
                ))
            })?],
            Some(_) => return Err(RpcError::invalid_params("params.persona must be a string")),
        };
        let workflows: Vec<Value> = personas
            .iter()
            .flat_map(|p| {
                p.workflows.iter().map(|w| {
                    json!({
                        "persona": p.id, "id": w.id, "title": w.title,
                        "description": w.description, "input_schema": w.input_schema,
                        "typical_duration_s": w.typical_duration_s,
                    })
                })
            })
            .collect();
        Ok(json!({ "workflows": workflows }))
    }

    fn route(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let query = protocol::required_str(params, "query")?;
        let limit = match params.get("limit") {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    RpcError::invalid_params("params.limit must be an integer from 1 to 10")
                })?,
        };
        let ranked = self.rank(query);
        let Some(&(best, _)) = ranked.first() else {
            return Err(RpcError::invalid_params(
                "no persona or workflow matches the query; rephrase it or browse workflows.list",
            ));
        };
        let scores: Vec<f64> = ranked.iter().map(|&(_, s)| s).collect();
        // Three decimals: the rest is noise and would only make replies harder to compare.
        let confidence = (bm25::confidence(&scores) * 1000.0).round() / 1000.0;
        let alternates: Vec<String> = ranked
            .iter()
            .skip(1)
            .take(usize::try_from(limit - 1).unwrap_or(0))
            .map(|&(doc, _)| self.pair_id(doc))
            .collect();
        let (persona, workflow) = self.pair(best);
        Ok(json!({
            "persona": persona, "workflow": workflow,
            "confidence": confidence, "alternates": alternates,
        }))
    }

    /// Documents with a positive score, best first; ties keep catalogue order.
    fn rank(&self, query: &str) -> Vec<(usize, f64)> {
        let mut ranked: Vec<(usize, f64)> = self
            .routes()
            .index
            .scores(query)
            .into_iter()
            .enumerate()
            .filter(|&(_, s)| s > 0.0)
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }

    fn pair(&self, doc: usize) -> (&str, &str) {
        let (p, w) = self.routes().pairs[doc];
        let persona = &self.catalog.personas()[p];
        (&persona.id, &persona.workflows[w].id)
    }

    fn pair_id(&self, doc: usize) -> String {
        let (persona, workflow) = self.pair(doc);
        format!("{persona}/{workflow}")
    }
}

#[cfg(test)]
mod tests;
