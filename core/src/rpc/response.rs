//! The common message read without serde's envelope: a response with a
//! numeric id and a result, `{"jsonrpc":"2.0","id":N,"result":R}`, its
//! three members in any order. Everything else (an error, a request,
//! whitespace between the tokens, escapes in the keys, another member, a
//! duplicate, anything malformed) is left to [`parse_message`]'s general
//! path, which gives the same message or the error.
//!
//! ```text
//!  text ──read_response──► Some(Message::Response { id, outcome: Ok(R) })   R checked as JSON (codec::scan)
//!       └─────────────────► None ──► the general path (serde, classify)
//! ```
//!
//! The request an id names may come with a [`ShapeCheck`](crate::codec::scan::ShapeCheck) of its own:
//! a reader of the shape its result usually has, which proves that shape
//! JSON faster than the general scan (keys and literals matched whole);
//! whatever it does not recognise the general scan decides.
//!
//! [`parse_message`]: super::parse_message

use serde_json::value::RawValue;

use crate::codec::scan::ShapeCheck;

use super::message::{Message, RequestId};

/// The response `text` is, when it has the common shape (see the module).
/// `check_of` gives the check of the request an id names, when it has
/// one (used when the id comes before the result).
pub(super) fn read_response(
    text: &str,
    check_of: impl Fn(i64) -> Option<ShapeCheck>,
) -> Option<Message<'_>> {
    let mut rest = text.strip_prefix('{')?;
    let (mut version, mut id, mut result) = (false, None, None);
    loop {
        // The three keys matched whole, quotes and colon included (a key
        // with an escape or a space in it is another text: left to the
        // general path).
        rest = if let Some(after) = rest.strip_prefix(r#""jsonrpc":"#) {
            (!version).then_some(())?;
            version = true;
            after.strip_prefix(r#""2.0""#)?
        } else if let Some(after) = rest.strip_prefix(r#""id":"#) {
            id.is_none().then_some(())?;
            let (n, after) = number(after)?;
            id = Some(n);
            after
        } else if let Some(after) = rest.strip_prefix(r#""result":"#) {
            result.is_none().then_some(())?;
            let (raw, after) = value(after, id.and_then(&check_of))?;
            result = Some(raw);
            after
        } else {
            return None;
        };
        match rest.as_bytes().first()? {
            b',' => rest = &rest[1..],
            b'}' => {
                rest = &rest[1..];
                break;
            }
            _ => return None,
        }
    }
    // JSON's whitespace only (not the form feed `is_ascii_whitespace`
    // takes).
    if !version
        || !rest
            .bytes()
            .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        return None;
    }
    Some(Message::Response {
        id: RequestId::Number(id?),
        outcome: Ok(result?),
    })
}

/// A JSON integer that fits an `i64` (no fraction, no exponent, no
/// leading zero), and what follows.
fn number(text: &str) -> Option<(i64, &str)> {
    let bytes = text.as_bytes();
    let negative = bytes.first() == Some(&b'-');
    let start = usize::from(negative);
    let (mut n, mut end) = (0i64, start);
    // At most 18 digits: no overflow.
    while let Some(d) = bytes.get(end).filter(|b| b.is_ascii_digit()) {
        (end - start < 18).then_some(())?;
        n = n * 10 + i64::from(d - b'0');
        end += 1;
    }
    let digits = end - start;
    if digits == 0 || (digits > 1 && bytes[start] == b'0') {
        return None;
    }
    if matches!(bytes.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some((if negative { -n } else { n }, &text[end..]))
}

/// One JSON value (checked as serde_json checks it, without serde: by
/// `check` when it knows the value's shape, else by the general scan),
/// and what follows it.
fn value(text: &str, check: Option<ShapeCheck>) -> Option<(&RawValue, &str)> {
    let end = match check.and_then(|check| check(text)) {
        Some(end) => end,
        None => crate::codec::scan::value_end(text)?,
    };
    let raw = crate::codec::scan::raw(text[..end].trim_start_matches([' ', '\t', '\n', '\r']))?;
    Some((raw, &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::super::message::parse_message_slow;
    use super::*;

    /// Read by the fast path, with what the general path gives.
    fn fast(text: &str) {
        let got = read_response(text, |_| None).unwrap_or_else(|| panic!("not read: {text}"));
        assert_eq!(
            format!("{got:?}"),
            format!("{:?}", parse_message_slow(text).unwrap()),
            "{text}"
        );
    }

    /// Left to the general path.
    fn slow(text: &str) {
        assert!(read_response(text, |_| None).is_none(), "read: {text}");
    }

    #[test]
    fn the_common_responses_in_any_order() {
        fast(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\"b"}]}}"#);
        fast(r#"{"id":7,"jsonrpc":"2.0","result":{}}"#);
        fast(r#"{"result":[1,{"a":"}"}],"jsonrpc":"2.0","id":0}"#);
        fast(r#"{"jsonrpc":"2.0","id":-3,"result":null}"#);
        fast(r#"{"jsonrpc":"2.0","id":9,"result":"x"}  "#);
        fast(r#"{"jsonrpc":"2.0","id":123456789012345678,"result":1.5}"#);
        fast(r#"{"jsonrpc":"2.0","result":{ "spaced" : [ 1 , 2 ] },"id":1}"#);
    }

    #[test]
    fn anything_else_is_left_to_the_general_path() {
        for text in [
            r#" {"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{ "jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc": "2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"s","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":01,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1234567890123456789,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}x"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":tru}"#,
            r#"{"json\u0072pc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"x","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}},"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"a\u{1}\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\u{c}",
        ] {
            slow(text);
        }
    }
}
