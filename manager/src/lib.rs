//! # mcpwire-manager — many MCP servers for an agent host
//!
//! What a host needs on top of one MCP client: server definitions found
//! where MCP hosts keep them, all servers started in parallel behind a
//! short startup deadline (slow ones are offered from a tool cache until
//! they connect), connections that come back after a crash, and tool names
//! an agent can use.
//!
//! The same manager runs on every runtime mcpwire does, one front end each
//! over one policy ([`policy`]) and one shared state:
//!
//! | runtime | type | feature |
//! |---|---|---|
//! | tokio | `tokio::Manager` = `Manager<Tokio>` | `tokio` (default) |
//! | smol / async-io | `smol::Manager` = `Manager<Smol>` | `smol` |
//! | another executor | [`Manager<R>`](Manager) for your [`Runtime`] | — |
//! | no runtime (threads) | `blocking::Manager` | `blocking` |
//!
//! ```no_run
//! use mcpwire_manager::tokio::Manager;
//! use mcpwire_manager::{CallOptions, Discovery, ManagerOptions};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), mcpwire_manager::Error> {
//! let found = Discovery::new().discover();            // .mcp.json, ~/.cursor/mcp.json, …
//! for e in &found.errors { eprintln!("skipped {e}"); }
//! let manager = Manager::start(found.servers, ManagerOptions::new()).await;
//! for t in manager.tools() {                            // mcp__<server>__<tool>
//!     println!("{} {}", t.name, if t.deferred { "(connecting)" } else { "" });
//! }
//! let out = manager.call("mcp__files__read", json!({"path": "a.txt"}), CallOptions::new()).await?;
//! for s in manager.status() { println!("{} {}", s.name, s.state); }
//! manager.close().await;
//! # let _ = out; Ok(()) }
//! ```
//!
//! - **Discovery** ([`discovery`], whose table lists every file): explicit
//!   files, then project files (`.mcp.json`, `mcp.json`, `.cursor/mcp.json`,
//!   `.vscode/mcp.json`, `.gemini/settings.json`, `.codex/config.toml`,
//!   `.github/mcp.json`, `.zed/settings.json`), then user files
//!   (`~/.cursor/mcp.json`, Claude Desktop, `~/.claude.json`, Codex,
//!   Copilot CLI, Windsurf, Gemini CLI, Zed, VS Code and its Insiders and
//!   VSCodium builds, Goose); the first definition of a name wins. JSON
//!   files may have comments and trailing commas.
//! - **Tool lists**: a host entry's allow and deny lists (Gemini's
//!   `includeTools` / `excludeTools`, Codex's `enabled_tools` /
//!   `disabled_tools`, Copilot's `tools`, Windsurf's `disabledTools`) are a
//!   [`ToolFilter`] on the [`ServerEntry`]: other tools are not exposed and
//!   calls to them are refused as unknown.
//!   `${VAR}` / `${VAR:-default}` are expanded when a server is started;
//!   each entry is validated on its own and a bad one only fails itself.
//! - **Consent** ([`consent`]): a server of a project's file (a cloned
//!   repository's `.mcp.json`, …) is not started until the user approved
//!   it (per project, per definition, kept in a 0600 file in the user's
//!   config directory); [`ManagerOptions::consent`] takes a host's own
//!   policy. User files are trusted.
//! - **Startup**: every server connects at once, each with its own connect
//!   timeout. [`Manager::start`] returns when all have finished their first
//!   attempt, or at the startup deadline (250 ms) if every server still
//!   connecting has cached tools; those are exposed as *deferred* tools
//!   whose calls wait for the connection.
//! - **Tool cache**: `tools.json` in the user's cache directory
//!   ([`paths::cache_dir`]), keyed by server name and a hash of the
//!   unexpanded entry (no secrets), 30-day TTL, rewritten after every
//!   listing, a corrupt file is a miss.
//! - **Reconnect**: a connection that closes unexpectedly is re-made with
//!   exponential backoff and jitter up to a maximum number of attempts,
//!   then the server is failed with the last error; tools are re-listed
//!   after each connect and on `notifications/tools/list_changed`. The
//!   policy is the sans-IO [`policy::machine`].
//! - **Tool pinning** ([`ManagerOptions::tool_pins`], [`pins`]): a
//!   server's tools are pinned at their first listing (per definition);
//!   a later change is reported in [`ServerStatus::tool_changes`], and a
//!   project's server's changed and new tools are withheld until the
//!   change is accepted.
//! - **Writing hosts' files** ([`hostedit`]): add, remove, enable and
//!   disable servers in each host's own format, every other byte kept.
//! - **Names**: `mcp__<server>__<tool>`, `[A-Za-z0-9_-]`, at most 64
//!   characters, collision-free ([`policy::names`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cache_file;
pub mod consent;
pub mod discovery;
mod error;
pub mod hostedit;
mod manager;
mod options;
pub mod paths;
pub mod policy;
mod state;

#[cfg(feature = "blocking")]
pub mod blocking;
#[cfg(feature = "smol")]
pub mod smol;
#[cfg(feature = "tokio")]
pub mod tokio;

pub use consent::{Approvals, ConsentPolicy, TrustAll};
pub use discovery::{
    Discovered, Discovery, Input, Scope, ServerEntry, SourceError, SourceReport, ToolFilter,
};
pub use error::Error;
pub use manager::Manager;
pub use options::{CallOptions, InputFn, ManagerOptions};
pub use paths::Env;
pub use policy::{RetryPolicy, ServerState};
pub use state::{AgentTool, Changes, ServerStatus};

pub use mcpwire::config::ServerConfig;
pub use mcpwire_adapter::pins::{self, PinStore, ToolChange};
pub use mcpwire_adapter::{CancelToken, ConnectOptions, Runtime};
