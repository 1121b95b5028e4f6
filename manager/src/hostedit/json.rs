//! Editing JSON and JSONC files as text: a member is added, removed or
//! replaced and every other byte (comments, key order, indentation,
//! trailing commas, line ends) stays as it was.
//!
//! The file is read into a tree of byte spans (objects, their members and
//! the comma after each, arrays, scalars); an edit is a few splices of the
//! text, never a re-serialization. Removing is the exact inverse of
//! adding: a member added to a file and removed again leaves the file
//! byte for byte as it was.
//!
//! ```text
//! add "b" to {"a": 1}          remove "b"
//!   {                            {
//!     "a": 1,   <- comma added     "a": 1    <- comma removed
//!     "b": 2    <- line added    }
//!   }
//! ```
//!
//! New text takes the file's style: the indentation unit (tabs, or the
//! width of the first indented line), the line end (`\r\n` when the file
//! has one), a trailing comma when the object's last member has one, one
//! line when the object is written on one line. Objects and arrays are
//! written as `JSON.stringify(value, null, indent)` does.

use serde_json::Value;

use super::node::Node;

/// A parsed value: where it is, and what it holds.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: Kind,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Object(Vec<Member>),
    /// The array's items (parsed so that their text is skipped right).
    #[allow(dead_code)]
    Array(Vec<Span>),
    Scalar,
}

/// One member of an object.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) key: String,
    pub(crate) key_start: usize,
    pub(crate) value: Span,
    /// Where the comma after the value is, if there is one.
    pub(crate) comma: Option<usize>,
}

/// A replacement of `range` of the text by `with`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Splice {
    pub(crate) at: usize,
    pub(crate) len: usize,
    pub(crate) with: String,
}

/// Applies splices (in any order; none overlapping).
pub(crate) fn apply(text: &str, mut splices: Vec<Splice>) -> String {
    splices.sort_by_key(|s| s.at);
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for s in splices {
        out.push_str(&text[at..s.at]);
        out.push_str(&s.with);
        at = s.at + s.len;
    }
    out.push_str(&text[at..]);
    out
}

/// The text's root value, or why it does not parse (with its line).
pub(crate) fn parse(text: &str) -> Result<Span, String> {
    let mut p = Parser {
        b: text.as_bytes(),
        text,
        i: 0,
    };
    if text.starts_with('\u{feff}') {
        p.i = 3;
    }
    p.trivia()?;
    let root = p.value(0)?;
    p.trivia()?;
    if p.i != p.b.len() {
        return Err(p.err("text after the JSON value"));
    }
    Ok(root)
}

struct Parser<'a> {
    b: &'a [u8],
    text: &'a str,
    i: usize,
}

/// Nesting deeper than this is refused (a config file never is).
const MAX_DEPTH: usize = 128;

