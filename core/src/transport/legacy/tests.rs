//! Scripted conversations with the legacy transport, in simulated time.

use std::time::Instant;

use proptest::prelude::*;

use super::*;
use crate::codec::glimpse::Glimpse;
use crate::rpc::RequestId;

const SSE_URL: &str = "http://127.0.0.1:3001/sse";
const GET: ExchangeId = ExchangeId(0);

fn url(s: &str) -> HttpUrl {
    HttpUrl::parse(s).unwrap()
}

fn head(status: u16, content_type: Option<&str>, extra: &[(&str, &str)]) -> ResponseHead {
    let mut headers = Vec::new();
    if let Some(ct) = content_type {
        headers.push(("Content-Type".to_string(), ct.as_bytes().to_vec()));
    }
    for (n, v) in extra {
        headers.push((n.to_string(), v.as_bytes().to_vec()));
    }
    let reason = match status {
        200 => "OK",
        202 => "Accepted",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "",
    };
    ResponseHead {
        status,
        reason: reason.to_string(),
        version: 1,
        headers,
    }
}

fn sse_head() -> ResponseHead {
    head(200, Some("text/event-stream; charset=utf-8"), &[])
}

/// The transport, a clock and what it delivered.
struct Sim {
    t: LegacySse,
    now: Instant,
    delivered: Vec<String>,
}

impl Sim {
    fn new() -> Self {
        Self::with(SSE_URL, HttpConfig::default())
    }

    fn with(sse_url: &str, config: HttpConfig) -> Self {
        let now = Instant::now();
        Sim {
            t: LegacySse::new(now, url(sse_url), config),
            now,
            delivered: Vec::new(),
        }
    }

    fn events(&mut self) -> Vec<LegacyEvent> {
        std::iter::from_fn(|| self.t.poll_output()).collect()
    }

    fn head(&mut self, ex: ExchangeId, head: &ResponseHead) {
        let d = &mut self.delivered;
        self.t.handle_head(self.now, ex, head, &mut |m: &[u8]| {
            d.push(String::from_utf8(m.to_vec()).unwrap())
        });
    }

    fn body(&mut self, ex: ExchangeId, data: &[u8]) {
        let d = &mut self.delivered;
        self.t.handle_body(self.now, ex, data, &mut |m: &[u8]| {
            d.push(String::from_utf8(m.to_vec()).unwrap())
        });
    }

    fn end(&mut self, ex: ExchangeId) {
        let d = &mut self.delivered;
        self.t.handle_end(self.now, ex, &mut |m: &[u8]| {
            d.push(String::from_utf8(m.to_vec()).unwrap())
        });
    }

    fn failed(&mut self, ex: ExchangeId, error: &str) {
        let d = &mut self.delivered;
        self.t.handle_failed(self.now, ex, error, &mut |m: &[u8]| {
            d.push(String::from_utf8(m.to_vec()).unwrap())
        });
    }

    fn send(&mut self, message: &str, kind: SendKind) {
        self.t.send(self.now, message.as_bytes().to_vec(), kind);
    }

    fn request(&mut self, id: u64) {
        let message = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        self.send(&message, SendKind::Request { id });
    }

    /// The stream is accepted and the endpoint announced.
    fn open(&mut self, endpoint: &str) {
        let _ = self.events();
        self.head(GET, &sse_head());
        self.body(
            GET,
            format!("event: endpoint\ndata: {endpoint}\n\n").as_bytes(),
        );
    }
}

fn only_request(events: Vec<LegacyEvent>) -> HttpRequest {
    match <[LegacyEvent; 1]>::try_from(events) {
        Ok([LegacyEvent::Request(r)]) => r,
        Ok([other]) => panic!("expected a request, got {other:?}"),
        Err(events) => panic!("expected one request, got {events:?}"),
    }
}

fn requests(events: Vec<LegacyEvent>) -> Vec<HttpRequest> {
    events
        .into_iter()
        .map(|e| match e {
            LegacyEvent::Request(r) => r,
            other => panic!("expected a request, got {other:?}"),
        })
        .collect()
}

