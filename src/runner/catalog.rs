//! The persona catalogue: authored JSON files, either embedded at build time (`build.rs`)
//! or read from a directory with `--catalog`. Loading validates everything a run relies
//! on (unique ids, compilable input schemas, templates that only name input properties),
//! so a bad catalogue stops the runner at start-up instead of failing a client later.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::template;

mod bundled {
    include!(concat!(env!("OUT_DIR"), "/catalog.rs"));
}

/// Persona files larger than this are refused; the biggest authored one is ~20 KiB.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// Why a catalogue cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The directory or a file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// What was being read.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A file's content is wrong.
    #[error("{file}: {what}")]
    Invalid {
        /// The persona file name.
        file: String,
        /// What is wrong, naming the persona/workflow/step at fault.
        what: String,
    },
    /// No persona files were found.
    #[error("no persona files (*.json) in {0}")]
    Empty(String),
}

/// A persona with its workflows, in catalogue order.
#[derive(Debug, Deserialize)]
pub struct Persona {
    /// Kebab-case id, unique in the catalogue.
    pub id: String,
    /// Display title.
    pub title: String,
    /// Short name, e.g. `CTO`.
    pub short_name: String,
    /// What the persona owns.
    pub description: String,
    /// Routing keywords.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Its workflows.
    pub workflows: Vec<Workflow>,
}

/// A workflow: metadata, input schema and the steps it runs.
#[derive(Deserialize)]
pub struct Workflow {
    /// Kebab-case id, unique within the persona.
    pub id: String,
    /// Display title.
    pub title: String,
    /// What it does.
    pub description: String,
    /// Routing keywords.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Typical run time in seconds.
    pub typical_duration_s: u64,
    /// JSON Schema (Draft 2020-12) of the inputs.
    pub input_schema: Value,
    /// Steps, run in order.
    pub steps: Vec<Step>,
    /// The compiled `input_schema`; filled in by [`Catalog::from_files`].
    #[serde(skip)]
    pub validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for Workflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflow")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// One step of a workflow.
#[derive(Debug, Deserialize)]
pub struct Step {
    /// Id, unique within the workflow.
    pub id: String,
    /// Display title; also the progress message.
    pub title: String,
    /// Markdown with `{{prop}}` placeholders.
    pub template: String,
    /// When set, the step produces an artifact of this name.
    #[serde(default)]
    pub artifact: Option<String>,
}

/// The validated catalogue.
#[derive(Debug)]
pub struct Catalog {
    /// Personas in file-name order.
    pub personas: Vec<Persona>,
}

impl Catalog {
    /// The catalogue embedded in the binary.
    ///
    /// # Errors
    /// When an embedded file is invalid (the unit tests keep this from shipping).
    pub fn bundled() -> Result<Catalog, CatalogError> {
        Catalog::from_files(
            bundled::BUNDLED
                .iter()
                .map(|(name, text)| ((*name).to_owned(), (*text).to_owned())),
            "the bundled catalogue",
        )
    }

    /// Reads every `*.json` file of `dir`, in file-name order.
    ///
    /// # Errors
    /// When the directory or a file cannot be read, or the catalogue is invalid.
    pub fn from_dir(dir: &Path) -> Result<Catalog, CatalogError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| CatalogError::Io { path, source }
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            if path.extension().is_some_and(|e| e == "json") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let len = std::fs::metadata(&path).map_err(io(&path))?.len();
            if len > MAX_FILE {
                return Err(invalid(&name, "larger than 4 MiB".into()));
            }
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            files.push((name, text));
        }
        Catalog::from_files(files, &dir.display().to_string())
    }

    /// Parses and validates (file name, JSON text) pairs, in the order given.
    ///
    /// # Errors
    /// The first problem found, naming the file.
    pub fn from_files(
        files: impl IntoIterator<Item = (String, String)>,
        origin: &str,
    ) -> Result<Catalog, CatalogError> {
        let mut personas: Vec<Persona> = Vec::new();
        let mut ids = HashSet::new();
        for (file, text) in files {
            let mut persona: Persona = serde_json::from_str(&text)
                .map_err(|e| invalid(&file, format!("not a persona file: {e}")))?;
            if !ids.insert(persona.id.clone()) {
                return Err(invalid(
                    &file,
                    format!("duplicate persona id '{}'", persona.id),
                ));
            }
            check_persona(&mut persona).map_err(|what| invalid(&file, what))?;
            personas.push(persona);
        }
        if personas.is_empty() {
            return Err(CatalogError::Empty(origin.to_owned()));
        }
        Ok(Catalog { personas })
    }

    /// The persona with this id.
    pub fn persona(&self, id: &str) -> Option<&Persona> {
        self.personas.iter().find(|p| p.id == id)
    }
}

