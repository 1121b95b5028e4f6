//! The Streamable HTTP mode of `mcpwire-test-server`, driven with raw HTTP/1.1.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[test]
fn initialize_over_sse_gives_a_session() {
    let srv = HttpServer::spawn(&[]);
    let mut c = srv.conn();
    let r = c.post(None, &init_msg(1));
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let sid = r.header("mcp-session-id").expect("session id");
    assert!(sid.len() >= 16);
    assert!(sid.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{sid}");
    let msgs = r.messages();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["id"], 1);
    assert_eq!(msgs[0]["result"]["protocolVersion"], "2025-11-25");
    assert!(msgs[0]["result"]["capabilities"]["tools"].is_object());
    // Every event carries an id.
    assert!(r.events().iter().all(|e| e.id.is_some()));

    // Sessions differ between initializes; the same connection is reused.
    let r2 = c.post(None, &init_msg(2));
    assert_ne!(r2.header("mcp-session-id").unwrap(), sid);
}

#[test]
fn json_responses_mode() {
    let srv = HttpServer::spawn(&["--json-responses"]);
    let mut c = srv.conn();
    let r = c.post(None, &init_msg(1));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let sid = r.header("mcp-session-id").unwrap().to_string();
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["id"], 1);
    assert_eq!(c.post(Some(&sid), &initialized()).status, 202);
    let r = c.post(Some(&sid), &call_msg(2, "echo", json!({"message": "json"})));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(tool_text(&r.messages()[0]), "Echo: json");
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// Until a session's `notifications/initialized` has arrived, a request
/// (but `ping`), another notification and the GET stream are refused
/// with 400 and a JSON-RPC error; afterwards they are served.
#[test]
fn strict_start_refuses_traffic_before_initialized() {
    let log = std::env::temp_dir().join(format!("mcpwire-strict-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let srv = HttpServer::spawn(&["--log-file", log.to_str().unwrap()]);
    let mut c = srv.conn();
    let r = c.post(None, &init_msg(1));
    let sid = r.header("mcp-session-id").unwrap().to_string();
    let call = call_msg(2, "echo", json!({"message": "early"}));
    let r = c.post(Some(&sid), &call);
    assert_eq!(r.status, 400);
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body).unwrap(),
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32600,
            "message": "Bad Request: tools/call before notifications/initialized"}})
    );
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2}});
    assert_eq!(c.post(Some(&sid), &cancelled).status, 400);
    let mut g = srv.conn();
    g.start_get(&sid, None);
    assert_eq!(g.read_response().status, 400);
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    assert_eq!(c.post(Some(&sid), &ping).status, 200);
    assert_eq!(c.post(Some(&sid), &initialized()).status, 202);
    let r = c.post(Some(&sid), &call);
    assert_eq!(tool_text(&r.messages()[0]), "Echo: early");
    let mut g = srv.conn();
    g.start_get(&sid, None);
    assert_eq!(g.read_head().0, 200);
    let refused: Vec<Value> = read_log(&log)
        .into_iter()
        .filter(|l| l["event"] == "rejected_before_initialized")
        .map(|l| l["what"].clone())
        .collect();
    assert_eq!(
        refused,
        [
            json!("tools/call"),
            json!("notifications/cancelled"),
            json!("GET")
        ]
    );
}

/// `--expire-after 2`: two requests are served, the third ends the
/// session with 404.
#[test]
fn expire_after_ends_the_session_at_the_next_request() {
    let srv = HttpServer::spawn(&["--expire-after", "2"]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    for id in 2..4 {
        let r = c.post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": id, "method": "ping"}),
        );
        assert_eq!(r.status, 200, "{id}");
    }
    let r = c.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
    );
    assert_eq!(r.status, 404);
    let r = c.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    );
    assert_eq!(r.status, 404);
    // A new session starts afresh.
    assert_ne!(srv.initialize(), sid);
}

