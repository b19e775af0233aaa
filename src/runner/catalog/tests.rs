//! Unit tests of the catalogue: the bundled one, and what loading a directory refuses.

use super::*;
use serde_json::json;

fn persona(id: &str, workflow: Value) -> (String, String) {
    let p = json!({
        "id": id, "title": "T", "short_name": "T", "description": "d",
        "keywords": ["k"], "workflows": [workflow]
    });
    (format!("{id}.json"), p.to_string())
}

fn workflow(schema: Value, template: &str) -> Value {
    json!({
        "id": "w", "title": "W", "description": "d", "keywords": [],
        "typical_duration_s": 1, "input_schema": schema,
        "steps": [{"id": "s", "title": "S", "template": template, "artifact": "a.md"}]
    })
}

fn error_of(files: Vec<(String, String)>) -> String {
    match Catalog::from_files(files, "test") {
        Ok(_) => String::from("accepted"),
        Err(e) => e.to_string(),
    }
}

fn good_schema() -> Value {
    json!({"type": "object", "properties": {"x": {"type": "string"}}})
}

fn bundled_files() -> Vec<(String, String)> {
    bundled::BUNDLED
        .iter()
        .map(|(name, text)| ((*name).to_owned(), (*text).to_owned()))
        .collect()
}

#[test]
fn the_bundled_catalogue_passes_every_check_a_directory_gets() {
    // Loaded as a directory would be: every id, template and schema checked.
    let checked = Catalog::from_files(bundled_files(), "test").expect("valid");
    let catalog = Catalog::bundled();
    let personas = catalog.personas();
    assert_eq!(personas.len(), 47);
    assert_eq!(checked.personas().len(), 47);
    assert!(catalog.persona("chief-technology-officer").is_some());
    let total: usize = personas.iter().map(|p| p.workflows.len()).sum();
    assert!(total >= 100, "{total} workflows");
    let mut sorted: Vec<&str> = personas.iter().map(|p| p.id.as_str()).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 47);
    // Nothing is compiled until a run needs it.
    assert!(
        personas
            .iter()
            .flat_map(|p| &p.workflows)
            .all(|w| w.validator.get().is_none())
    );
}

#[test]
fn every_bundled_file_is_named_after_its_persona() {
    // A run's lookup reads `<id>.json` alone; this keeps it equal to a search by id.
    for (name, text) in bundled::BUNDLED {
        let persona: Persona = serde_json::from_str(text).expect("parses");
        assert_eq!(*name, format!("{}.json", persona.id));
    }
}

#[test]
fn a_run_parses_only_the_persona_it_names() {
    let catalog = Catalog::bundled();
    let cto = catalog.persona("chief-technology-officer").expect("found");
    assert_eq!(cto.id, "chief-technology-officer");
    assert!(
        catalog.all.get().is_none(),
        "the whole catalogue was parsed"
    );
    // Another persona, or one that does not exist, falls back to the whole catalogue.
    let cfo = catalog.persona("chief-financial-officer").expect("found");
    assert_eq!(cfo.id, "chief-financial-officer");
    assert!(catalog.persona("no-such-persona").is_none());
    assert!(Catalog::bundled().persona("../etc/passwd").is_none());
    assert_eq!(catalog.personas().len(), 47);
}

#[test]
fn a_well_formed_file_is_accepted_and_compiled() {
    let catalog = Catalog::from_files(vec![persona("p", workflow(good_schema(), "{{x}}"))], "test")
        .expect("valid");
    assert!(catalog.personas()[0].workflows[0].validator.get().is_some());
}

#[test]
fn duplicate_persona_ids_are_refused() {
    let w = workflow(good_schema(), "{{x}}");
    let err = error_of(vec![persona("p", w.clone()), persona("p", w)]);
    assert!(err.contains("duplicate persona id 'p'"), "{err}");
}

#[test]
fn duplicate_workflow_ids_are_refused() {
    let w = workflow(good_schema(), "{{x}}");
    let (name, _) = persona("p", w.clone());
    let text = json!({"id": "p", "title": "T", "short_name": "T", "description": "d",
        "workflows": [w.clone(), w]})
    .to_string();
    let err = error_of(vec![(name, text)]);
    assert!(err.contains("duplicate workflow id 'p/w'"), "{err}");
}

#[test]
fn a_schema_that_does_not_compile_is_refused() {
    let err = error_of(vec![persona(
        "p",
        workflow(json!({"type": "no-such-type"}), "x"),
    )]);
    assert!(err.contains("input_schema does not compile"), "{err}");
}

#[test]
fn a_template_naming_an_unknown_property_is_refused() {
    let err = error_of(vec![persona("p", workflow(good_schema(), "{{y}}"))]);
    assert!(err.contains("template references '{{y}}'"), "{err}");
}

#[test]
fn bad_ids_empty_workflows_and_garbage_are_refused() {
    assert!(error_of(vec![persona("Bad Id", workflow(good_schema(), ""))]).contains("must be"));
    let empty = json!({"id": "p", "title": "T", "short_name": "T", "description": "d",
        "workflows": []});
    assert!(error_of(vec![("p.json".into(), empty.to_string())]).contains("no workflows"));
    assert!(error_of(vec![("p.json".into(), "{".into())]).contains("not a persona file"));
    assert!(error_of(vec![]).contains("no persona files"));
}

#[test]
fn a_directory_catalogue_is_read_in_file_name_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    for id in ["b", "a"] {
        let (name, text) = persona(id, workflow(good_schema(), "{{x}}"));
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
    let catalog = Catalog::from_dir(dir.path()).expect("valid");
    let ids: Vec<&str> = catalog.personas().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert!(matches!(
        Catalog::from_dir(&dir.path().join("missing")),
        Err(CatalogError::Io { .. })
    ));
}
