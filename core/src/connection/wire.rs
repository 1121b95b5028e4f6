//! The wire a connection speaks (stdio, Streamable HTTP or legacy
//! HTTP+SSE) behind one interface, so that the connection routes to it
//! without asking which it is.
//!
//! ```text
//!  engine Send ─► send() ─► transport ─► poll_output(): WireOutput ─► connection
//!  Input ───────► handle_input() ─► messages for the engine │ Died │ Foreign
//! ```
//!
//! Transport-specific requests (sessions, the era, authorization) are
//! no-ops on a wire that has no such thing. The wire also keeps the
//! 2026-07-28 headers of the messages built for it ([`Wire::note_request`],
//! [`Wire::note_notification`]) until the engine hands it each message.

use crate::codec::jsonl::Line;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::Value;

use super::types::{Diagnostic, Input, Output, TransportSpec};
use crate::codec::glimpse::Glimpse;
use crate::codec::jsonl::JsonlError;
use crate::exchange::dpop::DpopBinding;
use crate::exchange::{HttpRequest, HttpUrl};
use crate::modern::headers::name_source;
use crate::modern::{message_headers, ToolHeaders};
use crate::rpc::{IdMap, Json, RequestError, SendKind};
use crate::transport::http::{HttpEvent, StreamableHttp};
use crate::transport::legacy::{LegacyEvent, LegacySse};
use crate::transport::stdio::{Stdio, StdioAction, StdioConfig};
use crate::transport::{HttpConfig, RequestFailure};

/// The notification the engine builds by itself, when a request is
/// cancelled or times out.
const CANCELLED_NOTIFICATION: &str = crate::mcp::methods::notifications::CANCELLED;

/// What the wire asks of the connection.
#[derive(Debug)]
pub(super) enum WireOutput {
    /// Emit this output as is (writes, signals, aborts, log lines,
    /// diagnostics).
    Output(Output),
    /// Emit this exchange; its `carries` is an engine id.
    Http(HttpRequest),
    /// 2026-07-28: request `id`'s response stream ended before the
    /// response; `error` is what the caller gets if it is not issued
    /// again.
    Lost {
        /// The engine id.
        id: u64,
        /// Why.
        error: RequestError,
    },
    /// Complete our request `id` with this error.
    Fail {
        /// The engine id.
        id: u64,
        /// Why (from the transport's failure).
        error: RequestError,
    },
    /// A message was skipped unread for its size: report `diagnostic`,
    /// and let the engine fail the request it answered (or answer the
    /// request it was) by what `glimpse` shows.
    Oversize {
        /// What its first and last bytes showed.
        glimpse: Glimpse,
        /// A [`RequestError::TooLarge`].
        error: RequestError,
        /// The framing report, if not given already.
        diagnostic: Option<Diagnostic>,
    },
    /// The wire cannot go on: close with this message.
    Fatal(String),
    /// The HTTP session is gone: initialize again.
    SessionExpired,
    /// Streamable HTTP was refused: speak legacy HTTP+SSE
    /// ([`Wire::fall_back`]) and send these again.
    FallbackToLegacy {
        /// The messages to send again, in order.
        resend: Vec<(Vec<u8>, SendKind)>,
    },
    /// An exchange met 401/403 (see [`HttpEvent::AuthRequired`]).
    AuthRequired {
        /// 401 or 403.
        status: u16,
        /// The `WWW-Authenticate` values.
        challenges: Vec<String>,
        /// The hints a failure message quotes.
        hints: String,
        /// Our request that met it, if any.
        request: Option<u64>,
    },
}

/// What became of an input.
#[derive(Debug)]
pub(super) enum Fed {
    /// Taken (messages went to `deliver`).
    Taken,
    /// The server is gone; the message names the status and quotes its
    /// stderr tail.
    Died(String),
    /// The server was started again (a restart asked for with
    /// [`Wire::restart`]).
    Respawned,
    /// The input is for another kind of wire.
    Foreign,
}

