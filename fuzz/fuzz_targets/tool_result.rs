//! `CallToolResult::from_raw` reads the common tool result straight from
//! its text (`mcp/types/read.rs`) and anything else through serde: both
//! must give the same result or both an error, for any checked JSON.
//! Texts are built near that shape (members and content members in any
//! order, repeated, foreign, with strings that need escapes, spaces) and
//! also taken raw.
//!
//! Invariants: no panic; for every text serde_json accepts as a
//! `RawValue`, `from_raw` equals `serde_json::from_str::<CallToolResult>`;
//! whatever the engine's check of a `tools/call` answer
//! (`tool_result_end`) accepts, up to the end it gives, serde_json accepts
//! as one JSON value (it proves the answer JSON in serde's place).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire::mcp::types::CallToolResult;
use serde_json::value::RawValue;

#[derive(Arbitrary, Debug)]
enum Val {
    Text(String),
    Tag,
    Bool(bool),
    Null,
    Raw(String),
    Contents(Vec<Vec<(u8, Val)>>),
}

const KEYS: [&str; 6] = [
    "content",
    "isError",
    "type",
    "text",
    "structuredContent",
    "_meta",
];

fn member(t: &mut String, key: u8, val: &Val, space: bool) {
    let key = KEYS[usize::from(key) % KEYS.len()];
    t.push('"');
    t.push_str(key);
    t.push_str("\":");
    if space {
        t.push(' ');
    }
    value(t, val);
}

fn value(t: &mut String, val: &Val) {
    match val {
        Val::Text(s) => t.push_str(&serde_json::to_string(s).expect("a string serializes")),
        Val::Tag => t.push_str("\"text\""),
        Val::Bool(b) => t.push_str(if *b { "true" } else { "false" }),
        Val::Null => t.push_str("null"),
        Val::Raw(r) => t.push_str(r),
        Val::Contents(items) => {
            t.push('[');
            for (i, members) in items.iter().enumerate() {
                if i > 0 {
                    t.push(',');
                }
                object(t, members, false);
            }
            t.push(']');
        }
    }
}

fn object(t: &mut String, members: &[(u8, Val)], space: bool) {
    t.push('{');
    for (i, (key, val)) in members.iter().enumerate() {
        if i > 0 {
            t.push(',');
        }
        member(t, *key, val, space);
    }
    t.push('}');
}

#[derive(Arbitrary, Debug)]
enum Input {
    Built {
        members: Vec<(u8, Val)>,
        space: bool,
    },
    Raw(String),
}

fuzz_target!(|input: Input| {
    let text = match input {
        Input::Built { members, space } => {
            let mut t = String::new();
            object(&mut t, &members, space);
            t
        }
        Input::Raw(text) => text,
    };
    if let Some(end) = mcpwire::mcp::types::tool_result_end(&text) {
        let checked = text.get(..end).map(serde_json::from_str::<&RawValue>);
        assert!(
            matches!(checked, Some(Ok(_))),
            "{text}: checked up to {end}"
        );
    }
    let Ok(raw) = serde_json::from_str::<Box<RawValue>>(&text) else {
        return;
    };
    let serde = serde_json::from_str::<CallToolResult>(raw.get());
    let direct = CallToolResult::from_raw(raw);
    match (&direct, &serde) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
        (Err(_), Err(_)) => {}
        _ => panic!("{text}: from_raw {direct:?}, serde {serde:?}"),
    }
});
