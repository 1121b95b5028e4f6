//! One MCP client connection as a sans-IO value: the JSON-RPC engine, the
//! session (handshake, capabilities) and one transport, behind a single
//! `handle_*` / `poll_*` surface.
//!
//! ```text
//!            app calls (request, send, respond, cancel, close)
//!                               │
//!   Input ──► Connection ──► rpc::Engine ──► Output::Complete / Notification / ServerRequest …
//!   (bytes,      │    ▲                │
//!    HTTP,       ▼    │ messages       ▼ messages
//!    exits)   wire (stdio | Streamable HTTP | legacy SSE) ──► Output::Write / Http / Signal …
//! ```
//!
//! The connection routes; each concern is a sub-state in its own file:
//!
//! ```text
//!   types     Input, Output, ConnectionConfig, TransportSpec, errors (public)
//!   calls     the application's calls, checked against phase and capabilities
//!   route     engine ⇄ wire ⇄ authorization ⇄ era sub-states ⇄ application
//!   lifecycle the era, the handshake, a renewed session, the end
//!   wire      the transport in use, behind one interface
//!   auth      OAuth bookkeeping: the flow, the requests waiting for it
//!   probe     which era: the server/discover probe and its verdict
//!   modern    the 2026-07-28 era: envelope, input_required rounds, listen
//!   tasks     tool calls that became tasks, followed to their end
//! ```
//!
//! # Protocol eras
//!
//! By default ([`EraPolicy::Auto`]) the connection first sends
//! `server/discover` with the 2026-07-28 envelope: a discover result means
//! the stateless era (no handshake; every request carries `_meta`;
//! `input_required` results become [`Output::ServerRequest`]s and the call is
//! sent again with the answers; `subscriptions/listen` replaces the GET
//! stream); anything else (an error, a 4xx, silence) means the `initialize`
//! handshake. The application sees the same ids, completions and server
//! requests in both.
//!
//! # Driving it
//!
//! After every mutation (`new`, any `handle_*`, any app call), drain
//! [`Connection::poll_output`] until `None`, performing each output as its
//! doc says; then sleep until [`Connection::poll_timeout`] (or the next
//! input) and call [`Connection::handle_timeout`]. [`Output::Closed`] is the
//! last output; after it the connection ignores every input. The crate
//! docs show a whole run loop over a child process with only std.

mod auth;
mod inputs;
mod modern;
mod probe;
mod tasks;
mod types;
mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::time::Instant;

pub use crate::modern::probe::{Era, EraPolicy};
pub use types::{
    CallError, CloseReason, ConnectionConfig, Diagnostic, EraFinding, Input, Output, OwnedInput,
    SpecError, TransportSpec,
};

use serde::Serialize;
use serde_json::value::RawValue;

use crate::auth::AuthState;
use crate::codec::jsonl::Line;
use crate::config::ServerConfig;
use crate::mcp::handshake::{accept_result, HandshakeError};
use crate::mcp::methods::{check_spec, notifications, Capability, MethodId, MethodSpec};
use crate::mcp::types::InitializeResult;
use crate::mcp::{ClientConfig, Method, ServerNotification};
use crate::modern::MODERN_PROTOCOL_VERSION;
use crate::rpc::{
    self, Engine, ErrorObject, Json, LocalError, Params, RequestError, RequestId, RequestOptions,
    RespondStatus, SendKind,
};
use crate::transport::HttpConfig;
use auth::{is_auth_exchange, Auth, AuthStep};
use modern::{Modern, Outbox};
use probe::{ProbeStep, ProbeTimer, Prober};
pub use probe::{HTTP_PROBE_TIMEOUT, STDIO_PROBE_TIMEOUT};
use tasks::{Augment, Tasks};
use wire::{with_bearer, Fed, Wire, WireOutput};

