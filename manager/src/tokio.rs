//! The manager on tokio: [`Manager`] is [`crate::Manager`] over
//! [`mcpwire_tokio::Client`]. Call it from within a tokio runtime.

pub use mcpwire_tokio::{CancelToken, Client, ConnectOptions, ServerConfig, Tokio};

/// Many MCP servers on tokio (see [`crate::Manager`]).
pub type Manager = crate::Manager<Tokio>;
