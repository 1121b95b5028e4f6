//! Scripted conversations with the Streamable HTTP transport, in simulated
//! time, one per rule.

use std::time::{Duration, Instant};

use super::*;
use crate::transport::{ExchangePurpose, HttpMethod, RedirectError, ResponseHead};

const URL: &str = "http://127.0.0.1:3001/mcp";
const V: &str = "2025-11-25";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn req(id: u64, method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#)
}

fn note(method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#)
}

fn result(id: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
}

/// One SSE event: optional id, then the data.
fn ev(id: Option<&str>, data: &str) -> String {
    match id {
        Some(id) => format!("id: {id}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn head(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
    let reason = match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        _ => "",
    };
    ResponseHead {
        status,
        reason: reason.into(),
        version: 1,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect(),
    }
}

const SSE: (&str, &str) = ("Content-Type", "text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

/// The default config without the wait for the listener's head, which
/// only `listener_settles_on_its_head_or_after_listen_settle` looks at.
fn base() -> HttpConfig {
    HttpConfig {
        listen_settle: Duration::ZERO,
        ..HttpConfig::default()
    }
}

/// Drives one transport and collects what it delivers.
struct Harness {
    t: StreamableHttp,
    now: Instant,
    delivered: Vec<String>,
}

impl Harness {
    fn new() -> Self {
        Self::with(base())
    }

    fn with(config: HttpConfig) -> Self {
        Harness {
            t: StreamableHttp::new(HttpUrl::parse(URL).unwrap(), config),
            now: Instant::now(),
            delivered: Vec::new(),
        }
    }

    fn request(&mut self, id: u64, method: &str) {
        let m = req(id, method).into_bytes();
        self.t.send(self.now, m, SendKind::Request { id });
    }

    fn notify(&mut self, method: &str) {
        let m = note(method).into_bytes();
        self.t.send(self.now, m, SendKind::Notification);
    }

    fn events(&mut self) -> Vec<HttpEvent> {
        std::iter::from_fn(|| self.t.poll_output()).collect()
    }

    /// Drains the events, which must all be requests (or diagnostics,
    /// which are skipped).
    fn sent(&mut self) -> Vec<HttpRequest> {
        self.events()
            .into_iter()
            .filter(|e| !is_diag(e))
            .map(|e| match e {
                HttpEvent::Request(r) => r,
                other => panic!("expected a request, got {other:?}"),
            })
            .collect()
    }

    /// Drains the events, which must be exactly one request.
    fn one(&mut self) -> HttpRequest {
        let mut sent = self.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        sent.remove(0)
    }

    fn head(&mut self, ex: ExchangeId, status: u16, headers: &[(&str, &str)]) {
        let d = &mut self.delivered;
        let mut deliver = |b: &[u8]| d.push(String::from_utf8_lossy(b).into_owned());
        self.t
            .handle_head(self.now, ex, &head(status, headers), &mut deliver);
    }

    fn body(&mut self, ex: ExchangeId, data: impl AsRef<[u8]>) {
        let d = &mut self.delivered;
        let mut deliver = |b: &[u8]| d.push(String::from_utf8_lossy(b).into_owned());
        self.t
            .handle_body(self.now, ex, data.as_ref(), &mut deliver);
    }

    fn end(&mut self, ex: ExchangeId) {
        let d = &mut self.delivered;
        let mut deliver = |b: &[u8]| d.push(String::from_utf8_lossy(b).into_owned());
        self.t.handle_end(self.now, ex, &mut deliver);
    }

    fn failed(&mut self, ex: ExchangeId, error: &str) {
        let d = &mut self.delivered;
        let mut deliver = |b: &[u8]| d.push(String::from_utf8_lossy(b).into_owned());
        self.t.handle_failed(self.now, ex, error, &mut deliver);
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.t.handle_timeout(self.now);
    }

    /// Answers a JSON body in one go.
    fn answer_json(&mut self, ex: ExchangeId, body: &str) {
        self.head(ex, 200, &[JSON]);
        self.body(ex, body);
        self.end(ex);
    }

    /// A JSON answer to request `id` carrying session `session`.
    fn answer_json_with_session(&mut self, ex: ExchangeId, id: u64, session: &str) {
        self.head(ex, 200, &[JSON, ("Mcp-Session-Id", session)]);
        self.body(ex, result(id));
        self.end(ex);
    }

    /// initialize (id `id`, JSON answer with `session`), then
    /// notifications/initialized, whose POST goes out alone; returns it.
    fn initialize_unconfirmed(&mut self, id: u64, session: Option<&str>) -> HttpRequest {
        self.request(id, "initialize");
        let init = self.one();
        assert_eq!(init.method, HttpMethod::Post);
        assert_eq!(init.header("Mcp-Session-Id"), None);
        assert_eq!(init.header("MCP-Protocol-Version"), None);
        let mut headers = vec![JSON];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        self.head(init.exchange, 200, &headers);
        self.body(init.exchange, result(id));
        self.end(init.exchange);
        assert_eq!(self.delivered.last(), Some(&result(id)));
        self.t.request_done(id);
        self.notify("notifications/initialized");
        assert_eq!(self.events(), []);
        self.t.initialized(self.now, V);
        let sent = self.one();
        assert_eq!(sent.body, note("notifications/initialized").as_bytes());
        assert!(!self.t.settled());
        sent
    }

    /// [`initialize_unconfirmed`](Self::initialize_unconfirmed), then the
    /// notification's POST answered 202 (head only); returns the sent
    /// requests (the notification's POST, then what it released: held
    /// messages, the listener's GET if listening).
    fn initialize(&mut self, id: u64, session: Option<&str>) -> Vec<HttpRequest> {
        let confirm = self.initialize_unconfirmed(id, session);
        self.head(confirm.exchange, 202, &[]);
        let mut sent = vec![confirm];
        sent.extend(self.sent());
        sent
    }

    /// A default handshake with session `sess-1` (the initialized
    /// notification answered 202); returns the listener GET.
    fn handshake(&mut self) -> HttpRequest {
        let mut sent = self.initialize(0, Some("sess-1"));
        assert_eq!(sent.len(), 2);
        self.head(sent[0].exchange, 202, &[]);
        self.end(sent[0].exchange);
        let listener = sent.remove(1);
        assert_eq!(listener.purpose, ExchangePurpose::Listen);
        listener
    }
}

fn headers_of(r: &HttpRequest) -> Vec<(&str, &str)> {
    r.headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

fn is_diag(e: &HttpEvent) -> bool {
    matches!(e, HttpEvent::Diagnostic(_) | HttpEvent::Note(_))
}

/// The events other than diagnostics.
fn actions(events: Vec<HttpEvent>) -> Vec<HttpEvent> {
    events.into_iter().filter(|e| !is_diag(e)).collect()
}

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

// ---- resumption ---------------------------------------------------------------

#[test]
fn sse_resume_waits_retry_then_sends_last_event_id() {
    // The conformance suite's `sse-retry`.
    let mut h = Harness::new();
    h.handshake();
    h.delivered.clear();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: event-1\nretry: 500\ndata: \n\n");
    h.end(r.exchange);
    assert!(h.events().iter().all(is_diag));
    let t0 = h.now;
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(500)));
    h.advance(ms(499));
    assert_eq!(h.events(), []);
    h.advance(ms(1));
    let get = h.one();
    assert_eq!(get.method, HttpMethod::Get);
    assert_eq!(get.purpose, ExchangePurpose::Resume);
    assert!(get.body.is_empty());
    assert_eq!(
        headers_of(&get),
        [
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", "sess-1"),
            ("MCP-Protocol-Version", V),
            ("Last-Event-ID", "event-1"),
        ]
    );
    h.head(get.exchange, 200, &[SSE]);
    h.body(get.exchange, ev(Some("event-2"), &result(1)));
    h.end(get.exchange);
    assert_eq!(h.delivered, [result(1)]);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn sse_resume_uses_default_retry_clamped_to_max_retry() {
    let mut h = Harness::with(HttpConfig {
        default_retry: ms(2000),
        max_retry: ms(5000),
        ..base()
    });
    h.handshake();
    h.request(1, "a");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: 1\ndata:\n\n");
    h.end(r.exchange);
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(2000)));

    h.request(2, "b");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: 1\nretry: 60000\ndata:\n\n");
    h.end(r.exchange);
    h.events();
    h.t.request_done(1);
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(5000)));
}

