//! The cases over stdio: the test server as a child process.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire_adapter::methods::{ListRootsResult, ServerRequestKind};
use mcpwire_adapter::options::ConnectOptions;
use mcpwire_adapter::output::OutputProblem;
use mcpwire_adapter::types::Root;
use mcpwire_adapter::{
    CallOptions, CancelToken, Error, Handler, RequestError, ServerConfig, ServerNotification,
};
use serde_json::{json, Value};

use super::support::{
    call_id, cancelled_for, log_lines, parent_of, process_alive, server_bin,
    stdio_behind_a_wrapper, stdio_in, temp_log, wait_log, Era, PATIENCE,
};
use super::Adapter;

/// Legacy only (it is about a server of that era): the test server
/// speaks only the handshake era: the first connection probes
/// (`server/discover`, refused) and falls back; the era is then
/// remembered, so the second connection starts with `initialize`.
pub async fn stdio_a_legacy_server_is_probed_once_per_process<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    let log = temp_log("era");
    let config = stdio_in(era, &["--log-file", log.to_str().unwrap()]);
    let methods = || -> Vec<String> {
        log_lines(&log)
            .iter()
            .filter_map(|v| v["message"]["method"].as_str().map(str::to_owned))
            .filter(|m| m == "server/discover" || m == "initialize")
            .collect()
    };
    for _ in 0..2 {
        let client = A::connect(config.clone()).await.unwrap();
        assert_eq!(client.protocol_version(), "2025-11-25");
        client.close().await.unwrap();
    }
    assert_eq!(methods(), ["server/discover", "initialize", "initialize"]);
    // Pinned, nothing is probed (and nothing remembered).
    let pinned = config.clone().era("legacy");
    let client = A::connect(pinned).await.unwrap();
    client.close().await.unwrap();
    assert_eq!(methods().len(), 4);
    assert_eq!(methods()[3], "initialize");
}

/// The processes a test server's log shows, in the order they started:
/// each one's pid, start (wall clock, ms) and the methods it received.
fn processes(log: &std::path::Path) -> Vec<(u64, u64, Vec<String>)> {
    let mut out: Vec<(u64, u64, Vec<String>)> = Vec::new();
    for v in log_lines(log) {
        let pid = v["pid"].as_u64().unwrap_or(0);
        if v["event"] == "started" {
            out.push((pid, v["unix_ms"].as_u64().unwrap_or(0), Vec::new()));
        } else if let Some(m) = v["message"]["method"].as_str() {
            if let Some(p) = out.iter_mut().find(|p| p.0 == pid) {
                p.2.push(m.to_owned());
            }
        }
    }
    out
}

/// When the server logged `tools/call` (wall clock, ms).
fn first_call_at(log: &std::path::Path) -> Option<u64> {
    log_lines(log)
        .iter()
        .find(|v| v["message"]["method"] == "tools/call")
        .and_then(|v| v["unix_ms"].as_u64())
}

/// Legacy only (it is about servers of that era): a server that ends its
/// process on any request before `initialize` (as the official Rust SDK
/// before 3.x does), one that never answers it and one that closes its
/// stdout: each is started again and spoken to with `initialize`, the
/// first process is gone (no orphan), and the call works. The silent one
/// costs the probe's timeout (1 s), not more.
pub async fn stdio_a_server_the_probe_kills_or_silences_is_started_again<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    for how in ["exit", "silent", "close-stdout"] {
        let log = temp_log("restart");
        let config = stdio_in(
            era,
            &["--pre-init", how, "--log-file", log.to_str().unwrap()],
        );
        let options = ConnectOptions::<A::Flavor>::new().remember_era(false);
        let client = A::connect_with(config, options).await.unwrap();
        assert_eq!(client.protocol_version(), "2025-11-25", "{how}");
        let r = client
            .call_tool("echo", json!({"message": how}))
            .await
            .unwrap();
        assert_eq!(r.text(), format!("Echo: {how}"));
        let procs = processes(&log);
        assert_eq!(procs.len(), 2, "{how}: {procs:?}");
        let (first, second) = (&procs[0], &procs[1]);
        assert_eq!(first.2, ["server/discover"], "{how}: {procs:?}");
        assert_eq!(second.2[0], "initialize", "{how}: {procs:?}");
        assert!(!second.2.contains(&"server/discover".to_owned()), "{how}");
        assert!(
            !second.2.contains(&"notifications/cancelled".to_owned()),
            "nothing meant for the probe reaches the new process ({how}): {procs:?}"
        );
        assert!(
            !process_alive(first.0 as u32),
            "{how}: the first process is gone"
        );
        if how == "silent" {
            // The probe waited its 1 s (counted from its sending, a little
            // before the server logged its start), and no longer than it
            // takes to start a process on a loaded machine on top.
            let took = first_call_at(&log).unwrap() - first.1;
            assert!(
                (900..4000).contains(&took),
                "tools/call {took} ms after the first start"
            );
        }
        client.close().await.unwrap();
        assert!(!process_alive(second.0 as u32), "{how}");
    }
}

