//! What a tool is: a compile-time checked name, its effects, scope and task support.

use crate::domain::{Scope, Upstream};

/// A tool name matching `^cyberos\.[a-z][a-z0-9]*\.[a-z][a-z0-9_]*$` (CONTRACT §4).
///
/// Registry names are built in `const` context, so a bad name fails the build:
///
/// ```
/// use cyberos_mcp_bridge::domain::ToolName;
/// const GOOD: ToolName =
///     ToolName::from_static("cyberos.cuo.list_personas", "cyberos_cuo_list_personas");
/// assert_eq!(GOOD.as_str(), "cyberos.cuo.list_personas");
/// ```
///
/// ```compile_fail,E0080
/// use cyberos_mcp_bridge::domain::ToolName;
/// const BAD: ToolName = ToolName::from_static("cyberos.CUO.x", "cyberos_CUO_x");
/// ```
///
/// ```compile_fail,E0080
/// use cyberos_mcp_bridge::domain::ToolName;
/// const DRIFT: ToolName = ToolName::from_static("cyberos.cuo.route", "cyberos_cuo_routes");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ToolName {
    dotted: &'static str,
    underscored: &'static str,
}

impl ToolName {
    /// Checks the contract's pattern; panics (a compile error in `const` context) otherwise.
    /// The underscore spelling is checked to be the dotted one with `.` → `_`, so the two
    /// cannot drift apart.
    pub const fn from_static(name: &'static str, underscored: &'static str) -> ToolName {
        assert!(
            is_valid_tool_name(name),
            "tool name must match ^cyberos\\.[a-z][a-z0-9]*\\.[a-z][a-z0-9_]*$"
        );
        assert!(
            is_underscore_spelling(name, underscored),
            "the underscore spelling must be the name with '.' replaced by '_'"
        );
        ToolName {
            dotted: name,
            underscored,
        }
    }

    /// The canonical (dotted) name: spans, audit rows and logs use it.
    pub const fn as_str(&self) -> &'static str {
        self.dotted
    }

    /// The name as listed under `naming`.
    pub const fn spelled(&self, naming: ToolNaming) -> &'static str {
        match naming {
            ToolNaming::Dotted => self.dotted,
            ToolNaming::Underscore => self.underscored,
        }
    }
}

/// How tool names are listed: the seed's dotted names, or with underscores for hosts and
/// model APIs that accept only `^[a-zA-Z0-9_-]{1,64}$`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolNaming {
    /// `cyberos.cuo.route`
    #[default]
    Dotted,
    /// `cyberos_cuo_route`
    Underscore,
}

/// Whether `underscored` is `dotted` with every `.` replaced by `_`.
const fn is_underscore_spelling(dotted: &str, underscored: &str) -> bool {
    let (d, u) = (dotted.as_bytes(), underscored.as_bytes());
    if d.len() != u.len() {
        return false;
    }
    let mut i = 0;
    while i < d.len() {
        let want = if d[i] == b'.' { b'_' } else { d[i] };
        if u[i] != want {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `name` matches `^cyberos\.[a-z][a-z0-9]*\.[a-z][a-z0-9_]*$`.
pub const fn is_valid_tool_name(name: &str) -> bool {
    const PREFIX: &[u8] = b"cyberos.";
    let b = name.as_bytes();
    let mut i = 0;
    while i < PREFIX.len() {
        if i >= b.len() || b[i] != PREFIX[i] {
            return false;
        }
        i += 1;
    }
    // Area: [a-z][a-z0-9]*
    if i >= b.len() || !b[i].is_ascii_lowercase() {
        return false;
    }
    i += 1;
    while i < b.len() && (b[i].is_ascii_lowercase() || b[i].is_ascii_digit()) {
        i += 1;
    }
    if i >= b.len() || b[i] != b'.' {
        return false;
    }
    i += 1;
    // Verb: [a-z][a-z0-9_]*
    if i >= b.len() || !b[i].is_ascii_lowercase() {
        return false;
    }
    i += 1;
    while i < b.len() {
        if !(b[i].is_ascii_lowercase() || b[i].is_ascii_digit() || b[i] == b'_') {
            return false;
        }
        i += 1;
    }
    true
}

/// What a tool does to the world. Both the spec's annotation hints and the seed's
/// `destructive` / `write` / `external_effect` keys are derived from this one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effects {
    /// It changes state somewhere.
    pub write: bool,
    /// It may overwrite or delete (not merely add).
    pub destructive: bool,
    /// It records or sends something outside the caller's session (an audit row, a mail).
    pub external_effect: bool,
    /// Repeating it with the same arguments has no further effect.
    pub idempotent: bool,
    /// It talks to an open set of external entities (spec `openWorldHint`).
    pub open_world: bool,
}

impl Effects {
    /// Reads only, from CyberOS's own closed systems.
    pub const READ_ONLY: Effects = Effects {
        write: false,
        destructive: false,
        external_effect: false,
        idempotent: true,
        open_world: false,
    };

    /// Spec `readOnlyHint`.
    pub const fn read_only(&self) -> bool {
        !self.write
    }

    /// Whether a call must be confirmed by the user first (CONTRACT §5).
    pub const fn needs_confirmation(&self) -> bool {
        self.destructive || self.external_effect
    }
}

/// Spec `execution.taskSupport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// The tool answers in one response.
    Forbidden,
    /// The tool may run as a task.
    Optional,
}

impl TaskSupport {
    /// The wire value.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
        }
    }
}

