//! What the two SQL task stores share, imported by both and importing neither: how a
//! client's answer is kept (`answers`), and row → `Task`, cursors and the transition check
//! (`tasks`).

pub(super) mod answers;
pub(super) mod tasks;
