//! The persona catalogue: authored JSON files, either embedded at build time (`build.rs`)
//! or read from a directory with `--catalog`. Loading a directory validates everything a
//! run relies on (unique ids, compilable input schemas, templates that only name input
//! properties), so a bad catalogue stops the runner at start-up instead of failing a
//! client later.
//!
//! The bundled catalogue cannot change after the build, and its unit tests run every one
//! of those checks, so it is parsed on demand instead: whole for a listing or a route, only
//! the named persona's file for a run, and each input schema compiled when first used.
//! Every run starts a runner of its own, which then parses one file and compiles the
//! schemas of the workflows it runs, not the whole catalogue.

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

use super::template;

mod bundled {
    include!(concat!(env!("OUT_DIR"), "/catalog.rs"));
}

/// Persona files larger than this are refused; authored ones are far smaller.
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
    /// The compiled `input_schema`, or why it does not compile: see [`Workflow::validator`].
    #[serde(skip)]
    validator: OnceLock<Result<jsonschema::Validator, jsonschema::ValidationError<'static>>>,
}

impl Workflow {
    /// The compiled input schema, compiled on first use.
    ///
    /// # Errors
    /// The compiler's message when the schema does not compile (a loaded directory
    /// catalogue has already been checked; the bundled one is checked by its unit test).
    pub fn validator(
        &self,
    ) -> Result<&jsonschema::Validator, &jsonschema::ValidationError<'static>> {
        self.validator
            .get_or_init(|| {
                jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .should_validate_formats(true)
                    .build(&self.input_schema)
            })
            .as_ref()
    }
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
    /// Every persona, in file-name order: set at load for a directory, on first need for
    /// the bundled catalogue.
    all: OnceLock<Vec<Persona>>,
    /// Whether this is the bundled catalogue.
    bundled: bool,
    /// The one bundled persona a run asked for before anything needed them all.
    alone: OnceLock<Option<Persona>>,
}

impl Catalog {
    /// The catalogue embedded in the binary; nothing is parsed until it is needed.
    pub fn bundled() -> Catalog {
        Catalog {
            all: OnceLock::new(),
            bundled: true,
            alone: OnceLock::new(),
        }
    }

    /// Every persona, in file-name order.
    pub fn personas(&self) -> &[Persona] {
        self.all.get_or_init(|| {
            let files = bundled::BUNDLED.iter().copied();
            // Only the bundled catalogue gets here, and its unit tests keep a bad file
            // from shipping; should one ship anyway, every lookup says "unknown persona".
            parse(files, "the bundled catalogue", Schemas::OnFirstUse).unwrap_or_else(|e| {
                tracing::error!(error = %e, "the bundled catalogue is invalid");
                Vec::new()
            })
        })
    }

    /// The persona with this id. A run's runner asks for one persona and nothing else, so
    /// the bundled catalogue parses only that persona's file (`<id>.json`, which its
    /// unit test holds every file to) until something needs them all.
    pub fn persona(&self, id: &str) -> Option<&Persona> {
        if self.bundled && self.all.get().is_none() {
            let alone = self.alone.get_or_init(|| bundled_persona(id));
            if let Some(persona) = alone.as_ref().filter(|p| p.id == id) {
                return Some(persona);
            }
        }
        self.personas().iter().find(|p| p.id == id)
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
        let personas = parse(files, origin, Schemas::AtLoad)?;
        Ok(Catalog {
            all: OnceLock::from(personas),
            bundled: false,
            alone: OnceLock::new(),
        })
    }
}

/// The bundled persona `id`, parsed from its file alone; `None` when there is no such
/// file or it does not parse (the whole catalogue's parse then says why).
fn bundled_persona(id: &str) -> Option<Persona> {
    let file = format!("{id}.json");
    let (_, text) = bundled::BUNDLED.iter().find(|(name, _)| *name == file)?;
    let persona: Persona = serde_json::from_str(text).ok()?;
    check_persona(&file, &persona, Schemas::OnFirstUse).ok()?;
    Some(persona)
}

