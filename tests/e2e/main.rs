//! The integration suite: one crate, scenarios in modules, harnesses in `support`.

mod cli;
mod contracts;
mod cuo;
mod cuo_runner;
mod cuo_start;
mod data_dir;
mod deploy;
mod dispatch;
mod doctor;
mod hardening;
mod http;
mod identity;
mod memory;
mod pipeline_mocks;
mod release;
mod seed_bounds;
mod short_tools;
mod stdio_binary;
mod support;
mod task_store;
mod tasks;
mod telemetry;
mod tidy;
mod tool_names;
mod workflow_catalog;
