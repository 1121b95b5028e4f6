//! `mcpwire-bench`: MCP clients side by side, measured in one run.
//!
//! ```text
//! cargo run --release -p mcpwire-bench -- [all | seq inflight big http connect]
//!           [--smoke] [--clients mcpwire-tokio,rmcp,raw] [--mode both|pinned|unpinned]
//! ```
//!
//! For every variant of every scenario, in each mode, and for each client,
//! this orchestrator starts a client process (this binary, hidden
//! subcommand `__client`), under `taskset -c 0` when pinned. That process
//! starts the echo server (which inherits the pinning), connects, warms
//! up, runs the timed runs, and reports rates, latency percentiles and its
//! own peak RSS. Nothing is asserted: the table and the goals are printed.
//!
//! `--smoke` (or `MCPWIRE_BENCH_SMOKE=1`) runs everything with tiny counts
//! in a few seconds; that is what CI runs.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod clients;
mod drive;
mod profile;
mod report;
mod scenario;

use drive::Target;
use scenario::{Job, Measured, Transport, Workload, SCENARIOS};

/// Pinned (client and server on CPU 0) or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pinned,
    Unpinned,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pinned => "pinned",
            Mode::Unpinned => "unpinned",
        }
    }
}

/// One client process's outcome.
pub struct Row {
    pub variant: usize,
    pub mode: Mode,
    pub client: &'static str,
    pub result: Result<Measured, String>,
}

const USAGE: &str =
    "usage: mcpwire-bench [profile] [all | seq | inflight | big | http | connect]... \
[--smoke] [--clients a,b,...] [--mode both|pinned|unpinned] [--calls N] [--exe PATH] (the last two: profile) [--svg FILE]";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("__client") {
        std::process::exit(client_process(&args[1..]));
    }
    if let Err(e) = orchestrate(&args) {
        eprintln!("mcpwire-bench: {e}");
        std::process::exit(2);
    }
}

fn orchestrate(args: &[String]) -> Result<(), String> {
    let mut smoke = std::env::var_os("MCPWIRE_BENCH_SMOKE").is_some_and(|v| v != "0");
    let mut scenarios: Vec<u8> = Vec::new();
    let mut clients: Vec<&'static str> = clients::CLIENTS.iter().map(|c| c.name).collect();
    let mut modes = vec![Mode::Pinned, Mode::Unpinned];
    let mut profiling = false;
    let mut profile_calls = 2_000;
    let mut profile_exe: Option<std::path::PathBuf> = None;
    let mut svg_path = clients::peers::root().join("target/mcpwire-bench.svg");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "profile" => profiling = true,
            "--calls" => {
                profile_calls = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or(USAGE)?
            }
            "--exe" => profile_exe = Some(it.next().ok_or(USAGE)?.into()),
            "--smoke" => smoke = true,
            "--svg" => svg_path = it.next().ok_or(USAGE)?.into(),
            "--clients" => {
                let list = it.next().ok_or(USAGE)?;
                clients = list
                    .split(',')
                    .map(|name| {
                        clients::CLIENTS
                            .iter()
                            .find(|c| c.name == name)
                            .map(|c| c.name)
                            .ok_or_else(|| format!("unknown client `{name}`"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--mode" => {
                modes = match it.next().map(String::as_str) {
                    Some("both") => vec![Mode::Pinned, Mode::Unpinned],
                    Some("pinned") => vec![Mode::Pinned],
                    Some("unpinned") => vec![Mode::Unpinned],
                    _ => return Err(USAGE.into()),
                }
            }
            "all" => scenarios.extend(SCENARIOS.iter().map(|s| s.1)),
            "-h" | "--help" => {
                println!("{USAGE}");
                for (name, n, what) in SCENARIOS {
                    println!("  {name:<9} ({n}) {what}");
                }
                return Ok(());
            }
            name => match SCENARIOS.iter().find(|s| s.0 == name) {
                Some(s) => scenarios.push(s.1),
                None => return Err(format!("unknown scenario `{name}`\n{USAGE}")),
            },
        }
    }
    if scenarios.is_empty() {
        scenarios.extend(SCENARIOS.iter().map(|s| s.1));
    }
    scenarios.dedup();

    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let server = exe.with_file_name("bench-echo-server");
    build_server()?;
    if !server.exists() {
        return Err(format!(
            "{} not found: build it with `cargo build --release -p mcpwire-bench` (all binaries)",
            server.display()
        ));
    }
    if profiling {
        // The peers run in their own runtime behind a `__client` wrapper;
        // valgrind or strace on that wrapper would measure only the wrapper.
        clients.retain(|c| {
            let peer = clients::peers::PEERS.contains(c);
            if peer {
                eprintln!(
                    "mcpwire-bench: {c} left out: profile measures this process's clients only"
                );
            }
            !peer
        });
        // `--exe`: the clients of another build of this bench (an older
        // commit's, say), measured the same way.
        let exe = profile_exe.unwrap_or(exe);
        return profile::run(&exe, &server, &scenarios, &clients, profile_calls);
    }
    // The peers (TypeScript and Python SDK clients) are installed before
    // anything is timed; one that cannot be is left out, saying why.
    if clients.iter().any(|c| clients::peers::PEERS.contains(c)) {
        let install = clients::peers::root().join("bench/peers/install");
        let _ = Command::new(&install).stdin(Stdio::null()).status();
        clients.retain(|c| {
            let ok = clients::peers::installed(c);
            if !ok {
                eprintln!(
                    "mcpwire-bench: {c} left out: {} could not install it",
                    install.display()
                );
            }
            ok
        });
    }
    if modes.contains(&Mode::Pinned) && !taskset_works() {
        eprintln!("mcpwire-bench: `taskset -c 0` does not work here; pinned runs are skipped");
        modes.retain(|m| *m == Mode::Unpinned);
    }

    let variants: Vec<_> = scenarios
        .iter()
        .flat_map(|&n| scenario::variants(n, smoke))
        .collect();
    let limit_secs = if smoke { 60 } else { 600 };
    let total: usize = variants
        .iter()
        .map(|v| {
            let n = clients
                .iter()
                .filter(|&&c| {
                    v.transport != Transport::Stdio
                        || !clients::CLIENTS.iter().any(|d| d.name == c && d.http_only)
                })
                .count();
            n * modes.len()
        })
        .sum();
    let started = Instant::now();
    let load_before = report::loadavg();
    let mut rows = Vec::new();
    for (vi, variant) in variants.iter().enumerate() {
        for &mode in &modes {
            for &client in &clients {
                let http_only = clients::CLIENTS
                    .iter()
                    .any(|c| c.name == client && c.http_only);
                if http_only && variant.transport == Transport::Stdio {
                    continue;
                }
                eprint!(
                    "[{}/{total}] {} · {} · {client} … ",
                    rows.len() + 1,
                    variant.label,
                    mode.name()
                );
                let job = Job {
                    variant: variant.clone(),
                    server: server.display().to_string(),
                    limit_secs,
                };
                let t = Instant::now();
                let result = spawn_client(&exe, mode, client, &job);
                match &result {
                    Ok(m) => eprintln!(
                        "{:.0}/s ({:.1}s)",
                        report::median(&m.rates),
                        t.elapsed().as_secs_f64()
                    ),
                    Err(e) => eprintln!("FAILED: {e}"),
                }
                rows.push(Row {
                    variant: vi,
                    mode,
                    client,
                    result,
                });
            }
        }
    }
    let failed = rows.iter().filter(|r| r.result.is_err()).count();
    let report = report::Report {
        variants: &variants,
        rows: &rows,
        modes: &modes,
        smoke,
        load_before,
        load_after: report::loadavg(),
        elapsed: started.elapsed(),
    };
    report::print(&report);
    // The chart of the first mode run (pinned, when it ran).
    if let Some(&mode) = modes.first() {
        match std::fs::write(&svg_path, report::svg(&report, mode)) {
            Ok(()) => eprintln!("mcpwire-bench: chart written to {}", svg_path.display()),
            Err(e) => eprintln!("mcpwire-bench: could not write {}: {e}", svg_path.display()),
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {total} client runs failed"));
    }
    Ok(())
}

/// Under `cargo run`, which builds only this binary, brings the server
/// binary up to date too (a no-op when it is).
fn build_server() -> Result<(), String> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(());
    };
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-q",
        "-p",
        "mcpwire-bench",
        "--bin",
        "bench-echo-server",
    ]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!("building bench-echo-server failed: {other:?}")),
    }
}

