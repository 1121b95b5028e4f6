//! Scripted conversations with the Streamable HTTP transport, in simulated
//! time, one per rule.

use std::time::{Duration, Instant};

use super::*;
use crate::transport::{ExchangePurpose, HttpMethod, RedirectError, ResponseHead};

mod dpop;
mod redirects;
mod requests;
mod robustness;
mod sessions;
mod streams;

const URL: &str = "http://127.0.0.1:3001/mcp";
const V: &str = "2025-11-25";

/// What the engine gives back for a delivered text: the id of the
/// response it is, if it is one with a non-negative integer id (a batch
/// gives none).
fn answer_of(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    match crate::rpc::parse_message(text) {
        Ok(crate::rpc::Message::Response {
            id: crate::rpc::RequestId::Number(n),
            ..
        }) => u64::try_from(n).ok(),
        _ => None,
    }
}

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
    /// Whether each text delivered by `body` or `end` came with its
    /// buffer (`Line::Owned`).
    owned: Vec<bool>,
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
            owned: Vec::new(),
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
        let mut deliver = |b: crate::codec::jsonl::Line<'_>| {
            d.push(String::from_utf8_lossy(b.bytes()).into_owned());
            answer_of(b.bytes())
        };
        self.t
            .handle_head(self.now, ex, &head(status, headers), &mut deliver);
    }

    fn body(&mut self, ex: ExchangeId, data: impl AsRef<[u8]>) {
        let (d, owned) = (&mut self.delivered, &mut self.owned);
        let mut deliver = |b: crate::codec::jsonl::Line<'_>| {
            owned.push(matches!(b, crate::codec::jsonl::Line::Owned(_)));
            d.push(String::from_utf8_lossy(b.bytes()).into_owned());
            answer_of(b.bytes())
        };
        self.t
            .handle_body(self.now, ex, data.as_ref(), &mut deliver);
    }

    fn end(&mut self, ex: ExchangeId) {
        let (d, owned) = (&mut self.delivered, &mut self.owned);
        let mut deliver = |b: crate::codec::jsonl::Line<'_>| {
            owned.push(matches!(b, crate::codec::jsonl::Line::Owned(_)));
            d.push(String::from_utf8_lossy(b.bytes()).into_owned());
            answer_of(b.bytes())
        };
        self.t.handle_end(self.now, ex, &mut deliver);
    }

    fn failed(&mut self, ex: ExchangeId, error: &str) {
        let d = &mut self.delivered;
        let mut deliver = |b: crate::codec::jsonl::Line<'_>| {
            d.push(String::from_utf8_lossy(b.bytes()).into_owned());
            answer_of(b.bytes())
        };
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
