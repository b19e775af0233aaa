//! The result shapes of `docs/cuo-protocol.md` §4, judged member by member, and inputs
//! made for a workflow's `input_schema` (valid ones to run it, invalid ones to be refused),
//! each confirmed against the schema itself.

use serde_json::{Map, Value, json};

/// A workflow as `workflows.list` described it.
#[derive(Debug, Clone)]
pub(super) struct Workflow {
    pub(super) persona: String,
    pub(super) id: String,
    pub(super) title: String,
    pub(super) typical_duration_s: u64,
    pub(super) input_schema: Value,
}

fn string<'a>(obj: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a str, String> {
    obj.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{at}.{key} to be a string"))
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("{at} to be an object"))
}

fn array<'a>(obj: &'a Map<String, Value>, key: &str, at: &str) -> Result<&'a Vec<Value>, String> {
    obj.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{at}.{key} to be an array"))
}

/// `{personas:[{id, title, short_name, description, workflows:[id]}]}`, at least one:
/// the persona ids.
pub(super) fn personas(result: &Value) -> Result<Vec<String>, String> {
    let list = array(object(result, "the result")?, "personas", "the result")?;
    if list.is_empty() {
        return Err("at least one persona (the other checks need one)".into());
    }
    let mut ids = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let at = format!("personas[{i}]");
        let p = object(p, &at)?;
        for key in ["title", "short_name", "description"] {
            string(p, key, &at)?;
        }
        let workflows = array(p, "workflows", &at)?;
        if !workflows.iter().all(Value::is_string) {
            return Err(format!("{at}.workflows to hold workflow ids (strings)"));
        }
        ids.push(string(p, "id", &at)?.to_owned());
    }
    Ok(ids)
}

/// `{workflows:[{persona, id, title, description, input_schema, typical_duration_s}]}`,
/// each of a listed persona (of `only`, when given).
pub(super) fn workflows(
    result: &Value,
    personas: &[String],
    only: Option<&str>,
) -> Result<Vec<Workflow>, String> {
    let list = array(object(result, "the result")?, "workflows", "the result")?;
    let mut out = Vec::new();
    for (i, w) in list.iter().enumerate() {
        let at = format!("workflows[{i}]");
        let w = object(w, &at)?;
        let persona = string(w, "persona", &at)?;
        if !personas.iter().any(|p| p == persona) {
            return Err(format!(
                "{at}.persona {persona:?} to be a persona of personas.list"
            ));
        }
        if only.is_some_and(|p| p != persona) {
            return Err(format!(
                "only workflows of {:?}, not of {persona:?}",
                only.unwrap_or("")
            ));
        }
        string(w, "description", &at)?;
        let input_schema = w
            .get("input_schema")
            .filter(|s| s.is_object())
            .ok_or_else(|| format!("{at}.input_schema to be an object"))?;
        let typical_duration_s = w
            .get("typical_duration_s")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("{at}.typical_duration_s to be a non-negative integer"))?;
        out.push(Workflow {
            persona: persona.to_owned(),
            id: string(w, "id", &at)?.to_owned(),
            title: string(w, "title", &at)?.to_owned(),
            typical_duration_s,
            input_schema: input_schema.clone(),
        });
    }
    Ok(out)
}

/// `{persona, workflow, confidence, alternates}`: a catalogue pair, a confidence in
/// [0, 1], at most `limit - 1` alternates of the form `persona/workflow` naming pairs of
/// the catalogue.
pub(super) fn route(result: &Value, limit: usize, catalogue: &[Workflow]) -> Result<(), String> {
    let r = object(result, "the result")?;
    let known = |p: &str, w: &str| catalogue.iter().any(|c| c.persona == p && c.id == w);
    let (persona, workflow) = (
        string(r, "persona", "the result")?,
        string(r, "workflow", "the result")?,
    );
    if !known(persona, workflow) {
        return Err(format!(
            "{persona}/{workflow} to be a workflow of workflows.list"
        ));
    }
    let confidence = r
        .get("confidence")
        .and_then(Value::as_f64)
        .ok_or("confidence to be a number")?;
    if !(0.0..=1.0).contains(&confidence) {
        return Err(format!("confidence within [0, 1], not {confidence}"));
    }
    let alternates = array(r, "alternates", "the result")?;
    if alternates.len() > limit.saturating_sub(1) {
        return Err(format!(
            "at most {} alternates for limit {limit}, not {}",
            limit - 1,
            alternates.len()
        ));
    }
    for a in alternates {
        let pair = a.as_str().and_then(|s| s.split_once('/'));
        match pair {
            Some((p, w)) if known(p, w) => {}
            _ => {
                return Err(format!(
                    "alternates of the form persona/workflow naming listed workflows, not {a}"
                ));
            }
        }
    }
    Ok(())
}