#[test]
fn sse_resume_attempts_are_bounded_then_fail_with_no_response() {
    let mut h = Harness::with(HttpConfig {
        max_resume_attempts: 2,
        ..base()
    });
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: e1\ndata:\n\n");
    h.failed(r.exchange, "connection reset");
    assert!(h.events().iter().all(is_diag));
    // Attempt 1: refused.
    h.advance(ms(1000));
    let get = h.one();
    h.failed(get.exchange, "connection refused");
    assert!(h.events().iter().all(is_diag));
    // Attempt 2: an empty stream.
    h.advance(ms(1000));
    let get = h.one();
    assert_eq!(get.header("Last-Event-ID"), Some("e1"));
    h.head(get.exchange, 200, &[SSE]);
    h.end(get.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn resume_attempt_count_resets_when_an_event_arrives() {
    let mut h = Harness::with(HttpConfig {
        max_resume_attempts: 1,
        ..base()
    });
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: e1\ndata:\n\n");
    h.end(r.exchange);
    for n in 2..5 {
        h.advance(ms(1000));
        let get = h.one();
        assert_eq!(
            get.header("Last-Event-ID"),
            Some(format!("e{}", n - 1).as_str())
        );
        h.head(get.exchange, 200, &[SSE]);
        h.body(get.exchange, format!("id: e{n}\ndata:\n\n"));
        h.end(get.exchange);
        assert!(h.events().iter().all(is_diag));
    }
    // A GET whose stream brings nothing uses up the one attempt.
    h.advance(ms(1000));
    let get = h.one();
    h.head(get.exchange, 200, &[SSE]);
    h.end(get.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
}

#[test]
fn stream_without_an_event_id_cannot_be_resumed_and_fails_at_once() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, ev(None, &note("notifications/progress")));
    h.end(r.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn disconnect_mid_stream_resumes_instead_of_cancelling() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(
        r.exchange,
        "id: a\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\nid: b\ndata: {\"js",
    );
    h.failed(r.exchange, "connection reset by peer");
    let events = h.events();
    assert!(events.iter().all(is_diag), "{events:?}");
    assert!(
        matches!(&events[..], [HttpEvent::Diagnostic(m)] if m.contains("connection reset by peer"))
    );
    h.advance(ms(1000));
    let get = h.one();
    // The half-received event "b" is not committed.
    assert_eq!(get.header("Last-Event-ID"), Some("a"));
    assert_eq!(get.purpose, ExchangePurpose::Resume);
}

#[test]
fn resume_answered_with_an_http_error_fails_with_it() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.advance(ms(1000));
    h.events();
    let get = h.t.exchanges.keys().copied().max().unwrap();
    h.head(get, 405, &[]);
    h.end(get);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::Http {
                status: 405,
                message: "HTTP 405: Method Not Allowed".into()
            }
        }]
    );
}

#[test]
fn request_done_aborts_the_open_stream_and_stops_resuming() {
    let mut h = Harness::new();
    h.handshake();
    h.delivered.clear();
    // An open stream.
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.t.request_done(1);
    assert_eq!(h.events(), [HttpEvent::Abort(r.exchange)]);
    h.body(r.exchange, ev(None, &result(1)));
    h.end(r.exchange);
    assert!(h.delivered.is_empty());
    assert_eq!(h.events(), []);
    // A stream waiting to be resumed.
    h.request(2, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.events();
    assert!(h.t.poll_timeout().is_some());
    h.t.request_done(2);
    assert_eq!(h.t.poll_timeout(), None);
    h.advance(ms(5000));
    assert_eq!(h.events(), []);
    // A POST not yet answered.
    h.request(3, "tools/call");
    let r = h.one();
    h.t.request_done(3);
    assert_eq!(h.events(), [HttpEvent::Abort(r.exchange)]);
}

#[test]
fn response_on_the_listener_stops_resumption() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.events();
    h.body(listener.exchange, ev(None, &result(1)));
    assert_eq!(h.delivered.last(), Some(&result(1)));
    assert_eq!(h.t.poll_timeout(), None);
    h.advance(ms(5000));
    assert_eq!(h.events(), []);
}

// ---- listener ---------------------------------------------------------------

#[test]
fn listener_opens_after_initialized_and_delivers_server_requests() {
    let mut h = Harness::new();
    let listener = h.handshake();
    assert_eq!(listener.method, HttpMethod::Get);
    assert_eq!(listener.header("Last-Event-ID"), None);
    h.delivered.clear();
    h.head(listener.exchange, 200, &[SSE]);
    let elicit = r#"{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}"#;
    h.body(listener.exchange, ": keep-alive\n\n");
    h.body(listener.exchange, ev(Some("g1"), elicit));
    assert_eq!(h.delivered, [elicit]);
    assert_eq!(h.events(), []);
}

#[test]
fn listener_settles_on_its_head_or_after_listen_settle() {
    // Settles when the listener's head arrives.
    let mut h = Harness::with(HttpConfig {
        listen_settle: ms(1000),
        ..base()
    });
    let listener = h.handshake();
    assert!(!h.t.settled());
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(1000)));
    h.head(listener.exchange, 200, &[SSE]);
    assert!(h.t.settled());
    assert_eq!(h.t.poll_timeout(), None);

    // Or on 405, or when it fails.
    let mut h = Harness::with(HttpConfig {
        listen_settle: ms(1000),
        ..base()
    });
    let listener = h.handshake();
    h.head(listener.exchange, 405, &[]);
    assert!(h.t.settled());

    // Or when the wait runs out (a server that holds the head back).
    let mut h = Harness::with(HttpConfig {
        listen_settle: ms(1000),
        ..base()
    });
    h.handshake();
    h.advance(ms(999));
    assert!(!h.t.settled());
    h.advance(ms(1));
    assert!(h.t.settled());
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn listener_is_not_opened_when_listen_is_off() {
    let mut h = Harness::with(HttpConfig {
        listen: false,
        ..base()
    });
    let sent = h.initialize(0, Some("s"));
    assert_eq!(sent.len(), 1);
}

#[test]
fn listener_405_disables_it_quietly() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 405, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(listener.exchange));
    assert!(events[1..].iter().all(is_diag));
    assert_eq!(h.t.poll_timeout(), None);
    h.advance(ms(60_000));
    assert_eq!(h.events(), []);
}

#[test]
fn listener_reopens_after_stream_end_with_last_event_id() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.body(listener.exchange, "retry: 200\n");
    h.body(
        listener.exchange,
        ev(Some("L1"), &note("notifications/tools/list_changed")),
    );
    h.end(listener.exchange);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(200)));
    h.advance(ms(200));
    let again = h.one();
    assert_eq!(again.purpose, ExchangePurpose::Listen);
    assert_eq!(again.header("Last-Event-ID"), Some("L1"));
    assert_eq!(again.header("Mcp-Session-Id"), Some("sess-1"));
}

