//! Stdio round-trip benchmark of the built binary, against a bare serde_json echo server
//! measured in the same run (this file re-executes itself as that echo server, as the
//! same echo on the bridge's stdio plumbing: Tokio pipes on a current-thread runtime, and
//! as that server answering every request with the benchmarked call's result).
//!
//! Run: `cargo bench --bench stdio` (add `-- --quick` for a short run; `BENCH_BRIDGE=<binary>`
//! measures another build, e.g. an older commit's, with this harness). Reports p50/p99
//! latency and messages/s, sequential and with 64 requests in flight, server CPU time per
//! request (all threads' run time from /proc/PID/task/*/schedstat), time from process start
//! to the first `initialize` answer, and idle RSS; then the sequential echo and call again
//! with this process and the server placed on one CPU and on two. The last lines are the
//! verdict: the CPU per authenticated `tools/call` against the echo's per message,
//! unpinned and in each placement, each followed by the steps below it (the echo on Tokio
//! pipes, the call's answer on Tokio pipes, the bridge's `ping`) against the same echo.
//! The bridge logs at `info`, its serving default, into /dev/null.
//! Bounded: a fixed number of requests per scenario, loopback pipes only.

use std::time::{Duration, Instant};

use cyberos_mcp_bridge::app::service::identity::LOCAL_TENANT;
use serde_json::{Value, json};

/// The binary under test: `BENCH_BRIDGE` when set (another build, e.g. an older commit's
/// release binary, measured by the same harness on the same machine), else this build's.
fn bridge_bin() -> String {
    std::env::var("BENCH_BRIDGE")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_cyberos-mcp-bridge").to_owned())
}

#[path = "stdio/echo.rs"]
mod echo;
#[path = "../tests/e2e/support/proc_status.rs"]
mod proc_status;
#[path = "stdio/server.rs"]
mod server;

use server::{Server, Stats, percentile};

#[path = "../tests/e2e/support/collector.rs"]
#[allow(dead_code)]
mod collector;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--echo-server") {
        echo::serve();
        return;
    }
    if args.iter().any(|a| a == "--async-echo-server") {
        echo::serve_async();
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--answer-server") {
        echo::serve_answer(&args[at + 1]);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let n = if quick { 2_000 } else { 20_000 };
    let skills = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/skills");
    let data = std::env::temp_dir().join(format!("cyberos-bench-{}", std::process::id()));

    println!("cyberos-mcp-bridge stdio benchmark ({n} requests per scenario)\n");
    if args.iter().any(|a| a == "--collector-down") {
        let call = json!({"method": "tools/call", "params": {"name": "cyberos.skill.list_skills", "arguments": {"limit": 5}}});
        collector_down(&data, skills, &call, n);
        let _ = std::fs::remove_dir_all(&data);
        return;
    }
    let start = startup(&data, skills, if quick { 5 } else { 20 });
    println!(
        "startup to first initialize answer: p50 {:.2} ms, max {:.2} ms",
        ms(start.0),
        ms(start.1)
    );

    let echo = Server::echo();
    let mut bridge = Server::bridge(&data, skills);
    println!("idle RSS after initialize: {} KiB\n", bridge.rss_kib());

    let ping = json!({"method": "ping"});
    let list = json!({"method": "tools/list"});
    let call = json!({"method": "tools/call", "params": {"name": "cyberos.skill.list_skills", "arguments": {"limit": 5}}});
    println!(
        "{:<44} {:>10} {:>9} {:>9} {:>12}",
        "scenario", "msgs/s", "p50 µs", "p99 µs", "CPU µs/req"
    );
    let mut echo = echo;
    // Warm the CUO child so its start-up is not measured as a call.
    bridge.sequential(&json!({"method": "tools/call", "params": {"name": "cyberos.cuo.list_personas", "arguments": {}}}), 1);
    // The call's own result, for the floor that answers with it.
    let answer = data.join("call-result.json");
    std::fs::write(&answer, bridge.ask(&call)["result"].to_string()).unwrap();
    let echo_seq = report(
        "bare serde_json echo, sequential",
        echo.sequential(&ping, n),
    );
    let echo_pipe = report(
        "bare serde_json echo, 64 in flight",
        echo.pipelined(&ping, n * 5, 64),
    );
    // Each Tokio floor warmed first, as the bridge is by the calls before its ping.
    let warmed_floor = |name: &str, mut floor: Server| {
        floor.sequential(&ping, n / 10);
        report(name, floor.sequential(&ping, n))
    };
    let async_echo_seq = warmed_floor("echo on Tokio pipes, sequential", Server::async_echo());
    let answer_seq = warmed_floor(
        "the call's answer on Tokio pipes, sequential",
        Server::answer_floor(&answer),
    );
    let ping_seq = report("bridge ping, sequential", bridge.sequential(&ping, n));
    report(
        "bridge ping, 64 in flight",
        bridge.pipelined(&ping, n * 5, 64),
    );
    report("bridge tools/list, sequential", bridge.sequential(&list, n));
    report(
        "bridge tools/list, 64 in flight",
        bridge.pipelined(&list, n * 2, 64),
    );
    let call_seq = report(
        "bridge tools/call list_skills, sequential",
        bridge.sequential(&call, n),
    );
    let call_pipe = report(
        "bridge tools/call list_skills, 64 in flight",
        bridge.pipelined(&call, n * 2, 64),
    );
    // The token as a host usually hands it over: a file, read again on every call.
    report(
        "bridge tools/call, token from --token-file",
        token_file_bridge(&data.join("token-file"), skills).sequential(&call, n),
    );
    // Through the pooled CUO child (the bundled reference runner).
    let route = json!({"method": "tools/call", "params": {"name": "cyberos.cuo.route",
        "arguments": {"query": "Architect a new payment routing system for Southeast Asian markets"}}});
    let personas = json!({"method": "tools/call", "params": {"name": "cyberos.cuo.list_personas", "arguments": {}}});
    report(
        "bridge cuo.route, sequential",
        bridge.sequential(&route, n / 4),
    );
    report(
        "bridge cuo.route, 16 in flight",
        bridge.pipelined(&route, n / 2, 16),
    );
    report(
        "bridge cuo.list_personas, sequential",
        bridge.sequential(&personas, n / 4),
    );
    report(
        "bridge cuo.list_personas, 16 in flight",
        bridge.pipelined(&personas, n / 2, 16),
    );
    drop(bridge);
    drop(echo);
    collector_down(&data, skills, &call, n);
    let placed = placements(&data, skills, &answer, &call, n);
    let _ = std::fs::remove_dir_all(&data);
    // The verdict last: an authenticated short call against the bare echo, same run.
    println!(
        "\nratio to the echo floor, authenticated tools/call list_skills: CPU per call {:.2}× sequential, {:.2}× 64 in flight (goal ≤ 2×); sequential throughput {:.2}× the echo's{}",
        call_seq.cpu_us_per_req / echo_seq.cpu_us_per_req,
        call_pipe.cpu_us_per_req / echo_pipe.cpu_us_per_req,
        call_seq.per_sec / echo_seq.per_sec,
        steps(&echo_seq, &async_echo_seq, &answer_seq, &ping_seq)
    );
    for row in placed {
        println!(
            "  placed {}: CPU per call {:.2}× sequential (echo {:.2} µs, call {:.2} µs); throughput {:.2}×{}",
            row.name,
            row.call.cpu_us_per_req / row.echo.cpu_us_per_req,
            row.echo.cpu_us_per_req,
            row.call.cpu_us_per_req,
            row.call.per_sec / row.echo.per_sec,
            steps(&row.echo, &row.async_echo, &row.answer, &row.ping)
        );
    }
}