#[test]
fn session_header_rules_and_delete() {
    let srv = HttpServer::spawn(&[]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    let ping = json!({"jsonrpc": "2.0", "id": 5, "method": "ping"});
    assert_eq!(c.post(None, &ping).status, 400, "no session header");
    assert_eq!(c.post(Some("nope"), &ping).status, 404, "unknown session");
    let r = c.post(Some(&sid), &ping);
    assert_eq!(r.status, 200);
    assert_eq!(r.messages()[0]["result"], json!({}));
    // Notifications and responses: 202, empty body.
    let r = c.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
    );
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    let r = c.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 77, "result": {}}),
    );
    assert_eq!(r.status, 202);
    // Unsupported protocol version header: 400.
    let mut c2 = srv.conn();
    c2.send_head(
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", &sid),
            ("MCP-Protocol-Version", "1999-01-01"),
        ],
        ping.to_string().as_bytes(),
    );
    assert_eq!(c2.read_response().status, 400);
    // Missing Accept: 406.
    let mut c3 = srv.conn();
    c3.send_head(
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", &sid),
        ],
        ping.to_string().as_bytes(),
    );
    assert_eq!(c3.read_response().status, 406);

    // DELETE ends the session.
    let mut d = srv.conn();
    d.send_head("DELETE", &[("Mcp-Session-Id", &sid)], b"");
    assert_eq!(d.read_response().status, 200);
    let mut c = srv.conn();
    assert_eq!(c.post(Some(&sid), &ping).status, 404);
    d.send_head("DELETE", &[("Mcp-Session-Id", &sid)], b"");
    assert_eq!(d.read_response().status, 404);
}

#[test]
fn expire_session_forgets_after_answering() {
    let srv = HttpServer::spawn(&[]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    let r = c.post(Some(&sid), &call_msg(2, "expire_session", json!({})));
    assert_eq!(r.status, 200);
    assert_eq!(tool_text(&r.messages()[0]), "session expired");
    let r = c.post(Some(&sid), &call_msg(3, "echo", json!({"message": "x"})));
    assert_eq!(r.status, 404);
    // Re-initializing works.
    let sid2 = srv.initialize();
    assert_ne!(sid, sid2);
    let r = c.post(Some(&sid2), &call_msg(4, "echo", json!({"message": "x"})));
    assert_eq!(r.status, 200);
}

#[test]
fn sse_drop_then_resume_with_last_event_id() {
    let log = temp_path("drop");
    let srv = HttpServer::spawn(&["--log-file", log.to_str().unwrap()]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    let r = c.post(
        Some(&sid),
        &call_msg(9, "sse_drop", json!({"after_ms": 50})),
    );
    assert_eq!(r.status, 200);
    let events = r.events();
    assert_eq!(events.len(), 1, "{events:?}");
    let priming = &events[0];
    assert_eq!(priming.retry, Some(300));
    assert_eq!(priming.data, "");
    let eid = priming.id.clone().expect("priming event id");

    // An unknown event id is refused.
    let mut g = srv.conn();
    g.start_get(&sid, Some("ev-does-not-exist"));
    assert_eq!(g.read_response().status, 400);

    std::thread::sleep(Duration::from_millis(300));
    let mut g = srv.conn();
    g.start_get(&sid, Some(&eid));
    let mut sse = g.sse();
    assert_eq!(sse.status(), 200);
    let ev = sse.next_event().expect("the answer on the resumed stream");
    assert_ne!(ev.id.as_deref(), Some(eid.as_str()));
    let msg = ev.json();
    assert_eq!(msg["id"], 9);
    assert_eq!(tool_text(&msg), "resumed after sse_drop");
    assert!(sse.next_event().is_none(), "stream ends after the answer");

    // The log shows the resuming GET with its Last-Event-ID.
    let get = wait_log(&log, |l| {
        l["http"]["method"] == "GET" && l["http"]["headers"]["last-event-id"] == json!(eid)
    });
    assert_eq!(get["http"]["headers"]["mcp-session-id"], json!(sid));
    let _ = std::fs::remove_file(log);
}

#[test]
fn listener_stream_and_no_listener() {
    let srv = HttpServer::spawn(&[]);
    let sid = srv.initialize();
    let mut g = srv.conn();
    g.start_get(&sid, None);
    let mut sse = g.sse();
    assert_eq!(sse.status(), 200);
    let open = sse.next_message().unwrap();
    assert_eq!(open["method"], "notifications/message");
    assert_eq!(open["params"]["data"], "listener open");

    // A server request sent on the listener, answered by POST.
    let mut c = srv.conn();
    c.start_post(
        Some(&sid),
        &call_msg(3, "ask", json!({"method": "ping", "on_listener": true})),
    );
    let req = sse.next_message().unwrap();
    assert_eq!(req["method"], "ping");
    let mut c2 = srv.conn();
    let r = c2.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": req["id"], "result": {}}),
    );
    assert_eq!(r.status, 202);
    let r = c.read_response();
    assert_eq!(tool_text(r.messages().last().unwrap()), "{}");

    // DELETE ends the listener stream.
    c2.send_head("DELETE", &[("Mcp-Session-Id", &sid)], b"");
    assert_eq!(c2.read_response().status, 200);
    assert!(sse.next_event().is_none());

    let srv = HttpServer::spawn(&["--no-listener"]);
    let sid = srv.initialize();
    let mut g = srv.conn();
    g.start_get(&sid, None);
    assert_eq!(g.read_response().status, 405);
}

#[test]
fn require_auth_gives_401_with_resource_metadata() {
    let srv = HttpServer::spawn(&["--require-auth", "sekrit"]);
    let mut c = srv.conn();
    let r = c.post(None, &init_msg(1));
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").unwrap(),
        format!(
            "Bearer resource_metadata=\"http://127.0.0.1:{}/.well-known/oauth-protected-resource\"",
            srv.port
        )
    );
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(body["error"].is_string());
    c.extra_headers
        .push(("Authorization".into(), "Bearer wrong".into()));
    assert_eq!(c.post(None, &init_msg(1)).status, 401);
    let mut c = srv.conn();
    c.extra_headers
        .push(("Authorization".into(), "Bearer sekrit".into()));
    let r = c.post(None, &init_msg(1));
    assert_eq!(r.status, 200);
    // The metadata document is served without a token.
    let mut m = srv.conn();
    m.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    use std::io::Write;
    write!(
        m.stream,
        "GET /.well-known/oauth-protected-resource HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    let r = m.read_response();
    assert_eq!(r.status, 200);
    let meta: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        meta["resource"],
        format!("http://127.0.0.1:{}/mcp", srv.port)
    );
}