#[test]
fn listener_failures_back_off_exponentially_then_give_up() {
    let mut h = Harness::with(HttpConfig {
        default_retry: ms(100),
        max_listen_attempts: 3,
        ..base()
    });
    let mut listener = h.handshake();
    for (n, delay) in [100, 200, 400].into_iter().enumerate() {
        if n == 1 {
            h.head(listener.exchange, 500, &[]);
            assert_eq!(h.events()[0], HttpEvent::Abort(listener.exchange));
        } else {
            h.failed(listener.exchange, "connection refused");
            assert!(h.events().iter().all(is_diag));
        }
        assert_eq!(h.t.poll_timeout(), Some(h.now + ms(delay)));
        h.advance(ms(delay - 1));
        assert_eq!(h.events(), []);
        h.advance(ms(1));
        listener = h.one();
        assert_eq!(listener.purpose, ExchangePurpose::Listen);
    }
    // A stream that ends without any event is a failure too: the 4th.
    h.head(listener.exchange, 200, &[SSE]);
    h.end(listener.exchange);
    match &h.events()[..] {
        [HttpEvent::Diagnostic(m)] => assert!(m.contains("giving up"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn listener_failure_count_resets_when_an_event_arrives() {
    let mut h = Harness::with(HttpConfig {
        default_retry: ms(100),
        max_listen_attempts: 1,
        ..base()
    });
    let mut listener = h.handshake();
    for _ in 0..3 {
        h.failed(listener.exchange, "refused");
        h.advance(ms(100));
        listener = h.one();
        h.head(listener.exchange, 200, &[SSE]);
        h.body(listener.exchange, "id: x\ndata:\n\n");
        h.failed(listener.exchange, "reset");
        h.advance(ms(100));
        listener = h.one();
        assert_eq!(listener.header("Last-Event-ID"), Some("x"));
    }
}

// ---- sessions -----------------------------------------------------------------

/// After a handshake: request 1 meets a 404; returns its POST.
fn expire(h: &mut Harness) -> HttpRequest {
    h.request(1, "tools/list");
    let r = h.one();
    h.head(r.exchange, 404, &[]);
    r
}

#[test]
fn http_404_with_session_reinitializes_and_resends_once() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.body(listener.exchange, ev(Some("old-1"), &note("n")));
    let first = expire(&mut h);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(first.exchange),
            HttpEvent::Abort(listener.exchange),
            HttpEvent::SessionExpired
        ]
    );
    // Held until the new session is ready.
    h.request(2, "ping");
    h.notify("notifications/roots/list_changed");
    h.advance(ms(10_000));
    assert_eq!(h.events(), []);
    h.t.reset_session();
    assert_eq!(h.t.session_id(), None);
    let sent = h.initialize(3, Some("sess-2"));
    let bodies: Vec<&[u8]> = sent.iter().map(|r| &r.body[..]).collect();
    assert_eq!(
        bodies,
        [
            note("notifications/initialized").as_bytes(),
            first.body.as_slice(),
            req(2, "ping").as_bytes(),
            note("notifications/roots/list_changed").as_bytes(),
            b"",
        ]
    );
    for r in &sent {
        assert_eq!(r.header("Mcp-Session-Id"), Some("sess-2"));
        assert_eq!(r.header("MCP-Protocol-Version"), Some(V));
    }
    // The listener is reopened for the new session, without the old ids.
    assert_eq!(sent[4].purpose, ExchangePurpose::Listen);
    assert_eq!(sent[4].header("Last-Event-ID"), None);
    // The resent request is answered normally.
    h.answer_json(sent[1].exchange, &result(1));
    assert_eq!(h.delivered.last(), Some(&result(1)));
    assert_eq!(h.events(), []);
}

#[test]
fn second_404_for_a_resent_request_fails_it_with_session_expired() {
    let mut h = Harness::new();
    h.handshake();
    expire(&mut h);
    h.events();
    h.t.reset_session();
    let sent = h.initialize(2, Some("sess-2"));
    h.head(sent[0].exchange, 202, &[]);
    h.end(sent[0].exchange);
    h.head(sent[1].exchange, 404, &[]);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(sent[1].exchange),
            HttpEvent::Fail {
                id: 1,
                failure: RequestFailure::SessionExpired
            },
            HttpEvent::Abort(sent[2].exchange),
            HttpEvent::SessionExpired,
        ]
    );
    // Not sent a third time.
    h.t.reset_session();
    let sent = h.initialize(3, Some("sess-3"));
    assert_eq!(sent.len(), 2);
}

#[test]
fn session_expiry_fails_the_streams_of_the_old_session() {
    let mut h = Harness::new();
    let listener = h.handshake();
    // 1: open stream; 2: waiting to resume; 3: POST unanswered.
    h.request(1, "a");
    let r1 = h.one();
    h.head(r1.exchange, 200, &[SSE]);
    h.body(r1.exchange, "id: x\ndata:\n\n");
    h.request(2, "b");
    let r2 = h.one();
    h.head(r2.exchange, 200, &[SSE]);
    h.body(r2.exchange, "id: y\ndata:\n\n");
    h.end(r2.exchange);
    h.request(3, "c");
    let r3 = h.one();
    h.events();
    h.request(5, "e");
    let r5 = h.one();
    h.head(r5.exchange, 404, &[]);
    // 2 cannot be resumed in another session: it fails. 1's stream is
    // still open: the server may still answer on it (one that ends the
    // session, then answers the call that ended it).
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(r5.exchange),
            HttpEvent::Fail {
                id: 2,
                failure: RequestFailure::SessionExpired
            },
            HttpEvent::Abort(listener.exchange),
            HttpEvent::SessionExpired,
        ]
    );
    assert_eq!(h.t.poll_timeout(), None);
    h.body(
        r1.exchange,
        "id: x2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
    );
    assert_eq!(
        h.delivered.last().map(String::as_str),
        Some(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
    );
    h.end(r1.exchange);
    // 3 meets its own 404 later: sent again, no second SessionExpired.
    h.head(r3.exchange, 404, &[]);
    assert_eq!(h.events(), [HttpEvent::Abort(r3.exchange)]);
    h.t.reset_session();
    let sent = h.initialize(6, Some("sess-2"));
    assert_eq!(sent[1].body, req(3, "c").as_bytes());
    assert_eq!(sent[2].body, req(5, "e").as_bytes());
    // A stream of the old session that ends without its answer: the
    // request fails then (no resumption across sessions).
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "a");
    let r1 = h.one();
    h.head(r1.exchange, 200, &[SSE]);
    h.body(r1.exchange, "id: x\ndata:\n\n");
    h.events();
    expire_with(&mut h, 2);
    h.events();
    h.end(r1.exchange);
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::SessionExpired
        }]
    );
    // A late 404 of the old session, once the new one is ready: sent at once.
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "a");
    let r1 = h.one();
    expire_with(&mut h, 2);
    h.events();
    h.t.reset_session();
    h.initialize(3, Some("sess-2"));
    h.head(r1.exchange, 404, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(r1.exchange));
    assert!(
        matches!(&events[1], HttpEvent::Request(r) if r.body == req(1, "a").as_bytes()
        && r.header("Mcp-Session-Id") == Some("sess-2"))
    );
    assert_eq!(events.len(), 2);
}

fn expire_with(h: &mut Harness, id: u64) {
    h.request(id, "x");
    let r = h.one();
    h.head(r.exchange, 404, &[]);
}

#[test]
fn sessions_expiring_in_a_row_without_success_are_fatal() {
    let mut h = Harness::new();
    let mut sent = h.initialize_unconfirmed(0, Some("s0"));
    for n in 1..=4 {
        // notifications/initialized meets a 404 at once.
        h.head(sent.exchange, 404, &[]);
        let events = actions(h.events());
        if n <= MAX_CONSECUTIVE_EXPIRIES {
            assert_eq!(events.last(), Some(&HttpEvent::SessionExpired), "{n}");
            h.t.reset_session();
            sent = h.initialize_unconfirmed(u64::from(n), Some("s"));
        } else {
            assert!(
                matches!(events.last(), Some(HttpEvent::Fatal(_))),
                "{events:?}"
            );
        }
    }
    // A success in between resets the count.
    let mut h = Harness::new();
    h.initialize(0, Some("s0"));
    for n in 1..=6 {
        h.request(100 + n, "ping");
        let r = h.one();
        h.answer_json(r.exchange, &result(100 + n));
        expire_with(&mut h, 200 + n);
        assert_eq!(actions(h.events()).last(), Some(&HttpEvent::SessionExpired));
        h.t.reset_session();
        let sent = h.initialize(n, Some("s"));
        // The request that met the 404 goes out again once accepted.
        assert_eq!(sent[1].body, req(200 + n, "x").as_bytes());
        h.answer_json(sent[1].exchange, &result(200 + n));
    }
}