// One per connection, never moved around: boxing a variant would only add
// an indirection to every input.
#[allow(clippy::large_enum_variant)]
enum Transport {
    Stdio(Stdio),
    Http(StreamableHttp),
    Legacy(LegacySse),
}

/// One connection's wire (see the [module docs](self)).
pub(super) struct Wire {
    transport: Transport,
    /// An HTTP transport reported that its close is complete.
    finished: bool,
    /// The 2026-07-28 headers of requests built and not yet sent, by id.
    request_headers: IdMap<Vec<(String, String)>>,
    /// Those of the notification being built.
    notification_headers: Option<Vec<(String, String)>>,
}

impl Wire {
    /// The wire `spec` names. `bearer` replaces a configured
    /// `Authorization`; `auth` makes Streamable HTTP hold what meets a 401.
    pub(super) fn new(
        now: Instant,
        spec: TransportSpec,
        stdio: StdioConfig,
        http: &HttpConfig,
        bearer: Option<String>,
        auth: bool,
    ) -> Wire {
        let transport = match spec {
            TransportSpec::Stdio => Transport::Stdio(Stdio::new(stdio)),
            TransportSpec::StreamableHttp(url) => {
                let mut h = StreamableHttp::new(url, http.clone());
                if auth {
                    h.enable_auth();
                    h.set_authorization(bearer);
                }
                Transport::Http(h)
            }
            TransportSpec::LegacySse(url) => {
                Transport::Legacy(LegacySse::new(now, url, with_bearer(http, bearer)))
            }
        };
        Wire {
            transport,
            finished: false,
            request_headers: IdMap::default(),
            notification_headers: None,
        }
    }

