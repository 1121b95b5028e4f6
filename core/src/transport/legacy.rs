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

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use super::http::is_initialized_notification;
use super::{
    ExchangeId, ExchangePurpose, HttpConfig, HttpMethod, HttpRequest, HttpUrl, RequestFailure,
    ResponseHead,
};
use crate::codec::glimpse::Glimpse;
use crate::codec::preview;
use crate::codec::sse::{SseConfig, SseDecoder, SseEnd, SseEvent, SseItem};
use crate::exchange::redirect::{is_credential, Redirects};
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

    /// One outbound JSON-RPC message; held (in order, bounded) until the
    /// `endpoint` event arrived, then POSTed to the endpoint. Once
    /// `notifications/initialized` is POSTed, later messages are held
    /// until the server has accepted it (its 2xx head). Beyond the bound a
    /// request fails and anything else is dropped with a diagnostic.
    /// Ignored once the transport failed or closed.
    pub fn send(&mut self, _now: Instant, message: Vec<u8>, kind: SendKind) {
        if self.phase != Phase::Running {
            return;
        }
        if self.endpoint.is_some() && self.confirming.is_none() {
            self.dispatch(message, kind);
            return;
        }
        if self.held.len() >= MAX_HELD_MESSAGES
            || self.held_bytes.saturating_add(message.len()) > MAX_HELD_BYTES
        {
            let waiting = if self.endpoint.is_none() {
                "the server has not sent its `endpoint` event yet"
            } else {
                "the server has not accepted notifications/initialized yet"
            };
            let why = format!(
                "{waiting} and {} messages ({} bytes) already wait for it \
                 (limits: {MAX_HELD_MESSAGES} messages, {MAX_HELD_BYTES} bytes)",
                self.held.len(),
                self.held_bytes
            );
            self.refuse(&kind, why);
            return;
        }
        self.held_bytes += message.len();
        self.held.push_back(Held { message, kind });
    }

    /// The head of exchange `ex` arrived.
    pub fn handle_head(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        head: &ResponseHead,
        _deliver: &mut dyn FnMut(&[u8]),
    ) {
        if self.drain_settled(ex) {
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            if !matches!(self.stream, Stream::Opening) {
                return;
            }
            if let Some(mut follow) = self.stream_follow.take() {
                let next = ExchangeId(self.next_exchange);
                let allow = self.config.allow_cross_origin_redirects;
                match follow.follow(head, allow, next) {
                    Some(Ok(request)) => {
                        self.events.push_back(LegacyEvent::Abort(ex));
                        self.stream_exchange = self.next_exchange();
                        self.stream_follow = Some(follow);
                        self.events.push_back(LegacyEvent::Request(request));
                        return;
                    }
                    Some(Err(e)) => return self.fatal(format!("the SSE stream: {e}")),
                    None if follow.hops() > 0 && head.is_success() => {
                        self.url = follow.url().clone();
                    }
                    None => {}
                }
            }
            let media_type = head.media_type();
            if head.is_success() && media_type.as_deref() == Some("text/event-stream") {
                self.stream = Stream::Open;
                return;
            }
            let mut refusal = Refusal::new(head);
            if head.is_success() {
                refusal.hints.insert(
                    0,
                    format!(
                        "expected Content-Type text/event-stream, got {}",
                        media_type.map_or_else(
                            || String::from("none"),
                            |m| preview(m.as_bytes(), QUOTE_BYTES)
                        )
                    ),
                );
            }
            self.stream = Stream::Refused(refusal);
        } else if let Some(post) = self.posts.get_mut(&ex) {
            if let Some(mut follow) = post.follow.take() {
                let next = ExchangeId(self.next_exchange);
                let allow = self.config.allow_cross_origin_redirects;
                match follow.follow(head, allow, next) {
                    Some(Ok(request)) => {
                        let Some(mut post) = self.posts.remove(&ex) else {
                            return;
                        };
                        self.events.push_back(LegacyEvent::Abort(ex));
                        let next = self.next_exchange();
                        post.follow = Some(follow);
                        self.posts.insert(next, post);
                        if let Some(c) = self.confirming.as_mut() {
                            if c.exchange == ex {
                                c.exchange = next;
                            }
                        }
                        self.events.push_back(LegacyEvent::Request(request));
                        return;
                    }
                    Some(Err(e)) => {
                        if let Some(post) = self.posts.remove(&ex) {
                            self.events.push_back(LegacyEvent::Abort(ex));
                            self.post_failed(ex, post, RequestFailure::Redirect(e));
                        }
                        return;
                    }
                    None if follow.hops() > 0 && head.is_success() => {
                        // Later messages go where this one was taken.
                        self.endpoint = Some(follow.url().clone());
                    }
                    None => {}
                }
            }
            let Some(post) = self.posts.get_mut(&ex) else {
                return;
            };
            if matches!(post.answer, Answer::Waiting) {
                post.answer = if head.is_success() {
                    Answer::Draining(0)
                } else {
                    Answer::Refused(Refusal::new(head))
                };
                if head.is_success() && self.is_confirming(ex) {
                    // Accepted: what waited for it may go now.
                    self.confirming = None;
                    self.flush();
                }
            }
        }
    }

    /// Body bytes of exchange `ex`; each `message` event of the stream goes
    /// to `deliver`.
    pub fn handle_body(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        data: &[u8],
        deliver: &mut dyn FnMut(&[u8]),
    ) {
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            match &mut self.stream {
                Stream::Open => {
                    // The decoder is moved out while it calls back into self.
                    let mut decoder = std::mem::take(&mut self.decoder);
                    decoder.feed(data, |item| self.on_item(item, deliver));
                    self.decoder = decoder;
                }
                Stream::Refused(refusal) => {
                    if refusal.push(data) {
                        let message = refusal.message();
                        self.fatal(message);
                    }
                }
                Stream::Opening | Stream::Gone => {}
            }
            return;
        }
        let Some(post) = self.posts.get_mut(&ex) else {
            return;
        };
        match &mut post.answer {
            Answer::Waiting => {}
            Answer::Draining(seen) => {
                *seen = seen.saturating_add(data.len());
                if *seen > self.config.max_body {
                    let limit = self.config.max_body;
                    self.posts.remove(&ex);
                    self.events.push_back(LegacyEvent::Abort(ex));
                    self.events.push_back(LegacyEvent::Diagnostic(format!(
                        "the answer to POST {ex} exceeds {limit} bytes; stopped reading it"
                    )));
                }
            }
            Answer::Refused(refusal) => {
                if refusal.push(data) {
                    let failure = http_failure(refusal);
                    if let Some(post) = self.posts.remove(&ex) {
                        self.events.push_back(LegacyEvent::Abort(ex));
                        self.post_failed(ex, post, failure);
                    }
                }
            }
        }
    }

    /// Exchange `ex` ended normally.
    pub fn handle_end(&mut self, _now: Instant, ex: ExchangeId, _deliver: &mut dyn FnMut(&[u8])) {
        if self.drain_settled(ex) {
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            let message = match std::mem::replace(&mut self.stream, Stream::Gone) {
                Stream::Open => {
                    let mut message = if self.endpoint.is_some() {
                        String::from("SSE stream closed by the server")
                    } else {
                        String::from(
                            "SSE stream closed by the server before it sent an `endpoint` event",
                        )
                    };
                    if self.decoder.finish() == SseEnd::IncompleteEvent {
                        message.push_str(" (an incomplete event was discarded)");
                    }
                    message
                }
                Stream::Refused(refusal) => refusal.message(),
                Stream::Opening => String::from("SSE stream ended without a response"),
                Stream::Gone => return,
            };
            self.fatal(message);
            return;
        }
        let Some(post) = self.posts.remove(&ex) else {
            return;
        };
        match post.answer {
            Answer::Draining(_) => {}
            Answer::Waiting => {
                let failure = RequestFailure::Other(String::from(
                    "the server closed the connection without an answer",
                ));
                self.post_failed(ex, post, failure);
            }
            Answer::Refused(ref refusal) => {
                let failure = http_failure(refusal);
                self.post_failed(ex, post, failure);
            }
        }
    }

    /// Exchange `ex` failed (connection refused, reset, bad framing…).
    pub fn handle_failed(
        &mut self,
        _now: Instant,
        ex: ExchangeId,
        error: &str,
        _deliver: &mut dyn FnMut(&[u8]),
    ) {
        if self.drain_settled(ex) {
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        if ex == self.stream_exchange {
            let message = match std::mem::replace(&mut self.stream, Stream::Gone) {
                Stream::Open if self.endpoint.is_none() => {
                    format!("{error} (the server sent no `endpoint` event before)")
                }
                Stream::Open | Stream::Opening => error.to_string(),
                Stream::Refused(refusal) => refusal.message(),
                Stream::Gone => return,
            };
            self.fatal(message);
            return;
        }
        let Some(post) = self.posts.remove(&ex) else {
            return;
        };
        let failure = match &post.answer {
            Answer::Refused(refusal) => http_failure(refusal),
            Answer::Waiting | Answer::Draining(_) => RequestFailure::Other(error.to_string()),
        };
        self.post_failed(ex, post, failure);
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

    /// Our headers, then the configured ones (except those we set, and
    /// credentials when `to` is not on the configured URL's origin).
    fn headers(&self, to: &HttpUrl, ours: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = ours
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let home = to.same_origin(&self.origin);
        headers.extend(
            self.config
                .headers
                .iter()
                .filter(|(n, _)| !ours.iter().any(|(o, _)| o.eq_ignore_ascii_case(n)))
                .filter(|(n, _)| home || !is_credential(n))
                .cloned(),
        );
        headers
    }

    /// POSTs one message to the endpoint; `notifications/initialized`
    /// becomes what later messages wait for.
    fn dispatch(&mut self, message: Vec<u8>, kind: SendKind) {
        if !is_initialized_notification(&message, &kind) {
            self.post(message, kind);
            return;
        }
        if let Some(exchange) = self.post(message.clone(), kind) {
            self.confirming = Some(Confirming {
                exchange,
                message,
                retried: false,
            });
        }
    }

    /// Sends the held messages, in order, as long as nothing is being
    /// confirmed.
    fn flush(&mut self) {
        while self.confirming.is_none() && self.phase == Phase::Running {
            let Some(held) = self.held.pop_front() else {
                break;
            };
            self.held_bytes -= held.message.len();
            self.dispatch(held.message, held.kind);
        }
    }

    fn is_confirming(&self, ex: ExchangeId) -> bool {
        self.confirming.as_ref().is_some_and(|c| c.exchange == ex)
    }

    /// The POST of `notifications/initialized` ended without a 2xx head:
    /// refused — the session cannot start — or failed before its head:
    /// sent again once, then given up.
    fn confirming_failed(&mut self, refused: bool, failure: RequestFailure) {
        let retried = self.confirming.as_mut().map(|c| &mut c.retried);
        let note = match crate::transport::initialized_failed(refused, retried, &failure) {
            None => return,
            Some(Err(fatal)) => return self.fatal(fatal),
            Some(Ok(note)) => note,
        };
        let Some(message) = self.confirming.as_ref().map(|c| c.message.clone()) else {
            return;
        };
        self.events.push_back(LegacyEvent::Diagnostic(note));
        match self.post(message, SendKind::Notification) {
            Some(ex) => {
                if let Some(c) = self.confirming.as_mut() {
                    c.exchange = ex;
                }
            }
            None => self.confirming = None,
        }
    }

    /// POSTs one message to the endpoint (if known): its exchange.
    fn post(&mut self, message: Vec<u8>, kind: SendKind) -> Option<ExchangeId> {
        let url = self.endpoint.clone()?;
        let exchange = self.next_exchange();
        let purpose = match kind {
            SendKind::Request { .. } => ExchangePurpose::Request,
            SendKind::Notification | SendKind::Response { .. } => ExchangePurpose::Notify,
        };
        let headers = self.headers(
            &url,
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
        );
        let request = HttpRequest {
            exchange,
            method: HttpMethod::Post,
            url,
            headers,
            body: message,
            purpose,
            // The answer comes on the event stream, not on this POST.
            carries: None,
        };
        self.posts.insert(
            exchange,
            Post {
                kind,
                done: false,
                answer: Answer::Waiting,
                follow: Some(Redirects::new(request.clone())),
            },
        );
        self.events.push_back(LegacyEvent::Request(request));
        Some(exchange)
    }

    /// A message that cannot be sent: fails a request, reports the rest.
    fn refuse(&mut self, kind: &SendKind, why: String) {
        let event = match kind {
            SendKind::Request { id } => LegacyEvent::Fail {
                id: *id,
                failure: RequestFailure::Other(format!("request not sent: {why}")),
            },
            SendKind::Notification => {
                LegacyEvent::Diagnostic(format!("notification not sent: {why}"))
            }
            SendKind::Response { id } => LegacyEvent::Diagnostic(format!(
                "answer to the server's request {id} not sent: {why}"
            )),
        };
        self.events.push_back(event);
    }

    /// The POST of `post` (exchange `ex`) failed with `failure`.
    fn post_failed(&mut self, ex: ExchangeId, post: Post, failure: RequestFailure) {
        if self.is_confirming(ex) {
            let refused = matches!(post.answer, Answer::Refused(_));
            return self.confirming_failed(refused, failure);
        }
        let event = match post.kind {
            SendKind::Request { id } if !post.done => LegacyEvent::Fail { id, failure },
            SendKind::Request { .. } => return,
            SendKind::Notification => {
                LegacyEvent::Diagnostic(format!("a notification POST failed: {failure}"))
            }
            SendKind::Response { id } => LegacyEvent::Diagnostic(format!(
                "the POST answering the server's request {id} failed: {failure}"
            )),
        };
        self.events.push_back(event);
    }

    /// One item decoded from the stream.
    fn on_item(&mut self, item: SseItem, deliver: &mut dyn FnMut(&[u8])) {
        if self.phase != Phase::Running {
            return;
        }
        match item {
            SseItem::Event(SseEvent { event, data, .. }) => match event.as_str() {
                "message" => {
                    if !data.trim().is_empty() {
                        deliver(data.as_bytes());
                    }
                }
                "endpoint" => self.on_endpoint(&data),
                other => self.events.push_back(LegacyEvent::Diagnostic(format!(
                    "ignored an SSE event of type `{}` ({} bytes of data)",
                    preview(other.as_bytes(), QUOTE_BYTES),
                    data.len()
                ))),
            },
            SseItem::Error(e) => self
                .events
                .push_back(LegacyEvent::Diagnostic(format!("SSE stream: {e}"))),
            SseItem::Skipped { size, glimpse } => {
                let failure = RequestFailure::TooLarge {
                    what: "max_event",
                    limit: self.config.max_event,
                    size,
                };
                self.events
                    .push_back(LegacyEvent::Skipped { glimpse, failure });
            }
        }
    }

    /// An `endpoint` event: the first one says where to POST.
    fn on_endpoint(&mut self, data: &str) {
        let reference = data.trim();
        if let Some(endpoint) = &self.endpoint {
            let message = format!(
                "ignored a second `endpoint` event (`{}`); messages still go to {endpoint}",
                preview(reference.as_bytes(), QUOTE_BYTES)
            );
            self.events.push_back(LegacyEvent::Diagnostic(message));
            return;
        }
        if reference.is_empty() {
            self.fatal(String::from("the server's `endpoint` event names no URI"));
            return;
        }
        let endpoint = match self.url.join(reference) {
            Ok(endpoint) => endpoint,
            Err(e) => {
                self.fatal(format!("the server's `endpoint` event is not usable: {e}"));
                return;
            }
        };
        if !endpoint.same_origin(&self.url) {
            let message = format!(
                "refused the server's endpoint {endpoint}: it is not on the origin of the SSE \
                 stream {} (scheme, host and port must match)",
                self.url
            );
            self.fatal(message);
            return;
        }
        self.endpoint = Some(endpoint);
        self.flush();
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