/// After a 404: the new session's `notifications/initialized` goes out
/// alone; the request that met the 404, one sent meanwhile, a late 404 of
/// the old session and the listener all wait for its 2xx head, in any
/// order of inputs and however long it takes.
#[test]
fn nothing_overtakes_initialized_until_the_server_accepted_it() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "a");
    let r1 = h.one();
    h.request(2, "x");
    let r2 = h.one();
    h.head(r2.exchange, 404, &[]);
    h.events();
    h.t.reset_session();
    let confirm = h.initialize_unconfirmed(3, Some("sess-2"));
    assert_eq!(confirm.header("Mcp-Session-Id"), Some("sess-2"));
    h.request(4, "b");
    h.notify("notifications/roots/list_changed");
    h.head(r1.exchange, 404, &[]);
    assert_eq!(h.events(), [HttpEvent::Abort(r1.exchange)]);
    h.advance(ms(60_000));
    assert_eq!(h.events(), []);
    assert!(!h.t.settled());
    h.head(confirm.exchange, 202, &[]);
    let bodies: Vec<Vec<u8>> = h.sent().into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies,
        [
            req(1, "a").into_bytes(),
            req(2, "x").into_bytes(),
            req(4, "b").into_bytes(),
            note("notifications/roots/list_changed").into_bytes(),
            Vec::new(),
        ]
    );
    assert!(h.t.settled());
    h.end(confirm.exchange);
    assert_eq!(h.events(), []);
}

/// A refusal of `notifications/initialized` (a status other than 2xx,
/// 404 or an authorization) ends the connection, quoting the answer; the
/// held messages are never sent.
#[test]
fn refused_initialized_is_fatal_and_releases_nothing() {
    let mut h = Harness::new();
    let confirm = h.initialize_unconfirmed(0, Some("s"));
    h.request(1, "tools/list");
    h.head(confirm.exchange, 400, &[JSON]);
    h.body(confirm.exchange, r#"{"error":"no"}"#);
    assert_eq!(h.events(), []);
    h.end(confirm.exchange);
    match h.events().as_slice() {
        [HttpEvent::Fatal(m)] => assert_eq!(
            m,
            r#"the server refused notifications/initialized: HTTP 400: {"error":"no"}"#
        ),
        other => panic!("{other:?}"),
    }
    h.request(2, "ping");
    assert!(matches!(
        h.events().as_slice(),
        [HttpEvent::Fail { id: 2, .. }]
    ));
}

/// A failure before the head (reset, refused connection) sends the
/// notification again, once; nothing else goes out meanwhile; a second
/// failure ends the connection.
#[test]
fn failed_initialized_post_is_sent_again_once_then_fatal() {
    let mut h = Harness::new();
    let confirm = h.initialize_unconfirmed(0, Some("s"));
    h.request(1, "tools/list");
    h.failed(confirm.exchange, "connection reset");
    let again = h.one();
    assert_eq!(again.body, confirm.body);
    assert_eq!(again.header("Mcp-Session-Id"), Some("s"));
    h.head(again.exchange, 202, &[]);
    let sent = h.sent();
    assert_eq!(sent[0].body, req(1, "tools/list").as_bytes());
    assert_eq!(sent[1].purpose, ExchangePurpose::Listen);

    let mut h = Harness::new();
    let confirm = h.initialize_unconfirmed(0, Some("s"));
    h.request(1, "tools/list");
    h.end(confirm.exchange);
    let again = h.one();
    h.failed(again.exchange, "connection reset");
    match actions(h.events()).as_slice() {
        [HttpEvent::Fatal(m)] => assert_eq!(
            m,
            "notifications/initialized could not be sent (twice): connection reset"
        ),
        other => panic!("{other:?}"),
    }
}

/// A 401 on `notifications/initialized` (auth enabled): it is sent again
/// first once authorized, and still nothing else before its 2xx; if the
/// authorization fails, the session cannot start.
#[test]
fn initialized_meeting_401_waits_for_the_authorization() {
    for succeed in [true, false] {
        let mut h = Harness::new();
        h.t.enable_auth();
        let confirm = h.initialize_unconfirmed(0, Some("s"));
        h.request(1, "tools/list");
        h.head(confirm.exchange, 401, &[("WWW-Authenticate", "Bearer")]);
        let events = actions(h.events());
        assert!(
            matches!(
                events.as_slice(),
                [
                    HttpEvent::Abort(_),
                    HttpEvent::AuthRequired { request: None, .. }
                ]
            ),
            "{events:?}"
        );
        h.request(2, "ping");
        assert_eq!(h.events(), []);
        if !succeed {
            h.t.authorization_failed("login refused");
            assert!(matches!(
                actions(h.events()).last(),
                Some(HttpEvent::Fatal(m)) if m.ends_with("login refused")
            ));
            continue;
        }
        h.t.authorized(h.now, "Bearer t".into());
        let again = h.one();
        assert_eq!(again.body, confirm.body);
        assert_eq!(again.header("Authorization"), Some("Bearer t"));
        h.head(again.exchange, 202, &[]);
        let bodies: Vec<Vec<u8>> = h.sent().into_iter().map(|r| r.body).collect();
        assert_eq!(
            bodies,
            [
                req(1, "tools/list").into_bytes(),
                req(2, "ping").into_bytes(),
                Vec::new()
            ]
        );
    }
}

#[test]
fn first_initialize_answered_400_404_405_falls_back_to_legacy() {
    for status in [400, 404, 405] {
        let mut h = Harness::new();
        h.request(0, "initialize");
        let init = h.one();
        h.notify("notifications/initialized");
        h.head(init.exchange, status, &[]);
        let mut expected = vec![HttpEvent::Abort(init.exchange)];
        if status == 400 {
            // Its body is read first (a -32022 would be a 2026-07-28
            // server's refusal): the fallback comes at its end.
            assert_eq!(h.events(), []);
            h.body(init.exchange, "Bad Request: no session");
            h.end(init.exchange);
            expected.clear();
        }
        expected.push(HttpEvent::FallbackToLegacy {
            resend: vec![
                (
                    req(0, "initialize").into_bytes(),
                    SendKind::Request { id: 0 },
                ),
                (
                    note("notifications/initialized").into_bytes(),
                    SendKind::Notification,
                ),
            ],
        });
        assert_eq!(h.events(), expected);
        assert!(h.delivered.is_empty(), "{:?}", h.delivered);
        h.body(init.exchange, "x");
        h.end(init.exchange);
        h.t.begin_close(h.now);
        assert_eq!(h.events(), [HttpEvent::Finished]);
    }
    // 400 with -32022 for the initialize: a 2026-07-28 server refusing
    // the handshake (a remembered era gone stale): its error reaches the
    // connection, which probes again; no fallback.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 400, &[("Content-Type", "application/json")]);
    let refusal = r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}"#;
    h.body(init.exchange, refusal);
    h.end(init.exchange);
    assert!(h.events().iter().all(is_diag));
    assert_eq!(h.delivered, [refusal]);
    h.t.begin_modern("2026-07-28");
    h.request(1, "server/discover");
    let probe = h.one();
    assert_eq!(probe.method, HttpMethod::Post);
    assert_eq!(probe.header("MCP-Protocol-Version"), Some("2026-07-28"));
    // Any other error is a plain failure.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 500, &[]);
    h.end(init.exchange);
    assert!(matches!(
        &h.events()[..],
        [HttpEvent::Fail {
            id: 0,
            failure: RequestFailure::Http { status: 500, .. }
        }]
    ));
}

#[test]
fn reinitialize_answered_404_is_a_failure_not_a_fallback() {
    let mut h = Harness::new();
    h.handshake();
    expire(&mut h);
    h.events();
    h.t.reset_session();
    h.request(2, "initialize");
    let init = h.one();
    assert_eq!(init.header("Mcp-Session-Id"), None);
    h.head(init.exchange, 404, &[]);
    h.end(init.exchange);
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 2,
            failure: RequestFailure::Http {
                status: 404,
                message: "HTTP 404: Not Found".into()
            }
        }]
    );
}

#[test]
fn initialize_answered_as_sse_with_priming_sets_the_session() {
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 200, &[SSE, ("mcp-session-id", "abc-123")]);
    h.body(init.exchange, "id: 1\ndata: \n\n");
    h.body(init.exchange, ev(Some("2"), &result(0)));
    assert_eq!(h.t.session_id(), Some("abc-123"));
    assert_eq!(h.delivered, [result(0)]);
    h.t.request_done(0);
    assert_eq!(h.events(), [HttpEvent::Abort(init.exchange)]);
}

