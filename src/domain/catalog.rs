//! The static registry: one `ToolSpec` per tool, described once.

use crate::domain::{Effects, Scope, TaskSupport, Tool, ToolName, ToolSpec, Upstream};

impl Tool {
    /// The tool's static description.
    pub fn spec(self) -> &'static ToolSpec {
        match self {
            Tool::ListPersonas => &LIST_PERSONAS,
            Tool::ListWorkflows => &LIST_WORKFLOWS,
            Tool::Route => &ROUTE,
            Tool::ExecuteWorkflow => &EXECUTE_WORKFLOW,
            Tool::AppendAudit => &APPEND_AUDIT,
            Tool::ReadAudit => &READ_AUDIT,
            Tool::ListSkills => &LIST_SKILLS,
            Tool::InvokeSkill => &INVOKE_SKILL,
        }
    }
}

/// Writes that add a record (never overwrite) and run in CyberOS's own systems.
const RUNS_WORK: Effects = Effects {
    write: true,
    destructive: false,
    external_effect: false,
    idempotent: false,
    open_world: false,
};

static LIST_PERSONAS: ToolSpec = ToolSpec {
    tool: Tool::ListPersonas,
    name: ToolName::from_static("cyberos.cuo.list_personas", "cyberos_cuo_list_personas"),
    title: "List CyberOS personas",
    description: "List the active CyberOS personas (CTO, CFO, CPO, ...) with their id, title, short name, \
                  description and the ids of their workflows.",
    input_schema: include_str!("schemas/list_personas.in.json"),
    output_schema: Some(include_str!("schemas/list_personas.out.json")),
    effects: Effects::READ_ONLY,
    scope: Scope::CuoRead,
    task_support: TaskSupport::Forbidden,
    upstream: Upstream::Cuo,
};

static LIST_WORKFLOWS: ToolSpec = ToolSpec {
    tool: Tool::ListWorkflows,
    name: ToolName::from_static("cyberos.cuo.list_workflows", "cyberos_cuo_list_workflows"),
    title: "List CUO workflows",
    description: "List the workflows the CUO orchestrator can run, optionally for one persona, with each \
                  workflow's input schema and typical duration.",
    input_schema: include_str!("schemas/list_workflows.in.json"),
    output_schema: Some(include_str!("schemas/list_workflows.out.json")),
    effects: Effects::READ_ONLY,
    scope: Scope::CuoRead,
    task_support: TaskSupport::Forbidden,
    upstream: Upstream::Cuo,
};

static ROUTE: ToolSpec = ToolSpec {
    tool: Tool::Route,
    name: ToolName::from_static("cyberos.cuo.route", "cyberos_cuo_route"),
    title: "Route a request to a persona",
    description: "Find the persona and workflow best suited to a request written in plain language. Returns \
                  the best match, a confidence between 0 and 1, and alternates as persona/workflow ids.",
    input_schema: include_str!("schemas/route.in.json"),
    output_schema: Some(include_str!("schemas/route.out.json")),
    effects: Effects::READ_ONLY,
    scope: Scope::CuoRead,
    task_support: TaskSupport::Forbidden,
    upstream: Upstream::Cuo,
};

static EXECUTE_WORKFLOW: ToolSpec = ToolSpec {
    tool: Tool::ExecuteWorkflow,
    name: ToolName::from_static(
        "cyberos.cuo.execute_workflow",
        "cyberos_cuo_execute_workflow",
    ),
    title: "Run a CUO workflow",
    description: "Run one persona's workflow with the given inputs (see cyberos.cuo.list_workflows for each \
                  workflow's input_schema). Long-running; its result is {steps_executed, final_artifacts}.",
    input_schema: include_str!("schemas/execute_workflow.in.json"),
    output_schema: None,
    effects: RUNS_WORK,
    scope: Scope::CuoExecute,
    task_support: TaskSupport::Optional,
    upstream: Upstream::Cuo,
};

