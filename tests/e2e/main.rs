//! The integration suite: one crate, scenarios in modules, harnesses in `support`.
//!
//! Unit tests in `src/` have one layout (`tidy::unit_tests_follow_one_layout` checks it):
//! a source file has at most one test module, `#[cfg(test)] mod tests`, inline at the end
//! of the file, or, when it runs past 150 lines, in `<module>/tests.rs` declared
//! `#[cfg(test)] mod tests;`; property tests go inside it, and no `#[path]`.

mod cli;
mod conformance_checks;
mod contracts;
mod cuo;
mod cuo_runner;
mod cuo_start;
mod data_dir;
mod deploy;
mod dispatch;
mod doctor;
mod embedding;
mod hardening;
mod harness;
mod http;
mod identity;
mod memory;
mod pipeline_ports;
mod release;
mod short_tools;
mod stdio_binary;
mod support;
mod task_store;
mod tasks;
mod telemetry;
mod tidy;
mod tool_names;
mod workflow_catalog;
