//! One JSON value read for its extent and checked as serde_json checks a
//! `RawValue` (strings without control characters and with known escapes,
//! numbers by the grammar, `true`/`false`/`null`, balanced containers),
//! in one pass without serde: strings are crossed eight bytes at a time.
//! What it accepts serde_json accepts; what it gives up on (nesting
//! deeper than [`MAX_DEPTH`], a surrogate escape `\uD800`–`\uDFFF`, which
//! may be a lone half to mend, anything malformed) is left to the
//! caller's general path, which gives the answer or the error.
//!
//! ```text
//!  text ──value_end──► Some(end)  text[..end] is one JSON value ──raw──► &RawValue (not parsed again)
//!       └────────────► None       left to serde_json
//! ```
//!
//! [`raw`] (and [`raw_owned`], taking a buffer) makes the `RawValue` through the same (serde-internal)
//! deserializer protocol serde_json's own `RawValue` deserializers use;
//! should a serde_json release change it, `raw` checks the text with
//! serde_json instead (slower, same value), and a test says so.

use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{self, Deserialize, DeserializeSeed, Visitor};
use serde_json::value::RawValue;

use super::strings::plain_len;

/// A check of one shape of value, faster than [`value_end`] because it
/// knows the shape: where the value at the start of the text ends, when
/// it has that shape and is valid JSON (`None`: not that shape, or not
/// JSON; [`value_end`] decides). What it accepts, `value_end` accepts,
/// with the same end.
pub(crate) type ShapeCheck = fn(&str) -> Option<usize>;

/// The deepest nesting read here (deeper values go serde's way).
pub(crate) const MAX_DEPTH: u32 = 64;

/// Where the JSON value at the start of `text` (after JSON whitespace)
/// ends, when it is valid: `text[start..end]` is the value, `start` being
/// the first byte that is not whitespace.
pub(crate) fn value_end(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    // One bit per open container: 1 an object, 0 an array.
    let (mut stack, mut depth) = (0u64, 0u32);
    let mut i = ws(b, 0);
    loop {
        // A value at `i`.
        match *b.get(i)? {
            open @ (b'{' | b'[') => {
                let object = open == b'{';
                i = ws(b, i + 1);
                if b.get(i) == Some(if object { &b'}' } else { &b']' }) {
                    i += 1;
                } else {
                    (depth < MAX_DEPTH).then_some(())?;
                    stack = stack << 1 | u64::from(object);
                    depth += 1;
                    if object {
                        i = ws(b, key(b, i)?);
                    }
                    continue;
                }
            }
            b'"' => i = string(b, i + 1)?,
            b't' => i = literal(b, i, b"true")?,
            b'f' => i = literal(b, i, b"false")?,
            b'n' => i = literal(b, i, b"null")?,
            b'-' | b'0'..=b'9' => i = number(b, i)?,
            _ => return None,
        }
        // After a value: close what it ends, or go on to the next one.
        loop {
            if depth == 0 {
                return Some(i);
            }
            i = ws(b, i);
            let object = stack & 1 == 1;
            match (*b.get(i)?, object) {
                (b',', true) => {
                    i = ws(b, key(b, ws(b, i + 1))?);
                    break;
                }
                (b',', false) => {
                    i = ws(b, i + 1);
                    break;
                }
                (b'}', true) | (b']', false) => {
                    i += 1;
                    stack >>= 1;
                    depth -= 1;
                }
                _ => return None,
            }
        }
    }
}

/// JSON's whitespace from `i` on: where it ends.
fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// A member's key and its colon at `i`: where its value may start.
fn key(b: &[u8], i: usize) -> Option<usize> {
    (b.get(i) == Some(&b'"')).then_some(())?;
    let i = ws(b, string(b, i + 1)?);
    (b.get(i) == Some(&b':')).then_some(i + 1)
}

