//! # mcpwire — a sans-IO Model Context Protocol client core
//!
//! This crate holds everything an MCP client decides, and nothing it *does*:
//! it consumes bytes and events (JSONL lines, SSE chunks, HTTP responses,
//! timer ticks, abort signals) and emits actions. No async, no threads, no
//! I/O and no clock: time is always passed in as `now: Instant`.
//!
//! ## Floors
//!
//! Each floor imports only floors below it (`tests/floors.rs` checks it);
//! the lowest is at the bottom.
//!
//! ```text
//!   connection/  one connection: routes engine, wire, auth, the era    imports every floor below
//!   config       an mcpServers entry and the transport it selects      imports modern
//!   transport/   stdio | Streamable HTTP | legacy HTTP+SSE machines    imports exchange, rpc, codec, mcp
//!   auth/        OAuth 2.1 as a sans-IO flow                           imports exchange
//!   modern/      the 2026-07-28 era: _meta, discover, MRTR, headers    imports mcp, rpc
//!   rpc/         JSON-RPC engine: ids, deadlines, exactly-once         imports codec, exchange, mcp
//!   exchange/    HTTP exchanges: request, head, URL, redirects, auth   imports codec
//!   codec/       jsonl | sse | http1 | glimpse (bytes <-> frames)      imports nothing
//!   mcp/         the MCP surface: methods and their descriptors, types imports nothing
//! ```
//!
//! The adapters (`mcpwire-tokio`, `mcpwire-smol`, `mcpwire-blocking`) own a
//! [`Connection`], perform what it asks and feed back what happened; any
//! program can do the same without them.
//!
//! ## Embedding without an adapter
//!
//! Below is the whole of `examples/std_child.rs`, compiled with these
//! docs: a run loop over a child process with std alone (reader threads
//! for stdout and stderr and a waiter for the exit, all sending to one
//! channel; after each input, drain [`Connection::poll_output`]; sleep
//! with `recv_timeout` until [`Connection::poll_timeout`], then
//! [`Connection::handle_timeout`]). It connects, lists the tools, closes
//! gracefully and exits; `tests/std_child.rs` runs it against
//! `mcpwire-test-server`. Try it with
//! `cargo run -p mcpwire --example std_child -- <server command> [args…]`.
//!
#![doc = concat!("````no_run\n", include_str!("../examples/std_child.rs"), "````")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod codec;
pub mod config;
pub mod connection;
pub mod exchange;
pub mod mcp;
pub mod modern;
pub mod rpc;
pub mod server;
pub mod transport;

pub use config::ServerConfig;
pub use connection::{Connection, ConnectionConfig, Input, Output, OwnedInput, TransportSpec};
