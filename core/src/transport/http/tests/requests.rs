//! POST requests: their headers, their responses, and the bounds on what comes back.

use super::*;

// ---- POST ------------------------------------------------------------------

#[test]
fn post_carries_accept_content_type_and_config_headers_but_no_session_on_initialize() {
    let mut h = Harness::with(HttpConfig {
        headers: vec![
            ("Authorization".into(), "Bearer t".into()),
            ("accept".into(), "text/html".into()),
            ("MCP-Session-Id".into(), "forged".into()),
        ],
        ..base()
    });
    h.request(0, "initialize");
    let r = h.one();
    assert_eq!(r.method, HttpMethod::Post);
    assert_eq!(r.purpose, ExchangePurpose::Request);
    assert_eq!(r.url, HttpUrl::parse(URL).unwrap());
    assert_eq!(r.body, req(0, "initialize").as_bytes());
    assert_eq!(
        headers_of(&r),
        [
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer t"),
        ]
    );
}

#[test]
fn session_id_and_protocol_version_go_on_every_later_request() {
    let mut h = Harness::new();
    let listener = h.handshake();
    assert_eq!(h.t.session_id(), Some("sess-1"));
    assert_eq!(
        headers_of(&listener),
        [
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", "sess-1"),
            ("MCP-Protocol-Version", V),
        ]
    );
    h.request(1, "tools/list");
    let r = h.one();
    assert_eq!(r.purpose, ExchangePurpose::Request);
    assert_eq!(
        headers_of(&r),
        [
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", "sess-1"),
            ("MCP-Protocol-Version", V),
        ]
    );
    h.notify("notifications/cancelled");
    let n = h.one();
    assert_eq!(n.purpose, ExchangePurpose::Notify);
    assert_eq!(n.header("mcp-session-id"), Some("sess-1"));
    assert_eq!(n.header("mcp-protocol-version"), Some(V));
}

#[test]
fn server_without_sessions_gets_no_session_header() {
    let mut h = Harness::new();
    let sent = h.initialize(0, None);
    assert_eq!(h.t.session_id(), None);
    for r in &sent {
        assert_eq!(r.header("Mcp-Session-Id"), None);
        assert_eq!(r.header("MCP-Protocol-Version"), Some(V));
    }
}

#[test]
fn invalid_session_id_is_fatal() {
    for bad in ["", "has space", "tab\there", "é", "ctl\u{7f}"] {
        let mut h = Harness::new();
        h.request(0, "initialize");
        let init = h.one();
        h.head(init.exchange, 200, &[JSON, ("Mcp-Session-Id", bad)]);
        let events = h.events();
        assert_eq!(events[0], HttpEvent::Abort(init.exchange), "{bad:?}");
        assert!(
            matches!(&events[1], HttpEvent::Fatal(m) if m.contains("invalid Mcp-Session-Id")),
            "{events:?}"
        );
        assert_eq!(events.len(), 2);
        assert_eq!(h.t.session_id(), None);
        // Dead: input is ignored, a request fails, close just finishes.
        h.body(init.exchange, result(0));
        h.end(init.exchange);
        assert!(h.delivered.is_empty());
        h.request(1, "ping");
        assert!(matches!(h.events()[..], [HttpEvent::Fail { id: 1, .. }]));
        h.t.begin_close(h.now);
        assert_eq!(h.events(), [HttpEvent::Finished]);
        assert_eq!(h.t.poll_timeout(), None);
    }
}

#[test]
fn messages_sent_before_initialized_are_held_and_released_in_order() {
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.request(1, "ping");
    h.notify("notifications/roots/list_changed");
    assert_eq!(h.events(), []);
    h.answer_json(init.exchange, &result(0));
    h.t.request_done(0);
    h.notify("notifications/initialized");
    h.t.initialized(h.now, V);
    let mut sent = vec![h.one()];
    h.head(sent[0].exchange, 202, &[]);
    sent.extend(h.sent());
    let bodies: Vec<String> = sent
        .iter()
        .map(|r| String::from_utf8(r.body.clone()).unwrap())
        .collect();
    assert_eq!(
        bodies,
        [
            note("notifications/initialized"),
            req(1, "ping"),
            note("notifications/roots/list_changed"),
            String::new(),
        ]
    );
    assert_eq!(sent[3].method, HttpMethod::Get);
}

// ---- responses ---------------------------------------------------------------

#[test]
fn json_response_is_buffered_and_delivered_at_end() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/list");
    let r = h.one();
    h.head(
        r.exchange,
        200,
        &[("content-type", "Application/JSON; charset=utf-8")],
    );
    let body = result(1);
    let (a, b) = body.split_at(7);
    h.body(r.exchange, a);
    h.body(r.exchange, b);
    assert_eq!(h.delivered.len(), 1); // the initialize result only
    h.end(r.exchange);
    assert_eq!(h.delivered[1..], [body]);
    assert_eq!(h.events(), []);
    h.t.request_done(1);
    assert_eq!(h.events(), []);
}

