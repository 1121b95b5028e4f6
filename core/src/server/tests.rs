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
fn requests_before_the_handshake_are_refused_and_discover_needs_its_envelope() {
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
    // Without the 2026-07-28 envelope discover is invalid (a session of the
    // handshake era only does not know it: -32601, tested below).
    assert_eq!(out[1]["error"]["code"], -32602);
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
    let [ServerEvent::Request {
        id, method, params, ..
    }] = &ev[..]
    else {
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

/// A 2026-07-28 request's params: `extra` with the envelope.
fn envelope(extra: Value) -> Value {
    let mut p = extra;
    p["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    p
}

#[test]
fn a_2026_request_needs_no_handshake_and_its_result_says_complete() {
    let mut s = ServerSession::default();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":envelope(json!({}))}),
    );
    let ev = events(&mut s);
    let [ServerEvent::Request {
        id, method, era, ..
    }] = &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!((method.as_str(), *era), ("tools/list", Era::Modern));
    s.respond(id.clone(), Ok(raw(json!({"tools": []}))))
        .unwrap();
    // One that says what it is keeps it.
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":envelope(json!({"name":"x"}))}),
    );
    let [ServerEvent::Request { id, .. }] = &events(&mut s)[..] else {
        panic!()
    };
    let input = json!({"resultType": "input_required", "inputRequests": {}});
    s.respond(id.clone(), Ok(raw(input.clone()))).unwrap();
    let out = lines(&mut s);
    // A cacheable result gets the hints the era requires (nothing cached).
    assert_eq!(
        out[0]["result"],
        json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
    );
    assert_eq!(out[1]["result"], input);
    // The handshake era is still there to speak, on the same session.
    assert_eq!(s.protocol_version(), None);
}

#[test]
fn a_2026_envelope_is_checked() {
    let mut s = ServerSession::default();
    let mut no_caps = envelope(json!({}));
    no_caps["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":no_caps}),
    );
    let mut future = envelope(json!({}));
    future["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":future}),
    );
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":3,"method":"server/discover","params":{}}),
    );
    for removed in [
        "ping",
        "initialize",
        "logging/setLevel",
        "resources/subscribe",
    ] {
        feed(
            &mut s,
            json!({"jsonrpc":"2.0","id":removed,"method":removed,"params":envelope(json!({}))}),
        );
    }
    assert!(events(&mut s).is_empty());
    let out = lines(&mut s);
    assert_eq!(out[0]["error"]["code"], -32602, "{}", out[0]);
    assert_eq!(out[1]["error"]["code"], -32022, "{}", out[1]);
    assert_eq!(out[1]["error"]["data"]["requested"], "2099-01-01");
    assert_eq!(out[1]["error"]["data"]["supported"][0], "2026-07-28");
    assert_eq!(out[2]["error"]["code"], -32602, "{}", out[2]);
    for (i, removed) in [
        "ping",
        "initialize",
        "logging/setLevel",
        "resources/subscribe",
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(out[3 + i]["id"], removed);
        assert_eq!(out[3 + i]["error"]["code"], -32601, "{}", out[3 + i]);
    }
    assert_eq!(s.open_requests(), 0);
}

#[test]
fn server_discover_is_answered_with_the_versions_served() {
    let mut s = ServerSession::default();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":7,"method":"server/discover","params":envelope(json!({}))}),
    );
    let ev = events(&mut s);
    let [ServerEvent::Discover {
        id,
        client_capabilities,
    }] = &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(client_capabilities, &json!({"sampling": {}}));
    let info = json!({"name": "srv", "version": "2"});
    s.discover(
        id,
        json!({"capabilities": {"tools": {}}, "serverInfo": info}),
    )
    .unwrap();
    let out = lines(&mut s);
    let r = &out[0]["result"];
    assert_eq!(r["supportedVersions"][0], "2026-07-28");
    assert!(r["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2025-11-25")));
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"], info);
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["ttlMs"], 0);
    // Answered once.
    assert_eq!(
        s.discover(id, json!({})),
        Err(ServeError::NotOpen(id.clone()))
    );
}

#[test]
fn a_session_of_the_handshake_era_only_ignores_the_envelope() {
    let config = ServeConfig {
        modern: false,
        ..ServeConfig::default()
    };
    let mut s = ServerSession::new(config);
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":envelope(json!({}))}),
    );
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":envelope(json!({}))}),
    );
    assert!(events(&mut s).is_empty());
    let out = lines(&mut s);
    assert_eq!(out[0]["error"]["code"], -32601);
    assert_eq!(out[1]["error"]["code"], -32600, "before the handshake");
    assert_eq!(s.served_versions(), SUPPORTED_PROTOCOL_VERSIONS);
}

