//! The stdio mode of `mcpwire-test-server`, driven with raw JSONL.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[test]
fn initialize_negotiates_versions_and_capabilities() {
    let mut s = StdioServer::spawn(&[]);
    let r = s.initialize();
    let res = &r["result"];
    assert_eq!(res["protocolVersion"], "2025-11-25");
    assert_eq!(res["serverInfo"]["name"], "mcpwire-test-server");
    assert!(res["serverInfo"]["version"].is_string());
    assert!(res["instructions"].is_string());
    let caps = &res["capabilities"];
    assert_eq!(caps["tools"], json!({"listChanged": true}));
    assert_eq!(
        caps["resources"],
        json!({"subscribe": true, "listChanged": true})
    );
    for c in ["prompts", "logging", "completions"] {
        assert!(caps[c].is_object(), "{c} missing");
    }

    let old = s.request(
        1,
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {}}),
    );
    assert_eq!(old["result"]["protocolVersion"], "2024-11-05");
    let unknown = s.request(
        2,
        "initialize",
        json!({"protocolVersion": "1999-01-01", "capabilities": {}}),
    );
    assert_eq!(unknown["result"]["protocolVersion"], "2025-11-25");

    let mut s = StdioServer::spawn(&["--no-tools-cap"]);
    let r = s.initialize();
    assert!(r["result"]["capabilities"].get("tools").is_none());
    assert!(r["result"]["capabilities"]["prompts"].is_object());
}

#[test]
fn ping_unknown_method_and_invalid_input() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    assert_eq!(s.request(1, "ping", json!({}))["result"], json!({}));
    let r = s.request(2, "no/such/method", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    // String ids are echoed as strings.
    s.send(&json!({"jsonrpc": "2.0", "id": "abc", "method": "ping"}));
    assert_eq!(s.next()["id"], "abc");
    // A non-JSON line gets a parse error, a non-object an invalid request.
    s.send_raw("{not json");
    let e = s.next();
    assert_eq!(e["error"]["code"], -32700);
    assert_eq!(e["id"], Value::Null);
    s.send_raw("[1,2]");
    assert_eq!(s.next()["error"]["code"], -32600);
}

fn tool_names(page: &Value) -> Vec<String> {
    page["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(t["inputSchema"]["type"] == "object", "{t}");
            t["name"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn tools_list_is_paginated() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    let p1 = s.request(1, "tools/list", json!({}));
    let cursor = p1["result"]["nextCursor"]
        .as_str()
        .expect("page 1 has a cursor");
    let p2 = s.request(2, "tools/list", json!({ "cursor": cursor }));
    assert!(p2["result"].get("nextCursor").is_none(), "{p2}");
    let mut names = tool_names(&p1);
    names.extend(tool_names(&p2));
    for t in [
        "echo",
        "add",
        "slow",
        "crash",
        "garbage",
        "long_line",
        "big",
        "ask",
        "notify_first",
        "error",
        "tool_error",
        "cancelled_log",
        "expire_session",
        "sse_drop",
        "http_500",
        "pid",
        "stop_reading",
    ] {
        assert!(names.iter().any(|n| n == t), "{t} not listed in {names:?}");
    }
    let bad = s.request(3, "tools/list", json!({"cursor": "bogus"}));
    assert_eq!(bad["error"]["code"], -32602);

    let mut s = StdioServer::spawn(&["--repeat-cursor"]);
    s.initialize();
    let p1 = s.request(1, "tools/list", json!({}));
    let c1 = p1["result"]["nextCursor"].clone();
    let p2 = s.request(2, "tools/list", json!({ "cursor": c1 }));
    assert_eq!(p2["result"]["nextCursor"], c1);
}

#[test]
fn echo_add_error_and_tool_error() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    let r = s.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi"}}),
    );
    assert_eq!(tool_text(&r), "Echo: hi");
    assert_eq!(r["result"]["structuredContent"], json!({"message": "hi"}));
    let r = s.request(
        2,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    assert_eq!(tool_text(&r), "5");
    assert_eq!(r["result"]["structuredContent"]["sum"], 5);
    let r = s.request(
        3,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1.5, "b": 1}}),
    );
    assert_eq!(r["result"]["structuredContent"]["sum"], 2.5);
    let r = s.request(
        4,
        "tools/call",
        json!({"name": "error", "arguments": {"code": -32099, "message": "nope"}}),
    );
    assert_eq!(r["error"]["code"], -32099);
    assert_eq!(r["error"]["message"], "nope");
    assert!(r.get("result").is_none());
    let r = s.request(5, "tools/call", json!({"name": "tool_error"}));
    assert_eq!(r["result"]["isError"], true);
    let r = s.request(6, "tools/call", json!({"name": "no_such_tool"}));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(7, "tools/call", json!({"name": "echo", "arguments": {}}));
    assert_eq!(r["error"]["code"], -32602);
}

