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
//!   types    Input, Output, ConnectionConfig, TransportSpec, errors (public)
//!   wire     the transport in use, behind one interface
//!   auth     OAuth bookkeeping: the flow, the requests waiting for it
//!   probe    which era: the server/discover probe and its verdict
//!   modern   the 2026-07-28 era: envelope, input_required rounds, listen
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
    CallError, CloseReason, ConnectionConfig, Diagnostic, EraFinding, Input, Output, SpecError,
    TransportSpec,
};

use serde::Serialize;
use serde_json::value::RawValue;

use crate::auth::AuthState;
use crate::config::ServerConfig;
use crate::mcp::handshake::{accept_result, HandshakeError};
use crate::mcp::methods::{check_spec, notifications, Capability, MethodId, MethodSpec};
use crate::mcp::types::InitializeResult;
use crate::mcp::{ClientConfig, Method, ServerNotification};
use crate::modern::{ToolHeaders, MODERN_PROTOCOL_VERSION};
use crate::rpc::{
    self, Engine, ErrorObject, LocalError, RequestError, RequestId, RequestOptions, RespondStatus,
    SendKind,
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
        let mut deliver = |m: &[u8]| engine.handle_message(now, m);
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
        let wire = self.wire.poll_timeout();
        let flow = self.auth.as_ref().and_then(Auth::poll_timeout);
        // The 2026-07-28 timers (listen reopen, re-issues, acks) run in
        // Ready only: none is due while closing.
        let listen = self
            .era
            .modern()
            .filter(|_| self.phase == Phase::Ready)
            .and_then(Modern::poll_timeout);
        let tasks = self.tasks.poll_timeout();
        let probe = match self.phase {
            Phase::Probing { .. } => self.prober.poll_timeout(),
            _ => None,
        };
        [self.engine.poll_timeout(), wire, flow, listen, tasks, probe]
            .into_iter()
            .flatten()
            .min()
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

    // ----- application calls -------------------------------------------

    /// Sends a request. Methods tied to a server capability are refused
    /// locally when the server did not declare it.
    pub fn request(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        // The method is resolved once: every decision below reads its row.
        let id_of = MethodId::of(method);
        let spec = id_of.map(MethodId::spec);
        self.check_open(id_of)?;
        if let Some(server) = &self.server {
            check_spec(spec, &server.capabilities).map_err(|capability| {
                CallError::NotSupported {
                    method: method.to_string(),
                    capability: capability.name(),
                }
            })?;
        }
        let caps = self.server.as_ref().map(|s| &s.capabilities);
        let era = self.era.era();
        if era == Era::Modern && !self.client.tasks && spec.is_some_and(MethodSpec::is_task_method)
        {
            // The extension is not declared: the server would refuse.
            return Err(CallError::TurnedOff {
                method: method.to_owned(),
                what: "tasks are turned off for this client (ConnectOptions::tasks(false)), \
                       so the tasks extension is not declared",
            });
        }
        // Awaiting a task (checked only for that method: this is every
        // call's path).
        let awaits = (id_of == Some(MethodId::TaskResult))
            .then(|| caps.filter(|c| Capability::Tasks.declared_in(c)))
            .flatten();
        if let Some(caps) = awaits {
            // Awaiting a task: the connection follows it (both eras).
            let id = self.engine.reserve_id()?;
            self.tasks
                .await_task((now, era), id, params, options, caps)
                .map_err(LocalError::InvalidParams)?;
            self.pump(now);
            return Ok(id);
        }
        let augment = match (era, caps) {
            (Era::Legacy, Some(caps)) => self.tasks.augment(id_of, params, &options, caps),
            _ => Augment::Plain,
        };
        let params = match &augment {
            Augment::AsTask(p) => Some(&**p),
            _ => params,
        };
        let id = match self.era.modern_mut() {
            Some(m) => m.request(now, outbox!(self), method, id_of, params, options)?,
            None => {
                let id = self.engine.request(now, method, params, options)?;
                self.note_request(id, method, params);
                id
            }
        };
        if let Some(caps) = self.server.as_ref().map(|s| &s.capabilities) {
            self.tasks
                .requested((now, era), id, id_of, options, caps, augment);
        }
        self.pump(now);
        Ok(id)
    }

    /// Sends a request whose params are any serializable value.
    pub fn request_with<P: Serialize + ?Sized>(
        &mut self,
        now: Instant,
        method: &str,
        params: &P,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        let raw = serde_json::value::to_raw_value(params)
            .map_err(|_| CallError::Local(LocalError::InvalidParams("params do not serialize")))?;
        self.request(now, method, Some(&raw), options)
    }

    /// Sends the typed request `method` (any of [`crate::mcp::methods`]);
    /// its completion parses as `M::Result`. The one path to every MCP
    /// method: the adapters build on it, none writes a method name.
    ///
    /// ```
    /// # use std::time::Instant;
    /// use mcpwire::mcp::methods::CallTool;
    /// use mcpwire::{Connection, ConnectionConfig, TransportSpec};
    /// use mcpwire::rpc::RequestOptions;
    ///
    /// let now = Instant::now();
    /// let mut conn = Connection::new(ConnectionConfig::default(), TransportSpec::Stdio, now);
    /// // Before the handshake only ping may be sent.
    /// let call = CallTool::new("echo", serde_json::json!({"message": "hi"}));
    /// assert!(conn.send(now, &call, RequestOptions::default()).is_err());
    /// ```
    pub fn send<M: Method>(
        &mut self,
        now: Instant,
        method: &M,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        let params = method
            .params()
            .map_err(|_| CallError::Local(LocalError::InvalidParams("params do not serialize")))?;
        self.request(now, M::NAME, params.as_deref(), options)
    }

    /// Sends a notification (e.g. `notifications/roots/list_changed`).
    pub fn notify(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), CallError> {
        self.check_open(None)?;
        self.notify_engine(method, params)?;
        self.pump(now);
        Ok(())
    }

    /// Answers a [`Output::ServerRequest`].
    pub fn respond(
        &mut self,
        now: Instant,
        id: RequestId,
        response: Result<Box<RawValue>, ErrorObject>,
    ) -> Result<RespondStatus, CallError> {
        if matches!(self.phase, Phase::Closing | Phase::Closed) {
            return Err(self.closed_error());
        }
        // A request the server sent (the engine's) first: an id of ours for
        // a task's or a call's input never shadows one of the server's.
        if self.engine.has_server_request(&id) {
            let status = self.engine.respond(id, response)?;
            self.pump(now);
            return Ok(status);
        }
        let input = match self.tasks.respond(now, &mut self.out, &id, &response) {
            Some(status) => Some(status),
            None => self
                .era
                .modern_mut()
                .and_then(|m| m.respond(now, outbox!(self), &id, &response)),
        };
        if let Some(status) = input {
            if status == RespondStatus::Sent {
                self.pump(now);
            }
            return Ok(status);
        }
        let status = self.engine.respond(id, response)?;
        self.pump(now);
        Ok(status)
    }

    /// Cancels request `id`: it completes with [`RequestError::Cancelled`]
    /// and the server receives `notifications/cancelled`. Returns false if
    /// it had already completed.
    pub fn cancel(&mut self, now: Instant, id: u64, reason: &str) -> bool {
        if self.tasks.cancel(&mut self.out, id, reason) {
            self.pump(now);
            return true;
        }
        let done = match self
            .era
            .modern_mut()
            .and_then(|m| m.cancel(now, outbox!(self), id, reason))
        {
            Some(done) => done,
            None => self.engine.cancel(now, id, reason),
        };
        self.pump(now);
        done
    }

    /// Closes gracefully: pending requests complete with
    /// [`RequestError::Closed`], then the transport shuts down (stdio:
    /// close stdin, SIGTERM, SIGKILL; HTTP: DELETE the session). Ends with
    /// [`Output::Closed`].
    pub fn close(&mut self, now: Instant) {
        self.shut_down(now, CloseReason::Client);
        self.pump(now);
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

    // ----- routing ------------------------------------------------------

    /// Moves outputs between engine, wire, authorization and the app until
    /// all are quiet.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut moved = self.send_for_tasks(now);
            moved |= self.route_modern_ended(now);
            while let Some(o) = self.engine.poll_output() {
                moved = true;
                self.route_engine(now, o);
            }
            while let Some(o) = self.wire.poll_output() {
                moved = true;
                self.route_wire(now, o);
            }
            while let Some(step) = self.auth.as_mut().and_then(Auth::poll_output) {
                moved = true;
                self.route_auth(now, step);
            }
            if !moved {
                break;
            }
        }
        if self.ready_pending && self.phase == Phase::Ready && self.wire.settled() {
            self.ready_pending = false;
            self.out.push_back(Output::Ready);
        }
        if self.phase == Phase::Closing && self.wire.is_closed() {
            self.finish();
        }
    }

    fn route_engine(&mut self, now: Instant, o: rpc::Output) {
        match o {
            rpc::Output::Send { bytes, kind } => {
                if let (true, SendKind::Request { id }, Some(auth)) =
                    (self.wire.auth_pending(), &kind, self.auth.as_mut())
                {
                    if self.engine.suspend_timeout(*id) {
                        auth.hold(*id);
                    }
                }
                self.wire.send(now, bytes, kind)
            }
            rpc::Output::Complete { id, outcome } => {
                self.wire.request_done(id);
                if self.prober.is_probe(id) {
                    return self.on_probe(now, outcome);
                }
                if self.prober.take_abandoned(id) {
                    return;
                }
                let (id, outcome) = match self.era.modern_mut() {
                    Some(m) => match m.complete(now, outbox!(self), &self.client, id, outcome) {
                        Some(delivered) => delivered,
                        None => return,
                    },
                    None => (id, outcome),
                };
                let (id, outcome) = match self.tasks.complete(task_cx!(self, now), id, outcome) {
                    Some(delivered) => delivered,
                    None => return,
                };
                if self.initialize_id == Some(id) {
                    self.initialize_id = None;
                    // Closing: the handshake is over, and the app never
                    // saw this id.
                    if let Phase::Initializing { reinit, .. } = self.phase {
                        self.on_initialize(now, outcome, reinit);
                    }
                } else {
                    if let (Ok(_), Some(auth)) = (&outcome, self.auth.as_mut()) {
                        auth.succeeded();
                    }
                    self.out.push_back(Output::Complete { id, outcome });
                }
            }
            rpc::Output::Progress { id, progress } => {
                let id = self.app_id(id);
                self.out.push_back(Output::Progress { id, progress })
            }
            rpc::Output::ServerRequest { id, method, params } => self
                .out
                .push_back(Output::ServerRequest { id, method, params }),
            rpc::Output::ServerRequestCancelled { id, reason } => self
                .out
                .push_back(Output::ServerRequestCancelled { id, reason }),
            rpc::Output::Notification { method, params } => {
                if let Some(m) = self.era.modern_mut() {
                    if m.is_internal_notification(&method) {
                        return m.subscription_acknowledged(&mut self.out, params.as_deref());
                    }
                    m.notified(&method, params.as_deref());
                }
                self.tasks
                    .notified(task_cx!(self, now), &method, params.as_deref());
                self.out
                    .push_back(Output::Notification(ServerNotification::parse(
                        method, params,
                    )))
            }
            rpc::Output::Diagnostic(d) => {
                self.out.push_back(Output::Diagnostic(Diagnostic::Rpc(d)))
            }
            // We closed the engine ourselves (shut_down); `Closed` is ours
            // to emit once the transport is done.
            rpc::Output::Closed { .. } => {}
        }
    }

    fn route_wire(&mut self, now: Instant, output: WireOutput) {
        match output {
            WireOutput::Output(o) => self.out.push_back(o),
            WireOutput::Http(mut r) => {
                r.carries = r.carries.map(|id| self.app_id(id));
                self.out.push_back(Output::Http(r))
            }
            WireOutput::Fail { id, error } => {
                self.engine.fail(now, id, error);
            }
            WireOutput::Lost { id, error } => {
                if let Some(m) = self.era.modern_mut() {
                    m.stream_lost(id);
                }
                self.engine.fail(now, id, error);
            }
            WireOutput::Oversize {
                glimpse,
                error,
                diagnostic,
            } => {
                if let Some(d) = diagnostic {
                    self.out.push_back(Output::Diagnostic(d));
                }
                self.engine.handle_oversize(now, &glimpse, error);
            }
            WireOutput::Fatal(m) => self.shut_down(now, CloseReason::Transport(m)),
            WireOutput::SessionExpired => self.reinitialize(now),
            WireOutput::FallbackToLegacy { resend } => self.fall_back(now, resend),
            WireOutput::AuthRequired {
                status,
                challenges,
                hints,
                request,
            } => self.on_auth_required(now, status, &challenges, &hints, request),
        }
    }

    fn route_auth(&mut self, now: Instant, step: AuthStep) {
        match step {
            AuthStep::Output(o) => self.out.push_back(o),
            AuthStep::Authorized(state) => {
                let dpop = self.auth.as_ref().and_then(|a| a.dpop_of(&state));
                self.wire.set_dpop(dpop);
                self.wire.authorized(now, state.authorization());
                self.out.push_back(Output::Authorized(state));
                self.resume_suspended(now);
            }
            AuthStep::Adopted(state) => {
                let dpop = self.auth.as_ref().and_then(|a| a.dpop_of(&state));
                self.wire.set_dpop(dpop);
                self.wire.authorized(now, state.authorization());
                self.resume_suspended(now);
            }
            AuthStep::Failed(message) => {
                self.wire.authorization_failed(&message);
                self.resume_suspended(now);
            }
        }
    }

    /// The application's id of engine request `id` (they differ for the
    /// retries of a 2026-07-28 call).
    fn app_id(&self, id: u64) -> u64 {
        if let Some(app) = self.tasks.app_id(id) {
            return app;
        }
        self.era.modern().map_or(id, |m| m.app_id(id))
    }

    // ----- messages the connection builds ---------------------------------

    /// Notes the era headers of request `id` just built.
    fn note_request(&mut self, id: u64, method: &str, params: Option<&RawValue>) {
        let none = ToolHeaders::default();
        let tools = self.era.modern().map_or(&none, Modern::tools);
        self.wire.note_raw_request(id, method, params, tools);
    }

    /// Has the engine build notification `method`, noting its era headers.
    fn notify_engine(&mut self, method: &str, params: Option<&RawValue>) -> Result<(), LocalError> {
        let none = ToolHeaders::default();
        let tools = self.era.modern().map_or(&none, Modern::tools);
        self.wire.note_notification(method, params, tools);
        let sent = self.engine.notify(method, params);
        if sent.is_err() {
            self.wire.forget_notification();
        }
        sent
    }

    // ----- the era and the handshake ---------------------------------------

    fn start(&mut self, now: Instant) {
        if self.prober.handshake_first(&self.wire) {
            self.finding = Some(match self.prober.policy() {
                EraPolicy::Auto if !self.wire.is_legacy_sse() => EraFinding::Remembered,
                _ => EraFinding::Pinned,
            });
            self.start_handshake(now, false);
        } else {
            self.start_probe(now, MODERN_PROTOCOL_VERSION, false);
        }
    }

    fn start_probe(&mut self, now: Instant, version: &str, retried: bool) {
        let sent = self.prober.send(
            now,
            &mut self.engine,
            &mut self.wire,
            &self.client,
            version,
            retried,
        );
        match sent {
            Ok(id) => self.phase = Phase::Probing { id },
            Err(e) => self.shut_down(now, CloseReason::Handshake(format!("server/discover: {e}"))),
        }
    }

    /// The probe's answer decides the era.
    fn on_probe(&mut self, now: Instant, outcome: Result<Box<RawValue>, RequestError>) {
        match self.prober.verdict(outcome) {
            None => {}
            Some(ProbeStep::Modern { version, server }) => {
                self.finding = Some(match self.prober.policy() {
                    EraPolicy::Modern => EraFinding::Pinned,
                    _ => EraFinding::Discovered,
                });
                let meta = probe::envelope(&self.client, &version);
                self.server = Some(*server);
                self.era = Spoken::Modern(Box::new(Modern::new(version, meta)));
                self.phase = Phase::Ready;
                self.ready_pending = true;
                self.open_listen(now);
            }
            Some(ProbeStep::Again(version)) => self.start_probe(now, &version, true),
            Some(ProbeStep::Handshake { silent: Some(ms) }) if self.wire.is_stdio() => {
                self.respawn(
                    now,
                    &format!("did not answer server/discover within {ms} ms"),
                );
            }
            Some(ProbeStep::Handshake { .. }) => {
                self.finding = Some(EraFinding::Refused);
                self.wire.end_era();
                self.start_handshake(now, false);
            }
            Some(ProbeStep::Close(reason)) => self.shut_down(now, reason),
        }
    }

    /// `subscriptions/listen` for the list changes the server announces.
    fn open_listen(&mut self, now: Instant) {
        if let (Some(m), Some(server)) = (self.era.modern_mut(), &self.server) {
            m.open_listen(
                now,
                outbox!(self),
                &server.capabilities,
                self.listen_enabled,
            );
        }
    }

    fn start_handshake(&mut self, now: Instant, reinit: bool) {
        let params = self.client.initialize_params();
        match self.engine.request(
            now,
            MethodId::Initialize.name(),
            Some(&params),
            RequestOptions::default(),
        ) {
            Ok(id) => {
                self.note_request(id, MethodId::Initialize.name(), None);
                self.phase = Phase::Initializing { id, reinit };
                self.initialize_id = Some(id);
            }
            Err(e) => self.shut_down(now, CloseReason::Handshake(format!("initialize: {e}"))),
        }
    }

    fn on_initialize(
        &mut self,
        now: Instant,
        outcome: Result<Box<RawValue>, RequestError>,
        reinit: bool,
    ) {
        let mut initialize_error = None;
        let result = match outcome {
            Ok(raw) => accept_result(&raw),
            Err(e) => {
                let text = e.to_string();
                initialize_error = Some(e);
                Err(HandshakeError::Failed(text))
            }
        };
        match result {
            Ok(result) => {
                let version = result.protocol_version.clone();
                self.engine.set_accept_batches(version == "2025-03-26");
                self.server = Some(result);
                self.era = Spoken::Legacy;
                if let Err(e) = self.notify_engine(notifications::INITIALIZED, None) {
                    self.shut_down(now, CloseReason::Handshake(format!("initialized: {e}")));
                    return;
                }
                // Route the notification to the transport before telling it
                // the session is ready, so it goes out first.
                while let Some(o) = self.engine.poll_output() {
                    self.route_engine(now, o);
                }
                self.wire.initialized(now, &version);
                self.phase = Phase::Ready;
                if !reinit {
                    self.ready_pending = true;
                }
            }
            Err(e) => {
                if let (HandshakeError::Failed(_), Some(err)) = (&e, &initialize_error) {
                    // A server locked to 2026-07-28, or one remembered as
                    // legacy that no longer is, gets one probe.
                    if self.prober.probe_after(err, &self.wire) {
                        self.start_probe(now, MODERN_PROTOCOL_VERSION, false);
                        return;
                    }
                }
                self.shut_down(now, CloseReason::Handshake(e.to_string()))
            }
        }
    }

    /// The server process is gone (the message says how). During the
    /// probe, or the handshake that followed it on the same process, a
    /// stdio server is started again once (the probe may be what ended
    /// it); otherwise the connection closes.
    fn server_gone(&mut self, now: Instant, message: String) {
        let after_probe = match self.phase {
            Phase::Probing { .. } => true,
            Phase::Initializing { reinit: false, .. } => self.prober.probed(),
            _ => false,
        };
        if after_probe
            && !self.respawned
            && self.wire.is_stdio()
            && self.prober.policy() == EraPolicy::Auto
        {
            return self.respawn(now, &format!("ended when probed ({message})"));
        }
        self.shut_down(now, CloseReason::ServerGone(message))
    }

    /// Stops the stdio server and starts it again for the `initialize`
    /// handshake: the probe (or the `initialize` the old process took in)
    /// ends unseen, and nothing meant for the old process reaches the new
    /// one (the wire sends nothing until the new one is reported).
    fn respawn(&mut self, now: Instant, why: &str) {
        self.respawned = true;
        self.finding = Some(EraFinding::Restarted(why.to_owned()));
        if let Some(id) = self.prober.abandon() {
            self.engine.fail(
                now,
                id,
                RequestError::Closed {
                    reason: "the server is started again".into(),
                },
            );
        }
        if let Some(id) = self.initialize_id {
            // Its completion is swallowed: the phase is no longer
            // Initializing when it arrives.
            self.engine.fail(
                now,
                id,
                RequestError::Closed {
                    reason: "the server is started again".into(),
                },
            );
        }
        self.phase = Phase::Respawning;
        // The spec's way with a server of the handshake era: a note.
        self.out
            .push_back(Output::Diagnostic(Diagnostic::Note(format!(
                "the server {why}: starting it again for the initialize handshake"
            ))));
        self.wire.restart(now, why);
    }

    /// The new process of [`Connection::respawn`] runs.
    fn respawned(&mut self, now: Instant) {
        if self.phase == Phase::Respawning {
            self.wire.end_era();
            self.start_handshake(now, false);
        }
    }

    /// The server dropped our HTTP session: start over with a fresh
    /// `initialize` (the transport holds everything else meanwhile).
    fn reinitialize(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Ready) {
            // Expired during the handshake itself: nothing to renew.
            self.shut_down(
                now,
                CloseReason::Transport("server ended the session during initialization".into()),
            );
            return;
        }
        self.wire.reset_session();
        self.start_handshake(now, true);
    }

    /// Streamable HTTP was refused: speak legacy HTTP+SSE to the same URL
    /// and re-send what was waiting (the `initialize` first).
    fn fall_back(&mut self, now: Instant, resend: Vec<(Vec<u8>, SendKind)>) {
        let bearer = self.auth.as_ref().and_then(Auth::bearer);
        let config = with_bearer(&self.http_config, bearer);
        if self.wire.fall_back(now, config, resend) {
            self.out.push_back(Output::Diagnostic(Diagnostic::Transport(
                "server refused Streamable HTTP; falling back to legacy HTTP+SSE".into(),
            )));
        }
    }

    // ----- authorization ------------------------------------------------

    /// An exchange met 401/403: start a flow unless one runs.
    fn on_auth_required(
        &mut self,
        now: Instant,
        status: u16,
        challenges: &[String],
        hints: &str,
        request: Option<u64>,
    ) {
        let Some(endpoint) = self.wire.auth_endpoint().cloned() else {
            return;
        };
        let Some(auth) = self.auth.as_mut() else {
            let message = format!("HTTP {status} and no authorization configured");
            return self.wire.authorization_failed(&message);
        };
        if let Some(id) = request {
            if self.engine.suspend_timeout(id) {
                auth.hold(id);
            }
        }
        if let Err(message) = auth.required(now, &endpoint, status, challenges, hints) {
            self.wire.authorization_failed(&message);
            self.resume_suspended(now);
        }
    }

    /// Restarts the clocks of the requests that waited for a flow.
    fn resume_suspended(&mut self, now: Instant) {
        if let Some(auth) = self.auth.as_mut() {
            for id in auth.take_suspended() {
                self.engine.resume_timeout(now, id);
            }
        }
    }

    // ----- failures and the end -------------------------------------------

    fn closed_error(&self) -> CallError {
        CallError::Closed(self.reason.as_ref().map_or_else(
            || "connection closed".to_string(),
            |r| r.message().to_string(),
        ))
    }

    fn check_open(&self, method: Option<MethodId>) -> Result<(), CallError> {
        match self.phase {
            Phase::Ready => Ok(()),
            Phase::Initializing { reinit: true, .. } => Ok(()),
            Phase::Initializing { .. } | Phase::Probing { .. }
                if method == Some(MethodId::Ping) =>
            {
                Ok(())
            }
            Phase::Initializing { .. } | Phase::Probing { .. } | Phase::Respawning => {
                Err(CallError::NotReady)
            }
            Phase::Closing | Phase::Closed => Err(self.closed_error()),
        }
    }

    /// Calls the 2026-07-28 sub-state ended by itself (a re-issue or an
    /// input round that could not go on, a cancel between requests, the
    /// close): through the tasks sub-state, which may own them, to the
    /// application. Whether there were any.
    fn route_modern_ended(&mut self, now: Instant) -> bool {
        let ended = match self.era.modern_mut() {
            Some(m) => m.take_ended(),
            None => return false,
        };
        if ended.is_empty() {
            return false;
        }
        for (id, outcome) in ended {
            if let Some((id, outcome)) = self.tasks.complete(task_cx!(self, now), id, outcome) {
                self.out.push_back(Output::Complete { id, outcome });
            }
        }
        true
    }

    /// Sends what the tasks sub-state queued (stamped for the era) and
    /// cancels what it no longer waits for. Whether anything moved.
    fn send_for_tasks(&mut self, now: Instant) -> bool {
        let mut moved = false;
        for (id, keep) in self.tasks.take_lingers() {
            if keep {
                self.engine.linger_progress(id);
            } else {
                self.engine.end_progress(id);
            }
        }
        for id in self.tasks.take_drops() {
            moved = true;
            let done = self
                .era
                .modern_mut()
                .and_then(|m| m.cancel(now, outbox!(self), id, "no longer needed"));
            if done.is_none() {
                self.engine.cancel(now, id, "no longer needed");
            }
        }
        if self.phase != Phase::Ready {
            return moved;
        }
        if let Some(ids) = self.tasks.take_watch_change() {
            if let (Some(m), true) = (self.era.modern_mut(), self.listen_enabled) {
                m.watch_tasks(now, outbox!(self), ids);
            }
        }
        while let Some(send) = self.tasks.next_send(now) {
            moved = true;
            let method = send.method();
            let raw = serde_json::value::to_raw_value(&send.params).expect("JSON serializes");
            let sent = match self.era.modern_mut() {
                Some(m) => {
                    let id = Some(send.method_id());
                    m.request(now, outbox!(self), method, id, Some(&raw), send.options)
                }
                None => match self.engine.request(now, method, Some(&raw), send.options) {
                    Ok(id) => {
                        self.note_request(id, method, Some(&raw));
                        Ok(id)
                    }
                    Err(e) => Err(e.into()),
                },
            };
            match sent {
                Ok(id) => self.tasks.sent(id, &send),
                Err(e) => self.tasks.send_failed(&mut self.out, &send, e.to_string()),
            }
        }
        moved
    }

    /// Ends the session: the engine completes everything pending with the
    /// reason, the transport shuts down; `Closed` follows when it is done.
    fn shut_down(&mut self, now: Instant, reason: CloseReason) {
        if matches!(self.phase, Phase::Closing | Phase::Closed) {
            return;
        }
        if let Some(auth) = self.auth.as_mut() {
            auth.abandon("the connection is closing");
        }
        if let Some(m) = self.era.modern_mut() {
            m.close(&mut self.out, reason.message());
        }
        self.route_modern_ended(now);
        self.tasks.close(&mut self.out, reason.message());
        self.engine.close(reason.message());
        self.reason = Some(reason);
        self.phase = Phase::Closing;
        self.wire.begin_close(now);
    }

    fn finish(&mut self) {
        if self.phase == Phase::Closed {
            return;
        }
        self.phase = Phase::Closed;
        let reason = self.reason.clone().unwrap_or(CloseReason::Client);
        self.out.push_back(Output::Closed(reason));
    }
}