/// A bridge whose stdio token comes from `--token-file` (a dev token for the local
/// tenant, signed with the key in `data`), which it reads on every call.
fn token_file_bridge(data: &std::path::Path, skills: &str) -> Server {
    let out = std::process::Command::new(bridge_bin())
        .arg("--data-dir")
        .arg(data)
        .args(["dev-token", "--tenant", LOCAL_TENANT])
        .output()
        .expect("running dev-token");
    assert!(out.status.success(), "dev-token failed");
    let file = data.join("bench-token");
    std::fs::write(&file, &out.stdout).unwrap();
    let mut bridge = Server::bridge_initialized_with(
        data,
        skills,
        &["--token-file", file.to_str().expect("a UTF-8 temp path")],
    );
    bridge.sequential(&json!({"method": "ping"}), 10);
    bridge
}

/// Where the floor's CPU goes before the call's own work, for the verdict lines: the same
/// echo on Tokio pipes (what waiting in `epoll_wait` costs), that server answering with
/// the call's result (what reading the request and writing those bytes costs: all of a
/// call but its work), and the bridge's `ping` (a message through the bridge that does
/// nothing), each against the bare echo.
fn steps(echo: &Stats, async_echo: &Stats, answer: &Stats, ping: &Stats) -> String {
    let x = |s: &Stats| s.cpu_us_per_req / echo.cpu_us_per_req;
    format!(
        "; echo on Tokio pipes {:.2}×, the call's answer on Tokio pipes {:.2}×, bridge ping {:.2}×",
        x(async_echo),
        x(answer),
        x(ping)
    )
}

/// One placement's sequential figures.
struct Placed {
    name: &'static str,
    echo: Stats,
    async_echo: Stats,
    answer: Stats,
    ping: Stats,
    call: Stats,
}

