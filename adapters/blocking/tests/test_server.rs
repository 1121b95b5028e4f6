//! The adapter suite (the cases of `mcpwire_tests::suite`, written for a
//! blocking client: threads instead of tasks) against `mcpwire-test-server`,
//! plus the blocking-only cases: cancel from another thread, 8 threads
//! sharing one client, the notification callback and `call`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mcpwire_blocking::types::{CallToolResult, Root};
use mcpwire_blocking::{
    CallOptions, CancelToken, Client, ConnectOptions, Error, ServerConfig, ServerNotification,
};
use serde_json::{json, Value};

fn server_bin() -> String {
    mcpwire_tests::test_server_binary()
        .to_string_lossy()
        .into_owned()
}

fn temp_log(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "mcpwire-blocking-{}-{}-{tag}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ))
}

/// Waits until the server's log has a line satisfying `pred`.
fn wait_log(path: &PathBuf, pred: impl Fn(&Value) -> bool) -> Value {
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
        thread::sleep(Duration::from_millis(20));
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

/// An HTTP test server on 127.0.0.1, stopped when dropped.
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

#[test]
fn stdio_connect_list_call_close() {
    let client = Client::connect(stdio(&[])).unwrap();
    assert_eq!(client.server().server_info.name, "mcpwire-test-server");
    assert_eq!(client.protocol_version(), "2025-11-25");
    assert_eq!(client.transport(), "stdio");
    let tools = client.list_tools().unwrap();
    assert_eq!(tools.len(), 15);
    let r = client.call_tool("echo", json!({"message": "hi"})).unwrap();
    assert_eq!(text(&r), "Echo: hi");
    assert_eq!(r.structured_content, Some(json!({"message": "hi"})));
    let r = client.call_tool("add", json!({"a": 2, "b": 3})).unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": 5})));
    let r = client.read_resource("test://hello").unwrap();
    assert_eq!(r.contents[0].text.as_deref(), Some("Hello, world!"));
    let p = client.get_prompt("greet", json!({"name": "Ada"})).unwrap();
    assert_eq!(p.messages.len(), 1);
    client.ping().unwrap();
    client.close().unwrap();
    assert_eq!(
        client.closed_reason(),
        Some("connection closed by the client")
    );
    let e = client.ping().unwrap_err();
    assert!(e.is_closed(), "{e}");
}

#[test]
fn stdio_repeated_cursor_is_refused() {
    let client = Client::connect(stdio(&["--repeat-cursor"])).unwrap();
    let e = client.list_tools().unwrap_err();
    assert!(matches!(e, Error::Pagination(_)), "{e}");
    client.close().unwrap();
}

#[test]
fn stdio_progress_is_reported() {
    let client = Client::connect(stdio(&[])).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let r = client
        .call_tool_with(
            "slow",
            json!({"ms": 100, "steps": 4}),
            CallOptions::new().on_progress(move |p| s.lock().unwrap().push(p.progress)),
        )
        .unwrap();
    assert!(!r.is_error());
    assert_eq!(*seen.lock().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    client.close().unwrap();
}

#[test]
fn stdio_server_exit_mid_request_fails_once_with_status_and_stderr() {
    let client = Client::connect(stdio(&[])).unwrap();
    let t = Instant::now();
    let e = client
        .call_tool(
            "crash",
            json!({"code": 7, "message": "fatal: missing API key"}),
        )
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2), "promptly");
    let msg = e.to_string();
    assert!(msg.contains("server exited with status 7"), "{msg}");
    assert!(msg.contains("fatal: missing API key"), "{msg}");
    let t = Instant::now();
    let e = client.ping().unwrap_err();
    assert!(t.elapsed() < Duration::from_millis(500));
    assert!(e.is_closed(), "{e}");
    assert!(e.to_string().contains("not connected"), "{e}");
}

#[test]
fn stdio_garbage_on_stdout_is_ignored() {
    let client = Client::connect(stdio(&[])).unwrap();
    let r = client.call_tool("garbage", json!({})).unwrap();
    assert_eq!(text(&r), "garbage sent");
    let r = client
        .call_tool("long_line", json!({"bytes": 200_000}))
        .unwrap();
    assert!(text(&r).starts_with("long line sent"));
    client.close().unwrap();
}

#[test]
fn stdio_timeout_tells_the_server() {
    let log = temp_log("timeout");
    let client = Client::connect(stdio(&["--log-file", log.to_str().unwrap()])).unwrap();
    let t = Instant::now();
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 5000, "steps": 5}),
            CallOptions::new().timeout(Duration::from_millis(200)),
        )
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(e.is_timeout(), "{e}");
    assert_eq!(e.to_string(), "Request timeout after 200ms");
    // Ids: 0 initialize, 1 the slow call.
    wait_log(&log, cancelled_for(2));
    client.close().unwrap();
}

