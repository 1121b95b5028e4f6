//! Interop against the reference server `@modelcontextprotocol/server-everything`
//! over stdio and Streamable HTTP, with the blocking client.
//!
//! The server is installed by `scripts/test` into `.deps/node` (override with
//! `MCPWIRE_NODE_MODULES`; `MCPWIRE_NODE` names `node`); HTTP mode is forced
//! onto 127.0.0.1 by mcpwire-tokio's `tests/interop/loopback.cjs` preload.
//! A missing server fails the test (never a silent skip).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mcpwire_blocking::types::{CallToolResult, Content, Root};
use mcpwire_blocking::{CallOptions, Client, ConnectOptions, ServerConfig};
use serde_json::{json, Value};

const ROOT_URI: &str = "file:///tmp/mcpwire-interop-root";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

fn everything_entry() -> PathBuf {
    let modules = std::env::var_os("MCPWIRE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".deps/node/node_modules"));
    let entry = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "interop prerequisite missing: {} (run `scripts/test` once, or set MCPWIRE_NODE_MODULES)",
        entry.display()
    );
    entry
}

fn node() -> String {
    std::env::var("MCPWIRE_NODE").unwrap_or_else(|_| "node".into())
}

#[derive(Default)]
struct Seen {
    roots: AtomicUsize,
    sampling: Mutex<Vec<Value>>,
    elicitation: AtomicUsize,
}

fn full_options(seen: &Arc<Seen>) -> ConnectOptions {
    let (r, s, e) = (seen.clone(), seen.clone(), seen.clone());
    ConnectOptions::new()
        .client_info("mcpwire-interop", "0.0.0")
        .timeout(Duration::from_secs(15))
        .roots(move || {
            r.roots.fetch_add(1, Ordering::SeqCst);
            let mut root: Root = serde_json::from_value(json!({ "uri": ROOT_URI })).unwrap();
            root.name = Some("interop root".into());
            vec![root]
        })
        .sampling(move |params| {
            s.sampling.lock().unwrap().push(params);
            Ok(json!({
                "role": "assistant",
                "content": { "type": "text", "text": "four, says the fake model" },
                "model": "mcpwire-fake-model",
                "stopReason": "endTurn",
            }))
        })
        .elicitation(move |_params| {
            if e.elicitation.fetch_add(1, Ordering::SeqCst) == 0 {
                Ok(json!({ "action": "accept",
                           "content": { "name": "Ada Lovelace", "check": true, "integer": 7 } }))
            } else {
                Ok(json!({ "action": "decline" }))
            }
        })
}

fn ok_text(what: &str, r: &CallToolResult) -> String {
    assert!(!r.is_error(), "{what} returned isError: {r:?}");
    r.text()
}

fn exercise(client: Client, seen: Arc<Seen>, transport: &str) {
    assert_eq!(client.server().server_info.name, "mcp-servers/everything");
    assert_eq!(client.transport(), transport);

    // A long call with progress on one thread, echoes on others.
    let progress = Arc::new(Mutex::new(Vec::new()));
    let long = {
        let (c, p) = (client.clone(), progress.clone());
        thread::spawn(move || {
            c.call_tool_with(
                "trigger-long-running-operation",
                json!({ "duration": 1.5, "steps": 5 }),
                CallOptions::new()
                    .timeout(Duration::from_secs(15))
                    .on_progress(move |x| p.lock().unwrap().push(x.progress)),
            )
        })
    };
    let echoes: Vec<_> = (0..4)
        .map(|t| {
            let c = client.clone();
            thread::spawn(move || {
                for i in 0..5 {
                    let m = format!("hello interop {t}-{i}");
                    let r = c.call_tool("echo", json!({ "message": m })).expect("echo");
                    assert_eq!(ok_text("echo", &r), format!("Echo: {m}"));
                }
            })
        })
        .collect();
    for e in echoes {
        e.join().unwrap();
    }
    let long = long.join().unwrap().expect("long operation");
    assert!(ok_text("long", &long).contains("Long running operation completed"));
    assert_eq!(*progress.lock().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0]);

    // The server asks for the roots by itself after initialize.
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.roots.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the server never asked for roots"
        );
        thread::sleep(Duration::from_millis(50));
    }

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tools = client.list_tools().expect("tools/list");
        if tools.iter().any(|t| t.name == "trigger-sampling-request") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "capability tools missing: {tools:?}"
        );
        thread::sleep(Duration::from_millis(100));
    }

    let sum = client
        .call_tool("get-sum", json!({ "a": 2, "b": 3.5 }))
        .unwrap();
    assert_eq!(ok_text("get-sum", &sum), "The sum of 2 and 3.5 is 5.5.");
    let image = client.call_tool("get-tiny-image", json!({})).unwrap();
    assert!(image
        .content
        .iter()
        .any(|c| matches!(c, Content::Image { mime_type, .. } if mime_type == "image/png")));
    let roots = client.call_tool("get-roots-list", json!({})).unwrap();
    assert!(ok_text("roots", &roots).contains(ROOT_URI));
    let sampled = client
        .call_tool(
            "trigger-sampling-request",
            json!({ "prompt": "What is 2+2?", "maxTokens": 20 }),
        )
        .unwrap();
    assert!(ok_text("sampling", &sampled).contains("four, says the fake model"));
    assert_eq!(seen.sampling.lock().unwrap().len(), 1);
    let accepted = client
        .call_tool("trigger-elicitation-request", json!({}))
        .unwrap();
    assert!(ok_text("elicitation", &accepted).contains("Ada Lovelace"));

    let big: String = (0..300_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let r = client.call_tool("echo", json!({ "message": big })).unwrap();
    assert!(ok_text("big echo", &r) == format!("Echo: {big}"));

    let resources = client.list_resources().expect("resources/list");
    assert!(!resources.is_empty());
    let prompts = client.list_prompts().expect("prompts/list");
    assert!(prompts.iter().any(|p| p.name == "simple-prompt"));
    client.ping().unwrap();
    client.close().unwrap();
}

#[test]
fn everything_stdio() {
    let seen = Arc::new(Seen::default());
    let config = ServerConfig::stdio(node())
        .arg(everything_entry().to_string_lossy().into_owned())
        .arg("stdio");
    let client = Client::connect_with(config, full_options(&seen)).expect("connect over stdio");
    exercise(client, seen, "stdio");
}

/// A server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn everything_http() -> (Server, u16) {
    let preload = repo_root().join("adapters/tokio/tests/interop/loopback.cjs");
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(node())
        .arg("--require")
        .arg(preload)
        .arg(everything_entry())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server-everything");
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen"
        );
        thread::sleep(Duration::from_millis(50));
    }
    (server, port)
}

#[test]
fn everything_streamable_http() {
    let (_server, port) = everything_http();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let seen = Arc::new(Seen::default());
    let client = Client::connect_with(ServerConfig::http(&url), full_options(&seen))
        .expect("connect over Streamable HTTP");
    exercise(client, seen, "streamable-http");
}

#[test]
fn everything_one_shot_call() {
    let (_server, port) = everything_http();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let r: CallToolResult = mcpwire_blocking::call(
        &url,
        "tools/call",
        json!({"name": "get-sum", "arguments": {"a": 1, "b": 2}}),
    )
    .expect("one-shot call");
    assert_eq!(ok_text("get-sum", &r), "The sum of 1 and 2 is 3.");
}