fn fatal(events: &[LegacyEvent]) -> &str {
    match events.last() {
        Some(LegacyEvent::Fatal(m)) => m,
        _ => panic!("expected a Fatal last, got {events:?}"),
    }
}

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

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

#[test]
fn legacy_post_error_fails_the_request() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(1);
    let p1 = only_request(sim.events()).exchange;
    sim.head(p1, &head(500, Some("text/plain"), &[]));
    sim.body(p1, b"boom\n");
    sim.end(p1);
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fail {
            id: 1,
            failure: RequestFailure::Http {
                status: 500,
                message: "HTTP 500: boom".into()
            }
        }]
    );

    // A transport failure.
    sim.request(2);
    let p2 = only_request(sim.events()).exchange;
    sim.failed(p2, "connection reset");
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fail {
            id: 2,
            failure: RequestFailure::Other("connection reset".into())
        }]
    );

    // The request completed meanwhile: its failure is ignored.
    sim.request(3);
    let p3 = only_request(sim.events()).exchange;
    sim.t.request_done(3);
    sim.head(p3, &head(404, None, &[]));
    sim.end(p3);
    assert_eq!(sim.events(), vec![]);

    // Notifications and responses only give diagnostics.
    sim.send("{}", SendKind::Notification);
    let p4 = only_request(sim.events()).exchange;
    sim.head(p4, &head(400, None, &[]));
    sim.end(p4);
    let mut events = sim.events();
    sim.send(
        "{}",
        SendKind::Response {
            id: RequestId::Number(0),
        },
    );
    let p5 = only_request(sim.events()).exchange;
    sim.failed(p5, "broken pipe");
    events.extend(sim.events());
    assert!(
        matches!(&events[..], [LegacyEvent::Diagnostic(a), LegacyEvent::Diagnostic(b)]
            if a.contains("HTTP 400: Bad Request") && b.contains("request 0") && b.contains("broken pipe")),
        "{events:?}"
    );

    // An exchange that ends without a head.
    sim.request(6);
    let p6 = only_request(sim.events()).exchange;
    sim.end(p6);
    let events = sim.events();
    assert!(
        matches!(
            &events[..],
            [LegacyEvent::Fail {
                id: 6,
                failure: RequestFailure::Other(_)
            }]
        ),
        "{events:?}"
    );

    // A long error body is cut and the exchange stopped.
    sim.request(7);
    let p7 = only_request(sim.events()).exchange;
    sim.head(p7, &head(502, None, &[]));
    sim.body(p7, &[b'e'; 4096]);
    let events = sim.events();
    assert_eq!(events[0], LegacyEvent::Abort(p7));
    assert!(
        matches!(&events[1..], [LegacyEvent::Fail { id: 7, failure: RequestFailure::Http { status: 502, message } }]
            if message.ends_with('…')),
        "{events:?}"
    );
    assert!(sim.delivered.is_empty());
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Nothing is POSTed after `notifications/initialized` until its 2xx head
/// (the POSTs travel on separate connections); then the held messages go,
/// in order. Held before the endpoint, the same holds.
#[test]
fn legacy_nothing_overtakes_initialized_until_it_is_accepted() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.send(INITIALIZED, SendKind::Notification);
    let confirm = only_request(sim.events());
    assert!(!sim.t.settled());
    sim.request(1);
    sim.send("{}", SendKind::Notification);
    sim.request(2);
    assert_eq!(sim.events(), vec![]);
    sim.head(confirm.exchange, &head(202, None, &[]));
    assert!(sim.t.settled());
    let bodies: Vec<Vec<u8>> = requests(sim.events()).into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies,
        [
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(),
            b"{}".to_vec(),
            br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#.to_vec(),
        ]
    );
    sim.end(confirm.exchange);
    assert_eq!(sim.events(), vec![]);

    let mut sim = Sim::new();
    let _ = sim.events();
    sim.send(INITIALIZED, SendKind::Notification);
    sim.request(1);
    sim.open("/m");
    let confirm = only_request(sim.events());
    assert_eq!(confirm.body, INITIALIZED.as_bytes());
    sim.head(confirm.exchange, &head(200, None, &[]));
    assert_eq!(
        only_request(sim.events()).body,
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
    );
}