/// The static description of one tool.
#[derive(Debug)]
pub struct ToolSpec {
    /// Which tool.
    pub tool: Tool,
    /// Its SEP-986 name.
    pub name: ToolName,
    /// Display name.
    pub title: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// JSON Schema 2020-12 of the arguments, as JSON text.
    pub input_schema: &'static str,
    /// JSON Schema of `structuredContent`, for the short tools.
    pub output_schema: Option<&'static str>,
    /// What it does to the world.
    pub effects: Effects,
    /// The scope a token needs to call it.
    pub scope: Scope,
    /// Whether it may run as a task.
    pub task_support: TaskSupport,
    /// Where the work happens.
    pub upstream: Upstream,
}

/// The eight tools. The catalogue and the dispatcher both match on this enum without a
/// wildcard arm, so adding a tool fails to compile until it is described and handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `cyberos.cuo.list_personas`
    ListPersonas,
    /// `cyberos.cuo.list_workflows`
    ListWorkflows,
    /// `cyberos.cuo.route`
    Route,
    /// `cyberos.cuo.execute_workflow`
    ExecuteWorkflow,
    /// `cyberos.memory.append_audit`
    AppendAudit,
    /// `cyberos.memory.read_audit`
    ReadAudit,
    /// `cyberos.skill.list_skills`
    ListSkills,
    /// `cyberos.skill.invoke_skill`
    InvokeSkill,
}

impl Tool {
    /// Every tool, in `tools/list` order.
    pub const ALL: [Tool; 8] = [
        Tool::ListPersonas,
        Tool::ListWorkflows,
        Tool::Route,
        Tool::ExecuteWorkflow,
        Tool::AppendAudit,
        Tool::ReadAudit,
        Tool::ListSkills,
        Tool::InvokeSkill,
    ];

    /// Looks a client-supplied name up, in either spelling whatever the listing uses;
    /// names from clients never become `ToolName`s.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| {
            let n = t.spec().name;
            n.as_str() == name || n.spelled(ToolNaming::Underscore) == name
        })
    }

    /// The tool's canonical (dotted) name.
    pub fn name(self) -> &'static str {
        self.spec().name.as_str()
    }

    /// The tool's name as listed under `naming`.
    pub fn listed_name(self, naming: ToolNaming) -> &'static str {
        self.spec().name.spelled(naming)
    }
}

/// `text` with every tool's dotted name in the spelling of `naming`: for the texts a
/// client reads (descriptions, instructions, errors, handles), never for stored data.
pub fn respell(text: &str, naming: ToolNaming) -> std::borrow::Cow<'_, str> {
    if naming == ToolNaming::Dotted || !text.contains("cyberos.") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for tool in Tool::ALL {
        let n = tool.spec().name;
        out = out.replace(n.as_str(), n.spelled(naming));
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_find_a_tool_and_texts_are_respelled() {
        for tool in Tool::ALL {
            let underscored = tool.listed_name(ToolNaming::Underscore);
            assert!(!underscored.contains('.'), "{underscored}");
            assert!(underscored.len() <= 64);
            assert_eq!(Tool::from_name(underscored), Some(tool));
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
        }
        assert_eq!(Tool::from_name("cyberos_cuo.route"), None);
        let text = "Use cyberos.cuo.route, then cyberos.cuo.execute_workflow.";
        assert_eq!(
            respell(text, ToolNaming::Underscore),
            "Use cyberos_cuo_route, then cyberos_cuo_execute_workflow."
        );
        assert_eq!(respell(text, ToolNaming::Dotted), text);
    }

    fn check(name: &str, expected: bool) {
        assert_eq!(is_valid_tool_name(name), expected, "{name}");
    }

    #[test]
    fn tool_names_follow_the_contract_pattern() {
        check("cyberos.cuo.list_personas", true);
        check("cyberos.a1.b_2", true);
        check("cyberos.a.b", true);
        check("cyberos.CUO.x", false);
        check("cyberos.cuo.X", false);
        check("cyberos.1cuo.x", false);
        check("cyberos.cuo._x", false);
        check("cyberos.cuo.", false);
        check("cyberos.cuo", false);
        check("cyberos..x", false);
        check("cyberos.cu_o.x", false);
        check("cyberos.cuo.x-y", false);
        check("cyberos.cuo.x.y", false);
        check("cyber.cuo.x", false);
        check("", false);
    }

    #[test]
    fn effects_map_to_confirmation() {
        assert!(!Effects::READ_ONLY.needs_confirmation());
        assert!(Effects::READ_ONLY.read_only());
        let audit = Effects {
            write: true,
            external_effect: true,
            ..Effects::READ_ONLY
        };
        assert!(audit.needs_confirmation());
        assert!(!audit.read_only());
    }
}