impl Parser<'_> {
    fn err(&self, what: &str) -> String {
        let line = 1 + self.b[..self.i.min(self.b.len())]
            .iter()
            .filter(|c| **c == b'\n')
            .count();
        format!("not valid JSON: {what} (line {line})")
    }

    /// Skips whitespace and comments.
    fn trivia(&mut self) -> Result<(), String> {
        loop {
            match self.b.get(self.i) {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.i += 1,
                Some(b'/') if self.b.get(self.i + 1) == Some(&b'/') => {
                    while self.i < self.b.len() && self.b[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                Some(b'/') if self.b.get(self.i + 1) == Some(&b'*') => {
                    let from = self.i;
                    self.i += 2;
                    loop {
                        if self.i + 1 >= self.b.len() {
                            self.i = from;
                            return Err(self.err("unterminated /* comment"));
                        }
                        if self.b[self.i] == b'*' && self.b[self.i + 1] == b'/' {
                            self.i += 2;
                            break;
                        }
                        self.i += 1;
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// A string; its decoded value.
    fn string(&mut self) -> Result<String, String> {
        let start = self.i;
        self.i += 1;
        loop {
            match self.b.get(self.i) {
                None => {
                    self.i = start;
                    return Err(self.err("unterminated string"));
                }
                Some(b'\\') => self.i += 2,
                Some(b'"') => {
                    self.i += 1;
                    break;
                }
                Some(_) => self.i += 1,
            }
        }
        let raw = self.text.get(start..self.i).unwrap_or("\"");
        serde_json::from_str::<String>(raw).map_err(|e| {
            let at = self.i;
            self.i = start;
            let m = self.err(&format!("bad string: {e}"));
            self.i = at;
            m
        })
    }

    fn value(&mut self, depth: usize) -> Result<Span, String> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        let start = self.i;
        match self.b.get(self.i) {
            None => Err(self.err("a value is missing")),
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                loop {
                    self.trivia()?;
                    match self.b.get(self.i) {
                        Some(b'}') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'"') => {}
                        _ => return Err(self.err("expected a key or `}`")),
                    }
                    let key_start = self.i;
                    let key = self.string()?;
                    self.trivia()?;
                    if self.b.get(self.i) != Some(&b':') {
                        return Err(self.err("expected `:`"));
                    }
                    self.i += 1;
                    self.trivia()?;
                    let value = self.value(depth + 1)?;
                    self.trivia()?;
                    let comma = match self.b.get(self.i) {
                        Some(b',') => {
                            self.i += 1;
                            Some(self.i - 1)
                        }
                        Some(b'}') => None,
                        _ => return Err(self.err("expected `,` or `}`")),
                    };
                    members.push(Member {
                        key,
                        key_start,
                        value,
                        comma,
                    });
                }
                Ok(Span {
                    start,
                    end: self.i,
                    kind: Kind::Object(members),
                })
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.trivia()?;
                    if self.b.get(self.i) == Some(&b']') {
                        self.i += 1;
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    self.trivia()?;
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {}
                        _ => return Err(self.err("expected `,` or `]`")),
                    }
                }
                Ok(Span {
                    start,
                    end: self.i,
                    kind: Kind::Array(items),
                })
            }
            Some(b'"') => {
                self.string()?;
                Ok(Span {
                    start,
                    end: self.i,
                    kind: Kind::Scalar,
                })
            }
            Some(_) => {
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | b'/'
                    )
                {
                    self.i += 1;
                }
                let word = &self.text[start..self.i];
                if word.is_empty() || serde_json::from_str::<Value>(word).is_err() {
                    self.i = start;
                    return Err(self.err(&format!("`{word}` is not a JSON value")));
                }
                Ok(Span {
                    start,
                    end: self.i,
                    kind: Kind::Scalar,
                })
            }
        }
    }
}

impl Span {
    pub(crate) fn members(&self) -> Option<&[Member]> {
        match &self.kind {
            Kind::Object(m) => Some(m),
            _ => None,
        }
    }

    pub(crate) fn member(&self, key: &str) -> Option<&Member> {
        self.members()?.iter().find(|m| m.key == key)
    }
}

/// How the file writes JSON.
#[derive(Debug, Clone)]
pub(crate) struct Style {
    /// One level of indentation.
    pub(crate) unit: String,
    /// `\n` or `\r\n`.
    pub(crate) newline: &'static str,
    /// Whether the file is written on one line.
    pub(crate) compact: bool,
    /// `": "` or `":"`.
    pub(crate) colon: &'static str,
}

impl Style {
    /// The style of `text`; `fresh` for a new file.
    pub(crate) fn of(text: &str, fresh_unit: &str) -> Style {
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let body = text.trim_end();
        let compact = !body.is_empty() && !body.contains('\n');
        let unit = body
            .lines()
            .skip(1)
            .find_map(|l| {
                let ws: String = l.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
                if ws.is_empty() || l.trim().is_empty() {
                    None
                } else if ws.starts_with('\t') {
                    Some("\t".to_string())
                } else {
                    Some(ws)
                }
            })
            .unwrap_or_else(|| fresh_unit.to_string());
        let colon = if compact && !body.contains(": ") && body.contains("\":") {
            ":"
        } else {
            ": "
        };
        Style {
            unit,
            newline,
            compact,
            colon,
        }
    }
}

/// `node` as JSON text whose first line starts at indentation `indent`.
pub(crate) fn render(node: &Node, indent: &str, style: &Style) -> String {
    let mut out = String::new();
    write_node(&mut out, node, indent, style);
    out
}

fn write_node(out: &mut String, node: &Node, indent: &str, style: &Style) {
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Node::Num(n) => out.push_str(&n.to_string()),
        Node::Str(s) => out.push_str(&quote(s)),
        Node::List(items) if items.is_empty() => out.push_str("[]"),
        Node::Map(items) if items.is_empty() => out.push_str("{}"),
        Node::List(items) => {
            out.push('[');
            let inner = format!("{indent}{}", style.unit);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !style.compact {
                    out.push_str(style.newline);
                    out.push_str(&inner);
                }
                write_node(out, item, &inner, style);
            }
            if !style.compact {
                out.push_str(style.newline);
                out.push_str(indent);
            }
            out.push(']');
        }
        Node::Map(items) => {
            out.push('{');
            let inner = format!("{indent}{}", style.unit);
            for (i, (k, v)) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !style.compact {
                    out.push_str(style.newline);
                    out.push_str(&inner);
                }
                out.push_str(&quote(k));
                out.push_str(style.colon);
                write_node(out, v, &inner, style);
            }
            if !style.compact {
                out.push_str(style.newline);
                out.push_str(indent);
            }
            out.push('}');
        }
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The indentation of the line `at` is on.
fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let n = line
        .bytes()
        .take_while(|b| *b == b' ' || *b == b'\t')
        .count();
    &line[..n]
}