/// The sequential echo and call again with the server placed the same way for both: on
/// this process's CPU, and on a CPU of its own. Unpinned, the scheduler may keep a
/// server that answers in a few µs (the echo) on its client's CPU, where a round trip is
/// a switch between two threads, and wake one that takes longer (the bridge) on the other
/// CPU, where each message costs a cross-CPU wake-up, which on a VM that never polls in
/// idle is tens of µs of the woken side's CPU time: two placements compared. The echo on
/// Tokio pipes, the call's answer on them and the bridge's `ping` are measured in each
/// placement too.
fn placements(
    data: &std::path::Path,
    skills: &str,
    answer: &std::path::Path,
    call: &Value,
    n: u64,
) -> Vec<Placed> {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;
    let me = Pid::from_raw(0);
    let Ok(all) = sched_getaffinity(me) else {
        return Vec::new();
    };
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| all.is_set(c).unwrap_or(false))
        .collect();
    let pin = |cpu: usize| {
        let mut set = CpuSet::new();
        set.set(cpu).expect("a CPU of this machine");
        sched_setaffinity(me, &set).expect("pinning this process");
    };
    let ping = json!({"method": "ping"});
    let mut rows = Vec::new();
    let mut layouts = vec![("on one CPU", cpus[0])];
    if let Some(&other) = cpus.get(1) {
        layouts.push(("on two CPUs", other));
    }
    println!(
        "\nplaced: this process on CPU {}, the server on CPU …",
        cpus[0]
    );
    for (name, server_cpu) in layouts {
        // A child inherits the affinity of the thread that starts it, and its threads
        // inherit the child's.
        pin(server_cpu);
        let mut echo = Server::echo();
        let mut async_echo = Server::async_echo();
        let mut answer = Server::answer_floor(answer);
        let mut bridge = Server::bridge(&data.join(format!("placed-{server_cpu}")), skills);
        pin(cpus[0]);
        bridge.sequential(call, n / 10);
        echo.sequential(&ping, n / 10);
        async_echo.sequential(&ping, n / 10);
        answer.sequential(&ping, n / 10);
        let row = |what: &str, server: &mut Server, message: &Value| {
            report(
                &format!("{name} ({server_cpu}): {what}, sequential"),
                server.sequential(message, n),
            )
        };
        rows.push(Placed {
            name,
            echo: row("echo", &mut echo, &ping),
            async_echo: row("echo on Tokio pipes", &mut async_echo, &ping),
            answer: row("the call's answer on Tokio pipes", &mut answer, &ping),
            ping: row("bridge ping", &mut bridge, &ping),
            call: row("tools/call", &mut bridge, call),
        });
    }
    let _ = sched_setaffinity(me, &all);
    rows
}

/// CONTRACT §9: a down collector never slows a call. The same tools/call with no exporter,
/// with only the metrics scrape on, with a working OTLP receiver (the test suite's; gRPC
/// and HTTP), with `--otlp-endpoint` at a port nobody listens on (both protocols), and at
/// a listener that accepts and never answers; three interleaved rounds each, so the
/// spread between rounds shows the noise.
fn collector_down(data: &std::path::Path, skills: &str, call: &Value, n: u64) {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hung_url = format!("http://{}", hung.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<_> = hung.incoming().flatten().collect();
        drop(held);
    });
    let up = collector::Collector::start();
    let up_http = collector::Collector::start_http();
    let http = ["--otlp-protocol", "http/protobuf", "--otlp-endpoint"];
    let mut configs = [
        ("no exporter", Vec::<&str>::new()),
        (
            "metrics scraped, no exporter",
            vec!["--metrics-listen", "127.0.0.1:0"],
        ),
        (
            "collector up",
            vec!["--otlp-endpoint", up.endpoint.as_str()],
        ),
        (
            "collector up (http)",
            [&http[..], &[up_http.endpoint.as_str()]].concat(),
        ),
        (
            "collector refused",
            vec!["--otlp-endpoint", refused.as_str()],
        ),
        (
            "collector refused (http)",
            [&http[..], &[refused.as_str()]].concat(),
        ),
        (
            "collector never answers",
            vec!["--otlp-endpoint", hung_url.as_str()],
        ),
    ]
    .map(|(name, args)| {
        let dir = data.join(name.replace(' ', "-"));
        (name, Server::bridge_initialized_with(&dir, skills, &args))
    });
    println!("\nspan export with the collector down: tools/call list_skills, sequential");
    for (_, server) in configs.iter_mut() {
        server.sequential(call, n / 10);
    }
    for round in 1..=3 {
        for (name, server) in configs.iter_mut() {
            report(
                &format!("round {round}: {name}"),
                server.sequential(call, n / 2),
            );
        }
    }
}

fn report(name: &str, s: Stats) -> Stats {
    println!(
        "{name:<44} {:>10.0} {:>9.1} {:>9.1} {:>12.2}",
        s.per_sec,
        s.p50.as_secs_f64() * 1e6,
        s.p99.as_secs_f64() * 1e6,
        s.cpu_us_per_req
    );
    s
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Time from spawn to the first `initialize` answer: (p50, max).
fn startup(data: &std::path::Path, skills: &str, runs: usize) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let mut s = Server::bridge_uninitialized(data, skills);
            s.initialize();
            t.elapsed()
        })
        .collect();
    times.sort_unstable();
    (percentile(&times, 0.5), *times.last().unwrap())
}