/// A refused `notifications/initialized` is fatal; one that fails before
/// its head is sent again, once; nothing held goes out meanwhile.
#[test]
fn legacy_initialized_refused_is_fatal_and_failed_is_sent_again_once() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.send(INITIALIZED, SendKind::Notification);
    let confirm = only_request(sim.events());
    sim.request(1);
    sim.head(confirm.exchange, &head(400, Some("text/plain"), &[]));
    sim.body(confirm.exchange, b"not now");
    sim.end(confirm.exchange);
    let events = sim.events();
    assert_eq!(
        fatal(&events),
        "the server refused notifications/initialized: HTTP 400: not now"
    );
    assert!(!events.iter().any(|e| matches!(e, LegacyEvent::Request(_))));

    let mut sim = Sim::new();
    sim.open("/m");
    sim.send(INITIALIZED, SendKind::Notification);
    let confirm = only_request(sim.events());
    sim.request(1);
    sim.failed(confirm.exchange, "connection reset");
    let events = sim.events();
    assert!(
        matches!(&events[0], LegacyEvent::Diagnostic(_)),
        "{events:?}"
    );
    let again = only_request(events[1..].to_vec());
    assert_eq!(again.body, INITIALIZED.as_bytes());
    sim.end(again.exchange);
    let events = sim.events();
    assert_eq!(
        fatal(&events),
        "notifications/initialized could not be sent (twice): the server closed the connection without an answer"
    );
    assert!(!events.iter().any(|e| matches!(e, LegacyEvent::Request(_))));
}

#[test]
fn legacy_post_accepted_delivers_nothing() {
    let config = HttpConfig {
        max_body: 16,
        ..HttpConfig::default()
    };
    let mut sim = Sim::with(SSE_URL, config);
    sim.open("/m");
    sim.request(0);
    let p = only_request(sim.events()).exchange;
    sim.head(p, &head(202, Some("text/plain"), &[]));
    sim.body(p, b"Accepted");
    sim.end(p);
    assert_eq!(sim.events(), vec![]);
    assert!(sim.delivered.is_empty());

    // A 2xx body is drained, but not forever.
    sim.request(1);
    let p = only_request(sim.events()).exchange;
    sim.head(p, &head(200, Some("application/json"), &[]));
    sim.body(p, &[b' '; 17]);
    let events = sim.events();
    assert!(
        matches!(&events[..], [LegacyEvent::Abort(x), LegacyEvent::Diagnostic(_)] if *x == p),
        "{events:?}"
    );
    sim.end(p);
    assert_eq!(sim.events(), vec![]);
}

#[test]
fn legacy_close_aborts_and_finishes() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(0);
    sim.send("{}", SendKind::Notification);
    let posts = requests(sim.events());
    sim.head(posts[1].exchange, &head(202, None, &[]));
    sim.t.begin_close(sim.now);
    assert_eq!(
        sim.events(),
        vec![
            LegacyEvent::Abort(GET),
            LegacyEvent::Abort(posts[0].exchange),
            LegacyEvent::Abort(posts[1].exchange),
            LegacyEvent::Finished,
        ]
    );
    assert_eq!(sim.t.poll_timeout(), None);
    // Nothing after Finished.
    sim.t.begin_close(sim.now);
    sim.request(1);
    sim.body(GET, b"data: {}\n\n");
    sim.end(GET);
    sim.failed(posts[0].exchange, "aborted");
    sim.t.handle_timeout(sim.now);
    assert_eq!(sim.events(), vec![]);
    assert!(sim.delivered.is_empty());

    // Before the endpoint: held messages are dropped, only the stream aborted.
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.request(0);
    sim.t.begin_close(sim.now);
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Abort(GET), LegacyEvent::Finished]
    );
}

