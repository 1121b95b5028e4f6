//! The engine's two error families, kept apart as h11 does: [`LocalError`]
//! is our own misuse or a full limit (returned by the call that hit it);
//! [`RequestError`] is how a request ended if not with a result.

use std::fmt;

use super::message::{ErrorObject, RequestId};

/// A call on the engine could not be carried out; nothing was queued.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocalError {
    /// The engine was closed with [`Engine::close`](super::Engine::close).
    #[error("connection closed")]
    Closed,
    /// [`EngineConfig::max_pending`](super::EngineConfig::max_pending)
    /// requests are already waiting for their response.
    #[error("too many pending requests (limit {limit})")]
    TooManyPending {
        /// The configured limit.
        limit: usize,
    },
    /// The bytes not yet written to the peer (queued, or held by the
    /// driver because the peer does not read) already hold
    /// [`EngineConfig::max_queued_bytes`](super::EngineConfig::max_queued_bytes).
    #[error("outbound queue full: {queued} bytes not yet written to the server (limit {limit}); is it reading?")]
    QueueFull {
        /// Bytes waiting to be written.
        queued: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The params given are not acceptable (not an object or array, or not
    /// an object although progress was asked for).
    #[error("invalid params: {0}")]
    InvalidParams(&'static str),
    /// `respond` named an id that is not an open server request (never
    /// received, already answered, or answered automatically).
    #[error("no open server request with id {0}")]
    UnknownServerRequest(RequestId),
    /// All request ids up to `i64::MAX` have been used on this connection.
    #[error("request ids exhausted")]
    IdsExhausted,
}

/// How a request ended when it did not end with a result.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    #[error("MCP error {}: {}", .0.code, .0.message)]
    Remote(ErrorObject),
    /// No response within the request's timeout (or its hard maximum).
    /// `notifications/cancelled` was sent unless the method was `initialize`.
    #[error("Request timeout after {ms}ms")]
    Timeout {
        /// The timeout that expired, in milliseconds.
        ms: u64,
    },
    /// Cancelled locally with [`Engine::cancel`](super::Engine::cancel);
    /// `notifications/cancelled` was sent unless the method was `initialize`.
    #[error("Request cancelled: {reason}")]
    Cancelled {
        /// The reason given to `cancel`.
        reason: String,
    },
    /// The HTTP transport got a non-2xx answer for this request:
    /// `HTTP <status>: <text>` (with `WWW-Authenticate` hints).
    #[error("{message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The whole message.
        message: String,
    },
    /// The transport lost the request (session expired, stream gone and
    /// not resumable, connection refused).
    #[error("{message}")]
    Transport {
        /// What happened.
        message: String,
    },
    /// The server wanted an OAuth authorization and it failed (or was not
    /// possible without a user).
    #[error("{message}")]
    Auth {
        /// `authorization failed: …` with the reason.
        message: String,
    },
    /// The response was larger than a limit of ours and was skipped
    /// without being read; the request failed as soon as that was known
    /// (not at its timeout).
    #[error("message too large: {size} bytes read, over the limit of {limit} bytes ({what})")]
    TooLarge {
        /// The limit that was crossed: `max_line_len` (stdio),
        /// `max_event` (an SSE event) or `max_body` (an HTTP body).
        what: &'static str,
        /// Its value, in bytes.
        limit: usize,
        /// Its size: exact for a stdio line (skipped to its end); for an
        /// HTTP body or SSE event a lower bound, the bytes read when the
        /// limit was crossed (the rest was never fetched).
        size: usize,
    },
    /// The HTTP transport met a redirect it does not follow: one that
    /// would turn the POST into a GET (301/302/303), to another origin
    /// (unless allowed), a loop, a sixth hop, or no usable `Location`.
    /// (Boxed: it names URLs, and every `Result` carries this type.)
    #[error(transparent)]
    Redirect(Box<crate::exchange::RedirectError>),
    /// A task followed for the call was given up: it outlived its `ttl`
    /// (the server keeps it no longer) or the client's longest wait for a
    /// task, still not ended. It was cancelled on the server.
    #[error("{message}")]
    TaskExpired {
        /// The task.
        task_id: String,
        /// Which limit, after how long, in what state.
        message: String,
    },
    /// The connection closed before a response came.
    #[error("Transport closed{}", Suffix(.reason))]
    Closed {
        /// The reason given to `close` (may be empty).
        reason: String,
    },
}

/// `": reason"`, or nothing for an empty reason.
struct Suffix<'a>(&'a str);

impl fmt::Display for Suffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, ": {}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_texts() {
        assert_eq!(
            RequestError::Timeout { ms: 30000 }.to_string(),
            "Request timeout after 30000ms"
        );
        assert_eq!(
            RequestError::Remote(ErrorObject::new(-32602, "bad")).to_string(),
            "MCP error -32602: bad"
        );
        assert_eq!(
            RequestError::Cancelled {
                reason: "user".into()
            }
            .to_string(),
            "Request cancelled: user"
        );
        assert_eq!(
            RequestError::Closed {
                reason: String::new()
            }
            .to_string(),
            "Transport closed"
        );
        assert_eq!(
            RequestError::Closed {
                reason: "EOF".into()
            }
            .to_string(),
            "Transport closed: EOF"
        );
    }
}