/// The [`Outbox`] of a connection: its engine, wire and outputs.
macro_rules! outbox {
    ($conn:ident) => {
        &mut Outbox {
            engine: &mut $conn.engine,
            wire: &mut $conn.wire,
            out: &mut $conn.out,
        }
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The `server/discover` probe is in flight.
    Probing {
        id: u64,
    },
    /// `initialize` is in flight; `reinit` when it renews an expired session.
    Initializing {
        id: u64,
        reinit: bool,
    },
    /// The stdio server died or stayed silent during the probe: it is
    /// being stopped and started again; `initialize` follows.
    Respawning,
    Ready,
    /// The engine is closed; waiting for the transport to finish.
    Closing,
    Closed,
}

/// The era spoken, and the 2026-07-28 era's state: one value, read by
/// every decision that depends on the era.
enum Spoken {
    /// Not known yet: the probe or the first handshake is under way.
    Unknown,
    /// 2025-11-25 and earlier: the `initialize` handshake succeeded.
    Legacy,
    /// 2026-07-28: the probe found it (boxed: the other states are empty).
    Modern(Box<Modern>),
}

impl Spoken {
    fn modern(&self) -> Option<&Modern> {
        match self {
            Spoken::Modern(m) => Some(m.as_ref()),
            _ => None,
        }
    }

    fn modern_mut(&mut self) -> Option<&mut Modern> {
        match self {
            Spoken::Modern(m) => Some(m.as_mut()),
            _ => None,
        }
    }

    /// The era the sub-states speak: 2025-11-25 until 2026-07-28 is found.
    fn era(&self) -> Era {
        match self {
            Spoken::Modern(_) => Era::Modern,
            Spoken::Unknown | Spoken::Legacy => Era::Legacy,
        }
    }
}

/// A [`tasks::Ctx`] over a connection's outputs and client settings.
macro_rules! task_cx {
    ($conn:ident, $now:expr) => {
        &mut tasks::Ctx {
            now: $now,
            era: $conn.era.era(),
            out: &mut $conn.out,
            client: &$conn.client,
        }
    };
}

mod calls;
mod lifecycle;
mod route;

/// One MCP client connection. See the [module docs](self).
pub struct Connection {
    engine: Engine,
    wire: Wire,
    phase: Phase,
    client: ClientConfig,
    http_config: HttpConfig,
    server: Option<InitializeResult>,
    reason: Option<CloseReason>,
    /// The `initialize` request in flight: its completion is the
    /// handshake's, never the app's (also when it ends by a close).
    initialize_id: Option<u64>,
    /// The handshake is done but `Ready` waits for the HTTP listener to
    /// settle.
    ready_pending: bool,
    auth: Option<Auth>,
    prober: Prober,
    /// The era spoken, once known (the 2026-07-28 era's state with it).
    era: Spoken,
    /// Whether `subscriptions/listen` may be opened.
    listen_enabled: bool,
    /// The stdio server was started again after the probe (once at most).
    respawned: bool,
    /// How the era was found.
    finding: Option<EraFinding>,
    /// Tool calls that became tasks, followed for the application.
    tasks: Tasks,
    out: VecDeque<Output>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("phase", &self.phase)
            .field("pending", &self.engine.pending_len())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts a connection: queues the `initialize` request (and, for the
    /// HTTP transports, the first exchange). For stdio the driver has
    /// already spawned the child.
    pub fn new(config: ConnectionConfig, transport: TransportSpec, now: Instant) -> Self {
        let mut engine_config = config.engine;
        for method in config.client.handled_requests() {
            engine_config = engine_config.handle_request(method);
        }
        let auth = config.auth.map(Auth::new);
        let bearer = auth.as_ref().and_then(Auth::bearer);
        let mut wire = Wire::new(
            now,
            transport,
            config.stdio,
            &config.http,
            bearer,
            auth.is_some(),
        );
        wire.set_dpop(auth.as_ref().and_then(Auth::dpop));
        let probe_timeout = config.probe_timeout.unwrap_or(match wire.is_stdio() {
            true => STDIO_PROBE_TIMEOUT,
            false => HTTP_PROBE_TIMEOUT,
        });
        let listen_enabled = !config.no_subscriptions && config.http.listen;
        let tasks = Tasks::new(&config.client);
        let mut conn = Connection {
            engine: Engine::new(engine_config),
            wire,
            phase: Phase::Closed,
            client: config.client,
            http_config: config.http,
            server: None,
            reason: None,
            initialize_id: None,
            ready_pending: false,
            auth,
            prober: Prober::new(config.era, config.era_hint, probe_timeout),
            era: Spoken::Unknown,
            listen_enabled,
            respawned: false,
            finding: None,
            tasks,
            out: VecDeque::new(),
        };
        conn.start(now);
        conn.pump(now);
        conn
    }

    /// Builds the connection a [`ServerConfig`] describes: its transport,
    /// its headers and its default timeout.
    pub fn for_server(
        server: &ServerConfig,
        mut config: ConnectionConfig,
        now: Instant,
    ) -> Result<Self, SpecError> {
        let spec = TransportSpec::from_server(server)?;
        if let Some(t) = server.request_timeout() {
            config.engine = config.engine.default_timeout(t);
        }
        for (k, v) in &server.headers {
            config.http.headers.push((k.clone(), v.clone()));
        }
        if let Some(era) = server.era_policy()? {
            config.era = era;
        }
        Ok(Connection::new(config, spec, now))
    }

    // ----- inputs -------------------------------------------------------

    /// Feeds one input.
    pub fn handle_input(&mut self, now: Instant, input: Input<'_>) {
        if self.phase == Phase::Closed {
            return;
        }
        if let Input::StdinUnread(unread) = input {
            self.prober.stdin_unread(now, unread);
            return;
        }
        if input.exchange().is_some_and(is_auth_exchange) {
            // Authorization traffic: the flow's (a finished flow's late
            // input is dropped).
            if self
                .auth
                .as_mut()
                .is_some_and(|a| a.handle_input(now, input))
            {
                self.pump(now);
            }
            return;
        }
        let engine = &mut self.engine;
        let mut deliver = |m: Line<'_>| engine.handle_line(now, m);
        match self.wire.handle_input(now, input, &mut deliver) {
            Fed::Taken => {}
            Fed::Died(message) => self.server_gone(now, message),
            Fed::Respawned => self.respawned(now),
            Fed::Foreign => self
                .out
                .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "input {input:?} does not belong to this transport; ignored"
                )))),
        }
        self.pump(now);
    }

    /// A timer fired (spurious calls are harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.phase == Phase::Closed {
            return;
        }
        self.engine.handle_timeout(now);
        if let Phase::Probing { .. } = self.phase {
            match self.prober.handle_timeout(now) {
                ProbeTimer::Nothing => {}
                ProbeTimer::CheckStdin => self.out.push_back(Output::CheckStdin),
                ProbeTimer::Silent { waited } => {
                    let ms = self.prober.timeout().as_millis();
                    let why = if waited {
                        format!("read server/discover and did not answer within {ms} ms")
                    } else {
                        format!("did not answer server/discover within {ms} ms")
                    };
                    self.respawn(now, &why);
                }
            }
        }
        if let Some(auth) = self.auth.as_mut() {
            auth.handle_timeout(now);
        }
        if self.phase == Phase::Ready
            && self
                .era
                .modern_mut()
                .is_some_and(|m| m.take_listen_due(now))
        {
            self.open_listen(now);
        }
        if self.phase == Phase::Ready {
            if let Some(m) = self.era.modern_mut() {
                m.handle_timeout(now, outbox!(self));
            }
        }
        if self.phase != Phase::Closing {
            // In any open phase (a 2025-11-25 session starting over too):
            // deadlines end follows, and polls due are queued until Ready,
            // so a due poll never leaves poll_timeout in the past.
            self.tasks.handle_timeout(now, &mut self.out);
        }
        if let Some(message) = self.wire.handle_timeout(now) {
            self.server_gone(now, message);
        }
        self.pump(now);
    }

    // ----- outputs ------------------------------------------------------

    /// The next output, if any.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`Connection::handle_timeout`] must be called next.
    #[must_use]
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        if self.phase == Phase::Closed {
            return None;
        }
        let mut next = earliest(self.engine.poll_timeout(), self.wire.poll_timeout());
        if let Some(auth) = &self.auth {
            next = earliest(next, auth.poll_timeout());
        }
        // The 2026-07-28 timers (listen reopen, re-issues, acks) run in
        // Ready only: none is due while closing.
        if let (Some(m), Phase::Ready) = (self.era.modern(), self.phase) {
            next = earliest(next, m.poll_timeout());
        }
        if let Phase::Probing { .. } = self.phase {
            next = earliest(next, self.prober.poll_timeout());
        }
        earliest(next, self.tasks.poll_timeout())
    }

    // ----- authorization -------------------------------------------------

    /// The user agent was redirected back after [`Output::Authorize`]:
    /// `callback` is the URL it reached (or its query string).
    pub fn authorization_response(&mut self, now: Instant, callback: &str) {
        if let Some(auth) = self.auth.as_mut() {
            auth.handle_redirect(now, callback);
        }
        self.pump(now);
    }

    /// The application could not complete [`Output::Authorize`] (no
    /// browser, the user gave up): the waiting requests fail.
    pub fn authorization_failed(&mut self, now: Instant, reason: &str) {
        if let Some(auth) = self.auth.as_mut() {
            auth.handle_redirect_error(reason);
        }
        self.pump(now);
    }

    /// The state stored for the endpoint, read under the token store's
    /// lock after [`Output::LockTokens`] (`None`: nothing stored, no store,
    /// or the store could not be read). If no authorization waits for it
    /// any more, [`Output::UnlockTokens`] follows.
    pub fn stored_state(&mut self, now: Instant, stored: Option<AuthState>) {
        let taken = self.phase != Phase::Closed
            && self
                .auth
                .as_mut()
                .is_some_and(|a| a.handle_stored(now, stored));
        if !taken {
            self.out.push_back(Output::UnlockTokens);
        }
        self.pump(now);
    }

    /// The authorization state in use, if any.
    pub fn auth_state(&self) -> Option<&AuthState> {
        self.auth.as_ref().and_then(Auth::state)
    }

    // ----- getters ------------------------------------------------------

    /// The server's `initialize` result, once [`Output::Ready`] was emitted.
    pub fn server(&self) -> Option<&InitializeResult> {
        self.server.as_ref()
    }

    /// The negotiated protocol version.
    pub fn protocol_version(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.protocol_version.as_str())
    }

    /// The era spoken, once known.
    pub fn era(&self) -> Option<Era> {
        match self.era {
            Spoken::Unknown => None,
            Spoken::Legacy => Some(Era::Legacy),
            Spoken::Modern(_) => Some(Era::Modern),
        }
    }

    /// How the era spoken was found (pinned, remembered, probed, or the
    /// server started again after the probe), once it is known.
    pub fn era_finding(&self) -> Option<&EraFinding> {
        self.finding.as_ref()
    }

    /// The version spoken in the 2026-07-28 era.
    pub fn modern_version(&self) -> Option<&str> {
        self.era.modern().map(Modern::version)
    }

    /// Whether requests may be made.
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready || matches!(self.phase, Phase::Initializing { reinit: true, .. })
    }

    /// Whether [`Output::Closed`] has been queued.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Why the connection is closing or closed.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.reason.as_ref()
    }

    /// `stdio`, `streamable-http` or `sse` (the transport in use now, after
    /// any fallback).
    pub fn transport_name(&self) -> &'static str {
        self.wire.name()
    }

    /// The engine's counters.
    pub fn stats(&self) -> rpc::Stats {
        let mut stats = self.engine.stats();
        stats.cache_hits = self.era.modern().map_or(0, Modern::cache_hits);
        stats
    }

    /// Requests waiting for their response.
    pub fn pending(&self) -> usize {
        self.engine.pending_len()
    }

    /// Bytes the driver took with [`Output::Write`] and has not written
    /// yet (stdin that the server does not read): they count against
    /// [`EngineConfig::max_queued_bytes`](crate::rpc::EngineConfig::max_queued_bytes),
    /// so that requests fail with `QueueFull` and the connection's own
    /// answers stay bounded instead of piling up in the driver. Report it
    /// whenever it changes much (after each write or flush).
    pub fn set_unwritten(&mut self, bytes: usize) {
        self.engine.set_unwritten(bytes);
    }

    /// Gives back the buffer of an [`Output::Write`] the driver has
    /// written, for the next message to be written into: one allocation
    /// and one free less a call. Optional; one small buffer is kept (see
    /// [`Engine::recycle`](crate::rpc::Engine::recycle)).
    pub fn recycle(&mut self, written: Vec<u8>) {
        self.engine.recycle(written);
    }
}

/// The earlier of two deadlines, either of which may be absent.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