/// Legacy only: the era found is remembered in a file other processes
/// share ([`EraCache`](mcpwire_adapter::era::EraCache)): a connection that
/// finds it there (this process's memory forgotten, as in a new process)
/// sends no probe and starts the server once.
pub async fn stdio_the_era_file_spares_the_probe_across_processes<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    let log = temp_log("era-file");
    let cache_dir = super::support::fresh_cache_home();
    let cache = mcpwire_adapter::era::EraCache::at(cache_dir.join("eras.json"));
    let config = stdio_in(
        era,
        &["--pre-init", "exit", "--log-file", log.to_str().unwrap()],
    );
    let options = || ConnectOptions::<A::Flavor>::new().era_cache(cache.clone());
    let client = A::connect_with(config.clone(), options()).await.unwrap();
    client.close().await.unwrap();
    assert_eq!(processes(&log).len(), 2);
    mcpwire_adapter::era::forget(&config);
    let client = A::connect_with(config.clone(), options()).await.unwrap();
    client
        .call_tool("echo", json!({"message": "again"}))
        .await
        .unwrap();
    client.close().await.unwrap();
    let procs = processes(&log);
    assert_eq!(procs.len(), 3, "one start more: {procs:?}");
    assert_eq!(procs[2].2[0], "initialize", "no probe: {procs:?}");
    let _ = std::fs::remove_dir_all(&cache_dir);
}

