//! # mcpwire-bench — MCP clients side by side
//!
//! The pieces shared by the two binaries: the wire lines of the echo
//! protocol ([`proto`]) and the minimal echo server ([`server`]). The
//! orchestrator and the clients live in `src/main.rs` and its modules.
#![warn(missing_docs)]

pub mod proto;
pub mod server;
