//! The cases over Streamable HTTP: the test server on a loopback port.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire_adapter::methods::{ListRootsResult, ServerRequestKind};
use mcpwire_adapter::options::ConnectOptions;
use mcpwire_adapter::{CallOptions, CancelToken, Error, Handler, RequestError, ServerConfig};
use serde_json::json;

use super::support::{
    call_id, cancelled_for, http_server_in, log_lines, session_order, temp_log, wait_log, Era,
};
use super::Adapter;

pub async fn http_sse_and_json_responses<A: Adapter>(era: Era) {
    for args in [&[][..], &["--json-responses"][..], &["--tiny-chunks"][..]] {
        let server = http_server_in(Some(era), args);
        let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
        assert_eq!(client.transport(), "streamable-http");
        assert_eq!(client.protocol_version(), era.version(), "{args:?}");
        assert_eq!(client.list_tools().await.unwrap().len(), 20);
        let r = client
            .call_tool("echo", json!({"message": "over http"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "Echo: over http", "{args:?}");
        client.close().await.unwrap();
    }
}

/// The roots are answered by a blocking handler here (an `async` one in
/// the stdio case).
pub async fn http_progress_and_server_request_on_the_stream<A: Adapter>(era: Era) {
    let server = http_server_in(Some(era), &[]);
    let roots = Handler::Blocking(Arc::new(|_params| {
        Ok(serde_json::to_value(ListRootsResult::new(Vec::new())).unwrap())
    }));
    let options = ConnectOptions::<A::Flavor>::new().handler(ServerRequestKind::ListRoots, roots);
    let client = A::connect_with(ServerConfig::http(&server.url), options)
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
    assert!(!r.is_error(), "{}", r.text());
    let r = client
        .call_tool("ask", json!({"method": "roots/list", "on_listener": true}))
        .await
        .unwrap();
    assert!(
        !r.is_error(),
        "request on the GET listener answered: {}",
        r.text()
    );
    client.close().await.unwrap();
}

/// A call that times out and one whose [`CancelToken`] is cancelled from
/// another task (a thread, for the blocking client): the server is told
/// each time, and the session goes on.
pub async fn http_cancel_and_timeout_tell_the_server<A: Adapter>(era: Era) {
    let log = temp_log("http-cancel");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 60_000, "steps": 60}),
            CallOptions::new().timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    let id = call_id::<A>(&log, "slow", 0).await;
    wait_log::<A>(&log, cancelled_for(id)).await;
    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = A::spawn(async move {
        A::sleep(Duration::from_millis(150)).await;
        t2.cancel();
    });
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 60_000, "steps": 60}),
            CallOptions::new().cancel_token(token),
        )
        .await
        .unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    let id = call_id::<A>(&log, "slow", 1).await;
    wait_log::<A>(&log, cancelled_for(id)).await;
    canceller.await;
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

