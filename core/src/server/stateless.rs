//! The 2026-07-28 side of a [`ServerSession`]: reading a request's
//! `_meta` envelope, answering `server/discover`, and stamping results.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{ServeError, ServerSession};
use crate::mcp::methods::{Eras, MethodId};
use crate::modern::discover::SUPPORTED_MODERN_VERSIONS;
use crate::modern::meta::{CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY};
use crate::modern::{
    decode_header_value, HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::rpc::{ErrorObject, RequestId, INVALID_PARAMS, METHOD_NOT_FOUND};

/// The envelope keys a request's `params._meta` may carry (others are
/// skipped unread).
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default, borrow)]
    version: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", default)]
    capabilities: Option<Value>,
}

/// The versions a server serves, newest first: 2026-07-28 when `modern`,
/// and the handshake era's.
pub fn served_versions(modern: bool) -> Vec<&'static str> {
    let modern = if modern {
        SUPPORTED_MODERN_VERSIONS
    } else {
        &[]
    };
    modern
        .iter()
        .chain(super::SUPPORTED_PROTOCOL_VERSIONS)
        .copied()
        .collect()
}

/// The HTTP status of a 2026-07-28 POST answered with error `code` (as
/// JSON, no stream opened): 404 for a method not found, 400 for a header
/// mismatch, a missing client capability and a version not served (that
/// era says these are Bad Request), else 200.
pub fn error_status(code: i64) -> u16 {
    match code {
        METHOD_NOT_FOUND => 404,
        HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY | UNSUPPORTED_PROTOCOL_VERSION => 400,
        _ => 200,
    }
}

/// The era of a client's request `method` with `params`, for a server
/// that serves 2026-07-28 when `modern`: `Ok(Some(the client's
/// capabilities))` when its `_meta` envelope declares 2026-07-28,
/// `Ok(None)` for a request of the handshake era, or the error that
/// refuses it: -32602 for an envelope without client capabilities or a
/// `server/discover` without an envelope, -32022 (with the versions
/// served) for a version not served, -32601 for a method 2026-07-28
/// removed (`initialize`, `ping`, `logging/setLevel`, …).
pub fn request_era(
    method: &str,
    params: Option<&RawValue>,
    modern: bool,
) -> Result<Option<Value>, ErrorObject> {
    if !modern {
        return Ok(None);
    }
    let discover = method == MethodId::Discover.name();
    let Some(version) = declared_meta(params).and_then(|m| m.version.map(|v| (v, m.capabilities)))
    else {
        if discover {
            return Err(ErrorObject::new(
                INVALID_PARAMS,
                format!("invalid params: server/discover needs _meta with {PROTOCOL_VERSION_KEY}"),
            ));
        }
        return Ok(None);
    };
    let (version, capabilities) = version;
    if !SUPPORTED_MODERN_VERSIONS.contains(&version.as_ref()) {
        if super::SUPPORTED_PROTOCOL_VERSIONS.contains(&version.as_ref()) && !discover {
            // A handshake version in an envelope: that era has none; the
            // request is judged as of the handshake.
            return Ok(None);
        }
        let served = served_versions(true);
        let mut error = ErrorObject::new(
            UNSUPPORTED_PROTOCOL_VERSION,
            format!(
                "unsupported protocol version {version}: this server speaks {}",
                served.join(", ")
            ),
        );
        let data = serde_json::json!({"supported": served, "requested": version});
        error.data = serde_json::value::to_raw_value(&data).ok();
        return Err(error);
    }
    let Some(capabilities) = capabilities else {
        return Err(ErrorObject::new(
            INVALID_PARAMS,
            format!("invalid params: _meta lacks {CLIENT_CAPABILITIES_KEY}"),
        ));
    };
    if MethodId::of(method).is_some_and(|m| m.spec().eras == Eras::Handshake) {
        return Err(ErrorObject::new(
            METHOD_NOT_FOUND,
            format!("method not found: {method} (not in {version})"),
        ));
    }
    Ok(Some(capabilities))
}

/// The version a request's `_meta` envelope declares, if any.
pub fn declared_version(params: Option<&RawValue>) -> Option<String> {
    declared_meta(params)?
        .version
        .map(std::borrow::Cow::into_owned)
}

fn declared_meta(params: Option<&RawValue>) -> Option<Meta<'_>> {
    // Most requests of the handshake era have no envelope: not parsed.
    let p = params.filter(|p| p.get().contains(PROTOCOL_VERSION_KEY))?;
    serde_json::from_str::<Params>(p.get()).ok()?.meta
}

