use serde_json::{json, Value};

use super::*;

fn lines(s: &mut ServerSession) -> Vec<Value> {
    std::iter::from_fn(|| s.poll_write())
        .map(|l| {
            assert_eq!(l.last(), Some(&b'\n'));
            assert_eq!(l.iter().filter(|b| **b == b'\n').count(), 1, "one line");
            serde_json::from_slice(&l).expect("JSON")
        })
        .collect()
}

fn events(s: &mut ServerSession) -> Vec<ServerEvent> {
    std::iter::from_fn(|| s.poll_event())
        .filter(|e| !matches!(e, ServerEvent::Diagnostic(_)))
        .collect()
}

fn feed(s: &mut ServerSession, v: Value) {
    let mut line = serde_json::to_vec(&v).unwrap();
    line.push(b'\n');
    s.feed(&line);
}

fn raw(v: Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(&v).unwrap()
}

/// A session past the handshake, at `version`.
fn ready(version: &str) -> ServerSession {
    let mut s = ServerSession::default();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let Some(ServerEvent::Initialize { id, .. }) = s.poll_event() else {
        panic!("initialize expected")
    };
    s.accept(
        &id,
        json!({"capabilities":{},"serverInfo":{"name":"s","version":"1"}}),
    )
    .unwrap();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    assert!(matches!(&events(&mut s)[..], [ServerEvent::Initialized]));
    lines(&mut s);
    s
}

#[test]
fn initialize_negotiates_the_version() {
    for (asked, answered) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
        ("", "2025-11-25"),
    ] {
        let mut s = ServerSession::default();
        feed(
            &mut s,
            json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":asked}}),
        );
        let ev = events(&mut s);
        let [ServerEvent::Initialize { id, params }] = &ev[..] else {
            panic!("{ev:?}")
        };
        assert_eq!(params["protocolVersion"], asked);
        let version = s.accept(id, json!({"capabilities":{"tools":{}}})).unwrap();
        assert_eq!(version, answered);
        assert_eq!(s.protocol_version(), Some(answered));
        assert_eq!(
            lines(&mut s),
            [
                json!({"jsonrpc":"2.0","id":"i","result":{"capabilities":{"tools":{}},"protocolVersion":answered}})
            ]
        );
    }
}

#[test]
fn requests_before_the_handshake_are_refused_and_discover_is_not_found() {
    let mut s = ServerSession::default();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
    );
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":2,"method":"server/discover"}),
    );
    feed(&mut s, json!({"jsonrpc":"2.0","id":3,"method":"ping"}));
    let out = lines(&mut s);
    assert_eq!(out[0]["error"]["code"], -32600);
    assert_eq!(out[0]["id"], 1);
    assert_eq!(out[1]["error"]["code"], -32601);
    assert_eq!(out[1]["id"], 2);
    assert_eq!(out[2], json!({"jsonrpc":"2.0","id":3,"result":{}}));
    assert!(events(&mut s).is_empty());
}

#[test]
fn requests_behind_initialize_follow_it() {
    let mut s = ServerSession::default();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}),
    );
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
    );
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [ServerEvent::Initialize { .. }, ServerEvent::Request { method, .. }] if method == "tools/list")
    );
    assert!(lines(&mut s).is_empty());
}

#[test]
fn a_refused_initialize_may_be_sent_again_and_a_second_one_is_refused() {
    let mut s = ServerSession::default();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}),
    );
    events(&mut s);
    s.respond(RequestId::Number(1), Err(ErrorObject::internal("no")))
        .unwrap();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}),
    );
    assert!(matches!(
        &events(&mut s)[..],
        [ServerEvent::Initialize { .. }]
    ));
    s.accept(&RequestId::Number(2), json!({})).unwrap();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}),
    );
    let out = lines(&mut s);
    assert_eq!(out.last().unwrap()["error"]["code"], -32600);
    assert!(events(&mut s).is_empty());
}

#[test]
fn each_request_is_answered_once() {
    let mut s = ready("2025-11-25");
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}),
    );
    let ev = events(&mut s);
    let [ServerEvent::Request { id, method, params }] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(method, "tools/call");
    assert_eq!(params.as_ref().unwrap().get(), r#"{"name":"echo"}"#);
    assert_eq!(s.open_requests(), 1);
    s.respond(id.clone(), Ok(raw(json!({"content":[]}))))
        .unwrap();
    assert_eq!(
        s.respond(id.clone(), Ok(raw(json!({})))),
        Err(ServeError::NotOpen(id.clone()))
    );
    assert_eq!(
        lines(&mut s),
        [json!({"jsonrpc":"2.0","id":7,"result":{"content":[]}})]
    );
    assert_eq!(s.open_requests(), 0);
}

#[test]
fn an_id_in_use_and_too_many_requests_are_refused_at_once() {
    let mut s = ServerSession::new(ServeConfig {
        max_open_requests: 2,
        ..ServeConfig::default()
    });
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}),
    );
    s.accept(&RequestId::Number(0), json!({})).unwrap();
    events(&mut s);
    lines(&mut s);
    for id in [1, 1, 2, 3] {
        feed(
            &mut s,
            json!({"jsonrpc":"2.0","id":id,"method":"tools/list"}),
        );
    }
    assert_eq!(events(&mut s).len(), 2);
    let out = lines(&mut s);
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0]["id"].clone(), out[0]["error"]["code"].clone()),
        (json!(1), json!(-32600))
    );
    assert_eq!(
        (out[1]["id"].clone(), out[1]["error"]["code"].clone()),
        (json!(3), json!(-32000))
    );
}

