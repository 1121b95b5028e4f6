//! # mcpwire-adapter — the runtime-neutral half of the async adapters
//!
//! `mcpwire-tokio` and `mcpwire-smol` are this crate plus a [`Runtime`]
//! implementation of a few hundred lines: spawning tasks, sleeping, child
//! processes and TCP/TLS connections. Everything else exists once, here:
//!
//! - [`Client`]: the typed MCP methods (pagination included), cancellation
//!   on drop or by [`CancelToken`], graceful [`Client::close`], and closing
//!   in the background when the last clone is dropped;
//! - the driver: the one task that owns the sans-IO [`mcpwire`]
//!   `Connection`, performs its outputs and feeds back what happened
//!   (waiters by request id, progress routing, server-request handlers,
//!   notifications fan-out, the stdin writer with backpressure, and the
//!   rule that a process exit is reported only after stdout and stderr
//!   ended, or a grace period);
//! - [`http::HttpClient`]: the HTTP/1.1 exchange runner with its
//!   keep-alive pool, over the runtime's streams;
//! - [`ConnectOptions`], [`CallOptions`], the handler types and [`Error`].
//!
//! Applications use an adapter crate, which re-exports all of this under
//! its own names; an adapter for another runtime implements [`Runtime`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
mod client;
mod driver;
pub mod era;
mod error;
pub mod http;
mod options;
pub mod process;
pub mod runtime;
pub mod setup;
mod sync;
#[cfg(feature = "tls")]
pub mod tls;

pub use auth::{
    AuthOptions, FileStore, LoopbackRedirect, MemoryStore, RedirectHandler, TokenStore,
};
pub use client::{Client, Notifications};
pub use error::Error;
pub use options::{
    BoxFuture, CallOptions, CancelToken, ConnectOptions, ProgressFn, RequestHandler,
};
pub use runtime::Runtime;

pub use mcpwire::config::ServerConfig;
pub use mcpwire::mcp::types;
pub use mcpwire::mcp::ServerNotification;
pub use mcpwire::rpc::{ErrorObject, Progress, RequestError};