/// Extensions and trace context, in both eras: a client that declares MCP
/// Apps (`io.modelcontextprotocol/ui`, in `initialize` or on every
/// 2026-07-28 request) gets the server's gated tool, typed (`Tool::ui`),
/// and reads its `ui://` resource like any other; one that does not, does
/// not. A call's W3C trace context reaches the server in `_meta`; a
/// malformed one fails the call before anything is sent, and a malformed
/// extension identifier fails the connect.
pub async fn stdio_mcp_apps_and_trace_context<A: Adapter>(era: Era) {
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let log = temp_log("apps");
    let config = stdio_in(era, &["--log-file", log.to_str().unwrap()]);
    // Not declared: nothing of the app.
    let plain = A::connect(config.clone()).await.unwrap();
    let tools = plain.list_tools().await.unwrap();
    assert!(tools
        .iter()
        .all(|t| t.name != "dashboard" && t.ui().is_none()));
    plain.close().await.unwrap();

    let options = ConnectOptions::<A::Flavor>::new().mcp_apps();
    let client = A::connect_with(config.clone(), options).await.unwrap();
    let tools = client.list_tools().await.unwrap();
    let dashboard = tools.iter().find(|t| t.name == "dashboard").unwrap();
    let ui = dashboard.ui().unwrap();
    assert_eq!(ui.resource_uri.as_deref(), Some("ui://test/dashboard"));
    assert!(ui.for_model());
    let app = client.read_resource("ui://test/dashboard").await.unwrap();
    assert_eq!(
        app.contents[0].mime_type.as_deref(),
        Some(mcpwire_adapter::ext::MCP_APP_MIME_TYPE)
    );
    assert!(app.contents[0].text.as_deref().unwrap().contains("<html>"));
    let declared = log_lines(&log).into_iter().any(|v| {
        let m = &v["message"];
        let caps = if era.is_modern() {
            &m["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        } else {
            &m["params"]["capabilities"]
        };
        caps["extensions"]["io.modelcontextprotocol/ui"]["mimeTypes"][0]
            == "text/html;profile=mcp-app"
    });
    assert!(declared, "the declaration reached the server");

    // Trace context.
    let r = client
        .call_tool_with(
            "echo",
            json!({"message": "traced"}),
            CallOptions::new().traceparent(TP, Some("rojo=00f067aa0ba902b7")),
        )
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: traced");
    let call = wait_log::<A>(&log, |v| {
        v["message"]["params"]["arguments"]["message"] == "traced"
    })
    .await;
    let meta = &call["message"]["params"]["_meta"];
    assert_eq!(meta["traceparent"], TP);
    assert_eq!(meta["tracestate"], "rojo=00f067aa0ba902b7");
    let e = client
        .call_tool_with(
            "echo",
            json!({"message": "never sent"}),
            CallOptions::new().traceparent("00-nope", None),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
    // A round trip after it: had it been sent, the server saw it first.
    client.list_tools().await.unwrap();
    assert!(log_lines(&log)
        .iter()
        .all(|v| v["message"]["params"]["arguments"]["message"] != "never sent"));
    client.close().await.unwrap();

    let options = ConnectOptions::<A::Flavor>::new().extension("no-prefix", json!({}));
    let e = A::connect_with(config, options).await.unwrap_err();
    assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
}

/// Modern only: a dual-era server (the test server's default, as real
/// servers are) is spoken to in 2026-07-28 by a probing client, with no
/// `initialize` at all; a client pinned to the legacy era gets the
/// handshake from the same server.
pub async fn stdio_a_dual_era_server_speaks_the_era_asked<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Modern);
    let log = temp_log("dual");
    let config = ServerConfig::stdio(server_bin())
        .arg("--log-file")
        .arg(log.to_str().unwrap());
    let client = A::connect(config.clone()).await.unwrap();
    assert_eq!(client.protocol_version(), "2026-07-28");
    assert_eq!(client.server().server_info.name, "mcpwire-test-server");
    let r = client
        .call_tool("echo", json!({"message": "new"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: new");
    client.close().await.unwrap();
    let lines = log_lines(&log);
    let methods: Vec<&str> = lines
        .iter()
        .filter_map(|v| v["message"]["method"].as_str())
        .collect();
    assert_eq!(methods[0], "server/discover", "{methods:?}");
    assert!(!methods.contains(&"initialize"), "{methods:?}");
    let call = lines
        .iter()
        .find(|v| v["message"]["method"] == "tools/call")
        .unwrap();
    assert_eq!(
        call["message"]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    let client = A::connect(config.era("legacy")).await.unwrap();
    assert_eq!(client.protocol_version(), "2025-11-25");
    let r = client
        .call_tool("echo", json!({"message": "old"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: old");
    client.close().await.unwrap();
    assert!(log_lines(&log)
        .iter()
        .any(|v| v["message"]["method"] == "initialize"));
}

pub async fn stdio_connect_list_call_close<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &[])).await.unwrap();
    assert_eq!(client.server().server_info.name, "mcpwire-test-server");
    assert_eq!(client.protocol_version(), era.version());
    assert_eq!(client.transport(), "stdio");
    let tools = client.list_tools().await.unwrap();
    assert_eq!(
        tools.len(),
        20,
        "both pages: {:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let r = client
        .call_tool("echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: hi");
    assert_eq!(r.structured_content, Some(json!({"message": "hi"})));
    let r = client
        .call_tool("add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": 5})));
    let r = client.read_resource("test://hello").await.unwrap();
    assert_eq!(r.contents[0].text.as_deref(), Some("Hello, world!"));
    let p = client
        .get_prompt("greet", json!({"name": "Ada"}))
        .await
        .unwrap();
    assert_eq!(p.messages.len(), 1);
    client.ping().await.unwrap();
    client.close().await.unwrap();
    assert_eq!(
        client.closed_reason(),
        Some("connection closed by the client")
    );
    let e = client.ping().await.unwrap_err();
    assert!(e.is_closed(), "{e}");
}

pub async fn stdio_structured_output_is_checked_against_the_output_schema<A: Adapter>(era: Era) {
    let log = temp_log("output");
    let client = A::connect(stdio_in(era, &["--log-file", log.to_str().unwrap()]))
        .await
        .unwrap();
    let broken = |how: &str| json!({"a": 2, "b": 3, "broken": how});
    let lists = || {
        log_lines(&log)
            .iter()
            .filter(|v| {
                v["message"]["method"] == "tools/list" && v["message"]["params"]["cursor"].is_null()
            })
            .count()
    };
    // Not listed yet: the structuredContent makes the client list the
    // tools (every page) to learn the schema, once per connection.
    match client.call_tool("add", broken("type")).await {
        Err(Error::StructuredOutput {
            problem: OutputProblem::Invalid { path, .. },
            ..
        }) => assert_eq!(path, "/sum"),
        other => panic!("{other:?}"),
    }
    assert_eq!(lists(), 1);
    // An unknown tool's result after that: not listed again.
    let r = client
        .call_tool("echo", json!({"message": "x"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: x");
    assert_eq!(lists(), 1);
    let tools = client.list_tools().await.unwrap();
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert!(add.output_schema.is_some());
    let r = client
        .call_tool("add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": 5})));
    match client.call_tool("add", broken("type")).await {
        Err(Error::StructuredOutput {
            tool,
            problem: OutputProblem::Invalid { path, message },
        }) => {
            assert_eq!(tool, "add");
            assert_eq!(path, "/sum");
            assert!(message.contains("number"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let e = client
        .call_tool("add", broken("missing"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::StructuredOutput {
                problem: OutputProblem::Missing,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "tool `add` returned no structuredContent although it declares an outputSchema"
    );
    client.close().await.unwrap();

    // Turned off for a client: results as the server sent them.
    let client = A::connect_with(
        stdio_in(era, &[]),
        ConnectOptions::new().validate_output(false),
    )
    .await
    .unwrap();
    client.list_tools().await.unwrap();
    let r = client.call_tool("add", broken("type")).await.unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": "5"})));
    client.close().await.unwrap();
}

pub async fn stdio_repeated_cursor_is_refused<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &["--repeat-cursor"]))
        .await
        .unwrap();
    let e = client.list_tools().await.unwrap_err();
    assert!(matches!(e, Error::Pagination(_)), "{e}");
    client.close().await.unwrap();
}

pub async fn stdio_progress_is_reported<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &[])).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let r = client
        .call_tool_with(
            "slow",
            json!({"ms": 100, "steps": 4}),
            CallOptions::new().on_progress(move |p| s.lock().unwrap().push(p.progress)),
        )
        .await
        .unwrap();
    assert!(!r.is_error());
    assert_eq!(*seen.lock().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    client.close().await.unwrap();
}

pub async fn stdio_server_exit_mid_request_fails_once_with_status_and_stderr<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &[])).await.unwrap();
    let t = Instant::now();
    let e = client
        .call_tool(
            "crash",
            json!({"code": 7, "message": "fatal: missing API key"}),
        )
        .await
        .unwrap_err();
    // Promptly: not after the request timeout (30 s). The margins of this
    // suite hold on a loaded two-core machine: a bound says "not the slow
    // alternative", never "this fast".
    assert!(t.elapsed() < Duration::from_secs(10), "promptly");
    let msg = e.to_string();
    assert!(msg.contains("server exited with status 7"), "{msg}");
    assert!(msg.contains("fatal: missing API key"), "{msg}");
    // Later calls fail fast and clearly.
    let t = Instant::now();
    let e = client.ping().await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(e.is_closed(), "{e}");
    assert!(e.to_string().contains("not connected"), "{e}");
}