// ---- close ------------------------------------------------------------------

#[test]
fn close_aborts_everything_sends_delete_and_finishes_on_its_answer() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.t.begin_close(h.now);
    let events = h.events();
    assert_eq!(
        events[..2],
        [
            HttpEvent::Abort(listener.exchange),
            HttpEvent::Abort(r.exchange)
        ]
    );
    let HttpEvent::Request(delete) = &events[2] else {
        panic!("{events:?}")
    };
    assert_eq!(events.len(), 3);
    assert_eq!(delete.method, HttpMethod::Delete);
    assert_eq!(delete.purpose, ExchangePurpose::Close);
    assert_eq!(
        headers_of(delete),
        [("Mcp-Session-Id", "sess-1"), ("MCP-Protocol-Version", V)]
    );
    h.t.begin_close(h.now);
    h.request(2, "ping");
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 2,
            failure: RequestFailure::Other("the connection is closed".into())
        }]
    );
    h.head(delete.exchange, 200, &[]);
    assert_eq!(
        h.events(),
        [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
    );
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn close_lets_a_cancellation_in_flight_reach_the_server_before_the_delete() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    // The call timed out: its notifications/cancelled is out.
    h.notify("notifications/cancelled");
    let cancel = h.one();
    h.t.begin_close(h.now);
    // Everything but the cancellation stops; no DELETE yet.
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(listener.exchange),
            HttpEvent::Abort(r.exchange)
        ]
    );
    h.head(cancel.exchange, 202, &[]);
    h.end(cancel.exchange);
    let events = h.events();
    let Some(HttpEvent::Request(delete)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(delete.method, HttpMethod::Delete);
    h.head(delete.exchange, 200, &[]);
    assert!(h.events().contains(&HttpEvent::Finished));
    // A cancellation that gets no answer is given up at the close timeout.
    let mut h = Harness::new();
    h.handshake();
    h.notify("notifications/cancelled");
    let cancel = h.one();
    h.t.begin_close(h.now);
    h.events();
    let until = h.t.poll_timeout().expect("a close timeout");
    h.now = until;
    h.t.handle_timeout(h.now);
    let events = h.events();
    assert!(
        events.contains(&HttpEvent::Abort(cancel.exchange)),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, HttpEvent::Request(r) if r.method == HttpMethod::Delete)),
        "{events:?}"
    );
}

#[test]
fn close_finishes_on_delete_405_or_failure() {
    for fail in [false, true] {
        let mut h = Harness::new();
        h.handshake();
        h.t.begin_close(h.now);
        let delete = h.events().into_iter().find_map(|e| match e {
            HttpEvent::Request(r) => Some(r),
            _ => None,
        });
        let delete = delete.unwrap();
        if fail {
            h.failed(delete.exchange, "connection refused");
            assert_eq!(h.events(), [HttpEvent::Finished]);
        } else {
            h.head(delete.exchange, 405, &[]);
            assert_eq!(
                h.events(),
                [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
            );
        }
    }
}

#[test]
fn close_finishes_after_close_timeout_without_an_answer() {
    let mut h = Harness::new();
    h.handshake();
    h.t.begin_close(h.now);
    let events = h.events();
    assert!(matches!(
        events[..],
        [HttpEvent::Abort(_), HttpEvent::Request(_)]
    ));
    let HttpEvent::Request(delete) = events[1].clone() else {
        unreachable!()
    };
    assert_eq!(h.t.poll_timeout(), Some(h.now + Duration::from_secs(2)));
    h.advance(ms(1999));
    assert_eq!(h.events(), []);
    h.advance(ms(1));
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
    );
    h.advance(ms(1));
    h.head(delete.exchange, 200, &[]);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn close_without_session_finishes_at_once() {
    let mut h = Harness::new();
    h.t.begin_close(h.now);
    assert_eq!(h.events(), [HttpEvent::Finished]);

    let mut h = Harness::new();
    let sent = h.initialize(0, None);
    h.t.begin_close(h.now);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(sent[0].exchange),
            HttpEvent::Abort(sent[1].exchange),
            HttpEvent::Finished
        ]
    );
    // After a 404 the session is already gone: nothing to delete.
    let mut h = Harness::new();
    h.handshake();
    expire(&mut h);
    h.events();
    h.t.begin_close(h.now);
    assert_eq!(h.events(), [HttpEvent::Finished]);
}

// ---- timers, chunking, robustness -----------------------------------------------

#[test]
fn poll_timeout_is_the_earliest_timer_and_handle_timeout_is_idempotent() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.body(listener.exchange, "retry: 300\nid: l\ndata:\n\n");
    h.end(listener.exchange);
    for (id, retry) in [(1, 700), (2, 200)] {
        h.request(id, "x");
        let r = h.one();
        h.head(r.exchange, 200, &[SSE]);
        h.body(r.exchange, format!("retry: {retry}\nid: e\ndata:\n\n"));
        h.end(r.exchange);
    }
    h.events();
    let t0 = h.now;
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(200)));
    h.advance(ms(200));
    assert_eq!(h.sent().len(), 1);
    h.t.handle_timeout(h.now);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(300)));
    h.advance(ms(100));
    assert_eq!(h.one().purpose, ExchangePurpose::Listen);
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(700)));
    h.advance(ms(400));
    assert_eq!(h.one().purpose, ExchangePurpose::Resume);
    assert_eq!(h.t.poll_timeout(), None);
}

/// What a conversation produced: delivered texts and events.
type Transcript = (Vec<String>, Vec<HttpEvent>);

/// A conversation whose bodies are fed in chunks chosen by `chunk`
/// (given the remaining length, returns the next chunk's length).
fn conversation(chunk: &mut dyn FnMut(usize) -> usize) -> Transcript {
    let mut h = Harness::new();
    let mut events = Vec::new();
    let mut feed = |h: &mut Harness, ex: ExchangeId, data: &[u8], events: &mut Vec<HttpEvent>| {
        let mut rest = data;
        while !rest.is_empty() {
            let n = chunk(rest.len()).clamp(1, rest.len());
            h.body(ex, &rest[..n]);
            events.extend(h.events());
            rest = &rest[n..];
        }
    };
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 200, &[SSE, ("Mcp-Session-Id", "s-1")]);
    let init_stream = format!(
        "\u{feff}id: 0\r\ndata:\r\n\r\n{}",
        ev(Some("1"), &result(0))
    );
    feed(&mut h, init.exchange, init_stream.as_bytes(), &mut events);
    h.end(init.exchange);
    h.t.request_done(0);
    h.notify("notifications/initialized");
    h.t.initialized(h.now, V);
    let confirm = h.one();
    h.head(confirm.exchange, 202, &[]);
    let listener = h.one().exchange;
    h.head(listener, 200, &[SSE]);
    h.request(1, "tools/call");
    let call = h.one();
    h.head(call.exchange, 200, &[SSE]);
    let call_stream = [
        "id: c0\ndata:\n\n".to_owned(),
        ": comment\r".to_owned(),
        "id: c1\rdata: {\"jsonrpc\":\"2.0\",\r".to_owned(),
        "data: \"method\":\"notifications/progress\"}\r\r".to_owned(),
        ev(Some("c2"), &req(0, "sampling/createMessage")),
        "retry: 250\nid: c3\ndata:\n\n".to_owned(),
    ]
    .concat();
    feed(&mut h, call.exchange, call_stream.as_bytes(), &mut events);
    h.end(call.exchange);
    events.extend(h.events());
    h.advance(ms(250));
    let get = h.one();
    assert_eq!(get.header("Last-Event-ID"), Some("c3"));
    h.head(get.exchange, 200, &[SSE]);
    let listen_stream = ev(Some("g1"), &note("notifications/resources/list_changed"));
    feed(&mut h, listener, listen_stream.as_bytes(), &mut events);
    let resumed = ev(Some("c4"), &result(1));
    feed(&mut h, get.exchange, resumed.as_bytes(), &mut events);
    h.end(get.exchange);
    h.request(2, "tools/list");
    let list = h.one();
    h.head(list.exchange, 200, &[JSON]);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{}]}}}}"#,
        vec![r#"{"name":"t"}"#; 50].join(",")
    );
    feed(&mut h, list.exchange, big.as_bytes(), &mut events);
    h.end(list.exchange);
    events.extend(h.events());
    (h.delivered, events)
}

