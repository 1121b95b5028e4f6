//! The 2026-07-28 era of `mcpwire-test-server`, driven with raw JSONL and
//! raw HTTP: `server/discover`, the `_meta` envelope, `resultType`,
//! `input_required` (MRTR), `subscriptions/listen`, the era headers and
//! errors, and `--era`.

mod common;

use common::*;
use serde_json::{json, Value};

const V: &str = "2026-07-28";

/// `params` with the envelope of a client declaring `caps`.
fn stamped(mut params: Value, caps: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    params
}

#[test]
fn discover_and_the_era_flag() {
    for (flag, versions) in [
        (
            None,
            json!([V, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]),
        ),
        (Some("modern"), json!([V])),
    ] {
        let args: Vec<&str> = flag.map(|f| vec!["--era", f]).unwrap_or_default();
        let mut s = StdioServer::spawn(&args);
        let r = s.request(0, "server/discover", stamped(json!({}), json!({})));
        let res = &r["result"];
        assert_eq!(res["supportedVersions"], versions, "{flag:?}");
        assert_eq!(res["resultType"], "complete");
        assert_eq!(
            res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "mcpwire-test-server"
        );
        assert_eq!(res["capabilities"]["tools"]["listChanged"], true);
    }
    // Legacy only: discover is unknown, the envelope ignored.
    let mut s = StdioServer::spawn(&["--era", "legacy"]);
    let r = s.request(0, "server/discover", stamped(json!({}), json!({})));
    assert_eq!(r["error"]["code"], -32601);
    // Modern only: initialize and requests without the envelope are refused
    // with -32022 naming the versions served.
    let mut s = StdioServer::spawn(&["--era", "modern"]);
    let r = s.request(1, "initialize", init_msg(1)["params"].clone());
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(r["error"]["data"]["supported"], json!([V]));
    assert_eq!(r["error"]["data"]["requested"], "2025-11-25");
    let r = s.request(2, "tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32022);
    // A version not served is -32022 too; removed methods are -32601.
    let mut p = stamped(json!({}), json!({}));
    p["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = s.request(3, "tools/list", p);
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(r["error"]["data"]["requested"], "2099-01-01");
    let r = s.request(4, "ping", stamped(json!({}), json!({})));
    assert_eq!(r["error"]["code"], -32601);
}

#[test]
fn results_say_complete_and_ask_is_an_input_required_round_trip() {
    let mut s = StdioServer::spawn(&[]);
    let echo = json!({"name": "echo", "arguments": {"message": "hi"}});
    let r = s.request(1, "tools/call", stamped(echo, json!({})));
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(tool_text(&r), "Echo: hi");
    let ask = json!({"name": "ask", "arguments": {"method": "elicitation/create"}});
    let caps = json!({"elicitation": {"form": {}}});
    let r = s.request(2, "tools/call", stamped(ask.clone(), caps.clone()));
    let res = &r["result"];
    assert_eq!(res["resultType"], "input_required");
    assert_eq!(res["inputRequests"]["ask"]["method"], "elicitation/create");
    assert_eq!(res["inputRequests"]["ask"]["params"]["mode"], "form");
    let state = res["requestState"].as_str().unwrap().to_owned();
    let mut retry = stamped(ask.clone(), caps.clone());
    retry["inputResponses"] = json!({"ask": {"action": "accept", "content": {"name": "Ada"}}});
    retry["requestState"] = json!(state);
    let r = s.request(3, "tools/call", retry.clone());
    assert_eq!(r["result"]["resultType"], "complete");
    let answer: Value = serde_json::from_str(tool_text(&r)).unwrap();
    assert_eq!(answer["content"]["name"], "Ada");
    // A state that is not the one given is refused.
    retry["requestState"] = json!("forged");
    let r = s.request(4, "tools/call", retry);
    assert_eq!(r["error"]["code"], -32602);
    // Without the capability: -32021 naming it.
    let r = s.request(5, "tools/call", stamped(ask, json!({})));
    assert_eq!(r["error"]["code"], -32021);
    assert!(r["error"]["data"]["requiredCapabilities"]["elicitation"].is_object());
}

#[test]
fn list_changes_go_to_subscriptions_and_logs_need_a_level() {
    let mut s = StdioServer::spawn(&[]);
    let listen = stamped(
        json!({"notifications": {"toolsListChanged": true}}),
        json!({}),
    );
    s.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": listen}));
    let ack = s.next();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    let notify = json!({"name": "notify_first", "arguments": {"count": 3}});
    let (mut seen, r) = s.call(8, "tools/call", stamped(notify.clone(), json!({})));
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(tool_text(&r).contains("1 subscriptions reached"), "{r}");
    // The subscription's stream is written by its own thread: the change
    // may come just after the call's answer.
    if seen.is_empty() {
        seen.push(s.next());
    }
    let methods: Vec<&str> = seen.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["notifications/tools/list_changed"], "{seen:?}");
    assert_eq!(
        seen[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    // With a log level, the log lines come on the request's stream.
    let mut p = stamped(notify, json!({}));
    p["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let (mut before, _) = s.call(9, "tools/call", p);
    if !before
        .iter()
        .any(|m| m["method"] == "notifications/tools/list_changed")
    {
        before.push(s.next());
    }
    let logs = before
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .count();
    assert_eq!(logs, 2, "{before:?}");
    assert_eq!(before.len(), 3, "{before:?}");
    // Cancelled, the subscription ends unanswered and gets nothing more.
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 7}}),
    );
    std::thread::sleep(std::time::Duration::from_millis(150));
    let notify = json!({"name": "notify_first", "arguments": {"count": 1}});
    let (before, r) = s.call(10, "tools/call", stamped(notify, json!({})));
    assert!(before.is_empty(), "{before:?}");
    assert!(tool_text(&r).contains("0 subscriptions reached"), "{r}");
}

