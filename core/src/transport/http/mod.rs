//! The Streamable HTTP transport (MCP 2025-11-25): one POST per client
//! message, JSON or SSE answers, sessions, resumption, the GET listener,
//! 404 re-initialization, the legacy fallback and DELETE on close.
//!
//! ```text
//!  session:  AwaitInit ─initialize POST─► Initializing ─initialized()─► Ready (confirming)
//!              ▲            │ 400/404/405 on the first one ─► FallbackToLegacy      │
//!              │            notifications/initialized POST alone ─ 2xx head ─► Ready: held
//!              │            messages, resends and the listener go out (no earlier: a
//!              │            request must not overtake it); refused ─► Fatal; failed ─►
//!              │            sent again once, then Fatal
//!              │ reset_session()                                   │
//!            Expired ◄─── SessionExpired ◄── 404 to a request carrying Mcp-Session-Id
//!  close:    begin_close() ─► Abort all ─► DELETE ─(answer | failure | close_timeout)─► Finished
//!
//!  request:  POST ─► application/json ─► deliver at end
//!                └─► text/event-stream ─► deliver each message … the response ─► done
//!                      └ ends first ─(retry)─► GET + Last-Event-ID ─► SSE … (bounded attempts)
//!  listener: GET ─► SSE ─► deliver ─ ends ─(retry)─► GET + Last-Event-ID
//!                └─ fails ─(backoff)─► GET … max_listen_attempts ─► give up;  405 ─► off
//!  any exchange: 3xx ─► the same request again where it points (a new exchange;
//!                 rules in crate::exchange::redirect) ─► … 2xx ─► the endpoint moves there
//!                 └─ not followed ─► its request fails (RequestFailure::Redirect)
//! ```
//!
//! Redirects are followed as fetch follows them (`Starlette` mounts answer
//! `POST /mcp` with `307 Location: /mcp/`): 307 and 308 for every method,
//! 301/302/303 for the GETs only (on a POST they are an error naming the
//! `Location`: fetch would turn it into a GET), at most five hops. When a
//! redirected exchange gets a 2xx answer, its final URL becomes the
//! endpoint: later POSTs, the listener, resumptions and the DELETE go
//! there directly. Another origin only with
//! [`HttpConfig::allow_cross_origin_redirects`]; credentials are bound to
//! their origin: configured credential headers to the configured URL's,
//! the bearer to the endpoint it was set for, the `Mcp-Session-Id` to the
//! endpoint whose answer carried it.
//!
//! The transport speaks in exchanges ([`HttpRequest`] out; head, body
//! chunks, end or failure in) and never reads a clock. Polling order: after
//! every call drain [`StreamableHttp::poll_output`] until `None`, then read
//! [`StreamableHttp::poll_timeout`] and call
//! [`StreamableHttp::handle_timeout`] at that instant (spurious calls are
//! harmless).
//!
//! A request's SSE stream has no timer of its own: the engine's deadline
//! covers the whole exchange, and the [`Connection`](crate::Connection)
//! reports the completion with [`StreamableHttp::request_done`].

// The state, the era, timers and polling are here; the rest by role:
mod auth;
mod bookkeeping;
mod calls;
mod inbound;
mod outbound;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::{ExchangeId, HttpConfig, HttpRequest, HttpUrl, RequestFailure};
use crate::codec::glimpse::Glimpse;
use crate::codec::sse::{SseConfig, SseDecoder};
use crate::exchange::dpop::DpopBinding;
use crate::exchange::redirect::Redirects;
use crate::mcp::methods::notifications;
use crate::rpc::{parse_message, Message, SendKind};

/// Bytes of an error body kept for the failure message (and for spotting a
/// JSON-RPC error response in it); beyond that the exchange is aborted.
const ERROR_BODY_LIMIT: usize = 8 * 1024;
/// Bytes of an error body quoted in a failure message.
const ERROR_TEXT_MAX: usize = 500;
/// Bytes of an authentication header quoted in a failure message.
const HINT_MAX: usize = 300;
/// Messages held while a session is being (re)initialized.
const MAX_HELD: usize = 4096;
/// Sessions that may expire one after the other, without any exchange of
/// theirs succeeding, before the connection is declared unusable (stops a
/// re-initialize loop against a server that rejects every session).
const MAX_CONSECUTIVE_EXPIRIES: u32 = 3;

