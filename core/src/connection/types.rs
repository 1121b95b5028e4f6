//! The connection's public vocabulary: its configuration, the transport
//! it speaks, what the driver feeds in ([`Input`]) and must do
//! ([`Output`]), and how calls and connections fail.

use std::fmt;
use std::time::Duration;

use serde_json::value::RawValue;

use crate::auth::{AuthConfig, AuthState};
use crate::codec::jsonl::JsonlError;
use crate::config::{ConfigError, ServerConfig, TransportKind};
use crate::exchange::url::UrlError;
use crate::exchange::{ExchangeId, HttpRequest, HttpUrl, ResponseHead};
use crate::mcp::{ClientConfig, ServerNotification};
use crate::modern::probe::{Era, EraPolicy};
use crate::rpc::{self, EngineConfig, LocalError, Progress, RequestError, RequestId};
use crate::transport::stdio::{ExitStatus, Signal, StdioConfig};
use crate::transport::HttpConfig;

/// Everything a [`Connection`](super::Connection) is configured with.
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
    /// taken for a legacy one (default 1 s over stdio, where the server is
    /// then started again, and 3 s over HTTP:
    /// [`STDIO_PROBE_TIMEOUT`](super::STDIO_PROBE_TIMEOUT),
    /// [`HTTP_PROBE_TIMEOUT`](super::HTTP_PROBE_TIMEOUT)).
    pub probe_timeout: Option<Duration>,
    /// In the 2026-07-28 era, open `subscriptions/listen` for the list
    /// changes the server announces (default true; `HttpConfig::listen`
    /// false turns it off too).
    pub no_subscriptions: bool,
}

/// Which wire a [`Connection`](super::Connection) speaks.
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
    /// How many bytes written to the child's stdin it has not read yet
    /// (those in the pipe plus those the driver still holds): the answer
    /// to [`Output::CheckStdin`]. `None` when the platform cannot tell.
    StdinUnread(Option<usize>),
    /// The server was started again, as [`Output::Spawn`] asked: from now
    /// on every stdio input is the new process's.
    Spawned,
    /// [`Output::Spawn`] failed (the error as the OS gave it).
    SpawnFailed(&'a str),
    /// No process of the child's process group is left (the answer to
    /// [`Output::CheckGroup`], or a [`Output::Signal`] that found none).
    /// The server counts as stopped once its exit and this are known; a
    /// driver that starts the child without a group of its own reports
    /// this at once when asked.
    GroupEmpty,
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

/// An [`Input`] that owns its bytes: what an executor keeps when the input
/// crosses a thread or a task before the connection takes it (an HTTP
/// exchange's events, queued by the task running it). The one event type
/// every executor hands the core: [`OwnedInput::as_input`] lends it as the
/// [`Input`] it is, and an executor that reads into its own buffer builds
/// the borrowed [`Input`] directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedInput {
    /// [`Input::Stdout`].
    Stdout(Vec<u8>),
    /// [`Input::StdoutEof`].
    StdoutEof,
    /// [`Input::Stderr`].
    Stderr(Vec<u8>),
    /// [`Input::StderrEof`].
    StderrEof,
    /// [`Input::WriteFailed`].
    WriteFailed(String),
    /// [`Input::Exited`].
    Exited(ExitStatus),
    /// [`Input::StdinUnread`].
    StdinUnread(Option<usize>),
    /// [`Input::Spawned`].
    Spawned,
    /// [`Input::SpawnFailed`].
    SpawnFailed(String),
    /// [`Input::GroupEmpty`].
    GroupEmpty,
    /// [`Input::HttpHead`]: an exchange's final response head.
    HttpHead {
        /// The exchange.
        exchange: ExchangeId,
        /// Status and headers.
        head: ResponseHead,
    },
    /// [`Input::HttpBody`]: body bytes (chunked framing removed), never
    /// empty, as they arrived.
    HttpBody {
        /// The exchange.
        exchange: ExchangeId,
        /// The bytes.
        data: Vec<u8>,
    },
    /// [`Input::HttpEnd`]: the response is complete.
    HttpEnd {
        /// The exchange.
        exchange: ExchangeId,
    },
    /// [`Input::HttpFailed`]: the exchange failed (connect, TLS, write or
    /// read error, malformed response, a connection closed mid-response);
    /// nothing follows it.
    HttpFailed {
        /// The exchange.
        exchange: ExchangeId,
        /// What happened, e.g. `connect to 127.0.0.1:9: Connection refused`.
        error: String,
    },
}

