//! The adapter suite against `mcpwire-test-server`, written once for every
//! runtime: real child processes and real loopback sockets, misbehaving on
//! demand. Each case is an `async fn` generic over the adapter's
//! [`Runtime`]; [`adapter_suite!`](crate::adapter_suite) turns them all
//! into `#[test]`s for one runtime and one `block_on`:
//!
//! ```ignore
//! mcpwire_tests::adapter_suite!(mcpwire_tokio::Tokio, run_on_tokio);
//! ```

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire_adapter::runtime::{sleep, timeout};
use mcpwire_adapter::types::{CallToolResult, Root};
use mcpwire_adapter::{
    CallOptions, CancelToken, Client, ConnectOptions, Error, Runtime, ServerConfig,
    ServerNotification,
};
use serde_json::{json, Value};

/// Generates one `#[test]` per case of this suite, each running the case
/// on runtime `$runtime` with `$block_on` (a `fn(impl Future<Output = ()>)`).
#[macro_export]
macro_rules! adapter_suite {
    ($runtime:ty, $block_on:path) => {
        $crate::adapter_suite!(@cases $runtime, $block_on;
            stdio_connect_list_call_close,
            stdio_repeated_cursor_is_refused,
            stdio_progress_is_reported,
            stdio_server_exit_mid_request_fails_once_with_status_and_stderr,
            stdio_garbage_on_stdout_is_ignored,
            stdio_timeout_tells_the_server,
            stdio_dropped_call_and_cancel_token_tell_the_server,
            stdio_close_ends_a_server_that_ignores_eof_and_sigterm,
            stdio_100_concurrent_calls_with_a_crash_complete_exactly_once,
            stdio_server_requests_use_the_handlers_and_undeclared_ones_get_method_not_found,
            stdio_notifications_stream,
            stdio_missing_binary_is_a_spawn_error,
            stdio_dropping_the_last_client_closes_gracefully,
            stdio_a_legacy_server_is_probed_once_per_process,
            http_sse_and_json_responses,
            http_progress_and_server_request_on_the_stream,
            http_expired_session_is_renewed_transparently,
            http_dropped_stream_resumes_with_last_event_id,
            http_errors_are_clear,
            http_connection_refused_is_a_connect_error,
            http_dropping_the_last_client_ends_the_session,
        );
    };
    (@cases $runtime:ty, $block_on:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $block_on($crate::suite::$case::<$runtime>())
            }
        )*
    };
}

fn server_bin() -> String {
    crate::test_server_binary().to_string_lossy().into_owned()
}

fn temp_log(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "mcpwire-suite-{}-{}-{tag}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ))
}

/// Runs `fut` on `R` as a task of its own; the returned future gives its
/// output.
fn spawn<R: Runtime, T: Send + 'static>(
    fut: impl Future<Output = T> + Send + 'static,
) -> impl Future<Output = T> {
    let (tx, rx) = async_channel::bounded(1);
    R::spawn(Box::pin(async move {
        let _ = tx.send(fut.await).await;
    }))
    .expect("spawn a task");
    async move { rx.recv().await.expect("task finished") }
}

/// Waits until the server's log has a line satisfying `pred`.
async fn wait_log<R: Runtime>(path: &PathBuf, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(v) = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| pred(v))
        {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "log line never appeared in {path:?}:\n{text}"
        );
        sleep::<R>(Duration::from_millis(20)).await;
    }
}

fn cancelled_for(id: u64) -> impl Fn(&Value) -> bool {
    move |v| {
        v["message"]["method"] == "notifications/cancelled"
            && v["message"]["params"]["requestId"] == id
    }
}

fn stdio(args: &[&str]) -> ServerConfig {
    ServerConfig::stdio(server_bin()).args(args.iter().copied())
}