/// Garbage is skipped, counted, and reported to the application's
/// diagnostics callback (not only to `tracing`).
pub async fn stdio_garbage_on_stdout_is_ignored<A: Adapter>(era: Era) {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s = seen.clone();
    let options = ConnectOptions::<A::Flavor>::new()
        .on_diagnostic(move |d| s.lock().unwrap().push(d.to_string()));
    let client = A::connect_with(stdio_in(era, &[]), options).await.unwrap();
    let r = client.call_tool("garbage", json!({})).await.unwrap();
    assert_eq!(r.text(), "garbage sent");
    assert!(client.stats().malformed > 0, "{:?}", client.stats());
    assert!(!seen.lock().unwrap().is_empty());
    let r = client
        .call_tool("long_line", json!({"bytes": 200_000}))
        .await
        .unwrap();
    assert!(r.text().starts_with("long line sent"));
    client.close().await.unwrap();
}

pub async fn stdio_timeout_tells_the_server<A: Adapter>(era: Era) {
    let log = temp_log("timeout");
    let client = A::connect(stdio_in(era, &["--log-file", log.to_str().unwrap()]))
        .await
        .unwrap();
    let t = Instant::now();
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 60_000, "steps": 60}),
            CallOptions::new().timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    // Not the server's 60 s.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(e.is_timeout(), "{e}");
    assert_eq!(e.to_string(), "Request timeout after 200ms");
    let id = call_id::<A>(&log, "slow", 0).await;
    wait_log::<A>(&log, cancelled_for(id)).await;
    client.close().await.unwrap();
}

/// A call whose future is dropped (the adapters that cancel on drop), and
/// calls holding a [`CancelToken`] cancelled from another task (a thread,
/// for the blocking client) or cancelled before: each ends at once as
/// cancelled, the server is told, and the connection goes on.
pub async fn stdio_dropped_call_and_cancel_token_tell_the_server<A: Adapter>(era: Era) {
    let log = temp_log("drop");
    let client = A::connect(stdio_in(era, &["--log-file", log.to_str().unwrap()]))
        .await
        .unwrap();
    let mut n = 0;
    if A::CANCELS_ON_DROP {
        let call = client.call_tool("slow", json!({"ms": 60_000, "steps": 60}));
        assert!(A::timeout(Duration::from_millis(200), call).await.is_none());
        let id = call_id::<A>(&log, "slow", n).await;
        wait_log::<A>(&log, cancelled_for(id)).await;
        n += 1;
    }

    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = A::spawn(async move {
        A::sleep(Duration::from_millis(150)).await;
        t2.cancel();
    });
    let t = Instant::now();
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 60_000, "steps": 60}),
            CallOptions::new().cancel_token(token.clone()),
        )
        .await
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(e.is_cancelled(), "{e}");
    let id = call_id::<A>(&log, "slow", n).await;
    wait_log::<A>(&log, cancelled_for(id)).await;
    canceller.await;
    // An already-cancelled token cancels at once.
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 60_000, "steps": 60}),
            CallOptions::new().cancel_token(token),
        )
        .await
        .unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    // The connection is still fine.
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