/// Legacy only (sessions).
pub async fn http_expired_session_is_renewed_transparently<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    let log = temp_log("expire");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    client.call_tool("expire_session", json!({})).await.unwrap();
    let r = client
        .call_tool("echo", json!({"message": "again"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: again");
    // The server may write its log line just after answering: wait for it.
    let inits = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"method\":\"initialize\""))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while inits() < 2 && Instant::now() < deadline {
        A::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(inits(), 2, "re-initialized once");
    client.close().await.unwrap();
}

/// The session expires again and again, each time under several
/// concurrent calls that meet the 404 (or are made while the client
/// re-initializes): every call succeeds, once, and in each new session
/// nothing reaches the server before its `notifications/initialized`
/// (the test server refuses it with 400 otherwise, and its log shows the
/// order).
/// Legacy only (sessions and `initialize`).
pub async fn http_reinitialize_never_overtakes_initialized<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    const ROUNDS: u64 = 30;
    const CALLS: u64 = 4;
    let log = temp_log("reinit-order");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    // The output schemas known first: the count below is of the rounds'
    // requests only (a first structuredContent would list the tools).
    client.list_tools().await.unwrap();
    let before = client.stats();
    for round in 0..ROUNDS {
        client.call_tool("expire_session", json!({})).await.unwrap();
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let c = client.clone();
                A::spawn(async move {
                    let m = format!("{round}-{i}");
                    let r = c.call_tool("echo", json!({ "message": m })).await;
                    (m, r)
                })
            })
            .collect();
        for call in calls {
            let (m, r) = call.await;
            let r = r.unwrap_or_else(|e| panic!("round {round}, call {m}: {e}"));
            assert_eq!(r.text(), format!("Echo: {m}"));
        }
    }
    let after = client.stats();
    client.close().await.unwrap();
    // One `initialize` per round, each completed once; no call failed, and
    // nothing was answered twice.
    let sent = after.requests_sent - before.requests_sent;
    assert_eq!(sent, ROUNDS * (CALLS + 2), "{after:?}");
    assert_eq!(after.completed_ok - before.completed_ok, sent, "{after:?}");
    assert_eq!(
        after.late_responses + after.unknown_responses,
        0,
        "{after:?}"
    );
    let order = session_order(&log);
    assert_eq!(order.created as u64, ROUNDS + 1, "{order:?}");
    assert_eq!(order.initialized, order.created, "{order:?}");
    assert!(order.violations.is_empty(), "{:#?}", order.violations);
}

/// Legacy only (2026-07-28 has no resumption: see `http_a_lost_stream_is_issued_again_with_a_new_id`).
pub async fn http_dropped_stream_resumes_with_last_event_id<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    let log = temp_log("resume");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
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
    wait_log::<A>(&log, |v| {
        v["http"]["method"] == "GET" && v["http"]["headers"]["last-event-id"].is_string()
    })
    .await;
    client.close().await.unwrap();
}

pub async fn http_errors_are_clear<A: Adapter>(era: Era) {
    let server = http_server_in(Some(era), &["--require-auth", "sekrit"]);
    let e = A::connect(ServerConfig::http(&server.url))
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("HTTP 401"), "{msg}");
    assert!(msg.contains("WWW-Authenticate"), "{msg}");
    let client =
        A::connect(ServerConfig::http(&server.url).header("Authorization", "Bearer sekrit"))
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

/// No server at all: the same in both eras.
pub async fn http_connection_refused_is_a_connect_error<A: Adapter>(_era: Era) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = A::connect(ServerConfig::http(format!("http://127.0.0.1:{port}/mcp")))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
}

/// Legacy only (sessions).
pub async fn http_dropping_the_last_client_ends_the_session<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    let log = temp_log("drop-http");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    client.ping().await.unwrap();
    drop(client);
    // The client closes in the background: the session is DELETEd.
    wait_log::<A>(&log, |v| v["event"] == "session_ended").await;
}

