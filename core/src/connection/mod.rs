//! One MCP client connection as a sans-IO value: the JSON-RPC engine, the
//! session (handshake, capabilities) and one transport, behind a single
//! `handle_*` / `poll_*` surface.
//!
//! ```text
//!            app calls (request, call_tool, respond, cancel, close)
//!                               │
//!   Input ──► Connection ──► rpc::Engine ──► Output::Complete / Notification / ServerRequest …
//!   (bytes,      │    ▲                │
//!    HTTP,       ▼    │ messages       ▼ messages
//!    exits)   transport (stdio | Streamable HTTP | legacy SSE) ──► Output::Write / Http / Signal …
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
//! last output; after it the connection ignores every input.

mod modern;

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

pub use crate::modern::probe::{Era, EraPolicy};

use serde::Serialize;
use serde_json::value::RawValue;

use crate::auth::{
    parse_challenges, AuthAction, AuthConfig, AuthFlow, AuthState, Secrets, Trigger,
};
use crate::codec::jsonl::JsonlError;
use crate::config::{ConfigError, ServerConfig, TransportKind};
use crate::mcp::handshake::{accept_result, HandshakeError};
use crate::mcp::types::InitializeResult;
use crate::mcp::{check_capability, ClientConfig, Method, ServerNotification};
use crate::rpc::{
    self, Engine, EngineConfig, ErrorObject, LocalError, Progress, RequestError, RequestId,
    RequestOptions, RespondStatus, SendKind,
};
use crate::transport::http::{HttpEvent, StreamableHttp};
use crate::transport::legacy::{LegacyEvent, LegacySse};
use crate::transport::stdio::{Death, ExitStatus, Signal, Stdio, StdioAction, StdioConfig};
use crate::transport::url::UrlError;
use crate::transport::{
    ExchangeId, HttpConfig, HttpRequest, HttpUrl, RequestFailure, ResponseHead,
};

/// Everything a [`Connection`] is configured with.
#[derive(Debug, Clone, Default)]
pub struct ConnectionConfig {
    /// Who the client is and which capabilities it declares.
    pub client: ClientConfig,
    /// Engine limits and the default request timeout.
    pub engine: EngineConfig,
    /// stdio limits and shutdown grace periods.
    pub stdio: StdioConfig,
    /// HTTP headers, limits and retry policy.
    pub http: HttpConfig,
    /// OAuth for HTTP servers: when set, a 401 (or 403
    /// `insufficient_scope`) starts an authorization ([`Output::Authorize`],
    /// [`Output::Authorized`]) and the requests it held are sent again.
    pub auth: Option<AuthConfig>,
    /// Which protocol era(s) to speak (default: probe for 2026-07-28, fall
    /// back to the `initialize` handshake).
    pub era: EraPolicy,
    /// The era this server was found to speak before (remembered by the
    /// application): with [`Era::Legacy`] and [`EraPolicy::Auto`] the
    /// handshake comes first and the probe only if it fails.
    pub era_hint: Option<Era>,
    /// How long the `server/discover` probe may take before the server is
    /// taken for a legacy one (default 3 s).
    pub probe_timeout: Option<Duration>,
    /// In the 2026-07-28 era, open `subscriptions/listen` for the list
    /// changes the server announces (default true; `HttpConfig::listen`
    /// false turns it off too).
    pub no_subscriptions: bool,
}

/// Exchange ids of authorization traffic carry this bit (the transports
/// number theirs from 0).
const AUTH_EXCHANGES: u64 = 1 << 62;

/// Which wire a [`Connection`] speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportSpec {
    /// A child process the driver has spawned with piped stdio.
    Stdio,
    /// Streamable HTTP at this endpoint (falls back to legacy SSE when the
    /// server refuses the first POST with 400, 404 or 405).
    StreamableHttp(HttpUrl),
    /// Legacy HTTP+SSE with this event-stream URL.
    LegacySse(HttpUrl),
}

impl TransportSpec {
    /// The transport a [`ServerConfig`] selects.
    pub fn from_server(server: &ServerConfig) -> Result<TransportSpec, SpecError> {
        let url = || -> Result<HttpUrl, SpecError> {
            Ok(HttpUrl::parse(server.url.as_deref().unwrap_or_default())?)
        };
        Ok(match server.transport()? {
            TransportKind::Stdio => TransportSpec::Stdio,
            TransportKind::StreamableHttp => TransportSpec::StreamableHttp(url()?),
            TransportKind::LegacySse => TransportSpec::LegacySse(url()?),
        })
    }
}

