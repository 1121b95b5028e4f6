//! Shared helpers of the interop tests against real third-party servers:
//! locating the installed servers, free loopback ports, spawning HTTP
//! servers and waiting for them, bounded waits.
//!
//! The servers are installed into `<repo>/.deps` by `scripts/test`; the
//! locations can be overridden with `MCPWIRE_NODE_MODULES` and
//! `MCPWIRE_PYTHON`. A missing server fails the test (never a silent skip).
//! Set `MCPWIRE_INTEROP_VERBOSE=1` to see the servers' stdout/stderr.

#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mcpwire_tokio::Client;
use tokio::process::{Child, Command};

/// How long an HTTP server may take to accept connections.
pub const STARTUP: Duration = Duration::from_secs(10);

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

fn missing(what: &str, path: &Path, var: &str) -> ! {
    panic!(
        "interop test prerequisite missing: {what} not found at {}.\n\
         Run `scripts/test` once (it installs the servers into .deps/), \
         or point {var} at an existing installation.",
        path.display()
    )
}

/// `node_modules` holding `@modelcontextprotocol/server-everything`.
pub fn node_modules() -> PathBuf {
    std::env::var_os("MCPWIRE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".deps/node/node_modules"))
}

/// The entry point of server-everything (`dist/index.js`).
pub fn everything_entry() -> PathBuf {
    let entry = node_modules().join("@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.is_file() {
        missing(
            "@modelcontextprotocol/server-everything",
            &entry,
            "MCPWIRE_NODE_MODULES",
        );
    }
    entry.to_path_buf()
}

/// The `node` executable (`MCPWIRE_NODE`, default `node` on PATH).
pub fn node() -> String {
    std::env::var("MCPWIRE_NODE").unwrap_or_else(|_| "node".into())
}

/// The preload that makes Node servers listen on 127.0.0.1 only.
pub fn loopback_preload() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/loopback.cjs")
}

/// The Python interpreter of the venv with `mcp` installed.
pub fn python() -> PathBuf {
    let python = std::env::var_os("MCPWIRE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".deps/venv/bin/python"));
    if !python.exists() {
        missing("the Python venv with `mcp`", &python, "MCPWIRE_PYTHON");
    }
    static IMPORTABLE: OnceLock<bool> = OnceLock::new();
    let importable = *IMPORTABLE.get_or_init(|| {
        std::process::Command::new(&python)
            .args(["-c", "import mcp.server.mcpserver"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !importable {
        missing(
            "an importable `mcp.server.mcpserver` (mcp==2.3.0)",
            &python,
            "MCPWIRE_PYTHON",
        );
    }
    python
}

/// The Python test server script.
pub fn py_server_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/py_server.py")
}

/// Whether to show the servers' output.
pub fn verbose() -> bool {
    std::env::var_os("MCPWIRE_INTEROP_VERBOSE").is_some_and(|v| !v.is_empty() && v != "0")
}

/// A port that was free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// A server process, killed when dropped.
pub struct ServerProcess {
    pub child: Child,
    pub port: u16,
    pub what: String,
}

impl ServerProcess {
    /// Kills the process and waits for it (so its port is free again).
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Spawns `command` (built for a port) and waits until the port accepts
/// connections. Tries a few ports in case another process took the one
/// picked.
pub async fn spawn_http_server(what: &str, make: impl Fn(u16) -> Command) -> ServerProcess {
    let mut last_error = String::new();
    for _ in 0..3 {
        let port = free_port();
        match spawn_on_port(what, &make, port).await {
            Ok(server) => return server,
            Err(e) => last_error = e,
        }
    }
    panic!("{what} did not start: {last_error}");
}

/// Spawns `command` on `port` and waits until it accepts connections.
pub async fn spawn_on_port(
    what: &str,
    make: &impl Fn(u16) -> Command,
    port: u16,
) -> Result<ServerProcess, String> {
    let mut cmd = make(port);
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    if verbose() {
        cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit());
    } else {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn {what}: {e}"))?;
    let deadline = Instant::now() + STARTUP;
    loop {
        if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .is_ok()
        {
            return Ok(ServerProcess {
                child,
                port,
                what: what.to_string(),
            });
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{what} exited ({status}) before listening on 127.0.0.1:{port} \
                 (set MCPWIRE_INTEROP_VERBOSE=1 to see its output)"
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{what} not accepting connections on 127.0.0.1:{port} after {STARTUP:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Awaits `fut` for at most `limit`, failing the test with `what`.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {limit:?}: {what}"),
    }
}

/// Polls `check` every 50 ms until it is true, for at most `limit`.
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        if Instant::now() > deadline {
            panic!("not true after {limit:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lists the tools until every name in `expected` is there (servers may
/// register some only after `notifications/initialized`), for at most 5 s.
pub async fn tools_including(
    client: &Client,
    expected: &[&str],
) -> Vec<mcpwire_tokio::types::Tool> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tools = client.list_tools().await.expect("tools/list");
        let missing: Vec<&str> = expected
            .iter()
            .copied()
            .filter(|name| !tools.iter().any(|t| t.name == *name))
            .collect();
        if missing.is_empty() {
            return tools;
        }
        if Instant::now() > deadline {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            panic!("tools {missing:?} missing from tools/list: {names:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of a tool result, asserting it is not an error.
pub fn ok_text(what: &str, result: &mcpwire_tokio::types::CallToolResult) -> String {
    assert!(!result.is_error(), "{what} returned isError: {result:?}");
    result.text()
}
