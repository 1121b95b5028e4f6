//! The bench's wire protocol: the two tools, the request lines the raw
//! baseline writes, and the byte scanning the echo server does instead of
//! parsing JSON.
//!
//! Tools: `echo {"text": s}` → one text block `s`; `big {"bytes": n}` → one
//! text block of `n` bytes. Arguments are plain ASCII with nothing to
//! escape, so the server can copy them verbatim.

use serde_json::{json, Value};

/// Length of the echo argument (issue 9: a 100-byte argument).
pub const ECHO_LEN: usize = 100;

/// The protocol version the raw baseline asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The 100-byte echo argument: printable ASCII, nothing to escape.
pub fn echo_text() -> String {
    (0..ECHO_LEN)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect()
}

/// One tool call of a scenario, as every client makes it.
#[derive(Debug, Clone)]
pub struct Call {
    /// `echo` or `big`.
    pub tool: &'static str,
    /// The `arguments` object.
    pub args: Value,
    /// Bytes of text the result must carry (checked on every call).
    pub expect: usize,
}

impl Call {
    /// `echo` of the 100-byte argument.
    pub fn echo() -> Call {
        Call {
            tool: "echo",
            args: json!({ "text": echo_text() }),
            expect: ECHO_LEN,
        }
    }

    /// `big`, returning `bytes` bytes of text.
    pub fn big(bytes: usize) -> Call {
        Call {
            tool: "big",
            args: json!({ "bytes": bytes }),
            expect: bytes,
        }
    }

    /// The `arguments` as a JSON object.
    pub fn args_object(&self) -> serde_json::Map<String, Value> {
        match &self.args {
            Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        }
    }

    /// The JSON-RPC request line (with its newline) the raw baseline sends.
    pub fn request_line(&self, id: u64) -> Vec<u8> {
        let mut line = serde_json::to_vec(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": { "name": self.tool, "arguments": self.args },
        }))
        .expect("JSON");
        line.push(b'\n');
        line
    }
}

/// The raw baseline's `initialize` request line.
pub fn initialize_line(id: u64) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "raw-loop", "version": "0" },
        },
    }))
    .expect("JSON");
    line.push(b'\n');
    line
}

/// The raw baseline's `notifications/initialized` line.
pub const INITIALIZED_LINE: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

/// The text of the first text block of a serialized result or response
/// (`"text":"…"`), found by scanning: what the raw baseline checks.
pub fn find_text(message: &[u8]) -> Option<&[u8]> {
    string_value(message, b"\"text\":")
}

/// The bytes of the JSON string value that follows `key` (a `"name":`
/// pattern), without the quotes, escapes left as they are.
pub fn string_value<'a>(message: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = find(message, key)? + key.len();
    let rest = skip_ws(&message[at..]);
    let rest = rest.strip_prefix(b"\"")?;
    let mut i = 0;
    while let Some(at) = memchr::memchr2(b'"', b'\\', rest.get(i..)?) {
        i += at;
        if rest[i] == b'"' {
            return Some(&rest[..i]);
        }
        i += 2; // an escape: skip the escaped byte
    }
    None
}

/// The raw JSON token (number, string with quotes, `null`) after `key`.
pub fn raw_value<'a>(message: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = find(message, key)? + key.len();
    let rest = skip_ws(&message[at..]);
    if rest.first() == Some(&b'"') {
        let inner = string_value(rest, b"")?;
        return Some(&rest[..inner.len() + 2]);
    }
    let end = rest
        .iter()
        .position(|&b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

fn skip_ws(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    &s[n..]
}

/// First occurrence of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_text_is_100_plain_bytes() {
        let t = echo_text();
        assert_eq!(t.len(), ECHO_LEN);
        assert!(t.bytes().all(|b| b.is_ascii_lowercase()));
    }

    #[test]
    fn scanning() {
        let m = br#"{"jsonrpc":"2.0","id": 17,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\"b"}}}"#;
        assert_eq!(raw_value(m, b"\"id\":"), Some(&b"17"[..]));
        assert_eq!(string_value(m, b"\"method\":"), Some(&b"tools/call"[..]));
        assert_eq!(find_text(m), Some(&br#"a\"b"#[..]));
        let s = br#"{"id":"x-1","method":"ping"}"#;
        assert_eq!(raw_value(s, b"\"id\":"), Some(&br#""x-1""#[..]));
        assert_eq!(raw_value(b"{}", b"\"id\":"), None);
    }

    #[test]
    fn request_line_round_trips() {
        let line = Call::echo().request_line(3);
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["params"]["arguments"]["text"], echo_text());
        assert_eq!(line.last(), Some(&b'\n'));
    }
}