fn invalid(file: &str, what: String) -> CatalogError {
    CatalogError::Invalid {
        file: file.to_owned(),
        what,
    }
}

/// Checks one persona and compiles its workflows' input schemas.
fn check_persona(persona: &mut Persona) -> Result<(), String> {
    check_id("persona", &persona.id)?;
    if persona.workflows.is_empty() {
        return Err(format!("persona '{}' has no workflows", persona.id));
    }
    let mut workflow_ids = HashSet::new();
    for workflow in &mut persona.workflows {
        let at = format!("{}/{}", persona.id, workflow.id);
        check_id("workflow", &workflow.id)?;
        if !workflow_ids.insert(workflow.id.clone()) {
            return Err(format!("duplicate workflow id '{at}'"));
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&workflow.input_schema)
            .map_err(|e| format!("{at}: input_schema does not compile: {e}"))?;
        workflow.validator = Some(validator);
        let properties = match workflow.input_schema.get("properties") {
            None => serde_json::Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => return Err(format!("{at}: input_schema.properties must be an object")),
        };
        if workflow.steps.is_empty() {
            return Err(format!("{at}: a workflow needs at least one step"));
        }
        let mut step_ids = HashSet::new();
        for step in &workflow.steps {
            check_id("step", &step.id)?;
            if !step_ids.insert(step.id.as_str()) {
                return Err(format!("{at}: duplicate step id '{}'", step.id));
            }
            if let Some(name) = template::placeholders(&step.template)
                .into_iter()
                .find(|name| !properties.contains_key(*name))
            {
                return Err(format!(
                    "{at}/{}: template references '{{{{{name}}}}}', which is not an input property",
                    step.id
                ));
            }
            if step.artifact.as_deref().is_some_and(str::is_empty) {
                return Err(format!("{at}/{}: artifact name is empty", step.id));
            }
        }
    }
    Ok(())
}

/// Ids go into `persona/workflow` strings and messages: keep them kebab-case.
fn check_id(kind: &str, id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{kind} id '{id}' must be 1 to 64 of a-z, 0-9 and -"
        ))
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn the_bundled_catalogue_loads_with_all_its_personas() {
        let catalog = Catalog::bundled().expect("the bundled catalogue is valid");
        assert_eq!(catalog.personas.len(), 47);
        assert!(catalog.persona("chief-technology-officer").is_some());
        let total: usize = catalog.personas.iter().map(|p| p.workflows.len()).sum();
        assert!(total >= 100, "{total} workflows");
        let mut sorted: Vec<&str> = catalog.personas.iter().map(|p| p.id.as_str()).collect();
        sorted.sort_unstable();
        assert_eq!(sorted.len(), 47);
    }

    #[test]
    fn a_well_formed_file_is_accepted_and_compiled() {
        let catalog =
            Catalog::from_files(vec![persona("p", workflow(good_schema(), "{{x}}"))], "test")
                .expect("valid");
        assert!(catalog.personas[0].workflows[0].validator.is_some());
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
        let ids: Vec<&str> = catalog.personas.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(matches!(
            Catalog::from_dir(&dir.path().join("missing")),
            Err(CatalogError::Io { .. })
        ));
    }
}
