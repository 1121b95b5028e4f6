//! The MCP client session: handshake, version negotiation, capabilities,
//! typed methods and notifications.
//!
//! The [`Connection`](crate::Connection) drives it; this module holds the
//! rules that do not depend on the wire: what `initialize` says, which
//! versions we accept, which method needs which server capability, and how
//! to read notifications and paginated lists.
//!
//! The handshake lives in [`handshake`] so that the stateless 2026-07-28 era
//! can be added beside it without touching `rpc` or `codec`.

pub mod ext;
pub mod handshake;
pub mod methods;
pub mod trace;
pub mod types;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

pub use handshake::{ClientConfig, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
pub use methods::{check_capability, Capability, Method, Paged, ServerRequestKind};
use types::{ElicitationComplete, LoggingMessage, ResourceUpdated};

/// A notification from the server, typed where the spec defines it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerNotification {
    /// `notifications/message`: a log record.
    LoggingMessage(LoggingMessage),
    /// `notifications/tools/list_changed`.
    ToolsListChanged,
    /// `notifications/resources/list_changed`.
    ResourcesListChanged,
    /// `notifications/prompts/list_changed`.
    PromptsListChanged,
    /// `notifications/resources/updated`.
    ResourceUpdated(ResourceUpdated),
    /// `notifications/elicitation/complete`: a URL elicitation finished.
    ElicitationComplete(ElicitationComplete),
    /// Anything else, passed through unchanged (also a known method whose
    /// params did not parse).
    Other {
        /// The method.
        method: String,
        /// The raw params.
        params: Option<Box<RawValue>>,
    },
}

impl ServerNotification {
    /// Types a notification the engine surfaced. (Progress and
    /// cancellation are routed by the engine and never reach here.)
    pub fn parse(method: String, params: Option<Box<RawValue>>) -> Self {
        fn typed<T: DeserializeOwned>(params: &Option<Box<RawValue>>) -> Option<T> {
            serde_json::from_str(params.as_ref()?.get()).ok()
        }
        let parsed = match method.as_str() {
            "notifications/message" => typed(&params).map(ServerNotification::LoggingMessage),
            "notifications/tools/list_changed" => Some(ServerNotification::ToolsListChanged),
            "notifications/resources/list_changed" => {
                Some(ServerNotification::ResourcesListChanged)
            }
            "notifications/prompts/list_changed" => Some(ServerNotification::PromptsListChanged),
            "notifications/resources/updated" => {
                typed(&params).map(ServerNotification::ResourceUpdated)
            }
            "notifications/elicitation/complete" => {
                typed(&params).map(ServerNotification::ElicitationComplete)
            }
            _ => None,
        };
        parsed.unwrap_or(ServerNotification::Other { method, params })
    }

    /// Its params as JSON (a typed notification's serialized again), to
    /// send it on as it came.
    pub fn params(&self) -> Option<Box<RawValue>> {
        fn raw<T: serde::Serialize>(v: &T) -> Option<Box<RawValue>> {
            serde_json::value::to_raw_value(v).ok()
        }
        match self {
            ServerNotification::LoggingMessage(m) => raw(m),
            ServerNotification::ResourceUpdated(u) => raw(u),
            ServerNotification::ElicitationComplete(e) => raw(e),
            ServerNotification::ToolsListChanged
            | ServerNotification::ResourcesListChanged
            | ServerNotification::PromptsListChanged => None,
            ServerNotification::Other { params, .. } => params.clone(),
        }
    }

    /// The method name.
    pub fn method(&self) -> &str {
        match self {
            ServerNotification::LoggingMessage(_) => "notifications/message",
            ServerNotification::ToolsListChanged => "notifications/tools/list_changed",
            ServerNotification::ResourcesListChanged => "notifications/resources/list_changed",
            ServerNotification::PromptsListChanged => "notifications/prompts/list_changed",
            ServerNotification::ResourceUpdated(_) => "notifications/resources/updated",
            ServerNotification::ElicitationComplete(_) => "notifications/elicitation/complete",
            ServerNotification::Other { method, .. } => method,
        }
    }
}

