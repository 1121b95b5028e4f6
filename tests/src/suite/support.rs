//! What the cases share: the test server (stdio and HTTP), its logs, and
//! waiting for a line in them. Public for the adapters' own tests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpwire_adapter::ServerConfig;
use serde_json::Value;

use super::Adapter;

/// The protocol era a case runs in: the test server is pinned to it
/// (`--era`), and the client (probing, as by default) finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: `initialize`, sessions (HTTP), server-to-client requests.
    Legacy,
    /// 2026-07-28: `server/discover`, the `_meta` envelope, no sessions,
    /// `input_required` results, `subscriptions/listen`.
    Modern,
}

impl Era {
    /// The test server's `--era` value.
    pub fn flag(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }

    /// The protocol version the client negotiates.
    pub fn version(self) -> &'static str {
        match self {
            Era::Legacy => "2025-11-25",
            Era::Modern => "2026-07-28",
        }
    }

    /// Whether it is 2026-07-28.
    pub fn is_modern(self) -> bool {
        self == Era::Modern
    }
}

/// The test server binary, as a string.
pub fn server_bin() -> String {
    crate::test_server_binary().to_string_lossy().into_owned()
}

/// A fresh path for a server log (`--log-file`): a file left there by an
/// earlier process with the same pid (pids are reused) is removed, since
/// the server appends.
pub fn temp_log(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "mcpwire-suite-{}-{}-{tag}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_file(&path);
    path
}

/// A fresh, empty folder to give a `mcpwire` process as its
/// `XDG_CACHE_HOME`: the eras it finds (and its tool cache) stay its own,
/// whatever ran before it (tests that are about that memory share one on
/// purpose).
pub fn fresh_cache_home() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "mcpwire-cache-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&path);
    path
}

/// The log's lines, parsed.
pub fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// How long a test waits for what another process does (a log line, an
/// exit): only reached when the test fails, so generous enough for a
/// loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until the server's log has a line satisfying `pred` (at most
/// [`PATIENCE`]).
pub async fn wait_log<A: Adapter>(path: &Path, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = log_lines(path).into_iter().find(|v| pred(v)) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "log line never appeared in {path:?}:\n{}",
            std::fs::read_to_string(path).unwrap_or_default()
        );
        A::sleep(Duration::from_millis(20)).await;
    }
}

/// A log line of the server taking in `notifications/cancelled` for `id`.
pub fn cancelled_for(id: u64) -> impl Fn(&Value) -> bool {
    move |v| {
        v["message"]["method"] == "notifications/cancelled"
            && v["message"]["params"]["requestId"] == id
    }
}

/// Whether process `pid` is running: it exists and is not a zombie (an
/// orphan's zombie lingers where init does not reap, as in containers).
/// Linux (`/proc`).
pub fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// The parent of process `pid` (Linux, `/proc`).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The test server behind `sh -c '…; true'`, as a wrapper starts a
/// server: `sh` stays its parent, and both ignore SIGTERM (and the server
/// stdin EOF), so only SIGKILL to the whole group stops them.
pub fn stdio_behind_a_wrapper(era: Era) -> ServerConfig {
    ServerConfig::stdio("sh").arg("-c").arg(format!(
        "trap '' TERM; '{}' --era {} --ignore-stdin-eof; true",
        server_bin(),
        era.flag()
    ))
}

/// The stdio test server with `args`, speaking only 2025-11-25.
pub fn stdio(args: &[&str]) -> ServerConfig {
    stdio_in(Era::Legacy, args)
}

/// The stdio test server with `args`, speaking only `era`.
pub fn stdio_in(era: Era, args: &[&str]) -> ServerConfig {
    ServerConfig::stdio(server_bin())
        .arg("--era")
        .arg(era.flag())
        .args(args.iter().copied())
}

/// The JSON-RPC id of the `n`th (from 0) `tools/call` of `tool` the
/// server logged (waiting for it, at most [`PATIENCE`]): ids depend on
/// the era (a probe, an `initialize`, a `subscriptions/listen`, re-issues).
pub async fn call_id<A: Adapter>(path: &Path, tool: &str, n: usize) -> u64 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ids: Vec<u64> = log_lines(path)
            .iter()
            .filter(|v| {
                v["message"]["method"] == "tools/call" && v["message"]["params"]["name"] == tool
            })
            .filter_map(|v| v["message"]["id"].as_u64())
            .collect();
        if let Some(id) = ids.get(n) {
            return *id;
        }
        assert!(
            Instant::now() < deadline,
            "call {n} of {tool} never logged in {path:?}"
        );
        A::sleep(Duration::from_millis(20)).await;
    }
}

