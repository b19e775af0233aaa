//! The integration suite: one crate, scenarios in modules.

mod cli;
mod collector;
mod contracts;
mod cuo;
mod cuo_runner;
mod fakes;
mod http;
mod identity;
mod in_process;
mod memory;
mod memory_server;
mod module_graph;
mod pg;
mod schema;
mod short_tools;
mod stdio_binary;
mod support;
mod task_store;
mod tasks;
mod telemetry;
mod tidy;
