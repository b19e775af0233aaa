//! Entry point: parse the configuration, send logs to stderr, run.

use clap::Parser;

use cyberos_mcp_bridge::app::cli::{self, EXIT_USAGE};
use cyberos_mcp_bridge::app::config::{Cli, LogFormat, Transport};

fn main() {
    let cli = Cli::parse();
    let config = match cli.options.merge_file().and_then(|o| o.resolve()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("cyberos-mcp-bridge: {e}");
            std::process::exit(EXIT_USAGE);
        }
    };
    init_logs(config.log_format);
    // stdio serves one client: a single-threaded reactor avoids a cross-thread wake-up per
    // message (measured in benches/stdio.rs). HTTP serves many and uses every core.
    let mut builder = match config.transport {
        Transport::Stdio => tokio::runtime::Builder::new_current_thread(),
        Transport::Http => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cyberos-mcp-bridge: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(cli::run(config, cli.command));
    // Do not wait for stray blocking reads (stdin) on the way out.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    std::process::exit(code);
}

/// Logs go to stderr only: on stdio, stdout carries protocol frames and nothing else.
fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(false).init(),
        LogFormat::Json => builder.json().init(),
    }
}