pub async fn stdio_close_ends_a_server_that_ignores_eof_and_sigterm<A: Adapter>(era: Era) {
    let bin = server_bin();
    let config = ServerConfig::stdio("sh").arg("-c").arg(format!(
        "trap '' TERM; exec '{bin}' --era {} --ignore-stdin-eof",
        era.flag()
    ));
    let options = ConnectOptions::<A::Flavor>::new().config(|c| {
        c.stdio.stdin_grace = Duration::from_millis(300);
        c.stdio.term_grace = Duration::from_millis(300);
    });
    let client = A::connect_with(config, options).await.unwrap();
    client.ping().await.unwrap();
    let t = Instant::now();
    client.close().await.unwrap();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(550),
        "it had to escalate to SIGKILL: {took:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(
        client.closed_reason().is_some(),
        "closed after the child was reaped"
    );
}

/// The server's pid, from its `pid` tool.
async fn server_pid<A: Adapter>(client: &A) -> u32 {
    let r = client.call_tool("pid", json!({})).await.unwrap();
    r.text().parse().unwrap()
}

fn short_graces<A: Adapter>() -> ConnectOptions<A::Flavor> {
    ConnectOptions::<A::Flavor>::new().config(|c| {
        c.stdio.stdin_grace = Duration::from_millis(300);
        c.stdio.term_grace = Duration::from_millis(300);
    })
}

/// A server that a wrapper started (`sh -c '…; true'`) is a grandchild:
/// a close signals the whole process group, and returns only once nothing
/// of it is left.
pub async fn stdio_close_stops_the_whole_process_group<A: Adapter>(era: Era) {
    let client = A::connect_with(stdio_behind_a_wrapper(era), short_graces::<A>())
        .await
        .unwrap();
    let server = server_pid(&client).await;
    let wrapper = parent_of(server).unwrap();
    assert_ne!(wrapper, std::process::id(), "the server is a grandchild");
    assert!(process_alive(server) && process_alive(wrapper));
    let t = Instant::now();
    client.close().await.unwrap();
    let took = t.elapsed();
    assert!(
        !process_alive(server),
        "the grandchild is gone when close returns ({took:?})"
    );
    assert!(!process_alive(wrapper));
    assert!(
        took >= Duration::from_millis(550),
        "SIGKILL was needed: {took:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// The wrapper dies (killed from outside) and leaves the server running
/// with the pipes: the call in flight fails with the wrapper's exit, and
/// what is left of the group is stopped (stdin closed, SIGTERM, SIGKILL)
/// without a close, before the client reports itself closed.
pub async fn stdio_a_dead_wrappers_server_is_stopped<A: Adapter>(era: Era) {
    let client = A::connect_with(stdio_behind_a_wrapper(era), short_graces::<A>())
        .await
        .unwrap();
    let server = server_pid(&client).await;
    let wrapper = parent_of(server).unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        kill_9(wrapper);
    });
    let r = client.call_tool("slow", json!({"ms": 60_000})).await;
    killer.join().unwrap();
    let e = r.unwrap_err();
    assert!(e.to_string().contains("signal 9"), "{e}");
    // Stopped by the client on its own: 2 × 300 ms of grace, then SIGKILL.
    let deadline = Instant::now() + Duration::from_secs(20);
    while process_alive(server) {
        assert!(Instant::now() < deadline, "the server outlived its wrapper");
        A::sleep(Duration::from_millis(20)).await;
    }
    client.close().await.unwrap();
    assert!(client.closed_reason().is_some());
}

/// Dropping the last client stops the whole group too (in the
/// background).
pub async fn stdio_dropping_the_client_stops_the_whole_process_group<A: Adapter>(era: Era) {
    let client = A::connect_with(stdio_behind_a_wrapper(era), short_graces::<A>())
        .await
        .unwrap();
    let server = server_pid(&client).await;
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(20);
    while process_alive(server) {
        assert!(Instant::now() < deadline, "the server outlived the client");
        A::sleep(Duration::from_millis(20)).await;
    }
}

