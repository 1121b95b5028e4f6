//! The interop matrix: real servers of every SDK family, old and new, each
//! over stdio and over Streamable HTTP where it serves it, connected with
//! default settings (`ConnectOptions::new()`: the era probe, the default
//! timeouts). Each case starts a fresh server, connects, lists the tools,
//! calls `echo`, reads a resource where the server offers one, closes, and
//! checks that no process of the server is left: each process a case starts
//! has `MCPWIRE_INTEROP_MATRIX_CASE` in its environment (inherited by
//! whatever it starts), and after the close (for HTTP, after the test kills
//! the server's group) no process with it, none of the server's pids seen
//! while connected and nothing in their process groups may be alive.
//!
//! Each case also knows the era the server must speak, and so how the
//! probe must end: a dual-era server answers `server/discover`, a server of
//! the handshake era refuses it, except rmcp 0.8.5, which ends its process
//! and is started again. A Python server still importing its libraries when
//! the probe's 1 s is up must not be taken for a silent one (the probe
//! waits while its stdin is unread).
//!
//! | server | versions | built or installed by `scripts/test` into |
//! |---|---|---|
//! | rmcp (Rust SDK) | 0.8.5 (exits on the probe), 3.11.0 (both eras) | `target/interop-servers` from `tests/interop-servers` |
//! | Python SDK `mcp`, FastMCP 1 | 1.30.0 | `.deps/venv-mcp1` |
//! | Python SDK `mcp`, MCPServer | 2.3.0 | `.deps/venv` |
//! | server-everything (TypeScript SDK) | 2025.11.25 with sdk 1.22.0, 2026.8.31 | `.deps/node-everything-2025`, `.deps/node` |
//! | standalone FastMCP | 2.14.7, 4.1.4 (fastmcp-slim of fastmcp-tasks) | `.deps/venv-fastmcp2`, `.deps/tasks-venv` |
//!
//! The Python servers are `tests/interop/matrix_server.py`. Every case runs,
//! one after the other (nextest runs this test alone: `.config/nextest.toml`),
//! then the table is printed and written to `target/interop-matrix.md`; the
//! test fails if any case failed. "connect ms" is the wall clock around
//! `Client::connect_with`: for stdio it includes starting the process (and
//! starting it again after a probe it did not survive); for HTTP the server
//! is already listening. A missing install fails its case, naming
//! `scripts/test`. Overrides: `MCPWIRE_INTEROP_SERVERS` (the folder of the
//! rmcp binaries), `MCPWIRE_NODE_MODULES`, `MCPWIRE_PYTHON` (as the other
//! interop tests).

mod interop;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use interop::*;
use mcpwire::connection::EraFinding;
use mcpwire::transport::stdio::Signal;
use mcpwire_adapter::process::Group;
use mcpwire_tests::suite::support::process_alive;
use mcpwire_tokio::{Client, ConnectOptions, ServerConfig};
use serde_json::json;
use tokio::process::Command;

/// Bound of connecting (a slow Python start, the probe, a restart).
const CONNECT_LIMIT: Duration = Duration::from_secs(60);
/// Bound of every other step.
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// Bound of a whole case.
const CASE_LIMIT: Duration = Duration::from_secs(150);

const MESSAGE: &str = "interop matrix";

// ----- what each case starts ------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "streamable-http",
        }
    }
}

/// How to start a server: the program and its arguments before the mode
/// (`stdio`, or `http PORT`), or server-everything's own way.
#[derive(Clone)]
enum Launch {
    /// `program args… stdio` / `program args… http PORT`.
    Modes { program: PathBuf, args: Vec<String> },
    /// `node entry stdio` / `node --require loopback entry streamableHttp`
    /// with `PORT` in the environment.
    Everything { entry: PathBuf },
}

impl Launch {
    fn stdio(&self, mark: &str) -> ServerConfig {
        let config = match self {
            Launch::Modes { program, args } => {
                let mut config = ServerConfig::stdio(program.to_string_lossy().into_owned());
                for arg in args {
                    config = config.arg(arg.clone());
                }
                config.arg("stdio")
            }
            Launch::Everything { entry } => ServerConfig::stdio(node())
                .arg(entry.to_string_lossy().into_owned())
                .arg("stdio"),
        };
        config.env(MARK, mark)
    }