    /// `stdio`, `streamable-http` or `sse`.
    pub(super) fn name(&self) -> &'static str {
        match self.transport {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "streamable-http",
            Transport::Legacy(_) => "sse",
        }
    }

    /// Whether this is the legacy HTTP+SSE transport (which knows only the
    /// handshake era).
    pub(super) fn is_legacy_sse(&self) -> bool {
        matches!(self.transport, Transport::Legacy(_))
    }

    /// Whether this is Streamable HTTP (whose tools' `x-mcp-header`
    /// annotations matter).
    pub(super) fn is_http(&self) -> bool {
        matches!(self.transport, Transport::Http(_))
    }

    // ---- inputs ---------------------------------------------------------

    /// Feeds one input; messages go to `deliver`, which gives the id of
    /// the response each was ([`Engine::handle_line`]).
    ///
    /// [`Engine::handle_line`]: crate::rpc::Engine::handle_line
    pub(super) fn handle_input(
        &mut self,
        now: Instant,
        input: Input<'_>,
        deliver: &mut dyn FnMut(Line<'_>) -> Option<u64>,
    ) -> Fed {
        let mut death = None;
        // Only the Streamable HTTP transport follows which request a
        // message answers (what `deliver` gives back).
        let mut lines = |line: Line<'_>| {
            deliver(line);
        };
        match (&mut self.transport, input) {
            (Transport::Stdio(s), Input::Stdout(bytes)) => s.handle_stdout(bytes, lines),
            (Transport::Stdio(s), Input::StdoutEof) => death = s.handle_stdout_eof(now),
            (Transport::Stdio(s), Input::Stderr(bytes)) => s.handle_stderr(bytes),
            (Transport::Stdio(s), Input::StderrEof) => death = s.handle_stderr_eof(now),
            (Transport::Stdio(s), Input::GroupEmpty) => s.handle_group_empty(),
            (Transport::Stdio(s), Input::WriteFailed(_)) => s.handle_write_failed(now),
            (Transport::Stdio(s), Input::Exited(status)) => death = s.handle_exit(now, status),
            (Transport::Stdio(s), Input::Spawned) => {
                s.handle_spawned(now);
                return Fed::Respawned;
            }
            (Transport::Stdio(s), Input::SpawnFailed(error)) => {
                return s.handle_spawn_failed(error).map_or(Fed::Taken, Fed::Died);
            }
            (Transport::Http(h), Input::HttpHead { exchange, head }) => {
                h.handle_head(now, exchange, head, deliver)
            }
            (Transport::Http(h), Input::HttpBody { exchange, data }) => {
                h.handle_body(now, exchange, data, deliver)
            }
            (Transport::Http(h), Input::HttpEnd { exchange }) => {
                h.handle_end(now, exchange, deliver)
            }
            (Transport::Http(h), Input::HttpFailed { exchange, error }) => {
                h.handle_failed(now, exchange, error, deliver)
            }
            (Transport::Legacy(l), Input::HttpHead { exchange, head }) => {
                l.handle_head(now, exchange, head, &mut lines)
            }
            (Transport::Legacy(l), Input::HttpBody { exchange, data }) => {
                l.handle_body(now, exchange, data, &mut lines)
            }
            (Transport::Legacy(l), Input::HttpEnd { exchange }) => {
                l.handle_end(now, exchange, &mut lines)
            }
            (Transport::Legacy(l), Input::HttpFailed { exchange, error }) => {
                l.handle_failed(now, exchange, error, &mut lines)
            }
            _ => return Fed::Foreign,
        }
        match (death, &self.transport) {
            (Some(death), Transport::Stdio(s)) => Fed::Died(s.death_message(&death)),
            _ => Fed::Taken,
        }
    }

    /// Fires the wire's timers; `Some(message)`: the server is gone.
    pub(super) fn handle_timeout(&mut self, now: Instant) -> Option<String> {
        match &mut self.transport {
            Transport::Stdio(s) => {
                let death = s.handle_timeout(now)?;
                Some(s.death_message(&death))
            }
            Transport::Http(h) => {
                h.handle_timeout(now);
                None
            }
            Transport::Legacy(l) => {
                l.handle_timeout(now);
                None
            }
        }
    }

    // ---- outputs --------------------------------------------------------

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match &self.transport {
            Transport::Stdio(s) => s.poll_timeout(),
            Transport::Http(h) => h.poll_timeout(),
            Transport::Legacy(l) => l.poll_timeout(),
        }
    }

    /// What the transport asks next, if anything (its close being
    /// complete is kept for [`is_closed`](Self::is_closed)).
    pub(super) fn poll_output(&mut self) -> Option<WireOutput> {
        loop {
            let output = match &mut self.transport {
                Transport::Stdio(s) => s.poll_output().map(stdio_output),
                Transport::Http(h) => h.poll_output().map(http_output),
                Transport::Legacy(l) => l.poll_output().map(legacy_output),
            };
            match output? {
                Some(output) => return Some(output),
                None => self.finished = true,
            }
        }
    }

    // ---- messages -------------------------------------------------------

    /// Sends one message of the engine, with the era headers noted for it;
    /// on stdio, the line to write now (see `Stdio::send`).
    pub(super) fn send(&mut self, now: Instant, bytes: Vec<u8>, kind: SendKind) -> Option<Vec<u8>> {
        let noted = match &kind {
            SendKind::Request { id } => self.request_headers.remove(id),
            SendKind::Notification => self.notification_headers.take(),
            SendKind::Response { .. } => None,
        };
        match &mut self.transport {
            Transport::Stdio(s) => return s.send(bytes),
            Transport::Http(h) => {
                let in_era = h.modern_version().is_some();
                let era_headers = match noted {
                    Some(headers) => headers,
                    // In the era, a notification nobody noted is the
                    // engine's own.
                    None if in_era && kind == SendKind::Notification => {
                        message_headers(CANCELLED_NOTIFICATION, None, &ToolHeaders::default())
                    }
                    None => Vec::new(),
                };
                h.send_with(now, bytes, kind, era_headers)
            }
            Transport::Legacy(l) => l.send(now, bytes, kind),
        }
        None
    }

    /// Whether the transport speaks the 2026-07-28 era (Streamable HTTP
    /// after [`begin_era`](Self::begin_era)).
    fn in_era(&self) -> bool {
        matches!(&self.transport, Transport::Http(h) if h.modern_version().is_some())
    }

    /// Request `id` of `method` with `params` was just built: in the era,
    /// notes its headers (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*` from
    /// `tools`) for its POST. The era begins with the probe, before any
    /// other message; a message posted after it ended goes without them.
    pub(super) fn note_request(
        &mut self,
        id: u64,
        method: &str,
        params: Option<&Value>,
        tools: &ToolHeaders,
    ) {
        if self.in_era() {
            let headers = message_headers(method, params, tools);
            self.request_headers.insert(id, headers);
        }
    }

    /// [`note_request`](Self::note_request) with serialized params;
    /// `tools` the 2026-07-28 state's (none: no tool declares headers,
    /// and no table is made unless the era needs one).
    pub(super) fn note_raw_request(
        &mut self,
        id: u64,
        method: &str,
        params: Option<Json<'_>>,
        tools: Option<&ToolHeaders>,
    ) {
        if self.in_era() {
            let value = header_params(method, params);
            let none = ToolHeaders::default();
            self.note_request(id, method, value.as_ref(), tools.unwrap_or(&none));
        }
    }

    /// The engine is about to build notification `method`: in the era,
    /// notes its headers (`tools` as for
    /// [`note_raw_request`](Self::note_raw_request)).
    pub(super) fn note_notification(
        &mut self,
        method: &str,
        params: Option<&RawValue>,
        tools: Option<&ToolHeaders>,
    ) {
        self.notification_headers = self.in_era().then(|| {
            let value = header_params(method, params.map(Json::from));
            let none = ToolHeaders::default();
            message_headers(method, value.as_ref(), tools.unwrap_or(&none))
        });
    }

    /// The engine refused the notification just noted.
    pub(super) fn forget_notification(&mut self) {
        self.notification_headers = None;
    }

    /// The engine completed request `id`: the HTTP transports stop serving
    /// it.
    pub(super) fn request_done(&mut self, id: u64) {
        match &mut self.transport {
            Transport::Http(h) => h.request_done(id),
            Transport::Legacy(l) => l.request_done(id),
            Transport::Stdio(_) => {}
        }
    }

    // ---- session --------------------------------------------------------

    /// The handshake is done at `version` (HTTP: the session is ready).
    pub(super) fn initialized(&mut self, now: Instant, version: &str) {
        match &mut self.transport {
            Transport::Http(h) => h.initialized(now, version),
            Transport::Legacy(l) => l.initialized(now, version),
            Transport::Stdio(_) => {}
        }
    }

    /// Whether the server accepted `notifications/initialized` (HTTP
    /// transports) and the GET listener has settled (Streamable HTTP).
    pub(super) fn settled(&self) -> bool {
        match &self.transport {
            Transport::Http(h) => h.settled(),
            Transport::Legacy(l) => l.settled(),
            Transport::Stdio(_) => true,
        }
    }

    /// Forgets the HTTP session before a new `initialize`.
    pub(super) fn reset_session(&mut self) {
        if let Transport::Http(h) = &mut self.transport {
            h.reset_session();
        }
    }

    /// Streamable HTTP speaks the 2026-07-28 era at `version` from now on.
    pub(super) fn begin_era(&mut self, version: &str) {
        if let Transport::Http(h) = &mut self.transport {
            h.begin_modern(version);
        }
    }

    /// Streamable HTTP is back to the handshake era.
    pub(super) fn end_era(&mut self) {
        if let Transport::Http(h) = &mut self.transport {
            h.end_modern();
        }
    }

    /// Streamable HTTP was refused: speaks legacy HTTP+SSE to the same URL
    /// (numbering its exchanges on), with `config`, and sends `resend`
    /// again. True if it switched.
    pub(super) fn fall_back(
        &mut self,
        now: Instant,
        config: HttpConfig,
        resend: Vec<(Vec<u8>, SendKind)>,
    ) -> bool {
        let Transport::Http(h) = &self.transport else {
            return false;
        };
        let mut legacy = LegacySse::starting_at(now, h.url().clone(), config, h.next_exchange());
        for (message, kind) in resend {
            legacy.send(now, message, kind);
        }
        self.transport = Transport::Legacy(legacy);
        true
    }

    // ---- authorization --------------------------------------------------

    /// The endpoint an authorization is for (Streamable HTTP only).
    pub(super) fn auth_endpoint(&self) -> Option<&HttpUrl> {
        match &self.transport {
            Transport::Http(h) => Some(h.url()),
            Transport::Stdio(_) | Transport::Legacy(_) => None,
        }
    }

    /// Whether an authorization holds the messages sent now.
    pub(super) fn auth_pending(&self) -> bool {
        matches!(&self.transport, Transport::Http(h) if h.auth_pending())
    }

    /// Binds the token to a DPoP key (Streamable HTTP only: each request
    /// carries a proof).
    pub(super) fn set_dpop(&mut self, binding: Option<DpopBinding>) {
        if let Transport::Http(h) = &mut self.transport {
            h.set_dpop(binding);
        }
    }

    /// The authorization succeeded: send what waited with `bearer`.
    pub(super) fn authorized(&mut self, now: Instant, bearer: String) {
        if let Transport::Http(h) = &mut self.transport {
            h.authorized(now, bearer);
        }
    }

    /// No authorization: fail what waited with `message`.
    pub(super) fn authorization_failed(&mut self, message: &str) {
        if let Transport::Http(h) = &mut self.transport {
            h.authorization_failed(message);
        }
    }

    // ---- close ----------------------------------------------------------

    /// Whether the server is a process that can be started again.
    pub(super) fn is_stdio(&self) -> bool {
        matches!(self.transport, Transport::Stdio(_))
    }

    /// Stops the stdio server and starts it again (nothing is sent until
    /// [`Fed::Respawned`]); `why` goes into later error messages.
    pub(super) fn restart(&mut self, now: Instant, why: &str) {
        if let Transport::Stdio(s) = &mut self.transport {
            s.restart(now, why);
        }
    }

    /// Starts the transport's graceful close.
    pub(super) fn begin_close(&mut self, now: Instant) {
        match &mut self.transport {
            Transport::Stdio(s) => s.begin_close(now),
            Transport::Http(h) => h.begin_close(now),
            Transport::Legacy(l) => l.begin_close(now),
        }
    }

    /// Whether the close is complete (stdio: the exit is known; HTTP: the
    /// transport said so).
    pub(super) fn is_closed(&self) -> bool {
        match &self.transport {
            Transport::Stdio(s) => !s.awaiting_exit(),
            Transport::Http(_) | Transport::Legacy(_) => self.finished,
        }
    }
}