impl OwnedInput {
    /// This input, borrowed, for [`Connection::handle_input`](super::Connection::handle_input).
    pub fn as_input(&self) -> Input<'_> {
        match self {
            OwnedInput::Stdout(d) => Input::Stdout(d),
            OwnedInput::StdoutEof => Input::StdoutEof,
            OwnedInput::Stderr(d) => Input::Stderr(d),
            OwnedInput::StderrEof => Input::StderrEof,
            OwnedInput::WriteFailed(e) => Input::WriteFailed(e),
            OwnedInput::Exited(status) => Input::Exited(*status),
            OwnedInput::StdinUnread(n) => Input::StdinUnread(*n),
            OwnedInput::Spawned => Input::Spawned,
            OwnedInput::SpawnFailed(e) => Input::SpawnFailed(e),
            OwnedInput::GroupEmpty => Input::GroupEmpty,
            OwnedInput::HttpHead { exchange, head } => Input::HttpHead {
                exchange: *exchange,
                head,
            },
            OwnedInput::HttpBody { exchange, data } => Input::HttpBody {
                exchange: *exchange,
                data,
            },
            OwnedInput::HttpEnd { exchange } => Input::HttpEnd {
                exchange: *exchange,
            },
            OwnedInput::HttpFailed { exchange, error } => Input::HttpFailed {
                exchange: *exchange,
                error,
            },
        }
    }

    /// The exchange an HTTP input reports on.
    pub fn exchange(&self) -> Option<ExchangeId> {
        self.as_input().exchange()
    }
}

impl Input<'_> {
    /// The exchange an HTTP input reports on.
    pub fn exchange(&self) -> Option<ExchangeId> {
        match *self {
            Input::HttpHead { exchange, .. }
            | Input::HttpBody { exchange, .. }
            | Input::HttpEnd { exchange }
            | Input::HttpFailed { exchange, .. } => Some(exchange),
            _ => None,
        }
    }
}