#[test]
fn sse_response_skips_priming_and_delivers_server_messages_before_the_response() {
    let mut h = Harness::new();
    h.handshake();
    h.delivered.clear();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
    let roots = req(0, "roots/list");
    let stream = [
        "id: p0\ndata:\n\n".to_owned(),
        ev(Some("p1"), progress),
        ev(Some("p2"), &roots),
        "event: ping\ndata: x\n\n".to_owned(),
        ev(Some("p3"), &result(1)),
    ]
    .concat();
    h.body(r.exchange, &stream);
    h.end(r.exchange);
    assert_eq!(h.delivered, [progress.to_owned(), roots, result(1)]);
    let events = h.events();
    assert!(events.iter().all(is_diag), "{events:?}"); // the ignored "ping" event
    assert_eq!(h.t.poll_timeout(), None);
    h.t.request_done(1);
    assert_eq!(h.events(), []);
}

#[test]
fn notification_202_needs_nothing_and_a_refusal_is_a_diagnostic() {
    let mut h = Harness::new();
    h.handshake();
    h.notify("notifications/cancelled");
    let n = h.one();
    h.head(n.exchange, 202, &[]);
    h.end(n.exchange);
    assert_eq!(h.events(), []);

    h.t.send(
        h.now,
        br#"{"jsonrpc":"2.0","id":"s1","result":{}}"#.to_vec(),
        SendKind::Response { id: "s1".into() },
    );
    let n = h.one();
    assert_eq!(n.purpose, ExchangePurpose::Notify);
    h.head(n.exchange, 400, &[]);
    h.body(n.exchange, "unknown request");
    h.end(n.exchange);
    match &h.events()[..] {
        [HttpEvent::Diagnostic(m)] => {
            assert!(m.contains("response to server request \"s1\""), "{m}");
            assert!(m.ends_with("HTTP 400: unknown request"), "{m}");
        }
        other => panic!("{other:?}"),
    }

    h.notify("notifications/progress");
    let n = h.one();
    h.failed(n.exchange, "connection reset");
    assert!(
        matches!(&h.events()[..], [HttpEvent::Diagnostic(m)] if m.contains("connection reset"))
    );
}

#[test]
fn http_error_fails_request_with_status_body_and_auth_hints() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/list");
    let r = h.one();
    h.head(
        r.exchange,
        401,
        &[
            (
                "WWW-Authenticate",
                r#"Bearer resource_metadata="https://x/.well-known""#,
            ),
            ("Mcp-Auth-Server", "https://auth.example"),
        ],
    );
    h.body(r.exchange, "  Unauthorized\n");
    h.end(r.exchange);
    let message = "HTTP 401: Unauthorized (WWW-Authenticate: Bearer resource_metadata=\"https://x/.well-known\") (Mcp-Auth-Server: https://auth.example)";
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::Http {
                status: 401,
                message: message.into()
            }
        }]
    );

    // No body: the reason phrase.
    h.request(2, "tools/list");
    let r = h.one();
    h.head(r.exchange, 500, &[]);
    h.end(r.exchange);
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 2,
            failure: RequestFailure::Http {
                status: 500,
                message: "HTTP 500: Internal Server Error".into()
            }
        }]
    );
}

#[test]
fn http_error_with_a_jsonrpc_error_for_the_request_is_delivered() {
    let mut h = Harness::new();
    h.handshake();
    h.delivered.clear();
    h.request(1, "tools/call");
    let r = h.one();
    let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}"#;
    h.head(r.exchange, 400, &[JSON]);
    h.body(r.exchange, error);
    h.end(r.exchange);
    assert_eq!(h.delivered, [error]);
    assert_eq!(h.events(), []);

    // An error for nobody (id null) is an HTTP failure.
    h.request(2, "tools/call");
    let r = h.one();
    let error = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request"}}"#;
    h.head(r.exchange, 400, &[JSON]);
    h.body(r.exchange, error);
    h.end(r.exchange);
    assert_eq!(h.delivered.len(), 1);
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 2,
            failure: RequestFailure::Http {
                status: 400,
                message: format!("HTTP 400: {error}")
            }
        }]
    );
}

#[test]
fn connection_failure_on_a_request_fails_it() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "ping");
    let r = h.one();
    h.failed(r.exchange, "connection refused");
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::Other("connection refused".into())
        }]
    );
    // In the middle of a JSON body: the same.
    h.request(2, "ping");
    let r = h.one();
    h.head(r.exchange, 200, &[JSON]);
    h.body(r.exchange, "{\"jsonrpc\"");
    h.failed(r.exchange, "connection reset");
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 2,
            failure: RequestFailure::Other("connection reset".into())
        }]
    );
    // Late input for it is ignored.
    h.end(r.exchange);
    assert_eq!(h.events(), []);
}

