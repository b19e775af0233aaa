//! Driven adapters: each file implements one port over one technology.
//! Only `app::wiring` names them.

pub mod skills_fs;
pub mod system_clock;
pub mod unwired;
