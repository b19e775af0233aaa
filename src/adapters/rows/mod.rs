//! What the two SQL task stores share, imported by both and importing neither: how a
//! client's answer is kept (`answers`), approvals and page secrets read back
//! (`approvals`), and row → `Task`, cursors and the transition check (`tasks`).

pub(super) mod answers;
pub(super) mod approvals;
pub(super) mod tasks;