#[test]
fn stdio_cancel_token_from_another_thread_tells_the_server() {
    let log = temp_log("cancel");
    let client = Client::connect(stdio(&["--log-file", log.to_str().unwrap()])).unwrap();
    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = thread::spawn(move || {
        thread::sleep(Duration::from_millis(150));
        t2.cancel();
    });
    let t = Instant::now();
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 5000, "steps": 5}),
            CallOptions::new().cancel_token(token.clone()),
        )
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(e.is_cancelled(), "{e}");
    wait_log(&log, cancelled_for(2));
    canceller.join().unwrap();
    // An already-cancelled token cancels at once.
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 5000, "steps": 5}),
            CallOptions::new().cancel_token(token),
        )
        .unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    // The connection is still fine.
    client.ping().unwrap();
    client.close().unwrap();
}

#[test]
fn stdio_close_ends_a_server_that_ignores_eof_and_sigterm() {
    let bin = server_bin();
    let config = ServerConfig::stdio("sh")
        .arg("-c")
        .arg(format!("trap '' TERM; exec '{bin}' --ignore-stdin-eof"));
    let options = ConnectOptions::new().config(|c| {
        c.stdio.stdin_grace = Duration::from_millis(300);
        c.stdio.term_grace = Duration::from_millis(300);
    });
    let client = Client::connect_with(config, options).unwrap();
    client.ping().unwrap();
    let t = Instant::now();
    client.close().unwrap();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(550),
        "it had to escalate to SIGKILL: {took:?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(
        client.closed_reason().is_some(),
        "closed after the child was reaped"
    );
}

#[test]
fn stdio_100_concurrent_calls_from_8_threads_with_a_crash_complete_exactly_once() {
    let client = Client::connect(stdio(&[])).unwrap();
    let ok = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (c, ok, closed, next) = (client.clone(), ok.clone(), closed.clone(), next.clone());
            thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= 100 {
                    return;
                }
                let r = if i == 50 {
                    c.call_tool("crash", json!({"code": 2, "message": "boom"}))
                } else {
                    c.call_tool("slow", json!({"ms": 20 + (i % 7) * 30, "steps": 1}))
                };
                match r {
                    Ok(_) => ok.fetch_add(1, Ordering::SeqCst),
                    Err(e) if e.is_closed() => closed.fetch_add(1, Ordering::SeqCst),
                    Err(e) => panic!("unexpected {e}"),
                };
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (ok, closed) = (ok.load(Ordering::SeqCst), closed.load(Ordering::SeqCst));
    assert_eq!(ok + closed, 100, "every call completed exactly once");
    assert!(closed >= 1);
    assert!(ok >= 40, "the calls before the crash succeeded: {ok}");
}

#[test]
fn stdio_server_requests_use_the_handlers_and_undeclared_ones_get_method_not_found() {
    let options = ConnectOptions::new()
        .roots(|| {
            vec![Root {
                uri: "file:///work".into(),
                name: Some("work".into()),
                extra: Default::default(),
            }]
        })
        .elicitation(|params| {
            assert!(params.get("message").is_some() || params.get("requestedSchema").is_some());
            Ok(json!({"action": "decline"}))
        });
    let client = Client::connect_with(stdio(&[]), options).unwrap();
    let r = client
        .call_tool("ask", json!({"method": "roots/list"}))
        .unwrap();
    assert!(!r.is_error(), "{}", text(&r));
    let roots: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(roots["roots"][0]["uri"], "file:///work");
    let r = client
        .call_tool("ask", json!({"method": "elicitation/create"}))
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&text(&r)).unwrap()["action"],
        "decline"
    );
    let r = client.call_tool("ask", json!({"method": "ping"})).unwrap();
    assert!(!r.is_error(), "ping answered by the core: {}", text(&r));
    let r = client
        .call_tool("ask", json!({"method": "sampling/createMessage"}))
        .unwrap();
    assert!(r.is_error());
    assert!(text(&r).contains("-32601"), "{}", text(&r));
    client.close().unwrap();
}

