//! `server/discover`: the request, its result and version selection.
//!
//! The request carries only the `_meta` envelope (build it with
//! [`with_meta`](super::with_meta) on empty params). The result lists the
//! server's versions, capabilities and identity.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::mcp::types::{Extra, Implementation, ServerCapabilities};

use super::meta::SERVER_INFO_KEY;

/// The modern versions this crate speaks, newest first.
pub const SUPPORTED_MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// Bound on the versions read from a peer's list (longer lists are cut).
pub const MAX_ADVERTISED_VERSIONS: usize = 64;

/// The `server/discover` result (`DiscoverResult`, a `CacheableResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Versions the server supports; pick one for later requests.
    pub supported_versions: Vec<String>,
    /// What the server offers.
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// Guidance for the model on using this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// `serverInfo` in the result body (the draft page and the conformance
    /// mocks put it here; the schema puts it in `_meta`): see
    /// [`DiscoverResult::server_info`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Implementation>,
    /// Cache freshness hint in milliseconds (required by the schema, read
    /// leniently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `"public"` or `"private"` (required by the schema, read leniently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<String>,
    /// `"complete"` (absent reads as complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// The result's `_meta` (`io.modelcontextprotocol/serverInfo`, …).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

impl DiscoverResult {
    /// Parses a result, cutting an over-long version list to
    /// [`MAX_ADVERTISED_VERSIONS`].
    pub fn parse(raw: &str) -> Result<Self, serde_json::Error> {
        let mut r: DiscoverResult = serde_json::from_str(raw)?;
        r.supported_versions.truncate(MAX_ADVERTISED_VERSIONS);
        Ok(r)
    }

    /// The server's identity: `_meta["io.modelcontextprotocol/serverInfo"]`
    /// per the schema, else the body's `serverInfo`.
    pub fn server_info(&self) -> Option<Implementation> {
        self.meta
            .as_ref()
            .and_then(|m| m.get(SERVER_INFO_KEY))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .or_else(|| self.server_info.clone())
    }

    /// The version to use with this server, given ours (newest first).
    pub fn select(&self, ours: &[&str]) -> Option<String> {
        select_version(ours, &self.supported_versions)
    }
}

/// The first of `ours` (ordered by preference, newest first) that the
/// server lists; `None` when they share none.
///
/// ```
/// use mcpwire::modern::select_version;
/// let theirs = vec!["2025-11-25".to_string(), "2026-07-28".to_string()];
/// assert_eq!(select_version(&["2026-07-28"], &theirs).as_deref(), Some("2026-07-28"));
/// assert_eq!(select_version(&["2099-01-01"], &theirs), None);
/// ```
pub fn select_version(ours: &[&str], theirs: &[String]) -> Option<String> {
    ours.iter()
        .find(|v| theirs.iter().take(MAX_ADVERTISED_VERSIONS).any(|t| t == *v))
        .map(|v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from the Python `mcp` 2.3.0 server over stdio.
    const PYTHON: &str = r#"{"cacheScope":"private","capabilities":{"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"tools":{"listChanged":true}},"instructions":"A tiny test server.","resultType":"complete","supportedVersions":["2026-07-28"],"ttlMs":0,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"tiny","version":""}}}"#;
    /// The conformance suite's mock (serverInfo in the body).
    const CONFORMANCE: &str = r#"{"supportedVersions":["2026-07-28"],"capabilities":{},"serverInfo":{"name":"test","version":"1.0"},"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#;

    #[test]
    fn parses_real_results() {
        let r = DiscoverResult::parse(PYTHON).unwrap();
        assert_eq!(r.supported_versions, ["2026-07-28"]);
        assert!(r.capabilities.tools.is_some());
        assert_eq!(r.instructions.as_deref(), Some("A tiny test server."));
        assert_eq!(r.server_info().unwrap().name, "tiny");
        assert_eq!(r.ttl_ms, Some(0));
        assert_eq!(
            r.select(SUPPORTED_MODERN_VERSIONS).as_deref(),
            Some("2026-07-28")
        );
        let c = DiscoverResult::parse(CONFORMANCE).unwrap();
        assert_eq!(c.server_info().unwrap().name, "test");
        assert_eq!(c.cache_scope.as_deref(), Some("private"));
    }

    #[test]
    fn lenient_and_bounded() {
        let r = DiscoverResult::parse(r#"{"supportedVersions":[],"x":1}"#).unwrap();
        assert_eq!(r.select(SUPPORTED_MODERN_VERSIONS), None);
        assert_eq!(r.extra["x"], 1);
        assert!(DiscoverResult::parse(r#"{"capabilities":{}}"#).is_err());
        assert!(DiscoverResult::parse(r#"{"supportedVersions":"2026-07-28"}"#).is_err());
        let many: Vec<String> = (0..1000).map(|i| format!("v{i}")).collect();
        let raw = serde_json::json!({ "supportedVersions": many }).to_string();
        assert_eq!(
            DiscoverResult::parse(&raw)
                .unwrap()
                .supported_versions
                .len(),
            MAX_ADVERTISED_VERSIONS
        );
    }

    #[test]
    fn selection_prefers_our_order() {
        let theirs: Vec<String> = vec!["2026-07-28".into(), "2027-01-01".into()];
        assert_eq!(
            select_version(&["2027-01-01", "2026-07-28"], &theirs).as_deref(),
            Some("2027-01-01")
        );
        assert_eq!(select_version(&[], &theirs), None);
    }
}