/// Parses a raw result into a typed one.
pub fn parse_result<T: DeserializeOwned>(raw: &RawValue) -> Result<T, serde_json::Error> {
    serde_json::from_str(raw.get())
}

/// Follows `nextCursor` through a paginated list (`tools/list`,
/// `resources/list`, …), refusing a server that repeats a cursor (which
/// would loop forever) and bounding the number of pages.
///
/// ```
/// use mcpwire::mcp::Paginator;
/// let mut pages = Paginator::new(1000);
/// assert_eq!(pages.cursor(), None); // first request: no cursor
/// assert_eq!(pages.advance(Some("p2".into())), Ok(true)); // more to fetch
/// assert_eq!(pages.cursor(), Some("p2"));
/// assert!(pages.advance(Some("p2".into())).is_err()); // repeated: refused
/// ```
#[derive(Debug, Clone)]
pub struct Paginator {
    cursor: Option<String>,
    seen: std::collections::HashSet<String>,
    pages: usize,
    max_pages: usize,
}

/// Why pagination stopped early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PaginationError {
    /// The server sent a cursor it had sent before.
    #[error("server repeated the pagination cursor {0:?}; stopping to avoid a loop")]
    RepeatedCursor(String),
    /// More pages than the bound.
    #[error("more than {0} pages; stopping")]
    TooManyPages(usize),
}

impl Paginator {
    /// A paginator that fetches at most `max_pages` pages.
    pub fn new(max_pages: usize) -> Self {
        Paginator {
            cursor: None,
            seen: Default::default(),
            pages: 0,
            max_pages,
        }
    }

    /// The cursor for the next request (`None` for the first).
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// Records a page's `nextCursor`: `Ok(true)` when another page must be
    /// fetched, `Ok(false)` at the end.
    pub fn advance(&mut self, next: Option<String>) -> Result<bool, PaginationError> {
        self.pages += 1;
        let Some(next) = next else {
            return Ok(false);
        };
        if !self.seen.insert(next.clone()) {
            return Err(PaginationError::RepeatedCursor(next));
        }
        if self.pages >= self.max_pages {
            return Err(PaginationError::TooManyPages(self.max_pages));
        }
        self.cursor = Some(next);
        Ok(true)
    }

    /// Params for the next list request: `{"cursor": …}` or none.
    pub fn params(&self) -> Option<Box<RawValue>> {
        self.cursor.as_ref().map(|c| {
            serde_json::value::to_raw_value(&serde_json::json!({ "cursor": c }))
                .expect("a string serializes")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Option<Box<RawValue>> {
        Some(RawValue::from_string(s.to_string()).unwrap())
    }

    #[test]
    fn notifications_are_typed_or_passed_through() {
        let n = ServerNotification::parse(
            "notifications/message".into(),
            raw(r#"{"level":"warning","logger":"db","data":{"x":1}}"#),
        );
        match n {
            ServerNotification::LoggingMessage(m) => {
                assert_eq!(m.level, types::LoggingLevel::Warning);
                assert_eq!(m.logger.as_deref(), Some("db"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            ServerNotification::parse("notifications/tools/list_changed".into(), None),
            ServerNotification::ToolsListChanged
        ));
        let odd = ServerNotification::parse("notifications/message".into(), raw(r#"{"level":7}"#));
        assert!(matches!(odd, ServerNotification::Other { .. }));
        let custom = ServerNotification::parse("x/y".into(), raw("[1]"));
        assert_eq!(custom.method(), "x/y");
    }

    #[test]
    fn paginator_bounds() {
        let mut p = Paginator::new(3);
        assert_eq!(p.params().map(|r| r.get().to_string()), None);
        assert_eq!(p.advance(Some("a".into())), Ok(true));
        assert_eq!(p.params().unwrap().get(), r#"{"cursor":"a"}"#);
        assert_eq!(p.advance(Some("b".into())), Ok(true));
        assert_eq!(
            p.advance(Some("c".into())),
            Err(PaginationError::TooManyPages(3))
        );
        let mut p = Paginator::new(10);
        assert_eq!(p.advance(None), Ok(false));
    }
}
