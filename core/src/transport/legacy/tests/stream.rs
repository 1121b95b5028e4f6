//! The event stream: delivered messages, oversized events, and how it ends.

use super::*;

#[test]
fn legacy_messages_arrive_as_message_events() {
    let mut sim = Sim::new();
    sim.open("/message?sessionId=1");
    sim.body(
        GET,
        concat!(
            ": keep-alive comment\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n",
            "id: 7\ndata:\n\n",
            "data: \n\n",
            "event: ping\ndata: hello\n\n",
            "data: {\"a\":\ndata: 1}\n\n",
        )
        .as_bytes(),
    );
    assert_eq!(
        sim.delivered,
        vec![
            r#"{"jsonrpc":"2.0","id":0,"result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"n"}"#,
            "{\"a\":\n1}",
        ]
    );
    let events = sim.events();
    assert!(
        matches!(&events[..], [LegacyEvent::Diagnostic(d)] if d.contains("`ping`")),
        "{events:?}"
    );
}

#[test]
fn legacy_second_endpoint_event_is_ignored() {
    let mut sim = Sim::new();
    sim.open("/message?sessionId=1");
    sim.body(GET, b"event: endpoint\ndata: /elsewhere\n\n");
    let events = sim.events();
    assert!(
        matches!(&events[..], [LegacyEvent::Diagnostic(d)]
            if d.contains("second `endpoint`") && d.contains("/elsewhere")),
        "{events:?}"
    );
    assert_eq!(
        sim.t.endpoint(),
        Some(&url("http://127.0.0.1:3001/message?sessionId=1"))
    );
}

#[test]
fn legacy_oversized_event_is_a_diagnostic_then_a_glimpse() {
    let config = HttpConfig {
        max_event: 64,
        ..HttpConfig::default()
    };
    let mut sim = Sim::with(SSE_URL, config);
    sim.open("/m");
    let big = format!("data: {}\n\ndata: {{}}\n\n", "x".repeat(100));
    sim.body(GET, big.as_bytes());
    assert_eq!(sim.delivered, vec!["{}"]);
    let events = sim.events();
    match &events[..] {
        [LegacyEvent::Diagnostic(d), LegacyEvent::Skipped { glimpse, failure }] => {
            assert!(d.contains("64 bytes"), "{d}");
            assert_eq!(*glimpse, Glimpse::default());
            assert_eq!(
                *failure,
                RequestFailure::TooLarge {
                    what: "max_event",
                    limit: 64,
                    size: 100
                }
            );
        }
        other => panic!("{other:?}"),
    }
    // A response: its id is in the last bytes of its data (TypeScript's
    // member order), and the event is cut in small pieces.
    let big = format!(
        "event: message\ndata: {{\"result\":{{\"text\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":3}}\n\n",
        "y".repeat(500)
    );
    for piece in big.as_bytes().chunks(7) {
        sim.body(GET, piece);
    }
    match &sim.events()[..] {
        [LegacyEvent::Diagnostic(_), LegacyEvent::Skipped { glimpse, .. }] => {
            assert_eq!(glimpse.response_id(), Some("3"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn legacy_stream_end_is_fatal() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(0);
    let post = only_request(sim.events());
    sim.body(GET, b"data: {\"x\":1}\n\ndata: {\"partial\"");
    sim.end(GET);
    let events = sim.events();
    assert_eq!(
        events,
        vec![
            LegacyEvent::Abort(post.exchange),
            LegacyEvent::Fatal(
                "SSE stream closed by the server (an incomplete event was discarded)".into()
            ),
        ]
    );
    assert_eq!(sim.delivered, vec![r#"{"x":1}"#]);
    // Reports about aborted exchanges change nothing; close only finishes.
    sim.head(post.exchange, &head(500, None, &[]));
    sim.end(post.exchange);
    assert_eq!(sim.events(), vec![]);
    sim.t.begin_close(sim.now);
    assert_eq!(sim.events(), vec![LegacyEvent::Finished]);

    // A clean end says so plainly.
    let mut sim = Sim::new();
    sim.open("/m");
    sim.end(GET);
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fatal("SSE stream closed by the server".into())]
    );
}

#[test]
fn legacy_stream_end_before_the_endpoint_is_fatal() {
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.request(0);
    sim.head(GET, &sse_head());
    sim.body(GET, b"data: {}\n\n");
    sim.end(GET);
    let events = sim.events();
    assert_eq!(events.len(), 1);
    assert!(fatal(&events).contains("before it sent an `endpoint` event"));

    let mut sim = Sim::new();
    let _ = sim.events();
    sim.head(GET, &sse_head());
    sim.failed(GET, "connection reset");
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fatal(
            "connection reset (the server sent no `endpoint` event before)".into()
        )]
    );
}

#[test]
fn legacy_stream_failure_is_fatal() {
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.failed(GET, "connection refused");
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fatal("connection refused".into())]
    );

    let mut sim = Sim::new();
    sim.open("/m");
    sim.failed(GET, "connection reset by peer");
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fatal("connection reset by peer".into())]
    );
}

#[test]
fn legacy_refused_stream_is_fatal_with_status_and_body() {
    let challenge =
        r#"Bearer resource_metadata="http://127.0.0.1:3001/.well-known/oauth-protected-resource""#;
    let cases: Vec<(ResponseHead, &[u8], String)> = vec![
        (
            head(401, Some("text/plain"), &[("WWW-Authenticate", challenge)]),
            b"invalid token\n",
            format!("HTTP 401: invalid token (WWW-Authenticate: {challenge})"),
        ),
        (head(404, None, &[]), b"", "HTTP 404: Not Found".into()),
        (
            head(200, Some("application/json"), &[]),
            br#"{"x":1}"#,
            r#"HTTP 200: {"x":1} (expected Content-Type text/event-stream, got application/json)"#
                .into(),
        ),
        (
            head(200, None, &[]),
            b"",
            "HTTP 200: OK (expected Content-Type text/event-stream, got none)".into(),
        ),
        (
            head(300, None, &[("Location", "/sse/")]),
            b"",
            "HTTP 300: (no body) (redirect to /sse/ not followed)".into(),
        ),
    ];
    for (h, body, expected) in cases {
        let mut sim = Sim::new();
        let _ = sim.events();
        sim.head(GET, &h);
        sim.body(GET, body);
        assert_eq!(sim.events(), vec![]);
        sim.end(GET);
        assert_eq!(sim.events(), vec![LegacyEvent::Fatal(expected)]);
    }

    // A long body is not read to its end.
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.head(GET, &head(500, Some("text/html"), &[]));
    sim.body(GET, &b"<p>".repeat(10_000));
    let events = sim.events();
    assert_eq!(events[0], LegacyEvent::Abort(GET));
    let message = fatal(&events);
    assert!(message.starts_with("HTTP 500: <p><p>") && message.ends_with('…'));
    assert!(message.len() < PREVIEW_BYTES + 64, "{}", message.len());
}