/// What the transport asks of the [`Connection`](crate::Connection), from
/// [`StreamableHttp::poll_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpEvent {
    /// The driver MUST perform this exchange and report its response with
    /// `handle_head`, `handle_body`, `handle_end` or `handle_failed`.
    Request(HttpRequest),
    /// The driver MUST stop that exchange (drop its connection); no more
    /// inputs for it are expected (late ones are ignored).
    Abort(ExchangeId),
    /// The Connection MUST complete our request `id` with this failure.
    Fail {
        /// The request id.
        id: u64,
        /// Why it failed.
        failure: RequestFailure,
    },
    /// An event of the GET stream was dropped for its size (after a
    /// `Diagnostic` saying so): the Connection fails the request it
    /// answered with `failure`, or answers the request it was, when
    /// `glimpse` shows which.
    Skipped {
        /// What the ends of the event's data showed.
        glimpse: Glimpse,
        /// A [`RequestFailure::TooLarge`].
        failure: RequestFailure,
    },
    /// Log-worthy; no action.
    Diagnostic(String),
    /// Worth a debug line: something the spec allows and the transport
    /// handled (a server without a GET stream); no action.
    Note(String),
    /// The connection is unusable (e.g. the server sent an invalid
    /// `Mcp-Session-Id`): the Connection closes everything with this
    /// message. The transport ignores further input (`begin_close` just
    /// reports [`HttpEvent::Finished`]).
    Fatal(String),
    /// A request carrying the session id got 404: the session is gone. The
    /// Connection MUST call `reset_session()` and send a new `initialize`;
    /// meanwhile every send is held, and the request that met the 404 is
    /// sent again (once) after `initialized()`, once the server accepted
    /// the new session's `notifications/initialized`.
    SessionExpired,
    /// The POST of the first `initialize` got 400, 404 or 405: the server
    /// may speak the legacy HTTP+SSE transport. The Connection switches to
    /// it and sends these messages again, in order (the `initialize` first).
    /// This transport is then unusable.
    FallbackToLegacy {
        /// The messages to send again, as given to `send`.
        resend: Vec<(Vec<u8>, SendKind)>,
    },
    /// `begin_close()` has completed (the DELETE was answered, failed or
    /// timed out, or there was nothing to delete). The last event.
    Finished,
    /// (Only after [`StreamableHttp::enable_auth`].) An exchange got 401,
    /// or 403 with `error="insufficient_scope"`: the transport holds that
    /// message and every later one until the Connection calls
    /// [`StreamableHttp::authorized`] (they are sent again with the new
    /// token) or [`StreamableHttp::authorization_failed`] (they fail).
    AuthRequired {
        /// 401 or 403.
        status: u16,
        /// The `WWW-Authenticate` header values.
        challenges: Vec<String>,
        /// ` (WWW-Authenticate: …)` and ` (Mcp-Auth-Server: …)`, bounded,
        /// as an HTTP failure's message quotes them.
        hints: String,
        /// Our request that met it, if it was one (not a notification,
        /// a response or the listener).
        request: Option<u64>,
    },
}

/// What a queued message waits for.
#[derive(Debug, Clone, Copy)]
enum Waiting {
    /// The `initialize` answer (or a re-initialization): `held`.
    Session,
    /// An authorization: `parked`.
    Authorization,
}

/// Where the session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No `initialize` sent since `new()` / `reset_session()`.
    AwaitInit,
    /// The `initialize` (request `id`) is out; waiting for `initialized()`.
    /// `answered`: its response has been delivered. If it fails (or is
    /// completed unanswered), the phase returns to `AwaitInit` so that the
    /// next request is a new `initialize` (e.g. after a 401 and a login).
    Initializing { id: u64, answered: bool },
    /// Messages flow.
    Ready,
    /// A 404 ended the session; waiting for `reset_session()`.
    Expired,
    /// Closing: the notifications and responses already out (the
    /// cancellation of a timed-out call among them) are let finish, at
    /// most until `until`; then the DELETE (`delete`) or `Finished`.
    Draining { delete: bool, until: Instant },
    /// The DELETE is out (if any); `Finished` at its answer or `until`.
    Closing {
        delete: Option<ExchangeId>,
        until: Instant,
    },
    /// Fatal error or fallback: unusable, `Finished` not yet reported.
    Dead,
    /// `Finished` reported.
    Closed,
}

