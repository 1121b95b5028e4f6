//! The sans-IO half of a multi-server manager: what an agent host needs on
//! top of one connection, minus the I/O.
//!
//! ```text
//!   expand   ${VAR} / ${VAR:-default} in server entries (env passed in)
//!   names    mcp__<server>__<tool> agent tool names, unique, ≤ 64 chars
//!   policy   per-server connect/reconnect machine (backoff, jitter, give
//!            up) and the startup deadline, on simulated time
//!   cache    the tool cache file format: version, TTL, key = name + hash
//!            of the unexpanded entry, corrupt = miss
//! ```
//!
//! The `mcpwire-manager` crate runs these on tokio: discovery of config
//! files, one supervisor task per server, deferred tools, calls that wait
//! out a reconnect.

pub mod cache;
pub mod expand;
pub mod names;
pub mod policy;

pub use cache::{config_hash, ToolCache};
pub use expand::{expand_config, expand_str, ExpandError};
pub use policy::{Action, RetryPolicy, ServerMachine, ServerState, Startup};