/// Whether only spaces and tabs stand between the start of its line and
/// `at`.
fn starts_line(text: &str, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..at]
        .bytes()
        .all(|b| b == b' ' || b == b'\t')
}

/// Past spaces, tabs and one comment on the same line from `at` (stops
/// before the line end).
fn end_of_line_trivia(text: &str, mut at: usize) -> usize {
    let b = text.as_bytes();
    loop {
        while at < b.len() && (b[at] == b' ' || b[at] == b'\t') {
            at += 1;
        }
        if b.get(at) == Some(&b'/') && b.get(at + 1) == Some(&b'/') {
            while at < b.len() && b[at] != b'\n' && b[at] != b'\r' {
                at += 1;
            }
            return at;
        }
        if b.get(at) == Some(&b'/') && b.get(at + 1) == Some(&b'*') {
            match text[at + 2..].find("*/") {
                Some(e) if !text[at..at + 2 + e].contains('\n') => {
                    at = at + 2 + e + 2;
                    continue;
                }
                _ => return at,
            }
        }
        return at;
    }
}

/// Whether the text between `from` and `to` is only whitespace.
fn blank(text: &str, from: usize, to: usize) -> bool {
    text[from..to].trim().is_empty()
}

/// Adds member `key` with `value` at the end of `object`.
pub(crate) fn insert(
    text: &str,
    object: &Span,
    key: &str,
    value: &Node,
    style: &Style,
) -> Vec<Splice> {
    let members = object.members().unwrap_or_default();
    let inside_one_line = !text[object.start..object.end].contains('\n');
    let compact = style.compact || (inside_one_line && !members.is_empty());
    let cstyle = Style {
        compact,
        ..style.clone()
    };
    let Some(last) = members.last() else {
        // `{}`: the member on a line of its own, or inline in a one-line
        // file.
        let inner = (object.start + 1, object.end - 1);
        let with = if compact {
            format!(
                "{}{}{}",
                quote(key),
                style.colon,
                render(value, "", &cstyle)
            )
        } else {
            let outer = line_indent(text, object.start);
            let indent = format!("{outer}{}", style.unit);
            format!(
                "{nl}{indent}{}{}{}{nl}{outer}",
                quote(key),
                style.colon,
                render(value, &indent, style),
                nl = style.newline,
            )
        };
        return vec![Splice {
            at: inner.0,
            len: inner.1 - inner.0,
            with,
        }];
    };
    if compact {
        let at = last.comma.map_or(last.value.end, |c| c + 1);
        let mut with = String::new();
        if last.comma.is_none() {
            with.push(',');
        }
        with.push_str(&quote(key));
        with.push_str(style.colon);
        with.push_str(&render(value, "", &cstyle));
        return vec![Splice { at, len: 0, with }];
    }
    let indent = if starts_line(text, last.key_start) {
        line_indent(text, last.key_start).to_string()
    } else {
        format!("{}{}", line_indent(text, object.start), style.unit)
    };
    let trailing = last.comma.is_some();
    let after = last.comma.map_or(last.value.end, |c| c + 1);
    let at = end_of_line_trivia(text, after);
    let mut splices = Vec::new();
    if !trailing {
        splices.push(Splice {
            at: last.value.end,
            len: 0,
            with: ",".into(),
        });
    }
    let with = format!(
        "{}{indent}{}{}{}{}",
        style.newline,
        quote(key),
        style.colon,
        render(value, &indent, style),
        if trailing { "," } else { "" }
    );
    if !trailing && at == last.value.end {
        splices[0].with.push_str(&with);
    } else {
        splices.push(Splice { at, len: 0, with });
    }
    splices
}