/// `config` with `Authorization: <bearer>` instead of any configured one.
pub(super) fn with_bearer(config: &HttpConfig, bearer: Option<String>) -> HttpConfig {
    let mut config = config.clone();
    if let Some(b) = bearer {
        config
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
        config.headers.push(("Authorization".into(), b));
    }
    config
}

/// The params of a message as a value, when its era headers read them
/// (`Mcp-Name` and `Mcp-Param-*`).
fn header_params(method: &str, params: Option<Json<'_>>) -> Option<Value> {
    name_source(method)?;
    serde_json::from_str(params?.get()).ok()
}

fn stdio_output(action: StdioAction) -> Option<WireOutput> {
    Some(WireOutput::Output(match action {
        StdioAction::CloseStdin => Output::CloseStdin,
        StdioAction::Signal(s) => Output::Signal(s),
        StdioAction::CheckGroup => Output::CheckGroup,
        StdioAction::Spawn => Output::Spawn,
        StdioAction::Log(line) => Output::Log(line),
        StdioAction::Malformed(e) => match e {
            JsonlError::LineTooLong {
                limit,
                seen,
                ref glimpse,
            } => {
                return Some(WireOutput::Oversize {
                    glimpse: glimpse.clone(),
                    error: RequestError::TooLarge {
                        what: "max_line_len",
                        limit,
                        size: seen,
                    },
                    diagnostic: Some(Diagnostic::Framing(e)),
                })
            }
            e => Output::Diagnostic(Diagnostic::Framing(e)),
        },
    }))
}

