//! Interop against a server built on the official Python SDK (`mcp` 2.3.0,
//! `MCPServer`), over stdio and Streamable HTTP, in both protocol eras: the
//! 2025-11-25 handshake (pinned with `protocolEra: legacy`), and 2026-07-28,
//! which the client finds by itself (the SDK serves both), with
//! `input_required` rounds answered by the same handlers. Also the
//! transparent re-initialize after the server forgets the session (HTTP
//! 404, legacy era).
//!
//! The server is `tests/interop/py_server.py`; the venv is installed by
//! `scripts/test` into `.deps/venv` (override with `MCPWIRE_PYTHON`).

mod interop;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use interop::*;
use mcpwire_tokio::types::{Content, Root};
use mcpwire_tokio::{
    CallOptions, Client, ConnectOptions, ErrorObject, ServerConfig, ServerNotification,
};
use serde_json::json;
use tokio::process::Command;

/// Bound of one whole test.
const TEST_LIMIT: Duration = Duration::from_secs(45);

const ROOT_URI: &str = "file:///tmp/mcpwire-interop-py";

fn options(roots_asked: &Arc<AtomicUsize>) -> ConnectOptions {
    let asked = roots_asked.clone();
    ConnectOptions::new()
        .client_info("mcpwire-interop", "0.0.0")
        .timeout(Duration::from_secs(15))
        .roots(move || {
            asked.fetch_add(1, Ordering::SeqCst);
            async {
                let root: Root =
                    serde_json::from_value(json!({ "uri": ROOT_URI, "name": "py root" })).unwrap();
                vec![root]
            }
        })
        .sampling(|params| async move {
            let text = params["messages"][0]["content"]["text"]
                .as_str()
                .unwrap_or("?")
                .to_string();
            if params["maxTokens"] != 50 {
                return Err(ErrorObject::new(
                    -32602,
                    format!("unexpected params {params}"),
                ));
            }
            Ok(json!({
                "role": "assistant",
                "content": { "type": "text", "text": format!("short version of [{text}]") },
                "model": "fake-model",
                "stopReason": "endTurn",
            }))
        })
        .elicitation(|params| async move {
            // Accept when the schema is the expected one, else decline.
            let props = &params["requestedSchema"]["properties"];
            if params["message"] == "Who are you?"
                && props["name"].is_object()
                && props["age"].is_object()
            {
                Ok(json!({ "action": "accept", "content": { "name": "Grace", "age": 85 } }))
            } else {
                Ok(json!({ "action": "decline" }))
            }
        })
}

fn stdio_config() -> ServerConfig {
    ServerConfig::stdio(python().to_string_lossy().into_owned())
        .arg(py_server_script().to_string_lossy().into_owned())
        .arg("stdio")
}

/// Which era a scenario expects.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Era {
    Legacy,
    Modern,
}

fn http_command(port: u16) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(py_server_script())
        .arg("http")
        .arg(port.to_string());
    cmd
}

/// The same server mounted at `/mcp` in a Starlette app (as FastAPI users
/// do): `POST /mcp` answers `307 Location: http://127.0.0.1:PORT/mcp/`.
fn mounted_command(port: u16) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(py_server_script())
        .arg("mounted")
        .arg(port.to_string());
    cmd
}

/// `slow` with progress: returns the (progress, total, message) seen.
async fn slow_with_progress(
    client: &Client,
    steps: u32,
) -> Vec<(f64, Option<f64>, Option<String>)> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let r = client
        .call_tool_with(
            "slow",
            json!({ "steps": steps }),
            CallOptions::new()
                .timeout(Duration::from_secs(15))
                .on_progress(move |p| {
                    sink.lock()
                        .unwrap()
                        .push((p.progress, p.total, p.message.clone()))
                }),
        )
        .await
        .expect("slow");
    assert_eq!(ok_text("slow", &r), format!("done after {steps} steps"));
    let seen = seen.lock().unwrap().clone();
    seen
}

fn expected_progress(steps: u32) -> Vec<(f64, Option<f64>, Option<String>)> {
    (1..=steps)
        .map(|i| {
            (
                f64::from(i),
                Some(f64::from(steps)),
                Some(format!("step {i} of {steps}")),
            )
        })
        .collect()
}