/// `{steps_executed, final_artifacts:[{name, media_type, content}]}`: the step count.
pub(super) fn outcome(result: &Value) -> Result<u64, String> {
    let r = object(result, "the result")?;
    let steps = r
        .get("steps_executed")
        .and_then(Value::as_u64)
        .ok_or("steps_executed to be a non-negative integer")?;
    for (i, a) in array(r, "final_artifacts", "the result")?
        .iter()
        .enumerate()
    {
        let at = format!("final_artifacts[{i}]");
        let a = object(a, &at)?;
        for key in ["name", "media_type", "content"] {
            string(a, key, &at)?;
        }
    }
    Ok(steps)
}

/// `{output, artifacts}`: `output` any JSON value, `artifacts` an array.
pub(super) fn skill_outcome(result: &Value) -> Result<(), String> {
    let r = object(result, "the result")?;
    if !r.contains_key("output") {
        return Err("an output member".into());
    }
    array(r, "artifacts", "the result").map(|_| ())
}

/// The `progress` notifications of a run: `step` a non-negative integer that never
/// decreases, `total` an integer and `message` a string when present. The steps, in order.
pub(super) fn progress(notifications: &[Value]) -> Result<Vec<u64>, String> {
    let mut steps = Vec::new();
    for n in notifications.iter().filter(|n| n["method"] == "progress") {
        let p = &n["params"];
        let step = p["step"]
            .as_u64()
            .ok_or_else(|| format!("params.step to be a non-negative integer in {n}"))?;
        if steps.last().is_some_and(|last| step < *last) {
            return Err(format!(
                "steps that never decrease, not {step} after {}",
                steps[steps.len() - 1]
            ));
        }
        if p.get("total").is_some_and(|t| !t.is_u64())
            || p.get("message").is_some_and(|m| !m.is_string())
        {
            return Err(format!("an integer total and a string message in {n}"));
        }
        steps.push(step);
    }
    Ok(steps)
}

fn validator(schema: &Value) -> Option<jsonschema::Validator> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .ok()
}

/// A value for a property schema, when it is simple enough to make one.
fn value_for(schema: &Value) -> Option<Value> {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return Some(first.clone());
    }
    if let Some(c) = schema.get("const") {
        return Some(c.clone());
    }
    match schema.get("type").and_then(Value::as_str)? {
        "string" => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(1);
            let max = schema
                .get("maxLength")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let mut text = String::from("conformance check by cyberos-mcp-bridge");
            while (text.chars().count() as u64) < min {
                text.push('x');
            }
            let keep = usize::try_from(max).unwrap_or(usize::MAX);
            Some(Value::String(text.chars().take(keep).collect()))
        }
        "integer" | "number" => {
            let min = schema.get("minimum").and_then(Value::as_i64).unwrap_or(1);
            Some(json!(
                min.max(1).min(
                    schema
                        .get("maximum")
                        .and_then(Value::as_i64)
                        .unwrap_or(i64::MAX)
                )
            ))
        }
        "boolean" => Some(Value::Bool(true)),
        "array" => Some(json!([])),
        "object" => Some(json!({})),
        _ => None,
    }
}

/// Inputs that `schema` accepts: every required property filled in, confirmed by the
/// schema itself; `None` when the checker cannot make such inputs.
pub(super) fn valid_inputs(schema: &Value) -> Option<Value> {
    let v = validator(schema)?;
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut inputs = Map::new();
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = name.as_str()?;
        let prop = properties.and_then(|p| p.get(name))?;
        inputs.insert(name.to_owned(), value_for(prop)?);
    }
    let inputs = Value::Object(inputs);
    v.is_valid(&inputs).then_some(inputs)
}

