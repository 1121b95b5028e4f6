//! # mcpwire-tokio — an MCP client on tokio
//!
//! The [`mcpwire`] core decides everything about the protocol; this crate
//! performs it on tokio: child processes for stdio servers, TCP (and TLS
//! with the `tls` feature) for Streamable HTTP and legacy SSE servers, and
//! timers.
//!
//! ```no_run
//! use mcpwire_tokio::{CallOptions, Client, ServerConfig};
//! use serde_json::json;
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), mcpwire_tokio::Error> {
//! let client = Client::connect(ServerConfig::stdio("my-server").arg("--flag")).await?;
//! let tools = client.list_tools().await?; // follows cursors
//! let out = client.call_tool("echo", json!({"message": "hi"})).await?;
//! let out = client
//!     .call_tool_with("slow", json!({}), CallOptions::new()
//!         .timeout(Duration::from_secs(5))
//!         .on_progress(|p| eprintln!("{}/{:?}", p.progress, p.total)))
//!     .await?;
//! client.close().await?; // graceful
//! # let _ = (tools, out); Ok(()) }
//! ```
//!
//! - Every call completes exactly once; a call whose future is dropped, or
//!   whose [`CancelToken`] fires, is cancelled and the server is told
//!   (`notifications/cancelled`).
//! - Server requests (roots, sampling, elicitation) are answered by the
//!   handlers set in [`ConnectOptions`]; only those capabilities are
//!   declared. Anything else gets "method not found", never silence.
//! - One task owns the connection; writes are awaited (backpressure); the
//!   timer is reset only when the deadline changes.
//! - Dropping the last [`Client`] closes gracefully in the background; the
//!   child is killed if the runtime goes away first.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod driver;
mod error;
pub(crate) mod http;
mod options;
mod process;

pub use client::{Client, Notifications};
pub use error::Error;
pub use options::{
    BoxFuture, CallOptions, CancelToken, ConnectOptions, ProgressFn, RequestHandler,
};

pub use mcpwire::config::ServerConfig;
pub use mcpwire::mcp::types;
pub use mcpwire::mcp::ServerNotification;
pub use mcpwire::rpc::{ErrorObject, Progress, RequestError};
