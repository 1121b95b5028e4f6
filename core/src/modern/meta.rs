//! The per-request `_meta` envelope every modern request carries.
//!
//! `params._meta` gets `io.modelcontextprotocol/protocolVersion` (required),
//! `.../clientCapabilities` (required), `.../clientInfo` (SHOULD) and
//! optionally `.../logLevel`; keys already there (e.g. `progressToken`,
//! `traceparent`) are kept.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::mcp::types::{ClientCapabilities, Implementation};

/// `_meta` key: the request's protocol version (required on every request).
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for this request (required).
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the client's name and version (SHOULD be on every request).
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: the minimum log level for this request's `notifications/message`
/// (absent = the server sends none). Replaces `logging/setLevel`.
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key on a result: the server's name and version (SHOULD).
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key on notifications of a `subscriptions/listen` stream (and on
/// its closing result): the JSON-RPC id of the `subscriptions/listen` request.
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";
/// `_meta` key: the progress token (unchanged from 2025).
pub const PROGRESS_TOKEN_KEY: &str = "progressToken";

/// What a modern client stamps on each request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMeta {
    /// The protocol version of this request (e.g. `2026-07-28`).
    pub protocol_version: String,
    /// The capabilities declared for this request.
    pub client_capabilities: ClientCapabilities,
    /// Who the client is (`None` omits the key; the spec says SHOULD send).
    pub client_info: Option<Implementation>,
    /// The log level asked for (`None`: the server sends no log messages).
    pub log_level: Option<String>,
}

impl RequestMeta {
    /// Meta for `version` with the given capabilities and client info.
    pub fn new(
        version: impl Into<String>,
        client_capabilities: ClientCapabilities,
        client_info: Option<Implementation>,
    ) -> Self {
        RequestMeta {
            protocol_version: version.into(),
            client_capabilities,
            client_info,
            log_level: None,
        }
    }

    /// The envelope keys as a JSON map.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(
            PROTOCOL_VERSION_KEY.into(),
            Value::String(self.protocol_version.clone()),
        );
        m.insert(
            CLIENT_CAPABILITIES_KEY.into(),
            serde_json::to_value(&self.client_capabilities)
                .unwrap_or_else(|_| Value::Object(Map::new())),
        );
        if let Some(info) = &self.client_info {
            if let Ok(v) = serde_json::to_value(info) {
                m.insert(CLIENT_INFO_KEY.into(), v);
            }
        }
        if let Some(level) = &self.log_level {
            m.insert(LOG_LEVEL_KEY.into(), Value::String(level.clone()));
        }
        m
    }
}

/// Why the envelope could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    /// `params` is not a JSON object (arrays cannot carry `_meta`).
    #[error("request params must be a JSON object to carry _meta")]
    ParamsNotObject,
    /// `params._meta` exists but is not an object.
    #[error("params._meta must be a JSON object")]
    MetaNotObject,
    /// The raw params are not valid JSON.
    #[error("invalid params JSON: {0}")]
    InvalidJson(String),
}

/// Merges the envelope into `params` (`None` = no params yet). Existing
/// `_meta` keys stay unless they are envelope keys, which are overwritten
/// (the envelope is the client's to set).
pub fn with_meta(params: Option<Value>, meta: &RequestMeta) -> Result<Value, MetaError> {
    merge_meta(params, meta, false)
}

/// [`with_meta`] for a relayed request: the client capabilities, client
/// info and log level `params` already declare are kept; `meta` gives the
/// protocol version and whatever is missing.
pub fn with_meta_kept(params: Option<Value>, meta: &RequestMeta) -> Result<Value, MetaError> {
    merge_meta(params, meta, true)
}

fn merge_meta(params: Option<Value>, meta: &RequestMeta, keep: bool) -> Result<Value, MetaError> {
    let mut obj = match params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(MetaError::ParamsNotObject),
    };
    let entry = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    match entry {
        Value::Object(m) if keep => {
            for (k, v) in meta.to_map() {
                if k == PROTOCOL_VERSION_KEY || !m.contains_key(&k) {
                    m.insert(k, v);
                }
            }
        }
        Value::Object(m) => m.extend(meta.to_map()),
        Value::Null => *entry = Value::Object(meta.to_map()),
        _ => return Err(MetaError::MetaNotObject),
    }
    Ok(Value::Object(obj))
}

