//! # mcpwire-blocking — an MCP client for synchronous programs
//!
//! For build scripts, CLIs, plugins and FFI hosts that must not pull in an
//! async runtime: the [`mcpwire`] core decides everything about the
//! protocol, [`mcpwire_adapter`]'s session keeps the books between the
//! connection and its callers (the same session as the async adapters'),
//! and this crate performs it with `std::process`, `poll(2)`, threads and
//! [ureq](https://docs.rs/ureq) (HTTP, TLS with rustls). No tokio, no
//! async-io, no executor. Where `poll(2)` does not exist (Windows), a
//! thread per pipe reads stdout and stderr and writes stdin, and the
//! caller that waits takes what they read.
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
//! - No thread owns the connection: the thread that waits for an answer
//!   reads it (stdio: it polls the server's stdout itself when no other
//!   caller does, or on Windows takes what the pipe's reader thread
//!   read; HTTP: it performs the exchange that brings its answer),
//!   so a call costs what a raw request/response loop costs, plus the
//!   protocol. A background thread reads when nobody waits (notifications,
//!   server requests), keeps the timers and finishes the close.
//! - [`Client`] is `Clone + Send + Sync`: calls from many threads run
//!   concurrently. Every call completes exactly once; a [`CancelToken`]
//!   cancelled from any thread ends the calls holding it, and the server
//!   is told (`notifications/cancelled`).
//! - Server requests (roots, sampling, elicitation) are answered by the
//!   synchronous handlers set in [`ConnectOptions`], each on a thread of
//!   its own; only those capabilities are declared.
//! - stdin is written without blocking; what the pipe does not take waits
//!   in a backlog that the leader writes when the pipe has room.
//! - Dropping the last [`Client`] closes gracefully in the background;
//!   the server process is reaped, never left a zombie.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Locks, ignoring poisoning (nothing here panics while holding a lock).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

mod call;
mod client;
mod exec;
mod http;
mod pipes;
mod tcp;

pub use call::{call, call_timeout, DEFAULT_CALL_TIMEOUT};
pub use client::Client;

pub use mcpwire_adapter::auth;
pub use mcpwire_adapter::era::{self, EraCache};
pub use mcpwire_adapter::net::{Network, NetworkOptions, ProxyChoice};
pub use mcpwire_adapter::Error;
#[cfg(feature = "keychain")]
pub use mcpwire_adapter::KeychainStore;
pub use mcpwire_adapter::{ext, EraFinding, ToolUi, TraceContext, TraceError};
pub use mcpwire_adapter::{
    methods, types, BlockingHandler as RequestHandler, CallError, CallOptions, CancelToken,
    ErrorObject, NotificationFn, Notifications, Progress, ProgressFn, RequestError, ServerConfig,
    ServerNotification, Stats,
};
pub use mcpwire_adapter::{
    AuthOptions, AuthorizeError, EnterpriseIdpOptions, FileStore, LoopbackRedirect, MemoryStore,
    RedirectHandler, StoreError, StoreLock, TokenSource, TokenSourceError, TokenStore,
};
pub use mcpwire_adapter::{ProxyEnv, TlsSettings};

/// How to connect: who we are, which server requests we answer (with
/// synchronous handlers), limits.
pub type ConnectOptions = mcpwire_adapter::options::ConnectOptions<mcpwire_adapter::Blocking>;
