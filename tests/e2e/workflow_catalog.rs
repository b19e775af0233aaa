//! `execute_workflow` checks the CUO catalogue as CONTRACT §4 says: cached per tenant and
//! persona, refreshed on a miss, so the CUO is not asked on every call.

use cyberos_mcp_bridge::app::service::tools::WorkflowCatalog;
use cyberos_mcp_bridge::domain::cuo::Workflow;
use cyberos_mcp_bridge::domain::{CallCtx, JsonText};

use crate::support::call_ctx;
use crate::support::fakes::{CallLog, CatalogueCuo, Recorded};

fn workflow(id: &str) -> Workflow {
    Workflow {
        persona: "cto".into(),
        id: id.into(),
        title: id.into(),
        description: "d".into(),
        input_schema: JsonText::from_serialized(r#"{"type":"object","required":["title"]}"#.into()),
        typical_duration_s: 1,
    }
}

#[tokio::test]
async fn the_catalogue_is_asked_once_per_tenant_and_again_on_a_miss() {
    let a = call_ctx("aaaaaaaa-0000-4000-8000-00000000000a");
    let b = call_ctx("bbbbbbbb-0000-4000-8000-00000000000b");
    let log = CallLog::default();
    let port = Recorded::new(CatalogueCuo::new(vec![workflow("adr")]), &log);
    let catalog = WorkflowCatalog::default();
    let known = async |ctx: &CallCtx, workflow: &str| {
        let schema = catalog.schema(&*port, ctx, "cto", workflow).await.unwrap();
        schema.map(|s| {
            !s.as_ref()
                .as_ref()
                .unwrap()
                .is_valid(&serde_json::json!({}))
        })
    };
    // Tenant A: the first lookup fetches, the next two are answered from the cache.
    for _ in 0..3 {
        assert_eq!(
            known(&a, "adr").await,
            Some(true),
            "the schema requires a title"
        );
    }
    assert_eq!(log.count("cuo."), 1, "{:?}", log.calls());
    // The CUO gains "retro": the lookup that misses fetches again, the next one is cached.
    port.inner.add(workflow("retro"));
    assert_eq!(known(&a, "retro").await, Some(true));
    assert_eq!(known(&a, "retro").await, Some(true));
    // Tenant B fetches its own.
    assert_eq!(known(&b, "adr").await, Some(true));
    let asked = |ctx: &CallCtx| format!("cuo.list_workflows {}/alice Some(\"cto\")", ctx.tenant);
    assert_eq!(log.calls(), [asked(&a), asked(&a), asked(&b)]);
}