static APPEND_AUDIT: ToolSpec = ToolSpec {
    tool: Tool::AppendAudit,
    name: ToolName::from_static("cyberos.memory.append_audit", "cyberos_memory_append_audit"),
    title: "Append to the audit log",
    description: "Append one event to the tenant's append-only CyberOS audit log. The entry is permanent, so \
                  the user must confirm the call: the host asks them when it can; otherwise the refusal says \
                  what to tell the user (a link to open, or a command to run, to approve this exact call), \
                  and once they have approved, the same call with the same arguments goes through.",
    input_schema: include_str!("schemas/append_audit.in.json"),
    output_schema: Some(include_str!("schemas/append_audit.out.json")),
    effects: Effects {
        external_effect: true,
        ..RUNS_WORK
    },
    scope: Scope::MemoryWrite,
    task_support: TaskSupport::Forbidden,
    upstream: Upstream::Memory,
};

static READ_AUDIT: ToolSpec = ToolSpec {
    tool: Tool::ReadAudit,
    name: ToolName::from_static("cyberos.memory.read_audit", "cyberos_memory_read_audit"),
    title: "Read the audit log",
    description: "Read the tenant's audit log: one entry by audit_id, or a page of entries filtered by kind \
                  and start time, newest first, with next_cursor for the next page.",
    input_schema: include_str!("schemas/read_audit.in.json"),
    output_schema: Some(include_str!("schemas/read_audit.out.json")),
    effects: Effects::READ_ONLY,
    scope: Scope::MemoryRead,
    task_support: TaskSupport::Forbidden,
    upstream: Upstream::Memory,
};

static LIST_SKILLS: ToolSpec = ToolSpec {
    tool: Tool::ListSkills,
    name: ToolName::from_static("cyberos.skill.list_skills", "cyberos_skill_list_skills"),
    title: "List skills",
    description: "List the SKILL folders available to this bridge, optionally filtered by words in their \
                  name or description, with each skill's input schema when it declares one.",
    input_schema: include_str!("schemas/list_skills.in.json"),
    output_schema: Some(include_str!("schemas/list_skills.out.json")),
    effects: Effects::READ_ONLY,
    scope: Scope::SkillRead,
    task_support: TaskSupport::Forbidden,
    upstream: Upstream::Skills,
};

static INVOKE_SKILL: ToolSpec = ToolSpec {
    tool: Tool::InvokeSkill,
    name: ToolName::from_static("cyberos.skill.invoke_skill", "cyberos_skill_invoke_skill"),
    title: "Run a skill",
    description: "Run a skill with the given inputs (see cyberos.skill.list_skills for its input_schema). \
                  Long-running; its result is {output, artifacts}.",
    input_schema: include_str!("schemas/invoke_skill.in.json"),
    output_schema: None,
    effects: RUNS_WORK,
    scope: Scope::SkillInvoke,
    task_support: TaskSupport::Optional,
    upstream: Upstream::Cuo,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_described_once_under_its_own_name() {
        let mut names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 8);
        for tool in Tool::ALL {
            assert_eq!(tool.spec().tool, tool);
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
        }
        assert_eq!(Tool::from_name("cyberos.cuo.nope"), None);
    }

    #[test]
    fn long_running_tools_are_the_ones_without_output_schemas() {
        for tool in Tool::ALL {
            let spec = tool.spec();
            assert_eq!(
                spec.task_support == TaskSupport::Optional,
                spec.output_schema.is_none(),
                "{}",
                spec.name.as_str()
            );
        }
    }

    #[test]
    fn only_append_audit_needs_confirmation() {
        let confirmed: Vec<Tool> = Tool::ALL
            .into_iter()
            .filter(|t| t.spec().effects.needs_confirmation())
            .collect();
        assert_eq!(confirmed, [Tool::AppendAudit]);
    }

    #[test]
    fn read_only_tools_need_a_read_scope() {
        for tool in Tool::ALL {
            let spec = tool.spec();
            if spec.effects.read_only() {
                assert!(
                    spec.scope.as_str().ends_with(":read"),
                    "{}",
                    spec.name.as_str()
                );
            }
        }
    }
}