/// A [`ServerConfig`] that cannot be connected to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The entry is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The URL is invalid.
    #[error(transparent)]
    Url(#[from] UrlError),
}

/// What the driver feeds in.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// Bytes read from the child's stdout.
    Stdout(&'a [u8]),
    /// The child's stdout reached EOF.
    StdoutEof,
    /// Bytes read from the child's stderr.
    Stderr(&'a [u8]),
    /// The child's stderr reached EOF (report it at once if stderr is not
    /// piped).
    StderrEof,
    /// Writing to the child's stdin failed (e.g. broken pipe).
    WriteFailed(&'a str),
    /// The child exited. Report it as soon as it is known: the connection
    /// acts on it once stdout and stderr have ended (or
    /// [`StdioConfig::exit_grace`] passed), so that an error can quote the
    /// server's last words on stderr.
    Exited(ExitStatus),
    /// The response head of an exchange (1xx already skipped).
    HttpHead {
        /// The exchange.
        exchange: ExchangeId,
        /// Status and headers.
        head: &'a ResponseHead,
    },
    /// Body bytes of an exchange, as they arrive (decoded from chunked).
    HttpBody {
        /// The exchange.
        exchange: ExchangeId,
        /// The bytes.
        data: &'a [u8],
    },
    /// The body of an exchange ended.
    HttpEnd {
        /// The exchange.
        exchange: ExchangeId,
    },
    /// An exchange failed before its end (connect error, reset, bad
    /// framing). No further inputs follow for it.
    HttpFailed {
        /// The exchange.
        exchange: ExchangeId,
        /// What happened.
        error: &'a str,
    },
}

/// What the driver must do, or report to the application.
#[derive(Debug)]
#[non_exhaustive]
pub enum Output {
    /// Write all of these bytes to the child's stdin, in order, before any
    /// later `Write` (await the write: that is the backpressure).
    Write(Vec<u8>),
    /// Close the child's stdin.
    CloseStdin,
    /// Send this signal to the child.
    Signal(Signal),
    /// Perform this HTTP exchange and report its response with
    /// [`Input::HttpHead`], [`Input::HttpBody`], [`Input::HttpEnd`] or
    /// [`Input::HttpFailed`].
    Http(HttpRequest),
    /// Stop this exchange (close its connection; don't report it further).
    AbortHttp(ExchangeId),
    /// The handshake is done: [`Connection::server`] is available and
    /// requests may be made.
    Ready,
    /// Request `id` has ended; its only completion.
    Complete {
        /// The id returned when the request was made.
        id: u64,
        /// The raw result or how it failed.
        outcome: Result<Box<RawValue>, RequestError>,
    },
    /// Progress for request `id`.
    Progress {
        /// The request.
        id: u64,
        /// The values.
        progress: Progress,
    },
    /// A notification from the server.
    Notification(ServerNotification),
    /// The server wants an OAuth authorization: send the user agent to
    /// `url` (open a browser) and report where it was redirected with
    /// [`Connection::authorization_response`] (or give up with
    /// [`Connection::authorization_failed`]). Requests wait meanwhile.
    Authorize {
        /// The authorization URL.
        url: String,
    },
    /// An authorization succeeded: persist this state (a token store) to
    /// reuse it next time ([`AuthConfig::state`]).
    Authorized(AuthState),
    /// A request from the server that the application declared it handles
    /// (roots, sampling, elicitation). Answer it exactly once with
    /// [`Connection::respond`].
    ServerRequest {
        /// The server's id.
        id: RequestId,
        /// The method.
        method: String,
        /// The raw params.
        params: Option<Box<RawValue>>,
    },
    /// The server withdrew its request `id`.
    ServerRequestCancelled {
        /// The server's id.
        id: RequestId,
        /// Its reason.
        reason: Option<String>,
    },
    /// One line the child wrote to stderr (log it at debug level).
    Log(String),
    /// Something was dropped or went wrong without ending the connection
    /// (log it at warn level).
    Diagnostic(Diagnostic),
    /// The connection is over (the last output).
    Closed(CloseReason),
}

/// Something worth a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Diagnostic {
    /// From the JSON-RPC engine (malformed/invalid message, unknown id…).
    Rpc(rpc::Diagnostic),
    /// A stdout framing problem (over-long line).
    Framing(JsonlError),
    /// From an HTTP transport.
    Transport(String),
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Diagnostic::Rpc(d) => write!(f, "{d:?}"),
            Diagnostic::Framing(e) => write!(f, "{e}"),
            Diagnostic::Transport(s) => f.write_str(s),
        }
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// [`Connection::close`] was called.
    Client,
    /// The server process exited or stopped talking; the message names the
    /// status and quotes its stderr tail.
    ServerGone(String),
    /// The handshake failed (unsupported version, error answer…).
    Handshake(String),
    /// The transport cannot go on (HTTP protocol error, stream closed…).
    Transport(String),
}