#[test]
fn legacy_close_lets_a_cancellation_in_flight_reach_the_server() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(0);
    sim.send(
        r#"{"method":"notifications/cancelled"}"#,
        SendKind::Notification,
    );
    let posts = requests(sim.events());
    sim.t.begin_close(sim.now);
    // The stream and the request stop; the cancellation goes on.
    assert_eq!(
        sim.events(),
        vec![
            LegacyEvent::Abort(GET),
            LegacyEvent::Abort(posts[0].exchange)
        ]
    );
    assert!(sim.t.poll_timeout().is_some());
    sim.request(1);
    sim.head(posts[1].exchange, &head(202, None, &[]));
    let events = sim.events();
    assert!(
        events.ends_with(&[LegacyEvent::Abort(posts[1].exchange), LegacyEvent::Finished]),
        "{events:?}"
    );
    // Never answered: given up when the drain's time is over.
    let mut sim = Sim::new();
    sim.open("/m");
    sim.send("{}", SendKind::Notification);
    let posts = requests(sim.events());
    sim.t.begin_close(sim.now);
    sim.events();
    sim.now = sim.t.poll_timeout().unwrap();
    sim.t.handle_timeout(sim.now);
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Abort(posts[0].exchange), LegacyEvent::Finished]
    );
}

#[test]
fn legacy_reports_for_unknown_exchanges_are_ignored() {
    let mut sim = Sim::new();
    let _ = sim.events();
    // Body before the head of the stream.
    sim.body(GET, b"data: {}\n\n");
    let other = ExchangeId(99);
    sim.head(other, &head(500, None, &[]));
    sim.body(other, b"data: {}\n\n");
    sim.end(other);
    sim.failed(other, "x");
    sim.t.initialized(sim.now, "2024-11-05");
    sim.t.handle_timeout(sim.now);
    assert_eq!(sim.events(), vec![]);
    assert!(sim.delivered.is_empty());
    // A second head for the stream changes nothing.
    sim.open("/m");
    sim.head(GET, &head(500, None, &[]));
    sim.body(GET, b"data: {}\n\n");
    assert_eq!(sim.events(), vec![]);
    assert_eq!(sim.delivered, vec!["{}"]);
}

/// A stream touching every decoder path the transport relies on.
const SCRIPT: &[u8] = b"\xEF\xBB\xBF: hello\r\n\r\n\
    event: endpoint\r\ndata: /message?sessionId=5e1d\r\n\r\n\
    data: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2024-11-05\"}}\n\n\
    id: 1\rdata:\r\r\
    event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"notifications/tools/list_changed\"}\n\n\
    event: heartbeat\ndata: 1\n\n\
    event: endpoint\ndata: /again\n\n\
    data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\r\n\r\n\
    data: {\"unfinished\"";

/// Runs `SCRIPT` split into `chunks`, with a request held before the
/// endpoint; returns the deliveries and the events.
fn run(chunks: &[&[u8]]) -> (Vec<String>, Vec<LegacyEvent>) {
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.request(0);
    sim.head(GET, &sse_head());
    for chunk in chunks {
        sim.body(GET, chunk);
    }
    sim.end(GET);
    (sim.delivered.clone(), sim.events())
}

