//! The adapter suite against `mcpwire-test-server` (`mcpwire_tests::suite`,
//! shared with mcpwire-tokio and mcpwire-smol): each blocking call runs on
//! a thread of its own, and a task is a thread. Plus what only this
//! adapter has: threads that call the client directly, one call after
//! another, and `call`, one request start to finish.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mcpwire_blocking::types::CallToolResult;
use mcpwire_blocking::{Client, Error, ServerConfig};
use mcpwire_tests::suite::block_on;
use mcpwire_tests::suite::support::{http_server, stdio, temp_log, wait_log};
use serde_json::{json, Value};

mcpwire_tests::adapter_suite!(mcpwire_blocking::Client, mcpwire_tests::suite::block_on);

// ----- threads -------------------------------------------------------------

/// The suite runs each call on a fresh thread; here 8 threads make 5
/// calls each on their own thread (its waker reused from call to call),
/// over stdio and over HTTP.
#[test]
fn stdio_and_http_8_threads_call_one_client_directly() {
    let server = http_server(&[]);
    for config in [stdio(&[]), ServerConfig::http(&server.url)] {
        let client = Client::connect(config).unwrap();
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
}

// ----- the wait on the pipes -------------------------------------------------

/// `MCPWIRE_BLOCKING_PIPES=threads` (how `scripts/test` runs this suite a
/// second time) swaps `poll(2)` for a thread per pipe, the wait Windows
/// has: this run uses the one it asked for. (The threads' names, from
/// Linux's `/proc`.)
#[cfg(target_os = "linux")]
#[test]
fn the_pipes_are_waited_on_as_asked() {
    let threads = || -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .map(|name| name.trim().to_owned())
            .collect()
    };
    let client = Client::connect(stdio(&[])).unwrap();
    client.ping().unwrap();
    let names = threads();
    let per_pipe = ["mcpwire-stdout", "mcpwire-stderr", "mcpwire-stdin"];
    let asked = std::env::var("MCPWIRE_BLOCKING_PIPES").is_ok_and(|v| v == "threads");
    for name in per_pipe {
        assert_eq!(
            names.iter().any(|n| n == name),
            asked,
            "{name} in {names:?}"
        );
    }
    client.close().unwrap();
    if asked {
        // They end with their pipes.
        let deadline = Instant::now() + Duration::from_secs(10);
        while threads().iter().any(|n| per_pipe.contains(&n.as_str())) {
            assert!(Instant::now() < deadline, "left: {:?}", threads());
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// After an idle spell long enough for the background thread to take
/// the pipes (its linger, 20 ms), the callers lead their own calls again:
/// the background thread sleeps through them (it wakes for its linger
/// checks only), instead of answering every later call itself, a hop to
/// it and back a call. (Its wake-ups, from Linux's `/proc`: voluntary
/// context switches.)
#[cfg(target_os = "linux")]
#[test]
fn callers_lead_their_calls_again_after_an_idle_spell() {
    let background_switches = || -> u64 {
        let task = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .find(|t| {
                // `comm` holds the first 15 bytes of a thread's name.
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|name| name.trim() == &"mcpwire-background"[..15])
            })
            .expect("the background thread");
        let status = std::fs::read_to_string(task.path().join("status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("voluntary_ctxt_switches")
    };
    let client = Client::connect(stdio(&[])).unwrap();
    client.ping().unwrap();
    // Idle: the background thread takes the pipes; the next call is
    // answered while it leads.
    thread::sleep(Duration::from_millis(100));
    client.ping().unwrap();
    let before = background_switches();
    let calls = 400;
    for _ in 0..calls {
        client.ping().unwrap();
    }
    let woke = background_switches() - before;
    assert!(
        woke < calls / 2,
        "the background thread woke {woke} times in {calls} calls"
    );
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
        block_on(wait_log::<Client>(&log, |v| v["event"] == "session_ended"));
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
        json!({"name": "slow", "arguments": {"ms": 60_000, "steps": 60}}),
        Duration::from_millis(400),
    )
    .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
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
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
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

/// Two blocking clients sharing a token file meet the expired token
/// together: one refresh (the server holds it, so they overlap), the other
/// uses its tokens; the server revoking a grant on a reused refresh token
/// sees no reuse. (The lock is taken on a thread of the blocking executor.)
#[test]
fn clients_sharing_a_token_file_refresh_once() {
    let log = temp_log("blocking-token-race");
    let server = http_server(&[
        "--oauth",
        "--oauth-reuse-revokes",
        "--oauth-refresh-delay",
        "300",
        "--log-file",
        log.to_str().unwrap(),
    ]);
    let dir = std::env::temp_dir().join(format!("mcpwire-blocking-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("tokens.json");
    let connect = |url: String, path: std::path::PathBuf| {
        let auth = mcpwire_blocking::AuthOptions::new(mcpwire_blocking::auth::FnRedirect::new(
            "http://127.0.0.1:9/callback",
            |url: &str| mcpwire_tests::oauth::fetch_redirect(url).map_err(Into::into),
        ))
        .store(mcpwire_blocking::FileStore::new(path));
        Client::connect_with(
            ServerConfig::http(&url),
            mcpwire_blocking::ConnectOptions::new()
                .timeout(Duration::from_secs(30))
                .auth(auth),
        )
    };
    connect(server.url.clone(), path.clone())
        .expect("login")
        .close()
        .unwrap();
    let origin = server.url.trim_end_matches("/mcp");
    let status = mcpwire_tests::oauth::post_empty(&format!("{origin}/oauth/expire")).unwrap();
    assert!(status.contains("200"), "{status}");
    let racers: Vec<_> = (0..2)
        .map(|i| {
            let (url, path) = (server.url.clone(), path.clone());
            thread::spawn(move || {
                let c = connect(url, path).expect("connect");
                let m = format!("racer-{i}");
                let r = c.call_tool("echo", json!({ "message": m })).unwrap();
                assert_eq!(r.text(), format!("Echo: {m}"));
                c.close().unwrap();
            })
        })
        .collect();
    for r in racers {
        r.join().unwrap();
    }
    let lines = mcpwire_tests::suite::support::log_lines(&log);
    let token = |status: u64| {
        lines
            .iter()
            .filter(|l| l["event"] == "oauth" && l["path"] == "/token" && l["status"] == status)
            .count()
    };
    assert_eq!(token(200), 2, "the login's and one refresh");
    assert_eq!(token(400), 0);
    assert!(!lines.iter().any(|l| l["event"] == "grant_revoked"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
