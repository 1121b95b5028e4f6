//! # mcpwire-adapter — one client session for every runtime
//!
//! The [`mcpwire`] core decides everything about the protocol; this crate
//! is what lies between its `Connection` and an application, written once
//! for every adapter:
//!
//! - [`session::Session`]: the runtime-neutral bookkeeping between a
//!   connection and its callers (each call's slot and waker, ready and
//!   closed, notification subscribers, the handler of each server request,
//!   answers, counters), handing the executor [`session::Effect`]s to
//!   perform;
//! - the async executor over a small [`Runtime`] trait (`mcpwire-tokio`
//!   and `mcpwire-smol` are this crate plus a `Runtime` of a few hundred
//!   lines) and the async [`Client`]; `mcpwire-blocking` is the same
//!   session driven by threads;
//! - the client surface written once ([`client_surface!`]): every typed
//!   MCP method through one generic path to the core's method table;
//! - [`ConnectOptions`], [`CallOptions`], [`CancelToken`], the handler
//!   types, [`Notifications`] (async and blocking), OAuth hooks and
//!   [`Error`];
//! - [`http::HttpClient`]: the HTTP/1.1 exchange runner with its keep-alive
//!   pool, over the runtime's streams, through proxies (`CONNECT` tunnels,
//!   absolute-form requests);
//! - [`net::Network`]: the proxy each URL takes and the TLS it is verified
//!   with ([`tls`]), one definition for every adapter.
//!
//! ## Bringing another executor
//!
//! Implement [`Runtime`] for it: spawning a task, a timer, a child process
//! with piped stdio, and TCP (and TLS) connections, all as `futures-io`
//! streams. `Client<YourRuntime>` then has the whole client. The tests of
//! this crate implement it for a thread-per-task executor over `async-io`
//! that is neither tokio nor smol (`tests/other_runtime.rs`).
// No unsafe code but the Windows Job Object calls (`process::job`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
mod client;
mod drive;
pub mod era;
mod error;
pub mod files;
pub mod handlers;
pub mod http;
#[cfg(feature = "keychain")]
pub mod keychain;
pub mod launch;
pub mod net;
mod notifications;
pub mod options;
pub mod output;
pub mod pins;
pub mod process;
pub mod runtime;
pub mod session;
pub mod setup;
#[doc(hidden)]
pub mod surface;
mod sync;
pub mod tls;
pub mod wait;

pub use auth::{
    AuthOptions, AuthorizeError, EnterpriseIdpOptions, FileStore, LoopbackRedirect, MemoryStore,
    RedirectHandler, StoreError, StoreLock, TokenSource, TokenSourceError, TokenStore,
};
pub use client::Client;
pub use error::Error;
pub use handlers::{
    BlockingHandler, BoxFuture, DiagnosticFn, Handler, NotificationFn, RequestHandler,
};
#[cfg(feature = "keychain")]
pub use keychain::KeychainStore;
pub use mcpwire::connection::{CallError, Diagnostic};
pub use notifications::Notifications;
pub use options::{Async, Blocking, CallOptions, CancelToken, ProgressFn};

/// How the async clients connect (handlers are `async` closures).
pub type ConnectOptions = options::ConnectOptions<Async>;
pub use runtime::{Runtime, SpawnError};

pub use mcpwire::config::{ServerConfig, TlsSettings};
pub use mcpwire::connection::EraFinding;
pub use mcpwire::exchange::proxy::ProxyEnv;
pub use mcpwire::mcp::ext::{self, ToolUi};
pub use mcpwire::mcp::methods;
pub use mcpwire::mcp::trace::{TraceContext, TraceError};
pub use mcpwire::mcp::types;
pub use mcpwire::mcp::ServerNotification;
pub use mcpwire::rpc::{ErrorObject, Progress, RequestError, Stats};

/// What [`client_surface!`] expands to refers to (not public API).
#[doc(hidden)]
pub mod __private {
    pub use mcpwire::mcp::methods::ClientNotification;
    pub use mcpwire::mcp::{Method, Paged, Paginator};
    pub use mcpwire::rpc::Stats;
    pub use serde::de::DeserializeOwned;
    pub use serde::Serialize;
    pub use serde_json::Value;
    pub use tracing;
}
