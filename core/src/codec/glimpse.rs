//! What a message too large to read says about itself in its first and
//! last bytes: whether it is a response or a request, and its id.
//!
//! A frame over a size limit is skipped without being buffered (a hostile
//! or broken server must not make us hold it). Skipping it silently would
//! leave the request it answers waiting for its timeout, so the codecs keep
//! its first [`HEAD`] bytes and its last [`TAIL`] bytes ([`Peek`]) and this
//! module reads them:
//!
//! ```text
//!  Python SDK:     {"jsonrpc":"2.0","id":7,"result":{"content":[…        id, kind in the head
//!  TypeScript SDK: {"result":{"content":[…  …]},"jsonrpc":"2.0","id":7}  kind in the head, id in the tail
//! ```
//!
//! The head is scanned as the start of a JSON object, member by member,
//! until a value runs past its end: a key `result` or `error` makes it a
//! response, `method` a request, and a complete `id` value is the id. The
//! tail is only trusted for an `id` that is the object's last member, or
//! the last but a `"jsonrpc":"2.0"` — nothing nested can end that way, since
//! a nested member is followed by at least two closing brackets.

/// Bytes kept from the start of an over-long frame.
pub const HEAD: usize = 4096;
/// Bytes kept from the end of an over-long frame.
pub const TAIL: usize = 256;

/// Whether a skipped message was a response or a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It has a top-level `result` or `error` member.
    Response,
    /// It has a top-level `method` member.
    Request,
}

/// What could be recovered of a message too large to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Glimpse {
    /// Its kind, when a top-level `result`, `error` or `method` key was
    /// in the head.
    pub kind: Option<Kind>,
    /// Its id as JSON text (`7`, `"s-1"`: an integer or a string), when
    /// it was in the head or is the tail's last member.
    pub id: Option<String>,
}

impl Glimpse {
    /// Reads `head` (the first bytes of the message) and `tail` (its last
    /// bytes; may overlap the head for shorter messages).
    pub fn read(head: &[u8], tail: &[u8]) -> Glimpse {
        let (kind, id) = scan_head(head);
        Glimpse {
            kind,
            id: id.or_else(|| tail_id(tail)),
        }
    }

    /// The id of the response it was, when both are known.
    pub fn response_id(&self) -> Option<&str> {
        match self.kind {
            Some(Kind::Response) => self.id.as_deref(),
            _ => None,
        }
    }

    /// The id of the request it was, when both are known.
    pub fn request_id(&self) -> Option<&str> {
        match self.kind {
            Some(Kind::Request) => self.id.as_deref(),
            _ => None,
        }
    }
}

/// The first [`HEAD`] and last [`TAIL`] bytes of a frame fed in pieces,
/// and its total length. Holds at most `HEAD + TAIL` bytes.
#[derive(Debug, Default, Clone)]
pub struct Peek {
    head: Vec<u8>,
    tail: Vec<u8>,
    seen: usize,
}

impl Peek {
    /// Adds the next bytes of the frame.
    pub fn push(&mut self, bytes: &[u8]) {
        self.seen = self.seen.saturating_add(bytes.len());
        if self.head.len() < HEAD {
            let take = (HEAD - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        if bytes.len() >= TAIL {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - TAIL..]);
        } else {
            self.tail.extend_from_slice(bytes);
            if self.tail.len() > TAIL {
                let cut = self.tail.len() - TAIL;
                self.tail.drain(..cut);
            }
        }
    }

    /// Bytes fed so far.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// The last byte fed.
    pub fn last_byte(&self) -> Option<u8> {
        self.tail.last().copied()
    }

    /// Whether nothing was fed since the last [`take`](Self::take).
    pub fn is_empty(&self) -> bool {
        self.seen == 0
    }

    /// Reads what was kept and resets for the next frame.
    pub fn take(&mut self) -> (Glimpse, usize) {
        let glimpse = Glimpse::read(&self.head, &self.tail);
        let seen = self.seen;
        self.head.clear();
        self.tail.clear();
        self.seen = 0;
        (glimpse, seen)
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The end (one past the closing quote) of the string starting at `i`.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The end of the JSON value starting at `i`, if it ends within `b`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let end = i + b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace())?;
            (end > i).then_some(end)
        }
    }
}

/// An id token (`7`, `"abc"`) as text; anything else is none.
fn parse_id(token: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Id {
        Number(#[allow(dead_code)] i64),
        String(#[allow(dead_code)] String),
    }
    serde_json::from_slice::<Id>(token).ok()?;
    String::from_utf8(token.to_vec()).ok()
}

fn scan_head(b: &[u8]) -> (Option<Kind>, Option<String>) {
    let (mut kind, mut id) = (None, None);
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return (None, None);
    }
    i += 1;
    loop {
        i = skip_ws(b, i);
        if b.get(i) != Some(&b'"') {
            break;
        }
        let Some(key_end) = skip_string(b, i) else {
            break;
        };
        let key = &b[i + 1..key_end - 1];
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            break;
        }
        i = skip_ws(b, i + 1);
        match key {
            b"result" | b"error" => kind = kind.or(Some(Kind::Response)),
            b"method" => kind = kind.or(Some(Kind::Request)),
            _ => {}
        }
        let Some(end) = skip_value(b, i) else {
            break;
        };
        if key == b"id" {
            id = parse_id(&b[i..end]);
        }
        i = skip_ws(b, end);
        if b.get(i) != Some(&b',') {
            break;
        }
        i += 1;
    }
    (kind, id)
}