#[test]
fn stdio_notifications_iterator_and_callback() {
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let options = ConnectOptions::new().on_notification(move |_| {
        s.fetch_add(1, Ordering::SeqCst);
    });
    let client = Client::connect_with(stdio(&[]), options).unwrap();
    let mut notes = client.notifications();
    client
        .call_tool("notify_first", json!({"count": 3}))
        .unwrap();
    let mut logs = 0;
    let mut changed = false;
    while !changed {
        match notes.recv_timeout(Duration::from_secs(2)) {
            Ok(ServerNotification::LoggingMessage(_)) => logs += 1,
            Ok(ServerNotification::ToolsListChanged) => changed = true,
            Ok(_) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(logs, 2);
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    assert!(matches!(
        notes.recv_timeout(Duration::from_millis(50)),
        Err(RecvTimeoutError::Timeout)
    ));
    client.close().unwrap();
    assert!(
        notes.next().is_none(),
        "the iterator ends with the connection"
    );
}

#[test]
fn stdio_missing_binary_is_a_spawn_error() {
    let e = Client::connect(ServerConfig::stdio("/nonexistent/mcp-server")).unwrap_err();
    assert!(matches!(e, Error::Spawn { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/mcp-server"));
}

#[test]
fn stdio_dropping_the_last_client_closes_gracefully_and_fast() {
    let log = temp_log("drop-client");
    let client = Client::connect(stdio(&["--log-file", log.to_str().unwrap()])).unwrap();
    let other = client.clone();
    drop(client);
    other.ping().unwrap();
    let t = Instant::now();
    drop(other);
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "drop does not block"
    );
    // The owner closes in the background: stdin first.
    wait_log(&log, |v| v["event"] == "stdin_eof");
}

// ----- Streamable HTTP ------------------------------------------------------

#[test]
fn http_sse_and_json_responses() {
    for args in [&[][..], &["--json-responses"][..], &["--tiny-chunks"][..]] {
        let server = http_server(args);
        let client = Client::connect(ServerConfig::http(&server.url)).unwrap();
        assert_eq!(client.transport(), "streamable-http");
        assert_eq!(client.list_tools().unwrap().len(), 15);
        let r = client
            .call_tool("echo", json!({"message": "over http"}))
            .unwrap();
        assert_eq!(text(&r), "Echo: over http", "{args:?}");
        client.close().unwrap();
    }
}

#[test]
fn http_progress_and_server_request_on_the_stream() {
    let server = http_server(&[]);
    let options = ConnectOptions::new().roots(Vec::new);
    let client = Client::connect_with(ServerConfig::http(&server.url), options).unwrap();
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
        .unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 3);
    let r = client
        .call_tool("ask", json!({"method": "roots/list"}))
        .unwrap();
    assert!(!r.is_error(), "{}", text(&r));
    let r = client
        .call_tool("ask", json!({"method": "roots/list", "on_listener": true}))
        .unwrap();
    assert!(!r.is_error(), "request on the GET listener: {}", text(&r));
    client.close().unwrap();
}

#[test]
fn http_cancel_and_timeout_tell_the_server() {
    let log = temp_log("http-cancel");
    let server = http_server(&["--log-file", log.to_str().unwrap()]);
    let client = Client::connect(ServerConfig::http(&server.url)).unwrap();
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 5000, "steps": 5}),
            CallOptions::new().timeout(Duration::from_millis(200)),
        )
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    wait_log(&log, cancelled_for(2));
    let token = CancelToken::new();
    let t2 = token.clone();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(150));
        t2.cancel();
    });
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 5000, "steps": 5}),
            CallOptions::new().cancel_token(token),
        )
        .unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    wait_log(&log, cancelled_for(3));
    client.ping().unwrap();
    client.close().unwrap();
}

#[test]
fn http_expired_session_is_renewed_transparently() {
    let log = temp_log("expire");
    let server = http_server(&["--log-file", log.to_str().unwrap()]);
    let client = Client::connect(ServerConfig::http(&server.url)).unwrap();
    client.call_tool("expire_session", json!({})).unwrap();
    let r = client
        .call_tool("echo", json!({"message": "again"}))
        .unwrap();
    assert_eq!(text(&r), "Echo: again");
    let inits = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"method\":\"initialize\""))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while inits() < 2 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(inits(), 2, "re-initialized once");
    client.close().unwrap();
}

#[test]
fn http_dropped_stream_resumes_with_last_event_id() {
    let log = temp_log("resume");
    let server = http_server(&["--log-file", log.to_str().unwrap()]);
    let client = Client::connect(ServerConfig::http(&server.url)).unwrap();
    let t = Instant::now();
    let r = client
        .call_tool("sse_drop", json!({"after_ms": 50, "retry_ms": 300}))
        .unwrap();
    assert!(!r.is_error());
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "waited the retry"
    );
    wait_log(&log, |v| {
        v["http"]["method"] == "GET" && v["http"]["headers"]["last-event-id"].is_string()
    });
    client.close().unwrap();
}

#[test]
fn http_errors_are_clear() {
    let server = http_server(&["--require-auth", "sekrit"]);
    let e = Client::connect(ServerConfig::http(&server.url)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("HTTP 401"), "{msg}");
    assert!(msg.contains("WWW-Authenticate"), "{msg}");
    let client =
        Client::connect(ServerConfig::http(&server.url).header("Authorization", "Bearer sekrit"))
            .unwrap();
    let e = client.call_tool("http_500", json!({})).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("HTTP 500: boom: internal failure"),
        "{e}"
    );
    client.close().unwrap();
}