impl CloseReason {
    /// The text requests still pending were completed with.
    pub fn message(&self) -> &str {
        match self {
            CloseReason::Client => "connection closed by the client",
            CloseReason::ServerGone(m) | CloseReason::Handshake(m) | CloseReason::Transport(m) => m,
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// An app call the connection refused; nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The handshake has not finished (only `ping` may be sent before).
    #[error("not connected yet: the initialize handshake has not finished")]
    NotReady,
    /// The connection is closing or closed.
    #[error("not connected: {0}")]
    Closed(String),
    /// The server did not declare the capability the method needs.
    #[error("server does not support {method} (capability `{capability}` not declared)")]
    NotSupported {
        /// The method.
        method: String,
        /// The missing capability.
        capability: &'static str,
    },
    /// The engine refused (limits, params, unknown server request).
    #[error(transparent)]
    Local(#[from] LocalError),
}

enum Wire {
    Stdio(Stdio),
    Http(StreamableHttp),
    Legacy(LegacySse),
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
    Ready,
    /// The engine is closed; waiting for the transport to finish.
    Closing,
    Closed,
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
    /// The HTTP transport reported `Finished`; `Closed` follows once the
    /// engine's last completions are out.
    wire_finished: bool,
    /// The `initialize` request in flight: its completion is the
    /// handshake's, never the app's (also when it ends by a close).
    initialize_id: Option<u64>,
    /// The handshake is done but `Ready` waits for the HTTP listener to
    /// settle.
    ready_pending: bool,
    auth: Option<Auth>,
    era_policy: EraPolicy,
    era_hint: Option<Era>,
    probe_timeout: Duration,
    probe: Option<modern::Probe>,
    /// Probes sent (bounds re-probing).
    probes: u32,
    modern: Option<modern::Modern>,
    era_headers: modern::EraHeaders,
    listen_enabled: bool,
    out: VecDeque<Output>,
}

/// The connection's authorization bookkeeping.
struct Auth {
    config: AuthConfig,
    /// The state in use (from the store or the last flow).
    state: Option<AuthState>,
    flow: Option<AuthFlow>,
    /// Flows in a row without a request succeeding in between.
    attempts: u32,
    next_exchange: u64,
    /// Requests whose clocks stopped while they wait for the flow.
    suspended: Vec<u64>,
    /// `HTTP 401 (WWW-Authenticate: …)` of the answer that started the
    /// flow, for the failure message.
    trigger: String,
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
        let auth = config.auth.map(|c| Auth {
            state: c.state.clone(),
            config: c,
            flow: None,
            attempts: 0,
            next_exchange: AUTH_EXCHANGES,
            suspended: Vec::new(),
            trigger: String::new(),
        });
        let bearer = auth
            .as_ref()
            .and_then(|a| a.state.as_ref())
            .map(AuthState::bearer);
        let wire = match transport {
            TransportSpec::Stdio => Wire::Stdio(Stdio::new(config.stdio)),
            TransportSpec::StreamableHttp(url) => {
                let mut h = StreamableHttp::new(url, config.http.clone());
                if auth.is_some() {
                    h.enable_auth();
                    h.set_authorization(bearer);
                }
                Wire::Http(h)
            }
            TransportSpec::LegacySse(url) => {
                Wire::Legacy(LegacySse::new(now, url, with_bearer(&config.http, bearer)))
            }
        };
        let listen_enabled = !config.no_subscriptions && config.http.listen;
        let mut conn = Connection {
            engine: Engine::new(engine_config),
            wire,
            phase: Phase::Closed,
            client: config.client,
            http_config: config.http,
            server: None,
            reason: None,
            wire_finished: false,
            initialize_id: None,
            ready_pending: false,
            auth,
            era_policy: config.era,
            era_hint: config.era_hint,
            probe_timeout: config.probe_timeout.unwrap_or(Duration::from_secs(3)),
            probe: None,
            probes: 0,
            modern: None,
            era_headers: modern::EraHeaders::default(),
            listen_enabled,
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

    fn start_handshake(&mut self, now: Instant, reinit: bool) {
        let params = self.client.initialize_params();
        match self
            .engine
            .request(now, "initialize", Some(&params), RequestOptions::default())
        {
            Ok(id) => {
                self.built_request(id, "initialize", None);
                self.phase = Phase::Initializing { id, reinit };
                self.initialize_id = Some(id);
            }
            Err(e) => self.shut_down(now, CloseReason::Handshake(format!("initialize: {e}"))),
        }
    }

    // ----- inputs -------------------------------------------------------

    /// Feeds one input.
    pub fn handle_input(&mut self, now: Instant, input: Input<'_>) {
        if self.phase == Phase::Closed {
            return;
        }
        if let Input::HttpHead { exchange, .. }
        | Input::HttpBody { exchange, .. }
        | Input::HttpEnd { exchange }
        | Input::HttpFailed { exchange, .. } = input
        {
            if exchange.0 & AUTH_EXCHANGES != 0 {
                // Authorization traffic: the flow's (a finished flow's late
                // input is dropped).
                if let Some(flow) = self.auth.as_mut().and_then(|a| a.flow.as_mut()) {
                    match input {
                        Input::HttpHead { head, .. } => flow.handle_head(now, exchange, head),
                        Input::HttpBody { data, .. } => flow.handle_body(now, exchange, data),
                        Input::HttpEnd { .. } => flow.handle_end(now, exchange),
                        Input::HttpFailed { error, .. } => flow.handle_failed(now, exchange, error),
                        _ => {}
                    }
                    self.pump(now);
                }
                return;
            }
        }
        let engine = &mut self.engine;
        let mut deliver = |m: &[u8]| engine.handle_message(now, m);
        let mut death = None;
        match (&mut self.wire, input) {
            (Wire::Stdio(s), Input::Stdout(bytes)) => s.handle_stdout(bytes, deliver),
            (Wire::Stdio(s), Input::StdoutEof) => death = s.handle_stdout_eof(now),
            (Wire::Stdio(s), Input::Stderr(bytes)) => s.handle_stderr(bytes),
            (Wire::Stdio(s), Input::StderrEof) => death = s.handle_stderr_eof(),
            (Wire::Stdio(s), Input::WriteFailed(_)) => s.handle_write_failed(now),
            (Wire::Stdio(s), Input::Exited(status)) => death = s.handle_exit(now, status),
            (Wire::Http(h), Input::HttpHead { exchange, head }) => {
                h.handle_head(now, exchange, head, &mut deliver)
            }
            (Wire::Http(h), Input::HttpBody { exchange, data }) => {
                h.handle_body(now, exchange, data, &mut deliver)
            }
            (Wire::Http(h), Input::HttpEnd { exchange }) => {
                h.handle_end(now, exchange, &mut deliver)
            }
            (Wire::Http(h), Input::HttpFailed { exchange, error }) => {
                h.handle_failed(now, exchange, error, &mut deliver)
            }
            (Wire::Legacy(l), Input::HttpHead { exchange, head }) => {
                l.handle_head(now, exchange, head, &mut deliver)
            }
            (Wire::Legacy(l), Input::HttpBody { exchange, data }) => {
                l.handle_body(now, exchange, data, &mut deliver)
            }
            (Wire::Legacy(l), Input::HttpEnd { exchange }) => {
                l.handle_end(now, exchange, &mut deliver)
            }
            (Wire::Legacy(l), Input::HttpFailed { exchange, error }) => {
                l.handle_failed(now, exchange, error, &mut deliver)
            }
            (_, input) => self
                .out
                .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "input {input:?} does not belong to this transport; ignored"
                )))),
        }
        if let Some(death) = death {
            self.on_death(now, death);
        }
        self.pump(now);
    }