/// An HTTP test server on 127.0.0.1; it stops when this is dropped (its
/// stdin closes, and it is killed).
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts an HTTP test server and reads the address it prints (a blocking
/// read of one line: the server prints it at once).
fn http_server(args: &[&str]) -> HttpServer {
    let mut child = std::process::Command::new(server_bin())
        .arg("--http")
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
    HttpServer { child, url }
}

fn text(r: &CallToolResult) -> String {
    r.text()
}

// ----- stdio -------------------------------------------------------------

/// The test server speaks only the handshake era: the first connection
/// probes (`server/discover`, refused) and falls back; the era is then
/// remembered, so the second connection starts with `initialize`.
pub async fn stdio_a_legacy_server_is_probed_once_per_process<R: Runtime>() {
    let log = temp_log("era");
    let config = stdio(&["--log-file", log.to_str().unwrap()]);
    let methods = || -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["message"]["method"].as_str().map(str::to_owned))
            .filter(|m| m == "server/discover" || m == "initialize")
            .collect()
    };
    for _ in 0..2 {
        let client = Client::<R>::connect(config.clone()).await.unwrap();
        assert_eq!(client.protocol_version(), "2025-11-25");
        client.close().await.unwrap();
    }
    assert_eq!(methods(), ["server/discover", "initialize", "initialize"]);
    // Pinned, nothing is probed (and nothing remembered).
    let pinned = config.clone().era("legacy");
    let client = Client::<R>::connect(pinned).await.unwrap();
    client.close().await.unwrap();
    assert_eq!(methods().len(), 4);
    assert_eq!(methods()[3], "initialize");
}

pub async fn stdio_connect_list_call_close<R: Runtime>() {
    let client = Client::<R>::connect(stdio(&[])).await.unwrap();
    assert_eq!(client.server().server_info.name, "mcpwire-test-server");
    assert_eq!(client.protocol_version(), "2025-11-25");
    assert_eq!(client.transport(), "stdio");
    let tools = client.list_tools().await.unwrap();
    assert_eq!(
        tools.len(),
        15,
        "both pages: {:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let r = client
        .call_tool("echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "Echo: hi");
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
}

pub async fn stdio_repeated_cursor_is_refused<R: Runtime>() {
    let client = Client::<R>::connect(stdio(&["--repeat-cursor"]))
        .await
        .unwrap();
    let e = client.list_tools().await.unwrap_err();
    assert!(matches!(e, Error::Pagination(_)), "{e}");
    client.close().await.unwrap();
}

pub async fn stdio_progress_is_reported<R: Runtime>() {
    let client = Client::<R>::connect(stdio(&[])).await.unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
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

pub async fn stdio_server_exit_mid_request_fails_once_with_status_and_stderr<R: Runtime>() {
    let client = Client::<R>::connect(stdio(&[])).await.unwrap();
    let t = Instant::now();
    let e = client
        .call_tool(
            "crash",
            json!({"code": 7, "message": "fatal: missing API key"}),
        )
        .await
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2), "promptly");
    let msg = e.to_string();
    assert!(msg.contains("server exited with status 7"), "{msg}");
    assert!(msg.contains("fatal: missing API key"), "{msg}");
    // Later calls fail fast and clearly.
    let t = Instant::now();
    let e = client.ping().await.unwrap_err();
    assert!(t.elapsed() < Duration::from_millis(500));
    assert!(e.is_closed(), "{e}");
    assert!(e.to_string().contains("not connected"), "{e}");
}

pub async fn stdio_garbage_on_stdout_is_ignored<R: Runtime>() {
    let client = Client::<R>::connect(stdio(&[])).await.unwrap();
    let r = client.call_tool("garbage", json!({})).await.unwrap();
    assert_eq!(text(&r), "garbage sent");
    let r = client
        .call_tool("long_line", json!({"bytes": 200_000}))
        .await
        .unwrap();
    assert!(text(&r).starts_with("long line sent"));
    client.close().await.unwrap();
}

pub async fn stdio_timeout_tells_the_server<R: Runtime>() {
    let log = temp_log("timeout");
    let client = Client::<R>::connect(stdio(&["--log-file", log.to_str().unwrap()]))
        .await
        .unwrap();
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 5000, "steps": 5}),
            CallOptions::new().timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert_eq!(e.to_string(), "Request timeout after 200ms");
    // Ids: 0 the server/discover probe, 1 initialize, 2 the slow call.
    wait_log::<R>(&log, cancelled_for(2)).await;
    client.close().await.unwrap();
}

pub async fn stdio_dropped_call_and_cancel_token_tell_the_server<R: Runtime>() {
    let log = temp_log("drop");
    let client = Client::<R>::connect(stdio(&["--log-file", log.to_str().unwrap()]))
        .await
        .unwrap();
    let call = client.call_tool("slow", json!({"ms": 5000, "steps": 5}));
    assert!(timeout::<R, _>(Duration::from_millis(200), call)
        .await
        .is_none());
    wait_log::<R>(&log, cancelled_for(2)).await;

    let token = CancelToken::new();
    let t2 = token.clone();
    let _canceller = spawn::<R, _>(async move {
        sleep::<R>(Duration::from_millis(150)).await;
        t2.cancel();
    });
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 5000, "steps": 5}),
            CallOptions::new().cancel_token(token),
        )
        .await
        .unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    wait_log::<R>(&log, cancelled_for(3)).await;
    // The connection is still fine.
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

