//! Interop against the reference server `@modelcontextprotocol/server-everything`
//! (npm, 2026.8.31), over stdio, Streamable HTTP and legacy HTTP+SSE.
//!
//! The server is installed by `scripts/test` into `.deps/node` (override with
//! `MCPWIRE_NODE_MODULES`); HTTP modes are forced onto 127.0.0.1 by the
//! `tests/interop/loopback.cjs` preload. Each test owns its server process.

mod interop;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use interop::*;
use mcpwire_tokio::types::{Content, Root};
use mcpwire_tokio::{
    CallOptions, CancelToken, Client, ConnectOptions, ErrorObject, ServerConfig, ServerNotification,
};
use serde_json::{json, Value};
use tokio::process::Command;

/// Bound of one whole test.
const TEST_LIMIT: Duration = Duration::from_secs(45);

const ROOT_URI: &str = "file:///tmp/mcpwire-interop-root";
const ROOT_NAME: &str = "interop root";

/// Tools the server always offers.
const BASE_TOOLS: &[&str] = &[
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
];

/// Tools registered only when the client declares roots, sampling, elicitation.
const CAPABILITY_TOOLS: &[&str] = &[
    "get-roots-list",
    "trigger-sampling-request",
    "trigger-elicitation-request",
];

/// What the handlers saw.
#[derive(Default)]
struct Seen {
    roots: AtomicUsize,
    sampling: Mutex<Vec<Value>>,
    elicitation: Mutex<Vec<Value>>,
}

/// Options declaring roots, sampling and elicitation, recording into `seen`.
fn full_options(seen: &Arc<Seen>) -> ConnectOptions {
    let (r, s, e) = (seen.clone(), seen.clone(), seen.clone());
    ConnectOptions::new()
        .client_info("mcpwire-interop", "0.0.0")
        .timeout(Duration::from_secs(15))
        .roots(move || {
            r.roots.fetch_add(1, Ordering::SeqCst);
            async move {
                let mut root: Root = serde_json::from_value(json!({ "uri": ROOT_URI })).unwrap();
                root.name = Some(ROOT_NAME.into());
                vec![root]
            }
        })
        .sampling(move |params| {
            s.sampling.lock().unwrap().push(params);
            async move {
                Ok(json!({
                    "role": "assistant",
                    "content": { "type": "text", "text": "four, says the fake model" },
                    "model": "mcpwire-fake-model",
                    "stopReason": "endTurn",
                }))
            }
        })
        .elicitation(move |params| {
            let n = {
                let mut all = e.elicitation.lock().unwrap();
                all.push(params);
                all.len()
            };
            async move {
                // First accept, then decline.
                if n == 1 {
                    Ok(json!({
                        "action": "accept",
                        "content": { "name": "Ada Lovelace", "check": true, "integer": 7 },
                    }))
                } else {
                    Ok(json!({ "action": "decline" }))
                }
            }
        })
}

fn stdio_config() -> ServerConfig {
    ServerConfig::stdio(node())
        .arg(everything_entry().to_string_lossy().into_owned())
        .arg("stdio")
}

/// Starts server-everything in `mode` (`streamableHttp` or `sse`) on loopback.
async fn http_server(mode: &'static str) -> ServerProcess {
    let entry = everything_entry();
    spawn_http_server(&format!("server-everything {mode}"), move |port| {
        let mut cmd = Command::new(node());
        cmd.arg("--require")
            .arg(loopback_preload())
            .arg(&entry)
            .arg(mode)
            .env("PORT", port.to_string());
        cmd
    })
    .await
}

