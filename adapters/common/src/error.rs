//! The adapter's error type: every way a call can fail, typed.

use mcpwire::connection::{CallError, SpecError};
use mcpwire::mcp::PaginationError;
use mcpwire::rpc::{ErrorObject, RequestError};

/// Why a [`Client`](crate::Client) call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server configuration is invalid.
    #[error("invalid server configuration: {0}")]
    Config(#[from] SpecError),
    /// The server process could not be started.
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Connecting failed before the session was ready (handshake refused,
    /// server gone, HTTP error).
    #[error("connect failed: {0}")]
    Connect(String),
    /// The request ended without a result: the server's JSON-RPC error, a
    /// timeout, a cancellation, an HTTP failure, or the connection closing.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The call was refused locally (not ready, closed, capability not
    /// declared by the server, limits).
    #[error(transparent)]
    Call(#[from] CallError),
    /// The result did not have the expected shape.
    #[error("unexpected result for {method}: {source}")]
    Decode {
        /// The method.
        method: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// A paginated list could not be followed to its end.
    #[error(transparent)]
    Pagination(#[from] PaginationError),
    /// An option given to the client or the call is not valid (a
    /// malformed `traceparent`, an extension identifier without a prefix).
    #[error("invalid {option}: {problem}")]
    InvalidOption {
        /// Which option.
        option: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// The network settings cannot be used: an explicit proxy URL that is
    /// malformed or of a kind not supported, a TLS file that cannot be
    /// read.
    #[error(transparent)]
    Network(#[from] crate::net::NetworkError),
    /// The client's driver task is gone (the client was closed).
    #[error("client closed")]
    ClientClosed,
    /// A tool's result broke the `outputSchema` it declared (see
    /// [`ConnectOptions::validate_output`](crate::options::ConnectOptions::validate_output)).
    #[error("tool `{tool}` returned {problem}")]
    StructuredOutput {
        /// The tool.
        tool: String,
        /// How.
        problem: crate::output::OutputProblem,
    },
    /// The tool changed (or appeared) since the server's tools were
    /// pinned, and is withheld until the change is accepted
    /// ([`ConnectOptions::pin_tools`](crate::ConnectOptions::pin_tools)).
    #[error("tool `{tool}` is withheld: {change} since its tools were pinned; review and accept the change first")]
    ToolWithheld {
        /// The tool.
        tool: String,
        /// What changed.
        change: String,
    },
}

impl Error {
    /// Whether the request timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Request(RequestError::Timeout { .. }))
    }

    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Request(RequestError::Cancelled { .. }))
    }

    /// Whether the answer was over a size limit (`max_line_len`,
    /// `max_event`, `max_body`) and was skipped unread.
    pub fn is_too_large(&self) -> bool {
        matches!(self, Error::Request(RequestError::TooLarge { .. }))
    }

    /// Whether the call was refused because too many bytes wait to be
    /// written to the server (it stopped reading):
    /// [`max_queued_bytes`](mcpwire::rpc::EngineConfig::max_queued_bytes).
    pub fn is_queue_full(&self) -> bool {
        matches!(
            self,
            Error::Call(CallError::Local(mcpwire::rpc::LocalError::QueueFull { .. }))
        )
    }

    /// The server's JSON-RPC error, if that is what this is.
    pub fn remote(&self) -> Option<&ErrorObject> {
        match self {
            Error::Request(RequestError::Remote(e)) => Some(e),
            _ => None,
        }
    }

    /// The URL elicitations the user must complete before the request is
    /// made again, when the server answered -32042
    /// (`URLElicitationRequiredError`); `None` for any other error (or a
    /// -32042 whose `data` does not list them).
    pub fn url_elicitations(&self) -> Option<Vec<mcpwire::mcp::types::ElicitUrl>> {
        let e = self.remote()?;
        if e.code != mcpwire::mcp::types::URL_ELICITATION_REQUIRED {
            return None;
        }
        let data = e.data.as_ref()?;
        serde_json::from_str::<mcpwire::mcp::types::UrlElicitationRequired>(data.get())
            .ok()
            .map(|d| d.elicitations)
    }

    /// Whether the connection is closed or the server gone.
    pub fn is_closed(&self) -> bool {
        matches!(
            self,
            Error::Request(RequestError::Closed { .. })
                | Error::Call(CallError::Closed(_))
                | Error::ClientClosed
        )
    }
}