/// The 2026-07-28 headers of an HTTP POST of request `method`, checked
/// against its body (`header` reads one, by lowercase name):
/// `MCP-Protocol-Version` must be the envelope's version, `Mcp-Method`
/// the method, `Mcp-Name` the `name` or `uri` the method table mirrors
/// (verbatim or `=?base64?…?=`). A mismatch is -32020 (HTTP 400), and so
/// is a body giving that field twice (parsers differ on which counts).
pub fn check_headers<'h>(
    method: &str,
    params: Option<&RawValue>,
    header: impl Fn(&str) -> Option<&'h str>,
) -> Result<(), ErrorObject> {
    let mismatch = |name: &str, got: Option<&str>, want: &str| {
        let got = got.map_or("missing".to_owned(), |g| format!("{g:?}"));
        Err(ErrorObject::new(
            HEADER_MISMATCH,
            format!("header mismatch: {name} is {got}, the body says {want:?}"),
        ))
    };
    let expect = |name: &str, want: &str| match header(name) {
        Some(v) if v == want || decode_header_value(v).as_deref() == Some(want) => Ok(()),
        got => mismatch(name, got, want),
    };
    if let Some(version) = declared_version(params) {
        expect("mcp-protocol-version", &version)?;
    }
    expect("mcp-method", method)?;
    let Some(field) = MethodId::of(method).and_then(|m| m.spec().header_param) else {
        return Ok(());
    };
    match mirrored(params, field) {
        Mirrored::One(v) => expect("mcp-name", &v),
        Mirrored::Twice => Err(ErrorObject::new(
            HEADER_MISMATCH,
            format!(
                "header mismatch: the body gives {field} more than once, so mcp-name \
                 cannot be checked against it"
            ),
        )),
        // The method itself refuses params without it.
        Mirrored::None => Ok(()),
    }
}

/// What a request's params say of the field its `Mcp-Name` mirrors.
enum Mirrored {
    /// Absent, not a string, or params that do not parse.
    None,
    /// Once, a string.
    One(String),
    /// More than once: parsers differ on which counts (serde_json keeps
    /// the last, others the first), so the header cannot be judged.
    Twice,
}

/// The params' top-level `field` (see [`Mirrored`]).
fn mirrored(params: Option<&RawValue>, field: &'static str) -> Mirrored {
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};

    struct Seed(&'static str);
    impl<'de> DeserializeSeed<'de> for Seed {
        type Value = Mirrored;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Mirrored, D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for Seed {
        type Value = Mirrored;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Mirrored, M::Error> {
            let (mut seen, mut count) = (Mirrored::None, 0);
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key != self.0 {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                count += 1;
                seen = match map.next_value::<Value>()? {
                    Value::String(s) => Mirrored::One(s),
                    _ => Mirrored::None,
                };
            }
            Ok(if count > 1 { Mirrored::Twice } else { seen })
        }
    }
    let Some(p) = params else {
        return Mirrored::None;
    };
    let mut d = serde_json::Deserializer::from_str(p.get());
    Seed(field).deserialize(&mut d).unwrap_or(Mirrored::None)
}

/// A 2026-07-28 result as that era has it: stamped `resultType:
/// "complete"` when it does not say what it is (an `input_required` one
/// is left as it is), and, for a method whose result is cacheable
/// (`tools/list`, …, SEP-2549), with `ttlMs` 0 and `cacheScope`
/// `private` when absent (nothing cached unless the server says so).
pub fn modern_result(raw: Box<RawValue>, method: Option<MethodId>) -> Box<RawValue> {
    let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(raw.get()) else {
        // Not an object: nothing to stamp.
        return raw;
    };
    let mut changed = false;
    if !map.contains_key("resultType") {
        map.insert("resultType".into(), Value::from("complete"));
        changed = true;
    }
    let complete = map.get("resultType").and_then(Value::as_str) == Some("complete");
    if complete && method.is_some_and(|m| m.spec().cacheable) {
        if !map.contains_key("ttlMs") {
            map.insert("ttlMs".into(), Value::from(0));
            changed = true;
        }
        if !map.contains_key("cacheScope") {
            map.insert("cacheScope".into(), Value::from("private"));
            changed = true;
        }
    }
    if !changed {
        return raw;
    }
    serde_json::value::to_raw_value(&map).unwrap_or(raw)
}

/// A `server/discover` result from the server's `result` object as for
/// `initialize` (`capabilities`, `serverInfo`, `instructions`): with
/// `supportedVersions` (both eras'), the identity in `_meta` too (where
/// the schema puts it), `resultType`, and the caching hints when absent.
pub fn discover_result(result: Value) -> Result<Box<RawValue>, ServeError> {
    let mut map = match result {
        Value::Object(map) => map,
        other => {
            let why = format!("the discover result is not an object: {other}");
            return Err(ServeError::Serialize(why));
        }
    };
    map.insert(
        "supportedVersions".into(),
        Value::from(served_versions(true)),
    );
    if let Some(info) = map.get("serverInfo").cloned() {
        let meta = map
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.entry(SERVER_INFO_KEY).or_insert(info);
        }
    }
    // A CacheableResult: the hints are required.
    map.entry("ttlMs").or_insert(Value::from(0));
    map.entry("cacheScope").or_insert(Value::from("private"));
    let raw =
        serde_json::value::to_raw_value(&map).map_err(|e| ServeError::Serialize(e.to_string()))?;
    Ok(modern_result(raw, Some(MethodId::Discover)))
}

impl ServerSession {
    /// The versions served, newest first: 2026-07-28 (when
    /// [`ServeConfig::modern`](super::ServeConfig::modern)) and the
    /// handshake era's.
    pub fn served_versions(&self) -> Vec<&'static str> {
        served_versions(self.config.modern)
    }

    /// Answers `server/discover` ([`ServerEvent::Discover`](super::ServerEvent::Discover))
    /// with the server's `result` object as for `initialize`
    /// (`capabilities`, `serverInfo`, `instructions`): see
    /// [`discover_result`].
    pub fn discover(&mut self, id: &RequestId, result: Value) -> Result<(), ServeError> {
        if !self.open.contains_key(id) {
            return Err(ServeError::NotOpen(id.clone()));
        }
        let raw = discover_result(result)?;
        self.respond(id.clone(), Ok(raw))
    }
}
