//! `{{prop}}` templates shared by workflow steps and SKILL.md bodies. A placeholder is a
//! name made of letters, digits, `_` or `-` between double braces (inner spaces allowed);
//! anything else between braces is left verbatim, so prose and code samples survive.

use serde_json::{Map, Value};

/// What an absent optional input renders as.
pub const NOT_PROVIDED: &str = "(not provided)";

/// The placeholder names in `template`, in order of appearance (repeats included).
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut names = Vec::new();
    scan(template, |piece| {
        if let Piece::Name(name) = piece {
            names.push(name);
        }
    });
    names
}

/// Replaces each placeholder by its input: strings as-is, other JSON compact, absent
/// inputs by [`NOT_PROVIDED`].
pub fn render(template: &str, inputs: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(template.len());
    scan(template, |piece| match piece {
        Piece::Text(text) => out.push_str(text),
        Piece::Name(name) => match inputs.get(name) {
            Some(Value::String(s)) => out.push_str(s),
            Some(other) => out.push_str(&other.to_string()),
            None => out.push_str(NOT_PROVIDED),
        },
    });
    out
}

enum Piece<'a> {
    Text(&'a str),
    Name(&'a str),
}

/// Splits `template` into literal text and placeholder names, calling `emit` for each.
fn scan<'a>(template: &'a str, mut emit: impl FnMut(Piece<'a>)) {
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        let name = after[..close].trim();
        if is_name(name) {
            emit(Piece::Text(&rest[..open]));
            emit(Piece::Name(name));
            rest = &after[close + 2..];
        } else {
            // Not a placeholder: keep one brace and look again from the next one, so
            // `{{{a}}}` still finds `{{a}}`.
            emit(Piece::Text(&rest[..open + 1]));
            rest = &rest[open + 1..];
        }
    }
    emit(Piece::Text(rest));
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inputs(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn strings_render_as_is_and_other_values_as_compact_json() {
        let map = inputs(json!({"a": "x y", "n": 3, "o": {"k": [1, true]}, "z": null}));
        assert_eq!(
            render("{{a}}|{{n}}|{{ o }}|{{z}}", &map),
            "x y|3|{\"k\":[1,true]}|null"
        );
    }

    #[test]
    fn absent_inputs_render_as_not_provided() {
        assert_eq!(
            render("c: {{constraints}}.", &Map::new()),
            "c: (not provided)."
        );
    }

    #[test]
    fn text_that_is_not_a_placeholder_is_kept_verbatim() {
        let map = inputs(json!({"a": "1"}));
        assert_eq!(render("{{#each x}} {{a}}", &map), "{{#each x}} 1");
        assert_eq!(render("{{ two words }}{{a}}", &map), "{{ two words }}1");
        assert_eq!(render("open {{a", &map), "open {{a");
        assert_eq!(render("{{{a}}}", &map), "{1}");
        assert_eq!(render("", &map), "");
        assert_eq!(render("é {{a}} ü", &map), "é 1 ü");
    }

    #[test]
    fn placeholders_are_listed_in_order() {
        assert_eq!(
            placeholders("{{a}} {{ b-c }} {{a}} {{not one}} {{}}"),
            vec!["a", "b-c", "a"]
        );
    }

    #[test]
    fn a_value_containing_braces_is_not_rendered_again() {
        let map = inputs(json!({"a": "{{b}}", "b": "no"}));
        assert_eq!(render("{{a}}", &map), "{{b}}");
    }
}
