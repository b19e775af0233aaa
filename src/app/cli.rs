//! The subcommands and the serve loop, each returning the process exit code.

use std::io::Write;

use serde_json::{Value, json};

use crate::app::config::{Command, Config, Transport};
use crate::app::edge::dispatch;
use crate::app::edge::rpc::{Request, RequestId};
use crate::app::edge::session::Session;
use crate::app::wiring;
use crate::domain::Tool;
use crate::{Bridge, ServeError};

/// Exit code for success.
pub const EXIT_OK: i32 = 0;
/// Exit code for a failed check or tool call.
pub const EXIT_FAILED: i32 = 1;
/// Exit code for usage and configuration errors.
pub const EXIT_USAGE: i32 = 2;

/// Runs `command` (or serves) and returns the exit code.
pub async fn run(config: Config, command: Option<Command>) -> i32 {
    match command {
        None => serve(config).await,
        Some(Command::Tools) => {
            // As a client of unknown name is offered it.
            let waits = config.long_running == crate::app::service::settings::LongRunning::Wait;
            let listing = crate::app::edge::listing::tools_list(config.tool_names, waits);
            let listing: Value = serde_json::from_str(&listing).expect("the listing is JSON");
            print_json(&listing);
            EXIT_OK
        }
        Some(Command::DevToken {
            tenant,
            scopes,
            ttl,
            sub,
            confirm,
            args,
        }) => {
            let req = wiring::DevTokenRequest {
                tenant,
                scopes,
                ttl,
                sub,
                confirm,
                args,
            };
            match wiring::dev_token(&config, &req) {
                Ok(token) => {
                    println!("{token}");
                    EXIT_OK
                }
                Err(e) => {
                    eprintln!("cyberos-mcp-bridge dev-token: {e}");
                    EXIT_USAGE
                }
            }
        }
        Some(Command::Check { json }) => {
            let report = crate::app::doctor::check(&config).await;
            if json {
                print_json(&report.json());
            } else {
                print!("{}", report.text());
            }
            if report.ok() { EXIT_OK } else { EXIT_FAILED }
        }
        Some(Command::CheckCuo { json, run_timeout }) => {
            let options = crate::app::conformance::CuoCheckOptions {
                command: config.cuo_command.clone(),
                pass_env: config.cuo_env.clone(),
                call_timeout: config.cuo_timeout,
                run_timeout: std::time::Duration::from_secs(run_timeout),
            };
            conformance(crate::app::conformance::check_cuo(&options).await, json)
        }
        Some(Command::CheckMemory { json }) => match memory_check_options(&config) {
            Ok(options) => conformance(crate::app::conformance::check_memory(&options).await, json),
            Err(why) => {
                eprintln!("cyberos-mcp-bridge check-memory: {why}");
                EXIT_USAGE
            }
        },
        Some(Command::Migrate) => migrate(&config).await,
        Some(Command::CuoRunner { catalog, pace_ms }) => {
            crate::runner::run(crate::runner::RunnerOptions { catalog, pace_ms }).await
        }
        Some(Command::Call {
            tool,
            args,
            confirm,
        }) => call(&config, &tool, args.as_deref(), confirm).await,
        Some(Command::Approve { id, yes }) => decide(&config, &id, true, yes).await,
        Some(Command::Deny { id, yes }) => decide(&config, &id, false, yes).await,
    }
}

/// Prints a conformance report (its summary is the last line) and returns its exit code.
fn conformance(report: crate::app::conformance::Report, json: bool) -> i32 {
    if json {
        print_json(&report.json());
    } else {
        print!("{}", report.text());
    }
    if report.ok() { EXIT_OK } else { EXIT_FAILED }
}

/// `check-memory` needs `--memory-url`; the token is read as the bridge reads it.
fn memory_check_options(
    config: &Config,
) -> Result<crate::app::conformance::MemoryCheckOptions, String> {
    let url = config
        .memory_url
        .clone()
        .ok_or("pass --memory-url (the embedded audit log has no HTTP contract to check)")?;
    let token = match &config.memory_token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --memory-token-file: {e}"))?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    Ok(crate::app::conformance::MemoryCheckOptions { url, token })
}