    fn http(&self, port: u16, mark: &str) -> Command {
        let mut cmd = match self {
            Launch::Modes { program, args } => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg("http").arg(port.to_string());
                cmd
            }
            Launch::Everything { entry } => {
                let mut cmd = Command::new(node());
                cmd.arg("--require")
                    .arg(loopback_preload())
                    .arg(entry)
                    .arg("streamableHttp")
                    .env("PORT", port.to_string());
                cmd
            }
        };
        // A group of its own, as the client gives a stdio server: what is
        // left of it after the kill can be found.
        cmd.process_group(0).env(MARK, mark);
        cmd
    }
}

/// The era a server speaks when it is connected to with default settings,
/// and how the probe finds it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Era {
    /// The `initialize` handshake (2025-11-25 and before), after an error
    /// answer to `server/discover` on the same process or session.
    Legacy,
    /// The handshake, on a process started again: the server ended its
    /// first one on the probe (or said nothing).
    LegacyRestarted,
    /// 2026-07-28: `server/discover` answered.
    Modern,
}

impl Era {
    fn describe(self) -> &'static str {
        match self {
            Era::Legacy => "the handshake era after server/discover refused",
            Era::LegacyRestarted => "the handshake era on a process started again",
            Era::Modern => "2026-07-28 (server/discover answered)",
        }
    }
}

/// What a case must find.
#[derive(Clone, Copy)]
struct Expect {
    era: Era,
    /// What `serverInfo.version` must say, where the server reports its
    /// library's version.
    reports_version: Option<&'static str>,
}

struct Case {
    server: &'static str,
    /// The version found installed (or the expected one when missing).
    version: String,
    transport: Transport,
    /// How to start it, or why it cannot be (a missing install).
    launch: Result<Launch, String>,
    expect: Expect,
}

fn missing(what: &str, path: &Path, var: Option<&str>) -> String {
    let or_var = var.map_or(String::new(), |v| {
        format!(", or point {v} at an existing one")
    });
    format!(
        "{what} not found at {}: run `scripts/test` once (it installs the interop \
         servers into .deps/ and builds tests/interop-servers){or_var}",
        path.display()
    )
}

/// The folder of the rmcp servers' binaries.
fn rmcp_dir() -> PathBuf {
    std::env::var_os("MCPWIRE_INTEROP_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/interop-servers/debug"))
}

fn rmcp(binary: &str) -> Result<Launch, String> {
    let program = rmcp_dir().join(binary);
    if !program.is_file() {
        return Err(missing(
            &format!("the rmcp server `{binary}`"),
            &program,
            Some("MCPWIRE_INTEROP_SERVERS"),
        ));
    }
    Ok(Launch::Modes {
        program,
        args: Vec::new(),
    })
}