/// Whom an exchange serves.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// The POST of our request `id`.
    Request(u64),
    /// A GET resuming the stream of our request `id`.
    Resume(u64),
    /// The POST of a notification or response (described for diagnostics).
    Notify(String),
    /// The GET listener.
    Listen,
    /// The DELETE.
    Close,
}

/// What an exchange's body is being read as.
#[derive(Debug)]
enum Body {
    /// No head yet.
    Head,
    /// An `application/json` answer, buffered up to `max_body`.
    Json(Vec<u8>),
    /// A `text/event-stream`, decoded by the owner's decoder.
    Sse,
    /// A non-2xx answer, read (bounded) for the message.
    Error(ErrorBody),
    /// Nothing wanted from it.
    Discard,
}

/// A non-2xx answer being read.
#[derive(Debug)]
struct ErrorBody {
    status: u16,
    reason: String,
    /// At most [`ERROR_BODY_LIMIT`] bytes.
    text: Vec<u8>,
    /// More than `text` was sent.
    truncated: bool,
    /// ` (WWW-Authenticate: …)` and ` (Mcp-Auth-Server: …)`, if present.
    hints: String,
}

/// One outbound message as it was handed to
/// [`send_with`](StreamableHttp::send_with).
#[derive(Debug, Clone)]
struct Outgoing {
    /// The JSON-RPC message (the POST body).
    bytes: Vec<u8>,
    kind: SendKind,
    /// `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`, computed where the
    /// message was built; sent only in the 2026-07-28 era.
    era_headers: Vec<(String, String)>,
}

/// One exchange in flight.
#[derive(Debug)]
struct Exchange {
    owner: Owner,
    body: Body,
    /// The session generation whose `Mcp-Session-Id` it carried, if any.
    session: Option<u64>,
    /// A notification's or response's message, kept (only with auth
    /// enabled) to send it again after an authorization.
    resend: Option<Outgoing>,
    /// The request as sent, until its head arrives (to follow a redirect).
    follow: Option<Redirects>,
    /// The DPoP nonce its proof carried (`Some("")`: a proof without one),
    /// `None` without a proof.
    dpop_nonce: Option<String>,
}

/// The POST of `notifications/initialized` that the session waits for:
/// until the server accepts it (a 2xx head), nothing else is sent.
#[derive(Debug)]
struct Confirming {
    /// Its exchange; `None` while it waits for an authorization.
    exchange: Option<ExchangeId>,
    /// The notification, to send again.
    message: Outgoing,
    /// Already sent again after a failure.
    retried: bool,
}

/// One of our requests on the wire (its POST, its stream or a resumption).
#[derive(Debug)]
struct Pending {
    /// The message, kept until its POST is answered (for a fallback or a
    /// resend after 404).
    message: Option<Outgoing>,
    /// The exchange currently serving it (POST or resuming GET), if any.
    exchange: Option<ExchangeId>,
    /// Its SSE stream's decoder, kept across resumptions (last event id,
    /// retry).
    sse: Option<SseDecoder>,
    /// When to resume its stream.
    resume_at: Option<Instant>,
    /// Resumption GETs since the last event.
    attempts: u32,
    /// Already sent again after a 404.
    resent: bool,
    /// The session generation it was sent in.
    generation: u64,
    /// Its response has been delivered.
    answered: bool,
}

/// The GET listener's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListenState {
    /// Not opened (before `initialized()`, or `listen` is off).
    Off,
    /// The GET is out or its stream is open.
    Open(ExchangeId),
    /// Reopen at this instant.
    Waiting(Instant),
    /// The server answered 405: it offers no listener.
    Disabled,
    /// Too many failures.
    GaveUp,
}

#[derive(Debug)]
struct Listener {
    state: ListenState,
    sse: SseDecoder,
    /// Consecutive failures (reset by any event).
    failures: u32,
    /// The current stream has produced an event.
    saw_event: bool,
}