/// Removes the member at `index` of `object`: its line (with a comment
/// on it), and the comma before it when it was the last; an object left
/// with only whitespace inside becomes `{}`.
pub(crate) fn remove(text: &str, object: &Span, index: usize) -> Vec<Splice> {
    let members = object.members().unwrap_or_default();
    let m = &members[index];
    let last = index + 1 == members.len();
    let own_line = starts_line(text, m.key_start) && text[object.start..m.key_start].contains('\n');
    let mut splices = Vec::new();
    let (mut from, mut to);
    if own_line {
        let line_start = text[..m.key_start].rfind('\n').map_or(0, |i| i + 1);
        from = line_start.saturating_sub(1);
        if from > 0 && text.as_bytes()[from - 1] == b'\r' {
            from -= 1;
        }
        to = m.comma.map_or(m.value.end, |c| c + 1);
        to = end_of_line_trivia(text, to);
    } else if !last {
        from = m.key_start;
        to = members[index + 1].key_start;
    } else if index > 0 {
        let prev = &members[index - 1];
        from = prev.comma.unwrap_or(prev.value.end);
        to = m.comma.map_or(m.value.end, |c| c + 1);
        let whole = Splice {
            at: from,
            len: to - from,
            with: String::new(),
        };
        return collapse(text, object, vec![whole]);
    } else {
        from = m.key_start;
        to = m.comma.map_or(m.value.end, |c| c + 1);
    }
    if own_line && last && m.comma.is_none() && index > 0 {
        // The comma that separated it from the one before goes too.
        if let Some(c) = members[index - 1].comma {
            splices.push(Splice {
                at: c,
                len: 1,
                with: String::new(),
            });
        }
    }
    if from < object.start + 1 {
        from = object.start + 1;
    }
    if to > object.end - 1 {
        to = object.end - 1;
    }
    splices.push(Splice {
        at: from,
        len: to - from,
        with: String::new(),
    });
    collapse(text, object, splices)
}

/// `splices` of `object`, or one that empties it when nothing but
/// whitespace would be left inside.
fn collapse(text: &str, object: &Span, splices: Vec<Splice>) -> Vec<Splice> {
    let edited = apply(&text[..object.end], splices.clone());
    let grown = edited.len() as isize - object.end as isize;
    let inner_end = (object.end as isize - 1 + grown) as usize;
    if blank(&edited, object.start + 1, inner_end) {
        return vec![Splice {
            at: object.start + 1,
            len: object.end - 1 - (object.start + 1),
            with: String::new(),
        }];
    }
    splices
}

