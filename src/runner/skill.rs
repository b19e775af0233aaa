//! `skill.invoke`: read a skill folder's `SKILL.md` (YAML front matter, then a Markdown
//! body), validate the inputs against its optional `input_schema`, render the body as an
//! artifact, and run the optional `entrypoint` program (see `entrypoint.rs`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::entrypoint;
use super::execute::{self, MARKDOWN};
use super::protocol::{self, ECHO_MAX, RpcError, clip};
use super::template;
use crate::domain::skill::split_front_matter;

/// `SKILL.md` files larger than this are refused.
const MAX_SKILL_FILE: u64 = 1024 * 1024;

/// The front matter fields the runner uses; others are ignored.
#[derive(Debug, Deserialize)]
struct FrontMatter {
    name: String,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default)]
    entrypoint: Option<String>,
}

/// Runs `skill.invoke`.
///
/// # Errors
/// -32602 for a bad skill folder, name mismatch or bad inputs; -32001 when the deadline
/// passes; -32000 when the entrypoint fails.
pub async fn invoke(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let skill = protocol::required_object(params, "skill")?;
    let name = protocol::required_str(skill, "name")
        .map_err(|_| RpcError::invalid_params("params.skill.name must be a string"))?;
    let path = protocol::required_str(skill, "path")
        .map_err(|_| RpcError::invalid_params("params.skill.path must be a string"))?;
    let inputs = protocol::required_object(params, "inputs")?;
    let deadline = execute::deadline(params)?;

    let folder = Path::new(path)
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| RpcError::invalid_params("skill folder not found"))?;
    let text = read_skill_file(&folder)?;
    let (yaml, body) = split_front_matter(&text).ok_or_else(|| {
        RpcError::invalid_params("the skill's SKILL.md has no yaml front matter between --- lines")
    })?;
    let front: FrontMatter = serde_norway::from_str(yaml).map_err(|_| {
        RpcError::invalid_params("the skill's SKILL.md front matter is not valid yaml with a name")
    })?;
    if front.name != name {
        return Err(RpcError::invalid_params(format!(
            "skill name '{}' does not match the name in SKILL.md",
            clip(name, ECHO_MAX)
        )));
    }
    if let Some(schema) = &front.input_schema {
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(schema)
            .map_err(|_| RpcError::invalid_params("the skill's input_schema does not compile"))?;
        execute::check_inputs(&validator, params.get("inputs").unwrap_or(&Value::Null))?;
    }
    let program = match &front.entrypoint {
        Some(entry) => Some(resolve_entrypoint(&folder, entry)?),
        None => None,
    };

    // Like a workflow step, the skill does not start once its deadline has passed.
    if tokio::time::Instant::now() >= deadline {
        return Err(RpcError::deadline());
    }
    let rendered = template::render(body, inputs);
    let artifact = json!({
        "name": format!("{}.md", front.name),
        "media_type": MARKDOWN,
        "content": rendered,
    });
    let output = match program {
        None => Value::String(rendered),
        Some(program) => {
            let input_json = Value::Object(inputs.clone()).to_string();
            let stdout =
                entrypoint::run(&program, &folder, input_json.as_bytes(), deadline, name).await?;
            let text = String::from_utf8_lossy(&stdout);
            serde_json::from_str::<Value>(text.trim())
                .unwrap_or_else(|_| Value::String(text.into_owned()))
        }
    };
    Ok(json!({ "output": output, "artifacts": [artifact] }))
}

fn read_skill_file(folder: &Path) -> Result<String, RpcError> {
    let file = folder.join("SKILL.md");
    let missing = || RpcError::invalid_params("the skill folder has no SKILL.md");
    match std::fs::metadata(&file) {
        Ok(m) if m.is_file() && m.len() <= MAX_SKILL_FILE => {}
        Ok(m) if m.is_file() => {
            return Err(RpcError::invalid_params(
                "the skill's SKILL.md is over 1 MiB",
            ));
        }
        _ => return Err(missing()),
    }
    std::fs::read_to_string(&file)
        .map_err(|_| RpcError::invalid_params("the skill's SKILL.md is not readable utf-8 text"))
}

/// The entrypoint's real path, which must be a file inside the (canonical) folder, so
/// neither `..`, an absolute path nor a symlink can reach anything else.
fn resolve_entrypoint(folder: &Path, entry: &str) -> Result<PathBuf, RpcError> {
    folder
        .join(entry)
        .canonicalize()
        .ok()
        .filter(|p| p.starts_with(folder) && p.is_file())
        .ok_or_else(|| {
            RpcError::invalid_params("the skill's entrypoint must name a file inside its folder")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_and_body_are_split_at_the_dashes() {
        assert_eq!(
            split_front_matter("---\nname: a\n---\n# Body\n"),
            Some(("name: a\n", "# Body\n"))
        );
        assert_eq!(
            split_front_matter("\u{feff}---\r\nname: a\r\n---\r\nb"),
            Some(("name: a\r\n", "b"))
        );
        assert_eq!(
            split_front_matter("---\nname: a\n---"),
            Some(("name: a\n", ""))
        );
        assert_eq!(split_front_matter("no front matter"), None);
        assert_eq!(split_front_matter("---\nname: a\n"), None);
        assert_eq!(split_front_matter("---name\n---\n"), None);
    }

    #[test]
    fn an_entrypoint_outside_the_folder_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("skill");
        std::fs::create_dir(&folder).expect("mkdir");
        std::fs::write(folder.join("run.sh"), "#!/bin/sh\n").expect("write");
        std::fs::write(dir.path().join("outside.sh"), "#!/bin/sh\n").expect("write");
        let folder = folder.canonicalize().expect("canonical");
        assert!(resolve_entrypoint(&folder, "run.sh").is_ok());
        assert!(resolve_entrypoint(&folder, "./run.sh").is_ok());
        for bad in ["../outside.sh", "/bin/sh", "missing.sh", ".", ""] {
            assert!(resolve_entrypoint(&folder, bad).is_err(), "{bad}");
        }
    }
}
