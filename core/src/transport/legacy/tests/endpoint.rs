//! Opening the event stream, its `endpoint` event, and messages held until it arrives.

use super::*;

#[test]
fn legacy_opens_the_event_stream_right_away() {
    let config = HttpConfig {
        headers: headers(&[("Authorization", "Bearer t0k"), ("accept", "*/*")]),
        ..HttpConfig::default()
    };
    let mut sim = Sim::with(SSE_URL, config);
    let get = only_request(sim.events());
    assert_eq!(get.exchange, GET);
    assert_eq!(get.method, HttpMethod::Get);
    assert_eq!(get.url, url(SSE_URL));
    assert_eq!(get.purpose, ExchangePurpose::Listen);
    assert!(get.body.is_empty());
    assert_eq!(
        get.headers,
        headers(&[
            ("Accept", "text/event-stream"),
            ("Authorization", "Bearer t0k")
        ])
    );
    assert_eq!(sim.t.poll_timeout(), None);
    assert_eq!(sim.t.endpoint(), None);
}

#[test]
fn legacy_starting_at_numbers_exchanges_from_there() {
    let now = Instant::now();
    let mut t = LegacySse::starting_at(now, url(SSE_URL), HttpConfig::default(), ExchangeId(7));
    let get = only_request(std::iter::from_fn(|| t.poll_output()).collect());
    assert_eq!(get.exchange, ExchangeId(7));
    t.handle_head(now, ExchangeId(7), &sse_head(), &mut |_| {});
    t.handle_body(
        now,
        ExchangeId(7),
        b"event: endpoint\ndata: /m\n\n",
        &mut |_| {},
    );
    t.send(now, b"{}".to_vec(), SendKind::Notification);
    let post = only_request(std::iter::from_fn(|| t.poll_output()).collect());
    assert_eq!(post.exchange, ExchangeId(8));
}

#[test]
fn legacy_relative_endpoint_is_resolved_against_the_sse_url() {
    for (sse, reference, expected) in [
        // TypeScript SDK
        (
            "http://127.0.0.1:3001/sse",
            "/message?sessionId=4f1c-77",
            "http://127.0.0.1:3001/message?sessionId=4f1c-77",
        ),
        // Python SDK
        (
            "http://127.0.0.1:8000/sse",
            "/messages/?session_id=9a0bc1",
            "http://127.0.0.1:8000/messages/?session_id=9a0bc1",
        ),
        (
            "http://localhost:9/api/sse?k=1",
            "messages?x=1",
            "http://localhost:9/api/messages?x=1",
        ),
        (
            "http://localhost:9/a/b/sse",
            "../m",
            "http://localhost:9/a/m",
        ),
        (
            "https://h.example/sse",
            "//h.example/m",
            "https://h.example/m",
        ),
        ("http://h:8080/sse", "http://H:8080/m", "http://h:8080/m"),
    ] {
        let mut sim = Sim::with(sse, HttpConfig::default());
        sim.open(reference);
        assert_eq!(sim.events(), vec![], "{reference}");
        assert_eq!(sim.t.endpoint(), Some(&url(expected)), "{reference}");
        sim.request(0);
        let post = only_request(sim.events());
        assert_eq!(post.url, url(expected));
        assert_eq!(post.method, HttpMethod::Post);
    }
}

#[test]
fn legacy_endpoint_on_another_origin_is_refused() {
    for reference in [
        "http://evil.example/message",
        "https://127.0.0.1:3001/message",
        "http://127.0.0.1:3002/message",
        "http://localhost:3001/message",
        "//other/message",
    ] {
        let mut sim = Sim::new();
        sim.request(0);
        sim.open(reference);
        let events = sim.events();
        assert_eq!(events[0], LegacyEvent::Abort(GET));
        assert_eq!(events.len(), 2, "{events:?}");
        let message = fatal(&events);
        assert!(message.contains(SSE_URL), "{message}");
        let endpoint = url(SSE_URL).join(reference).unwrap().to_string();
        assert!(message.contains(&endpoint), "{message}");
        assert!(message.contains("origin"), "{message}");
        assert_eq!(sim.t.endpoint(), None);
        // Nothing more: the held request is not sent anywhere.
        sim.request(1);
        sim.body(GET, b"data: {}\n\n");
        assert_eq!(sim.events(), vec![]);
        assert!(sim.delivered.is_empty());
    }
}