#[test]
fn resources_prompts_completion_logging() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    let r = s.request(1, "resources/list", json!({}));
    assert_eq!(r["result"]["resources"].as_array().unwrap().len(), 2);
    let r = s.request(2, "resources/read", json!({"uri": "test://hello"}));
    assert_eq!(r["result"]["contents"][0]["text"], "Hello, world!");
    let r = s.request(3, "resources/read", json!({"uri": "test://blob"}));
    assert_eq!(
        r["result"]["contents"][0]["blob"],
        "AAECAwQFBgcICQoLDA0ODw=="
    );
    let r = s.request(4, "resources/read", json!({"uri": "test://nope"}));
    assert_eq!(r["error"]["code"], -32002);
    let r = s.request(5, "resources/templates/list", json!({}));
    assert_eq!(
        r["result"]["resourceTemplates"][0]["uriTemplate"],
        "test://items/{id}"
    );
    let r = s.request(6, "resources/read", json!({"uri": "test://items/42"}));
    assert_eq!(r["result"]["contents"][0]["text"], "item 42");
    let r = s.request(7, "prompts/list", json!({}));
    assert_eq!(r["result"]["prompts"][0]["name"], "greet");
    let r = s.request(
        8,
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(r["result"]["messages"][0]["content"]["text"], "Hello, Ada!");
    let r = s.request(9, "prompts/get", json!({"name": "greet"}));
    assert_eq!(r["error"]["code"], -32602);
    let r = s.request(
        10,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "greet"},
               "argument": {"name": "name", "value": "a"}}),
    );
    assert_eq!(r["result"]["completion"]["values"], json!(["Alice"]));
    assert_eq!(
        s.request(11, "logging/setLevel", json!({"level": "debug"}))["result"],
        json!({})
    );
    assert_eq!(
        s.request(12, "logging/setLevel", json!({"level": "loud"}))["error"]["code"],
        -32602
    );
    for (id, m) in [(13, "resources/subscribe"), (14, "resources/unsubscribe")] {
        assert_eq!(
            s.request(id, m, json!({"uri": "test://hello"}))["result"],
            json!({})
        );
    }
}

#[test]
fn slow_sends_progress_per_step() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    let (before, r) = s.call(
        1,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 90, "steps": 3},
               "_meta": {"progressToken": "tok-1"}}),
    );
    assert_eq!(before.len(), 3, "{before:?}");
    for (i, p) in before.iter().enumerate() {
        assert_eq!(p["method"], "notifications/progress");
        assert_eq!(p["params"]["progressToken"], "tok-1");
        assert_eq!(p["params"]["progress"], i as u64 + 1);
        assert_eq!(p["params"]["total"], 3);
        assert!(p["params"]["message"].is_string());
    }
    assert_eq!(r["result"]["structuredContent"]["steps"], 3);
    // Without a progress token: no notifications.
    let (before, _) = s.call(
        2,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 30, "steps": 3}}),
    );
    assert!(before.is_empty());
}

#[test]
fn calls_run_concurrently_and_cancel_stops_slow() {
    let log = temp_path("cancel");
    let mut s = StdioServer::spawn(&["--log-file", log.to_str().unwrap()]);
    s.initialize();
    let start = Instant::now();
    s.send(&json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                   "params": {"name": "slow", "arguments": {"ms": 4000, "steps": 40},
                              "_meta": {"progressToken": 10}}}));
    // A slow call does not block others: the echo is answered while it
    // runs (no answer to 10 came before it), whatever the machine's load.
    let (before, r) = s.call(
        11,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "x"}}),
    );
    assert_eq!(tool_text(&r), "Echo: x");
    assert!(
        before.iter().all(|m| m.get("method").is_some()),
        "only progress before the echo's answer: {before:?}"
    );
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 10, "reason": "test"}}),
    );
    // Nothing answers id 10, even well after its natural end (4 s).
    let deadline = start + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(line) = s.lines.recv_timeout(Duration::from_millis(50)) {
            let v: Value = serde_json::from_str(&line).unwrap();
            assert!(v.get("method").is_some(), "unexpected response {v}");
        }
    }
    let r = s.request(12, "tools/call", json!({"name": "cancelled_log"}));
    assert_eq!(tool_text(&r), "[10]");
    assert_eq!(r["result"]["structuredContent"]["requestIds"], json!([10]));
    // The log file saw the cancellation.
    let line = wait_log(&log, |l| {
        l["message"]["method"] == "notifications/cancelled"
    });
    assert_eq!(line["message"]["params"]["requestId"], 10);
    assert_eq!(line["via"], "stdio");
    assert!(line["ms"].is_u64());
    let _ = std::fs::remove_file(log);
}