/// `None`: the transport's close is complete.
fn http_output(event: HttpEvent) -> Option<WireOutput> {
    Some(match event {
        HttpEvent::Request(r) => WireOutput::Http(r),
        HttpEvent::Abort(x) => WireOutput::Output(Output::AbortHttp(x)),
        HttpEvent::Fail {
            id,
            failure: failure @ RequestFailure::StreamLost { .. },
        } => WireOutput::Lost {
            id,
            error: request_error(failure),
        },
        HttpEvent::Fail { id, failure } => fail(id, failure),
        HttpEvent::Skipped { glimpse, failure } => skipped(glimpse, failure),
        HttpEvent::Diagnostic(d) => {
            WireOutput::Output(Output::Diagnostic(Diagnostic::Transport(d)))
        }
        HttpEvent::Note(d) => WireOutput::Output(Output::Diagnostic(Diagnostic::Note(d))),
        HttpEvent::Fatal(m) => WireOutput::Fatal(m),
        HttpEvent::SessionExpired => WireOutput::SessionExpired,
        HttpEvent::FallbackToLegacy { resend } => WireOutput::FallbackToLegacy { resend },
        HttpEvent::Finished => return None,
        HttpEvent::AuthRequired {
            status,
            challenges,
            hints,
            request,
        } => WireOutput::AuthRequired {
            status,
            challenges,
            hints,
            request,
        },
    })
}

