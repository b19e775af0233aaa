//! Unit tests of dispatch and routing against the bundled catalogue.

use super::*;
use crate::runner::protocol::INVALID_PARAMS;

fn runner() -> Runner {
    Runner::new(Catalog::bundled(), Duration::ZERO)
}

fn route(runner: &Runner, query: &str, limit: Option<u64>) -> Result<Value, RpcError> {
    let mut params = Map::new();
    params.insert("query".into(), json!(query));
    if let Some(limit) = limit {
        params.insert("limit".into(), json!(limit));
    }
    runner.route(&params)
}

#[test]
fn the_payment_routing_query_goes_to_the_cto_with_high_confidence() {
    let r = route(
        &runner(),
        "Architect a new payment routing system for Southeast Asian markets",
        None,
    )
    .expect("routes");
    assert_eq!(r["persona"], "chief-technology-officer");
    assert_eq!(r["workflow"], "architect-new-system");
    let confidence = r["confidence"].as_f64().unwrap_or_default();
    assert!(confidence >= 0.8, "confidence {confidence}");
    assert_eq!(r["alternates"].as_array().map(Vec::len), Some(2));
}

#[test]
fn almost_every_workflow_title_routes_to_its_own_workflow() {
    let runner = runner();
    let mut total = 0;
    let mut misses = Vec::new();
    for persona in runner.catalog.personas() {
        for workflow in &persona.workflows {
            total += 1;
            let r = route(&runner, &workflow.title, Some(1)).expect("a title matches");
            if r["persona"] != persona.id.as_str() || r["workflow"] != workflow.id.as_str() {
                misses.push(format!(
                    "{} -> {}/{}",
                    workflow.title, r["persona"], r["workflow"]
                ));
            }
        }
    }
    let hit_rate = 1.0 - misses.len() as f64 / f64::from(total);
    assert!(
        hit_rate >= 0.95,
        "hit rate {hit_rate:.3}; misses: {misses:#?}"
    );
}

#[test]
fn vague_queries_get_low_confidence() {
    let runner = runner();
    for query in [
        "review",
        "plan",
        "strategy",
        "team",
        "customer data",
        "help me with the thing for the team",
        "we need a plan for next quarter",
    ] {
        let r = route(&runner, query, None).expect("matches something");
        let confidence = r["confidence"].as_f64().unwrap_or(1.0);
        assert!(confidence < 0.4, "{query}: {confidence}");
    }
}

#[test]
fn a_query_matching_nothing_is_refused_with_a_hint() {
    let runner = runner();
    for query in ["", "the of and", "zzxqv wvpl", "¿¡"] {
        let err = route(&runner, query, None).expect_err("no match");
        assert_eq!(err.code, INVALID_PARAMS);
        assert_eq!(
            err.message,
            "no persona or workflow matches the query; rephrase it or browse workflows.list"
        );
    }
}

#[test]
fn the_limit_bounds_the_alternates_and_must_be_1_to_10() {
    let runner = runner();
    let r = route(&runner, "security incident response", Some(10)).expect("routes");
    assert_eq!(r["alternates"].as_array().map(Vec::len), Some(9));
    let r = route(&runner, "security incident response", Some(1)).expect("routes");
    assert_eq!(r["alternates"], json!([]));
    for bad in [json!(0), json!(11), json!(2.5), json!("3"), json!(-1)] {
        let mut params = Map::new();
        params.insert("query".into(), json!("security"));
        params.insert("limit".into(), bad);
        assert_eq!(
            runner.route(&params).err().map(|e| e.code),
            Some(INVALID_PARAMS)
        );
    }
}

#[test]
fn personas_are_listed_in_catalogue_order_with_their_workflow_ids() {
    let runner = runner();
    let listed = runner.personas();
    let personas = listed["personas"].as_array().cloned().unwrap_or_default();
    assert_eq!(personas.len(), runner.catalog.personas().len());
    assert_eq!(personas[0]["id"], runner.catalog.personas()[0].id.as_str());
    let cto = personas
        .iter()
        .find(|p| p["id"] == "chief-technology-officer")
        .expect("the cto is listed");
    assert!(
        cto["workflows"]
            .as_array()
            .is_some_and(|w| w.contains(&json!("architect-new-system")))
    );
}

#[test]
fn workflows_can_be_listed_for_one_persona_and_unknown_ones_are_refused() {
    let runner = runner();
    let mut params = Map::new();
    params.insert("persona".into(), json!("chief-technology-officer"));
    let listed = runner.workflows(&params).expect("known persona");
    let workflows = listed["workflows"].as_array().cloned().unwrap_or_default();
    assert!(!workflows.is_empty());
    assert!(
        workflows
            .iter()
            .all(|w| w["persona"] == "chief-technology-officer")
    );
    assert!(workflows[0]["input_schema"].is_object());
    let all = runner.workflows(&Map::new()).expect("all");
    assert!(all["workflows"].as_array().map_or(0, Vec::len) > workflows.len());

    params.insert("persona".into(), json!("x".repeat(500)));
    let err = runner.workflows(&params).expect_err("unknown persona");
    assert_eq!(err.code, INVALID_PARAMS);
    assert!(err.message.ends_with("; call personas.list for valid ids"));
    assert!(
        err.message.matches('x').count() <= ECHO_MAX,
        "{}",
        err.message
    );
    params.insert("persona".into(), json!(7));
    assert!(runner.workflows(&params).is_err());
}