/// `approve`/`deny`: shows approval `id` and records the verdict once the person at this
/// terminal says yes (or `yes`). Whoever can open the store here is trusted, as with
/// `call --confirm`.
async fn decide(config: &Config, id: &str, approve: bool, yes: bool) -> i32 {
    let verb = if approve { "approve" } else { "deny" };
    let fail = |why: &str| {
        eprintln!("cyberos-mcp-bridge {verb}: {why}");
        EXIT_FAILED
    };
    let Some(id) = crate::domain::approval::ApprovalId::parse(id.trim()) else {
        eprintln!("cyberos-mcp-bridge {verb}: an approval id is 32 lowercase hex digits");
        return EXIT_USAGE;
    };
    let app = match wiring::app(config).await {
        Ok(app) => app,
        Err(e) => {
            eprintln!("cyberos-mcp-bridge {verb}: {e}");
            return EXIT_USAGE;
        }
    };
    let approvals = &app.ports().approvals;
    let approval = match approvals.find(&id).await {
        Ok(Some(a)) => a,
        Ok(None) => return fail("no such approval: it is unknown, expired or used"),
        Err(e) => return fail(&e.to_string()),
    };
    let b = &approval.binding;
    let pretty = serde_json::from_str::<Value>(&approval.arguments)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|_| approval.arguments.clone());
    println!(
        "tool:      {} ({})\ntenant:    {}\nuser:      {}\nexpires:   {}\narguments: {pretty}",
        b.tool.spec().title,
        b.tool.name(),
        b.tenant,
        b.subject,
        approval.expires_at.to_rfc3339(),
    );
    if !approval.decidable(app.ports().clock.now()) {
        return fail("this approval was decided already");
    }
    if !yes {
        eprint!(
            "{} this call? [y/N] ",
            if approve { "Approve" } else { "Deny" }
        );
        let answer = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        })
        .await;
        let said_yes = matches!(
            answer.as_ref().map(|r| r.as_ref().map(|l| l.trim().to_ascii_lowercase())),
            Ok(Ok(l)) if l == "y" || l == "yes"
        );
        if !said_yes {
            eprintln!("nothing recorded");
            return EXIT_FAILED;
        }
    }
    match approvals.decide(&b.tenant, &id, &b.subject, approve).await {
        Ok(true) if approve => {
            println!("approved: the assistant may now call the tool again with the same arguments");
            EXIT_OK
        }
        Ok(true) => {
            println!("denied");
            EXIT_OK
        }
        Ok(false) => fail("this approval was decided already or has expired"),
        Err(e) => fail(&e.to_string()),
    }
}

/// Builds the bridge through the same builder an embedding program uses, and serves.
async fn serve(config: Config) -> i32 {
    let dev_http = config.transport == Transport::Http && config.identity.dev;
    let bridge = match Bridge::from_config(config.clone()).build().await {
        Ok(bridge) => bridge,
        Err(e) => {
            eprintln!("cyberos-mcp-bridge: {e}");
            return EXIT_USAGE;
        }
    };
    if dev_http {
        match wiring::dev_bearer_token(&config) {
            Ok(token) => eprintln!(
                "cyberos-mcp-bridge: --dev bearer token (local tenant {}, every scope, 30 days):\n{token}",
                crate::app::service::identity::LOCAL_TENANT
            ),
            Err(e) => {
                eprintln!("cyberos-mcp-bridge: {e}");
                return EXIT_USAGE;
            }
        }
    }
    match bridge.serve().await {
        Ok(()) => EXIT_OK,
        Err(e @ ServeError::Config(_)) => {
            eprintln!("cyberos-mcp-bridge: {e}");
            EXIT_USAGE
        }
        Err(ServeError::Input(e)) => {
            tracing::error!("reading stdin failed: {e}");
            EXIT_FAILED
        }
        Err(e) => {
            eprintln!("cyberos-mcp-bridge: {e}");
            EXIT_FAILED
        }
    }
}

async fn migrate(config: &Config) -> i32 {
    let Some(url) = config
        .database_url
        .as_deref()
        .filter(|u| u.starts_with("postgres"))
    else {
        eprintln!(
            "cyberos-mcp-bridge migrate: pass --database-url postgres://… (the embedded SQLite store migrates itself)"
        );
        return EXIT_USAGE;
    };
    match wiring::migrate_postgres(url).await {
        Ok(()) => {
            println!("migrations applied");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("cyberos-mcp-bridge migrate: {e}");
            EXIT_FAILED
        }
    }
}

async fn call(config: &Config, tool: &str, args: Option<&str>, confirm: bool) -> i32 {
    let args: Value = match args.map(serde_json::from_str).transpose() {
        Ok(Some(v @ Value::Object(_))) => v,
        Ok(None) => json!({}),
        Ok(Some(_)) | Err(_) => {
            eprintln!(
                "cyberos-mcp-bridge call: arguments must be a JSON object, e.g. '{{\"query\": \"...\"}}'"
            );
            return EXIT_USAGE;
        }
    };
    if Tool::from_name(tool).is_none() {
        eprintln!(
            "cyberos-mcp-bridge call: unknown tool {tool:?}; run `cyberos-mcp-bridge tools` to list them"
        );
        return EXIT_USAGE;
    }
    // `call` waits for long tools and returns their final result.
    let mut config = config.clone();
    config.long_running = crate::app::LongRunning::Wait;
    let app = match wiring::app(&config).await {
        Ok(app) => app,
        Err(e) => {
            eprintln!("cyberos-mcp-bridge call: {e}");
            return EXIT_USAGE;
        }
    };
    let (tx, _rx) = tokio::sync::mpsc::channel(16);
    let session = Session::new(tx);
    session.mark_initialized(false);
    // The operator at the terminal is the user: `--confirm` is their confirmation.
    let meta = if confirm {
        json!({"com.cyberos/confirmed": true})
    } else {
        json!({})
    };
    let params = json!({ "name": tool, "arguments": args, "_meta": meta });
    let req = Request::new(RequestId::Int(1), "tools/call", &params);
    let answer = dispatch::answer(&app, &session, req).await;
    let frame: Value = serde_json::from_str(&answer.frame).expect("frames are JSON");
    if let Some(result) = frame.get("result") {
        print_json(result);
        if result.get("isError") == Some(&Value::Bool(true)) {
            EXIT_FAILED
        } else {
            EXIT_OK
        }
    } else {
        print_json(&frame["error"]);
        EXIT_FAILED
    }
}

fn print_json(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut out, value);
    let _ = writeln!(out);
}
