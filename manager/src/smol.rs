//! The manager on smol (or any executor over the `async-io` reactor):
//! [`Manager`] is [`crate::Manager`] over [`mcpwire_smol::Client`].

pub use mcpwire_smol::{CancelToken, Client, ConnectOptions, ServerConfig, Smol};

/// Many MCP servers on smol (see [`crate::Manager`]).
pub type Manager = crate::Manager<Smol>;
