//! Outgoing JSON-RPC messages, written by hand into a `Vec<u8>`.
//!
//! Every message is one compact JSON object without framing: raw JSON given
//! by the caller is copied as is unless it holds a line break (whitespace
//! outside strings is then stripped), so the output never contains `\n`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::error::LocalError;
use super::message::{ErrorObject, RequestId};
use crate::codec::json::Json;
use crate::codec::strings::{write_str, write_u64};
use crate::mcp::methods::notifications::CANCELLED;

const HEAD: &[u8] = br#"{"jsonrpc":"2.0""#;

fn write_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64(out, n.unsigned_abs());
}

/// Appends raw JSON, stripping insignificant whitespace if it contains a
/// line break (a valid JSON text only has raw line breaks outside strings).
pub(crate) fn write_raw(out: &mut Vec<u8>, raw: &str) {
    let bytes = raw.as_bytes();
    if memchr::memchr2(b'\n', b'\r', bytes).is_none() {
        out.extend_from_slice(bytes);
        return;
    }
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
            in_string = b == b'"';
        }
    }
}

/// Appends params: as they are when known compact, else through
/// [`write_raw`].
fn write_params(out: &mut Vec<u8>, params: Json<'_>) {
    if params.compact() {
        out.extend_from_slice(params.get().as_bytes());
    } else {
        write_raw(out, params.get());
    }
}

fn write_id(out: &mut Vec<u8>, id: &RequestId) {
    match id {
        RequestId::Number(n) => write_i64(out, *n),
        RequestId::String(s) => write_str(out, s),
    }
}

/// Checks that caller-supplied params are structured (object or array).
pub(crate) fn check_params(params: Option<Json<'_>>, progress: bool) -> Result<(), LocalError> {
    match params.map(|p| p.get().as_bytes().first()) {
        None | Some(Some(b'{')) => Ok(()),
        Some(Some(b'[')) if !progress => Ok(()),
        Some(Some(b'[')) => Err(LocalError::InvalidParams(
            "progress needs object params (to carry _meta.progressToken)",
        )),
        Some(_) => Err(LocalError::InvalidParams(
            "params must be a JSON object or array",
        )),
    }
}

