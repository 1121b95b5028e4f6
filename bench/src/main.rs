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
use scenario::{Job, Measured, Transport, Via, Workload, SCENARIOS};

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
    "usage: mcpwire-bench [profile] [all | seq | inflight | big | http | connect | bridge]... \
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
    let mut clients: Vec<&'static str> = clients::CLIENTS
        .iter()
        .filter(|c| c.by_default())
        .map(|c| c.name)
        .collect();
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
    build("mcpwire-bench", "bench-echo-server")?;
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
    let bridges = scenarios.contains(&6);
    if clients.iter().any(|c| clients::peers::PEERS.contains(c)) || bridges {
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

    if bridges {
        build("mcpwire-cli", "mcpwire")?;
    }
    let variants: Vec<_> = scenarios
        .iter()
        .flat_map(|&n| scenario::variants(n, smoke))
        .filter(|v| {
            // A bridge from npm that could not be installed: left out.
            let ok = !v.via.is_peer() || clients::peers::bridge_installed(v.via);
            if !ok {
                eprintln!(
                    "mcpwire-bench: `{}` left out: its bridge is not installed",
                    v.label
                );
            }
            ok
        })
        .collect();
    let limit_secs = if smoke { 60 } else { 600 };
    let total: usize = variants
        .iter()
        .map(|v| clients.iter().filter(|&&c| runs(v, c)).count() * modes.len())
        .sum();
    let started = Instant::now();
    let load_before = report::loadavg();
    let mut rows = Vec::new();
    for (vi, variant) in variants.iter().enumerate() {
        for &mode in &modes {
            for &client in &clients {
                if !runs(variant, client) {
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

/// Whether `client` runs `variant`: the rows its definition allows (an
/// HTTP-only client no stdio row); the bridges' rows (scenario 6) have one
/// client, mcpwire-tokio, as the host.
fn runs(variant: &scenario::Variant, client: &str) -> bool {
    clients::runs(client, variant) && (variant.scenario != 6 || client == "mcpwire-tokio")
}

/// Builds binary `bin` of `package` beside this bench, in its profile (the
/// echo server; the `mcpwire` command, which the bridge rows run): under
/// `cargo run`, which builds only this binary, the others are brought up to
/// date too (a no-op when they are). Outside cargo (no `$CARGO`) the
/// binaries must be there already.
fn build(package: &str, bin: &str) -> Result<(), String> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(());
    };
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q", "-p", package, "--bin", bin]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!("building {bin} failed: {other:?}")),
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

/// Starts the echo server on Streamable HTTP; it and its URL.
fn http_echo(server: &str, sse: bool) -> Result<(std::process::Child, String), drive::Error> {
    let mut child = Command::new(server)
        .args(["--http", if sse { "sse" } else { "json" }])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .ok_or_else(|| format!("server said {line:?}"))?;
    Ok((child, format!("http://127.0.0.1:{port}/mcp")))
}

/// A free port of 127.0.0.1 (for a bridge that cannot take port 0).
fn free_port() -> Result<u16, drive::Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Scenario 6: the client through a bridge to the echo server.
fn bridged(job: &Job, def: &clients::ClientDef) -> Result<Measured, drive::Error> {
    let mcpwire = std::path::Path::new(&job.server).with_file_name("mcpwire");
    let modules = clients::peers::root().join(".deps/bench-node/node_modules");
    match job.variant.via {
        Via::Direct => Err("not a bridge".into()),
        Via::McpwireUrl | Via::McpRemote => {
            let (mut server, url) = http_echo(&job.server, false)?;
            let (command, args) = if job.variant.via == Via::McpwireUrl {
                let args = vec!["bridge".into(), "--url".into(), url];
                (mcpwire.display().to_string(), args)
            } else {
                let proxy = modules.join("mcp-remote/dist/proxy.js");
                let args = vec![
                    proxy.display().to_string(),
                    url,
                    "--transport".into(),
                    "http-only".into(),
                ];
                ("node".to_string(), args)
            };
            // mcp-remote keeps its state here, not in the user's home.
            let state = std::env::temp_dir()
                .join(format!("mcpwire-bench-mcp-remote-{}", std::process::id()));
            std::env::set_var("MCP_REMOTE_CONFIG_DIR", &state);
            let target = Target::Stdio {
                command,
                args,
                fresh: false,
            };
            let result = (def.run)(job, &target);
            drop(server.stdin.take());
            server.wait()?;
            let _ = std::fs::remove_dir_all(state);
            result
        }
        Via::McpwireListen | Via::Supergateway => {
            let (mut bridge, url) = if job.variant.via == Via::McpwireListen {
                let mut child = Command::new(&mcpwire)
                    .args(["bridge", "--listen", "127.0.0.1:0", "--"])
                    .arg(&job.server)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()?;
                let mut line = String::new();
                BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
                let url = line
                    .trim()
                    .strip_prefix("listening on ")
                    .ok_or_else(|| format!("mcpwire bridge said {line:?}"))?
                    .to_owned();
                (child, url)
            } else {
                let port = free_port()?;
                let child = Command::new("node")
                    .arg(modules.join("supergateway/dist/index.js"))
                    .args([
                        "--stdio",
                        &job.server,
                        "--outputTransport",
                        "streamableHttp",
                    ])
                    .args([
                        "--stateful",
                        "--logLevel",
                        "none",
                        "--port",
                        &port.to_string(),
                    ])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()?;
                // Ready when it accepts connections.
                let deadline = Instant::now() + Duration::from_secs(30);
                while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                    if Instant::now() > deadline {
                        return Err("supergateway did not listen within 30 s".into());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                (child, format!("http://127.0.0.1:{port}/mcp"))
            };
            let result = (def.run)(job, &Target::Http { url });
            let _ = bridge.kill();
            let _ = bridge.wait();
            result
        }
    }
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
        if job.variant.via != Via::Direct {
            return bridged(&job, def);
        }
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
                let (mut server, url) = http_echo(&job.server, sse)?;
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