/// A venv's Python running `matrix_server.py FLAVOUR`, and the versions of
/// `packages` installed there ("2.14.7 (mcp 1.30.0)"); `expected` when the
/// venv is missing.
fn python_server(
    venv: PathBuf,
    var: Option<&str>,
    flavour: &str,
    packages: &[&str],
    expected: &str,
) -> (String, Result<Launch, String>) {
    if !venv.is_file() {
        return (expected.into(), Err(missing("a Python venv", &venv, var)));
    }
    let script = format!(
        "import importlib.metadata as m\n\
         for name in {packages:?}:\n\
         \x20   try: print(m.version(name))\n\
         \x20   except m.PackageNotFoundError: print('-')\n"
    );
    let out = std::process::Command::new(&venv)
        .args(["-c", &script])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", venv.display()));
    let versions: Vec<String> = match &out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    let Some(first) = versions.iter().position(|v| v != "-") else {
        let names = packages.join(" or ");
        return (
            expected.into(),
            Err(missing(&format!("{names} (in a venv)"), &venv, var)),
        );
    };
    let mut version = versions[first].clone();
    let others: Vec<String> = packages
        .iter()
        .zip(&versions)
        .skip(first + 1)
        .filter(|(_, v)| *v != "-")
        .map(|(name, v)| format!("{name} {v}"))
        .collect();
    if !others.is_empty() {
        version = format!("{version} ({})", others.join(", "));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/matrix_server.py");
    let launch = Launch::Modes {
        program: venv,
        args: vec![script.to_string_lossy().into_owned(), flavour.into()],
    };
    (version, Ok(launch))
}

fn package_version(package_json: &Path) -> Option<String> {
    let text = std::fs::read_to_string(package_json).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["version"].as_str().map(str::to_owned)
}

/// server-everything in `node_modules` and the SDK it resolves to.
fn everything(
    node_modules: PathBuf,
    var: Option<&str>,
    expected: &str,
) -> (String, Result<Launch, String>) {
    let package = node_modules.join("@modelcontextprotocol/server-everything");
    let entry = package.join("dist/index.js");
    if !entry.is_file() {
        return (
            expected.into(),
            Err(missing(
                "@modelcontextprotocol/server-everything",
                &entry,
                var,
            )),
        );
    }
    let version = package_version(&package.join("package.json")).unwrap_or_else(|| "?".into());
    // Node looks in the package's own node_modules first.
    let sdk = [
        package.join("node_modules/@modelcontextprotocol/sdk/package.json"),
        node_modules.join("@modelcontextprotocol/sdk/package.json"),
    ]
    .iter()
    .find_map(|p| package_version(p))
    .unwrap_or_else(|| "?".into());
    (
        format!("{version} (sdk {sdk})"),
        Ok(Launch::Everything { entry }),
    )
}

fn cases() -> Vec<Case> {
    let deps = repo_root().join(".deps");
    let mut cases = Vec::new();
    // Each server over the transports it serves, with the era it speaks
    // on each.
    let mut add = |server: &'static str,
                   version: String,
                   launch: Result<Launch, String>,
                   reports_version: Option<&'static str>,
                   transports: &[(Transport, Era)]| {
        for &(transport, era) in transports {
            cases.push(Case {
                server,
                version: version.clone(),
                transport,
                launch: launch.clone(),
                expect: Expect {
                    era,
                    reports_version,
                },
            });
        }
    };
    use Era::{Legacy, LegacyRestarted, Modern};
    use Transport::{Http, Stdio};

    // Exits on the probe: started again for `initialize`.
    add(
        "rmcp",
        "0.8.5".into(),
        rmcp("rmcp08-server"),
        Some("0.8.5"),
        &[(Stdio, LegacyRestarted)],
    );
    add(
        "rmcp",
        "3.11.0".into(),
        rmcp("rmcp3-server"),
        Some("3.11.0"),
        &[(Stdio, Modern), (Http, Modern)],
    );

    let (version, launch) = python_server(
        deps.join("venv-mcp1/bin/python"),
        None,
        "fastmcp1",
        &["mcp"],
        "1.30.0",
    );
    add(
        "Python SDK (FastMCP 1)",
        version,
        launch,
        None,
        &[(Stdio, Legacy), (Http, Legacy)],
    );
    let venv = std::env::var_os("MCPWIRE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| deps.join("venv/bin/python"));
    let (version, launch) =
        python_server(venv, Some("MCPWIRE_PYTHON"), "mcpserver", &["mcp"], "2.3.0");
    // Dual-era.
    add(
        "Python SDK (MCPServer)",
        version,
        launch,
        None,
        &[(Stdio, Modern), (Http, Modern)],
    );

    let (version, launch) = everything(
        deps.join("node-everything-2025/node_modules"),
        None,
        "2025.11.25",
    );
    add(
        "server-everything",
        version,
        launch,
        None,
        &[(Stdio, Legacy), (Http, Legacy)],
    );
    let (version, launch) = everything(node_modules(), Some("MCPWIRE_NODE_MODULES"), "2026.8.31");
    add(
        "server-everything",
        version,
        launch,
        None,
        &[(Stdio, Legacy), (Http, Legacy)],
    );

    let (version, launch) = python_server(
        deps.join("venv-fastmcp2/bin/python"),
        None,
        "fastmcp",
        &["fastmcp", "mcp"],
        "2.14.7",
    );
    add(
        "FastMCP",
        version,
        launch,
        None,
        &[(Stdio, Legacy), (Http, Legacy)],
    );
    let (version, launch) = python_server(
        deps.join("tasks-venv/bin/python"),
        None,
        "fastmcp",
        &["fastmcp", "fastmcp-slim", "mcp"],
        "4.1.4",
    );
    // Dual-era (on the Python SDK 2.x).
    add(
        "FastMCP",
        version,
        launch,
        None,
        &[(Stdio, Modern), (Http, Modern)],
    );
    cases
}

// ----- the processes of a case ----------------------------------------------

/// `(state, ppid, pgrp)` of process `pid` (Linux `/proc`).
fn stat(pid: u32) -> Option<(String, u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.to_owned();
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
}

/// Live (not zombie) processes of group `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    pids()
        .filter(|&pid| {
            stat(pid).is_some_and(|(state, _, pgrp)| pgrp == pgid && state != "Z" && state != "X")
        })
        .collect()
}

/// The environment variable that marks every process of a case: the
/// server gets it from its `ServerConfig` (or its `Command`), whatever it
/// starts inherits it, so that a process of the case is found however
/// short-lived, deep or detached it is.
const MARK: &str = "MCPWIRE_INTEROP_MATRIX_CASE";

/// A value of [`MARK`] for one case.
fn mark(case: usize) -> String {
    format!("{}-{case}", std::process::id())
}

/// Live processes whose environment holds `MARK=mark`, with their groups.
fn marked(mark: &str) -> BTreeSet<(u32, u32)> {
    let entry = format!("{MARK}={mark}");
    pids()
        .filter_map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let (state, _, pgrp) = stat(pid)?;
            let live = state != "Z" && state != "X";
            (live && env.split(|&b| b == 0).any(|v| v == entry.as_bytes())).then_some((pid, pgrp))
        })
        .collect()
}