#[test]
fn http_connection_refused_is_a_connect_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e =
        Client::connect(ServerConfig::http(format!("http://127.0.0.1:{port}/mcp"))).unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
}

#[test]
fn http_dropping_the_last_client_ends_the_session() {
    let log = temp_log("drop-http");
    let server = http_server(&["--log-file", log.to_str().unwrap()]);
    let client = Client::connect(ServerConfig::http(&server.url)).unwrap();
    client.ping().unwrap();
    drop(client);
    wait_log(&log, |v| v["event"] == "session_ended");
}

#[test]
fn http_8_threads_share_one_client() {
    let server = http_server(&[]);
    let client = Client::connect(ServerConfig::http(&server.url)).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let c = client.clone();
            thread::spawn(move || {
                for i in 0..5 {
                    let m = format!("{t}-{i}");
                    let r = c.call_tool("echo", json!({ "message": m })).unwrap();
                    assert_eq!(r.text(), format!("Echo: {m}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    client.close().unwrap();
}

// ----- call ------------------------------------------------------------------

#[test]
fn call_one_shot_with_a_session_json_and_sse() {
    for args in [&[][..], &["--json-responses"][..]] {
        let log = temp_log("call");
        let mut args = args.to_vec();
        let log_s = log.to_str().unwrap().to_string();
        args.extend(["--log-file", &log_s]);
        let server = http_server(&args);
        let r: CallToolResult = mcpwire_blocking::call(
            &server.url,
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "once"}}),
        )
        .unwrap();
        assert_eq!(r.text(), "Echo: once", "{args:?}");
        // The session it made is ended.
        wait_log(&log, |v| v["event"] == "session_ended");
        // Raw JSON works too, and errors are typed.
        let v: Value = mcpwire_blocking::call(&server.url, "tools/list", Value::Null).unwrap();
        assert!(v["tools"].is_array());
        let e = mcpwire_blocking::call::<Value>(
            &server.url,
            "tools/call",
            json!({"name": "error", "arguments": {"code": -32042, "message": "nope"}}),
        )
        .unwrap_err();
        assert_eq!(e.remote().map(|r| r.code), Some(-32042), "{e}");
    }
}

#[test]
fn call_one_shot_times_out() {
    let server = http_server(&[]);
    let t = Instant::now();
    let e = mcpwire_blocking::call_timeout::<Value>(
        &server.url,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 5000, "steps": 5}}),
        Duration::from_millis(400),
    )
    .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1900),
        "{:?}",
        t.elapsed()
    );
    // A server that never answers: the handshake times out.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let t = Instant::now();
    let e = mcpwire_blocking::call_timeout::<Value>(
        &url,
        "ping",
        Value::Null,
        Duration::from_millis(300),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Connect(_)), "{e}");
    // The probe, then the handshake, meet silence: a connect timeout.
    let text = e.to_string();
    assert!(
        text.contains("Request timeout after 300ms") || text.contains("within"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn call_one_shot_against_a_sessionless_server() {
    // A minimal stateless server: answers every POST with a JSON body and
    // no Mcp-Session-Id (initialize, then the call); 202 for notifications.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s = seen.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let s = s.clone();
            thread::spawn(move || loop {
                let Some((method, body)) = read_request(&mut stream) else {
                    return;
                };
                s.lock().unwrap().push(method.clone());
                let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let answer = match msg["method"].as_str() {
                    _ if method != "POST" => None,
                    Some("initialize") => Some(json!({"jsonrpc": "2.0", "id": msg["id"],
                        "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                   "serverInfo": {"name": "stateless", "version": "1"}}})),
                    Some("tools/call") => Some(json!({"jsonrpc": "2.0", "id": msg["id"],
                        "result": {"content": [{"type": "text", "text": "stateless ok"}]}})),
                    _ => None,
                };
                let reply = match answer {
                    Some(a) => {
                        let b = a.to_string();
                        format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}", b.len())
                    }
                    None if method == "POST" => {
                        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_string()
                    }
                    None => {
                        "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_string()
                    }
                };
                if stream.write_all(reply.as_bytes()).is_err() {
                    return;
                }
            });
        }
    });
    let r: CallToolResult =
        mcpwire_blocking::call(&url, "tools/call", json!({"name": "x", "arguments": {}})).unwrap();
    assert_eq!(r.text(), "stateless ok");
    let methods = seen.lock().unwrap().clone();
    assert!(
        !methods.contains(&"DELETE".to_string()),
        "no session, no DELETE: {methods:?}"
    );
}

/// Reads one HTTP/1.1 request (head and Content-Length body).
fn read_request(stream: &mut std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let method = head.split(' ').next()?.to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).ok()?;
    Some((method, body))
}
