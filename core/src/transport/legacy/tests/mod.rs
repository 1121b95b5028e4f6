//! Scripted conversations with the legacy transport, in simulated time.

use std::time::Instant;

use super::*;
use crate::codec::glimpse::Glimpse;
use crate::rpc::RequestId;

mod close;
mod endpoint;
mod posts;
mod redirects;
mod robustness;
mod stream;

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
        self.t
            .handle_head(self.now, ex, head, &mut |m: crate::codec::jsonl::Line<
                '_,
            >| {
                d.push(String::from_utf8(m.bytes().to_vec()).unwrap())
            });
    }

    fn body(&mut self, ex: ExchangeId, data: &[u8]) {
        let d = &mut self.delivered;
        self.t
            .handle_body(self.now, ex, data, &mut |m: crate::codec::jsonl::Line<
                '_,
            >| {
                d.push(String::from_utf8(m.bytes().to_vec()).unwrap())
            });
    }

    fn end(&mut self, ex: ExchangeId) {
        let d = &mut self.delivered;
        self.t
            .handle_end(self.now, ex, &mut |m: crate::codec::jsonl::Line<'_>| {
                d.push(String::from_utf8(m.bytes().to_vec()).unwrap())
            });
    }

    fn failed(&mut self, ex: ExchangeId, error: &str) {
        let d = &mut self.delivered;
        self.t
            .handle_failed(self.now, ex, error, &mut |m: crate::codec::jsonl::Line<
                '_,
            >| {
                d.push(String::from_utf8(m.bytes().to_vec()).unwrap())
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
