//! Legacy HTTP+SSE transport (MCP 2024-11-05): one long GET event stream
//! brings the server's messages; every client message is POSTed to the URI
//! named by the stream's first `endpoint` event.
//!
//! ```text
//!   new() ──► GET url  (Accept: text/event-stream)                  [Listen]
//!     head 2xx text/event-stream ──► SSE decoder
//!       event: endpoint  data: /message?sessionId=…  ──► url.join(data)
//!             other origin ─► Fatal · a second endpoint ─► Diagnostic
//!             held messages ──► POST endpoint, in order     [Request | Notify]
//!       event: message   data: {json}  ──► deliver(json)   (empty data skipped)
//!       any other event type ──► Diagnostic
//!     head not 2xx / not SSE ──► bounded body preview ──► Fatal "HTTP <status>: …"
//!     stream ends or fails ──► Fatal (this era has no resumption)
//!   POST answer 2xx (202) ──► body drained · not 2xx ──► Fail{id} / Diagnostic
//!   POST notifications/initialized ──► every later message held until its
//!       2xx head (no request may overtake it) · refused ─► Fatal ·
//!       failed before the head ─► sent again once, then Fatal
//!   begin_close() ──► Abort(stream), Abort(each POST) ──► Finished
//!   any exchange: 3xx ──► followed as fetch does (crate::exchange::redirect);
//!     the stream's final URL is the base of `endpoint`, a POST's the endpoint;
//!     not followed ──► Fatal (stream) · Fail{id} / Diagnostic (POST)
//! ```
//!
//! `LegacySse` has the same driving interface as the Streamable HTTP
//! transport: the driver performs each `LegacyEvent::Request` and reports
//! its response with `handle_head`, `handle_body`, `handle_end` or
//! `handle_failed`. After every call, drain `poll_output` until it returns
//! `None`. The transport keeps no timer of its own (request deadlines are
//! the engine's), so `poll_timeout` is always `None`.
//!
//! Peer bytes never panic it and every buffer is bounded: messages held
//! before the endpoint is known or while `notifications/initialized` is
//! not yet accepted (`MAX_HELD_MESSAGES`, `MAX_HELD_BYTES`),
//! one SSE event ([`HttpConfig::max_event`]), error bodies quoted in
//! messages (`PREVIEW_BYTES`) and drained `2xx` POST bodies
//! ([`HttpConfig::max_body`]).

// The `Connection` does not drive this transport yet; remove this once it does.

// The state, the stream's opening, timers and the close are here; the
// exchanges' inputs and the sending have a file each.
mod inbound;
mod outbound;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use super::{
    ExchangeId, ExchangePurpose, HttpConfig, HttpMethod, HttpRequest, HttpUrl, RequestFailure,
    ResponseHead,
};
use crate::codec::glimpse::Glimpse;
use crate::codec::preview;
use crate::codec::sse::{SseConfig, SseDecoder};
use crate::exchange::redirect::Redirects;
use crate::rpc::SendKind;

/// Most messages held while the server's `endpoint` event has not arrived.
const MAX_HELD_MESSAGES: usize = 64;
/// Most bytes held while the server's `endpoint` event has not arrived.
const MAX_HELD_BYTES: usize = 8 * 1024 * 1024;
/// Body bytes of an error answer kept to quote in its message.
const PREVIEW_BYTES: usize = 512;
/// Bytes of a header value or event data quoted in a message.
const QUOTE_BYTES: usize = 200;