#[test]
fn legacy_endpoint_event_without_a_usable_uri_is_fatal() {
    for (stream, expected) in [
        (&b"event: endpoint\ndata:\n\n"[..], "names no URI"),
        (
            b"event: endpoint\ndata: ftp://127.0.0.1/m\n\n",
            "not usable",
        ),
        (b"event: endpoint\ndata: /a b\n\n", "not usable"),
    ] {
        let mut sim = Sim::new();
        let _ = sim.events();
        sim.head(GET, &sse_head());
        sim.body(GET, stream);
        let events = sim.events();
        assert_eq!(events[0], LegacyEvent::Abort(GET));
        assert!(fatal(&events).contains(expected), "{events:?}");
    }
}

#[test]
fn legacy_holds_messages_until_the_endpoint_arrives() {
    let config = HttpConfig {
        headers: headers(&[("Authorization", "Bearer t0k")]),
        ..HttpConfig::default()
    };
    let mut sim = Sim::with(SSE_URL, config);
    let _ = sim.events();
    sim.send(
        r#"{"id":0,"method":"initialize"}"#,
        SendKind::Request { id: 0 },
    );
    sim.send(r#"{"method":"notifications/x"}"#, SendKind::Notification);
    sim.head(GET, &sse_head());
    sim.send(
        r#"{"id":"s1","result":{}}"#,
        SendKind::Response {
            id: RequestId::String("s1".into()),
        },
    );
    // A server message before the endpoint is still delivered.
    sim.body(GET, b"data: {\"method\":\"early\"}\n\n");
    assert_eq!(sim.events(), vec![]);
    assert_eq!(sim.delivered, vec![r#"{"method":"early"}"#]);

    sim.body(GET, b"event: endpoint\ndata: /message?sessionId=abc\n\n");
    let posts = requests(sim.events());
    let endpoint = url("http://127.0.0.1:3001/message?sessionId=abc");
    let bodies: Vec<&[u8]> = posts.iter().map(|p| p.body.as_slice()).collect();
    assert_eq!(
        bodies,
        vec![
            &br#"{"id":0,"method":"initialize"}"#[..],
            br#"{"method":"notifications/x"}"#,
            br#"{"id":"s1","result":{}}"#,
        ]
    );
    let purposes: Vec<_> = posts.iter().map(|p| p.purpose).collect();
    assert_eq!(
        purposes,
        vec![
            ExchangePurpose::Request,
            ExchangePurpose::Notify,
            ExchangePurpose::Notify
        ]
    );
    for (i, post) in posts.iter().enumerate() {
        assert_eq!(post.exchange, ExchangeId(i as u64 + 1));
        assert_eq!(post.method, HttpMethod::Post);
        assert_eq!(post.url, endpoint);
        assert_eq!(
            post.headers,
            headers(&[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Authorization", "Bearer t0k"),
            ])
        );
    }
    // Once known, messages go out at once.
    sim.request(1);
    let post = only_request(sim.events());
    assert_eq!(post.exchange, ExchangeId(4));
    assert_eq!(post.url, endpoint);
}

#[test]
fn legacy_held_messages_are_bounded() {
    let mut sim = Sim::new();
    let _ = sim.events();
    for id in 0..MAX_HELD_MESSAGES as u64 {
        sim.request(id);
    }
    assert_eq!(sim.events(), vec![]);
    sim.request(1000);
    sim.send("{}", SendKind::Notification);
    let events = sim.events();
    assert!(
        matches!(&events[..], [
            LegacyEvent::Fail { id: 1000, failure: RequestFailure::Other(m) },
            LegacyEvent::Diagnostic(d),
        ] if m.contains("`endpoint`") && d.starts_with("notification not sent")),
        "{events:?}"
    );
    sim.open("/m");
    assert_eq!(requests(sim.events()).len(), MAX_HELD_MESSAGES);

    // The byte bound.
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.request(0);
    let big = "x".repeat(MAX_HELD_BYTES);
    sim.send(&big, SendKind::Request { id: 1 });
    let events = sim.events();
    assert!(
        matches!(&events[..], [LegacyEvent::Fail { id: 1, .. }]),
        "{events:?}"
    );
}

#[test]
fn legacy_request_done_drops_a_held_request() {
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.request(0);
    sim.request(1);
    sim.request(2);
    sim.t.request_done(1);
    sim.open("/m");
    let bodies: Vec<String> = requests(sim.events())
        .into_iter()
        .map(|p| String::from_utf8(p.body).unwrap())
        .collect();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[0].contains(r#""id":0"#) && bodies[1].contains(r#""id":2"#));
}