#[test]
fn http_500_and_crash_over_http() {
    let srv = HttpServer::spawn(&[]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    let r = c.post(Some(&sid), &call_msg(2, "http_500", json!({})));
    assert_eq!(r.status, 500);
    assert_eq!(r.text(), "boom: internal failure");
    // The connection stays usable.
    let r = c.post(
        Some(&sid),
        &call_msg(3, "echo", json!({"message": "after"})),
    );
    assert_eq!(tool_text(&r.messages()[0]), "Echo: after");

    c.start_post(Some(&sid), &call_msg(4, "crash", json!({})));
    assert!(
        c.is_closed(),
        "crash closes the connection without answering"
    );
    // The server lives on.
    let mut c = srv.conn();
    let r = c.post(
        Some(&sid),
        &call_msg(5, "echo", json!({"message": "alive"})),
    );
    assert_eq!(tool_text(&r.messages()[0]), "Echo: alive");
}

#[test]
fn tiny_chunks_split_every_body() {
    let srv = HttpServer::spawn(&["--tiny-chunks"]);
    let mut c = srv.conn();
    let r = c.post(None, &init_msg(1));
    assert_eq!(r.status, 200);
    let sid = r.header("mcp-session-id").unwrap().to_string();
    assert!(r.chunks.len() > 50);
    assert!(
        r.chunks.iter().all(|&n| (1..=3).contains(&n)),
        "{:?}",
        r.chunks
    );
    assert!(r.chunks.iter().any(|&n| n != r.chunks[0]), "sizes vary");
    assert_eq!(r.messages()[0]["id"], 1);
    assert_eq!(c.post(Some(&sid), &initialized()).status, 202);
    let r = c.post(Some(&sid), &call_msg(2, "echo", json!({"message": "tiny"})));
    assert!(r.chunks.iter().all(|&n| (1..=3).contains(&n)));
    assert_eq!(tool_text(&r.messages()[0]), "Echo: tiny");
    // Error bodies too.
    let r = c.post(Some("nope"), &call_msg(3, "echo", json!({"message": "x"})));
    assert_eq!(r.status, 404);
    assert!(!r.chunks.is_empty() && r.chunks.iter().all(|&n| n <= 3));
    // JSON responses too.
    let srv = HttpServer::spawn(&["--tiny-chunks", "--json-responses"]);
    let r = srv.conn().post(None, &init_msg(1));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.chunks.len() > 50 && r.chunks.iter().all(|&n| n <= 3));
    assert_eq!(r.messages()[0]["id"], 1);
}

#[test]
fn keep_alive_chunked_requests_and_connection_close() {
    let srv = HttpServer::spawn(&[]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    for i in 0..3 {
        let r = c.post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": i, "method": "ping"}),
        );
        assert_eq!(r.messages()[0]["id"], i);
    }
    // A chunked request body.
    let body = json!({"jsonrpc": "2.0", "id": 50, "method": "ping"}).to_string();
    let (a, b) = body.split_at(10);
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sid}\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    use std::io::Write;
    c.stream.write_all(req.as_bytes()).unwrap();
    assert_eq!(c.read_response().messages()[0]["id"], 50);
    // Connection: close is honoured.
    c.extra_headers.push(("Connection".into(), "close".into()));
    let r = c.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 51, "method": "ping"}),
    );
    assert_eq!(r.messages()[0]["id"], 51);
    assert!(c.is_closed());
}