/// The Streamable HTTP transport's state (see the [module docs](self)).
#[derive(Debug)]
pub struct StreamableHttp {
    /// The endpoint (moves where a followed redirect led).
    url: HttpUrl,
    /// The configured endpoint: configured credential headers go only to
    /// its origin.
    origin: HttpUrl,
    /// The endpoint the bearer of `authorization` was set for: it goes
    /// only to that origin.
    auth_origin: HttpUrl,
    /// The endpoint whose answer carried `session_id`: it goes only to
    /// that origin.
    session_origin: Option<HttpUrl>,
    config: HttpConfig,
    phase: Phase,
    session_id: Option<String>,
    protocol_version: Option<String>,
    /// Incremented by `reset_session()`.
    generation: u64,
    consecutive_expiries: u32,
    next_exchange: u64,
    exchanges: BTreeMap<ExchangeId, Exchange>,
    pending: BTreeMap<u64, Pending>,
    /// Messages waiting for `initialized()`, in send order.
    held: VecDeque<Outgoing>,
    /// Requests that met a 404 of an old session, to send again (once).
    resend: Vec<(u64, Outgoing)>,
    /// The session's `notifications/initialized` is out but not yet
    /// accepted: `held`, `resend` and the listener wait for it.
    confirming: Option<Confirming>,
    listener: Listener,
    /// Until when to wait for the listener's head before being settled.
    settle_until: Option<Instant>,
    /// `Authorization` of every request (a bearer token), if any.
    authorization: Option<String>,
    /// The access token of `authorization` is DPoP-bound: each request
    /// carries a fresh proof signed with this key (RFC 9449).
    dpop: Option<DpopBinding>,
    /// The latest `now` seen (a proof's `iat` is taken from it).
    clock: Option<Instant>,
    /// 401/403 become [`HttpEvent::AuthRequired`].
    auth_enabled: bool,
    /// An authorization is under way: sends are parked.
    auth_hold: bool,
    /// Messages waiting for the authorization, in order.
    parked: VecDeque<Outgoing>,
    /// The listener met 401/403: reopen it once authorized.
    listener_wants_auth: bool,
    /// The 2026-07-28 era's version: no session, no listener, no
    /// resumption; each POST carries `MCP-Protocol-Version` and the era
    /// headers its message came with ([`send_with`](Self::send_with)).
    modern: Option<String>,
    /// The first `initialize` met 400/404/405: its body decides between
    /// the legacy transport and a 2026-07-28 server's refusal (`-32022`),
    /// which reaches the connection as the request's error.
    refused_init: Option<u64>,
    events: VecDeque<HttpEvent>,
}

impl StreamableHttp {
    /// The MCP endpoint.
    pub fn url(&self) -> &HttpUrl {
        &self.url
    }

    /// The id the next exchange would get (a transport that takes over,
    /// after a fallback, numbers its exchanges from here).
    pub fn next_exchange(&self) -> ExchangeId {
        ExchangeId(self.next_exchange)
    }

    /// A transport for the MCP endpoint `url`. Nothing is sent until the
    /// first [`send`](Self::send), which must be the `initialize` request.
    pub fn new(url: HttpUrl, config: HttpConfig) -> Self {
        let sse = decoder(&config);
        StreamableHttp {
            origin: url.clone(),
            auth_origin: url.clone(),
            session_origin: None,
            url,
            config,
            phase: Phase::AwaitInit,
            session_id: None,
            protocol_version: None,
            generation: 0,
            consecutive_expiries: 0,
            next_exchange: 0,
            exchanges: BTreeMap::new(),
            pending: BTreeMap::new(),
            held: VecDeque::new(),
            resend: Vec::new(),
            confirming: None,
            listener: Listener {
                state: ListenState::Off,
                sse,
                failures: 0,
                saw_event: false,
            },
            settle_until: None,
            authorization: None,
            dpop: None,
            clock: None,
            auth_enabled: false,
            auth_hold: false,
            parked: VecDeque::new(),
            listener_wants_auth: false,
            modern: None,
            refused_init: None,
            events: VecDeque::new(),
        }
    }

    // ---- protocol era -----------------------------------------------------

    /// Speaks the 2026-07-28 era (`version`) from now on: every message is
    /// POSTed at once, without a session, a listener or resumption. Call it
    /// before sending the `server/discover` probe, and only then (before any
    /// `initialize`, or after one refused without a session).
    pub fn begin_modern(&mut self, version: &str) {
        // Also after an `initialize` answered with an error and no session
        // (a 2026-07-28 server refusing the handshake with -32022).
        let refused = matches!(self.phase, Phase::Initializing { answered: true, .. });
        if (refused || matches!(self.phase, Phase::AwaitInit | Phase::Ready))
            && self.session_id.is_none()
        {
            self.modern = Some(version.to_owned());
            self.phase = Phase::Ready;
        }
    }