/// Whether `taskset -c 0 true` runs.
fn taskset_works() -> bool {
    Command::new("taskset")
        .args(["-c", "0", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs one client process and reads its `RESULT` line.
fn spawn_client(
    exe: &std::path::Path,
    mode: Mode,
    client: &str,
    job: &Job,
) -> Result<Measured, String> {
    let job_json = serde_json::to_string(job).map_err(|e| e.to_string())?;
    let mut cmd = match mode {
        Mode::Pinned => {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(exe);
            c
        }
        Mode::Unpinned => Command::new(exe),
    };
    let out = cmd
        .args(["__client", client, &job_json])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("spawn: {e}"))?;
    Measured::from_output(&out)
}

/// The hidden `__client <name> <job-json>` entry: one client, one job, in
/// this process. Prints `RESULT <json>`; exit code 1 on failure.
fn client_process(args: &[String]) -> i32 {
    let [name, job] = args else {
        eprintln!("usage: mcpwire-bench __client <client> <job-json>");
        return 2;
    };
    let result = (|| -> Result<Measured, drive::Error> {
        let job: Job = serde_json::from_str(job)?;
        let limit = Duration::from_secs(job.limit_secs);
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            eprintln!("gave up after {}s", limit.as_secs());
            std::process::exit(3);
        });
        let def = clients::CLIENTS
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| format!("unknown client `{name}`"))?;
        match job.variant.transport {
            Transport::Stdio => {
                let (args, fresh) = match job.variant.workload {
                    Workload::Connect { probe, fresh, .. } => (
                        probe.server_args().iter().map(|s| s.to_string()).collect(),
                        fresh,
                    ),
                    Workload::Calls { .. } => (Vec::new(), false),
                };
                (def.run)(
                    &job,
                    &Target::Stdio {
                        command: job.server.clone(),
                        args,
                        fresh,
                    },
                )
            }
            Transport::Http { sse } => {
                let mut server = Command::new(&job.server)
                    .args(["--http", if sse { "sse" } else { "json" }])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()?;
                let mut line = String::new();
                BufReader::new(server.stdout.take().expect("piped")).read_line(&mut line)?;
                let port = line
                    .trim()
                    .strip_prefix("PORT ")
                    .ok_or_else(|| format!("server said {line:?}"))?;
                let url = format!("http://127.0.0.1:{port}/mcp");
                let result = (def.run)(&job, &Target::Http { url });
                drop(server.stdin.take()); // the server exits on stdin EOF
                server.wait()?;
                result
            }
        }
    })();
    match result {
        Ok(m) => {
            println!("RESULT {}", serde_json::to_string(&m).expect("JSON"));
            0
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            1
        }
    }
}
