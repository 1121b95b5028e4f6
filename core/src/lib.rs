//! # mcpwire — a sans-IO Model Context Protocol client core
//!
//! This crate holds everything an MCP client decides, and nothing it *does*:
//! it consumes bytes and events (JSONL lines, SSE chunks, HTTP responses,
//! timer ticks, abort signals) and emits actions. No async, no threads, no
//! I/O and no clock: time is always passed in as `now: Instant`.
//!
//! ```text
//!   rpc/      JSON-RPC engine: ids, correlation, deadlines, progress,
//!             cancellation, exactly-once completion, limits
//!   codec/    jsonl | sse | http1   (bytes <-> frames, bounded, fuzzed)
//! ```
//!
//! The adapters (`mcpwire-tokio`, `mcpwire-smol`, `mcpwire-blocking`) own a
//! core value, perform what it asks and feed back what happened.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod codec;
pub mod config;
pub mod connection;
pub mod exchange;
pub mod manager;
pub mod mcp;
pub mod modern;
pub mod rpc;
pub mod transport;

pub use config::ServerConfig;
pub use connection::{Connection, ConnectionConfig, Input, Output, TransportSpec};
