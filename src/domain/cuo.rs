//! What the CUO orchestrator offers: personas, workflows, routes, runs.

use crate::domain::JsonText;

/// A persona, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persona {
    /// Kebab-case id, e.g. `chief-technology-officer`.
    pub id: String,
    /// Display title.
    pub title: String,
    /// Short name, e.g. `CTO`.
    pub short_name: String,
    /// What the persona owns.
    pub description: String,
    /// Its workflow ids.
    pub workflows: Vec<String>,
}

/// A workflow, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    /// The persona it belongs to.
    pub persona: String,
    /// Kebab-case id, unique within the persona.
    pub id: String,
    /// Display title.
    pub title: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its inputs.
    pub input_schema: JsonText,
    /// Typical run time in seconds.
    pub typical_duration_s: u64,
}

/// The best persona/workflow for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Persona id.
    pub persona: String,
    /// Workflow id.
    pub workflow: String,
    /// Calibrated confidence in [0, 1].
    pub confidence: f64,
    /// Runner-up `persona/workflow` ids.
    pub alternates: Vec<String>,
}

/// A produced artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// File-like name.
    pub name: String,
    /// MIME type.
    pub media_type: String,
    /// Text content.
    pub content: String,
}

/// The result of a workflow run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowOutcome {
    /// How many steps ran.
    pub steps_executed: u64,
    /// What they produced.
    pub final_artifacts: Vec<Artifact>,
}

/// A progress report from a running workflow or skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Steps done so far.
    pub step: u64,
    /// Total steps, when known.
    pub total: Option<u64>,
    /// What is happening.
    pub message: Option<String>,
}