/// A server that stops reading stdin while the client keeps calling
/// (and, in 2025-11-25, keeps asking the client for its roots every ms,
/// ~13 KB per answer; a 2026-07-28 server asks the client nothing): what
/// waits to be written stays under twice `max_queued_bytes` (the client's
/// own answers are dropped beyond, counted), calls fail typed with
/// `QueueFull` at once or time out on time, and the close still ends the
/// server.
pub async fn stdio_a_server_that_stops_reading_keeps_the_client_bounded<A: Adapter>(era: Era) {
    const LIMIT: usize = 256 * 1024;
    let roots = Handler::Blocking(Arc::new(|_params| {
        let roots = (0..100)
            .map(|i| Root {
                uri: format!("file:///{}/{i}", "r".repeat(100)),
                name: None,
                extra: Default::default(),
            })
            .collect();
        Ok(serde_json::to_value(ListRootsResult::new(roots)).unwrap())
    }));
    let options = short_graces::<A>()
        .config(|c| c.engine.max_queued_bytes = LIMIT)
        .handler(ServerRequestKind::ListRoots, roots);
    let client = A::connect_with(stdio_in(era, &[]), options).await.unwrap();
    let every_ms = if era.is_modern() { 0 } else { 1 };
    client
        .call_tool(
            "stop_reading",
            json!({"every_ms": every_ms, "method": "roots/list"}),
        )
        .await
        .unwrap();
    let payload = "y".repeat(16 * 1024);
    let timeout = Duration::from_millis(200);
    let (mut full, mut timed_out) = (0, 0);
    for _ in 0..200 {
        let t = Instant::now();
        let r = client
            .call_tool_with(
                "echo",
                json!({"message": payload}),
                CallOptions::new().timeout(timeout),
            )
            .await;
        let took = t.elapsed();
        match r {
            Err(e) if e.is_queue_full() => {
                assert!(e.to_string().contains("is it reading?"), "{e}");
                full += 1;
            }
            Err(e) if e.is_timeout() => timed_out += 1,
            other => panic!("{other:?}"),
        }
        // Nothing waits much past its timeout (a refusal is at once, but
        // the flood keeps the driver busy on 2 cores, and the machine may
        // be loaded).
        assert!(took < timeout + Duration::from_secs(5), "{took:?}");
        let waiting = client.stats().waiting_bytes;
        assert!(
            waiting <= 2 * LIMIT,
            "{waiting} bytes wait, over twice {LIMIT}"
        );
        if full >= 20 && (era.is_modern() || client.stats().sends_dropped > 0) {
            break;
        }
    }
    let stats = client.stats();
    assert!(full >= 20, "QueueFull {full} times, timeouts {timed_out}");
    if !era.is_modern() {
        assert!(stats.sends_dropped > 0, "own answers dropped: {stats:?}");
    }
    assert!(
        stats.waiting_bytes <= 2 * LIMIT,
        "{} bytes wait, over twice {LIMIT}",
        stats.waiting_bytes
    );
    let t = Instant::now();
    client.close().await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// 100 calls at once, one of them crashing the server.
pub async fn stdio_100_concurrent_calls_with_a_crash_complete_exactly_once<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &[])).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..100u32 {
        let c = client.clone();
        tasks.push(A::spawn(async move {
            if i == 50 {
                A::sleep(Duration::from_millis(30)).await;
                c.call_tool("crash", json!({"code": 2, "message": "boom"}))
                    .await
            } else {
                c.call_tool("slow", json!({"ms": 20 + (i % 7) * 30, "steps": 1}))
                    .await
            }
        }));
    }
    let mut ok = 0;
    let mut closed = 0;
    for t in tasks {
        match t.await {
            Ok(_) => ok += 1,
            Err(e) if e.is_closed() => closed += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(ok + closed, 100, "every call completed exactly once");
    assert!(closed >= 1);
}

/// A call polled once and then held without being polled (a `select!`
/// that another branch won, its future kept for later) holds nobody up:
/// the calls other tasks make meanwhile are answered at once, though the
/// held one led the reading of the answers when it was last polled; and
/// it completes when polled again. (The async clients let a waiting
/// call's task read the answers; one that a beat of the timer finds owing
/// a wake-up nobody served is replaced.)
pub async fn stdio_a_call_held_unpolled_holds_up_no_other_call<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &[])).await.unwrap();
    a_call_held_unpolled_holds_up_no_other_call(&client).await;
}

/// The body of the `*_a_call_held_unpolled_holds_up_no_other_call` cases.
pub(super) async fn a_call_held_unpolled_holds_up_no_other_call<A: Adapter>(client: &A) {
    let mut held = Box::pin(client.call_tool("slow", json!({"ms": 300, "steps": 1})));
    assert!(
        futures_lite::future::poll_once(&mut held).await.is_none(),
        "answered before it was sent"
    );
    // A call answered after the timer has beaten (every 100 ms while
    // calls wait) at least once: a beat that woke only the held call must
    // not leave the timer unarmed.
    let c = client.clone();
    let slow = A::spawn(async move { c.call_tool("slow", json!({"ms": 350, "steps": 1})).await });
    A::timeout(Duration::from_secs(10), slow)
        .await
        .expect("a slow call was held up past 10 s")
        .unwrap();
    for i in 0..20 {
        let c = client.clone();
        let call = A::spawn(async move {
            c.call_tool("echo", json!({"message": format!("call {i}")}))
                .await
        });
        let started = Instant::now();
        let out = A::timeout(Duration::from_secs(10), call)
            .await
            .unwrap_or_else(|| panic!("call {i} was held up past 10 s"));
        out.unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "call {i} took {:?}",
            started.elapsed()
        );
    }
    A::timeout(Duration::from_secs(10), held)
        .await
        .expect("the held call, polled again")
        .unwrap();
}