/// `None`: the transport's close is complete.
fn legacy_output(event: LegacyEvent) -> Option<WireOutput> {
    Some(match event {
        LegacyEvent::Request(r) => WireOutput::Http(r),
        LegacyEvent::Abort(x) => WireOutput::Output(Output::AbortHttp(x)),
        LegacyEvent::Fail { id, failure } => fail(id, failure),
        LegacyEvent::Skipped { glimpse, failure } => skipped(glimpse, failure),
        LegacyEvent::Diagnostic(d) => {
            WireOutput::Output(Output::Diagnostic(Diagnostic::Transport(d)))
        }
        LegacyEvent::Fatal(m) => WireOutput::Fatal(m),
        LegacyEvent::Finished => return None,
    })
}

/// A message was dropped for its size; the engine decides by `glimpse`.
fn skipped(glimpse: Glimpse, failure: RequestFailure) -> WireOutput {
    WireOutput::Oversize {
        glimpse,
        error: request_error(failure),
        diagnostic: None,
    }
}

/// Request `id` failed in the transport: the engine completes it with the
/// matching error.
fn fail(id: u64, failure: RequestFailure) -> WireOutput {
    WireOutput::Fail {
        id,
        error: request_error(failure),
    }
}

/// The caller's error for a transport's failure.
fn request_error(failure: RequestFailure) -> RequestError {
    match failure {
        RequestFailure::Http { status, message } => RequestError::Http { status, message },
        RequestFailure::Auth(message) => RequestError::Auth { message },
        RequestFailure::TooLarge { what, limit, size } => {
            RequestError::TooLarge { what, limit, size }
        }
        RequestFailure::Redirect(e) => RequestError::Redirect(Box::new(e)),
        other => RequestError::Transport {
            message: other.to_string(),
        },
    }
}