/// 8 tasks (threads, for the blocking client) share one client, 5 calls
/// each.
pub async fn http_8_tasks_share_one_client<A: Adapter>(era: Era) {
    let server = http_server_in(Some(era), &[]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let c = client.clone();
            A::spawn(async move {
                for i in 0..5 {
                    let m = format!("{t}-{i}");
                    let r = c.call_tool("echo", json!({ "message": m })).await.unwrap();
                    assert_eq!(r.text(), format!("Echo: {m}"));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    client.close().await.unwrap();
}

/// Over HTTP, as over stdio: a call polled once and then held without
/// being polled holds up no other task's call (the exchanges' wake-ups go
/// to the same leader).
pub async fn http_a_call_held_unpolled_holds_up_no_other_call<A: Adapter>(era: Era) {
    let server = http_server_in(Some(era), &[]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    super::stdio::a_call_held_unpolled_holds_up_no_other_call(&client).await;
    client.close().await.unwrap();
}

/// A response over `max_event` (an SSE answer) or `max_body` (a JSON
/// answer) fails its call at once, typed, and the session goes on.
pub async fn http_an_oversize_reply_fails_its_call_at_once<A: Adapter>(era: Era) {
    for (args, what) in [
        (&[][..], "max_event"),
        (&["--json-responses"][..], "max_body"),
    ] {
        let server = http_server_in(Some(era), args);
        let options = ConnectOptions::<A::Flavor>::new()
            .config(|c| {
                c.http.max_event = 64 * 1024;
                c.http.max_body = 64 * 1024;
            })
            .timeout(Duration::from_secs(120));
        let client = A::connect_with(ServerConfig::http(&server.url), options)
            .await
            .unwrap();
        let started = Instant::now();
        let e = client
            .call_tool("big", json!({"bytes": 300_000}))
            .await
            .unwrap_err();
        match &e {
            Error::Request(RequestError::TooLarge { what: w, limit, .. }) => {
                assert_eq!((*w, *limit), (what, 64 * 1024), "{args:?}");
            }
            other => panic!("{args:?}: {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{args:?}");
        let r = client
            .call_tool("echo", json!({"message": "still here"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "Echo: still here");
        assert_eq!(client.stats().oversize, 1, "{args:?}");
        client.close().await.unwrap();
    }
}

// ---- redirects (issue 17, item 2) ------------------------------------------

/// The HTTP requests the server logged: (method, path, headers).
fn http_requests(log: &std::path::Path) -> Vec<(String, String, serde_json::Value)> {
    super::support::log_lines(log)
        .into_iter()
        .filter_map(|v| {
            let h = &v["http"];
            Some((
                h["method"].as_str()?.to_owned(),
                h["path"].as_str()?.to_owned(),
                h["headers"].clone(),
            ))
        })
        .collect()
}

/// A Starlette-style mount: every request to `/mcp` answers 307 (or 308)
/// `Location: /mcp/`. The client follows, and once the `initialize` was
/// answered there, everything goes to `/mcp/` directly: calls, the GET
/// listener and the DELETE at close.
/// Legacy only (it follows `initialize`, the GET listener and the DELETE).
pub async fn http_307_and_308_are_followed_and_the_endpoint_moves<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Legacy);
    for status in ["307", "308"] {
        let log = temp_log("redirect");
        let server = http_server_in(
            Some(era),
            &[
                "--redirect-status",
                status,
                "--log-file",
                log.to_str().unwrap(),
            ],
        );
        let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
        assert_eq!(client.list_tools().await.unwrap().len(), 20);
        let r = client
            .call_tool("echo", json!({"message": "moved"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "Echo: moved");
        client.close().await.unwrap();
        wait_log::<A>(&log, |v| v["event"] == "session_ended").await;

        let requests = http_requests(&log);
        let first_moved = requests
            .iter()
            .position(|(_, path, _)| path == "/mcp/")
            .expect("a request reached /mcp/");
        assert!(
            requests[..first_moved]
                .iter()
                .all(|(m, p, _)| m == "POST" && p == "/mcp"),
            "{status}: {requests:?}"
        );
        // The initialize is the last request redirected; after its answer
        // nothing goes to /mcp any more.
        let lines = super::support::log_lines(&log);
        let init = lines
            .iter()
            .position(|v| v["message"]["method"] == "initialize")
            .expect("initialize logged");
        let after: Vec<_> = lines[init..]
            .iter()
            .filter_map(|v| v["http"]["path"].as_str())
            .collect();
        assert!(
            !after.is_empty() && after.iter().all(|p| *p == "/mcp/"),
            "{status}: {after:?}"
        );
        let on = |method: &str| {
            requests
                .iter()
                .filter(|(m, _, _)| m == method)
                .map(|(_, p, _)| p.as_str())
                .collect::<Vec<_>>()
        };
        let gets = on("GET");
        assert!(
            !gets.is_empty() && gets.iter().all(|p| *p == "/mcp/"),
            "{status}: {gets:?}"
        );
        assert_eq!(on("DELETE"), ["/mcp/"], "{status}");
    }
}

/// Five hops are followed; a sixth, or a loop, is a clear error.
pub async fn http_redirects_stop_after_5_hops_and_at_a_loop<A: Adapter>(era: Era) {
    let server = http_server_in(Some(era), &["--redirect-hops", "5"]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    let r = client
        .call_tool("echo", json!({"message": "five hops"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: five hops");
    client.close().await.unwrap();

    let server = http_server_in(Some(era), &["--redirect-hops", "6"]);
    let e = A::connect(ServerConfig::http(&server.url))
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(m.contains("too many redirects: more than 5"), "{m}");
    assert!(m.contains("/mcp/hop/5") && m.contains("/mcp/"), "{m}");

    let server = http_server_in(Some(era), &["--redirect-loop"]);
    let e = A::connect(ServerConfig::http(&server.url))
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(m.contains("redirect loop"), "{m}");
}

/// 301/302/303 on a POST would make fetch send a GET: an error naming
/// where the server points.
pub async fn http_a_303_on_a_post_is_an_error_naming_the_location<A: Adapter>(era: Era) {
    for status in ["302", "303"] {
        let server = http_server_in(Some(era), &["--redirect-status", status]);
        let e = A::connect(ServerConfig::http(&server.url))
            .await
            .unwrap_err();
        let m = e.to_string();
        let location = format!("{}/", server.url);
        assert!(m.contains(&format!("HTTP {status}")), "{m}");
        assert!(
            m.contains(&format!("redirects the POST to {location}")),
            "{m}"
        );
        assert!(m.contains("into a GET"), "{m}");
    }
}

/// Another origin (here another port) is refused unless allowed; when
/// allowed, the configured `Authorization` never reaches it, and the
/// session it serves is the one it issued.
pub async fn http_a_cross_origin_redirect_is_refused_unless_allowed_and_gets_no_credentials<
    A: Adapter,
>(
    era: Era,
) {
    // Legacy only (it follows the session, the GET listener and the DELETE).
    assert_eq!(era, Era::Legacy);
    let log = temp_log("cross-origin");
    let server = http_server_in(
        Some(era),
        &[
            "--redirect-cross-origin",
            "--log-file",
            log.to_str().unwrap(),
        ],
    );
    let config = ServerConfig::http(&server.url).header("Authorization", "Bearer home-only");
    let e = A::connect(config.clone()).await.unwrap_err();
    let m = e.to_string();
    assert!(m.contains("another origin"), "{m}");
    assert!(m.contains(&server.url), "{m}");
    let home = server.url.trim_end_matches("/mcp").to_owned();
    let away = m
        .split("http://127.0.0.1:")
        .skip(1)
        .filter_map(|s| s.split('/').next())
        .find(|port| !home.ends_with(&format!(":{port}")))
        .map(|port| format!("127.0.0.1:{port}"))
        .unwrap_or_else(|| panic!("the other origin is named: {m}"));
    assert!(m.contains(&format!("http://{away}/mcp/")), "{m}");

    let options = ConnectOptions::<A::Flavor>::new().allow_cross_origin_redirects(true);
    let client = A::connect_with(config, options).await.unwrap();
    let r = client
        .call_tool("echo", json!({"message": "far away"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: far away");
    client.close().await.unwrap();
    wait_log::<A>(&log, |v| v["event"] == "session_ended").await;

    let requests = http_requests(&log);
    let (there, here): (Vec<_>, Vec<_>) = requests
        .iter()
        .partition(|(_, _, h)| h["host"].as_str() == Some(away.as_str()));
    assert!(!here.is_empty() && !there.is_empty(), "{requests:?}");
    for (_, _, h) in &here {
        assert_eq!(h["authorization"], "Bearer home-only", "{h}");
    }
    for (m, p, h) in &there {
        assert!(h.get("authorization").is_none(), "{m} {p}: {h}");
    }
    // The requests that crossed carried no session id; the listener and the
    // DELETE went to the other origin with the session it issued.
    let first_there = &there[0].2;
    assert!(first_there.get("mcp-session-id").is_none(), "{first_there}");
    for method in ["GET", "DELETE"] {
        let sent: Vec<_> = there.iter().filter(|(m, _, _)| m == method).collect();
        assert!(!sent.is_empty(), "{method}: {requests:?}");
        assert!(
            sent.iter().all(|(_, _, h)| h["mcp-session-id"].is_string()),
            "{sent:?}"
        );
    }
    assert!(here.iter().all(|(m, _, _)| m == "POST"), "{here:?}");
}

// ---- 2026-07-28 (issue 18, item 7) ------------------------------------------

/// Modern only: a dual-era server (the test server's default) over HTTP:
/// a probing client speaks 2026-07-28 without a session; one pinned to
/// the legacy era gets `initialize` and a session from the same server.
pub async fn http_a_dual_era_server_speaks_the_era_asked<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Modern);
    let log = temp_log("dual-http");
    let server = http_server_in(None, &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    assert_eq!(client.protocol_version(), "2026-07-28");
    let r = client
        .call_tool("echo", json!({"message": "new"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: new");
    // A timed-out call's notifications/cancelled reaches it (no session).
    let e = client
        .call_tool_with(
            "slow",
            json!({"ms": 60_000, "steps": 60}),
            CallOptions::new().timeout(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    let id = call_id::<A>(&log, "slow", 0).await;
    wait_log::<A>(&log, cancelled_for(id)).await;
    client.close().await.unwrap();
    let lines = log_lines(&log);
    assert!(lines.iter().all(|v| v["event"] != "session_created"));
    assert!(lines
        .iter()
        .filter(|v| v["http"].is_object())
        .all(|v| v["http"]["headers"]["mcp-session-id"].is_null()));
    let client = A::connect(ServerConfig::http(&server.url).era("legacy"))
        .await
        .unwrap();
    assert_eq!(client.protocol_version(), "2025-11-25");
    let r = client
        .call_tool("echo", json!({"message": "old"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: old");
    client.close().await.unwrap();
    wait_log::<A>(&log, |v| v["event"] == "session_created").await;
}

/// Modern only: every request POST carries the era headers
/// (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), which the server
/// checks against the body (it refuses a mismatch with `-32020`; none
/// was logged). The tool name and the URI arrive plain.
pub async fn http_era_headers_are_sent_and_checked<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Modern);
    let log = temp_log("headers");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    client
        .call_tool("echo", json!({"message": "h\u{e9}llo"}))
        .await
        .unwrap();
    client.read_resource("test://hello").await.unwrap();
    client.close().await.unwrap();
    let lines = log_lines(&log);
    let posts: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|v| v["http"]["method"] == "POST")
        .collect();
    assert!(posts.len() >= 3, "{posts:?}");
    for p in &posts {
        assert_eq!(
            p["http"]["headers"]["mcp-protocol-version"], "2026-07-28",
            "{p}"
        );
        assert!(p["http"]["headers"]["mcp-method"].is_string(), "{p}");
    }
    let named: Vec<&str> = posts
        .iter()
        .filter_map(|p| p["http"]["headers"]["mcp-name"].as_str())
        .collect();
    assert!(
        named.contains(&"echo") && named.contains(&"test://hello"),
        "{named:?}"
    );
    assert!(
        lines.iter().all(|v| v["event"] != "header_mismatch"),
        "{lines:?}"
    );
}

/// The `sse_drop` attempts the server logged for `key`: (request id,
/// dropped).
fn drop_attempts(log: &std::path::Path, key: &str) -> Vec<(u64, bool)> {
    log_lines(log)
        .iter()
        .filter(|v| v["event"] == "sse_drop" && v["key"] == key)
        .map(|v| (v["id"].as_u64().unwrap(), v["dropped"] == true))
        .collect()
}

/// Modern only (2025 resumes the stream instead): the response stream
/// of a call breaks before its response; the client issues the request
/// again with a new id after a backoff, and the call succeeds.
pub async fn http_a_lost_stream_is_issued_again_with_a_new_id<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Modern);
    let log = temp_log("reissue");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    let t = Instant::now();
    let r = client
        .call_tool(
            "sse_drop",
            json!({"drops": 1, "key": "once", "after_ms": 20}),
        )
        .await
        .unwrap();
    assert_eq!(r.text(), "answered attempt 2 after 1 dropped streams");
    assert!(
        t.elapsed() >= Duration::from_millis(100),
        "backed off first"
    );
    let attempts = drop_attempts(&log, "once");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert!(attempts[0].1 && !attempts[1].1, "{attempts:?}");
    assert_ne!(attempts[0].0, attempts[1].0, "a new id: {attempts:?}");
    // The connection goes on.
    let r = client
        .call_tool("echo", json!({"message": "after"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: after");
    client.close().await.unwrap();
}

/// Modern only: every attempt's stream breaks: after the bounded
/// re-issues (3, so 4 attempts, each with its own id) the call fails
/// with an error saying the stream was lost; the connection goes on.
pub async fn http_a_stream_lost_every_time_fails_after_the_reissues<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Modern);
    let log = temp_log("reissue-all");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    let e = client
        .call_tool("sse_drop", json!({"drops": 1000, "key": "always"}))
        .await
        .unwrap_err();
    let attempts = drop_attempts(&log, "always");
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    let mut ids: Vec<u64> = attempts.iter().map(|a| a.0).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "each attempt its own id: {attempts:?}");
    let m = e.to_string();
    assert!(
        m.contains("ended before its response 4 times (issued again 3 times with new ids)"),
        "{m}"
    );
    let r = client
        .call_tool("echo", json!({"message": "after"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: after");
    client.close().await.unwrap();
}

/// A list change reaches the notification stream over HTTP: on the call's
/// stream in 2025-11-25, on the `subscriptions/listen` stream (a POST
/// the client keeps open) in 2026-07-28.
pub async fn http_a_list_change_reaches_the_notifications<A: Adapter>(era: Era) {
    let log = temp_log("http-notes");
    let server = http_server_in(Some(era), &["--log-file", log.to_str().unwrap()]);
    let client = A::connect(ServerConfig::http(&server.url)).await.unwrap();
    let mut notes = client.notifications();
    if era.is_modern() {
        wait_log::<A>(&log, |v| {
            v["event"] == "subscribed" && v["notifications"]["toolsListChanged"] == true
        })
        .await;
    }
    let r = client
        .call_tool("notify_first", json!({"count": 1}))
        .await
        .unwrap();
    if era.is_modern() {
        assert!(r.text().contains("1 subscriptions reached"), "{}", r.text());
    }
    loop {
        match A::recv_timeout(&mut notes, super::support::PATIENCE).await {
            Ok(mcpwire_adapter::ServerNotification::ToolsListChanged) => break,
            Ok(_) => {}
            Err(e) => panic!("no tools/list_changed: {e:?}"),
        }
    }
    client.close().await.unwrap();
}

/// Modern only: the era remembered for a URL goes stale when another
/// server takes its port (as happens between tests): a 2025-only server
/// is found there first, then a 2026-only one on the same port; the
/// client, starting with `initialize` from memory, is refused (`-32022`)
/// and probes again.
pub async fn http_a_remembered_era_that_went_stale_is_probed_again<A: Adapter>(era: Era) {
    assert_eq!(era, Era::Modern);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let old = http_server_in(Some(Era::Legacy), &["--port", &port]);
    let client = A::connect(ServerConfig::http(&old.url)).await.unwrap();
    assert_eq!(client.protocol_version(), "2025-11-25");
    client.close().await.unwrap();
    let url = old.url.clone();
    drop(old);
    let log = temp_log("stale-era");
    let new = http_server_in(
        Some(era),
        &["--port", &port, "--log-file", log.to_str().unwrap()],
    );
    assert_eq!(new.url, url);
    let client = A::connect(ServerConfig::http(&new.url)).await.unwrap();
    assert_eq!(client.protocol_version(), "2026-07-28");
    let r = client
        .call_tool("echo", json!({"message": "found again"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "Echo: found again");
    client.close().await.unwrap();
}