/// 100 calls taken in turn by 8 tasks (threads, for the blocking client)
/// sharing the client, the 51st crashing the server.
pub async fn stdio_100_calls_from_8_tasks_with_a_crash_complete_exactly_once<A: Adapter>(era: Era) {
    let client = A::connect(stdio_in(era, &[])).await.unwrap();
    let ok = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, ok, closed, next) = (client.clone(), ok.clone(), closed.clone(), next.clone());
            A::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= 100 {
                        return;
                    }
                    let r = if i == 50 {
                        c.call_tool("crash", json!({"code": 2, "message": "boom"}))
                            .await
                    } else {
                        c.call_tool("slow", json!({"ms": 20 + (i % 7) * 30, "steps": 1}))
                            .await
                    };
                    match r {
                        Ok(_) => ok.fetch_add(1, Ordering::SeqCst),
                        Err(e) if e.is_closed() => closed.fetch_add(1, Ordering::SeqCst),
                        Err(e) => panic!("unexpected {e}"),
                    };
                }
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    let (ok, closed) = (ok.load(Ordering::SeqCst), closed.load(Ordering::SeqCst));
    assert_eq!(ok + closed, 100, "every call completed exactly once");
    assert!(closed >= 1);
    assert!(ok >= 40, "the calls before the crash succeeded: {ok}");
}

/// The roots are answered by an `async` handler and elicitation by a
/// blocking one: every adapter runs both flavors. In 2026-07-28 the
/// server's questions come as `input_required` results (MRTR), answered
/// by the same handlers; `ping` cannot be asked there, and a capability
/// the client did not declare is refused by the server (`-32021`) rather
/// than by the client (`-32601`).
pub async fn stdio_server_requests_use_the_handlers_and_undeclared_ones_get_method_not_found<
    A: Adapter,
>(
    era: Era,
) {
    let roots = Handler::Async(Arc::new(|_params| {
        Box::pin(async {
            let roots = vec![Root {
                uri: "file:///work".into(),
                name: Some("work".into()),
                extra: Default::default(),
            }];
            Ok(serde_json::to_value(ListRootsResult::new(roots)).unwrap())
        })
    }));
    let elicitation = Handler::Blocking(Arc::new(|params: Value| {
        assert!(params.get("message").is_some() || params.get("requestedSchema").is_some());
        Ok(json!({"action": "decline"}))
    }));
    let options = ConnectOptions::<A::Flavor>::new()
        .handler(ServerRequestKind::ListRoots, roots)
        .handler(ServerRequestKind::Elicit, elicitation);
    let client = A::connect_with(stdio_in(era, &[]), options).await.unwrap();
    let r = client
        .call_tool("ask", json!({"method": "roots/list"}))
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", r.text());
    let roots: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(roots["roots"][0]["uri"], "file:///work");
    let r = client
        .call_tool("ask", json!({"method": "elicitation/create"}))
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&r.text()).unwrap()["action"],
        "decline"
    );
    let r = client
        .call_tool("ask", json!({"method": "ping"}))
        .await
        .unwrap();
    if era.is_modern() {
        assert!(r.is_error(), "{}", r.text());
        assert!(r.text().contains("cannot be asked"), "{}", r.text());
        // Sampling was not declared: the server does not ask for it.
        let e = client
            .call_tool("ask", json!({"method": "sampling/createMessage"}))
            .await
            .unwrap_err();
        assert_eq!(e.remote().map(|e| e.code), Some(-32021), "{e}");
    } else {
        assert!(!r.is_error(), "ping answered by the core: {}", r.text());
        // Sampling was not declared: the core answers -32601 for us.
        let r = client
            .call_tool("ask", json!({"method": "sampling/createMessage"}))
            .await
            .unwrap();
        assert!(r.is_error());
        assert!(r.text().contains("-32601"), "{}", r.text());
    }
    client.close().await.unwrap();
}

