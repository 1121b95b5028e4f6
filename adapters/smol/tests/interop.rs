//! Interop on smol against real third-party servers, the ones of
//! mcpwire-tokio's `interop_*` suites (installed into `<repo>/.deps` by
//! `scripts/test`; `MCPWIRE_NODE_MODULES`, `MCPWIRE_PYTHON` and
//! `MCPWIRE_NODE` override the locations): server-everything over stdio,
//! and the Python SDK over stdio and Streamable HTTP. A shorter scenario
//! than tokio's, on the same servers: progress during concurrent calls,
//! server requests answered by handlers, typed results, graceful close. A
//! missing server fails the test, never a silent skip.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire_smol::types::{CallToolResult, Root};
use mcpwire_smol::{CallOptions, Client, ConnectOptions, ServerConfig};
use serde_json::json;
use smol::future::zip;
use smol::Timer;

/// The whole scenario of one test, at most.
const LIMIT: Duration = Duration::from_secs(60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The interop assets of mcpwire-tokio (Python server, Node preload).
fn tokio_interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tokio/tests/interop")
}

fn require(what: &str, path: PathBuf, var: &str) -> PathBuf {
    assert!(
        path.exists(),
        "interop test prerequisite missing: {what} not found at {}. Run `scripts/test` \
         once (it installs the servers into .deps/), or set {var}.",
        path.display()
    );
    path
}

fn everything_entry() -> PathBuf {
    let modules = std::env::var_os("MCPWIRE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".deps/node/node_modules"));
    require(
        "@modelcontextprotocol/server-everything",
        modules.join("@modelcontextprotocol/server-everything/dist/index.js"),
        "MCPWIRE_NODE_MODULES",
    )
}

fn python() -> PathBuf {
    let python = std::env::var_os("MCPWIRE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".deps/venv/bin/python"));
    require("the Python venv with `mcp`", python, "MCPWIRE_PYTHON")
}

fn py_script() -> String {
    tokio_interop_dir()
        .join("py_server.py")
        .to_string_lossy()
        .into_owned()
}

fn ok_text(what: &str, r: &CallToolResult) -> String {
    assert!(!r.is_error(), "{what} failed: {r:?}");
    r.text()
}

/// Runs a test scenario on smol, bounded by [`LIMIT`].
fn run(what: &str, scenario: impl std::future::Future<Output = ()>) {
    smol::block_on(async {
        let bounded = mcpwire_adapter::runtime::timeout::<mcpwire_smol::Smol, _>(LIMIT, scenario);
        assert!(bounded.await.is_some(), "timed out after {LIMIT:?}: {what}");
    });
}

/// Roots for the server to ask for; counts the asks.
fn options(asked: &Arc<AtomicUsize>) -> ConnectOptions {
    let asked = asked.clone();
    ConnectOptions::new().roots(move || {
        asked.fetch_add(1, Ordering::SeqCst);
        async {
            vec![Root {
                uri: "file:///tmp/mcpwire-interop".into(),
                name: Some("interop".into()),
                extra: Default::default(),
            }]
        }
    })
}

/// A call with progress while ten echoes run beside it.
async fn progress_during_echoes(client: &Client, tool: &str, args: serde_json::Value) -> Vec<f64> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let long = client.call_tool_with(
        tool,
        args,
        CallOptions::new()
            .timeout(Duration::from_secs(15))
            .on_progress(move |p| sink.lock().unwrap().push(p.progress)),
    );
    let echoes = async {
        for i in 0..10 {
            let r = client
                .call_tool("echo", json!({ "message": format!("hello smol {i}") }))
                .await
                .expect("echo");
            assert!(ok_text("echo", &r).contains(&format!("hello smol {i}")));
            Timer::after(Duration::from_millis(30)).await;
        }
    };
    let (long, ()) = zip(long, echoes).await;
    ok_text(tool, &long.expect("the long call"));
    let seen = seen.lock().unwrap().clone();
    seen
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        Timer::after(Duration::from_millis(50)).await;
    }
}