/// Replaces the value of `member` with `value`.
pub(crate) fn replace(text: &str, member: &Member, value: &Node, style: &Style) -> Vec<Splice> {
    let indent = line_indent(text, member.key_start);
    let one_line = !text[member.value.start..member.value.end].contains('\n');
    let st = Style {
        compact: style.compact || (one_line && !matches!(value, Node::Map(_) | Node::List(_))),
        ..style.clone()
    };
    vec![Splice {
        at: member.value.start,
        len: member.value.end - member.value.start,
        with: render(value, indent, &st),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Node {
        Node::Map(vec![
            ("command".into(), Node::Str("mcpwire".into())),
            (
                "args".into(),
                Node::List(vec![Node::Str("serve".into()), Node::Str("--demo".into())]),
            ),
            ("env".into(), Node::Map(vec![])),
        ])
    }

    /// Adds `demo` under `servers` (which must exist), checks the result
    /// against `want`, removes it again and checks the text is back.
    fn round_trip(before: &str, want: &str) {
        let root = parse(before).unwrap();
        let servers = &root.member("servers").unwrap().value;
        let style = Style::of(before, "  ");
        let added = apply(before, insert(before, servers, "demo", &entry(), &style));
        assert_eq!(added, want, "added");
        let root = parse(&added).unwrap();
        let servers = &root.member("servers").unwrap().value;
        let i = servers
            .members()
            .unwrap()
            .iter()
            .position(|m| m.key == "demo")
            .unwrap();
        let removed = apply(&added, remove(&added, servers, i));
        assert_eq!(removed, before, "removed");
    }

    #[test]
    fn add_and_remove_keep_every_other_byte() {
        round_trip(
            "{\n  \"servers\": {\n    \"a\": {\"command\": \"x\"} // note\n  }\n}\n",
            "{\n  \"servers\": {\n    \"a\": {\"command\": \"x\"}, // note\n    \"demo\": {\n      \"command\": \"mcpwire\",\n      \"args\": [\n        \"serve\",\n        \"--demo\"\n      ],\n      \"env\": {}\n    }\n  }\n}\n",
        );
        round_trip(
            "{\n\t\"servers\": {}\n}\n",
            "{\n\t\"servers\": {\n\t\t\"demo\": {\n\t\t\t\"command\": \"mcpwire\",\n\t\t\t\"args\": [\n\t\t\t\t\"serve\",\n\t\t\t\t\"--demo\"\n\t\t\t],\n\t\t\t\"env\": {}\n\t\t}\n\t}\n}\n",
        );
        round_trip(
            "{\"servers\":{\"a\":{\"command\":\"x\"}}}",
            "{\"servers\":{\"a\":{\"command\":\"x\"},\"demo\":{\"command\":\"mcpwire\",\"args\":[\"serve\",\"--demo\"],\"env\":{}}}}",
        );
        // Trailing commas stay trailing commas; CRLF stays CRLF.
        round_trip(
            "{\r\n  \"servers\": {\r\n    \"a\": 1,\r\n  },\r\n}\r\n",
            "{\r\n  \"servers\": {\r\n    \"a\": 1,\r\n    \"demo\": {\r\n      \"command\": \"mcpwire\",\r\n      \"args\": [\r\n        \"serve\",\r\n        \"--demo\"\r\n      ],\r\n      \"env\": {}\r\n    },\r\n  },\r\n}\r\n",
        );
        // A comment line inside stays where it is.
        round_trip(
            "{\n  // mine\n  \"servers\": {\n    /* first */\n    \"a\": 1\n    // after a\n  }\n}",
            "{\n  // mine\n  \"servers\": {\n    /* first */\n    \"a\": 1,\n    \"demo\": {\n      \"command\": \"mcpwire\",\n      \"args\": [\n        \"serve\",\n        \"--demo\"\n      ],\n      \"env\": {}\n    }\n    // after a\n  }\n}",
        );
    }

    #[test]
    fn removing_a_member_in_the_middle_or_first() {
        let text = "{\n  \"a\": 1,\n  \"b\": [1, 2], // two\n  \"c\": 3\n}\n";
        let root = parse(text).unwrap();
        assert_eq!(
            apply(text, remove(text, &root, 1)),
            "{\n  \"a\": 1,\n  \"c\": 3\n}\n"
        );
        assert_eq!(
            apply(text, remove(text, &root, 0)),
            "{\n  \"b\": [1, 2], // two\n  \"c\": 3\n}\n"
        );
        assert_eq!(
            apply(text, remove(text, &root, 2)),
            "{\n  \"a\": 1,\n  \"b\": [1, 2] // two\n}\n"
        );
        let one = "{\"a\":1,\"b\":2,\"c\":3}";
        let root = parse(one).unwrap();
        assert_eq!(apply(one, remove(one, &root, 0)), "{\"b\":2,\"c\":3}");
        assert_eq!(apply(one, remove(one, &root, 1)), "{\"a\":1,\"c\":3}");
        assert_eq!(apply(one, remove(one, &root, 2)), "{\"a\":1,\"b\":2}");
        let only = "{\n  \"a\": 1\n}";
        let root = parse(only).unwrap();
        assert_eq!(apply(only, remove(only, &root, 0)), "{}");
    }

    #[test]
    fn replacing_a_value() {
        let text = "{\n  \"a\": {\n    \"disabled\": false\n  }\n}";
        let root = parse(text).unwrap();
        let a = &root.member("a").unwrap().value;
        let d = a.member("disabled").unwrap();
        let style = Style::of(text, "  ");
        assert_eq!(
            apply(text, replace(text, d, &Node::Bool(true), &style)),
            "{\n  \"a\": {\n    \"disabled\": true\n  }\n}"
        );
    }

    #[test]
    fn parse_errors_name_the_line() {
        for (bad, line) in [
            ("{\n\"a\": 1,,\n}", 2),
            ("{\n\"a\" 1}", 2),
            ("{\n\n\"a\": tru}", 3),
            ("{\"a\": \"x}", 1),
            ("{} x", 1),
            ("{\n/* x", 2),
            ("[1 2]", 1),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(&format!("line {line}")), "{bad:?}: {e}");
        }
        // JSONC is fine.
        let root = parse("\u{feff}// c\n{\"a\": [1, /* x */ 2,], \"b\": {\"c\": null,},}").unwrap();
        assert_eq!(root.members().unwrap().len(), 2);
        // Every prefix of a file either parses or says why, never panics.
        let text = "{\n  \"a\": {\"b\": [1, \"x\\\"y\"]}, // c\n  /* d */ \"e\": true\n}";
        for n in 0..=text.len() {
            if text.is_char_boundary(n) {
                let _ = parse(&text[..n]);
            }
        }
    }
}
