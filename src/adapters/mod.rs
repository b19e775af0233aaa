//! Driven adapters: each module implements one port over one technology (`task_rows` is
//! what the two task stores share).
//! Only `app::wiring` names them.

mod answer_rows;
pub mod cuo_process;
pub mod dev_key;
pub mod jwt;
pub mod memory_http;
pub mod otlp;
pub mod postgres;
mod private_file;
pub mod session_key;
pub mod skills_fs;
pub mod sqlite;
pub mod system_clock;
mod task_rows;
pub mod unavailable;