    /// A timer fired (spurious calls are harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.phase == Phase::Closed {
            return;
        }
        self.engine.handle_timeout(now);
        if let Some(flow) = self.auth.as_mut().and_then(|a| a.flow.as_mut()) {
            flow.handle_timeout(now);
        }
        self.modern_timeout(now);
        let death = match &mut self.wire {
            Wire::Stdio(s) => s.handle_timeout(now),
            Wire::Http(h) => {
                h.handle_timeout(now);
                None
            }
            Wire::Legacy(l) => {
                l.handle_timeout(now);
                None
            }
        };
        if let Some(death) = death {
            self.on_death(now, death);
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
        let wire = match &self.wire {
            Wire::Stdio(s) => s.poll_timeout(),
            Wire::Http(h) => h.poll_timeout(),
            Wire::Legacy(l) => l.poll_timeout(),
        };
        let flow = self
            .auth
            .as_ref()
            .and_then(|a| a.flow.as_ref())
            .and_then(AuthFlow::poll_timeout);
        let listen = self.modern.as_ref().and_then(|m| m.listen_retry);
        [self.engine.poll_timeout(), wire, flow, listen]
            .into_iter()
            .flatten()
            .min()
    }

    // ----- authorization -------------------------------------------------

    /// The user agent was redirected back after [`Output::Authorize`]:
    /// `callback` is the URL it reached (or its query string).
    pub fn authorization_response(&mut self, now: Instant, callback: &str) {
        if let Some(flow) = self.auth.as_mut().and_then(|a| a.flow.as_mut()) {
            flow.handle_redirect(now, callback);
        }
        self.pump(now);
    }

    /// The application could not complete [`Output::Authorize`] (no
    /// browser, the user gave up): the waiting requests fail.
    pub fn authorization_failed(&mut self, now: Instant, reason: &str) {
        if let Some(flow) = self.auth.as_mut().and_then(|a| a.flow.as_mut()) {
            flow.handle_redirect_error(reason);
        }
        self.pump(now);
    }

    /// The authorization state in use, if any.
    pub fn auth_state(&self) -> Option<&AuthState> {
        self.auth.as_ref().and_then(|a| a.state.as_ref())
    }

    /// An exchange met 401/403: start a flow unless one runs.
    fn on_auth_required(
        &mut self,
        now: Instant,
        status: u16,
        challenges: Vec<String>,
        hints: &str,
        request: Option<u64>,
    ) {
        let Wire::Http(h) = &mut self.wire else {
            return;
        };
        let Some(auth) = self.auth.as_mut() else {
            return h
                .authorization_failed(&format!("HTTP {status} and no authorization configured"));
        };
        if let Some(id) = request {
            if self.engine.suspend_timeout(id) {
                auth.suspended.push(id);
            }
        }
        if auth.flow.is_some() {
            return;
        }
        if auth.attempts >= auth.config.max_attempts {
            let e = crate::auth::AuthError::TooManyAttempts(auth.attempts);
            h.authorization_failed(&format!("HTTP {status}: {e}"));
            return self.resume_suspended(now);
        }
        auth.attempts += 1;
        auth.trigger = format!("HTTP {status}{hints}");
        let secrets = match Secrets::generate() {
            Ok(s) => s,
            Err(e) => {
                h.authorization_failed(&e);
                return self.resume_suspended(now);
            }
        };
        let trigger = Trigger {
            status,
            challenges: parse_challenges(challenges.iter().map(String::as_str)),
        };
        auth.flow = Some(AuthFlow::new(
            now,
            auth.config.clone(),
            h.url().clone(),
            trigger,
            auth.state.clone(),
            secrets,
            ExchangeId(auth.next_exchange),
        ));
    }

    fn poll_auth(&mut self) -> Option<AuthAction> {
        self.auth.as_mut()?.flow.as_mut()?.poll_output()
    }

    fn route_auth(&mut self, now: Instant, action: AuthAction) {
        let Some(auth) = self.auth.as_mut() else {
            return;
        };
        match action {
            AuthAction::Http(r) => self.out.push_back(Output::Http(r)),
            AuthAction::Abort(x) => self.out.push_back(Output::AbortHttp(x)),
            AuthAction::Authorize { url } => self.out.push_back(Output::Authorize { url }),
            AuthAction::Done(state) => {
                if let Some(flow) = auth.flow.take() {
                    auth.next_exchange = flow.next_exchange().0;
                }
                auth.state = Some(state.clone());
                if let Wire::Http(h) = &mut self.wire {
                    h.authorized(now, state.bearer());
                }
                self.out.push_back(Output::Authorized(state));
                self.resume_suspended(now);
            }
            AuthAction::Failed(e) => {
                if let Some(flow) = auth.flow.take() {
                    auth.next_exchange = flow.next_exchange().0;
                }
                if let Wire::Http(h) = &mut self.wire {
                    h.authorization_failed(&format!("{}; {e}", auth.trigger));
                }
                self.resume_suspended(now);
            }
        }
    }

    /// Restarts the clocks of the requests that waited for a flow.
    fn resume_suspended(&mut self, now: Instant) {
        if let Some(auth) = self.auth.as_mut() {
            for id in std::mem::take(&mut auth.suspended) {
                self.engine.resume_timeout(now, id);
            }
        }
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
        self.check_open(method)?;
        if let Some(server) = &self.server {
            check_capability(method, &server.capabilities).map_err(|capability| {
                CallError::NotSupported {
                    method: method.to_string(),
                    capability: capability.name(),
                }
            })?;
        }
        if self.modern.is_some() {
            return self.modern_request(now, method, params, options);
        }
        let id = self.engine.request(now, method, params, options)?;
        self.built_request(id, method, modern::header_params(method, params).as_ref());
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

    /// Sends a notification (e.g. `notifications/roots/list_changed`).
    pub fn notify(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), CallError> {
        self.check_open(method)?;
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
        if let Some(status) = self.modern_respond(now, &id, &response) {
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
        if let Some(done) = self.modern_cancel(now, id, reason) {
            self.pump(now);
            return done;
        }
        let done = self.engine.cancel(now, id, reason);
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

    // ----- getters ------------------------------------------------------

    /// The server's `initialize` result, once [`Output::Ready`] was emitted.
    pub fn server(&self) -> Option<&InitializeResult> {
        self.server.as_ref()
    }

    /// The negotiated protocol version.
    pub fn protocol_version(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.protocol_version.as_str())
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
        match self.wire {
            Wire::Stdio(_) => "stdio",
            Wire::Http(_) => "streamable-http",
            Wire::Legacy(_) => "sse",
        }
    }

    /// The engine's counters.
    pub fn stats(&self) -> rpc::Stats {
        self.engine.stats()
    }

    /// Requests waiting for their response.
    pub fn pending(&self) -> usize {
        self.engine.pending_len()
    }

    // ----- internals ----------------------------------------------------

    fn closed_error(&self) -> CallError {
        CallError::Closed(self.reason.as_ref().map_or_else(
            || "connection closed".to_string(),
            |r| r.message().to_string(),
        ))
    }

    fn check_open(&self, method: &str) -> Result<(), CallError> {
        match self.phase {
            Phase::Ready => Ok(()),
            Phase::Initializing { reinit: true, .. } => Ok(()),
            Phase::Initializing { .. } | Phase::Probing { .. } if method == "ping" => Ok(()),
            Phase::Initializing { .. } | Phase::Probing { .. } => Err(CallError::NotReady),
            Phase::Closing | Phase::Closed => Err(self.closed_error()),
        }
    }

    fn on_death(&mut self, now: Instant, death: Death) {
        if let Wire::Stdio(s) = &self.wire {
            let message = s.death_message(&death);
            self.shut_down(now, CloseReason::ServerGone(message));
        }
    }

    /// Ends the session: the engine completes everything pending with the
    /// reason, the transport shuts down; `Closed` follows when it is done.
    fn shut_down(&mut self, now: Instant, reason: CloseReason) {
        if matches!(self.phase, Phase::Closing | Phase::Closed) {
            return;
        }
        if let Some(flow) = self.auth.as_mut().and_then(|a| a.flow.as_mut()) {
            flow.abandon("the connection is closing");
        }
        self.modern_close(reason.message());
        self.engine.close(reason.message());
        self.reason = Some(reason);
        self.phase = Phase::Closing;
        match &mut self.wire {
            Wire::Stdio(s) => s.begin_close(now),
            Wire::Http(h) => h.begin_close(now),
            Wire::Legacy(l) => l.begin_close(now),
        }
    }

    fn finish(&mut self) {
        if self.phase == Phase::Closed {
            return;
        }
        self.phase = Phase::Closed;
        let reason = self.reason.clone().unwrap_or(CloseReason::Client);
        self.out.push_back(Output::Closed(reason));
    }

    /// Moves outputs between engine, transport and the app until both are
    /// quiet.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut moved = false;
            while let Some(o) = self.engine.poll_output() {
                moved = true;
                self.route_engine(now, o);
            }
            while let Some(a) = self.poll_wire() {
                moved = true;
                self.route_wire(now, a);
            }
            while let Some(a) = self.poll_auth() {
                moved = true;
                self.route_auth(now, a);
            }
            if !moved {
                break;
            }
        }
        if self.ready_pending && self.phase == Phase::Ready {
            let settled = match &self.wire {
                Wire::Http(h) => h.settled(),
                Wire::Stdio(_) | Wire::Legacy(_) => true,
            };
            if settled {
                self.ready_pending = false;
                self.out.push_back(Output::Ready);
            }
        }
        if self.phase == Phase::Closing {
            let done = match &self.wire {
                Wire::Stdio(s) => !s.awaiting_exit(),
                // HTTP transports report Finished through their events.
                Wire::Http(_) | Wire::Legacy(_) => self.wire_finished,
            };
            if done {
                self.finish();
            }
        }
    }

    fn poll_wire(&mut self) -> Option<WireEvent> {
        match &mut self.wire {
            Wire::Stdio(s) => s.poll_output().map(WireEvent::Stdio),
            Wire::Http(h) => h.poll_output().map(WireEvent::Http),
            Wire::Legacy(l) => l.poll_output().map(WireEvent::Legacy),
        }
    }

    fn route_engine(&mut self, now: Instant, o: rpc::Output) {
        match o {
            rpc::Output::Send { bytes, kind } => match &mut self.wire {
                Wire::Stdio(s) => s.send(bytes),
                Wire::Http(h) => {
                    let in_era = h.modern_version().is_some();
                    let era_headers = self.era_headers.take(&kind, in_era);
                    if let (true, SendKind::Request { id }, Some(auth)) =
                        (h.auth_pending(), &kind, self.auth.as_mut())
                    {
                        if self.engine.suspend_timeout(*id) {
                            auth.suspended.push(*id);
                        }
                    }
                    h.send_with(now, bytes, kind, era_headers)
                }
                Wire::Legacy(l) => l.send(now, bytes, kind),
            },
            rpc::Output::Complete { id, outcome } => {
                match &mut self.wire {
                    Wire::Http(h) => h.request_done(id),
                    Wire::Legacy(l) => l.request_done(id),
                    Wire::Stdio(_) => {}
                }
                if self.probe.as_ref().is_some_and(|p| p.id == id) {
                    return self.on_probe(now, outcome);
                }
                let (id, outcome) = if self.modern.is_some() {
                    match self.modern_complete(now, id, outcome) {
                        Some(delivered) => delivered,
                        None => return,
                    }
                } else {
                    (id, outcome)
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
                        auth.attempts = 0;
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
            rpc::Output::Notification { method, .. } if self.is_internal_notification(&method) => {
                self.subscription_acknowledged()
            }
            rpc::Output::Notification { method, params } => {
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
                if let Err(e) = self.notify_engine("notifications/initialized", None) {
                    self.shut_down(now, CloseReason::Handshake(format!("initialized: {e}")));
                    return;
                }
                // Route the notification to the transport before telling it
                // the session is ready, so it goes out first.
                while let Some(o) = self.engine.poll_output() {
                    self.route_engine(now, o);
                }
                match &mut self.wire {
                    Wire::Http(h) => h.initialized(now, &version),
                    Wire::Legacy(l) => l.initialized(now, &version),
                    Wire::Stdio(_) => {}
                }
                self.phase = Phase::Ready;
                if !reinit {
                    self.ready_pending = true;
                }
            }
            Err(e) => {
                if let HandshakeError::Failed(_) = e {
                    if let Some(err) = initialize_error.as_ref() {
                        if self.reprobe_after(now, err) {
                            return;
                        }
                    }
                }
                self.shut_down(now, CloseReason::Handshake(e.to_string()))
            }
        }
    }

    fn route_wire(&mut self, now: Instant, event: WireEvent) {
        match event {
            WireEvent::Stdio(a) => match a {
                StdioAction::Write(bytes) => self.out.push_back(Output::Write(bytes)),
                StdioAction::CloseStdin => self.out.push_back(Output::CloseStdin),
                StdioAction::Signal(s) => self.out.push_back(Output::Signal(s)),
                StdioAction::Log(line) => self.out.push_back(Output::Log(line)),
                StdioAction::Malformed(e) => self
                    .out
                    .push_back(Output::Diagnostic(Diagnostic::Framing(e))),
            },
            WireEvent::Http(e) => match e {
                HttpEvent::Request(mut r) => {
                    r.carries = r.carries.map(|id| self.app_id(id));
                    self.out.push_back(Output::Http(r))
                }
                HttpEvent::Abort(x) => self.out.push_back(Output::AbortHttp(x)),
                HttpEvent::Fail { id, failure } => self.fail(now, id, failure),
                HttpEvent::Diagnostic(d) => self
                    .out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(d))),
                HttpEvent::Fatal(m) => self.shut_down(now, CloseReason::Transport(m)),
                HttpEvent::SessionExpired => self.reinitialize(now),
                HttpEvent::FallbackToLegacy { resend } => self.fall_back(now, resend),
                HttpEvent::Finished => self.wire_finished = true,
                HttpEvent::AuthRequired {
                    status,
                    challenges,
                    hints,
                    request,
                } => self.on_auth_required(now, status, challenges, &hints, request),
            },
            WireEvent::Legacy(e) => match e {
                LegacyEvent::Request(r) => self.out.push_back(Output::Http(r)),
                LegacyEvent::Abort(x) => self.out.push_back(Output::AbortHttp(x)),
                LegacyEvent::Fail { id, failure } => self.fail(now, id, failure),
                LegacyEvent::Diagnostic(d) => self
                    .out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(d))),
                LegacyEvent::Fatal(m) => self.shut_down(now, CloseReason::Transport(m)),
                LegacyEvent::Finished => self.wire_finished = true,
            },
        }
    }

    fn fail(&mut self, now: Instant, id: u64, failure: RequestFailure) {
        let error = match &failure {
            RequestFailure::Http { status, message } => RequestError::Http {
                status: *status,
                message: message.clone(),
            },
            RequestFailure::Auth(message) => RequestError::Auth {
                message: message.clone(),
            },
            _ => RequestError::Transport {
                message: failure.to_string(),
            },
        };
        self.engine.fail(now, id, error);
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
        if let Wire::Http(h) = &mut self.wire {
            h.reset_session();
        }
        self.start_handshake(now, true);
    }

    /// Streamable HTTP was refused: speak legacy HTTP+SSE to the same URL
    /// and re-send what was waiting (the `initialize` first).
    fn fall_back(&mut self, now: Instant, resend: Vec<(Vec<u8>, SendKind)>) {
        let Wire::Http(h) = &self.wire else { return };
        let url = h.url().clone();
        let first = h.next_exchange();
        let bearer = self.auth_state().map(AuthState::bearer);
        let config = with_bearer(&self.http_config, bearer);
        let mut legacy = LegacySse::starting_at(now, url, config, first);
        for (message, kind) in resend {
            legacy.send(now, message, kind);
        }
        self.wire = Wire::Legacy(legacy);
        self.out.push_back(Output::Diagnostic(Diagnostic::Transport(
            "server refused Streamable HTTP; falling back to legacy HTTP+SSE".into(),
        )));
    }
}

/// `config` with `Authorization: <bearer>` instead of any configured one.
fn with_bearer(config: &HttpConfig, bearer: Option<String>) -> HttpConfig {
    let mut config = config.clone();
    if let Some(b) = bearer {
        config
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
        config.headers.push(("Authorization".into(), b));
    }
    config
}

enum WireEvent {
    Stdio(StdioAction),
    Http(HttpEvent),
    Legacy(LegacyEvent),
}