/// Inputs that `schema` refuses, made from `valid`, and how they break it: a property of
/// the wrong type, a property the schema does not allow, or a required one left out.
pub(super) fn invalid_inputs(schema: &Value, valid: &Value) -> Option<(Value, String)> {
    let v = validator(schema)?;
    let mut candidates = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let wrong = match prop.get("type").and_then(Value::as_str) {
                Some("string") => json!(7),
                Some(_) => json!("not the declared type"),
                None => continue,
            };
            let mut bad = valid.clone();
            bad[name] = wrong;
            candidates.push((bad, format!("'{name}' of the wrong type")));
        }
    }
    let mut extra = valid.clone();
    extra["cyberos_check_unknown"] = json!(true);
    candidates.push((extra, "a property the schema does not declare".into()));
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(name), Some(obj)) = (name.as_str(), valid.as_object()) {
            let mut bad = obj.clone();
            bad.remove(name);
            candidates.push((
                Value::Object(bad),
                format!("the required '{name}' left out"),
            ));
        }
    }
    candidates.push((
        json!("not an object"),
        "inputs that are not an object".into(),
    ));
    candidates.into_iter().find(|(bad, _)| !v.is_valid(bad))
}

/// The workflow the runs use: the quickest one whose `input_schema` the checker can
/// fill in, with those inputs.
pub(super) fn chosen(workflows: &[Workflow]) -> Option<(&Workflow, Value)> {
    let mut by_duration: Vec<&Workflow> = workflows.iter().collect();
    by_duration.sort_by_key(|w| w.typical_duration_s);
    by_duration
        .into_iter()
        .find_map(|w| valid_inputs(&w.input_schema).map(|inputs| (w, inputs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object",
            "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 10},
                           "n": {"type": "integer", "minimum": 3}},
            "required": ["title", "n"], "additionalProperties": false})
    }

    #[test]
    fn valid_inputs_keep_the_schema_and_invalid_ones_break_it() {
        let valid = valid_inputs(&schema()).expect("fillable");
        assert_eq!(valid["n"], 3);
        assert_eq!(valid["title"].as_str().map(str::len), Some(10));
        let (bad, how) = invalid_inputs(&schema(), &valid).expect("breakable");
        assert!(!validator(&schema()).unwrap().is_valid(&bad), "{how}");
        assert_eq!(
            valid_inputs(&json!({"type": "object", "required": ["x"]})),
            None
        );
        let anything = json!({});
        assert_eq!(invalid_inputs(&anything, &json!({})), None);
    }

    #[test]
    fn route_results_name_catalogue_pairs_within_the_limit() {
        let catalogue = vec![Workflow {
            persona: "p".into(),
            id: "w".into(),
            title: "t".into(),
            typical_duration_s: 1,
            input_schema: json!({}),
        }];
        let ok = json!({"persona": "p", "workflow": "w", "confidence": 0.5, "alternates": ["p/w"]});
        assert_eq!(route(&ok, 2, &catalogue), Ok(()));
        assert!(route(&ok, 1, &catalogue).is_err());
        let far = json!({"persona": "p", "workflow": "w", "confidence": 1.5, "alternates": []});
        assert!(route(&far, 2, &catalogue).unwrap_err().contains("[0, 1]"));
        let odd = json!({"persona": "p", "workflow": "w", "confidence": 1, "alternates": ["pw"]});
        assert!(route(&odd, 3, &catalogue).is_err());
    }

    #[test]
    fn progress_steps_never_decrease() {
        let p = |step: Value| json!({"method": "progress", "params": {"step": step, "total": 3, "message": "m"}});
        assert_eq!(
            progress(&[p(json!(1)), p(json!(1)), p(json!(2))]),
            Ok(vec![1, 1, 2])
        );
        assert!(progress(&[p(json!(2)), p(json!(1))]).is_err());
        assert!(progress(&[p(json!(-1))]).is_err());
    }
}
