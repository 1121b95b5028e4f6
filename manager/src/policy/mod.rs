//! The manager's policy, without I/O: what an agent host decides on top of
//! one connection. Every front end (`tokio`, `smol`,
//! `blocking`) runs these same rules; none of them is protocol,
//! which is why they live here and not in the `mcpwire` core.
//!
//! ```text
//!   expand   ${VAR} / ${VAR:-default} in server entries (env passed in)
//!   names    mcp__<server>__<tool> agent tool names, unique, ≤ 64 chars
//!   machine  per-server connect/reconnect machine (backoff, jitter, give
//!            up) and the startup deadline, on simulated time
//!   cache    the tool cache file format: version, TTL, key = name + hash
//!            of the unexpanded entry, corrupt = miss
//! ```

pub mod cache;
pub mod expand;
pub mod machine;
pub mod names;

pub use cache::{config_hash, ToolCache};
pub use expand::{expand_config, expand_str, ExpandError};
pub use machine::{Action, RetryPolicy, ServerMachine, ServerState, Startup};
