//! Driven adapters: each module implements ports over one technology (its module
//! comment names them); `rows` and `waiters` are what the two SQL stores share. Only
//! `app::wiring` names them.

pub mod cuo_process;
pub mod jwt;
pub mod memory_http;
pub mod postgres;
mod rows;
pub mod skills_fs;
pub mod sqlite;
pub mod system_clock;
pub mod unavailable;
mod waiters;