/// A raw 2026-07-28 POST of `msg` with the era headers `headers`.
fn post(srv: &HttpServer, msg: &Value, headers: &[(&str, &str)]) -> Response {
    let mut c = srv.conn();
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    c.send_head("POST", &all, msg.to_string().as_bytes());
    c.read_response()
}

#[test]
fn http_needs_no_session_and_checks_the_era_headers() {
    let srv = HttpServer::spawn(&[]);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": stamped(json!({"name": "echo", "arguments": {"message": "x"}}), json!({}))});
    let good = [
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    let r = post(&srv, &call, &good);
    assert_eq!(r.status, 200);
    assert!(r.header("mcp-session-id").is_none());
    assert_eq!(
        r.messages().last().unwrap()["result"]["resultType"],
        "complete"
    );
    // The name base64-encoded is the same name.
    let b64 = [
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "=?base64?ZWNobw==?="),
    ];
    assert_eq!(post(&srv, &call, &b64).status, 200);
    for bad in [
        &good[..2],
        &[good[0], ("Mcp-Method", "tools/list"), good[2]][..],
        &[good[0], good[1], ("Mcp-Name", "add")][..],
        &[("MCP-Protocol-Version", "2025-11-25"), good[1], good[2]][..],
    ] {
        let r = post(&srv, &call, bad);
        assert_eq!(r.status, 400, "{bad:?}");
        let body: Value = serde_json::from_str(&r.text()).unwrap();
        assert_eq!(body["error"]["code"], -32020, "{bad:?}");
        assert_eq!(body["id"], 1);
    }
    // A version not served (in the header and the body alike): 400 with
    // -32022; in the body alone, it is a mismatch (-32020).
    let mut old = call.clone();
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = post(&srv, &old, &good);
    assert_eq!(r.status, 400);
    let body: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(body["error"]["code"], -32020);
    let same = [("MCP-Protocol-Version", "2099-01-01"), good[1], good[2]];
    let r = post(&srv, &old, &same);
    assert_eq!(r.status, 400);
    let body: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(body["error"]["code"], -32022);
}

#[test]
fn http_sse_drop_loses_the_first_attempts_of_a_call() {
    let srv = HttpServer::spawn(&[]);
    let headers = [
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "sse_drop"),
    ];
    let msg = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": stamped(json!({"name": "sse_drop", "arguments": {"drops": 2, "key": "k"}}),
                              json!({}))})
    };
    for id in [1, 2] {
        let r = post(&srv, &msg(id), &headers);
        assert_eq!(r.status, 200);
        let events = r.events();
        assert_eq!(events.len(), 1, "only the priming event");
        assert!(events[0].data.is_empty());
    }
    let r = post(&srv, &msg(3), &headers);
    let last = r.messages().pop().unwrap();
    assert_eq!(last["id"], 3);
    assert!(
        tool_text(&last).contains("attempt 3 after 2 dropped"),
        "{last}"
    );
}
