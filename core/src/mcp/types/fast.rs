//! Hand-written `Deserialize` for the types on every call's path
//! ([`Content`], [`CallToolResult`]): each member goes straight to its
//! field, unknown members to `extra`, without the intermediate copy of
//! the whole object that serde's derive makes for `#[serde(flatten)]` and
//! for internally tagged enums. Same results as the derive (the tests
//! compare both on every shape).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{CallToolResult, Content, Extra, ResourceContents};

/// A map key or tag, borrowed from the input when it can be.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A value that is nearly always a string (a content's `type`, its
/// `text`): the string alone, borrowed from the input when it can be, and
/// anything else as the `Value` it is.
enum StrOr<'de> {
    Str(Cow<'de, str>),
    Other(Value),
}

impl StrOr<'_> {
    fn into_value(self) -> Value {
        match self {
            StrOr::Str(s) => Value::String(s.into_owned()),
            StrOr::Other(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for StrOr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrOr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Str(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Other(Value::Bool(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Other(Value::from(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Other(Value::from(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Other(Value::from(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Other(Value::Null))
            }
            fn visit_none<E: de::Error>(self) -> Result<StrOr<'de>, E> {
                Ok(StrOr::Other(Value::Null))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<StrOr<'de>, D2::Error> {
                Value::deserialize(d).map(StrOr::Other)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<StrOr<'de>, A::Error> {
                Value::deserialize(SeqAccessDeserializer::new(seq)).map(StrOr::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<StrOr<'de>, A::Error> {
                Value::deserialize(MapAccessDeserializer::new(map)).map(StrOr::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for CallToolResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CallToolResult;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CallToolResult object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CallToolResult, A::Error> {
                let mut r = CallToolResult {
                    content: Vec::new(),
                    structured_content: None,
                    is_error: None,
                    extra: Extra::new(),
                };
                let mut seen = [false; 3];
                while let Some(Key(key)) = map.next_key()? {
                    let slot = match key.as_ref() {
                        "content" => 0,
                        "structuredContent" => 1,
                        "isError" => 2,
                        _ => {
                            r.extra.insert(key.into_owned(), map.next_value()?);
                            continue;
                        }
                    };
                    if std::mem::replace(&mut seen[slot], true) {
                        return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                    }
                    match slot {
                        0 => r.content = map.next_value()?,
                        1 => r.structured_content = map.next_value()?,
                        _ => r.is_error = map.next_value()?,
                    }
                }
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

/// The derived reading of [`Content`], for what the fast path does not
/// take.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Derived {
    #[serde(rename = "text")]
    Text {
        text: String,
        #[serde(flatten)]
        extra: Extra,
    },
    #[serde(rename = "image")]
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
        #[serde(flatten)]
        extra: Extra,
    },
    #[serde(rename = "audio")]
    Audio {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
        #[serde(flatten)]
        extra: Extra,
    },
    #[serde(rename = "resource_link")]
    ResourceLink {
        uri: String,
        name: String,
        #[serde(flatten)]
        extra: Extra,
    },
    #[serde(rename = "resource")]
    Resource {
        resource: ResourceContents,
        #[serde(flatten)]
        extra: Extra,
    },
    #[serde(untagged)]
    Other(Value),
}

impl From<Derived> for Content {
    fn from(d: Derived) -> Content {
        match d {
            Derived::Text { text, extra } => Content::Text { text, extra },
            Derived::Image {
                data,
                mime_type,
                extra,
            } => Content::Image {
                data,
                mime_type,
                extra,
            },
            Derived::Audio {
                data,
                mime_type,
                extra,
            } => Content::Audio {
                data,
                mime_type,
                extra,
            },
            Derived::ResourceLink { uri, name, extra } => {
                Content::ResourceLink { uri, name, extra }
            }
            Derived::Resource { resource, extra } => Content::Resource { resource, extra },
            Derived::Other(v) => Content::Other(v),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content, A::Error> {
                let mut rest = Map::new();
                let first: Option<Key<'de>> = map.next_key()?;
                if let Some(Key(key)) = first {
                    if key == "type" {
                        let tag: StrOr<'de> = map.next_value()?;
                        if matches!(&tag, StrOr::Str(t) if t == "text") {
                            return text(map);
                        }
                        rest.insert("type".into(), tag.into_value());
                    } else {
                        rest.insert(key.into_owned(), map.next_value()?);
                    }
                }
                derive(rest, map)
            }
        }
        d.deserialize_map(V)
    }
}

/// The members of a `text` content after its `type`.
fn text<'de, A: MapAccess<'de>>(mut map: A) -> Result<Content, A::Error> {
    let mut text = None;
    let mut extra = Extra::new();
    while let Some(Key(key)) = map.next_key()? {
        if key == "type" || (key == "text" && text.is_some()) {
            // Given twice: the content as it is.
            extra.insert("type".into(), Value::String("text".into()));
            if let Some(t) = text {
                extra.insert("text".into(), Value::String(t));
            }
            extra.insert(key.into_owned(), map.next_value()?);
            return other(extra, map);
        }
        if key != "text" {
            extra.insert(key.into_owned(), map.next_value()?);
            continue;
        }
        match map.next_value::<StrOr<'de>>()? {
            StrOr::Str(s) => text = Some(s.into_owned()),
            StrOr::Other(value) => {
                // Not a string: the derived path decides (it keeps it as Other).
                extra.insert("text".into(), value);
                return slow("text", text, extra, map);
            }
        }
    }
    match text {
        Some(text) => Ok(Content::Text { text, extra }),
        None => slow("text", None, extra, map),
    }
}

/// Hands what was read so far (and the rest) to the derived path.
fn slow<'de, A: MapAccess<'de>>(
    tag: &str,
    text: Option<String>,
    mut rest: Extra,
    map: A,
) -> Result<Content, A::Error> {
    rest.insert("type".into(), Value::String(tag.into()));
    if let Some(t) = text {
        rest.insert("text".into(), Value::String(t));
    }
    derive(rest, map)
}

/// Reads the rest of `map` into `rest` and gives what the derive makes of
/// the whole, including its reading of a field of the tagged variant given
/// twice: the content as it is ([`Content::Other`], the last of each
/// member).
fn derive<'de, A: MapAccess<'de>>(mut rest: Extra, mut map: A) -> Result<Content, A::Error> {
    let mut twice: Vec<String> = Vec::new();
    while let Some(Key(key)) = map.next_key()? {
        let value = map.next_value()?;
        if rest.contains_key(key.as_ref()) {
            twice.push(key.to_string());
        }
        rest.insert(key.into_owned(), value);
    }
    let fields: &[&str] = match rest.get("type").and_then(Value::as_str) {
        Some("text") => &["text"],
        Some("image" | "audio") => &["data", "mimeType"],
        Some("resource_link") => &["uri", "name"],
        Some("resource") => &["resource"],
        _ => &[],
    };
    if twice
        .iter()
        .any(|k| k == "type" || fields.contains(&k.as_str()))
    {
        return Ok(Content::Other(Value::Object(rest)));
    }
    Derived::deserialize(Value::Object(rest))
        .map(Content::from)
        .map_err(de::Error::custom)
}

/// The content as it is, after a field given twice: the rest of `map` read
/// into `rest`, the last of each member kept.
fn other<'de, A: MapAccess<'de>>(mut rest: Extra, mut map: A) -> Result<Content, A::Error> {
    while let Some(Key(key)) = map.next_key()? {
        rest.insert(key.into_owned(), map.next_value()?);
    }
    Ok(Content::Other(Value::Object(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every shape reads as the derived reading does.
    #[test]
    fn the_fast_path_agrees_with_the_derive() {
        let shapes = [
            json!({"type": "text", "text": "hi"}),
            json!({"type": "text", "text": "hi", "annotations": {"priority": 1}, "_meta": {}}),
            json!({"annotations": {"p": 1}, "type": "text", "text": "late tag"}),
            json!({"text": "tag last", "type": "text"}),
            json!({"type": "text"}),
            json!({"type": "text", "text": 5}),
            json!({"type": "text", "text": null}),
            json!({"type": "text", "text": [1, "a", {"b": true}]}),
            json!({"type": "text", "text": {"nested": "x"}, "more": 1.5}),
            json!({"type": "text", "text": "e\u{e9}\n\"q"}),
            json!({"type": ["text"], "text": "t"}),
            json!({"type": null, "text": "t"}),
            json!({"type": "textual", "text": "t"}),
            json!({"type": "image", "data": "AAA=", "mimeType": "image/png"}),
            json!({"type": "audio", "data": "AAA=", "mimeType": "audio/wav", "x": 1}),
            json!({"type": "resource_link", "uri": "file:///a", "name": "a", "size": 3}),
            json!({"type": "resource", "resource": {"uri": "test://x", "text": "t"}}),
            json!({"type": "hologram", "frames": 3}),
            json!({"type": 7}),
            json!({"no": "type"}),
            json!({}),
        ];
        for shape in shapes {
            let text = shape.to_string();
            let fast: Result<Content, _> = serde_json::from_str(&text);
            let derived: Result<Content, _> =
                serde_json::from_str::<Derived>(&text).map(Content::from);
            match (&fast, &derived) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{text}: fast {fast:?}, derived {derived:?}"),
            }
            // Round trip: what is written is what was read.
            if let Ok(c) = fast {
                assert_eq!(serde_json::to_value(&c).unwrap(), shape, "{text}");
            }
        }
    }

    /// What only text can hold: a duplicate, escapes, a malformed value.
    #[test]
    fn text_read_from_raw_input_agrees_with_the_derive() {
        for text in [
            r#"{"type":"text","text":"a","text":"b"}"#,
            r#"{"text":"a","type":"text","text":"b"}"#,
            r#"{"type":"text","text":"a","annotations":1,"annotations":2}"#,
            r#"{"type":"image","data":"a","mimeType":"m","data":"b"}"#,
            r#"{"type":"image","data":"a","mimeType":"m","mimeType":"n"}"#,
            r#"{"type":"resource_link","uri":"u","name":"n","uri":"v"}"#,
            r#"{"type":"text","type":"text","text":"a"}"#,
            r#"{"type":"text","text":"a","type":"image"}"#,
            r#"{"type":"hologram","x":1,"x":2}"#,
            r#"{"type":"text","text":5,"text":"b"}"#,
            r#"{"type":"text","text":"a\"b\u00e9"}"#,
            r#"{"type":"te\u0078t","text":"escaped tag"}"#,
            r#"{"type":"text","text":"a"#,
            r#"{"type":"text","text":tru}"#,
        ] {
            let fast: Result<Content, _> = serde_json::from_str(text);
            let derived: Result<Content, _> =
                serde_json::from_str::<Derived>(text).map(Content::from);
            match (&fast, &derived) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{text}: fast {fast:?}, derived {derived:?}"),
            }
        }
    }

    proptest::proptest! {
        /// Objects made of the members a content has (any order, some
        /// twice, values of every kind) read as the derive reads them.
        #[test]
        fn any_member_soup_agrees_with_the_derive(
            members in proptest::collection::vec((0usize..9, 0usize..6), 0..7)
        ) {
            const KEYS: [&str; 9] =
                ["type", "text", "data", "mimeType", "uri", "name", "resource", "annotations", "_meta"];
            const VALUES: [&str; 6] =
                [r#""text""#, r#""image""#, r#""a\"b""#, "7", "null", r#"{"uri":"u","text":"t"}"#];
            let body: Vec<String> = members
                .iter()
                .map(|&(k, v)| format!("\"{}\":{}", KEYS[k], VALUES[v]))
                .collect();
            let text = format!("{{{}}}", body.join(","));
            let fast: Result<Content, _> = serde_json::from_str(&text);
            let derived: Result<Content, _> =
                serde_json::from_str::<Derived>(&text).map(Content::from);
            match (&fast, &derived) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b, "{}", text),
                (Err(_), Err(_)) => {}
                _ => proptest::prop_assert!(false, "{text}: fast {fast:?}, derived {derived:?}"),
            }
        }
    }

    #[test]
    fn call_tool_results_keep_everything() {
        let v = json!({
            "content": [{"type": "text", "text": "a\"b"}],
            "structuredContent": {"x": [1, 2]},
            "isError": true,
            "_meta": {"m": 1},
            "future": null
        });
        let r: CallToolResult = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(r.text(), "a\"b");
        assert!(r.is_error());
        assert_eq!(serde_json::to_value(&r).unwrap(), v);
        let e = serde_json::from_str::<CallToolResult>(r#"{"isError":true,"isError":false}"#);
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("duplicate field `isError`"));
        let empty: CallToolResult = serde_json::from_str("{}").unwrap();
        assert!(empty.content.is_empty());
        assert!(serde_json::from_str::<CallToolResult>("[]").is_err());
    }
}