#[test]
fn a_cancelled_request_is_answered_by_nobody() {
    let mut s = ready("2025-11-25");
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}),
    );
    events(&mut s);
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"user"}}),
    );
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [ServerEvent::Cancelled { id: RequestId::String(a), reason: Some(r) }] if a == "a" && r == "user"),
        "{ev:?}"
    );
    assert!(s
        .respond(RequestId::String("a".into()), Ok(raw(json!({}))))
        .is_err());
    assert!(lines(&mut s).is_empty());
    // A late cancel of an answered request, and a malformed one: nothing.
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}),
    );
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}),
    );
    assert!(events(&mut s).is_empty());
}

#[test]
fn our_requests_and_their_answers() {
    let mut s = ready("2025-11-25");
    let a = s.request("roots/list", None).unwrap();
    let b = s
        .request("sampling/createMessage", Some(&raw(json!({"maxTokens":5}))))
        .unwrap();
    assert_ne!(a, b);
    assert_eq!(
        lines(&mut s),
        [
            json!({"jsonrpc":"2.0","id":a,"method":"roots/list"}),
            json!({"jsonrpc":"2.0","id":b,"method":"sampling/createMessage","params":{"maxTokens":5}})
        ]
    );
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":b,"error":{"code":-1,"message":"no"}}),
    );
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":a,"result":{"roots":[]}}),
    );
    // Twice, and unknown ids: dropped.
    feed(&mut s, json!({"jsonrpc":"2.0","id":a,"result":{}}));
    feed(&mut s, json!({"jsonrpc":"2.0","id":"x","result":{}}));
    let ev = events(&mut s);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert!(
        matches!(&ev[0], ServerEvent::Response { id, outcome: Err(e) } if *id == b && e.code == -1)
    );
    assert!(
        matches!(&ev[1], ServerEvent::Response { id, outcome: Ok(r) } if *id == a && r.get() == r#"{"roots":[]}"#)
    );
}

#[test]
fn own_requests_are_bounded_and_listed_when_the_client_goes() {
    let mut s = ServerSession::new(ServeConfig {
        max_own_requests: 2,
        ..ServeConfig::default()
    });
    let a = s.request("ping", None).unwrap();
    let b = s.request("ping", None).unwrap();
    assert_eq!(s.request("ping", None), Err(ServeError::TooManyRequests(2)));
    s.finish();
    let ev = events(&mut s);
    assert!(
        matches!(&ev[..], [ServerEvent::Closed { unanswered }] if *unanswered == [a, b]),
        "{ev:?}"
    );
    assert_eq!(s.request("ping", None), Err(ServeError::Closed));
    assert_eq!(s.notify("x", None), Err(ServeError::Closed));
}

#[test]
fn bad_lines_get_the_errors_json_rpc_names() {
    let mut s = ready("2025-11-25");
    s.feed(b"{not json\n");
    s.feed(b"[1,2]\n");
    s.feed(b"{\"jsonrpc\":\"1.0\",\"id\":4,\"method\":\"x\"}\n");
    s.feed(b"\xff\xfe\n");
    let out = lines(&mut s);
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(out[0]["error"]["code"], -32700);
    assert_eq!(out[0]["id"], Value::Null);
    assert_eq!(out[1]["error"]["code"], -32600);
    assert_eq!(out[2]["error"]["code"], -32600);
    assert_eq!(out[2]["id"], 4);
    assert_eq!(out[3]["error"]["code"], -32700);
}

#[test]
fn an_overlong_request_is_answered_when_its_id_shows() {
    let mut s = ServerSession::new(ServeConfig {
        max_line_len: 64,
        ..ServeConfig::default()
    });
    let big = "x".repeat(200);
    let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{{\"a\":\"{big}\"}}}}\n");
    // In small pieces: never buffered whole.
    for chunk in line.as_bytes().chunks(7) {
        s.feed(chunk);
    }
    let out = lines(&mut s);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["id"], 9);
    assert_eq!(out[0]["error"]["code"], -32600);
    // The session goes on.
    s.feed(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    assert_eq!(lines(&mut s)[0]["result"], json!({}));
}

#[test]
fn notifications_pass_and_lines_split_anywhere() {
    let mut s = ready("2025-11-25");
    let text = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n";
    for b in text.iter() {
        s.feed(std::slice::from_ref(b));
    }
    let ev = events(&mut s);
    assert!(
        matches!(&ev[0], ServerEvent::Notification { method, params: None } if method == "notifications/roots/list_changed")
    );
    assert!(matches!(&ev[1], ServerEvent::Request { method, .. } if method == "tools/list"));
    s.notify(
        "notifications/progress",
        Some(&raw(json!({"progressToken":1,"progress":1}))),
    )
    .unwrap();
    assert_eq!(
        lines(&mut s),
        [
            json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}})
        ]
    );
}

#[test]
fn a_truncated_last_line_is_a_diagnostic() {
    let mut s = ready("2025-11-25");
    s.feed(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth");
    s.finish();
    let all: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(matches!(&all[0], ServerEvent::Diagnostic(d) if d.contains("without a newline")));
    assert!(matches!(&all[1], ServerEvent::Closed { unanswered } if unanswered.is_empty()));
    // Fed after the end: ignored.
    s.feed(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    assert!(s.poll_write().is_none());
}

#[test]
fn local_authorities() {
    for v in [
        "localhost",
        "localhost:8080",
        "127.0.0.1:1",
        "[::1]:443",
        "http://LOCALHOST:3000",
        "https://127.0.0.1",
    ] {
        assert!(is_local_authority(v), "{v}");
    }
    for v in [
        "evil.example.com",
        "http://evil.example.com",
        "127.0.0.2",
        "",
        ":80",
        "localhost.evil.com",
    ] {
        assert!(!is_local_authority(v), "{v}");
    }
}