/// An HTTP test server on 127.0.0.1; it stops when this is dropped (its
/// stdin closes, and it is killed).
pub struct HttpServer {
    child: std::process::Child,
    /// Its MCP endpoint.
    pub url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts an HTTP test server speaking only 2025-11-25 (see
/// [`http_server_in`]).
pub fn http_server(args: &[&str]) -> HttpServer {
    http_server_in(Some(Era::Legacy), args)
}

/// Starts an HTTP test server speaking only `era` (`None`: both, the
/// server's default) and reads the address it prints (a blocking read of
/// one line: the server prints it at once).
pub fn http_server_in(era: Option<Era>, args: &[&str]) -> HttpServer {
    let era = era.map_or("both", Era::flag);
    let mut child = std::process::Command::new(server_bin())
        .arg("--http")
        .args(["--era", era])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn test server");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("server printed its address");
    let url = first
        .trim_end()
        .strip_prefix("listening on ")
        .expect("listening line")
        .to_string();
    // A new server at this URL: whatever era a server before it on the
    // same port (ports are reused) was found to speak is not this one's.
    mcpwire_adapter::era::forget(&ServerConfig::http(&url));
    HttpServer { child, url }
}

/// What a strict server's log (`--log-file` of the HTTP test server) shows
/// of the order within sessions.
#[derive(Debug, Default)]
pub struct SessionOrder {
    /// Sessions the server created (`initialize` requests served).
    pub created: usize,
    /// Sessions whose `notifications/initialized` arrived.
    pub initialized: usize,
    /// Every message or GET of a session that reached the server before
    /// that session's `notifications/initialized` (but `ping`), and every
    /// refusal the server logged for it: each should be impossible.
    pub violations: Vec<String>,
}

/// Reads the order of each session's traffic from an HTTP test server's
/// log: `notifications/initialized` must come before anything else that
/// carries the session's id.
pub fn session_order(path: &Path) -> SessionOrder {
    let mut order = SessionOrder::default();
    let mut ready = std::collections::HashSet::new();
    for line in log_lines(path) {
        if line["event"] == "session_created" {
            order.created += 1;
        } else if line["event"] == "rejected_before_initialized" {
            order.violations.push(format!("refused: {line}"));
        } else if let (Some(session), false) = (line["session"].as_str(), line["message"].is_null())
        {
            let method = line["message"]["method"].as_str().unwrap_or("");
            if method == "notifications/initialized" {
                if ready.insert(session.to_owned()) {
                    order.initialized += 1;
                }
            } else if method != "ping" && !ready.contains(session) {
                order.violations.push(format!("before initialized: {line}"));
            }
        } else if line["http"]["method"] == "GET" {
            let session = line["http"]["headers"]["mcp-session-id"].as_str();
            if session.is_some_and(|s| !ready.contains(s)) {
                order
                    .violations
                    .push(format!("GET before initialized: {line}"));
            }
        }
    }
    order
}

impl HttpServer {
    /// The server's port.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next()?.parse().ok())
            .expect("a port in the server's URL")
    }

    /// Its endpoint under another host name (one the test proxy maps to
    /// 127.0.0.1); the era this process may remember for that URL is
    /// forgotten.
    pub fn url_named(&self, host: &str) -> String {
        let scheme = self.url.split_once("://").map_or("http", |(s, _)| s);
        let url = format!("{scheme}://{host}:{}/mcp", self.port());
        mcpwire_adapter::era::forget(&ServerConfig::http(&url));
        url
    }
}

/// Starts an HTTPS test server speaking only `era`, with the server
/// certificate of `pki` (and `args`: `--client-ca` for mutual TLS).
pub fn https_server_in(era: Era, pki: &crate::pki::Pki, args: &[&str]) -> HttpServer {
    let mut all = vec![
        "--tls",
        pki.server_cert.to_str().expect("UTF-8 temp path"),
        pki.server_key.to_str().expect("UTF-8 temp path"),
    ];
    all.extend_from_slice(args);
    let server = http_server_in(Some(era), &all);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    server
}

/// A `mcpwire-test-proxy` on 127.0.0.1 with a log of every request it
/// took; it stops when this is dropped.
pub struct TestProxy {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its port.
    pub port: u16,
    log: PathBuf,
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl TestProxy {
    /// Starts one with `args` (`--map NAME=IP`, `--require-auth USER:PASS`,
    /// `--refuse STATUS`).
    pub fn start(args: &[&str]) -> TestProxy {
        let log = temp_log("proxy");
        let mut child = std::process::Command::new(crate::test_proxy_binary())
            .args(args)
            .arg("--log-file")
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn test proxy");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("proxy printed its address");
        let url = first
            .trim_end()
            .strip_prefix("listening on ")
            .expect("listening line")
            .to_string();
        let port = url
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .expect("proxy port");
        TestProxy {
            child,
            url,
            port,
            log,
        }
    }

    /// Its URL with credentials.
    pub fn url_with(&self, user: &str, password: &str) -> String {
        format!("http://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// The requests it took so far (`method`, `target`, `auth`, `status`,
    /// `forwarded`).
    pub fn requests(&self) -> Vec<Value> {
        log_lines(&self.log)
    }
}
