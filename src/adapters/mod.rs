//! Driven adapters: each file implements one port over one technology.
//! Only `app::wiring` names them.

pub mod cuo_process;
pub mod dev_key;
pub mod jwt;
pub mod memory_http;
pub mod otlp;
pub mod postgres;
pub mod skills_fs;
pub mod sqlite;
pub mod sqlite_tasks;
pub mod system_clock;
pub mod unavailable;