    /// The probe found a legacy server: back to the handshake (the next
    /// request is the `initialize`, whose 400/404/405 still means legacy
    /// HTTP+SSE).
    pub fn end_modern(&mut self) {
        if self.modern.take().is_some() && self.phase == Phase::Ready {
            self.phase = Phase::AwaitInit;
        }
    }

    /// The 2026-07-28 version in use, if that era is spoken.
    pub fn modern_version(&self) -> Option<&str> {
        self.modern.as_deref()
    }

    // ---- timers and polling ---------------------------------------------

    /// Fires the timers due at `now`: resumptions, the listener's reopen,
    /// the close timeout. Spurious or repeated calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.touch(now);
        match self.phase {
            Phase::Draining { delete, until } => {
                if now >= until {
                    self.diag("notifications still unanswered at the close; closing anyway");
                    self.abort_all();
                    self.end_session(now, delete);
                }
                return;
            }
            Phase::Closing { delete, until } => {
                if now >= until {
                    self.abort_exchange(delete);
                    self.diag("no answer to the DELETE of the session in time; closing anyway");
                    self.finish();
                }
                return;
            }
            Phase::Dead | Phase::Closed => return,
            _ => {}
        }
        if self.settle_until.is_some_and(|t| t <= now) {
            self.settle_until = None;
        }
        let due: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.resume_at.is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.resume(id);
        }
        if let ListenState::Waiting(at) = self.listener.state {
            if at <= now {
                if self.phase == Phase::Ready && self.confirming.is_none() {
                    self.open_listener();
                } else {
                    self.listener.state = ListenState::Off;
                }
            }
        }
    }

    /// The earliest instant [`handle_timeout`](Self::handle_timeout) has
    /// something to do, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Closing { until, .. } | Phase::Draining { until, .. } => return Some(until),
            Phase::Dead | Phase::Closed => return None,
            _ => {}
        }
        let listen = match self.listener.state {
            ListenState::Waiting(at) => Some(at),
            _ => None,
        };
        self.pending
            .values()
            .filter_map(|p| p.resume_at)
            .chain(listen)
            .chain(self.settle_until)
            .min()
    }

    /// The next thing the Connection must do (see [`HttpEvent`]).
    #[must_use]
    pub fn poll_output(&mut self) -> Option<HttpEvent> {
        self.events.pop_front()
    }

    /// The session id the server assigned, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The session id, if the endpoint is on the origin that issued it.
    fn sendable_session(&self) -> Option<&str> {
        let here = match &self.session_origin {
            Some(o) => o.same_origin(&self.url),
            None => true,
        };
        self.session_id.as_deref().filter(|_| here)
    }
}

/// A fresh SSE decoder with the configured event limit.
fn decoder(config: &HttpConfig) -> SseDecoder {
    SseDecoder::with_config(SseConfig {
        max_event_size: config.max_event,
    })
}

/// Whether a request's headers carry `Mcp-Session-Id`.
fn carries_session(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("mcp-session-id"))
}

/// Whether `value` can go in a header as is (no control bytes but HTAB).
fn is_header_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || !(b < 0x20 || b == 0x7f))
}

/// Whether a message is the `notifications/initialized` notification.
pub(crate) fn is_initialized_notification(message: &[u8], kind: &SendKind) -> bool {
    *kind == SendKind::Notification
        && std::str::from_utf8(message).is_ok_and(|text| {
            matches!(
                parse_message(text),
                Ok(Message::Notification { method, .. }) if method == notifications::INITIALIZED
            )
        })
}

/// `now + delay`, saturating instead of overflowing (a configured
/// `max_retry` or `close_timeout` may be huge): at most a year ahead.
fn after(now: Instant, delay: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    now.checked_add(delay.min(YEAR)).unwrap_or(now)
}

/// The reconnection delay of a stream: its `retry`, else the default,
/// at most `max_retry`.
fn retry_delay(config: &HttpConfig, sse: &SseDecoder) -> Duration {
    sse.retry()
        .unwrap_or(config.default_retry)
        .min(config.max_retry)
}