/// What the legacy transport asks of the driver, from `LegacySse::poll_output`
/// (mirrors the Streamable HTTP transport's outputs, minus what legacy cannot
/// do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LegacyEvent {
    /// The driver must perform this exchange and report its response.
    Request(HttpRequest),
    /// The driver must stop this exchange (close its connection) and report
    /// nothing more about it.
    Abort(ExchangeId),
    /// Our request `id` failed at the transport level: the `Connection`
    /// completes it with this failure.
    Fail {
        /// Our request id.
        id: u64,
        /// Why.
        failure: RequestFailure,
    },
    /// Something worth reporting that changes nothing (ignored event, failed
    /// notification POST, dropped oversized event…).
    Diagnostic(String),
    /// An event was dropped for its size (after a `Diagnostic`): the
    /// `Connection` fails the request it answered, or answers the request
    /// it was, when `glimpse` shows which.
    Skipped {
        /// What the ends of the event's data showed.
        glimpse: Glimpse,
        /// A [`RequestFailure::TooLarge`].
        failure: RequestFailure,
    },
    /// The transport is unusable; every exchange has been aborted (the
    /// `Abort`s come first). The `Connection` closes everything with this
    /// message. Nothing but `Finished` follows.
    Fatal(String),
    /// [`LegacySse::begin_close`] completed. Nothing follows.
    Finished,
}

/// Lifecycle of the whole transport.
/// How long a close waits for the notifications already sent (legacy
/// HTTP+SSE has no DELETE to wait for).
const CLOSE_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Closing: the notifications and responses already POSTed and not
    /// yet answered (a cancellation among them) are let reach the server,
    /// until then at most; then `Finished`.
    Draining {
        until: Instant,
    },
    /// `Fatal` was emitted; waiting for `begin_close` to say `Finished`.
    Failed,
    /// `Finished` was emitted.
    Closed,
}

/// The GET event stream.
#[derive(Debug)]
enum Stream {
    /// Requested, no head yet.
    Opening,
    /// 2xx `text/event-stream`: bytes go to the decoder.
    Open,
    /// Refused: reading a bounded preview of the body for the message.
    Refused(Refusal),
    /// Ended, failed or aborted.
    Gone,
}

/// One POST in flight.
#[derive(Debug)]
struct Post {
    kind: SendKind,
    /// The engine is done with this request: its failures are ignored.
    done: bool,
    answer: Answer,
    /// The request as sent, until its head arrives (to follow a redirect).
    follow: Option<Redirects>,
}

/// Where a POST's response is.
#[derive(Debug)]
enum Answer {
    /// No head yet.
    Waiting,
    /// 2xx: the body is ignored; counts the bytes seen.
    Draining(usize),
    /// Not 2xx: reading a bounded preview of the body.
    Refused(Refusal),
}

/// The POST of `notifications/initialized`: until the server accepts it
/// (a 2xx head), every later message is held, since POSTs travel on
/// separate connections and a request could reach the server first.
#[derive(Debug)]
struct Confirming {
    exchange: ExchangeId,
    /// The notification, to send again.
    message: Vec<u8>,
    /// Already sent again after a failure.
    retried: bool,
}

/// A message waiting for the endpoint (or for `Confirming`).
#[derive(Debug)]
struct Held {
    message: Vec<u8>,
    kind: SendKind,
}

/// A refused response: status, hints and a bounded body preview, turned
/// into `HTTP <status>: <text>[ (hints)]` once the body ends or the preview
/// is full.
#[derive(Debug)]
struct Refusal {
    status: u16,
    reason: String,
    hints: Vec<String>,
    /// At most `PREVIEW_BYTES + 1` bytes (one more shows it was cut).
    body: Vec<u8>,
}

impl Refusal {
    fn new(head: &ResponseHead) -> Self {
        let mut hints = Vec::new();
        if let Some(challenge) = head.header("www-authenticate") {
            hints.push(format!(
                "WWW-Authenticate: {}",
                preview(challenge, QUOTE_BYTES)
            ));
        }
        if (300..400).contains(&head.status) {
            if let Some(location) = head.header("location") {
                hints.push(format!(
                    "redirect to {} not followed",
                    preview(location, QUOTE_BYTES)
                ));
            }
        }
        Refusal {
            status: head.status,
            reason: preview(head.reason.as_bytes(), QUOTE_BYTES),
            hints,
            body: Vec::new(),
        }
    }

