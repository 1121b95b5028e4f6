//! Transports: what goes on the wire for each kind of server, as sans-IO
//! state machines driven by the [`Connection`](crate::Connection).
//!
//! - [`stdio`]: a child process, JSONL on stdin/stdout, stderr captured.
//! - [`http`]: Streamable HTTP (POST per message; JSON or SSE answers;
//!   sessions, resumption, the GET listener, 404 re-initialize, DELETE).
//! - [`legacy`]: the 2024-11-05 HTTP+SSE transport (GET stream with an
//!   `endpoint` event, POST to it).
//!
//! HTTP transports speak in *exchanges*: they emit an [`HttpRequest`] with an
//! [`ExchangeId`] and consume the head, body chunks and end (or failure) of
//! its response. The driver performs each exchange with any HTTP client
//! (the core's own [`codec::http1`](crate::codec::http1) over TCP/TLS, or
//! another) and reports back.

pub mod http;
pub mod legacy;
pub mod stdio;

use std::fmt;
use std::time::Duration;

// The exchange vocabulary lives a floor below (shared with `auth`); these
// keep its old paths working.
pub use crate::exchange::{
    url, ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, HttpUrl, RedirectError, ResponseHead,
};

/// The POST of `notifications/initialized` ended without a 2xx head, in
/// either HTTP transport: refused, the session cannot start; failed
/// before its head, it is sent once more (`retried` records that), then
/// given up. `Err` is the fatal message, `Ok` the diagnostic of the retry.
/// `retried` is `None` when nothing is being confirmed any more.
pub(crate) fn initialized_failed(
    refused: bool,
    retried: Option<&mut bool>,
    why: &dyn fmt::Display,
) -> Option<Result<String, String>> {
    if refused {
        return Some(Err(format!(
            "the server refused notifications/initialized: {why}"
        )));
    }
    let retried = retried?;
    if *retried {
        return Some(Err(format!(
            "notifications/initialized could not be sent (twice): {why}"
        )));
    }
    *retried = true;
    Some(Ok(format!(
        "the POST of notifications/initialized failed ({why}); sending it again"
    )))
}

/// Options of the HTTP transports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Headers sent on every request (e.g. `Authorization`).
    pub headers: Vec<(String, String)>,
    /// Largest JSON response body accepted (default 16 MiB).
    pub max_body: usize,
    /// Largest SSE event accepted (default 16 MiB).
    pub max_event: usize,
    /// Wait before resuming a stream when the server gave no `retry`
    /// (default 1 s).
    pub default_retry: Duration,
    /// Longest wait between reconnection attempts, whatever `retry` says
    /// (default 30 s).
    pub max_retry: Duration,
    /// Resumption attempts for one request's stream before it fails with
    /// `No response received for request ID <id>` (default 3).
    pub max_resume_attempts: u32,
    /// Whether to open the GET listener for server-initiated messages
    /// after initialization (default true).
    pub listen: bool,
    /// Attempts to reopen a failed GET listener before giving up on it
    /// (default 5, with exponential backoff from `default_retry`).
    pub max_listen_attempts: u32,
    /// How long `close` waits for the DELETE before finishing anyway
    /// (default 2 s).
    pub close_timeout: Duration,
    /// After initialization, how long the connection waits for the GET
    /// listener's response head before it reports itself ready (default
    /// 1 s; zero: don't wait). Waiting means the server's stream for its own
    /// requests is open before the application's first call, so nothing the
    /// server sends early is missed and no server mistakes a late listener
    /// for the resumption of a call's stream.
    pub listen_settle: Duration,
    /// Whether a redirect (307/308, as fetch follows them; see
    /// [`crate::exchange::redirect`]) may lead to another origin (scheme,
    /// host or port). Default false: such a redirect fails with an error
    /// naming both URLs. When allowed, `Authorization`, `Cookie`,
    /// `Proxy-Authorization` and `Mcp-Session-Id` are not sent there: not
    /// on the redirected request, nor later to the endpoint that moved
    /// there (a session that origin issues is its own).
    pub allow_cross_origin_redirects: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            headers: Vec::new(),
            max_body: 16 * 1024 * 1024,
            max_event: 16 * 1024 * 1024,
            default_retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(30),
            max_resume_attempts: 3,
            listen: true,
            max_listen_attempts: 5,
            close_timeout: Duration::from_secs(2),
            listen_settle: Duration::from_secs(1),
            allow_cross_origin_redirects: false,
        }
    }
}

/// Why one request failed at the transport level (the [`Connection`]
/// completes it with [`RequestError::Transport`](crate::rpc::RequestError)).
///
/// [`Connection`]: crate::Connection
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestFailure {
    /// A non-2xx answer: `HTTP <status>: <text>` with hints appended.
    Http {
        /// The status code.
        status: u16,
        /// The full message.
        message: String,
    },
    /// The server ended the session the request belonged to.
    SessionExpired,
    /// The response stream ended and resumption gave up.
    NoResponse {
        /// The request id.
        id: u64,
    },
    /// 2026-07-28: the response stream ended before the response. That
    /// era has no resumption; the request is lost, and the client must
    /// issue it again with a new id (the connection does, a bounded
    /// number of times).
    StreamLost {
        /// The request id.
        id: u64,
    },
    /// Anything else (connection refused, reset, bad framing…).
    Other(String),
    /// Authorization was needed and failed (or was not possible).
    Auth(String),
    /// The answer exceeded a size limit and was not read.
    TooLarge {
        /// The limit's name (`max_body`, `max_event`).
        what: &'static str,
        /// Its value, in bytes.
        limit: usize,
        /// Bytes read when it was crossed.
        size: usize,
    },
    /// A redirect was not followed (see [`RedirectError`]).
    Redirect(RedirectError),
}

impl fmt::Display for RequestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestFailure::Http { message, .. } => f.write_str(message),
            RequestFailure::SessionExpired => f.write_str("session expired"),
            RequestFailure::NoResponse { id } => {
                write!(f, "No response received for request ID {id}")
            }
            RequestFailure::StreamLost { id } => write!(
                f,
                "the response stream of request {id} ended before its response"
            ),
            RequestFailure::Other(m) => f.write_str(m),
            RequestFailure::Auth(m) => write!(f, "authorization failed: {m}"),
            RequestFailure::TooLarge { what, limit, size } => write!(
                f,
                "message too large: {size} bytes read, over the limit of {limit} bytes ({what})"
            ),
            RequestFailure::Redirect(e) => e.fmt(f),
        }
    }
}