/// The full scenario against one connected client.
async fn exercise(client: Client, seen: Arc<Seen>, transport: &str) {
    let started = Instant::now();
    let mut notes = client.notifications();

    // --- the handshake ----------------------------------------------------
    let info = client.server();
    assert_eq!(info.server_info.name, "mcp-servers/everything", "{info:?}");
    assert!(
        ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
            .contains(&client.protocol_version()),
        "unexpected protocol version {}",
        client.protocol_version()
    );
    assert!(
        info.capabilities.tools.is_some(),
        "tools capability: {info:?}"
    );
    assert!(
        info.capabilities.resources.is_some(),
        "resources capability: {info:?}"
    );
    assert!(
        info.capabilities.prompts.is_some(),
        "prompts capability: {info:?}"
    );
    assert!(info.instructions.is_some(), "instructions: {info:?}");
    assert_eq!(client.transport(), transport);

    // --- a long call with progress, started at once so that the server's
    // own `roots/list` (id 0, ~350 ms after initialize) arrives during it,
    // with other calls in flight at the same time ---------------------------
    let progress = Arc::new(Mutex::new(Vec::new()));
    let long = {
        let progress = progress.clone();
        client.call_tool_with(
            "trigger-long-running-operation",
            json!({ "duration": 1.5, "steps": 5 }),
            CallOptions::new()
                .timeout(Duration::from_secs(15))
                .on_progress(move |p| progress.lock().unwrap().push((p.progress, p.total))),
        )
    };
    let echoes = async {
        let mut out = Vec::new();
        for i in 0..10 {
            let r = client
                .call_tool("echo", json!({ "message": format!("hello interop {i}") }))
                .await
                .expect("echo");
            out.push(ok_text("echo", &r));
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        out
    };
    let (long, echoes) = tokio::join!(long, echoes);
    let long = long.expect("trigger-long-running-operation");
    assert!(
        ok_text("long operation", &long).contains("Long running operation completed"),
        "{long:?}"
    );
    let progress = progress.lock().unwrap().clone();
    assert_eq!(
        progress,
        (1..=5).map(|i| (i as f64, Some(5.0))).collect::<Vec<_>>(),
        "progress callbacks"
    );
    for (i, text) in echoes.iter().enumerate() {
        assert_eq!(text, &format!("Echo: hello interop {i}"));
    }

    // The server asks for the roots by itself after initialize.
    eventually(
        Duration::from_secs(20),
        "the server's roots/list request",
        || seen.roots.load(Ordering::SeqCst) >= 1,
    )
    .await;

    // --- tools ------------------------------------------------------------
    let all: Vec<&str> = BASE_TOOLS.iter().chain(CAPABILITY_TOOLS).copied().collect();
    let tools = tools_including(&client, &all).await;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "duplicate tool names: {names:?}");
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.input_schema["type"], "object", "{echo:?}");
    assert!(
        echo.input_schema["properties"]["message"].is_object(),
        "{echo:?}"
    );

    let sum = client
        .call_tool("get-sum", json!({ "a": 2, "b": 3.5 }))
        .await
        .expect("get-sum");
    assert_eq!(ok_text("get-sum", &sum), "The sum of 2 and 3.5 is 5.5.");

    let image = client
        .call_tool("get-tiny-image", json!({}))
        .await
        .expect("get-tiny-image");
    assert!(
        image
            .content
            .iter()
            .any(|c| matches!(c, Content::Image { mime_type, data, .. } if mime_type == "image/png" && !data.is_empty())),
        "no PNG image in {image:?}"
    );

    let structured = client
        .call_tool("get-structured-content", json!({ "location": "New York" }))
        .await
        .expect("get-structured-content");
    assert!(
        structured
            .structured_content
            .as_ref()
            .is_some_and(Value::is_object),
        "{structured:?}"
    );

    // A tool error is a result with isError, not a failed request.
    let bad = client.call_tool("get-sum", json!({ "a": "two" })).await;
    match bad {
        Ok(r) => assert!(r.is_error(), "invalid arguments accepted: {r:?}"),
        Err(e) => assert!(e.remote().is_some(), "invalid arguments: {e}"),
    }

    // --- roots, sampling, elicitation ----------------------------------------
    let roots = client
        .call_tool("get-roots-list", json!({}))
        .await
        .expect("get-roots-list");
    let text = ok_text("get-roots-list", &roots);
    assert!(
        text.contains(ROOT_URI) && text.contains(ROOT_NAME),
        "{text}"
    );

    let sampled = client
        .call_tool_with(
            "trigger-sampling-request",
            json!({ "prompt": "What is 2+2?", "maxTokens": 20 }),
            CallOptions::new().timeout(Duration::from_secs(10)),
        )
        .await
        .expect("trigger-sampling-request");
    let text = ok_text("trigger-sampling-request", &sampled);
    assert!(
        text.contains("four, says the fake model") && text.contains("mcpwire-fake-model"),
        "{text}"
    );
    {
        let asked = seen.sampling.lock().unwrap();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0]["maxTokens"], 20, "{:?}", asked[0]);
        let prompt = asked[0]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(prompt.contains("What is 2+2?"), "{:?}", asked[0]);
    }

    let accepted = client
        .call_tool("trigger-elicitation-request", json!({}))
        .await
        .expect("trigger-elicitation-request (accept)");
    let text = ok_text("elicitation accept", &accepted);
    assert!(
        text.contains("- Name: Ada Lovelace") && text.contains("- Favorite Integer: 7"),
        "{text}"
    );
    let declined = client
        .call_tool("trigger-elicitation-request", json!({}))
        .await
        .expect("trigger-elicitation-request (decline)");
    assert!(
        ok_text("elicitation decline", &declined).contains("declined"),
        "{declined:?}"
    );
    {
        let asked = seen.elicitation.lock().unwrap();
        assert_eq!(asked.len(), 2);
        assert!(asked[0]["message"].is_string(), "{:?}", asked[0]);
        assert!(
            asked[0]["requestedSchema"]["properties"]["name"].is_object(),
            "{:?}",
            asked[0]
        );
    }

    // --- a big message both ways (framing, chunked bodies, SSE lines) ----------
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

    // --- timeout and cancellation of a long call: the server keeps running
    // it and sends progress for a token we forgot; the connection goes on --
    let err = client
        .call_tool_with(
            "trigger-long-running-operation",
            json!({ "duration": 1, "steps": 4 }),
            CallOptions::new()
                .timeout(Duration::from_millis(300))
                .on_progress(|_| {}),
        )
        .await
        .expect_err("a 1 s call with a 300 ms timeout");
    assert!(err.is_timeout(), "expected a timeout, got {err}");
    let token = CancelToken::new();
    let first_progress = Arc::new(tokio::sync::Notify::new());
    let cancelled = {
        let notify = first_progress.clone();
        client.call_tool_with(
            "trigger-long-running-operation",
            json!({ "duration": 1, "steps": 4 }),
            CallOptions::new()
                .cancel_token(token.clone())
                .on_progress(move |_| notify.notify_one()),
        )
    };
    let (cancelled, ()) = tokio::join!(cancelled, async {
        within(
            Duration::from_secs(20),
            "first progress",
            first_progress.notified(),
        )
        .await;
        token.cancel();
    });
    let err = cancelled.expect_err("cancelled call");
    assert!(err.is_cancelled(), "expected a cancellation, got {err}");
    for i in 0..5 {
        let r = client
            .call_tool("get-sum", json!({ "a": i, "b": 1 }))
            .await
            .expect("get-sum after timeout and cancel");
        assert_eq!(
            ok_text("get-sum", &r),
            format!("The sum of {i} and 1 is {}.", i + 1)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // --- ping and errors ------------------------------------------------------
    client.ping().await.expect("ping");
    let err = client
        .request_raw("no/such-method", None, CallOptions::new())
        .await
        .expect_err("unknown method");
    assert_eq!(err.remote().map(|e| e.code), Some(-32601), "{err}");
    // The connection is still good afterwards.
    client.ping().await.expect("ping after an error");

    // --- resources ----------------------------------------------------------
    let resources = client.list_resources().await.expect("resources/list");
    let doc = resources
        .iter()
        .find(|r| r.uri.starts_with("demo://resource/static/document/"))
        .unwrap_or_else(|| panic!("no static document in {resources:?}"));
    let read = client
        .read_resource(&doc.uri)
        .await
        .expect("resources/read");
    assert_eq!(read.contents.len(), 1, "{read:?}");
    assert_eq!(read.contents[0].uri, doc.uri);
    assert!(
        read.contents[0]
            .text
            .as_ref()
            .is_some_and(|t| !t.is_empty()),
        "{read:?}"
    );
    let templates = client
        .list_resource_templates()
        .await
        .expect("resources/templates/list");
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template == "demo://resource/dynamic/text/{resourceId}"),
        "{templates:?}"
    );
    let dynamic = client
        .read_resource("demo://resource/dynamic/text/7")
        .await
        .expect("read a templated resource");
    assert!(
        dynamic.contents[0]
            .text
            .as_deref()
            .unwrap_or_default()
            .starts_with("Resource 7:"),
        "{dynamic:?}"
    );
    let blob = client
        .read_resource("demo://resource/dynamic/blob/3")
        .await
        .expect("read a blob resource");
    assert!(
        blob.contents[0]
            .blob
            .as_ref()
            .is_some_and(|b| !b.is_empty()),
        "{blob:?}"
    );

    // Subscriptions: the server sends `resources/updated` for the URI at
    // once when its simulated updates are switched on.
    let mut updates = client.notifications();
    client
        .subscribe(&doc.uri)
        .await
        .expect("resources/subscribe");
    let r = client
        .call_tool("toggle-subscriber-updates", json!({}))
        .await
        .expect("toggle-subscriber-updates");
    ok_text("toggle-subscriber-updates", &r);
    within(
        Duration::from_secs(20),
        "notifications/resources/updated",
        async {
            loop {
                match updates.recv().await {
                    Some(ServerNotification::ResourceUpdated(u)) if u.uri == doc.uri => break,
                    Some(_) => {}
                    None => panic!("notification stream ended"),
                }
            }
        },
    )
    .await;
    client
        .unsubscribe(&doc.uri)
        .await
        .expect("resources/unsubscribe");
    client
        .call_tool("toggle-subscriber-updates", json!({}))
        .await
        .expect("toggle-subscriber-updates off");

    // --- prompts ------------------------------------------------------------
    let prompts = client.list_prompts().await.expect("prompts/list");
    for name in ["simple-prompt", "args-prompt"] {
        assert!(
            prompts.iter().any(|p| p.name == name),
            "{name} missing: {prompts:?}"
        );
    }
    let args = prompts.iter().find(|p| p.name == "args-prompt").unwrap();
    assert!(
        args.arguments
            .iter()
            .any(|a| a.name == "city" && a.required == Some(true)),
        "{args:?}"
    );
    let simple = client
        .get_prompt("simple-prompt", json!({}))
        .await
        .expect("simple-prompt");
    assert!(!simple.messages.is_empty(), "{simple:?}");
    let got = client
        .get_prompt("args-prompt", json!({ "city": "Paris", "state": "Texas" }))
        .await
        .expect("args-prompt");
    assert!(
        matches!(&got.messages[0].content, Content::Text { text, .. } if text == "What's weather in Paris, Texas?"),
        "{got:?}"
    );

    // --- notifications: the server logs "Roots updated" after it fetched
    // our roots (the early tools/list_changed ones may predate the
    // subscription, so they are not required) -----------------------------
    let mut kinds = Vec::new();
    while let Ok(Some(n)) = tokio::time::timeout(Duration::from_millis(1), notes.recv()).await {
        kinds.push(match &n {
            ServerNotification::LoggingMessage(m) => format!("log: {}", m.data),
            other => format!("{other:?}"),
        });
    }
    assert!(
        kinds.iter().any(|k| k.contains("Roots updated")),
        "no 'Roots updated' log among the notifications: {kinds:?}"
    );

    // --- clean close ----------------------------------------------------------
    let closing = Instant::now();
    within(Duration::from_secs(20), "close", client.close())
        .await
        .expect("close");
    let took = closing.elapsed();
    assert!(took < Duration::from_secs(20), "close took {took:?}");
    let end = within(
        Duration::from_secs(20),
        "notification stream end",
        notes.recv(),
    )
    .await;
    assert!(
        end.is_none() || drain_until_end(&mut notes).await,
        "notification stream did not end after close"
    );
    eprintln!("{transport}: scenario took {:?}", started.elapsed());
}