    /// Keeps the start of the body; true once the preview is full (the
    /// rest of the body is not needed).
    fn push(&mut self, data: &[u8]) -> bool {
        let room = (PREVIEW_BYTES + 1).saturating_sub(self.body.len());
        self.body.extend_from_slice(&data[..data.len().min(room)]);
        self.body.len() > PREVIEW_BYTES
    }

    fn message(&self) -> String {
        let body = self.body.trim_ascii();
        let text = if !body.is_empty() {
            preview(body, PREVIEW_BYTES)
        } else if !self.reason.is_empty() {
            self.reason.clone()
        } else {
            String::from("(no body)")
        };
        let mut message = format!("HTTP {}: {text}", self.status);
        if !self.hints.is_empty() {
            message.push_str(" (");
            message.push_str(&self.hints.join("; "));
            message.push(')');
        }
        message
    }
}

/// The legacy HTTP+SSE transport's state (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct LegacySse {
    /// The SSE stream's URL (where a followed redirect led): the base of
    /// the `endpoint` event.
    url: HttpUrl,
    /// The configured URL: configured credential headers go only to its
    /// origin.
    origin: HttpUrl,
    config: HttpConfig,
    next_exchange: u64,
    phase: Phase,
    stream_exchange: ExchangeId,
    stream: Stream,
    /// The stream's GET as sent, until its head arrives.
    stream_follow: Option<Redirects>,
    decoder: SseDecoder,
    endpoint: Option<HttpUrl>,
    held: VecDeque<Held>,
    held_bytes: usize,
    confirming: Option<Confirming>,
    posts: BTreeMap<ExchangeId, Post>,
    events: VecDeque<LegacyEvent>,
}

impl LegacySse {
    /// Opens the event stream right away: emits GET `url` (Accept:
    /// text/event-stream, config headers, purpose Listen). Exchange ids
    /// start at 0.
    pub fn new(now: Instant, url: HttpUrl, config: HttpConfig) -> Self {
        Self::starting_at(now, url, config, ExchangeId(0))
    }

    /// As [`new`](Self::new), numbering exchanges from `first` (so that they
    /// cannot be mistaken for those of a transport used before, e.g. after
    /// falling back from Streamable HTTP).
    pub fn starting_at(_now: Instant, url: HttpUrl, config: HttpConfig, first: ExchangeId) -> Self {
        let decoder = SseDecoder::with_config(SseConfig {
            max_event_size: config.max_event,
        });
        let mut t = LegacySse {
            origin: url.clone(),
            url,
            config,
            next_exchange: first.0,
            phase: Phase::Running,
            stream_exchange: first,
            stream: Stream::Opening,
            stream_follow: None,
            decoder,
            endpoint: None,
            held: VecDeque::new(),
            held_bytes: 0,
            confirming: None,
            posts: BTreeMap::new(),
            events: VecDeque::new(),
        };
        t.stream_exchange = t.next_exchange();
        let headers = t.headers(&t.url, &[("Accept", "text/event-stream")]);
        let request = HttpRequest {
            exchange: t.stream_exchange,
            method: HttpMethod::Get,
            url: t.url.clone(),
            headers,
            body: Vec::new(),
            purpose: ExchangePurpose::Listen,
            carries: None,
        };
        t.stream_follow = Some(Redirects::new(request.clone()));
        t.events.push_back(LegacyEvent::Request(request));
        t
    }