/// The common scenario.
async fn exercise(client: Client, roots_asked: Arc<AtomicUsize>, transport: &str, era: Era) {
    let started = Instant::now();
    let info = client.server();
    assert_eq!(info.server_info.name, "mcpwire-interop-py", "{info:?}");
    assert_eq!(info.server_info.version, "1.0.0", "{info:?}");
    let versions: &[&str] = match era {
        Era::Legacy => &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        Era::Modern => &["2026-07-28"],
    };
    assert!(
        versions.contains(&client.protocol_version()),
        "unexpected protocol version {} for {era:?}",
        client.protocol_version()
    );
    assert_eq!(client.transport(), transport);

    // Tools.
    let tools = client.list_tools().await.expect("tools/list");
    // Listed again within the server's ttlMs (2026-07-28 only): from the
    // cache, unless bypassed.
    let hits = client.stats().cache_hits;
    let again = client.list_tools().await.expect("tools/list again");
    assert_eq!(again.len(), tools.len());
    let expected_hits = match era {
        Era::Legacy => 0,
        Era::Modern => 1,
    };
    assert_eq!(client.stats().cache_hits - hits, expected_hits, "{era:?}");
    let fresh = client
        .list_tools_with(CallOptions::new().bypass_cache())
        .await
        .expect("tools/list bypassing the cache");
    assert_eq!(fresh.len(), tools.len());
    assert_eq!(client.stats().cache_hits - hits, expected_hits);
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "add",
            "ask_name",
            "echo",
            "introduce",
            "roots",
            "slow",
            "summarize",
            "touch",
            "where"
        ]
    );
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert_eq!(
        add.input_schema["properties"]["a"]["type"], "integer",
        "{add:?}"
    );
    assert!(add.output_schema.is_some(), "{add:?}");

    let echo = client
        .call_tool("echo", json!({ "message": "héllo, wörld ✓" }))
        .await
        .expect("echo");
    assert_eq!(ok_text("echo", &echo), "Echo: héllo, wörld ✓");

    let sum = client
        .call_tool("add", json!({ "a": 2, "b": 40 }))
        .await
        .expect("add");
    assert_eq!(ok_text("add", &sum), "42");
    assert_eq!(sum.structured_content, Some(json!({ "result": 42 })));

    // Validation failure: a tool error (isError), not a failed request.
    let bad = client.call_tool("add", json!({ "a": "x", "b": 1 })).await;
    match bad {
        Ok(r) => assert!(r.is_error(), "invalid arguments accepted: {r:?}"),
        Err(e) => assert!(e.remote().is_some(), "invalid arguments: {e}"),
    }

    // Progress, with concurrent calls in flight.
    let (progress, pings) = tokio::join!(slow_with_progress(&client, 5), async {
        for _ in 0..5 {
            client.ping().await.expect("ping during slow");
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    });
    let () = pings;
    assert_eq!(progress, expected_progress(5), "progress callbacks");

    // Roots and elicitation through the SDK's resolvers: server requests
    // mid-call in 2025-11-25, input_required rounds in 2026-07-28; the same
    // handlers answer both.
    let before = roots_asked.load(Ordering::SeqCst);
    let r = client.call_tool("where", json!({})).await.expect("where");
    assert_eq!(ok_text("where", &r), ROOT_URI);
    assert_eq!(roots_asked.load(Ordering::SeqCst), before + 1);
    let r = client
        .call_tool("introduce", json!({}))
        .await
        .expect("introduce");
    assert_eq!(ok_text("introduce", &r), "hello Grace, 85");

    if era == Era::Legacy {
        // Server-to-client requests sent by hand during a call (the
        // 2025-11-25 way; in 2026-07-28 the SDK refuses them).
        let before = roots_asked.load(Ordering::SeqCst);
        let roots = client.call_tool("roots", json!({})).await.expect("roots");
        assert_eq!(ok_text("roots", &roots), ROOT_URI);
        assert_eq!(roots_asked.load(Ordering::SeqCst), before + 1);

        // Sampling and elicitation, answered by our handlers.
        let summary = client
            .call_tool("summarize", json!({ "text": "a long story" }))
            .await
            .expect("summarize");
        assert_eq!(
            ok_text("summarize", &summary),
            "fake-model: short version of [Summarize: a long story]"
        );
        let who = client
            .call_tool("ask_name", json!({}))
            .await
            .expect("ask_name");
        assert_eq!(ok_text("ask_name", &who), "accepted: Grace, 85");
    }

    // A big message both ways.
    let big: String = (0..300_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let r = client
        .call_tool("echo", json!({ "message": big }))
        .await
        .expect("echo of 300 kB");
    assert!(
        ok_text("big echo", &r) == format!("Echo: {big}"),
        "big echo mangled"
    );

    // Dropping a call's future cancels it; the connection goes on.
    let dropped = tokio::time::timeout(
        Duration::from_millis(120),
        client.call_tool_with(
            "slow",
            json!({ "steps": 20 }),
            CallOptions::new().on_progress(|_| {}),
        ),
    )
    .await;
    assert!(
        dropped.is_err(),
        "slow(20) finished within 120 ms: {dropped:?}"
    );
    for i in 0..3 {
        let r = client
            .call_tool("add", json!({ "a": i, "b": i }))
            .await
            .expect("add after a drop");
        assert_eq!(ok_text("add", &r), (2 * i).to_string());
    }

    client.ping().await.expect("ping");
    let err = client
        .request_raw("no/such-method", None, CallOptions::new())
        .await
        .expect_err("unknown method");
    assert_eq!(err.remote().map(|e| e.code), Some(-32601), "{err}");

    // Resources.
    let resources = client.list_resources().await.expect("resources/list");
    let greeting = resources
        .iter()
        .find(|r| r.uri == "interop://greeting")
        .unwrap_or_else(|| panic!("{resources:?}"));
    assert_eq!(greeting.name, "greeting");
    assert_eq!(greeting.mime_type.as_deref(), Some("text/plain"));
    let read = client
        .read_resource("interop://greeting")
        .await
        .expect("resources/read");
    assert_eq!(read.contents.len(), 1, "{read:?}");
    assert_eq!(read.contents[0].text.as_deref(), Some("Hello from Python"));
    let missing = client.read_resource("interop://nothing-here").await;
    assert!(missing.is_err(), "unknown resource read: {missing:?}");

    // Subscriptions: in 2026-07-28 `resources/subscribe` is gone and the
    // URI rides on `subscriptions/listen`; the update reaches the same
    // notification stream. The SDK's MCPServer offers subscriptions only
    // there.
    let subscribable = client
        .server()
        .capabilities
        .resources
        .as_ref()
        .and_then(|r| r.subscribe)
        == Some(true);
    assert_eq!(subscribable, era == Era::Modern, "{:?}", client.server());
    let mut notes = client.notifications();
    match era {
        Era::Modern => {
            client
                .subscribe("interop://greeting")
                .await
                .expect("subscribe (acknowledged by the server)");
            client
                .call_tool("touch", json!({"uri": "interop://greeting"}))
                .await
                .expect("touch");
            let updated = tokio::time::timeout(Duration::from_secs(5), async {
                while let Some(n) = notes.recv().await {
                    if let ServerNotification::ResourceUpdated(u) = n {
                        return u.uri;
                    }
                }
                String::new()
            })
            .await
            .expect("notifications/resources/updated within 5 s");
            assert_eq!(updated, "interop://greeting");
            client
                .unsubscribe("interop://greeting")
                .await
                .expect("unsubscribe");
        }
        Era::Legacy => {
            let e = client.subscribe("interop://greeting").await.unwrap_err();
            assert!(e.to_string().contains("subscribe"), "{e}");
        }
    }

    // Prompts.
    let prompts = client.list_prompts().await.expect("prompts/list");
    let greet = prompts
        .iter()
        .find(|p| p.name == "greet")
        .unwrap_or_else(|| panic!("{prompts:?}"));
    assert!(
        greet
            .arguments
            .iter()
            .any(|a| a.name == "name" && a.required == Some(true)),
        "{greet:?}"
    );
    let got = client
        .get_prompt("greet", json!({ "name": "Bob" }))
        .await
        .expect("prompts/get");
    assert_eq!(got.messages.len(), 1, "{got:?}");
    assert_eq!(got.messages[0].role, "user");
    assert!(
        matches!(&got.messages[0].content, Content::Text { text, .. } if text == "Please greet Bob warmly."),
        "{got:?}"
    );

    // Clean close.
    let mut notes = client.notifications();
    let closing = Instant::now();
    within(Duration::from_secs(20), "close", client.close())
        .await
        .expect("close");
    assert!(
        closing.elapsed() < Duration::from_secs(20),
        "close took {:?}",
        closing.elapsed()
    );
    within(Duration::from_secs(20), "notification stream end", async {
        while notes.recv().await.is_some() {}
    })
    .await;
    eprintln!("{transport}: scenario took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stdio() {
    let asked = Arc::new(AtomicUsize::new(0));
    within(TEST_LIMIT, "python over stdio", async {
        let client = Client::connect_with(stdio_config().era("legacy"), options(&asked))
            .await
            .expect("connect over stdio");
        exercise(client, asked.clone(), "stdio", Era::Legacy).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_streamable_http() {
    let server = spawn_http_server("python mcp server (http)", http_command).await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let asked = Arc::new(AtomicUsize::new(0));
    within(TEST_LIMIT, "python over Streamable HTTP", async {
        let client = Client::connect_with(ServerConfig::http(&url).era("legacy"), options(&asked))
            .await
            .expect("connect over Streamable HTTP");
        exercise(client, asked.clone(), "streamable-http", Era::Legacy).await;
    })
    .await;
    server.kill().await;
}

/// No era configured: the probe finds 2026-07-28 (the SDK is dual-era).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stdio_2026_found_by_probing() {
    let asked = Arc::new(AtomicUsize::new(0));
    within(TEST_LIMIT, "python over stdio, 2026-07-28", async {
        // Default settings: an interpreter slower than the probe's 1 s to
        // start is seen not to have read the probe yet, and waited for.
        let client = Client::connect_with(stdio_config(), options(&asked))
            .await
            .expect("connect over stdio");
        exercise(client, asked.clone(), "stdio", Era::Modern).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_streamable_http_2026_found_by_probing() {
    let server = spawn_http_server("python mcp server (http)", http_command).await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let asked = Arc::new(AtomicUsize::new(0));
    within(
        TEST_LIMIT,
        "python over Streamable HTTP, 2026-07-28",
        async {
            let client = Client::connect_with(ServerConfig::http(&url), options(&asked))
                .await
                .expect("connect over Streamable HTTP");
            exercise(client, asked.clone(), "streamable-http", Era::Modern).await;
        },
    )
    .await;
    server.kill().await;
}

/// The issue 17 case: the TypeScript and Python SDKs follow Starlette's
/// `307 /mcp -> /mcp/`, and so does mcpwire, in both eras.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mounted_at_mcp_redirects_and_is_followed() {
    let server = spawn_http_server("python mcp server (mounted)", mounted_command).await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    for (era, config) in [
        (Era::Legacy, ServerConfig::http(&url).era("legacy")),
        (Era::Modern, ServerConfig::http(&url)),
    ] {
        let asked = Arc::new(AtomicUsize::new(0));
        within(TEST_LIMIT, "python mounted at /mcp", async {
            let client = Client::connect_with(config, options(&asked))
                .await
                .expect("connect through the 307");
            exercise(client, asked.clone(), "streamable-http", era).await;
        })
        .await;
    }
    server.kill().await;
}

/// The server restarts on the same port and so forgets the session: the
/// next request gets 404, and the client must re-initialize by itself and
/// send it again, so that the caller only sees success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_http_reinitializes_after_404() {
    let first = spawn_http_server("python mcp server (http)", http_command).await;
    let port = first.port;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let asked = Arc::new(AtomicUsize::new(0));
    within(TEST_LIMIT, "re-initialize after 404", async {
        // Sessions are a 2025-11-25 thing: pin that era.
        let client = Client::connect_with(ServerConfig::http(&url).era("legacy"), options(&asked))
            .await
            .expect("connect");
        let r = client
            .call_tool("echo", json!({ "message": "one" }))
            .await
            .expect("echo 1");
        assert_eq!(ok_text("echo 1", &r), "Echo: one");

        // Restart: same port, new process, no memory of the session.
        first.kill().await;
        let mut second = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while second.is_none() {
            match spawn_on_port("python mcp server (restarted)", &http_command, port).await {
                Ok(s) => second = Some(s),
                Err(e) if Instant::now() < deadline => {
                    eprintln!("restart on port {port} failed, retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("cannot restart the server on port {port}: {e}"),
            }
        }
        let second = second.unwrap();

        // The old session id is unknown now (404): this call must succeed.
        let r = client
            .call_tool("echo", json!({ "message": "two" }))
            .await
            .expect("echo after the server forgot the session");
        assert_eq!(ok_text("echo 2", &r), "Echo: two");

        // The new session is fully usable: progress, server requests, lists.
        assert_eq!(slow_with_progress(&client, 3).await, expected_progress(3));
        let roots = client.call_tool("roots", json!({})).await.expect("roots");
        assert_eq!(ok_text("roots", &roots), ROOT_URI);
        let tools = client.list_tools().await.expect("tools/list");
        assert_eq!(tools.len(), 9, "{tools:?}");
        client.ping().await.expect("ping");

        within(Duration::from_secs(20), "close", client.close())
            .await
            .expect("close");
        second.kill().await;
    })
    .await;
}
