//! Building blocks for the stateless 2026-07-28 protocol era ("modern"
//! MCP): no `initialize`, no sessions, every request self-describing.
//!
//! Pure functions and types only (no state machine): the
//! [`Connection`](crate::Connection) puts them to work, and
//! [`config`](crate::config) reads [`EraPolicy`] from a server entry.
//!
//! ```text
//!   meta      _meta envelope keys, merge into request params
//!   discover  server/discover params + result, version selection
//!   mrtr      resultType, input_required -> input requests -> retry params
//!   errors    -32020 / -32021 / -32022 typed
//!   headers   MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*
//!   probe     era detection: stdio (server/discover) and HTTP (first POST)
//!   cache     results a server says may be cached (ttlMs, SEP-2549)
//! ```
//!
//! Source of truth: `schema/2026-07-28/schema.ts` and
//! `docs/specification/2026-07-28/` in modelcontextprotocol/modelcontextprotocol.

pub mod cache;
pub mod discover;
pub mod errors;
pub mod headers;
pub mod meta;
pub mod mrtr;
pub mod probe;

use crate::mcp::methods::{notifications, MethodId};
pub use discover::{select_version, DiscoverResult, SUPPORTED_MODERN_VERSIONS};
pub use errors::{
    ModernError, HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION,
};
pub use headers::{
    decode_header_value, encode_header_value, message_headers, param_header_values, param_headers,
    request_headers, HeaderError, ParamHeader, ToolHeaders,
};
pub use meta::{with_meta, with_meta_kept, with_meta_raw, MetaError, RequestMeta};
pub use mrtr::{
    classify, retry_params, InputRequest, InputRequired, MrtrError, ResultKind, ResultType,
};
pub use probe::{
    http_probe_verdict, stdio_probe_verdict, Era, EraPolicy, ProbeVerdict, StdioProbeOutcome,
};

/// The protocol version string of the stateless era.
pub const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";

/// The method that advertises a modern server's versions and capabilities.
pub const DISCOVER_METHOD: &str = MethodId::Discover.name();

/// The method that opens a long-lived notification stream (replaces the
/// HTTP GET stream and `resources/subscribe`).
pub const SUBSCRIPTIONS_LISTEN_METHOD: &str = MethodId::SubscriptionsListen.name();

/// The first message on a `subscriptions/listen` stream.
pub const SUBSCRIPTIONS_ACKNOWLEDGED_NOTIFICATION: &str = notifications::SUBSCRIPTIONS_ACKNOWLEDGED;

/// Whether `method` was removed in the modern era (never sent to a modern
/// server as itself): the requests the method table marks
/// [`Eras::Handshake`](crate::mcp::methods::Eras::Handshake), and the
/// notifications `initialized` and `roots/list_changed`.
pub fn removed_in_modern(method: &str) -> bool {
    match MethodId::of(method) {
        Some(m) => !m.in_modern(),
        None => matches!(
            method,
            notifications::INITIALIZED | notifications::ROOTS_LIST_CHANGED
        ),
    }
}
