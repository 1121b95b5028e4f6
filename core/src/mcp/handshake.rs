//! The 2025-era handshake: `initialize` → result → `notifications/initialized`.
//!
//! ```text
//!   Connection::new ──► initialize {protocolVersion, capabilities, clientInfo}
//!   (only ping may cross before the answer)
//!   result ──► version supported? ──no──► close: "server chose X; we speak A, B, …"
//!                      │yes
//!                      ▼
//!          notifications/initialized ──► Ready
//! ```

use serde_json::value::RawValue;

use super::methods::ServerRequestKind;
use super::types::{ClientCapabilities, Implementation, InitializeParams, InitializeResult};

/// The newest protocol version this crate speaks (sent in `initialize`).
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// Every version accepted in the server's answer, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Who the client is and what it handles.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// `clientInfo` (defaults to this crate's name and version).
    pub client_info: Implementation,
    /// The capabilities to declare. Declare only what the application
    /// handles: each one makes the server send requests the application
    /// must answer.
    pub capabilities: ClientCapabilities,
    /// The version asked for (default [`LATEST_PROTOCOL_VERSION`]).
    pub protocol_version: String,
    /// Whether tool calls may become tasks the connection follows
    /// (default true): declares the `io.modelcontextprotocol/tasks`
    /// extension on 2026-07-28 requests, and calls 2025-11-25 tools whose
    /// `execution.taskSupport` is `required` as tasks.
    pub tasks: bool,
    /// The longest a followed task is waited for, whatever its call's own
    /// timeout (default 24 h; `None`: no limit but the task's `ttl`). Past
    /// it, or past the task's `ttl`, the task is cancelled and the call
    /// fails with [`RequestError::TaskExpired`](crate::rpc::RequestError::TaskExpired).
    pub max_task_wait: Option<std::time::Duration>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            client_info: Implementation::new("mcpwire", env!("CARGO_PKG_VERSION")),
            capabilities: ClientCapabilities::default(),
            protocol_version: LATEST_PROTOCOL_VERSION.to_string(),
            tasks: true,
            max_task_wait: Some(std::time::Duration::from_secs(24 * 3600)),
        }
    }
}

impl ClientConfig {
    /// The server-to-client request methods the declared capabilities
    /// promise to answer; every other server request gets -32601.
    pub fn handled_requests(&self) -> Vec<&'static str> {
        ServerRequestKind::HANDLED
            .into_iter()
            .filter(|k| k.declared_in(&self.capabilities))
            .map(ServerRequestKind::method)
            .collect()
    }

    /// The `initialize` params.
    pub fn initialize_params(&self) -> Box<RawValue> {
        let params = InitializeParams {
            protocol_version: self.protocol_version.clone(),
            capabilities: self.capabilities.clone(),
            client_info: self.client_info.clone(),
        };
        serde_json::value::to_raw_value(&params).expect("initialize params serialize")
    }
}

/// Why the handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The server chose a version we do not speak.
    #[error(
        "server chose protocol version {server}, which this client does not support (it speaks {})",
        SUPPORTED_PROTOCOL_VERSIONS.join(", ")
    )]
    UnsupportedVersion {
        /// The server's version.
        server: String,
    },
    /// The result is not an `InitializeResult`.
    #[error("invalid initialize result: {0}")]
    InvalidResult(String),
    /// The server answered `initialize` with an error, or it failed.
    #[error("initialize failed: {0}")]
    Failed(String),
}

/// Reads the `initialize` result and checks the version.
pub fn accept_result(raw: &RawValue) -> Result<InitializeResult, HandshakeError> {
    let result: InitializeResult = serde_json::from_str(raw.get())
        .map_err(|e| HandshakeError::InvalidResult(e.to_string()))?;
    if !SUPPORTED_PROTOCOL_VERSIONS.contains(&result.protocol_version.as_str()) {
        return Err(HandshakeError::UnsupportedVersion {
            server: result.protocol_version,
        });
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::types::ListChanged;

    #[test]
    fn params_declare_only_what_is_configured() {
        let mut cfg = ClientConfig::default();
        assert_eq!(
            cfg.initialize_params().get(),
            format!(
                r#"{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"mcpwire","version":"{}"}}}}"#,
                env!("CARGO_PKG_VERSION")
            )
        );
        assert!(cfg.handled_requests().is_empty());
        cfg.capabilities.roots = Some(ListChanged {
            list_changed: Some(true),
            ..Default::default()
        });
        cfg.capabilities.elicitation = Some(serde_json::from_str(r#"{"form":{}}"#).unwrap());
        assert_eq!(cfg.handled_requests(), ["roots/list", "elicitation/create"]);
        assert!(cfg.initialize_params().get().contains(
            r#""capabilities":{"roots":{"listChanged":true},"elicitation":{"form":{}}}"#
        ));
    }

    #[test]
    fn versions_are_negotiated_down_or_refused() {
        for v in SUPPORTED_PROTOCOL_VERSIONS {
            let raw = RawValue::from_string(format!(
                r#"{{"protocolVersion":"{v}","capabilities":{{}},"serverInfo":{{"name":"s","version":"1"}}}}"#
            ))
            .unwrap();
            assert_eq!(accept_result(&raw).unwrap().protocol_version, *v);
        }
        let raw = RawValue::from_string(
            r#"{"protocolVersion":"2099-01-01","capabilities":{},"serverInfo":{"name":"s","version":"1"}}"#.into(),
        )
        .unwrap();
        let e = accept_result(&raw).unwrap_err();
        assert_eq!(
            e.to_string(),
            "server chose protocol version 2099-01-01, which this client does not support (it speaks 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"
        );
        let raw = RawValue::from_string(r#"{"protocolVersion":"2025-11-25"}"#.into()).unwrap();
        assert!(matches!(
            accept_result(&raw),
            Err(HandshakeError::InvalidResult(_))
        ));
    }
}
