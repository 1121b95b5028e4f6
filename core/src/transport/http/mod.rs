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

mod inbound;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::{
    ExchangeId, ExchangePurpose, HttpConfig, HttpMethod, HttpRequest, HttpUrl, RequestFailure,
};
use crate::codec::glimpse::Glimpse;
use crate::codec::sse::{SseConfig, SseDecoder};
use crate::exchange::dpop::{DpopBinding, ProofRequest};
use crate::exchange::redirect::{is_credential, Redirects};
use crate::mcp::methods::notifications;
use crate::rpc::{parse_message, Message, SendKind};

/// `Accept` of every POST.
const ACCEPT_POST: &str = "application/json, text/event-stream";
/// `Accept` of every GET.
const ACCEPT_SSE: &str = "text/event-stream";
/// Headers the transport sets itself: same-named configured headers are
/// skipped (lower case).
const OWN_HEADERS: [&str; 5] = [
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];
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

    // ---- authorization ----------------------------------------------------

    /// Makes 401 (and 403 `insufficient_scope`) answers hold their message
    /// and report [`HttpEvent::AuthRequired`] instead of failing it.
    pub fn enable_auth(&mut self) {
        self.auth_enabled = true;
    }

    /// Sets the `Authorization` header of every later request (`None`:
    /// none). It replaces a configured `Authorization` header.
    /// The bearer is bound to the current endpoint's origin.
    pub fn set_authorization(&mut self, value: Option<String>) {
        self.authorization = value.filter(|v| is_header_value(v));
        self.auth_origin = self.url.clone();
    }

    /// Binds the access token of the `Authorization` to a DPoP key: every
    /// later request to its origin carries a fresh proof (`None`: none).
    pub fn set_dpop(&mut self, binding: Option<DpopBinding>) {
        self.dpop = binding;
    }

    /// Notes the time of a call (proofs are dated from it).
    pub(super) fn touch(&mut self, now: Instant) {
        self.clock = Some(now);
    }

    /// The `DPoP` header for a request to the endpoint, when the token is
    /// bound and the request goes where the token goes.
    fn dpop_proof(&self, method: HttpMethod) -> Option<(String, String)> {
        let d = self.dpop.as_ref()?;
        let now = self.clock?;
        if !self.url.same_origin(&self.auth_origin) || self.authorization.is_none() {
            return None;
        }
        let request = ProofRequest {
            method: method.as_str(),
            url: &self.url,
            access_token: Some(&d.access_token),
        };
        match d.key.proof(request, d.clock.unix_secs(now)) {
            Ok(p) => Some(("DPoP".to_owned(), p)),
            Err(_) => None,
        }
    }

    /// Whether an authorization is under way (sends are being parked).
    pub fn auth_pending(&self) -> bool {
        self.auth_hold
    }

    /// The authorization succeeded: sends every parked message again, in
    /// order, with `authorization` (and reopens the listener if it met the
    /// 401).
    pub fn authorized(&mut self, now: Instant, authorization: String) {
        self.touch(now);
        self.set_authorization(Some(authorization));
        self.auth_hold = false;
        if self
            .confirming
            .as_ref()
            .is_some_and(|c| c.exchange.is_none())
        {
            self.post_confirming();
        }
        for out in std::mem::take(&mut self.parked) {
            match (self.phase, &out.kind) {
                (Phase::Initializing { id: init, .. }, SendKind::Request { id }) if *id == init => {
                    self.post(out, false);
                }
                _ => self.submit(now, out),
            }
        }
        if std::mem::take(&mut self.listener_wants_auth)
            && self.phase == Phase::Ready
            && self.confirming.is_none()
            && self.config.listen
            && self.listener.state == ListenState::Off
        {
            self.open_listener();
        }
    }

    /// The authorization failed: every parked request fails with
    /// `message`; parked notifications and responses are dropped. If
    /// `notifications/initialized` was waiting for it, the session cannot
    /// start: [`HttpEvent::Fatal`].
    pub fn authorization_failed(&mut self, message: &str) {
        self.auth_hold = false;
        self.listener_wants_auth = false;
        if self
            .confirming
            .as_ref()
            .is_some_and(|c| c.exchange.is_none())
        {
            return self.fatal(format!(
                "notifications/initialized was not sent (no authorization): {message}"
            ));
        }
        for out in std::mem::take(&mut self.parked) {
            match out.kind {
                SendKind::Request { id } => self.fail(id, RequestFailure::Auth(message.to_owned())),
                _ => self.diag(format!("message dropped: {message}")),
            }
        }
    }

    fn park(&mut self, out: Outgoing) {
        self.enqueue(Waiting::Authorization, out);
    }

    // ---- app calls ----------------------------------------------------

    /// Sends one outbound JSON-RPC message (compact JSON from the engine)
    /// in its own POST. The first request after [`new`](Self::new) or
    /// [`reset_session`](Self::reset_session) is the `initialize`: it goes
    /// out alone; every other message is held until
    /// [`initialized`](Self::initialized). After close, a request fails at
    /// once. Without era headers: see [`send_with`](Self::send_with).
    pub fn send(&mut self, now: Instant, message: Vec<u8>, kind: SendKind) {
        self.send_with(now, message, kind, Vec::new());
    }

    /// [`send`](Self::send) with the 2026-07-28 era headers of the message
    /// (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), computed by whoever built
    /// it ([`crate::modern::message_headers`]). They go out with its POST
    /// only while that era is spoken ([`begin_modern`](Self::begin_modern)).
    pub fn send_with(
        &mut self,
        now: Instant,
        message: Vec<u8>,
        kind: SendKind,
        era_headers: Vec<(String, String)>,
    ) {
        let out = Outgoing {
            bytes: message,
            kind,
            era_headers,
        };
        self.submit(now, out);
    }

    fn submit(&mut self, now: Instant, out: Outgoing) {
        self.touch(now);
        match self.phase {
            Phase::AwaitInit => match out.kind {
                SendKind::Request { id } => {
                    self.phase = Phase::Initializing {
                        id,
                        answered: false,
                    };
                    self.post(out, false);
                }
                _ => self.hold(out),
            },
            Phase::Initializing { .. } | Phase::Expired => self.hold(out),
            Phase::Ready if self.auth_hold => self.park(out),
            Phase::Ready if self.confirming.is_some() => self.hold(out),
            Phase::Ready => {
                self.post(out, false);
            }
            Phase::Draining { .. } | Phase::Closing { .. } | Phase::Dead | Phase::Closed => {
                if let SendKind::Request { id } = out.kind {
                    self.fail(id, RequestFailure::Other("the connection is closed".into()));
                }
            }
        }
    }

    /// The `initialize` result arrived and `notifications/initialized` has
    /// been given to [`send`](Self::send): records the negotiated version
    /// (sent as `MCP-Protocol-Version` from now on) and POSTs
    /// `notifications/initialized` alone. Only once the server has accepted
    /// it (the 2xx head of that POST) are the held messages released —
    /// requests that met a 404 of the previous session first, then the rest
    /// in send order — and the GET listener opened if configured, so that
    /// no request of the session can reach the server before it (the POSTs
    /// travel on separate connections). Messages sent meanwhile are held.
    ///
    /// If the server refuses that POST (any other status than 2xx, 404 —
    /// the session is gone: [`HttpEvent::SessionExpired`] — or an
    /// authorization to obtain), the session cannot start:
    /// [`HttpEvent::Fatal`] quoting the answer. If the POST fails before
    /// its head (connection reset…), it is sent again once; a second
    /// failure is fatal too. Without a `notifications/initialized` among
    /// the held messages, everything is released at once.
    pub fn initialized(&mut self, now: Instant, protocol_version: &str) {
        self.touch(now);
        if !matches!(self.phase, Phase::AwaitInit | Phase::Initializing { .. }) {
            return;
        }
        self.protocol_version = Some(protocol_version.to_owned());
        self.phase = Phase::Ready;
        let first = self
            .held
            .iter()
            .position(|out| is_initialized_notification(&out.bytes, &out.kind));
        match first.and_then(|at| self.held.remove(at)) {
            Some(message) => {
                self.confirming = Some(Confirming {
                    exchange: None,
                    message,
                    retried: false,
                });
                self.post_confirming();
            }
            None => self.release(now),
        }
    }

    /// POSTs the `notifications/initialized` being confirmed.
    fn post_confirming(&mut self) {
        let Some(message) = self.confirming.as_ref().map(|c| c.message.clone()) else {
            return;
        };
        let ex = self.post(message, false);
        if let Some(c) = self.confirming.as_mut() {
            c.exchange = Some(ex);
        }
    }

    /// Whether `ex` is the POST of the `notifications/initialized` being
    /// confirmed.
    fn is_confirming(&self, ex: ExchangeId) -> bool {
        self.confirming
            .as_ref()
            .is_some_and(|c| c.exchange == Some(ex))
    }

    /// The server accepted `notifications/initialized` (or there is none to
    /// wait for): sends again the requests that met a 404 of the previous
    /// session, then the held messages in send order, and opens the GET
    /// listener if configured.
    fn release(&mut self, now: Instant) {
        self.confirming = None;
        self.flush_resends();
        for out in std::mem::take(&mut self.held) {
            self.post(out, false);
        }
        if self.config.listen
            && matches!(
                self.listener.state,
                ListenState::Off | ListenState::Waiting(_) | ListenState::GaveUp
            )
        {
            self.listener.failures = 0;
            self.open_listener();
            if !self.config.listen_settle.is_zero() {
                self.settle_until = now.checked_add(self.config.listen_settle);
            }
        }
    }

    /// Whether `notifications/initialized` has been accepted and the GET
    /// listener opened then has answered (or failed, or `listen_settle`
    /// passed, or there is none): the Connection reports itself ready only
    /// then.
    pub fn settled(&self) -> bool {
        self.settle_until.is_none() && self.confirming.is_none()
    }

    /// Before sending `initialize` again after [`HttpEvent::SessionExpired`]:
    /// forgets the session id and the version, fails the requests whose
    /// streams belonged to the old session, closes the listener. The next
    /// request sent goes out alone (without `Mcp-Session-Id`); every other
    /// send is held until [`initialized`](Self::initialized).
    pub fn reset_session(&mut self) {
        if matches!(
            self.phase,
            Phase::Draining { .. } | Phase::Closing { .. } | Phase::Dead | Phase::Closed
        ) {
            return;
        }
        self.fail_session_streams();
        self.stop_listener();
        self.confirming = None;
        self.session_id = None;
        self.session_origin = None;
        self.protocol_version = None;
        self.generation += 1;
        self.phase = Phase::AwaitInit;
    }

    /// The engine completed our request `id` (response, timeout, cancel):
    /// stops resuming its stream, forgets it if it was still held, and
    /// aborts its exchange if one is open.
    pub fn request_done(&mut self, id: u64) {
        if self.phase
            == (Phase::Initializing {
                id,
                answered: false,
            })
        {
            // Timed out or cancelled: the next request is a new initialize.
            self.initialize_failed();
        }
        self.held.retain(|out| out.kind != SendKind::Request { id });
        self.parked
            .retain(|out| out.kind != SendKind::Request { id });
        self.resend.retain(|(r, _)| *r != id);
        if let Some(p) = self.pending.remove(&id) {
            self.abort_exchange(p.exchange);
        }
    }

    /// Graceful close: aborts every open exchange, sends DELETE with the
    /// session id if there is one (any answer or failure will do), then
    /// reports [`HttpEvent::Finished`], also after `close_timeout` without
    /// an answer. Pending requests are not failed: the Connection closes
    /// them. Idempotent.
    pub fn begin_close(&mut self, now: Instant) {
        self.touch(now);
        match self.phase {
            Phase::Draining { .. } | Phase::Closing { .. } | Phase::Closed => return,
            Phase::Dead => return self.finish(),
            _ => {}
        }
        self.settle_until = None;
        // After a 404 the server has already ended the session.
        let delete = self.sendable_session().is_some() && self.phase != Phase::Expired;
        // What was already sent of notifications and responses goes on:
        // a cancellation must reach the server before the session ends.
        // Those the server has not answered yet (a 202 is enough), but the
        // `notifications/initialized` of a session about to end.
        let notifying: Vec<ExchangeId> = self
            .exchanges
            .iter()
            .filter(|(ex, x)| {
                matches!(x.owner, Owner::Notify(_))
                    && matches!(x.body, Body::Head)
                    && self
                        .confirming
                        .as_ref()
                        .is_none_or(|c| c.exchange != Some(**ex))
            })
            .map(|(ex, _)| *ex)
            .collect();
        let kept: Vec<(ExchangeId, Exchange)> = notifying
            .iter()
            .filter_map(|ex| self.exchanges.remove(ex).map(|x| (*ex, x)))
            .collect();
        self.abort_all();
        if !kept.is_empty() {
            self.exchanges.extend(kept);
            self.phase = Phase::Draining {
                delete,
                until: after(now, self.config.close_timeout),
            };
            return;
        }
        self.end_session(now, delete);
    }

    /// After the drain: the DELETE of the session (`delete`), else done.
    fn end_session(&mut self, now: Instant, delete: bool) {
        if delete {
            let ex = self.next_id();
            let headers = self.headers(HttpMethod::Delete, None, false);
            self.open(
                ex,
                HttpMethod::Delete,
                headers,
                Vec::new(),
                ExchangePurpose::Close,
                Owner::Close,
            );
            self.phase = Phase::Closing {
                delete: Some(ex),
                until: after(now, self.config.close_timeout),
            };
        } else {
            self.finish();
        }
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

    // ---- sending --------------------------------------------------------

    fn next_id(&mut self) -> ExchangeId {
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        id
    }

    /// The headers of a request: `Accept`, `Content-Type`, the configured
    /// ones (except those the transport sets), the session id and the
    /// negotiated version when known.
    fn headers(
        &self,
        method: HttpMethod,
        accept: Option<&str>,
        json_body: bool,
    ) -> Vec<(String, String)> {
        let mut h = self.base_headers(method, accept, json_body);
        if let Some(version) = &self.modern {
            h.push(("MCP-Protocol-Version".to_owned(), version.clone()));
            return h;
        }
        if let Some(s) = self.sendable_session() {
            h.push(("Mcp-Session-Id".to_owned(), s.to_owned()));
        }
        if let Some(v) = &self.protocol_version {
            h.push(("MCP-Protocol-Version".to_owned(), v.clone()));
        }
        h
    }

    /// `Accept`, `Content-Type`, the configured headers and the
    /// authorization.
    fn base_headers(
        &self,
        method: HttpMethod,
        accept: Option<&str>,
        json_body: bool,
    ) -> Vec<(String, String)> {
        let mut h = Vec::with_capacity(self.config.headers.len() + 5);
        if let Some(accept) = accept {
            h.push(("Accept".to_owned(), accept.to_owned()));
        }
        if json_body {
            h.push(("Content-Type".to_owned(), "application/json".to_owned()));
        }
        let home = self.url.same_origin(&self.origin);
        for (name, value) in &self.config.headers {
            let replaced =
                self.authorization.is_some() && name.eq_ignore_ascii_case("authorization");
            let elsewhere = !home && is_credential(name);
            if !(replaced || elsewhere || OWN_HEADERS.iter().any(|o| name.eq_ignore_ascii_case(o)))
            {
                h.push((name.clone(), value.clone()));
            }
        }
        if let Some(a) = &self.authorization {
            if self.url.same_origin(&self.auth_origin) {
                h.push(("Authorization".to_owned(), a.clone()));
            }
        }
        h.extend(self.dpop_proof(method));
        h
    }

    /// Emits an exchange and records it.
    fn open(
        &mut self,
        ex: ExchangeId,
        method: HttpMethod,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        purpose: ExchangePurpose,
        owner: Owner,
    ) {
        let session = carries_session(&headers).then_some(self.generation);
        let dpop_nonce = headers.iter().any(|(n, _)| n == "DPoP").then(|| {
            self.dpop
                .as_ref()
                .and_then(|d| d.key.nonce_for(&self.url))
                .unwrap_or_default()
        });
        let carries = match owner {
            Owner::Request(id) | Owner::Resume(id) => Some(id),
            _ => None,
        };
        let request = HttpRequest {
            exchange: ex,
            method,
            url: self.url.clone(),
            headers,
            body,
            purpose,
            carries,
        };
        self.exchanges.insert(
            ex,
            Exchange {
                owner,
                body: Body::Head,
                session,
                resend: None,
                follow: Some(Redirects::new(request.clone())),
                dpop_nonce,
            },
        );
        self.events.push_back(HttpEvent::Request(request));
    }

    /// POSTs one message now; returns its exchange.
    fn post(&mut self, out: Outgoing, resent: bool) -> ExchangeId {
        let ex = self.next_id();
        let keep = (self.auth_enabled && !matches!(out.kind, SendKind::Request { .. }))
            .then(|| out.clone());
        let (owner, purpose) = match &out.kind {
            SendKind::Request { id } => {
                let id = *id;
                let p = Pending {
                    message: Some(out.clone()),
                    exchange: Some(ex),
                    sse: None,
                    resume_at: None,
                    attempts: 0,
                    resent,
                    generation: self.generation,
                    answered: false,
                };
                if let Some(old) = self.pending.insert(id, p) {
                    // An id is never reused; if it were, the old one's
                    // exchange must not outlive its record.
                    self.abort_exchange(old.exchange);
                }
                (Owner::Request(id), ExchangePurpose::Request)
            }
            SendKind::Notification => (
                Owner::Notify("notification".into()),
                ExchangePurpose::Notify,
            ),
            SendKind::Response { id } => (
                Owner::Notify(format!("response to server request {id}")),
                ExchangePurpose::Notify,
            ),
        };
        let mut headers = self.headers(HttpMethod::Post, Some(ACCEPT_POST), true);
        if self.modern.is_some() {
            headers.extend(out.era_headers);
        }
        self.open(ex, HttpMethod::Post, headers, out.bytes, purpose, owner);
        if let (Some(keep), Some(x)) = (keep, self.exchanges.get_mut(&ex)) {
            x.resend = Some(keep);
        }
        ex
    }

    fn hold(&mut self, out: Outgoing) {
        self.enqueue(Waiting::Session, out);
    }

    /// Queues a message that must wait (at most [`MAX_HELD`] per queue;
    /// beyond, a request fails and anything else is dropped).
    fn enqueue(&mut self, until: Waiting, out: Outgoing) {
        let (queue, what) = match until {
            Waiting::Session => (&mut self.held, "the session to be initialized"),
            Waiting::Authorization => (&mut self.parked, "an authorization"),
        };
        if queue.len() < MAX_HELD {
            return queue.push_back(out);
        }
        let why = format!("more than {MAX_HELD} messages wait for {what}");
        match out.kind {
            SendKind::Request { id } => self.fail(id, RequestFailure::Other(why)),
            _ => self.diag(format!("message dropped: {why}")),
        }
    }

    /// Sends again (once) the requests that met a 404 of an old session.
    fn flush_resends(&mut self) {
        let mut resend = std::mem::take(&mut self.resend);
        resend.sort_by_key(|(id, _)| *id);
        for (_, out) in resend {
            self.post(out, true);
        }
    }

    /// GETs a request's stream again with `Last-Event-ID`.
    fn resume(&mut self, id: u64) {
        let resumable = matches!(self.phase, Phase::Ready | Phase::Initializing { .. });
        let generation = self.generation;
        let ex = ExchangeId(self.next_exchange);
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        p.resume_at = None;
        if !resumable || p.generation != generation {
            self.fail_pending(id, RequestFailure::SessionExpired);
            return;
        }
        p.attempts += 1;
        p.exchange = Some(ex);
        let last = p
            .sse
            .as_ref()
            .map(|d| d.last_event_id().to_owned())
            .unwrap_or_default();
        self.next_exchange += 1;
        let mut headers = self.headers(HttpMethod::Get, Some(ACCEPT_SSE), false);
        headers.push(("Last-Event-ID".to_owned(), last));
        self.open(
            ex,
            HttpMethod::Get,
            headers,
            Vec::new(),
            ExchangePurpose::Resume,
            Owner::Resume(id),
        );
    }

    fn open_listener(&mut self) {
        let ex = self.next_id();
        let mut headers = self.headers(HttpMethod::Get, Some(ACCEPT_SSE), false);
        let last = self.listener.sse.last_event_id();
        if !last.is_empty() && is_header_value(last) {
            headers.push(("Last-Event-ID".to_owned(), last.to_owned()));
        }
        self.listener.state = ListenState::Open(ex);
        self.listener.saw_event = false;
        self.open(
            ex,
            HttpMethod::Get,
            headers,
            Vec::new(),
            ExchangePurpose::Listen,
            Owner::Listen,
        );
    }

    // ---- session and failure bookkeeping --------------------------------

    /// Closes the listener (for a new session: its event ids are forgotten).
    fn stop_listener(&mut self) {
        if let ListenState::Open(ex) = self.listener.state {
            self.abort_exchange(Some(ex));
        }
        if self.listener.state != ListenState::Disabled {
            self.listener.state = ListenState::Off;
        }
        self.listener.sse = decoder(&self.config);
        self.listener.failures = 0;
        self.listener.saw_event = false;
    }

    /// Fails, with `SessionExpired`, every request whose answer can no
    /// longer come: awaiting resumption, or expected on another stream of
    /// the session being given up. Requests whose own exchange is still
    /// open stay: an unanswered POST's own answer decides (a 404 makes it
    /// be sent again), and a stream the server opened before it dropped
    /// the session may still carry the answer (a server that ends the
    /// session, then answers the request that ended it); if it ends
    /// without, the request fails then (it cannot be resumed in another
    /// session).
    fn fail_session_streams(&mut self) {
        let doomed: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                !p.exchange
                    .and_then(|ex| self.exchanges.get(&ex))
                    .is_some_and(|x| {
                        matches!(x.owner, Owner::Request(_))
                            && matches!(x.body, Body::Head | Body::Json(_) | Body::Sse)
                    })
            })
            .map(|(id, _)| *id)
            .collect();
        for id in doomed {
            self.fail_pending(id, RequestFailure::SessionExpired);
        }
    }

    /// A 404 answered an exchange that carried the session of `generation`.
    fn session_gone(&mut self, generation: u64) {
        if generation != self.generation || self.phase != Phase::Ready {
            return;
        }
        self.consecutive_expiries += 1;
        if self.consecutive_expiries > MAX_CONSECUTIVE_EXPIRIES {
            self.fatal(format!(
                "the server ended {} sessions in a row (HTTP 404) before anything succeeded in them",
                self.consecutive_expiries
            ));
            return;
        }
        self.phase = Phase::Expired;
        self.confirming = None;
        self.fail_session_streams();
        self.stop_listener();
        self.events.push_back(HttpEvent::SessionExpired);
    }

    /// Forgets request `id` and fails it, unless its response was delivered.
    fn fail_pending(&mut self, id: u64, failure: RequestFailure) {
        if let Some(p) = self.pending.remove(&id) {
            self.abort_exchange(p.exchange);
            if !p.answered {
                self.fail(id, failure);
            }
        }
    }

    fn fail(&mut self, id: u64, failure: RequestFailure) {
        if matches!(self.phase, Phase::Initializing { id: init, .. } if init == id) {
            self.initialize_failed();
        }
        self.events.push_back(HttpEvent::Fail { id, failure });
    }

    /// The `initialize` failed: the next request is a new one, without the
    /// session id its answer may have carried.
    fn initialize_failed(&mut self) {
        self.phase = Phase::AwaitInit;
        self.session_id = None;
    }

    fn note(&mut self, message: impl Into<String>) {
        self.events.push_back(HttpEvent::Note(message.into()));
    }

    fn diag(&mut self, message: impl Into<String>) {
        self.events.push_back(HttpEvent::Diagnostic(message.into()));
    }

    /// Aborts the exchange if it is still open.
    fn abort_exchange(&mut self, ex: Option<ExchangeId>) {
        if let Some(ex) = ex {
            if self.exchanges.remove(&ex).is_some() {
                self.events.push_back(HttpEvent::Abort(ex));
            }
        }
    }

    /// Aborts every exchange and forgets every request and held message.
    fn abort_all(&mut self) {
        let open = std::mem::take(&mut self.exchanges);
        self.events.extend(open.into_keys().map(HttpEvent::Abort));
        self.pending.clear();
        self.held.clear();
        self.parked.clear();
        self.resend.clear();
        self.confirming = None;
        if self.listener.state != ListenState::Disabled {
            self.listener.state = ListenState::Off;
        }
    }

    fn fatal(&mut self, message: String) {
        self.abort_all();
        self.phase = Phase::Dead;
        self.events.push_back(HttpEvent::Fatal(message));
    }

    /// While draining: once no notification is left in flight, the
    /// close goes on.
    pub(super) fn drained(&mut self, now: Instant) {
        if let Phase::Draining { delete, .. } = self.phase {
            if !self
                .exchanges
                .values()
                .any(|x| matches!(x.owner, Owner::Notify(_)) && matches!(x.body, Body::Head))
            {
                self.end_session(now, delete);
            }
        }
    }

    fn finish(&mut self) {
        self.phase = Phase::Closed;
        self.events.push_back(HttpEvent::Finished);
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