    /// A timer fired: the only one is the end of a close's drain.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Phase::Draining { until } = self.phase {
            if now >= until {
                self.abort_all();
                self.phase = Phase::Closed;
                self.events.push_back(LegacyEvent::Finished);
            }
        }
    }

    /// When to call [`handle_timeout`](Self::handle_timeout).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Draining { until } => Some(until),
            _ => None,
        }
    }

    /// While draining: an answer (its head, its end, a failure) settles
    /// POST `ex`; once none is left the close is done. Whether the phase
    /// was draining (the input is then taken).
    fn drain_settled(&mut self, ex: ExchangeId) -> bool {
        if !matches!(self.phase, Phase::Draining { .. }) {
            return false;
        }
        if self.posts.remove(&ex).is_some() {
            self.events.push_back(LegacyEvent::Abort(ex));
        }
        if self.posts.is_empty() {
            self.phase = Phase::Closed;
            self.events.push_back(LegacyEvent::Finished);
        }
        true
    }

    /// Whether no `notifications/initialized` waits to be accepted: the
    /// Connection reports itself ready only then.
    pub fn settled(&self) -> bool {
        self.confirming.is_none()
    }

    /// Initialization done; nothing changes on the wire for this transport
    /// (2024-11-05 has no protocol version header).
    pub fn initialized(&mut self, _now: Instant, _protocol_version: &str) {}

    /// Our request `id` completed: a late failure of its POST is ignored,
    /// and if it was still held it is not sent at all.
    pub fn request_done(&mut self, id: u64) {
        let before = self.held.len();
        let mut freed = 0;
        self.held.retain(|h| {
            let keep = !matches!(h.kind, SendKind::Request { id: i } if i == id);
            if !keep {
                freed += h.message.len();
            }
            keep
        });
        if self.held.len() != before {
            self.held_bytes -= freed;
        }
        for post in self.posts.values_mut() {
            if matches!(post.kind, SendKind::Request { id: i } if i == id) {
                post.done = true;
            }
        }
    }

    /// Graceful close: aborts the stream and any POSTs in flight, drops
    /// held messages, then `Finished` (once).
    pub fn begin_close(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Closed | Phase::Draining { .. }) {
            return;
        }
        // Notifications and responses sent and not answered yet (the
        // cancellation of a timed-out call) still go to the server.
        let confirming = self.confirming.as_ref().map(|c| c.exchange);
        let sending: Vec<ExchangeId> = self
            .posts
            .iter()
            .filter(|(ex, p)| {
                !matches!(p.kind, SendKind::Request { .. })
                    && matches!(p.answer, Answer::Waiting)
                    && Some(**ex) != confirming
            })
            .map(|(ex, _)| *ex)
            .collect();
        let kept: Vec<(ExchangeId, Post)> = sending
            .iter()
            .filter_map(|ex| self.posts.remove(ex).map(|p| (*ex, p)))
            .collect();
        self.abort_all();
        if self.phase == Phase::Running && !kept.is_empty() {
            self.posts.extend(kept);
            self.phase = Phase::Draining {
                until: now + CLOSE_DRAIN,
            };
            return;
        }
        self.phase = Phase::Closed;
        self.events.push_back(LegacyEvent::Finished);
    }

    /// The next thing for the driver to do, in order.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<LegacyEvent> {
        self.events.pop_front()
    }

    #[cfg_attr(not(test), allow(dead_code))]
    /// Where messages are POSTed, once the server said so.
    pub fn endpoint(&self) -> Option<&HttpUrl> {
        self.endpoint.as_ref()
    }

    fn next_exchange(&mut self) -> ExchangeId {
        let ex = ExchangeId(self.next_exchange);
        self.next_exchange = self.next_exchange.wrapping_add(1);
        ex
    }

    /// Stops every exchange in flight and drops held messages.
    fn abort_all(&mut self) {
        if !matches!(self.stream, Stream::Gone) {
            self.stream = Stream::Gone;
            self.events
                .push_back(LegacyEvent::Abort(self.stream_exchange));
        }
        for ex in std::mem::take(&mut self.posts).into_keys() {
            self.events.push_back(LegacyEvent::Abort(ex));
        }
        self.held.clear();
        self.held_bytes = 0;
        self.confirming = None;
    }

    /// The transport is unusable: abort everything, then `Fatal` (once).
    fn fatal(&mut self, message: String) {
        if self.phase != Phase::Running {
            return;
        }
        self.abort_all();
        self.phase = Phase::Failed;
        self.events.push_back(LegacyEvent::Fatal(message));
    }
}

/// The failure of a request whose POST was refused.
fn http_failure(refusal: &Refusal) -> RequestFailure {
    RequestFailure::Http {
        status: refusal.status,
        message: refusal.message(),
    }
}

#[cfg(test)]
mod tests;