#[test]
fn the_2026_http_headers_must_match_the_body() {
    let params = raw(envelope(json!({"name": "get weather"})));
    let headers = |version: &'static str, method: &'static str, name: Option<&'static str>| {
        move |h: &str| match h {
            "mcp-protocol-version" => Some(version),
            "mcp-method" => Some(method),
            "mcp-name" => name,
            _ => None,
        }
    };
    let ok = check_headers(
        "tools/call",
        Some(&params),
        headers(
            "2026-07-28",
            "tools/call",
            Some("=?base64?Z2V0IHdlYXRoZXI=?="),
        ),
    );
    assert_eq!(ok, Ok(()));
    for bad in [
        headers("2025-11-25", "tools/call", Some("get weather")),
        headers("2026-07-28", "tools/list", Some("get weather")),
        headers("2026-07-28", "tools/call", Some("other")),
        headers("2026-07-28", "tools/call", None),
    ] {
        let e = check_headers("tools/call", Some(&params), bad).unwrap_err();
        assert_eq!(e.code, crate::modern::HEADER_MISMATCH, "{}", e.message);
    }
}

#[test]
fn a_request_of_ours_withdrawn_is_cancelled_at_the_client_and_its_answer_dropped() {
    let mut s = ready("2025-11-25");
    let id = s.request("roots/list", None).unwrap();
    s.withdraw(id, Some("no longer needed")).unwrap();
    let out = lines(&mut s);
    assert_eq!(out[0]["method"], "roots/list");
    assert_eq!(
        out[1],
        json!({"jsonrpc":"2.0","method":"notifications/cancelled",
               "params":{"requestId": id, "reason": "no longer needed"}})
    );
    assert!(matches!(s.withdraw(id, None), Err(ServeError::NotOpen(_))));
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":id,"result":{"roots":[]}}),
    );
    assert!(events(&mut s).is_empty(), "a late answer is dropped");
}

#[test]
fn a_duplicate_id_is_refused_as_such_before_its_envelope_is_judged() {
    let mut s = ServerSession::default();
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":envelope(json!({}))}),
    );
    assert_eq!(events(&mut s).len(), 1);
    // The same id again, with an envelope that would be refused by itself
    // (no client capabilities): the duplicate is what is reported.
    let mut no_caps = envelope(json!({}));
    no_caps["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":no_caps}),
    );
    // And with a version not served.
    let mut future = envelope(json!({}));
    future["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    feed(
        &mut s,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":future}),
    );
    assert!(events(&mut s).is_empty());
    let out = lines(&mut s);
    for refusal in &out {
        assert_eq!(refusal["id"], 1, "{refusal}");
        assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
        let message = refusal["error"]["message"].as_str().unwrap();
        assert!(message.contains("already in use"), "{refusal}");
    }
    assert_eq!(out.len(), 2);
    // The first is still open, and answered once.
    assert_eq!(s.open_requests(), 1);
    s.respond(RequestId::Number(1), Ok(raw(json!({"tools": []}))))
        .unwrap();
}

#[test]
fn a_2026_body_naming_its_mcp_name_field_twice_is_a_header_mismatch() {
    // Two "name" keys: serde_json keeps the last, other parsers the
    // first; whichever the header matches, the body is ambiguous.
    let meta = envelope(json!({}))["_meta"].to_string();
    let body = format!(r#"{{"name":"allowed","name":"other","_meta":{meta}}}"#);
    let params = RawValue::from_string(body).unwrap();
    for name in ["allowed", "other"] {
        let header = |h: &str| match h {
            "mcp-protocol-version" => Some("2026-07-28"),
            "mcp-method" => Some("tools/call"),
            "mcp-name" => Some(name),
            _ => None,
        };
        let e = check_headers("tools/call", Some(&params), header).unwrap_err();
        assert_eq!(e.code, crate::modern::HEADER_MISMATCH, "{}", e.message);
        assert!(e.message.contains("more than once"), "{}", e.message);
    }
    // A field the header does not mirror may repeat (the method judges it).
    let body = format!(r#"{{"name":"x","arguments":{{}},"arguments":{{}},"_meta":{meta}}}"#);
    let params = RawValue::from_string(body).unwrap();
    let header = |h: &str| match h {
        "mcp-protocol-version" => Some("2026-07-28"),
        "mcp-method" => Some("tools/call"),
        "mcp-name" => Some("x"),
        _ => None,
    };
    assert_eq!(check_headers("tools/call", Some(&params), header), Ok(()));
}
