//! `rpc::parse_message` reads the common response without serde's envelope
//! (`rpc/response.rs`) and everything else the general way: both must give
//! the same message or the same error for any text. Texts are built near
//! that shape (its members in any order, repeated, missing or extra, with
//! arbitrary ids, versions, values, spaces and tails) and also taken raw.
//!
//! Invariants: no panic; `parse_message(t)` and `parse_message_slow(t)`
//! agree (compared through `Debug`).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire::rpc::{parse_message, parse_message_slow};

#[derive(Arbitrary, Debug)]
enum Key {
    Jsonrpc,
    Id,
    Result,
    Error,
    Method,
    Escaped,
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum Val {
    Version,
    OtherVersion(String),
    Int(i64),
    Number(String),
    Null,
    Str(String),
    Object(Vec<(String, u8)>),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Member {
    key: Key,
    value: Val,
    space_before: bool,
    space_after_colon: bool,
}

#[derive(Arbitrary, Debug)]
enum Input {
    Built {
        lead: bool,
        members: Vec<Member>,
        close: bool,
        tail: String,
    },
    Raw(String),
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn build(members: &[Member], lead: bool, close: bool, tail: &str) -> String {
    let mut t = String::new();
    if lead {
        t.push(' ');
    }
    t.push('{');
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            t.push(',');
        }
        if m.space_before {
            t.push(' ');
        }
        t.push_str(&match &m.key {
            Key::Jsonrpc => "\"jsonrpc\"".to_owned(),
            Key::Id => "\"id\"".to_owned(),
            Key::Result => "\"result\"".to_owned(),
            Key::Error => "\"error\"".to_owned(),
            Key::Method => "\"method\"".to_owned(),
            Key::Escaped => "\"res\\u0075lt\"".to_owned(),
            Key::Other(k) => json_str(k),
        });
        t.push(':');
        if m.space_after_colon {
            t.push(' ');
        }
        t.push_str(&match &m.value {
            Val::Version => "\"2.0\"".to_owned(),
            Val::OtherVersion(v) => json_str(v),
            Val::Int(n) => n.to_string(),
            Val::Number(n) => n.clone(),
            Val::Null => "null".to_owned(),
            Val::Str(s) => json_str(s),
            Val::Object(members) => {
                let inner: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", json_str(k)))
                    .collect();
                format!("{{{}}}", inner.join(","))
            }
            Val::Raw(r) => r.clone(),
        });
    }
    if close {
        t.push('}');
    }
    t.push_str(tail);
    t
}

fuzz_target!(|input: Input| {
    let text = match input {
        Input::Built {
            lead,
            members,
            close,
            tail,
        } => build(&members, lead, close, &tail),
        Input::Raw(text) => text,
    };
    let fast = format!("{:?}", parse_message(&text));
    let slow = format!("{:?}", parse_message_slow(&text));
    assert_eq!(fast, slow, "{text}");
});