/// The id when it is the last member of the object `tail` ends, or the
/// last but `"jsonrpc":"2.0"`.
fn tail_id(b: &[u8]) -> Option<String> {
    let b = b.trim_ascii_end();
    let at = memchr::memmem::rfind(b, b"\"id\"")?;
    // A member: preceded by `,` or `{`, not by an escaping backslash.
    let before = b[..at].trim_ascii_end();
    if !matches!(before.last(), Some(b',' | b'{')) {
        return None;
    }
    let mut i = skip_ws(b, at + 4);
    if b.get(i) != Some(&b':') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let end = skip_value(b, i)?;
    let id = parse_id(&b[i..end])?;
    let rest: Vec<u8> = b[end..]
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    match &rest[..] {
        b"}" | b",\"jsonrpc\":\"2.0\"}" => Some(id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Glimpse {
        Glimpse::read(s.as_bytes(), s.as_bytes())
    }

    fn cut(s: &str, head: usize, tail: usize) -> Glimpse {
        let b = s.as_bytes();
        Glimpse::read(&b[..head.min(b.len())], &b[b.len().saturating_sub(tail)..])
    }

    #[test]
    fn python_order_in_the_head() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(10_000)
        );
        let g = cut(&big, 64, 16);
        assert_eq!(g.response_id(), Some("7"));
        let req = r#"{"jsonrpc":"2.0","id":"s-1","method":"sampling/createMessage","params":{"#;
        let g = cut(req, req.len(), 0);
        assert_eq!(g.request_id(), Some("\"s-1\""));
    }

    #[test]
    fn typescript_order_in_the_tail() {
        let big = format!(
            r#"{{"result":{{"content":[{{"type":"text","text":"{}","id":3}}]}},"jsonrpc":"2.0","id":12}}"#,
            "y".repeat(10_000)
        );
        let g = cut(&big, 64, 64);
        assert_eq!(g.kind, Some(Kind::Response));
        assert_eq!(g.response_id(), Some("12"));
        let g = cut(&format!("{big}\r\n  "), 64, 64);
        assert_eq!(g.response_id(), Some("12"));
        let req = format!(
            r#"{{"method":"elicitation/create","params":{{"m":"{}"}},"jsonrpc":"2.0","id":0}}"#,
            "z".repeat(9000)
        );
        assert_eq!(cut(&req, 40, 40).request_id(), Some("0"));
    }

    #[test]
    fn nested_or_quoted_ids_are_not_taken() {
        // The last "id" is nested: two closing brackets follow it.
        let s = r#"{"result":{"content":[{"text":"a","id":3}]}}"#;
        assert_eq!(cut(s, 12, s.len()).id, None);
        let s = r#"{"result":{"x":{"y":1,"id":3}}}"#;
        assert_eq!(cut(s, 12, s.len()).id, None);
        // Inside a string, the quotes are escaped.
        let s = r#"{"result":{"text":"…\",\"id\":9}"}}"#;
        assert_eq!(cut(s, 12, 20).id, None);
        let s = r#"{"result":"…,\"id\":9}"#;
        assert_eq!(cut(s, 12, 14).id, None);
    }

    #[test]
    fn unknown_kinds_and_garbage_give_nothing() {
        assert_eq!(read(""), Glimpse::default());
        assert_eq!(read("npm WARN deprecated"), Glimpse::default());
        assert_eq!(
            cut(r#"{"jsonrpc":"2.0","params":{"#, 99, 0),
            Glimpse::default()
        );
        let g = cut(r#"{"jsonrpc":"2.0","id":5,"params":{"x":"#, 99, 0);
        assert_eq!((g.kind, g.response_id()), (None, None));
        // A number that is not an id, a null id.
        assert_eq!(read(r#"{"id":1.5,"result":0}"#).id, None);
        assert_eq!(read(r#"{"id":null,"error":{}}"#).id, None);
        // Brackets that close too early never panic.
        assert_eq!(read(r#"{"a":]]]]"#), Glimpse::default());
        assert_eq!(read(r#"{"a":"\"#), Glimpse::default());
    }

    #[test]
    fn peek_keeps_the_ends_and_counts_the_rest() {
        let mut p = Peek::default();
        let s = format!(
            r#"{{"result":{{"text":"{}"}},"jsonrpc":"2.0","id":41}}"#,
            "q".repeat(3 * HEAD)
        );
        for piece in s.as_bytes().chunks(7) {
            p.push(piece);
        }
        p.push(b"\r");
        assert_eq!(p.seen(), s.len() + 1);
        let (g, seen) = p.take();
        assert_eq!(seen, s.len() + 1);
        assert_eq!(g.response_id(), Some("41"));
        assert!(p.is_empty());
        // One big piece.
        p.push(s.as_bytes());
        assert_eq!(p.take().0.response_id(), Some("41"));
    }
}
