//! Why a manager call failed.

use std::time::Duration;

/// Why [`Manager::call`](crate::Manager::call) (or another manager call)
/// failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No tool has this agent name.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// No server has this name.
    #[error("unknown server `{0}`")]
    UnknownServer(String),
    /// The server's first connection did not finish within the call's
    /// wait.
    #[error("server `{server}` is still connecting (waited {} ms)", waited.as_millis())]
    Connecting {
        /// The server.
        server: String,
        /// How long the call waited.
        waited: Duration,
    },
    /// The server lost its connection and is reconnecting; it did not come
    /// back within the call's wait.
    #[error(
        "server `{server}` is reconnecting (attempt {attempt} of {max_attempts}; lost: {reason}); \
         waited {} ms",
        waited.as_millis()
    )]
    Reconnecting {
        /// The server.
        server: String,
        /// The reconnect attempt in progress or next.
        attempt: u32,
        /// The most attempts made.
        max_attempts: u32,
        /// Why the connection was lost (or the last attempt's error).
        reason: String,
        /// How long the call waited.
        waited: Duration,
    },
    /// The server gave up (or never could start): its last error.
    #[error("server `{server}` failed: {error}")]
    Failed {
        /// The server.
        server: String,
        /// The error.
        error: String,
    },
    /// The server is disabled in its configuration.
    #[error("server `{0}` is disabled (`enabled: false`)")]
    Disabled(String),
    /// The server is defined by a project's file and the user has not
    /// approved it ([`crate::consent`]).
    #[error("server `{0}` is defined by the project and not approved: it was not started")]
    NeedsApproval(String),
    /// The manager was closed.
    #[error("the manager is closed")]
    Closed,
    /// The call reached the server and failed there, or on the way.
    #[error("server `{server}`: {source}")]
    Client {
        /// The server.
        server: String,
        /// The client's error.
        #[source]
        source: mcpwire_adapter::Error,
    },
}

impl Error {
    /// Whether the call ran out of time (waiting for a connection, or in
    /// the request itself).
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Connecting { .. } | Error::Reconnecting { .. } => true,
            Error::Client { source, .. } => source.is_timeout(),
            _ => false,
        }
    }

    /// The client's error, when the call got that far.
    pub fn client_error(&self) -> Option<&mcpwire_adapter::Error> {
        match self {
            Error::Client { source, .. } => Some(source),
            _ => None,
        }
    }
}