/// What the driver must do, or report to the application.
///
/// Exhaustive on purpose: a new output is a compile error in every driver
/// that matches on it, never an output logged and dropped.
#[derive(Debug)]
pub enum Output {
    /// Write all of these bytes to the child's stdin, in order, before any
    /// later `Write` (await the write: that is the backpressure).
    Write(Vec<u8>),
    /// Close the child's stdin.
    CloseStdin,
    /// Send this signal to the child's process group (to the child alone
    /// when it has no group of its own: then never after its exit was
    /// reported, as its pid may be reused).
    Signal(Signal),
    /// The child has exited: check whether any process of its process
    /// group is left (a zombie counts as gone) and report
    /// [`Input::GroupEmpty`] if none is. Asked again on a timer until
    /// then.
    CheckGroup,
    /// Report with [`Input::StdinUnread`] how much of what was written to
    /// the child's stdin it has not read yet (on Unix: `FIONREAD` on the
    /// pipe, plus the driver's own backlog; `None` where it cannot be
    /// told). Asked every 100 ms while the era probe waits, so that a
    /// server still starting (it has not read the probe) is told from one
    /// that read it and stays silent.
    CheckStdin,
    /// Start the stdio server again from the same definition (command,
    /// arguments, environment, directory), in place of the child that was
    /// stopped (its exit and an empty group were reported): read and write
    /// the new child's pipes from now on, never the old ones', and report
    /// [`Input::Spawned`], or [`Input::SpawnFailed`]. The connection asks
    /// for this when the era probe killed the server or met silence (a
    /// server of the handshake era; the spec's backward compatibility
    /// rule), at most once per connection.
    Spawn,
    /// Perform this HTTP exchange and report its response with
    /// [`Input::HttpHead`], [`Input::HttpBody`], [`Input::HttpEnd`] or
    /// [`Input::HttpFailed`].
    Http(Box<HttpRequest>),
    /// Stop this exchange (close its connection; don't report it further).
    AbortHttp(ExchangeId),
    /// The handshake is done:
    /// [`Connection::server`](super::Connection::server) is available and
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
    /// [`Connection::authorization_response`](super::Connection::authorization_response)
    /// (or give up with
    /// [`Connection::authorization_failed`](super::Connection::authorization_failed)).
    /// Requests wait meanwhile.
    Authorize {
        /// The authorization URL.
        url: String,
    },
    /// An authorization succeeded: persist this state (a token store) to
    /// reuse it next time ([`AuthConfig::state`]). If the store's lock is
    /// held for this connection ([`Output::LockTokens`]), save under it,
    /// then release it.
    Authorized(Box<AuthState>),
    /// A refresh is due. Take the token store's lock (other processes
    /// and connections that share the store wait for it; one that died
    /// must not block it), read the state stored for `endpoint` under it
    /// and report it with
    /// [`Connection::stored_state`](super::Connection::stored_state)
    /// (`None` at once without a store). Hold the lock until the next
    /// [`Output::Authorized`] (save, then release) or
    /// [`Output::UnlockTokens`]. Taking the lock may block: do it off the
    /// thread that drives the connection.
    LockTokens {
        /// The MCP endpoint whose state to read.
        endpoint: String,
    },
    /// Release the token store's lock taken for [`Output::LockTokens`]:
    /// nothing to save (the stored state was newer and is used, or the
    /// refresh failed). Harmless when the lock is not held.
    UnlockTokens,
    /// A request from the server that the application declared it handles
    /// (roots, sampling, elicitation). Answer it exactly once with
    /// [`Connection::respond`](super::Connection::respond).
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
    /// Something the spec allows that was handled (e.g. a server without a
    /// GET stream): worth a debug line, not a warning.
    Note(String),
}

impl Diagnostic {
    /// Whether it is only a note (log it at debug level).
    pub fn is_note(&self) -> bool {
        matches!(self, Diagnostic::Note(_))
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Diagnostic::Rpc(d) => write!(f, "{d:?}"),
            Diagnostic::Framing(e) => write!(f, "{e}"),
            Diagnostic::Transport(s) | Diagnostic::Note(s) => f.write_str(s),
        }
    }
}

/// How a connection came to speak its era (for `mcpwire info -v` and
/// logs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EraFinding {
    /// The era policy (`protocolEra`) or the transport (legacy HTTP+SSE)
    /// chose it: no probe.
    Pinned,
    /// The era remembered for this server: the handshake came first, no
    /// probe.
    Remembered,
    /// `server/discover` answered: the 2026-07-28 era.
    Discovered,
    /// `server/discover` was refused with an error: the handshake followed
    /// on the same process or session.
    Refused,
    /// The server died or stayed silent during the probe and was started
    /// again for the handshake (the reason).
    Restarted(String),
}

impl fmt::Display for EraFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EraFinding::Pinned => f.write_str("pinned (no probe)"),
            EraFinding::Remembered => f.write_str("remembered (no probe)"),
            EraFinding::Discovered => f.write_str("server/discover answered"),
            EraFinding::Refused => f.write_str("server/discover refused; initialize followed"),
            EraFinding::Restarted(why) => {
                write!(f, "the server {why}; started again for initialize")
            }
        }
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// [`Connection::close`](super::Connection::close) was called.
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

/// An error too: why a connection that was being set up is not ready.
impl std::error::Error for CloseReason {}

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
    /// The client itself is set not to use what the method needs.
    #[error("{method} not sent: {what}")]
    TurnedOff {
        /// The method.
        method: String,
        /// What is turned off, and where.
        what: &'static str,
    },
    /// The engine refused (limits, params, unknown server request).
    #[error(transparent)]
    Local(#[from] LocalError),
}
