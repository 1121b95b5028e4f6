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
                        let tag: Value = map.next_value()?;
                        if let Value::String(t) = &tag {
                            if t == "text" {
                                return text(map);
                            }
                        }
                        rest.insert("type".into(), tag);
                    } else {
                        rest.insert(key.into_owned(), map.next_value()?);
                    }
                }
                while let Some(Key(key)) = map.next_key()? {
                    rest.insert(key.into_owned(), map.next_value()?);
                }
                Derived::deserialize(Value::Object(rest))
                    .map(Content::from)
                    .map_err(de::Error::custom)
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
        let value: Value = map.next_value()?;
        if key == "text" && text.is_none() {
            if let Value::String(s) = value {
                text = Some(s);
                continue;
            }
            // Not a string: the derived path decides (it keeps it as Other).
            extra.insert("text".into(), value);
            return slow("text", text, extra, map);
        }
        if key == "text" {
            return Err(de::Error::custom("duplicate field `text`"));
        }
        extra.insert(key.into_owned(), value);
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
    mut map: A,
) -> Result<Content, A::Error> {
    rest.insert("type".into(), Value::String(tag.into()));
    if let Some(t) = text {
        rest.insert("text".into(), Value::String(t));
    }
    while let Some(Key(key)) = map.next_key()? {
        rest.insert(key.into_owned(), map.next_value()?);
    }
    Derived::deserialize(Value::Object(rest))
        .map(Content::from)
        .map_err(de::Error::custom)
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