#[test]
fn progress_notify_and_ask_on_the_post_stream() {
    let srv = HttpServer::spawn(&[]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    let mut msg = call_msg(2, "slow", json!({"ms": 60, "steps": 3}));
    msg["params"]["_meta"] = json!({"progressToken": "p"});
    let msgs = c.post(Some(&sid), &msg).messages();
    assert_eq!(msgs.len(), 4);
    for (i, m) in msgs[..3].iter().enumerate() {
        assert_eq!(m["method"], "notifications/progress");
        assert_eq!(m["params"]["progress"], i as u64 + 1);
    }
    assert_eq!(msgs[3]["id"], 2);

    let msgs = c
        .post(
            Some(&sid),
            &call_msg(3, "notify_first", json!({"count": 2})),
        )
        .messages();
    assert_eq!(msgs[0]["method"], "notifications/message");
    assert_eq!(msgs[1]["method"], "notifications/tools/list_changed");
    assert_eq!(msgs[2]["id"], 3);

    // ask: the request comes on the POST's stream before the result.
    c.start_post(
        Some(&sid),
        &call_msg(0, "ask", json!({"method": "roots/list"})),
    );
    let mut sse = c.sse();
    let req = sse.next_message().unwrap();
    assert_eq!(req["method"], "roots/list");
    assert_eq!(req["id"], 0);
    let mut c2 = srv.conn();
    let r = c2.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 0, "result": {"roots": []}}),
    );
    assert_eq!(r.status, 202);
    let res = sse.next_message().unwrap();
    assert_eq!(res["id"], 0);
    assert_eq!(tool_text(&res), r#"{"roots":[]}"#);
    assert!(sse.next_event().is_none());
}

#[test]
fn cancel_over_http_ends_the_stream_unanswered() {
    let log = temp_path("httpcancel");
    let srv = HttpServer::spawn(&["--log-file", log.to_str().unwrap()]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    let start = Instant::now();
    c.start_post(
        Some(&sid),
        &call_msg(7, "slow", json!({"ms": 60_000, "steps": 1})),
    );
    let mut sse = c.sse();
    std::thread::sleep(Duration::from_millis(100));
    let mut c2 = srv.conn();
    let r = c2.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 7}}),
    );
    assert_eq!(r.status, 202);
    assert!(sse.next_event().is_none(), "no answer for a cancelled call");
    // The stream ended with the cancel, not with the call's 60 s.
    assert!(start.elapsed() < Duration::from_secs(20));
    let r = c2.post(Some(&sid), &call_msg(8, "cancelled_log", json!({})));
    assert_eq!(tool_text(&r.messages()[0]), "[7]");
    let line = wait_log(&log, |l| {
        l["message"]["method"] == "notifications/cancelled"
    });
    assert_eq!(line["via"], "http");
    let _ = std::fs::remove_file(log);
}

#[test]
fn http_server_exits_on_stdin_eof_and_lifetime() {
    let mut srv = HttpServer::spawn(&[]);
    srv.stdin = None;
    assert!(srv.wait_exit(T).expect("exits on stdin EOF").success());

    let mut srv = HttpServer::spawn(&["--max-lifetime", "1"]);
    let start = Instant::now();
    srv.wait_exit(T).expect("exits after its lifetime");
    assert!(start.elapsed() >= Duration::from_millis(900));
}

#[test]
fn garbage_and_unknown_paths_over_http() {
    let srv = HttpServer::spawn(&[]);
    let sid = srv.initialize();
    let mut c = srv.conn();
    let r = c.post(Some(&sid), &call_msg(2, "garbage", json!({})));
    let events = r.events();
    assert_eq!(events.len(), 5, "{events:?}");
    assert!(serde_json::from_str::<Value>(&events[0].data).is_err());
    assert_eq!(events[1].data, "[1,2,3]");
    assert_eq!(events[4].json()["id"], 2);
    // Parse error body.
    c.send_head(
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", &sid),
        ],
        b"{oops",
    );
    let r = c.read_response();
    assert_eq!(r.status, 400);
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body).unwrap()["error"]["code"],
        -32700
    );
    use std::io::Write;
    write!(c.stream, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(c.read_response().status, 404);
}