#[test]
fn chunking_does_not_change_delivered_messages_or_events() {
    let whole = conversation(&mut |n| n);
    assert_eq!(whole.0.len(), 6, "{:?}", whole.0);
    assert_eq!(
        whole.0[1],
        "{\"jsonrpc\":\"2.0\",\n\"method\":\"notifications/progress\"}"
    );
    assert!(whole.1.iter().all(is_diag), "{:?}", whole.1);
    assert_eq!(conversation(&mut |_| 1), whole);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..50 {
        let mut rng = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let got = conversation(&mut |n| (rng() % 40) as usize % n + 1);
        assert_eq!(got, whole);
    }
}

#[test]
fn arbitrary_inputs_never_panic_and_timers_stay_in_the_future() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut rng = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pieces: [&[u8]; 12] = [
        b"id: 1\n",
        b"data: ",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        b"\n\n",
        b"retry: 5\n",
        b"\r",
        b"[{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":1}]",
        b"\xff\xfe",
        b"event: x\n",
        b"id: \x01\n",
        b"data:\n\n",
    ];
    let statuses = [200, 202, 400, 404, 405, 500, 307, 303];
    let locations = ["/mcp/", "/mcp", "http://127.0.0.1:3002/x", ""];
    let types = ["text/event-stream", "application/json", "text/html", ""];
    for _ in 0..200 {
        let mut h = Harness::with(HttpConfig {
            max_body: 64,
            max_event: 64,
            default_retry: ms(10),
            max_resume_attempts: 2,
            max_listen_attempts: 2,
            ..base()
        });
        let mut open: Vec<ExchangeId> = Vec::new();
        let mut next_id = 0;
        for _ in 0..150 {
            let r = rng();
            let ex = if open.is_empty() {
                ExchangeId(r % 4)
            } else {
                open[(r as usize / 7) % open.len()]
            };
            match r % 13 {
                0 | 1 => {
                    h.request(next_id, "m");
                    next_id += 1;
                }
                2 => h.notify(if r % 2 == 0 {
                    "notifications/initialized"
                } else {
                    "n"
                }),
                3 => {
                    let ct = types[(r as usize / 3) % types.len()];
                    let status = statuses[(r as usize / 11) % statuses.len()];
                    let mut hs = vec![("Mcp-Session-Id", if r % 5 == 0 { "bad id" } else { "s" })];
                    if !ct.is_empty() {
                        hs.push(("Content-Type", ct));
                    }
                    let location = locations[(r as usize / 13) % locations.len()];
                    if !location.is_empty() {
                        hs.push(("Location", location));
                    }
                    h.head(ex, status, &hs);
                }
                4..=6 => {
                    let mut data = Vec::new();
                    for k in 0..(r % 5) {
                        data.extend_from_slice(pieces[((r >> (8 + k * 4)) % 12) as usize]);
                    }
                    h.body(ex, &data);
                }
                7 => h.end(ex),
                8 => h.failed(ex, "reset"),
                9 => h.advance(ms(r % 50)),
                10 => h.t.request_done(r % (next_id + 1)),
                11 => match r % 3 {
                    0 => h.t.initialized(h.now, V),
                    1 => h.t.reset_session(),
                    _ => {
                        if r % 7 == 0 {
                            h.t.begin_close(h.now)
                        }
                    }
                },
                _ => h.t.handle_timeout(h.now),
            }
            for e in h.events() {
                match e {
                    HttpEvent::Request(req) => open.push(req.exchange),
                    HttpEvent::Abort(ex) => open.retain(|o| *o != ex),
                    _ => {}
                }
            }
            h.t.handle_timeout(h.now);
            h.events();
            if let Some(t) = h.t.poll_timeout() {
                assert!(t > h.now);
            }
            assert!(h.t.held.len() <= MAX_HELD);
        }
    }
}

#[test]
fn listener_or_resume_404_with_session_expires_the_session() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 404, &[]);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(listener.exchange),
            HttpEvent::SessionExpired
        ]
    );

    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.advance(ms(1000));
    let get = h.one();
    h.head(get.exchange, 404, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(get.exchange));
    assert_eq!(
        events[1],
        HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::SessionExpired
        }
    );
    assert_eq!(events.last(), Some(&HttpEvent::SessionExpired));
}

#[test]
fn event_id_unfit_for_a_header_cannot_be_resumed() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\u{1}b\ndata:\n\n");
    h.end(r.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
}

#[test]
fn huge_retry_and_timeouts_do_not_overflow() {
    let mut h = Harness::with(HttpConfig {
        max_retry: Duration::MAX,
        close_timeout: Duration::MAX,
        ..base()
    });
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "retry: 18446744073709551615\nid: a\ndata:\n\n");
    h.end(r.exchange);
    assert!(h.t.poll_timeout().is_some_and(|t| t > h.now));
    h.t.begin_close(h.now);
    assert!(h.t.poll_timeout().is_some_and(|t| t > h.now));
}

#[test]
fn failed_initialize_lets_the_next_request_be_a_new_initialize() {
    // 401 (e.g. before a login): the next request is the initialize again.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 401, &[("WWW-Authenticate", "Bearer")]);
    h.end(init.exchange);
    assert!(matches!(
        &h.events()[..],
        [HttpEvent::Fail {
            id: 0,
            failure: RequestFailure::Http { status: 401, .. }
        }]
    ));
    h.request(1, "initialize");
    let again = h.one();
    assert_eq!(again.body, req(1, "initialize").as_bytes());
    // Its stream breaks without an event id after the session id came:
    // failed, and the session id is forgotten.
    h.head(again.exchange, 200, &[SSE, ("Mcp-Session-Id", "s")]);
    h.failed(again.exchange, "reset");
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
    assert_eq!(h.t.session_id(), None);
    // Timed out (completed unanswered): the same.
    h.request(2, "initialize");
    let third = h.one();
    h.t.request_done(2);
    assert_eq!(h.events(), [HttpEvent::Abort(third.exchange)]);
    let sent = h.initialize(3, Some("s"));
    assert_eq!(sent.len(), 2);
    // Completed after its response: not a failure.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.answer_json(init.exchange, &result(0));
    h.t.request_done(0);
    h.request(1, "ping");
    assert_eq!(h.events(), []);
}

#[test]
fn era_headers_go_with_their_message_only_in_the_2026_era() {
    let era = || vec![("Mcp-Method".to_owned(), "tools/call".to_owned())];
    // Before the era: the transport leaves them out.
    let mut h = Harness::new();
    h.t.send_with(
        h.now,
        req(0, "initialize").into_bytes(),
        SendKind::Request { id: 0 },
        era(),
    );
    assert!(h.one().header("Mcp-Method").is_none());
    // In it, they go out, also when a 401 parks the message until the
    // authorization is done.
    let mut h = Harness::new();
    h.t.enable_auth();
    h.t.begin_modern("2026-07-28");
    h.t.send_with(
        h.now,
        req(0, "tools/call").into_bytes(),
        SendKind::Request { id: 0 },
        era(),
    );
    let post = h.one();
    assert_eq!(post.header("Mcp-Method"), Some("tools/call"));
    assert_eq!(post.header("MCP-Protocol-Version"), Some("2026-07-28"));
    h.head(post.exchange, 401, &[("WWW-Authenticate", "Bearer")]);
    assert!(h.events().iter().any(|e| matches!(
        e,
        HttpEvent::AuthRequired {
            request: Some(0),
            ..
        }
    )));
    h.t.authorized(h.now, "Bearer t".into());
    let again = h.one();
    assert_eq!(again.header("Mcp-Method"), Some("tools/call"));
    assert_eq!(again.header("Authorization"), Some("Bearer t"));
}

