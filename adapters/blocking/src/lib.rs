//! # mcpwire-blocking — an MCP client for synchronous programs
//!
//! For build scripts, CLIs, plugins and FFI hosts that must not pull in an
//! async runtime: the [`mcpwire`] core decides everything about the
//! protocol; this crate performs it with `std::process`, threads and
//! [ureq](https://docs.rs/ureq) (HTTP, TLS with rustls). No tokio, no
//! async-io, no executor.
//!
//! ```no_run
//! use mcpwire_blocking::{CallOptions, Client, ServerConfig};
//! use serde_json::json;
//! use std::time::Duration;
//!
//! let client = Client::connect(ServerConfig::stdio("my-server").arg("--flag"))?;
//! let tools = client.list_tools()?; // follows cursors
//! let out = client.call_tool("echo", json!({"message": "hi"}))?;
//! let out = client.call_tool_with("slow", json!({}), CallOptions::new()
//!     .timeout(Duration::from_secs(5))
//!     .on_progress(|p| eprintln!("{}/{:?}", p.progress, p.total)))?;
//! client.close()?; // graceful
//! # let _ = (tools, out); Ok::<(), mcpwire_blocking::Error>(())
//! ```
//!
//! One request to a Streamable HTTP server, handshake included:
//! [`call`]`(url, "tools/call", params)`.
//!
//! - One thread per [`Client`] owns the sans-IO connection; everything
//!   else (calls, cancels, stdout/stderr chunks, the child's exit, HTTP
//!   responses from ureq worker threads) reaches it on one channel, and it
//!   sleeps with `recv_timeout` until the core's next deadline.
//! - [`Client`] is `Clone + Send + Sync`: calls from many threads run
//!   concurrently. Every call completes exactly once; a [`CancelToken`]
//!   cancelled from any thread ends the calls holding it, and the server
//!   is told (`notifications/cancelled`).
//! - Server requests (roots, sampling, elicitation) are answered by the
//!   synchronous handlers set in [`ConnectOptions`], each on a thread of
//!   its own; only those capabilities are declared.
//! - stdin writes go through a writer thread with a bounded queue; the
//!   owner never blocks on a pipe.
//! - Dropping the last [`Client`] closes gracefully in the background;
//!   the server process is reaped, never left a zombie.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod call;
mod client;
mod http;
mod options;
mod owner;
mod process;

pub use call::{call, call_timeout, DEFAULT_CALL_TIMEOUT};
pub use client::{Client, Notifications};
pub use options::{
    CallOptions, CancelToken, ConnectOptions, NotificationFn, ProgressFn, RequestHandler,
};

pub use mcpwire_adapter::auth;
pub use mcpwire_adapter::Error;
pub use mcpwire_adapter::{
    types, ErrorObject, Progress, RequestError, ServerConfig, ServerNotification,
};
pub use mcpwire_adapter::{
    AuthOptions, FileStore, LoopbackRedirect, MemoryStore, RedirectHandler, TokenStore,
};