/// The process group of this test.
fn own_group() -> u32 {
    stat(std::process::id()).map_or(0, |(_, _, pgrp)| pgrp)
}

/// What is left, as a message: of the processes `seen` (and of their
/// groups, unless one is ours), and any process marked `mark`.
fn leftovers(seen: &BTreeSet<(u32, u32)>, mark: &str) -> Option<String> {
    let mut left: Vec<String> = marked(mark)
        .into_iter()
        .map(|(pid, _)| format!("pid {pid}"))
        .collect();
    for &(pid, pgid) in seen {
        if process_alive(pid) {
            left.push(format!("pid {pid}"));
        }
        if pgid == own_group() {
            continue;
        }
        for member in group_members(pgid) {
            if member != pid {
                left.push(format!("pid {member} of group {pgid}"));
            }
        }
    }
    left.sort();
    left.dedup();
    (!left.is_empty()).then(|| left.join(", "))
}

/// Kills every process of group `pgid` (not ours).
fn kill_group(pgid: u32) {
    if pgid != own_group() {
        Group::new(Some(pgid)).signal(Signal::Kill);
    }
}

/// Kills what is left (after a failure).
fn kill_all(seen: &BTreeSet<(u32, u32)>, mark: &str) {
    for &(pid, pgid) in seen.iter().chain(&marked(mark)) {
        kill_group(pgid);
        if process_alive(pid) {
            mcpwire_adapter::process::signal(pid, Signal::Kill);
        }
    }
}

// ----- one case ---------------------------------------------------------------

struct Row {
    server: String,
    version: String,
    transport: &'static str,
    era: String,
    /// How the era was found, in full (for the log).
    finding: String,
    result: Result<String, String>,
    connect_ms: Option<u128>,
    /// Processes of the server while connected.
    processes: usize,
}

/// What the steps found, filled in as they go.
#[derive(Default)]
struct Found {
    era: Option<String>,
    /// How the era was found, in full.
    finding: Option<String>,
    connect_ms: Option<u128>,
    /// The server's processes once connected, with their groups.
    processes: BTreeSet<(u32, u32)>,
}

async fn step<T, E: std::fmt::Display>(
    what: &str,
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer in {limit:?}")),
    }
}

fn era_of(client: &Client) -> String {
    let finding = match client.era_finding() {
        Some(EraFinding::Discovered) => "discover answered".to_owned(),
        Some(EraFinding::Refused) => "discover refused".to_owned(),
        // Why, without the stderr it may quote (the log line has it).
        Some(EraFinding::Restarted(why)) => match why.split_once(" (") {
            Some((short, _)) => format!("restarted: {short}"),
            None => format!("restarted: {why}"),
        },
        Some(EraFinding::Pinned) => "pinned".to_owned(),
        Some(EraFinding::Remembered) => "remembered".to_owned(),
        Some(other) => other.to_string(),
        None => "?".to_owned(),
    };
    format!("{} ({finding})", client.protocol_version())
}