pub async fn stdio_close_ends_a_server_that_ignores_eof_and_sigterm<R: Runtime>() {
    let bin = server_bin();
    let config = ServerConfig::stdio("sh")
        .arg("-c")
        .arg(format!("trap '' TERM; exec '{bin}' --ignore-stdin-eof"));
    let options = ConnectOptions::new().config(|c| {
        c.stdio.stdin_grace = Duration::from_millis(300);
        c.stdio.term_grace = Duration::from_millis(300);
    });
    let client = Client::<R>::connect_with(config, options).await.unwrap();
    client.ping().await.unwrap();
    let t = Instant::now();
    client.close().await.unwrap();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(550),
        "it had to escalate to SIGKILL: {took:?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}

pub async fn stdio_100_concurrent_calls_with_a_crash_complete_exactly_once<R: Runtime>() {
    let client = Client::<R>::connect(stdio(&[])).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..100u32 {
        let c = client.clone();
        tasks.push(spawn::<R, _>(async move {
            if i == 50 {
                sleep::<R>(Duration::from_millis(30)).await;
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

pub async fn stdio_server_requests_use_the_handlers_and_undeclared_ones_get_method_not_found<
    R: Runtime,
>() {
    let options = ConnectOptions::new()
        .roots(|| async {
            vec![Root {
                uri: "file:///work".into(),
                name: Some("work".into()),
                extra: Default::default(),
            }]
        })
        .elicitation(|params| async move {
            assert!(params.get("message").is_some() || params.get("requestedSchema").is_some());
            Ok(json!({"action": "decline"}))
        });
    let client = Client::<R>::connect_with(stdio(&[]), options)
        .await
        .unwrap();
    let r = client
        .call_tool("ask", json!({"method": "roots/list"}))
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", text(&r));
    let roots: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(roots["roots"][0]["uri"], "file:///work");
    let r = client
        .call_tool("ask", json!({"method": "elicitation/create"}))
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&text(&r)).unwrap()["action"],
        "decline"
    );
    let r = client
        .call_tool("ask", json!({"method": "ping"}))
        .await
        .unwrap();
    assert!(!r.is_error(), "ping answered by the core: {}", text(&r));
    // Sampling was not declared: the core answers -32601 for us.
    let r = client
        .call_tool("ask", json!({"method": "sampling/createMessage"}))
        .await
        .unwrap();
    assert!(r.is_error());
    assert!(text(&r).contains("-32601"), "{}", text(&r));
    client.close().await.unwrap();
}

pub async fn stdio_notifications_stream<R: Runtime>() {
    let client = Client::<R>::connect(stdio(&[])).await.unwrap();
    let mut notes = client.notifications();
    client
        .call_tool("notify_first", json!({"count": 3}))
        .await
        .unwrap();
    let mut logs = 0;
    let mut changed = false;
    while !changed {
        match timeout::<R, _>(Duration::from_secs(2), notes.recv())
            .await
            .unwrap()
        {
            Some(ServerNotification::LoggingMessage(_)) => logs += 1,
            Some(ServerNotification::ToolsListChanged) => changed = true,
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    assert_eq!(logs, 2);
    client.close().await.unwrap();
    assert!(
        notes.recv().await.is_none(),
        "the stream ends with the connection"
    );
}

pub async fn stdio_missing_binary_is_a_spawn_error<R: Runtime>() {
    let e = Client::<R>::connect(ServerConfig::stdio("/nonexistent/mcp-server"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Spawn { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/mcp-server"));
}

pub async fn stdio_dropping_the_last_client_closes_gracefully<R: Runtime>() {
    let log = temp_log("drop-client");
    let client = Client::<R>::connect(stdio(&["--log-file", log.to_str().unwrap()]))
        .await
        .unwrap();
    let other = client.clone();
    drop(client);
    other.ping().await.unwrap();
    drop(other);
    // The driver closes in the background: stdin first.
    wait_log::<R>(&log, |v| v["event"] == "stdin_eof").await;
}

// ----- Streamable HTTP ------------------------------------------------------

pub async fn http_sse_and_json_responses<R: Runtime>() {
    for args in [&[][..], &["--json-responses"][..], &["--tiny-chunks"][..]] {
        let server = http_server(args);
        let client = Client::<R>::connect(ServerConfig::http(&server.url))
            .await
            .unwrap();
        assert_eq!(client.transport(), "streamable-http");
        assert_eq!(client.list_tools().await.unwrap().len(), 15);
        let r = client
            .call_tool("echo", json!({"message": "over http"}))
            .await
            .unwrap();
        assert_eq!(text(&r), "Echo: over http", "{args:?}");
        client.close().await.unwrap();
    }
}

pub async fn http_progress_and_server_request_on_the_stream<R: Runtime>() {
    let server = http_server(&[]);
    let options = ConnectOptions::new().roots(|| async { vec![] });
    let client = Client::<R>::connect_with(ServerConfig::http(&server.url), options)
        .await
        .unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    client
        .call_tool_with(
            "slow",
            json!({"ms": 60, "steps": 3}),
            CallOptions::new().on_progress(move |_| {
                n2.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .await
        .unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 3);
    let r = client
        .call_tool("ask", json!({"method": "roots/list"}))
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", text(&r));
    let r = client
        .call_tool("ask", json!({"method": "roots/list", "on_listener": true}))
        .await
        .unwrap();
    assert!(
        !r.is_error(),
        "request on the GET listener answered: {}",
        text(&r)
    );
    client.close().await.unwrap();
}

pub async fn http_expired_session_is_renewed_transparently<R: Runtime>() {
    let log = temp_log("expire");
    let server = http_server(&["--log-file", log.to_str().unwrap()]);
    let client = Client::<R>::connect(ServerConfig::http(&server.url))
        .await
        .unwrap();
    client.call_tool("expire_session", json!({})).await.unwrap();
    let r = client
        .call_tool("echo", json!({"message": "again"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "Echo: again");
    // The server may write its log line just after answering: wait for it.
    let inits = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"method\":\"initialize\""))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while inits() < 2 && Instant::now() < deadline {
        sleep::<R>(Duration::from_millis(20)).await;
    }
    assert_eq!(inits(), 2, "re-initialized once");
    client.close().await.unwrap();
}

pub async fn http_dropped_stream_resumes_with_last_event_id<R: Runtime>() {
    let log = temp_log("resume");
    let server = http_server(&["--log-file", log.to_str().unwrap()]);
    let client = Client::<R>::connect(ServerConfig::http(&server.url))
        .await
        .unwrap();
    let t = Instant::now();
    let r = client
        .call_tool("sse_drop", json!({"after_ms": 50, "retry_ms": 300}))
        .await
        .unwrap();
    assert!(!r.is_error());
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "waited the retry delay"
    );
    wait_log::<R>(&log, |v| {
        v["http"]["method"] == "GET" && v["http"]["headers"]["last-event-id"].is_string()
    })
    .await;
    client.close().await.unwrap();
}

pub async fn http_errors_are_clear<R: Runtime>() {
    let server = http_server(&["--require-auth", "sekrit"]);
    let e = Client::<R>::connect(ServerConfig::http(&server.url))
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("HTTP 401"), "{msg}");
    assert!(msg.contains("WWW-Authenticate"), "{msg}");
    let client = Client::<R>::connect(
        ServerConfig::http(&server.url).header("Authorization", "Bearer sekrit"),
    )
    .await
    .unwrap();
    let e = client.call_tool("http_500", json!({})).await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with("HTTP 500: boom: internal failure"),
        "{e}"
    );
    client.close().await.unwrap();
}

pub async fn http_connection_refused_is_a_connect_error<R: Runtime>() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = Client::<R>::connect(ServerConfig::http(format!("http://127.0.0.1:{port}/mcp")))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
}

pub async fn http_dropping_the_last_client_ends_the_session<R: Runtime>() {
    let log = temp_log("drop-http");
    let server = http_server(&["--log-file", log.to_str().unwrap()]);
    let client = Client::<R>::connect(ServerConfig::http(&server.url))
        .await
        .unwrap();
    client.ping().await.unwrap();
    drop(client);
    // The driver closes in the background: the session is DELETEd.
    wait_log::<R>(&log, |v| v["event"] == "session_ended").await;
}