/// Whether the stream ends (None) within 5 s, skipping what is buffered.
async fn drain_until_end(notes: &mut mcpwire_tokio::Notifications) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        while notes.recv().await.is_some() {}
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_stdio() {
    let seen = Arc::new(Seen::default());
    within(TEST_LIMIT, "everything over stdio", async {
        let client = Client::connect_with(stdio_config(), full_options(&seen))
            .await
            .expect("connect over stdio");
        exercise(client, seen.clone(), "stdio").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_streamable_http() {
    let server = http_server("streamableHttp").await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let seen = Arc::new(Seen::default());
    within(TEST_LIMIT, "everything over Streamable HTTP", async {
        let client = Client::connect_with(ServerConfig::http(&url), full_options(&seen))
            .await
            .expect("connect over Streamable HTTP");
        exercise(client, seen.clone(), "streamable-http").await;
    })
    .await;
    server.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_legacy_sse() {
    let server = http_server("sse").await;
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let seen = Arc::new(Seen::default());
    within(TEST_LIMIT, "everything over legacy SSE", async {
        let client = Client::connect_with(ServerConfig::sse(&url), full_options(&seen))
            .await
            .expect("connect over legacy SSE");
        exercise(client, seen.clone(), "sse").await;
    })
    .await;
    server.kill().await;
}

/// The legacy transport behind a proxy: its long-lived GET stream and the
/// POSTs to the endpoint it announces both go through the proxy (plain
/// `http`: in absolute form), to a name only the proxy resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_legacy_sse_through_a_proxy() {
    use mcpwire_tests::suite::support::TestProxy;

    let server = http_server("sse").await;
    let proxy = TestProxy::start(&["--map", "everything.test=127.0.0.1"]);
    let url = format!("http://everything.test:{}/sse", server.port);
    within(TEST_LIMIT, "everything over legacy SSE, proxied", async {
        let client = Client::connect_with(
            ServerConfig::sse(&url),
            ConnectOptions::new().proxy(&proxy.url),
        )
        .await
        .expect("connect over legacy SSE through the proxy");
        let r = client
            .call_tool("echo", json!({ "message": "proxied" }))
            .await
            .expect("echo");
        assert_eq!(ok_text("echo", &r), "Echo: proxied");
        within(Duration::from_secs(20), "close", client.close())
            .await
            .expect("close");
    })
    .await;
    let origin = format!("http://everything.test:{}/", server.port);
    server.kill().await;
    let requests = proxy.requests();
    let through = |method: &str, path: &str| {
        requests.iter().any(|r| {
            r["method"] == method
                && r["forwarded"] == true
                && r["target"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(&format!("{origin}{path}")))
        })
    };
    assert!(through("GET", "sse"), "{requests:#?}");
    assert!(through("POST", "message"), "{requests:#?}");
}

/// Without declared capabilities the server offers no capability tools,
/// and our client answers nothing it did not declare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_stdio_without_capabilities() {
    within(
        TEST_LIMIT,
        "everything over stdio, no capabilities",
        async {
            let client = Client::connect(stdio_config()).await.expect("connect");
            // Give the server time to register its conditional tools, if any.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let tools = tools_including(&client, BASE_TOOLS).await;
            for name in CAPABILITY_TOOLS {
                assert!(
                    !tools.iter().any(|t| t.name == *name),
                    "{name} offered although the capability was not declared"
                );
            }
            let r = client
                .call_tool("echo", json!({ "message": "bare" }))
                .await
                .expect("echo");
            assert_eq!(ok_text("echo", &r), "Echo: bare");
            within(Duration::from_secs(20), "close", client.close())
                .await
                .expect("close");
        },
    )
    .await;
}

/// `type: http` pointed at a legacy SSE server falls back to it (the
/// POST of initialize to `/sse` gets 404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_http_config_falls_back_to_legacy_sse() {
    let server = http_server("sse").await;
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    within(TEST_LIMIT, "fallback to legacy SSE", async {
        let client = Client::connect_with(
            ServerConfig::http(&url),
            ConnectOptions::new().timeout(Duration::from_secs(10)),
        )
        .await
        .expect("connect with fallback");
        assert_eq!(client.transport(), "sse");
        let r = client
            .call_tool("get-sum", json!({ "a": 1, "b": 2 }))
            .await
            .expect("get-sum");
        assert_eq!(ok_text("get-sum", &r), "The sum of 1 and 2 is 3.");
        client.ping().await.expect("ping");
        within(Duration::from_secs(20), "close", client.close())
            .await
            .expect("close");
    })
    .await;
    server.kill().await;
}

/// A sampling handler's error reaches the server as a JSON-RPC error, and
/// the tool reports it (the connection survives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_stdio_sampling_refused() {
    within(TEST_LIMIT, "sampling refused", async {
        let options = ConnectOptions::new()
            .sampling(|_| async { Err(ErrorObject::new(-1, "the user declined sampling")) });
        let client = Client::connect_with(stdio_config(), options)
            .await
            .expect("connect");
        tools_including(&client, &["trigger-sampling-request"]).await;
        let r = client
            .call_tool(
                "trigger-sampling-request",
                json!({ "prompt": "no", "maxTokens": 5 }),
            )
            .await;
        match r {
            Ok(r) => {
                assert!(r.is_error(), "{r:?}");
                assert!(r.text().contains("the user declined sampling"), "{r:?}");
            }
            Err(e) => {
                let remote = e
                    .remote()
                    .unwrap_or_else(|| panic!("not a remote error: {e}"));
                assert!(remote.message.contains("the user declined sampling"), "{e}");
            }
        }
        client.ping().await.expect("ping after a refused sampling");
        within(Duration::from_secs(20), "close", client.close())
            .await
            .expect("close");
    })
    .await;
}