#[test]
fn crash_exits_with_code_and_message() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "crash", "arguments": {"code": 3, "message": "kaboom now"}}}));
    let status = s.wait_exit(T).expect("server exits");
    assert_eq!(status.code(), Some(3));
    assert!(s.stderr_text().contains("kaboom now"));
    assert!(s.lines.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn garbage_precedes_the_answer() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    s.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "garbage"}}));
    let l1 = s.line();
    assert!(serde_json::from_str::<Value>(&l1).is_err(), "{l1}");
    assert_eq!(s.line(), "[1,2,3]");
    assert_eq!(s.line(), "\"str\"");
    let unknown = s.next();
    assert_eq!(unknown["id"], 987654321);
    assert!(unknown.get("result").is_some());
    let r = s.next();
    assert_eq!(r["id"], 5);
    assert_eq!(tool_text(&r), "garbage sent");
}

#[test]
fn long_line_and_big() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "long_line", "arguments": {"bytes": 300000}}}));
    let line = s.line();
    assert_eq!(line.len(), 300000);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["method"], "notifications/message");
    assert_eq!(s.next()["id"], 1);
    let r = s.request(
        2,
        "tools/call",
        json!({"name": "big", "arguments": {"bytes": 200001}}),
    );
    let text = tool_text(&r);
    assert_eq!(text.len(), 200001);
    assert!(text.starts_with("abcdefghijklmnopqrstuvwxyzabc"));
}

#[test]
fn ask_sends_requests_to_the_client() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    // The client uses id 0 too: server ids are a separate space.
    s.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call",
                   "params": {"name": "ask", "arguments": {"method": "roots/list"}}}));
    let req = s.next();
    assert_eq!(req["method"], "roots/list");
    assert_eq!(req["id"], 0);
    s.send(&json!({"jsonrpc": "2.0", "id": 0,
                   "result": {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}}));
    let r = s.next();
    assert_eq!(r["id"], 0);
    assert!(r["result"].get("isError").is_none());
    let answered: Value = serde_json::from_str(tool_text(&r)).unwrap();
    assert_eq!(answered["roots"][0]["uri"], "file:///tmp");

    // Second request: next server id; an error answer becomes isError.
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "ask", "arguments": {"method": "sampling/createMessage"}}}));
    let req = s.next();
    assert_eq!(req["method"], "sampling/createMessage");
    assert_eq!(req["id"], 1);
    assert!(req["params"]["messages"].is_array());
    s.send(&json!({"jsonrpc": "2.0", "id": 1,
                   "error": {"code": -1, "message": "user rejected"}}));
    let r = s.next();
    assert_eq!(r["result"]["isError"], true);
    let err: Value = serde_json::from_str(tool_text(&r)).unwrap();
    assert_eq!(err["code"], -1);

    // elicitation/create carries default form params.
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "ask", "arguments": {"method": "elicitation/create"}}}));
    let req = s.next();
    assert_eq!(req["id"], 2);
    assert!(req["params"]["requestedSchema"].is_object());
    s.send(&json!({"jsonrpc": "2.0", "id": 2,
                   "result": {"action": "accept", "content": {"name": "Ada"}}}));
    assert!(tool_text(&s.next()).contains("Ada"));
}

#[test]
fn notify_first_sends_notifications_before_result() {
    let mut s = StdioServer::spawn(&[]);
    s.initialize();
    let (before, r) = s.call(
        1,
        "tools/call",
        json!({"name": "notify_first", "arguments": {"count": 4}}),
    );
    assert_eq!(before.len(), 4);
    for m in &before[..3] {
        assert_eq!(m["method"], "notifications/message");
    }
    assert_eq!(before[3]["method"], "notifications/tools/list_changed");
    assert_eq!(tool_text(&r), "sent 4 notifications");
}

#[test]
fn stdin_eof_exits_unless_ignored() {
    let log = temp_path("eof");
    let mut s = StdioServer::spawn(&["--log-file", log.to_str().unwrap()]);
    s.initialize();
    s.close_stdin();
    let status = s.wait_exit(T).expect("exits on stdin EOF");
    assert!(status.success());
    wait_log(&log, |l| l["event"] == "stdin_eof");
    let _ = std::fs::remove_file(log);

    let mut s = StdioServer::spawn(&["--ignore-stdin-eof"]);
    s.initialize();
    s.close_stdin();
    assert!(
        s.wait_exit(Duration::from_millis(400)).is_none(),
        "kept running"
    );
}

#[test]
fn max_lifetime_ends_the_server() {
    let mut s = StdioServer::spawn(&["--max-lifetime", "1", "--ignore-stdin-eof"]);
    let start = Instant::now();
    s.wait_exit(T).expect("exits after its lifetime");
    assert!(start.elapsed() >= Duration::from_millis(900));
}