#[test]
fn everything_stdio() {
    run("server-everything over stdio", async {
        let asked = Arc::new(AtomicUsize::new(0));
        let node = std::env::var("MCPWIRE_NODE").unwrap_or_else(|_| "node".into());
        let config = ServerConfig::stdio(node)
            .arg(everything_entry().to_string_lossy().into_owned())
            .arg("stdio");
        let client = Client::connect_with(config, options(&asked))
            .await
            .expect("connect to server-everything");
        assert_eq!(client.transport(), "stdio");
        let progress = progress_during_echoes(
            &client,
            "trigger-long-running-operation",
            json!({ "duration": 1.0, "steps": 4 }),
        )
        .await;
        assert_eq!(progress, vec![1.0, 2.0, 3.0, 4.0]);
        // The server asks for the roots by itself after initialize.
        eventually("the server's roots/list", || {
            asked.load(Ordering::SeqCst) >= 1
        })
        .await;
        let tools = client.list_tools().await.expect("tools/list");
        assert!(tools.iter().any(|t| t.name == "get-sum"), "{tools:?}");
        let sum = client
            .call_tool("get-sum", json!({ "a": 2, "b": 3.5 }))
            .await
            .expect("get-sum");
        assert_eq!(ok_text("get-sum", &sum), "The sum of 2 and 3.5 is 5.5.");
        client.close().await.expect("close");
    });
}

/// A port that was free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    listener.local_addr().expect("local addr").port()
}

/// The Python server on Streamable HTTP; killed when dropped.
struct PyHttp {
    child: std::process::Child,
    port: u16,
}

impl Drop for PyHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn py_http() -> PyHttp {
    let port = free_port();
    let child = std::process::Command::new(python())
        .arg(py_script())
        .arg("http")
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the Python server");
    let mut server = PyHttp { child, port };
    let deadline = Instant::now() + Duration::from_secs(15);
    while smol::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .is_err()
    {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("the Python server exited ({status}) before listening on {port}");
        }
        assert!(
            Instant::now() < deadline,
            "the Python server never listened on {port}"
        );
        Timer::after(Duration::from_millis(50)).await;
    }
    server
}

async fn python_scenario(client: Client, asked: &AtomicUsize) {
    let progress = progress_during_echoes(&client, "slow", json!({ "steps": 4 })).await;
    assert_eq!(progress, vec![1.0, 2.0, 3.0, 4.0]);
    let add = client
        .call_tool("add", json!({ "a": 2, "b": 3 }))
        .await
        .expect("add");
    assert_eq!(ok_text("add", &add), "5");
    // The SDK is dual-era: the probe found 2026-07-28, so the roots come as
    // an input_required round, answered by the same roots handler.
    assert_eq!(client.protocol_version(), "2026-07-28");
    let roots = client.call_tool("where", json!({})).await.expect("where");
    assert_eq!(ok_text("where", &roots), "file:///tmp/mcpwire-interop");
    assert!(asked.load(Ordering::SeqCst) >= 1);
    client.close().await.expect("close");
}

#[test]
fn python_stdio() {
    run("Python SDK over stdio", async {
        let asked = Arc::new(AtomicUsize::new(0));
        let config = ServerConfig::stdio(python().to_string_lossy().into_owned())
            .arg(py_script())
            .arg("stdio");
        let client = Client::connect_with(config, options(&asked))
            .await
            .expect("connect over stdio");
        assert_eq!(client.transport(), "stdio");
        python_scenario(client, &asked).await;
    });
}

#[test]
fn python_streamable_http() {
    run("Python SDK over Streamable HTTP", async {
        let server = py_http().await;
        let url = format!("http://127.0.0.1:{}/mcp", server.port);
        let asked = Arc::new(AtomicUsize::new(0));
        let client = Client::connect_with(ServerConfig::http(&url), options(&asked))
            .await
            .expect("connect over Streamable HTTP");
        assert_eq!(client.transport(), "streamable-http");
        python_scenario(client, &asked).await;
    });
}