/// [`with_meta`] for raw params, as the engine holds them.
pub fn with_meta_raw(
    params: Option<&RawValue>,
    meta: &RequestMeta,
) -> Result<Box<RawValue>, MetaError> {
    let value = match params {
        None => None,
        Some(raw) => Some(
            serde_json::from_str::<Value>(raw.get())
                .map_err(|e| MetaError::InvalidJson(e.to_string()))?,
        ),
    };
    let merged = with_meta(value, meta)?;
    serde_json::value::to_raw_value(&merged).map_err(|e| MetaError::InvalidJson(e.to_string()))
}

/// The protocol version a request's params declare, if any.
pub fn declared_version(params: &Value) -> Option<&str> {
    params.get("_meta")?.get(PROTOCOL_VERSION_KEY)?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta() -> RequestMeta {
        RequestMeta::new(
            "2026-07-28",
            ClientCapabilities::default(),
            Some(Implementation::new("c", "1")),
        )
    }

    #[test]
    fn merges_into_empty_and_missing_params() {
        let expect = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}
        }});
        assert_eq!(with_meta(None, &meta()).unwrap(), expect);
        assert_eq!(with_meta(Some(Value::Null), &meta()).unwrap(), expect);
        assert_eq!(with_meta(Some(json!({})), &meta()).unwrap(), expect);
        assert_eq!(
            with_meta(Some(json!({"_meta": null})), &meta()).unwrap(),
            expect
        );
    }

    #[test]
    fn keeps_existing_meta_and_params() {
        let p = json!({"name": "t", "arguments": {"a": 1},
            "_meta": {"progressToken": 7, "traceparent": "00-x", PROTOCOL_VERSION_KEY: "old"}});
        let out = with_meta(Some(p), &meta()).unwrap();
        assert_eq!(out["name"], "t");
        assert_eq!(out["arguments"]["a"], 1);
        assert_eq!(out["_meta"]["progressToken"], 7);
        assert_eq!(out["_meta"]["traceparent"], "00-x");
        assert_eq!(declared_version(&out), Some("2026-07-28"));
    }

    #[test]
    fn optional_keys() {
        let mut m = RequestMeta::new("2026-07-28", ClientCapabilities::default(), None);
        m.log_level = Some("info".into());
        let out = with_meta(None, &m).unwrap();
        assert!(out["_meta"].get(CLIENT_INFO_KEY).is_none());
        assert_eq!(out["_meta"][LOG_LEVEL_KEY], "info");
    }

    #[test]
    fn refuses_non_objects() {
        assert_eq!(
            with_meta(Some(json!([1])), &meta()),
            Err(MetaError::ParamsNotObject)
        );
        assert_eq!(
            with_meta(Some(json!("x")), &meta()),
            Err(MetaError::ParamsNotObject)
        );
        assert_eq!(
            with_meta(Some(json!({"_meta": 3})), &meta()),
            Err(MetaError::MetaNotObject)
        );
    }

    #[test]
    fn raw_variant() {
        let raw = RawValue::from_string(r#"{"cursor":"c1","_meta":{"progressToken":"p"}}"#.into())
            .unwrap();
        let out = with_meta_raw(Some(&raw), &meta()).unwrap();
        let v: Value = serde_json::from_str(out.get()).unwrap();
        assert_eq!(v["cursor"], "c1");
        assert_eq!(v["_meta"]["progressToken"], "p");
        assert_eq!(v["_meta"][CLIENT_CAPABILITIES_KEY], json!({}));
        assert!(with_meta_raw(None, &meta())
            .unwrap()
            .get()
            .contains(PROTOCOL_VERSION_KEY));
        let arr = RawValue::from_string("[1]".into()).unwrap();
        assert!(matches!(
            with_meta_raw(Some(&arr), &meta()),
            Err(MetaError::ParamsNotObject)
        ));
    }
}