/// Parses and checks (file name, JSON text) pairs, in the order given.
fn parse(
    files: impl IntoIterator<Item = (impl AsRef<str>, impl AsRef<str>)>,
    origin: &str,
    schemas: Schemas,
) -> Result<Vec<Persona>, CatalogError> {
    let mut personas: Vec<Persona> = Vec::new();
    let mut ids = HashSet::new();
    for (file, text) in files {
        let file = file.as_ref();
        let persona: Persona = serde_json::from_str(text.as_ref())
            .map_err(|e| invalid(file, format!("not a persona file: {e}")))?;
        if !ids.insert(persona.id.clone()) {
            return Err(invalid(
                file,
                format!("duplicate persona id '{}'", persona.id),
            ));
        }
        check_persona(file, &persona, schemas)?;
        personas.push(persona);
    }
    if personas.is_empty() {
        return Err(CatalogError::Empty(origin.to_owned()));
    }
    Ok(personas)
}

/// When the input schemas are compiled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Schemas {
    /// While loading, so that a schema that does not compile refuses the catalogue.
    AtLoad,
    /// By the first run of the workflow.
    OnFirstUse,
}

fn invalid(file: &str, what: String) -> CatalogError {
    CatalogError::Invalid {
        file: file.to_owned(),
        what,
    }
}

/// Checks one persona and, when asked, compiles its workflows' input schemas.
fn check_persona(file: &str, persona: &Persona, schemas: Schemas) -> Result<(), CatalogError> {
    check_id(file, "persona", &persona.id)?;
    if persona.workflows.is_empty() {
        return Err(invalid(
            file,
            format!("persona '{}' has no workflows", persona.id),
        ));
    }
    let mut workflow_ids = HashSet::new();
    for workflow in &persona.workflows {
        let at = format!("{}/{}", persona.id, workflow.id);
        check_id(file, "workflow", &workflow.id)?;
        if !workflow_ids.insert(workflow.id.clone()) {
            return Err(invalid(file, format!("duplicate workflow id '{at}'")));
        }
        if schemas == Schemas::AtLoad {
            workflow
                .validator()
                .map_err(|e| invalid(file, format!("{at}: input_schema does not compile: {e}")))?;
        }
        let none = serde_json::Map::new();
        let properties = match workflow.input_schema.get("properties") {
            None => &none,
            Some(Value::Object(map)) => map,
            Some(_) => {
                return Err(invalid(
                    file,
                    format!("{at}: input_schema.properties must be an object"),
                ));
            }
        };
        if workflow.steps.is_empty() {
            return Err(invalid(
                file,
                format!("{at}: a workflow needs at least one step"),
            ));
        }
        let mut step_ids = HashSet::new();
        for step in &workflow.steps {
            check_id(file, "step", &step.id)?;
            if !step_ids.insert(step.id.as_str()) {
                return Err(invalid(
                    file,
                    format!("{at}: duplicate step id '{}'", step.id),
                ));
            }
            if let Some(name) = template::placeholders(&step.template)
                .into_iter()
                .find(|name| !properties.contains_key(*name))
            {
                return Err(invalid(
                    file,
                    format!(
                        "{at}/{}: template references '{{{{{name}}}}}', which is not an input property",
                        step.id
                    ),
                ));
            }
            if step.artifact.as_deref().is_some_and(str::is_empty) {
                return Err(invalid(
                    file,
                    format!("{at}/{}: artifact name is empty", step.id),
                ));
            }
        }
    }
    Ok(())
}

/// Ids go into `persona/workflow` strings and messages: keep them kebab-case.
fn check_id(file: &str, kind: &str, id: &str) -> Result<(), CatalogError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            file,
            format!("{kind} id '{id}' must be 1 to 64 of a-z, 0-9 and -"),
        ))
    }
}

#[cfg(test)]
mod tests;