// ---- redirects -------------------------------------------------------------

impl Harness {
    /// Answers exchange `ex` with a redirect to `location`: it is aborted
    /// and the same request goes out again, as a new exchange, there.
    fn redirect(&mut self, sent: &HttpRequest, status: u16, location: &str) -> HttpRequest {
        self.head(sent.exchange, status, &[("Location", location)]);
        let events = actions(self.events());
        let [HttpEvent::Abort(aborted), HttpEvent::Request(next)] = &events[..] else {
            panic!("expected Abort and Request, got {events:?}");
        };
        assert_eq!(*aborted, sent.exchange);
        assert!(next.exchange > sent.exchange);
        assert_eq!(
            (next.method, &next.body, next.purpose, next.carries),
            (sent.method, &sent.body, sent.purpose, sent.carries)
        );
        next.clone()
    }

    /// Answers exchange `ex` with a redirect that is not followed: the
    /// failure of the request it carried.
    fn refused(
        &mut self,
        sent: &HttpRequest,
        status: u16,
        location: Option<&str>,
    ) -> RedirectError {
        let headers: Vec<(&str, &str)> = location.map(|l| ("Location", l)).into_iter().collect();
        self.head(sent.exchange, status, &headers);
        let events = actions(self.events());
        match &events[..] {
            [HttpEvent::Abort(a), HttpEvent::Fail {
                id,
                failure: RequestFailure::Redirect(e),
            }] => {
                assert_eq!((*a, Some(*id)), (sent.exchange, sent.carries));
                e.clone()
            }
            other => panic!("expected Abort and a redirect failure, got {other:?}"),
        }
    }
}

#[test]
fn a_307_to_the_slashed_path_moves_the_endpoint_for_everything_after() {
    for status in [307, 308] {
        let mut h = Harness::new();
        h.request(0, "initialize");
        let init = h.one();
        let moved = h.redirect(&init, status, "/mcp/");
        assert_eq!(moved.url.to_string(), "http://127.0.0.1:3001/mcp/");
        assert_eq!(moved.headers, init.headers);
        // Late reports about the redirected exchange are ignored.
        h.body(init.exchange, "<html>moved</html>");
        h.end(init.exchange);
        assert_eq!(h.events(), []);
        h.head(moved.exchange, 200, &[JSON, ("Mcp-Session-Id", "s-1")]);
        let events = h.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, HttpEvent::Note(n) if n.contains("moved"))),
            "{events:?}"
        );
        h.body(moved.exchange, result(0));
        h.end(moved.exchange);
        assert_eq!(h.delivered, [result(0)]);
        h.t.request_done(0);
        assert_eq!(h.t.url().to_string(), "http://127.0.0.1:3001/mcp/");
        h.notify("notifications/initialized");
        h.t.initialized(h.now, V);
        // The listener waits for notifications/initialized to be accepted.
        let confirm = h.one();
        h.head(confirm.exchange, 202, &[]);
        let sent = [confirm, h.one()];
        for r in &sent {
            assert_eq!(r.url.path(), "/mcp/", "{r:?}");
            assert_eq!(r.header("Mcp-Session-Id"), Some("s-1"));
        }
        assert_eq!(sent[1].purpose, ExchangePurpose::Listen);
        h.request(1, "tools/list");
        assert_eq!(h.one().url.path(), "/mcp/");
        h.t.begin_close(h.now);
        let delete = actions(h.events())
            .into_iter()
            .find_map(|e| match e {
                HttpEvent::Request(r) => Some(r),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            (delete.method, delete.url.path()),
            (HttpMethod::Delete, "/mcp/")
        );
    }
}