#[test]
fn legacy_stream_split_anywhere_gives_the_same_deliveries() {
    let whole = run(&[SCRIPT]);
    assert_eq!(
        whole.0,
        vec![
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2024-11-05"}}"#,
            "{\"jsonrpc\":\"2.0\",\n\"method\":\"notifications/tools/list_changed\"}",
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        ]
    );
    let events = &whole.1;
    assert_eq!(events.len(), 5, "{events:?}");
    let post = match &events[0] {
        LegacyEvent::Request(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        post.url,
        url("http://127.0.0.1:3001/message?sessionId=5e1d")
    );
    assert!(matches!(&events[1], LegacyEvent::Diagnostic(d) if d.contains("`heartbeat`")));
    assert!(matches!(&events[2], LegacyEvent::Diagnostic(d) if d.contains("second `endpoint`")));
    assert_eq!(events[3], LegacyEvent::Abort(post.exchange));
    assert!(fatal(events).contains("incomplete event"));

    let bytes: Vec<&[u8]> = SCRIPT.chunks(1).collect();
    assert_eq!(run(&bytes), whole, "byte by byte");
    for i in 0..=SCRIPT.len() {
        let (a, b) = SCRIPT.split_at(i);
        assert_eq!(run(&[a, b]), whole, "split at {i}");
    }
}

/// One thing that can happen to the transport.
#[derive(Debug, Clone)]
enum Op {
    Send(u8, u64),
    Head(u64, u16, u8),
    Body(u64, Vec<u8>),
    End(u64),
    Failed(u64),
    Done(u64),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    let body = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::sample::select(vec![
            b"event: endpoint\ndata: /m\n\n".to_vec(),
            b"event: endpoint\ndata: http://x/\n\n".to_vec(),
            b"data: {}\n\n".to_vec(),
            b"event: other\ndata: 1\n\n".to_vec(),
        ]),
    ];
    prop_oneof![
        (0u8..3, 0u64..8).prop_map(|(k, id)| Op::Send(k, id)),
        (
            0u64..6,
            prop_oneof![Just(200u16), Just(202), Just(401), Just(500)],
            0u8..3
        )
            .prop_map(|(ex, s, ct)| Op::Head(ex, s, ct)),
        (0u64..6, body).prop_map(|(ex, b)| Op::Body(ex, b)),
        (0u64..6).prop_map(Op::End),
        (0u64..6).prop_map(Op::Failed),
        (0u64..8).prop_map(Op::Done),
        Just(Op::Close),
    ]
}

proptest! {
    /// Whatever happens: no panic, one Fatal at most, nothing after
    /// Finished, at most one Fail per request and only for requests sent and
    /// not done, every Abort for an exchange that was requested, never twice.
    #[test]
    fn legacy_any_sequence_keeps_its_promises(ops in proptest::collection::vec(op(), 0..40)) {
        let config = HttpConfig { max_event: 32, max_body: 64, ..HttpConfig::default() };
        let mut sim = Sim::with(SSE_URL, config);
        let mut all = sim.events();
        let mut sent = std::collections::HashSet::new();
        let mut done = std::collections::HashSet::new();
        for op in ops {
            match op {
                Op::Send(kind, id) => {
                    let kind = match kind {
                        0 if sent.insert(id) => SendKind::Request { id },
                        0 | 1 => SendKind::Notification,
                        _ => SendKind::Response { id: RequestId::Number(id as i64) },
                    };
                    sim.send("{}", kind);
                }
                Op::Head(ex, status, ct) => {
                    let ct = ["text/event-stream", "application/json", ""][usize::from(ct)];
                    let ct = Some(ct).filter(|c| !c.is_empty());
                    sim.head(ExchangeId(ex), &head(status, ct, &[]));
                }
                Op::Body(ex, b) => sim.body(ExchangeId(ex), &b),
                Op::End(ex) => sim.end(ExchangeId(ex)),
                Op::Failed(ex) => sim.failed(ExchangeId(ex), "failed"),
                Op::Done(id) => {
                    sim.t.request_done(id);
                    done.insert(id);
                }
                Op::Close => sim.t.begin_close(sim.now),
            }
            for e in sim.events() {
                if let LegacyEvent::Fail { id, .. } = &e {
                    prop_assert!(sent.contains(id) && !done.contains(id), "{e:?}");
                    done.insert(*id);
                }
                all.push(e);
            }
            prop_assert_eq!(sim.t.poll_timeout(), None);
        }
        let fatals = all.iter().filter(|e| matches!(e, LegacyEvent::Fatal(_))).count();
        prop_assert!(fatals <= 1);
        if let Some(i) = all.iter().position(|e| *e == LegacyEvent::Finished) {
            prop_assert_eq!(i, all.len() - 1);
        }
        let mut requested = std::collections::HashSet::new();
        let mut aborted = std::collections::HashSet::new();
        for e in &all {
            match e {
                LegacyEvent::Request(r) => prop_assert!(requested.insert(r.exchange)),
                LegacyEvent::Abort(ex) => {
                    prop_assert!(requested.contains(ex) && aborted.insert(*ex));
                }
                _ => {}
            }
        }
    }
}

