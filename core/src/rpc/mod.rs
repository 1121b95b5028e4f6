//! JSON-RPC 2.0 engine: ids, correlation, deadlines, progress, cancellation,
//! server requests and limits for one MCP connection, as a sans-IO value.
//!
//! The [`Engine`] never reads a clock and never does I/O: the driver passes
//! `now: Instant` in, feeds it each received JSON text with
//! [`Engine::handle_message`], and carries out the [`Output`]s it polls.
//!
//! # Polling order
//!
//! After every mutation (`request`, `notify`, `respond`, `cancel`,
//! `handle_message`, `handle_timeout`, `close`):
//!
//! 1. drain [`Engine::poll_output`] until it returns `None`, performing each
//!    output (the doc of each [`Output`] variant says what the driver must do);
//! 2. then read [`Engine::poll_timeout`] and wake up at that instant (or on
//!    the next input, whichever comes first) to call
//!    [`Engine::handle_timeout`]. Spurious or repeated calls are harmless.
//!
//! # Guarantees
//!
//! - Our request ids are `0, 1, 2, …` per engine, never reused; the
//!   server's ids live in their own space ([`RequestId`]).
//! - Every successful [`Engine::request`] gets exactly one
//!   [`Output::Complete`]: result, remote error, timeout, cancellation or
//!   close. A late response (after a timeout or cancel) is dropped and
//!   counted, never a second completion.
//! - Timeouts and cancels tell the server (`notifications/cancelled`),
//!   except for `initialize`.
//! - Every server request is answered: by the application (surfaced as
//!   [`Output::ServerRequest`]) or by the engine (`ping` → `{}`, unhandled
//!   method → -32601, over the limit → -32603).
//! - Whatever the peer sends, nothing panics: faults become
//!   [`Output::Diagnostic`]s and [`Stats`] counters.
//!
//! ```
//! use std::time::Instant;
//! use mcpwire::rpc::{Engine, EngineConfig, Output, RequestOptions};
//!
//! let mut engine = Engine::new(EngineConfig::default());
//! let now = Instant::now(); // the driver's clock, never the engine's
//! let id = engine.request(now, "tools/list", None, RequestOptions::default()).unwrap();
//! while let Some(out) = engine.poll_output() {
//!     if let Output::Send { bytes, .. } = out {
//!         assert_eq!(bytes, br#"{"jsonrpc":"2.0","id":0,"method":"tools/list"}"#);
//!     }
//! }
//! engine.handle_message(now, br#"{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}"#);
//! match engine.poll_output() {
//!     Some(Output::Complete { id: done, outcome: Ok(result) }) => {
//!         assert_eq!((done, result.get()), (id, r#"{"tools":[]}"#));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! assert_eq!(engine.poll_timeout(), None);
//! ```

mod config;
mod encode;
mod engine;
mod error;
mod message;
mod output;
mod response;
mod slots;

#[cfg(test)]
mod tests;

pub(crate) use crate::codec::json::Json;
pub use crate::codec::json::Params;
pub use config::{EngineConfig, RequestOptions};
pub(crate) use engine::IdMap;
pub use engine::{Engine, IdHasher, RespondStatus};
pub use error::{LocalError, RequestError};
pub use message::{
    parse_message, parse_message_slow, repair_lone_surrogates, ErrorObject, InvalidMessage,
    InvalidReason, Message, ParseError, RequestId, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, PARSE_ERROR,
};
pub use output::{Diagnostic, Output, Progress, SendKind, Stats};
pub use slots::IdSlots;
