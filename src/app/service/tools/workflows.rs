//! The CUO workflow catalogue as `execute_workflow` checks it (CONTRACT §4: cached,
//! refreshed on a miss): each tenant's persona's workflows with their input schemas
//! compiled once, kept for [`FRESH_FOR`]. A workflow not in a fresh entry is looked up
//! again at once, so a workflow the CUO just gained is found; a stale entry is refetched.
//! Saves the CUO round trip and the schema compilation on every call.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use serde_json::Value;

use crate::domain::cuo::Workflow;
use crate::domain::{CallCtx, DomainError, TenantId, Upstream};
use crate::ports::CuoRunner;

/// How long a persona's catalogue is trusted.
const FRESH_FOR: Duration = Duration::from_secs(60);
/// (tenant, persona) entries kept; the least used go first.
const CAPACITY: usize = 1024;

/// A workflow's compiled input schema, or why it cannot be used.
pub type Schema = Arc<Result<jsonschema::Validator, &'static str>>;

#[derive(Clone)]
struct Entry {
    at: Instant,
    schemas: Arc<HashMap<String, Schema>>,
}

/// Per-tenant persona catalogues.
pub struct WorkflowCatalog {
    entries: Cache<(TenantId, String), Entry>,
}

impl Default for WorkflowCatalog {
    fn default() -> WorkflowCatalog {
        WorkflowCatalog {
            entries: Cache::new(CAPACITY),
        }
    }
}

impl WorkflowCatalog {
    /// The compiled input schema of `persona`'s `workflow`; `None` when the CUO does not
    /// know it, even after a fresh look.
    pub async fn schema(
        &self,
        cuo: &dyn CuoRunner,
        ctx: &CallCtx,
        persona: &str,
        workflow: &str,
    ) -> Result<Option<Schema>, DomainError> {
        let key = (ctx.tenant, persona.to_owned());
        if let Some(entry) = self.entries.get(&key)
            && entry.at.elapsed() < FRESH_FOR
            && let Some(schema) = entry.schemas.get(workflow)
        {
            return Ok(Some(Arc::clone(schema)));
        }
        let listed = cuo.list_workflows(ctx, Some(persona)).await?;
        let schemas: HashMap<String, Schema> =
            listed.iter().map(|w| (w.id.clone(), compile(w))).collect();
        let found = schemas.get(workflow).cloned();
        self.entries.insert(
            key,
            Entry {
                at: Instant::now(),
                schemas: Arc::new(schemas),
            },
        );
        Ok(found)
    }
}

fn compile(w: &Workflow) -> Schema {
    let compiled = serde_json::from_str::<Value>(w.input_schema.as_str())
        .map_err(|_| "the workflow's input_schema is not JSON")
        .and_then(|schema| {
            // Remote `$ref`s are compiled out of jsonschema: a schema cannot make us fetch.
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(&schema)
                .map_err(|_| "the workflow's input_schema does not compile")
        });
    Arc::new(compiled)
}

/// The error for a schema the CUO published broken.
pub(super) fn broken(why: &'static str) -> DomainError {
    DomainError::unavailable(Upstream::Cuo, Some(why.into()))
}