#[test]
fn the_listener_and_the_delete_follow_redirects_too() {
    let mut h = Harness::new();
    let listener = h.handshake();
    // fetch follows 301/302/303 for a GET.
    let again = h.redirect(&listener, 302, "/listen");
    assert_eq!(again.url.path(), "/listen");
    assert_eq!(again.header("Mcp-Session-Id"), Some("sess-1"));
    assert_eq!(again.header("Accept"), Some("text/event-stream"));
    h.head(again.exchange, 200, &[SSE]);
    h.body(
        again.exchange,
        ev(Some("1"), &note("notifications/tools/list_changed")),
    );
    assert_eq!(
        h.delivered.last().unwrap(),
        &note("notifications/tools/list_changed")
    );
    // The GET's answer moved the endpoint.
    assert_eq!(h.t.url().path(), "/listen");
    h.t.begin_close(h.now);
    let delete = actions(h.events())
        .into_iter()
        .find_map(|e| match e {
            HttpEvent::Request(r) => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!(delete.url.path(), "/listen");
    let delete = h.redirect(&delete, 307, "/mcp");
    assert_eq!(delete.method, HttpMethod::Delete);
    h.head(delete.exchange, 204, &[]);
    assert_eq!(
        h.events(),
        [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
    );
}

#[test]
fn a_303_on_a_post_fails_naming_the_location_and_initialize_can_be_sent_again() {
    for status in [301, 302, 303] {
        let mut h = Harness::new();
        h.request(0, "initialize");
        let init = h.one();
        let e = h.refused(&init, status, Some("/mcp/"));
        let RedirectError::MethodChange {
            location, method, ..
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!((location.path(), *method), ("/mcp/", HttpMethod::Post));
        let m = e.to_string();
        assert!(
            m.contains("http://127.0.0.1:3001/mcp/") && m.contains(&format!("HTTP {status}")),
            "{m}"
        );
        // The endpoint did not move; the next request is a new initialize.
        assert_eq!(h.t.url().path(), "/mcp");
        h.request(1, "initialize");
        assert_eq!(h.one().url.path(), "/mcp");
    }
    // A DELETE is not turned into a GET either: the close just finishes.
    let mut h = Harness::new();
    h.handshake();
    h.t.begin_close(h.now);
    let delete = actions(h.events())
        .into_iter()
        .find_map(|e| match e {
            HttpEvent::Request(r) => Some(r),
            _ => None,
        })
        .unwrap();
    h.head(delete.exchange, 303, &[("Location", "/x")]);
    let events = h.events();
    assert_eq!(events.last(), Some(&HttpEvent::Finished), "{events:?}");
}

#[test]
fn five_hops_are_followed_a_sixth_or_a_loop_is_an_error() {
    let mut h = Harness::new();
    h.request(0, "initialize");
    let mut sent = h.one();
    for n in 1..=5 {
        sent = h.redirect(&sent, 307, &format!("/hop/{n}"));
    }
    let e = h.refused(&sent, 307, Some("/hop/6"));
    assert!(
        matches!(e, RedirectError::TooMany { limit: 5, .. }),
        "{e:?}"
    );

    let mut h = Harness::new();
    let listener = h.handshake();
    h.request(1, "tools/list");
    let list = h.one();
    let there = h.redirect(&list, 308, "/a");
    let e = h.refused(&there, 308, Some("/mcp"));
    assert!(matches!(e, RedirectError::Loop { .. }), "{e:?}");
    assert!(e.to_string().contains("redirect loop"), "{e}");
    // A listener that meets an unfollowable redirect gives up (the same GET
    // would meet it again), with a diagnostic.
    h.head(listener.exchange, 307, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(listener.exchange));
    assert!(
        matches!(&events[1], HttpEvent::Diagnostic(d) if d.contains("without a Location")),
        "{events:?}"
    );
    assert_eq!(h.t.listener.state, ListenState::GaveUp);
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn a_redirect_without_or_with_an_unusable_location_fails_its_request() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/list");
    let r = h.one();
    let e = h.refused(&r, 307, None);
    assert!(
        matches!(e, RedirectError::NoLocation { status: 307, .. }),
        "{e:?}"
    );
    h.request(2, "tools/list");
    let r = h.one();
    let e = h.refused(&r, 307, Some("gopher://x/"));
    assert!(matches!(e, RedirectError::BadLocation { .. }), "{e:?}");
    // The session goes on.
    h.request(3, "ping");
    assert_eq!(h.one().header("Mcp-Session-Id"), Some("sess-1"));
}

#[test]
fn another_origin_is_refused_by_default_naming_both_urls() {
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    let e = h.refused(&init, 307, Some("http://localhost:3001/mcp/"));
    assert!(matches!(e, RedirectError::CrossOrigin { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains("http://127.0.0.1:3001/mcp") && m.contains("http://localhost:3001/mcp/"),
        "{m}"
    );
}

#[test]
fn allowed_cross_origin_redirects_leave_credentials_and_session_behind() {
    let config = HttpConfig {
        allow_cross_origin_redirects: true,
        headers: vec![
            ("Authorization".into(), "Bearer configured".into()),
            ("X-Api-Team".into(), "blue".into()),
        ],
        ..base()
    };
    // The session issued at home does not follow a request elsewhere, and
    // that origin's 404 is not taken for the end of the session.
    let mut h = Harness::with(config.clone());
    h.handshake();
    h.request(1, "tools/list");
    let list = h.one();
    assert_eq!(list.header("Authorization"), Some("Bearer configured"));
    let away = h.redirect(&list, 307, "http://127.0.0.1:4001/mcp");
    assert_eq!(away.header("Authorization"), None);
    assert_eq!(away.header("Mcp-Session-Id"), None);
    assert_eq!(away.header("X-Api-Team"), Some("blue"));
    h.head(away.exchange, 404, &[]);
    h.end(away.exchange);
    let events = actions(h.events());
    assert!(
        matches!(
            &events[..],
            [HttpEvent::Fail {
                id: 1,
                failure: RequestFailure::Http { status: 404, .. }
            }]
        ),
        "{events:?}"
    );
    h.request(2, "ping");
    assert_eq!(h.one().header("Mcp-Session-Id"), Some("sess-1"));

    // The initialize moved away: the other origin's session is its own, and
    // the bearer set for home (and the configured one) never goes there.
    let mut h = Harness::with(config);
    h.t.enable_auth();
    h.t.set_authorization(Some("Bearer token-for-home".into()));
    h.request(0, "initialize");
    let init = h.one();
    assert_eq!(init.header("Authorization"), Some("Bearer token-for-home"));
    let away = h.redirect(&init, 308, "http://[::1]:4001/mcp/");
    assert_eq!(away.header("Authorization"), None);
    h.answer_json_with_session(away.exchange, 0, "s-away");
    h.t.request_done(0);
    assert_eq!(h.t.url().to_string(), "http://[::1]:4001/mcp/");
    h.notify("notifications/initialized");
    h.t.initialized(h.now, V);
    let confirm = h.one();
    h.head(confirm.exchange, 202, &[]);
    let sent = [confirm, h.one()];
    for r in &sent {
        assert_eq!(r.url.to_string(), "http://[::1]:4001/mcp/");
        assert_eq!(r.header("Mcp-Session-Id"), Some("s-away"));
        assert_eq!(r.header("Authorization"), None, "{r:?}");
        assert_eq!(r.header("X-Api-Team"), Some("blue"));
    }
    // A bearer obtained for the new endpoint is sent there.
    h.t.set_authorization(Some("Bearer token-for-away".into()));
    h.request(1, "ping");
    assert_eq!(
        h.one().header("Authorization"),
        Some("Bearer token-for-away")
    );
}

#[test]
fn a_cancelled_request_aborts_its_redirected_exchange_once() {
    let mut h = Harness::new();
    h.handshake();
    let delivered = h.delivered.len();
    h.request(1, "tools/call");
    let call = h.one();
    let moved = h.redirect(&call, 307, "/mcp/");
    h.t.request_done(1);
    assert_eq!(h.events(), [HttpEvent::Abort(moved.exchange)]);
    h.head(moved.exchange, 200, &[JSON]);
    h.body(moved.exchange, result(1));
    h.end(moved.exchange);
    assert_eq!(h.events(), []);
    assert_eq!(h.delivered.len(), delivered);
    // Nothing succeeded there: the endpoint stays.
    assert_eq!(h.t.url().path(), "/mcp");
}

// ---- DPoP (RFC 9449) -------------------------------------------------------

fn proof_claims(r: &HttpRequest) -> serde_json::Value {
    use base64::Engine as _;
    let proof = r.header("DPoP").expect("a DPoP proof");
    let part = proof.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A transport whose token is DPoP-bound.
fn dpop_harness() -> (Harness, crate::exchange::dpop::DpopKey) {
    use crate::exchange::dpop::{DpopKey, WallClock};
    let mut h = Harness::new();
    h.t.enable_auth();
    let key = DpopKey::generate().unwrap();
    h.t.set_authorization(Some("DPoP tok".into()));
    h.t.set_dpop(Some(DpopBinding {
        key: key.clone(),
        clock: WallClock::anchor(
            h.now,
            std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        ),
        access_token: "tok".into(),
    }));
    (h, key)
}

#[test]
fn dpop_bound_token_sends_a_fresh_proof_on_every_request() {
    let (mut h, _key) = dpop_harness();
    h.advance(ms(2000));
    let sent = h.initialize(0, Some("sess-1"));
    let mut jtis = Vec::new();
    for r in &sent {
        assert_eq!(r.header("Authorization"), Some("DPoP tok"));
        let c = proof_claims(r);
        assert_eq!(c["htm"], r.method.as_str());
        assert_eq!(c["htu"], URL);
        assert_eq!(c["iat"], 1_700_000_002u64, "dated from the calls' now");
        assert_eq!(
            c["ath"],
            crate::auth::pkce_challenge("tok"),
            "ath = base64url(SHA-256(token))"
        );
        jtis.push(c["jti"].as_str().unwrap().to_owned());
    }
    jtis.dedup();
    assert_eq!(jtis.len(), sent.len(), "no proof is reused");
}

#[test]
fn dpop_nonce_from_the_resource_is_retried_once_then_authorization_runs() {
    let (mut h, key) = dpop_harness();
    h.request(0, "initialize");
    let first = h.one();
    assert!(proof_claims(&first).get("nonce").is_none());
    let challenge = [
        ("WWW-Authenticate", r#"DPoP error="use_dpop_nonce""#),
        ("DPoP-Nonce", "rs-1"),
    ];
    h.head(first.exchange, 401, &challenge);
    let events = actions(h.events());
    let [HttpEvent::Abort(a), HttpEvent::Request(again)] = &events[..] else {
        panic!("expected the request again, got {events:?}");
    };
    assert_eq!(*a, first.exchange);
    assert_eq!(again.body, first.body);
    assert_eq!(proof_claims(again)["nonce"], "rs-1");
    assert_eq!(
        key.nonce_for(&HttpUrl::parse(URL).unwrap()).as_deref(),
        Some("rs-1")
    );
    // The same challenge to a proof that carried the nonce: no loop, the
    // authorization takes over.
    h.head(again.exchange, 401, &challenge);
    assert!(h.events().iter().any(|e| matches!(
        e,
        HttpEvent::AuthRequired {
            request: Some(0),
            ..
        }
    )));
}

#[test]
fn dpop_nonce_without_a_binding_or_a_challenge_changes_nothing() {
    // Bearer token: a DPoP-Nonce means nothing.
    let mut h = Harness::new();
    h.t.enable_auth();
    h.t.set_authorization(Some("Bearer t".into()));
    h.request(0, "initialize");
    let first = h.one();
    assert_eq!(first.header("DPoP"), None);
    h.head(
        first.exchange,
        401,
        &[
            ("WWW-Authenticate", r#"DPoP error="use_dpop_nonce""#),
            ("DPoP-Nonce", "n"),
        ],
    );
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, HttpEvent::AuthRequired { .. })));
    // Bound, a nonce on a plain 401 (not use_dpop_nonce): remembered, no
    // retry.
    let (mut h, key) = dpop_harness();
    h.request(0, "initialize");
    let first = h.one();
    h.head(
        first.exchange,
        401,
        &[("WWW-Authenticate", "DPoP"), ("DPoP-Nonce", "n2")],
    );
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, HttpEvent::AuthRequired { .. })));
    assert_eq!(
        key.nonce_for(&HttpUrl::parse(URL).unwrap()).as_deref(),
        Some("n2")
    );
}