/// `{"jsonrpc":"2.0","id":ID,"method":M[,"params":P]}`; with `progress`, the
/// id is also written as `params._meta.progressToken`. A known method
/// comes `quoted` already ([`MethodId::quoted`]).
///
/// [`MethodId::quoted`]: crate::mcp::methods::MethodId::quoted
pub(crate) fn request(
    out: &mut Vec<u8>,
    id: u64,
    method: &str,
    quoted: Option<&'static str>,
    params: Option<Json<'_>>,
    progress: bool,
) -> Result<(), LocalError> {
    out.extend_from_slice(HEAD);
    out.extend_from_slice(br#","id":"#);
    write_u64(out, id);
    out.extend_from_slice(br#","method":"#);
    match quoted {
        Some(quoted) => out.extend_from_slice(quoted.as_bytes()),
        None => write_str(out, method),
    }
    match (params, progress) {
        (Some(p), false) => {
            out.extend_from_slice(br#","params":"#);
            write_params(out, p);
        }
        (None, false) => {}
        (None, true) => {
            out.extend_from_slice(br#","params":{"_meta":{"progressToken":"#);
            write_u64(out, id);
            out.extend_from_slice(b"}}");
        }
        (Some(p), true) => {
            out.extend_from_slice(br#","params":"#);
            params_with_token(out, p, id)?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// `{"jsonrpc":"2.0","method":M[,"params":P]}`.
pub(crate) fn notification(out: &mut Vec<u8>, method: &str, params: Option<&RawValue>) {
    out.extend_from_slice(HEAD);
    out.extend_from_slice(br#","method":"#);
    write_str(out, method);
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        write_raw(out, p.get());
    }
    out.push(b'}');
}

/// `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":ID,"reason":R}}`.
pub(crate) fn cancelled(out: &mut Vec<u8>, id: u64, reason: &str) {
    out.extend_from_slice(HEAD);
    out.extend_from_slice(br#","method":""#);
    out.extend_from_slice(CANCELLED.as_bytes());
    out.extend_from_slice(br#"","params":{"requestId":"#);
    write_u64(out, id);
    out.extend_from_slice(br#","reason":"#);
    write_str(out, reason);
    out.extend_from_slice(b"}}");
}

/// `{"jsonrpc":"2.0","id":ID,"result":R}` or `{"jsonrpc":"2.0","id":ID,"error":{..}}`.
pub(crate) fn response(
    out: &mut Vec<u8>,
    id: &RequestId,
    outcome: Result<&RawValue, &ErrorObject>,
) {
    out.extend_from_slice(HEAD);
    out.extend_from_slice(br#","id":"#);
    write_id(out, id);
    match outcome {
        Ok(result) => {
            out.extend_from_slice(br#","result":"#);
            write_raw(out, result.get());
        }
        Err(e) => {
            out.extend_from_slice(br#","error":{"code":"#);
            write_i64(out, e.code);
            out.extend_from_slice(br#","message":"#);
            write_str(out, &e.message);
            if let Some(data) = &e.data {
                out.extend_from_slice(br#","data":"#);
                write_raw(out, data.get());
            }
            out.push(b'}');
        }
    }
    out.push(b'}');
}

/// Writes object `params` with `_meta.progressToken = token`, merged into an
/// existing `_meta` object (member order kept; an existing token replaced).
fn params_with_token(out: &mut Vec<u8>, params: Json<'_>, token: u64) -> Result<(), LocalError> {
    let fields =
        members(params.get()).ok_or(LocalError::InvalidParams("progress needs object params"))?;
    out.push(b'{');
    let mut saw_meta = false;
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        if key == "_meta" {
            let meta = members(value.get())
                .ok_or(LocalError::InvalidParams("params._meta must be an object"))?;
            saw_meta = true;
            out.push(b'{');
            for (key, value) in meta.iter().filter(|(k, _)| k != "progressToken") {
                write_str(out, key);
                out.push(b':');
                write_raw(out, value.get());
                out.push(b',');
            }
            out.extend_from_slice(br#""progressToken":"#);
            write_u64(out, token);
            out.push(b'}');
        } else {
            write_raw(out, value.get());
        }
    }
    if !saw_meta {
        if !fields.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(br#""_meta":{"progressToken":"#);
        write_u64(out, token);
        out.push(b'}');
    }
    out.push(b'}');
    Ok(())
}

type Members<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// The members of a raw JSON object, in order; `None` if it is not an object.
fn members(json: &str) -> Option<Members<'_>> {
    let mut de = serde_json::Deserializer::from_str(json);
    de.deserialize_map(MembersVisitor).ok()
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let value: &'de RawValue = map.next_value()?;
            members.push((key, value));
        }
        Ok(members)
    }
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers() {
        for n in [0u64, 7, 10, 99, 12345, u64::MAX] {
            assert_eq!(text(|o| write_u64(o, n)), n.to_string());
        }
        for n in [0i64, -1, i64::MIN, i64::MAX] {
            assert_eq!(text(|o| write_i64(o, n)), n.to_string());
        }
    }

    #[test]
    fn strings_match_serde_json() {
        for s in [
            "",
            "plain",
            "q\"b\\",
            "nl\ncr\rtab\t\u{8}\u{c}",
            "\u{0}\u{1f}\u{7f}",
            "é ✓ 😀",
        ] {
            let ours = text(|o| write_str(o, s));
            assert_eq!(ours, serde_json::to_string(s).unwrap());
            assert!(!ours.contains('\n'));
        }
    }

    #[test]
    fn raw_with_line_breaks_is_compacted() {
        let r = raw("{\n  \"a\": \"x\\\" \\n y\",\r\n  \"b\": [1, 2]\n}");
        assert_eq!(
            text(|o| write_raw(o, r.get())),
            r#"{"a":"x\" \n y","b":[1,2]}"#
        );
        let r = raw(r#"{"a": 1}"#);
        assert_eq!(text(|o| write_raw(o, r.get())), r#"{"a": 1}"#);
    }

    #[test]
    fn progress_token_insertion() {
        // The same whether the name comes quoted already or not.
        let req = |p: Option<&str>| {
            let p = p.map(raw);
            let written = [None, Some(r#""tools/call""#)].map(|quoted| {
                let mut out = Vec::new();
                request(
                    &mut out,
                    5,
                    "tools/call",
                    quoted,
                    p.as_deref().map(Json::from),
                    true,
                )
                .map(|()| String::from_utf8(out).unwrap())
            });
            let [a, b] = written;
            assert_eq!(a, b);
            a
        };
        assert_eq!(
            req(None).unwrap(),
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"progressToken":5}}}"#
        );
        assert_eq!(
            req(Some("{}")).unwrap(),
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"progressToken":5}}}"#
        );
        assert_eq!(
            req(Some(r#"{"name":"x","arguments":{"a":1}}"#)).unwrap(),
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":{"a":1},"_meta":{"progressToken":5}}}"#
        );
        assert_eq!(
            req(Some(
                r#"{"_meta":{"k":"v","progressToken":"old"},"n\u00e9":1}"#
            ))
            .unwrap(),
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"k":"v","progressToken":5},"né":1}}"#
        );
        assert_eq!(
            req(Some(r#"{"_meta":{}}"#)).unwrap(),
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"progressToken":5}}}"#
        );
        assert!(matches!(
            req(Some(r#"{"_meta":null}"#)),
            Err(LocalError::InvalidParams(_))
        ));
        assert!(matches!(
            req(Some("[1]")),
            Err(LocalError::InvalidParams(_))
        ));
    }

    #[test]
    fn responses() {
        let ok = raw("null");
        assert_eq!(
            text(|o| response(o, &RequestId::from("s\"1"), Ok(&ok))),
            r#"{"jsonrpc":"2.0","id":"s\"1","result":null}"#
        );
        let err = ErrorObject::new(-32601, "Method not found").with_data(raw(r#"{"m":"x"}"#));
        assert_eq!(
            text(|o| response(o, &RequestId::Number(-3), Err(&err))),
            r#"{"jsonrpc":"2.0","id":-3,"error":{"code":-32601,"message":"Method not found","data":{"m":"x"}}}"#
        );
    }
}
