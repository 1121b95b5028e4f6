//! W3C trace context in a request's `_meta` (SEP-414): the keys
//! `traceparent`, `tracestate` and `baggage`, unprefixed, whose values
//! follow the W3C Trace Context and W3C Baggage formats. A server that
//! traces continues the caller's trace instead of starting its own.
//!
//! ```
//! use mcpwire::mcp::trace::TraceContext;
//! let t = TraceContext::new("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01")
//!     .unwrap()
//!     .with_state("congo=t61rcWkgMzE")
//!     .unwrap();
//! let params = serde_json::value::to_raw_value(&serde_json::json!({"name": "echo"})).unwrap();
//! let stamped = t.stamp(Some(&params)).unwrap();
//! assert!(stamped.get().contains(r#""traceparent":"00-0af7"#));
//! ```

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The `_meta` key of the trace's position.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key of vendor trace state.
pub const TRACESTATE: &str = "tracestate";
/// The `_meta` key of W3C baggage.
pub const BAGGAGE: &str = "baggage";

/// Longest `tracestate` or `baggage` value kept (W3C: a tracestate of up
/// to 512 characters must be propagated; baggage of up to 8192 bytes).
const MAX_TRACESTATE: usize = 512;
const MAX_BAGGAGE: usize = 8192;

/// A value that is not what the W3C formats allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// `traceparent` is not `VERSION-TRACEID-PARENTID-FLAGS` in lowercase
    /// hex (2-32-16-2 digits), or an id is all zeros, or the version is
    /// `ff`.
    #[error("invalid traceparent {0:?}: expected 00-<32 hex>-<16 hex>-<2 hex> with non-zero ids")]
    Traceparent(String),
    /// `tracestate` or `baggage` is too long or has characters outside
    /// printable ASCII.
    #[error("invalid {key}: {why}")]
    Field {
        /// `tracestate` or `baggage`.
        key: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// The request's params are not an object (or its `_meta` is not).
    #[error("the request's params (or their _meta) are not a JSON object")]
    Params,
}

/// The trace context a request carries (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
    baggage: Option<String>,
}

fn hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn printable(key: &'static str, value: &str, max: usize) -> Result<(), TraceError> {
    if value.len() > max {
        return Err(TraceError::Field {
            key,
            why: "too long",
        });
    }
    if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(TraceError::Field {
            key,
            why: "only printable ASCII is allowed",
        });
    }
    Ok(())
}

impl TraceContext {
    /// The context of `traceparent` (W3C Trace Context, version `00` or a
    /// later one with the same leading fields).
    pub fn new(traceparent: &str) -> Result<TraceContext, TraceError> {
        let bad = || TraceError::Traceparent(traceparent.chars().take(80).collect());
        let parts: Vec<&str> = traceparent.split('-').collect();
        let [version, trace_id, parent_id, flags, rest @ ..] = parts.as_slice() else {
            return Err(bad());
        };
        let ok = hex(version, 2)
            && *version != "ff"
            && hex(trace_id, 32)
            && hex(parent_id, 16)
            && hex(flags, 2)
            && trace_id.bytes().any(|b| b != b'0')
            && parent_id.bytes().any(|b| b != b'0')
            // Version 00 has exactly four fields; later ones may add more.
            && (rest.is_empty() || *version != "00");
        if !ok {
            return Err(bad());
        }
        Ok(TraceContext {
            traceparent: traceparent.to_owned(),
            tracestate: None,
            baggage: None,
        })
    }

    /// With vendor trace state (`tracestate`), passed on as given.
    pub fn with_state(mut self, tracestate: &str) -> Result<TraceContext, TraceError> {
        printable(TRACESTATE, tracestate, MAX_TRACESTATE)?;
        self.tracestate = Some(tracestate.to_owned()).filter(|s| !s.is_empty());
        Ok(self)
    }

    /// With W3C baggage, passed on as given.
    pub fn with_baggage(mut self, baggage: &str) -> Result<TraceContext, TraceError> {
        printable(BAGGAGE, baggage, MAX_BAGGAGE)?;
        self.baggage = Some(baggage.to_owned()).filter(|s| !s.is_empty());
        Ok(self)
    }

    /// The `traceparent` value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// `params` with this context in their `_meta` (created if absent;
    /// other `_meta` keys are kept, these three replaced).
    pub fn stamp(&self, params: Option<&RawValue>) -> Result<Box<RawValue>, TraceError> {
        let mut obj = match params.map(|p| serde_json::from_str::<Value>(p.get())) {
            None | Some(Ok(Value::Null)) => Map::new(),
            Some(Ok(Value::Object(o))) => o,
            Some(_) => return Err(TraceError::Params),
        };
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if meta.is_null() {
            *meta = Value::Object(Map::new());
        }
        let Value::Object(meta) = meta else {
            return Err(TraceError::Params);
        };
        meta.insert(TRACEPARENT.into(), self.traceparent.clone().into());
        for (key, value) in [(TRACESTATE, &self.tracestate), (BAGGAGE, &self.baggage)] {
            match value {
                Some(v) => meta.insert(key.into(), v.clone().into()),
                None => meta.remove(key),
            };
        }
        serde_json::value::to_raw_value(&obj).map_err(|_| TraceError::Params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparents_are_checked() {
        assert!(TraceContext::new(TP).is_ok());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(TraceContext::new(bad).is_err(), "{bad:?}");
        }
        // A later version may carry more fields.
        assert!(TraceContext::new(&format!("01{}-ab", &TP[2..])).is_ok());
        assert!(TraceContext::new(TP)
            .unwrap()
            .with_state("a=b\u{7}")
            .is_err());
        assert!(TraceContext::new(TP)
            .unwrap()
            .with_state(&"x".repeat(600))
            .is_err());
    }

    #[test]
    fn stamped_into_meta_keeping_the_rest() {
        let t = TraceContext::new(TP)
            .unwrap()
            .with_state("rojo=00f067aa0ba902b7")
            .unwrap();
        let raw = |v: Value| serde_json::value::to_raw_value(&v).unwrap();
        let out = t
            .stamp(Some(&raw(serde_json::json!({
                "name": "echo",
                "_meta": {"progressToken": 3, "traceparent": "old"}
            }))))
            .unwrap();
        let v: Value = serde_json::from_str(out.get()).unwrap();
        assert_eq!(v["_meta"]["traceparent"], TP);
        assert_eq!(v["_meta"]["tracestate"], "rojo=00f067aa0ba902b7");
        assert_eq!(v["_meta"]["progressToken"], 3);
        assert!(v["_meta"].get("baggage").is_none());
        assert_eq!(v["name"], "echo");
        let out = t.stamp(None).unwrap();
        let v: Value = serde_json::from_str(out.get()).unwrap();
        assert_eq!(v["_meta"]["traceparent"], TP);
        assert_eq!(
            t.stamp(Some(&raw(serde_json::json!([1])))).unwrap_err(),
            TraceError::Params
        );
    }
}
