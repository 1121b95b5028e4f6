//! The error codes the modern era defines (`-32020`..`-32099` is reserved
//! for the specification; `-32000`..`-32019` means nothing portable).

use serde::Deserialize;
use serde_json::Value;

use crate::mcp::types::ClientCapabilities;
use crate::rpc::ErrorObject;

use super::discover::MAX_ADVERTISED_VERSIONS;

/// `-32020`: HTTP headers missing, malformed or not matching the body
/// (HTTP 400).
pub const HEADER_MISMATCH: i64 = -32020;
/// `-32021`: the request needs a client capability it did not declare;
/// `data.requiredCapabilities` lists them (HTTP 400).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// `-32022`: the request's protocol version is not served;
/// `data = {supported: [...], requested}` (HTTP 400).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// `-32002`: resource not found in 2025-11-25 and earlier (now -32602);
/// still accepted from older servers.
pub const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error recognised as one of the modern era's own.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModernError {
    /// `-32020`.
    HeaderMismatch {
        /// The server's message.
        message: String,
    },
    /// `-32021`.
    MissingRequiredClientCapability {
        /// The capabilities the server needs (empty if `data` was malformed).
        required: ClientCapabilities,
        /// The server's message.
        message: String,
    },
    /// `-32022` with a readable `data.supported` list.
    UnsupportedProtocolVersion {
        /// Versions the server serves (at most
        /// [`MAX_ADVERTISED_VERSIONS`]).
        supported: Vec<String>,
        /// The version the server says we asked for (may be empty).
        requested: String,
        /// The server's message.
        message: String,
    },
}

#[derive(Deserialize)]
struct UnsupportedData {
    supported: Vec<String>,
    #[serde(default)]
    requested: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MissingCapData {
    required_capabilities: ClientCapabilities,
}

impl ModernError {
    /// Reads a modern error from its parts. A `-32022` whose `data` lacks a
    /// `supported` list is *not* recognised (it gives no way forward, and the
    /// spec makes `data` required), so it reads as `None`.
    pub fn from_parts(code: i64, message: &str, data: Option<&str>) -> Option<Self> {
        let message = message.to_string();
        match code {
            HEADER_MISMATCH => Some(ModernError::HeaderMismatch { message }),
            MISSING_REQUIRED_CLIENT_CAPABILITY => {
                let required = data
                    .and_then(|d| serde_json::from_str::<MissingCapData>(d).ok())
                    .map(|d| d.required_capabilities)
                    .unwrap_or_default();
                Some(ModernError::MissingRequiredClientCapability { required, message })
            }
            UNSUPPORTED_PROTOCOL_VERSION => {
                let d: UnsupportedData = serde_json::from_str(data?).ok()?;
                let mut supported = d.supported;
                supported.truncate(MAX_ADVERTISED_VERSIONS);
                let requested = match d.requested {
                    Some(Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                Some(ModernError::UnsupportedProtocolVersion {
                    supported,
                    requested,
                    message,
                })
            }
            _ => None,
        }
    }

    /// Reads a modern error from an engine error object.
    pub fn from_error(e: &ErrorObject) -> Option<Self> {
        Self::from_parts(e.code, &e.message, e.data.as_ref().map(|d| d.get()))
    }

    /// Reads a modern error from an HTTP response body holding a JSON-RPC
    /// error response (any id, including `null` or none). Bodies over
    /// `max_len` bytes are not parsed.
    pub fn from_body(body: &[u8], max_len: usize) -> Option<Self> {
        #[derive(Deserialize)]
        struct Resp {
            error: Err,
        }
        #[derive(Deserialize)]
        struct Err {
            code: i64,
            #[serde(default)]
            message: String,
            #[serde(default)]
            data: Option<Box<serde_json::value::RawValue>>,
        }
        if body.len() > max_len {
            return None;
        }
        let r: Resp = serde_json::from_slice(body).ok()?;
        Self::from_parts(
            r.error.code,
            &r.error.message,
            r.error.data.as_ref().map(|d| d.get()),
        )
    }

    /// The error code.
    pub fn code(&self) -> i64 {
        match self {
            ModernError::HeaderMismatch { .. } => HEADER_MISMATCH,
            ModernError::MissingRequiredClientCapability { .. } => {
                MISSING_REQUIRED_CLIENT_CAPABILITY
            }
            ModernError::UnsupportedProtocolVersion { .. } => UNSUPPORTED_PROTOCOL_VERSION,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_codes() {
        let e = ModernError::from_parts(
            -32022,
            "Unsupported protocol version",
            Some(r#"{"supported":["2026-07-28"],"requested":"2099-01-01"}"#),
        )
        .unwrap();
        assert_eq!(
            e,
            ModernError::UnsupportedProtocolVersion {
                supported: vec!["2026-07-28".into()],
                requested: "2099-01-01".into(),
                message: "Unsupported protocol version".into()
            }
        );
        assert_eq!(e.code(), -32022);
        let e = ModernError::from_parts(
            -32021,
            "m",
            Some(r#"{"requiredCapabilities":{"elicitation":{"form":{}}}}"#),
        )
        .unwrap();
        match e {
            ModernError::MissingRequiredClientCapability { required, .. } => {
                assert!(required.elicitation.is_some())
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ModernError::from_parts(-32020, "h", None),
            Some(ModernError::HeaderMismatch {
                message: "h".into()
            })
        );
        assert!(matches!(
            ModernError::from_parts(-32021, "m", Some("[]")),
            Some(ModernError::MissingRequiredClientCapability { .. })
        ));
    }

    #[test]
    fn unrecognised() {
        assert_eq!(ModernError::from_parts(-32601, "x", None), None);
        assert_eq!(ModernError::from_parts(-32022, "x", None), None);
        assert_eq!(
            ModernError::from_parts(-32022, "x", Some(r#"{"supported":"a"}"#)),
            None
        );
        assert_eq!(ModernError::from_parts(-32022, "x", Some("not json")), None);
        // A numeric `requested` is kept as text.
        match ModernError::from_parts(-32022, "x", Some(r#"{"supported":[],"requested":7}"#)) {
            Some(ModernError::UnsupportedProtocolVersion { requested, .. }) => {
                assert_eq!(requested, "7")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn from_http_bodies() {
        let body = br#"{"jsonrpc":"2.0","id":9,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2099-01-01"}}}"#;
        assert!(ModernError::from_body(body, 4096).is_some());
        assert!(ModernError::from_body(body, 10).is_none());
        // Python's legacy path answer to a header-less modern POST.
        let legacy = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: Missing session ID"}}"#;
        assert!(ModernError::from_body(legacy, 4096).is_none());
        assert!(ModernError::from_body(b"", 4096).is_none());
        assert!(ModernError::from_body(b"Not Found", 4096).is_none());
        let mismatch = br#"{"jsonrpc":"2.0","error":{"code":-32020,"message":"x"}}"#;
        assert_eq!(
            ModernError::from_body(mismatch, 4096).map(|e| e.code()),
            Some(-32020)
        );
    }

    #[test]
    fn from_engine_error() {
        let e = ErrorObject::new(-32022, "u").with_data(
            serde_json::value::RawValue::from_string(
                r#"{"supported":["a","b"],"requested":"c"}"#.into(),
            )
            .unwrap(),
        );
        assert!(matches!(
            ModernError::from_error(&e),
            Some(ModernError::UnsupportedProtocolVersion { ref supported, .. }) if supported.len() == 2
        ));
    }
}
