//! Entry point: parse the configuration, send logs to stderr (and spans and metrics to the
//! collector, metrics to the scrape), run, flush.

use std::time::Duration;

use clap::{CommandFactory, FromArgMatches};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use cyberos_mcp_bridge::app::cli::{self, EXIT_FAILED, EXIT_USAGE};
use cyberos_mcp_bridge::app::config::{Cli, Command, Config, LogFormat, Sources, Transport};
use cyberos_mcp_bridge::app::edge::http;
use cyberos_mcp_bridge::app::{telemetry, wiring};

// mimalloc: far cheaper than glibc's malloc for the many small, short-lived blocks of a
// call (Cargo.toml says what it bought).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long the last spans and metrics may take to reach the collector on the way out.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

fn main() {
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli.options.sources = Sources::from_matches(&matches);
    let config = match cli.options.merge_file().and_then(Config::resolve) {
        Ok(config) => config,
        Err(e) => usage_error(&e),
    };
    // Only commands that run tools have spans and metrics to export; only serving is
    // scraped. Metrics first: the span pipeline reports its drops as a metric.
    let exports = matches!(cli.command, None | Some(Command::Call { .. }));
    let serving = cli.command.is_none();
    let (meters, mut otlp) = if exports {
        let meters = wiring::metrics(&config, serving).unwrap_or_else(|e| usage_error(&e));
        let otlp = wiring::span_export(&config).unwrap_or_else(|e| usage_error(&e));
        (meters, otlp)
    } else {
        (None, None)
    };
    let scrape = wiring::scrape(meters.as_ref());
    if let Some(otlp) = otlp.as_mut() {
        telemetry::set_export_gate(otlp.take_gate());
    }
    // Serving logs at info; a one-shot command (call, check, tools, ...) at warn, so its
    // output is not buried under the bridge's INFO lines.
    let level = if cli.command.is_none() {
        "info"
    } else {
        "warn"
    };
    init_logs(
        config.log_format,
        otlp.as_ref().map(|o| o.tracer()),
        level,
        serving,
    );
    // stdio serves one client: a single-threaded reactor avoids a cross-thread wake-up per
    // message (docs/performance.md, "stdio against its floor"). HTTP serves many and uses
    // every core. The bundled CUO runner handles one request at a time, whatever the
    // transport setting, and starts skill entrypoints from its main thread, whose life
    // their death signal follows (`children`).
    let runner = matches!(cli.command, Some(Command::CuoRunner { .. }));
    let mut builder = match config.transport {
        Transport::Http if !runner => tokio::runtime::Builder::new_multi_thread(),
        Transport::Stdio | Transport::Http => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cyberos-mcp-bridge: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async {
        if let (Some(addr), Some(render)) = (config.metrics_listen, scrape)
            && let Err(e) = http::serve_metrics(addr, render).await
        {
            eprintln!("cyberos-mcp-bridge: {e}");
            return EXIT_FAILED;
        }
        cli::run(config, cli.command).await
    });
    // Every exit path of `run` (stdin EOF, SIGTERM drain, a failed start) comes here.
    wiring::flush_telemetry(otlp, meters, FLUSH_WAIT);
    // Do not wait for stray blocking reads (stdin) on the way out.
    runtime.shutdown_timeout(Duration::from_millis(200));
    telemetry::logs::flush();
    std::process::exit(code);
}

fn usage_error(e: &dyn std::fmt::Display) -> ! {
    eprintln!("cyberos-mcp-bridge: {e}");
    std::process::exit(EXIT_USAGE);
}

/// Logs go to stderr only: on stdio, stdout carries protocol frames and nothing else. A
/// serving bridge writes them from a thread of their own (`telemetry::logs`); a one-shot
/// command or a CUO runner child, which log little, writes them in place.
/// `RUST_LOG` filters the logs, not the exported spans.
fn init_logs(
    format: LogFormat,
    tracer: Option<opentelemetry_sdk::trace::SdkTracer>,
    default_level: &str,
    serving: bool,
) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let writer = if serving {
        BoxMakeWriter::new(telemetry::logs::stderr_writer())
    } else {
        BoxMakeWriter::new(std::io::stderr)
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_timer(telemetry::UtcMicros)
        .with_writer(writer);
    let logs = match format {
        LogFormat::Text => fmt
            .with_ansi(false)
            .event_format(telemetry::TextLine::new(telemetry::UtcMicros))
            .fmt_fields(telemetry::TextFields)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
    };
    let spans = tracer.map(telemetry::otel_layer);
    tracing_subscriber::registry().with(logs).with(spans).init();
}