#[test]
fn unknown_content_type_fails_the_request() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "ping");
    let r = h.one();
    h.head(r.exchange, 200, &[("Content-Type", "text/html")]);
    match &h.events()[..] {
        [HttpEvent::Abort(ex), HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::Other(m),
        }] => {
            assert_eq!(*ex, r.exchange);
            assert!(m.contains("text/html"), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn empty_2xx_answer_to_a_request_waits_for_its_response_elsewhere() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.request(1, "ping");
    let r = h.one();
    h.head(r.exchange, 202, &[]);
    h.end(r.exchange);
    assert!(h.events().iter().all(is_diag));
    // The response comes on the listener.
    h.body(listener.exchange, ev(None, &result(1)));
    assert_eq!(h.delivered.last(), Some(&result(1)));
    h.t.request_done(1);
    assert_eq!(h.events(), []);
}

#[test]
fn json_answer_without_the_response_fails_the_request() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "ping");
    let r = h.one();
    h.answer_json(r.exchange, &note("notifications/message"));
    assert_eq!(h.delivered.last(), Some(&note("notifications/message")));
    assert!(matches!(
        &h.events()[..],
        [HttpEvent::Fail { id: 1, failure: RequestFailure::Other(m) }] if m.contains("not its response")
    ));
}

// ---- bounds -----------------------------------------------------------------

#[test]
fn json_body_over_max_body_fails_and_aborts() {
    let mut h = Harness::with(HttpConfig {
        max_body: 40,
        ..base()
    });
    h.handshake();
    h.request(1, "ping");
    let r = h.one();
    h.head(r.exchange, 200, &[JSON]);
    h.body(r.exchange, "x".repeat(30));
    assert_eq!(h.events(), []);
    h.body(r.exchange, "x".repeat(11));
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(r.exchange),
            HttpEvent::Fail {
                id: 1,
                failure: RequestFailure::TooLarge {
                    what: "max_body",
                    limit: 40,
                    size: 41
                }
            }
        ]
    );
    h.end(r.exchange);
    h.t.request_done(1);
    assert_eq!(h.events(), []);
}

#[test]
fn sse_event_over_max_event_fails_the_request_but_not_the_listener() {
    let mut h = Harness::with(HttpConfig {
        max_event: 64,
        ..base()
    });
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    let big = format!("data: {}\n\n", "x".repeat(100));
    h.body(listener.exchange, &big);
    assert!(matches!(
        &h.events()[..],
        [HttpEvent::Diagnostic(m), HttpEvent::Skipped { glimpse, .. }]
            if m.contains("exceeds") && glimpse.id.is_none()
    ));
    // A response on the GET stream: its id is in the data's first bytes.
    let reply = format!(
        r#"{{"jsonrpc":"2.0","id":9,"result":{{"text":"{}"}}}}"#,
        "r".repeat(80)
    );
    h.body(listener.exchange, ev(None, &reply));
    match &h.events()[..] {
        [HttpEvent::Diagnostic(_), HttpEvent::Skipped { glimpse, failure }] => {
            assert_eq!(glimpse.response_id(), Some("9"));
            assert!(
                matches!(
                    failure,
                    RequestFailure::TooLarge {
                        what: "max_event",
                        limit: 64,
                        ..
                    }
                ),
                "{failure:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    h.body(listener.exchange, ev(None, &note("n")));
    assert_eq!(h.delivered.last(), Some(&note("n")));

    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, &big);
    match &h.events()[..] {
        [HttpEvent::Abort(ex), HttpEvent::Fail {
            id: 1,
            failure:
                RequestFailure::TooLarge {
                    what: "max_event",
                    limit: 64,
                    size: 65,
                },
        }] => {
            assert_eq!(*ex, r.exchange);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn error_body_is_bounded() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "ping");
    let r = h.one();
    h.head(r.exchange, 500, &[]);
    h.body(r.exchange, "e".repeat(6000));
    assert_eq!(h.events(), []);
    h.body(r.exchange, "e".repeat(6000));
    match &h.events()[..] {
        [HttpEvent::Abort(ex), HttpEvent::Fail {
            id: 1,
            failure:
                RequestFailure::Http {
                    status: 500,
                    message,
                },
        }] => {
            assert_eq!(*ex, r.exchange);
            assert!(message.len() < 600, "{}", message.len());
            assert!(message.starts_with("HTTP 500: eee") && message.ends_with('…'));
        }
        other => panic!("{other:?}"),
    }
}