/// Connect, list, call, read, close. Returns what it did ("ok", or what
/// it could not do) and fills `found`.
async fn exercise(
    case_server: String,
    expect: Expect,
    config: ServerConfig,
    mark: String,
    found: Arc<Mutex<Found>>,
) -> Result<String, String> {
    let started = Instant::now();
    let client = step(
        "connect",
        CONNECT_LIMIT,
        Client::connect_with(config, ConnectOptions::new()),
    )
    .await;
    let ms = started.elapsed().as_millis();
    found.lock().unwrap().connect_ms = Some(ms);
    let client = client?;
    {
        let mut found = found.lock().unwrap();
        found.era = Some(era_of(&client));
        found.finding = client.era_finding().map(ToString::to_string);
    }
    let processes = marked(&mark);
    if processes.is_empty() {
        return Err(format!(
            "no process marked {MARK}={mark} found in /proc while connected"
        ));
    }
    found.lock().unwrap().processes = processes;
    let mut notes = Vec::new();

    // The era, and how the probe found it.
    let modern = client.protocol_version() == "2026-07-28";
    let finding = client.era_finding();
    let as_expected = match expect.era {
        Era::Modern => modern && finding == Some(&EraFinding::Discovered),
        Era::Legacy => !modern && finding == Some(&EraFinding::Refused),
        Era::LegacyRestarted => !modern && matches!(finding, Some(EraFinding::Restarted(_))),
    };
    if !as_expected {
        return Err(format!(
            "expected {}, negotiated {}",
            expect.era.describe(),
            era_of(&client)
        ));
    }

    if let Some(expected) = expect.reports_version {
        let info = &client.server().server_info;
        if info.version != expected {
            return Err(format!(
                "serverInfo says {} {}, expected {case_server} {expected}",
                info.name, info.version
            ));
        }
    }

    // Tools: `echo` must be listed (some servers register tools only after
    // `notifications/initialized`: a few tries over 5 s).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tools = step("tools/list", STEP_LIMIT, client.list_tools()).await?;
        if tools.iter().any(|t| t.name == "echo") {
            break;
        }
        if Instant::now() > deadline {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            return Err(format!("tools/list: no `echo` among {names:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let out = step(
        "tools/call echo",
        STEP_LIMIT,
        client.call_tool("echo", json!({ "message": MESSAGE })),
    )
    .await?;
    if out.is_error() || !out.text().contains(MESSAGE) {
        return Err(format!("tools/call echo: unexpected result {out:?}"));
    }

    if client.server().capabilities.resources.is_some() {
        let resources = step("resources/list", STEP_LIMIT, client.list_resources()).await?;
        // Ours first; else the first text resource; else the first.
        let pick = resources
            .iter()
            .find(|r| r.uri.starts_with("memo://interop/"))
            .or_else(|| {
                resources.iter().find(|r| {
                    r.mime_type
                        .as_deref()
                        .is_some_and(|m| m.starts_with("text/"))
                })
            })
            .or_else(|| resources.first());
        match pick {
            Some(resource) => {
                let uri = resource.uri.clone();
                let read = step(
                    &format!("resources/read {uri}"),
                    STEP_LIMIT,
                    client.read_resource(&uri),
                )
                .await?;
                let has_content = read.contents.iter().any(|c| {
                    c.text.as_deref().is_some_and(|t| !t.is_empty())
                        || c.blob.as_deref().is_some_and(|b| !b.is_empty())
                });
                if !has_content {
                    return Err(format!("resources/read {uri}: no contents: {read:?}"));
                }
            }
            None => notes.push("resources offered, none listed".to_owned()),
        }
    } else {
        notes.push("no resources offered".to_owned());
    }

    step("close", STEP_LIMIT, client.close()).await?;
    Ok(if notes.is_empty() {
        "ok".to_owned()
    } else {
        format!("ok ({})", notes.join("; "))
    })
}

async fn run_case(index: usize, case: &Case) -> Row {
    let mut row = Row {
        server: case.server.to_owned(),
        version: case.version.clone(),
        transport: case.transport.name(),
        era: "-".into(),
        finding: "-".into(),
        result: Err(String::new()),
        connect_ms: None,
        processes: 0,
    };
    let launch = match &case.launch {
        Ok(launch) => launch.clone(),
        Err(why) => {
            row.result = Err(why.clone());
            return row;
        }
    };
    let mark = mark(index);
    let mut http_server = None;
    let config = match case.transport {
        Transport::Stdio => Ok(launch.stdio(&mark)),
        Transport::Http => {
            let what = format!("{} {}", case.server, case.version);
            let mut last = String::new();
            for _ in 0..3 {
                match spawn_on_port(&what, &|port| launch.http(port, &mark), free_port()).await {
                    Ok(server) => {
                        last.clear();
                        http_server = Some(server);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            match &http_server {
                Some(server) => Ok(ServerConfig::http(format!(
                    "http://127.0.0.1:{}/mcp",
                    server.port
                ))),
                None => Err(format!("start: {last}")),
            }
        }
    };

    let found = Arc::new(Mutex::new(Found::default()));
    let mut result = match config {
        Ok(config) => {
            let server = case.server.to_owned();
            // A task of its own: a panic fails this case, not the run.
            let mut task = tokio::spawn(exercise(
                server,
                case.expect,
                config,
                mark.clone(),
                found.clone(),
            ));
            match tokio::time::timeout(CASE_LIMIT, &mut task).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => Err(format!("panicked: {e}")),
                Err(_) => {
                    task.abort(); // drops the client, which stops a stdio server
                    let _ = task.await;
                    Err(format!("not done in {CASE_LIMIT:?}"))
                }
            }
        }
        Err(e) => Err(e),
    };

    // The HTTP server is the test's to stop: the whole group, at once.
    if let Some(mut server) = http_server.take() {
        if let Some(pid) = server.child.id() {
            kill_group(pid);
        }
        let _ = tokio::time::timeout(STEP_LIMIT, server.child.wait()).await;
    }
    // Nothing of the server may be left: not the processes seen while
    // connected, nor anything in their groups, nor any process marked.
    let found = found.lock().unwrap();
    if let Some(left) = leftovers(&found.processes, &mark) {
        result = match result {
            Ok(_) => Err(format!("left after close: {left}")),
            Err(e) => Err(format!("{e}; left: {left}")),
        };
    }
    kill_all(&found.processes, &mark);
    row.processes = found.processes.len();

    row.era = found.era.clone().unwrap_or_else(|| "-".into());
    row.finding = found.finding.clone().unwrap_or_else(|| "-".into());
    row.connect_ms = found.connect_ms;
    row.result = result;
    row
}

// ----- the table --------------------------------------------------------------

fn cell(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = one_line.chars().take(220).collect();
    if short.len() < one_line.len() {
        short.push('…');
    }
    short.replace('|', "\\|")
}

fn table(rows: &[Row]) -> String {
    let header = [
        "server",
        "version",
        "transport",
        "era negotiated",
        "result",
        "connect ms",
    ];
    let body: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                cell(&r.server),
                cell(&r.version),
                r.transport.to_owned(),
                cell(&r.era),
                match &r.result {
                    Ok(done) => cell(done),
                    Err(why) => format!("**FAILED**: {}", cell(why)),
                },
                r.connect_ms.map_or("-".into(), |ms| ms.to_string()),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            body.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut s = String::from("|");
        for (i, c) in cells.iter().enumerate() {
            let pad = widths[i] - c.chars().count();
            if i == 5 {
                let _ = write!(s, " {}{c} |", " ".repeat(pad));
            } else {
                let _ = write!(s, " {c}{} |", " ".repeat(pad));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(&header.map(str::to_owned));
    out.push('|');
    for (i, &w) in widths.iter().enumerate() {
        let align = if i == 5 { ":" } else { "-" };
        let _ = write!(out, "{}{align}|", "-".repeat(w + 1));
    }
    out.push('\n');
    for r in &body {
        out.push_str(&line(r));
    }
    out
}

/// `target/` of this build (the test executable is in `target/<profile>/deps`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| repo_root().join("target"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_matrix() {
    let started = Instant::now();
    let mut rows = Vec::new();
    for (index, case) in cases().iter().enumerate() {
        let row = run_case(index, case).await;
        eprintln!(
            "interop matrix: {} {} {}: {} ({} ms, {} server process(es) while connected; era: {})",
            row.server,
            row.version,
            row.transport,
            match &row.result {
                Ok(done) => done.clone(),
                Err(why) => format!("FAILED: {why}"),
            },
            row.connect_ms.map_or("-".into(), |ms| ms.to_string()),
            row.processes,
            row.finding
        );
        rows.push(row);
    }
    let table = table(&rows);
    let failed = rows.iter().filter(|r| r.result.is_err()).count();
    let path = target_dir().join("interop-matrix.md");
    let file = format!(
        "<!-- written by adapters/tokio/tests/interop_matrix.rs \
         (cargo nextest run -p mcpwire-tokio --test interop_matrix) -->\n\n{table}\n\
         connect ms: wall clock around `Client::connect_with` with default options \
         (for stdio including the process's start). {} cases, {failed} failed, {} s.\n",
        rows.len(),
        started.elapsed().as_secs()
    );
    let written = std::fs::write(&path, &file);
    println!(
        "\ninterop matrix ({} cases, {failed} failed, {:.1} s; also in {}):\n\n{table}",
        rows.len(),
        started.elapsed().as_secs_f64(),
        path.display()
    );
    written.unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    assert_eq!(
        failed, 0,
        "{failed} interop matrix case(s) failed: see the table above"
    );
}