/// server-everything (the TypeScript SDK) writes `{"result":…,"jsonrpc":
/// "2.0","id":N}`: the id of a reply over `max_line_len` is in the line's
/// last bytes. The call fails at once with a typed error; the next goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_stdio_oversize_reply_fails_its_call_at_once() {
    within(
        TEST_LIMIT,
        "everything over stdio, an oversize reply",
        async {
            let options = mcpwire_tokio::ConnectOptions::new()
                .config(|c| c.stdio.jsonl.max_line_len = 64 * 1024)
                .timeout(Duration::from_secs(300));
            let client = Client::connect_with(stdio_config(), options)
                .await
                .expect("connect");
            let message = "m".repeat(200_000);
            let e = client
                .call_tool("echo", json!({ "message": message }))
                .await
                .expect_err("over the limit");
            assert!(e.is_too_large(), "{e:?}");
            assert!(e.to_string().contains("max_line_len"), "{e}");
            let r = client
                .call_tool("echo", json!({ "message": "small" }))
                .await
                .expect("echo");
            assert_eq!(ok_text("echo", &r), "Echo: small");
            assert_eq!(client.stats().oversize, 1);
            within(Duration::from_secs(20), "close", client.close())
                .await
                .expect("close");
        },
    )
    .await;
}

/// server-everything's `simulate-research-query` is a 2025-11-25 task tool
/// (`execution.taskSupport: "required"`, the TypeScript SDK's task store):
/// `call_tool` calls it as a task, follows it (`tasks/get` every second,
/// the stages as progress), and when it asks for a clarification
/// (`input_required`) takes the question on `tasks/result` to the
/// elicitation handler; the report names the answer.
async fn research_task(config: ServerConfig, transport: &str) {
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let options = ConnectOptions::new()
        .client_info("mcpwire-interop", "0.0.0")
        .timeout(Duration::from_secs(30))
        .elicitation(move |params| {
            a.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(
                    params["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("interpretations")),
                    "{params}"
                );
                Ok(json!({"action": "accept", "content": {"interpretation": "historical"}}))
            }
        });
    let client = Client::connect_with(config, options)
        .await
        .expect("connect");
    assert_eq!(client.protocol_version(), "2025-11-25");
    let tools = client.list_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == "simulate-research-query")
        .expect("the task tool");
    assert_eq!(
        tool.task_support(),
        mcpwire_tokio::types::TaskSupport::Required
    );
    let statuses: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = statuses.clone();
    let options = CallOptions::new().on_progress(move |p| {
        if p.task.is_some() {
            s.lock()
                .unwrap()
                .push(p.message.clone().unwrap_or_default());
        }
    });
    let out = client
        .call_tool_with(
            "simulate-research-query",
            json!({"topic": "rust", "ambiguous": true}),
            options,
        )
        .await
        .unwrap_or_else(|e| panic!("{transport}: the research task: {e}"));
    let report = ok_text("simulate-research-query", &out);
    assert!(
        report.contains("# Research Report: rust (historical)"),
        "{report}"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 1, "asked once");
    let statuses = statuses.lock().unwrap().clone();
    assert!(
        statuses.iter().any(|m| m.contains("working")),
        "{transport}: {statuses:?}"
    );
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_a_task_tool_over_stdio() {
    within(
        TEST_LIMIT,
        "research task over stdio",
        research_task(stdio_config(), "stdio"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_a_task_tool_over_streamable_http() {
    let server = http_server("streamableHttp").await;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    within(
        TEST_LIMIT,
        "research task over HTTP",
        research_task(ServerConfig::http(&url), "streamable-http"),
    )
    .await;
    server.kill().await;
}
