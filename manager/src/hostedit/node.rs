//! A value to write, with its keys in the order they are written (the
//! workspace's `serde_json` sorts object keys, and a host's own order is
//! part of writing its format the way it does).

use serde_json::Value;

/// A value in a host's entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Num(u64),
    Str(String),
    List(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// A list of strings.
    pub(crate) fn strings<'a>(items: impl IntoIterator<Item = &'a String>) -> Node {
        Node::List(items.into_iter().map(|s| Node::Str(s.clone())).collect())
    }

    /// A map of strings, in the iterator's order.
    pub(crate) fn string_map<'a>(
        items: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Node {
        Node::Map(
            items
                .into_iter()
                .map(|(k, v)| (k.clone(), Node::Str(v.clone())))
                .collect(),
        )
    }

    /// The same value as JSON (what reading the written text gives).
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Num(n) => Value::from(*n),
            Node::Str(s) => Value::String(s.clone()),
            Node::List(l) => Value::Array(l.iter().map(Node::to_json).collect()),
            Node::Map(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }
}