/// The redirect of `ex` followed: `[Abort(ex), Request(next)]`.
fn followed(events: Vec<LegacyEvent>, ex: ExchangeId) -> HttpRequest {
    match <[LegacyEvent; 2]>::try_from(events) {
        Ok([LegacyEvent::Abort(a), LegacyEvent::Request(r)]) if a == ex => r,
        Ok(other) => panic!("expected Abort({ex}) and a request, got {other:?}"),
        Err(events) => panic!("expected Abort and a request, got {events:?}"),
    }
}

#[test]
fn legacy_stream_and_posts_follow_redirects() {
    let mut sim = Sim::new();
    let get = only_request(sim.events());
    sim.head(GET, &head(307, None, &[("Location", "/sse/")]));
    let get2 = followed(sim.events(), GET);
    assert_eq!(get2.url.to_string(), "http://127.0.0.1:3001/sse/");
    assert_eq!(
        (get2.method, &get2.headers),
        (HttpMethod::Get, &get.headers)
    );
    // The endpoint is relative to where the stream was found.
    sim.head(get2.exchange, &sse_head());
    sim.body(
        get2.exchange,
        b"event: endpoint\ndata: messages/?session_id=1\n\n",
    );
    sim.request(1);
    let post = only_request(sim.events());
    assert_eq!(
        post.url.to_string(),
        "http://127.0.0.1:3001/sse/messages/?session_id=1"
    );
    sim.head(
        post.exchange,
        &head(308, None, &[("Location", "/m2?session_id=1")]),
    );
    let post2 = followed(sim.events(), post.exchange);
    assert_eq!((post2.method, &post2.body), (HttpMethod::Post, &post.body));
    sim.head(post2.exchange, &head(202, None, &[]));
    sim.end(post2.exchange);
    assert_eq!(sim.events(), vec![]);
    // Answered there: later messages go there directly.
    sim.request(2);
    assert_eq!(only_request(sim.events()).url.target(), "/m2?session_id=1");
}

#[test]
fn legacy_redirects_not_followed_fail_the_post_or_the_stream() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(1);
    let post = only_request(sim.events());
    sim.head(
        post.exchange,
        &head(303, None, &[("Location", "/elsewhere")]),
    );
    match &sim.events()[..] {
        [LegacyEvent::Abort(a), LegacyEvent::Fail {
            id: 1,
            failure: RequestFailure::Redirect(e),
        }] => {
            assert_eq!(*a, post.exchange);
            let m = e.to_string();
            assert!(
                m.contains("http://127.0.0.1:3001/elsewhere") && m.contains("POST"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The stream: another origin is refused, naming both URLs.
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.head(
        GET,
        &head(302, None, &[("Location", "http://localhost:3001/sse")]),
    );
    let events = sim.events();
    let message = fatal(&events);
    assert!(
        message.contains("http://127.0.0.1:3001/sse")
            && message.contains("http://localhost:3001/sse"),
        "{message}"
    );
}

#[test]
fn legacy_cross_origin_redirect_when_allowed_drops_credentials() {
    let config = HttpConfig {
        allow_cross_origin_redirects: true,
        headers: headers(&[("Authorization", "Bearer t"), ("X-Team", "blue")]),
        ..HttpConfig::default()
    };
    let mut sim = Sim::with(SSE_URL, config);
    let get = only_request(sim.events());
    assert_eq!(get.header("authorization"), Some("Bearer t"));
    sim.head(
        GET,
        &head(307, None, &[("Location", "http://127.0.0.1:4001/sse")]),
    );
    let away = followed(sim.events(), GET);
    assert_eq!(
        (away.header("authorization"), away.header("x-team")),
        (None, Some("blue"))
    );
    sim.head(away.exchange, &sse_head());
    sim.body(away.exchange, b"event: endpoint\ndata: /m\n\n");
    sim.request(1);
    let post = only_request(sim.events());
    assert_eq!(post.url.to_string(), "http://127.0.0.1:4001/m");
    assert_eq!(post.header("authorization"), None);
}