/// Notifications reach the `on_notification` callback and the
/// `notifications()` stream, which ends with the connection. In
/// 2026-07-28 the list change comes on `subscriptions/listen` (which the
/// client opened) and no log lines come, since the client asked for no
/// log level.
pub async fn stdio_notifications_stream_and_callback<A: Adapter>(era: Era) {
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let options = ConnectOptions::<A::Flavor>::new().on_notification(move |_| {
        s.fetch_add(1, Ordering::SeqCst);
    });
    let log = temp_log("notes");
    let config = stdio_in(era, &["--log-file", log.to_str().unwrap()]);
    let client = A::connect_with(config, options).await.unwrap();
    let mut notes = client.notifications();
    if era.is_modern() {
        wait_log::<A>(&log, |v| {
            v["event"] == "subscribed" && v["notifications"]["toolsListChanged"] == true
        })
        .await;
    }
    client
        .call_tool("notify_first", json!({"count": 3}))
        .await
        .unwrap();
    let mut logs = 0;
    let mut changed = false;
    while !changed {
        match A::recv_timeout(&mut notes, PATIENCE).await {
            Ok(ServerNotification::LoggingMessage(_)) => logs += 1,
            Ok(ServerNotification::ToolsListChanged) => changed = true,
            Ok(_) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    let logs_sent = if era.is_modern() { 0 } else { 2 };
    assert_eq!(logs, logs_sent);
    assert_eq!(seen.load(Ordering::SeqCst), logs_sent + 1);
    let more = A::recv_timeout(&mut notes, Duration::from_millis(50)).await;
    assert!(
        matches!(more, Err(std::sync::mpsc::RecvTimeoutError::Timeout)),
        "{more:?}"
    );
    client.close().await.unwrap();
    let end = A::recv_timeout(&mut notes, PATIENCE).await;
    assert!(
        matches!(end, Err(std::sync::mpsc::RecvTimeoutError::Disconnected)),
        "the stream ends with the connection: {end:?}"
    );
    // Ended, the iterator does not block.
    assert!(
        notes.next().is_none(),
        "the iterator ends with the connection"
    );
}

/// No server at all: the same in both eras.
pub async fn stdio_missing_binary_is_a_spawn_error<A: Adapter>(_era: Era) {
    let e = A::connect(ServerConfig::stdio("/nonexistent/mcp-server"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Spawn { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/mcp-server"));
}

pub async fn stdio_dropping_the_last_client_closes_gracefully_and_fast<A: Adapter>(era: Era) {
    let log = temp_log("drop-client");
    // A server that outlives its stdin: a close that blocked would take
    // the 2 s stdin grace at least.
    let config = stdio_in(
        era,
        &["--ignore-stdin-eof", "--log-file", log.to_str().unwrap()],
    );
    let client = A::connect(config).await.unwrap();
    let other = client.clone();
    drop(client);
    other.ping().await.unwrap();
    let t = Instant::now();
    drop(other);
    assert!(t.elapsed() < Duration::from_secs(1), "drop does not block");
    // The client closes in the background: stdin first.
    wait_log::<A>(&log, |v| v["event"] == "stdin_eof").await;
}

/// Legacy only (the Node server speaks 2025-11-25): a JavaScript
/// server's JSON: `JSON.stringify` writes half an emoji as a
/// lone `\ud83d` escape. It reaches the application as U+FFFD in every
/// kind of message: the initialize result, a tool result, a log
/// notification, an error, and a server request's params. The server is a
/// real Node program (`tests/node/sliced_emoji.mjs`).
pub async fn stdio_javascript_json_with_half_an_emoji_is_read<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/node/sliced_emoji.mjs");
    let elicitation = Handler::Blocking(Arc::new(|params: Value| {
        Ok(json!({"action": "accept", "content": {"said": params["message"]}}))
    }));
    let options =
        ConnectOptions::<A::Flavor>::new().handler(ServerRequestKind::Elicit, elicitation);
    let client = A::connect_with(ServerConfig::stdio("node").arg(script), options)
        .await
        .expect("node runs tests/node/sliced_emoji.mjs (Node.js must be on PATH)");
    assert_eq!(client.server().server_info.name, "sliced-emoji\u{fffd}");
    let mut notes = client.notifications();
    let r = client.call_tool("sliced", json!({})).await.unwrap();
    assert_eq!(r.text(), "emoji: \u{fffd}!");
    match A::recv_timeout(&mut notes, super::support::PATIENCE).await {
        Ok(ServerNotification::LoggingMessage(m)) => assert_eq!(m.data, "log \u{fffd}"),
        other => panic!("{other:?}"),
    }
    let e = client
        .call_tool("sliced_error", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.remote().map(|e| e.message.as_str()), Some("bad \u{fffd}"));
    let r = client.call_tool("ask", json!({})).await.unwrap();
    assert_eq!(r.text(), "client said: say \u{fffd}");
    // initialize, the log, the result, the error, the server request.
    assert_eq!(client.stats().surrogates_repaired, 5);
    client.close().await.unwrap();
}

/// A reply longer than `max_line_len` fails its call as soon as its line
/// has gone by (not at the call's timeout), with a typed error naming the
/// limit and the size; the connection goes on. The test server writes
/// `{"id":…,"jsonrpc":"2.0","result":…}`: the id is in the line's head (the
/// tail case is the interop test against server-everything).
pub async fn stdio_an_oversize_reply_fails_its_call_at_once<A: Adapter>(era: Era) {
    let options = ConnectOptions::<A::Flavor>::new()
        .config(|c| c.stdio.jsonl.max_line_len = 64 * 1024)
        .timeout(Duration::from_secs(120));
    let client = A::connect_with(stdio_in(era, &[]), options).await.unwrap();
    let started = Instant::now();
    let e = client
        .call_tool("big", json!({"bytes": 300_000}))
        .await
        .unwrap_err();
    match &e {
        Error::Request(RequestError::TooLarge { what, limit, size }) => {
            assert_eq!((*what, *limit), ("max_line_len", 64 * 1024));
            assert!(*size > 300_000, "{size}");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("max_line_len"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "failed at once, not at the 120 s timeout"
    );
    let r = client
        .call_tool("echo", json!({"message": "still here"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: still here");
    assert_eq!(client.stats().oversize, 1);
    client.close().await.unwrap();
}