/// A string's body from `i` (after its opening quote): where it ends,
/// past the closing quote.
pub(crate) fn string(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i += plain_len(b.get(i..)?);
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => {
                i += match *b.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                    b'u' => {
                        let hex = b.get(i + 2..i + 6)?;
                        hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
                        // A surrogate half (`\uD800` to `\uDFFF`): left to
                        // the caller's general path, which mends a lone one.
                        let surrogate = matches!(hex[0], b'd' | b'D')
                            && matches!(hex[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F');
                        (!surrogate).then_some(6)?
                    }
                    _ => return None,
                }
            }
            0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

/// `word` at `i`: where it ends.
fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

/// A number at `i`: `-`? (`0` | digits without a leading zero), then a
/// fraction and an exponent, each optional: where it ends.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    i += usize::from(b[i] == b'-');
    match *b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(b, i),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let end = digits(b, i + 1);
        (end > i + 1).then_some(())?;
        i = end;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        i += usize::from(matches!(b.get(i), Some(b'+' | b'-')));
        let end = digits(b, i);
        (end > i).then_some(())?;
        i = end;
    }
    Some(i)
}

fn digits(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// The `RawValue` of `json`, one JSON value [`value_end`] accepted,
/// without parsing it again (see the module); parsed by serde_json only
/// if its protocol answers no more.
pub(crate) fn raw(json: &str) -> Option<&RawValue> {
    <&RawValue>::deserialize(Token(Text::Borrowed(json)))
        .ok()
        .or_else(|| serde_json::from_str(json).ok())
}

/// [`raw`], taking `json`'s buffer (no copy).
pub(crate) fn raw_owned(json: String) -> Option<Box<RawValue>> {
    // The protocol is asked first on a word, so that `json` is not lost
    // if it no longer answers.
    if <&RawValue>::deserialize(Token(Text::Borrowed("null"))).is_err() {
        return RawValue::from_string(json).ok();
    }
    Box::<RawValue>::deserialize(Token(Text::Owned(json))).ok()
}

/// serde_json's name for a `RawValue` in its (de)serializer protocol.
pub(crate) const TOKEN: &str = "$serde_json::private::RawValue";

/// The JSON text a [`Token`] hands over.
enum Text<'a> {
    Borrowed(&'a str),
    Owned(String),
}

/// A deserializer that answers a `RawValue`'s request with its text.
struct Token<'a>(Text<'a>);

impl<'de> de::Deserializer<'de> for Token<'de> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a RawValue is read here"))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        if name != TOKEN {
            return self.deserialize_any(visitor);
        }
        visitor.visit_map(Member(Some(self.0)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct seq tuple tuple_struct map
        struct enum identifier ignored_any
    }
}

/// The one member `{TOKEN: text}`.
struct Member<'a>(Option<Text<'a>>);

impl<'de> de::MapAccess<'de> for Member<'de> {
    type Error = de::value::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        if self.0.is_none() {
            return Ok(None);
        }
        seed.deserialize(BorrowedStrDeserializer::new(TOKEN))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0.take() {
            Some(Text::Borrowed(json)) => seed.deserialize(BorrowedStrDeserializer::new(json)),
            Some(Text::Owned(json)) => seed.deserialize(StringDeserializer::new(json)),
            None => Err(de::Error::custom("no value")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What serde_json makes of `text` as one value with what may follow
    /// it: the value's extent.
    fn serde_end(text: &str) -> Option<usize> {
        let mut values = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
        let raw = values.next()?.ok()?;
        Some(raw.get().as_ptr() as usize - text.as_ptr() as usize + raw.get().len())
    }

    /// Where both read a value that a caller takes (one followed by
    /// `,`, `}` or nothing: `0a` is read to its `0` here and refused by
    /// the caller, refused as a whole by serde), they end it at the same
    /// place.
    fn same(text: &str) {
        let Some(end) = value_end(text) else { return };
        if matches!(text[end..].bytes().next(), None | Some(b',' | b'}')) {
            assert_eq!(Some(end), serde_end(text), "{text:?}");
        }
    }

    #[test]
    fn valid_values_end_where_serde_ends_them() {
        for text in [
            "{}",
            "[]",
            " { } ",
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            r#"{ "a" : [ 1 , 2.5 , -3e+7 , 0.0E-1 ] , "b" : "" }"#,
            r#""esc \" \\ \/ \b \f \n \r \t \u00e9 \uD7FF \uE000 \uFFFF""#,
            "\"caf\u{e9} \u{1f600} — longer than eight bytes\"",
            "-0",
            "0,",
            "12}",
            "true}",
            r#"[[[[{"a":[[]]}]]]]"#,
            r#"{"a":{}}x"#,
        ] {
            assert!(value_end(text).is_some(), "{text:?}");
            same(text);
        }
    }

    #[test]
    fn invalid_values_are_refused() {
        for text in [
            "",
            " ",
            "{",
            "[1,]",
            "[,1]",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{1:2}"#,
            r#"{"a":1 "b":2}"#,
            "[1 2]",
            "\"unterminated",
            "\"ctl \u{1} char\"",
            "\"tab \t\"",
            r#""bad \x escape""#,
            r#""short \u12""#,
            r#""not hex \u12g4""#,
            "01",
            "-",
            "1.",
            "1.e3",
            "1e",
            "1e+",
            "+1",
            ".5",
            "tru",
            "nul",
            "[}",
            "{]",
            "{\"a\":[}]",
        ] {
            // "01" ends after its "0" (a caller sees the "1" next).
            match value_end(text) {
                None => {}
                Some(end) => assert!(text[end..].starts_with('1'), "{text:?} read to {end}"),
            }
            assert!(serde_json::from_str::<&RawValue>(text).is_err(), "{text:?}");
        }
    }

    /// Surrogate escapes, paired or lone, are left to the general path
    /// (which mends a lone half before serde reads it).
    #[test]
    fn surrogate_escapes_are_left_to_the_general_path() {
        for text in [
            r#""\uD83D\uDE00""#,
            r#""\ud83d""#,
            r#""x \uDFFF""#,
            r#"["\udead"]"#,
        ] {
            assert_eq!(value_end(text), None, "{text}");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_left_to_serde() {
        // The innermost `[]` is read whole: MAX_DEPTH + 1 brackets open
        // MAX_DEPTH containers.
        let depth = MAX_DEPTH as usize + 1;
        let ok = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(value_end(&ok), Some(ok.len()));
        let deep = format!("[{ok}]");
        assert_eq!(value_end(&deep), None);
    }

    /// serde_json still answers its `RawValue` protocol: `raw` takes the
    /// text as it is. (If this fails after a serde_json upgrade, `raw`
    /// has fallen back to parsing: correct, but slower.)
    #[test]
    fn raw_borrows_the_text_without_parsing_it() {
        let text = r#"{"a":[1,2]}"#;
        let raw =
            <&RawValue>::deserialize(Token(Text::Borrowed(text))).expect("serde_json's protocol");
        assert_eq!(raw.get().as_ptr(), text.as_ptr());
        assert_eq!(super::raw(text).unwrap().get(), text);
        let owned = String::from(text);
        let at = owned.as_ptr();
        let boxed =
            Box::<RawValue>::deserialize(Token(Text::Owned(owned))).expect("serde_json's protocol");
        assert_eq!(
            (boxed.get(), boxed.get().as_ptr()),
            (text, at),
            "the buffer, not a copy"
        );
        assert_eq!(raw_owned(text.to_owned()).unwrap().get(), text);
        // The fallback parses.
        assert!(serde_json::from_str::<&RawValue>("{").is_err());
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_serde_on_json_like_text(text in r#"[\[\]{}",:0-9a-z\\. \-+eEtrufalsn\x01]{0,40}"#) {
            same(&text);
        }

        #[test]
        fn reads_what_serde_writes(v in json_value()) {
            let text = serde_json::to_string_pretty(&v).unwrap();
            proptest::prop_assert_eq!(value_end(&text), Some(text.len()));
            let text = serde_json::to_string(&v).unwrap();
            proptest::prop_assert_eq!(value_end(&text), Some(text.len()));
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(Into::into),
            any::<i64>().prop_map(Into::into),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Into::into),
            any::<String>().prop_map(Into::into),
        ];
        leaf.prop_recursive(6, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Into::into),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
