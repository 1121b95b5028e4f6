//! Goose's `config.yaml`, edited as lines: an entry of the top-level
//! `extensions` block mapping is added, removed, or its `enabled` line
//! changed; every other line stays as it was.
//!
//! No maintained Rust crate edits YAML losslessly on our rust-version
//! (yaml-rust2 and saphyr parse to values and emit their own layout,
//! dropping comments and anchors), and Goose's file is regular: one block
//! mapping per extension under `extensions:`, two spaces deep, as
//! serde_yaml writes it. So this is the smallest text edit that is
//! correct for that shape, and it refuses anything else (a flow-style
//! `extensions`, tabs, a second document) rather than guessing. The
//! caller checks every result by parsing it and comparing it with the
//! intended value.
//!
//! ```text
//! extensions:            <- top-level key, block mapping
//!   developer:           <- a child at the block's indentation
//!     enabled: true      <- its fields, deeper
//!   demo:                <- added after the last line of the block
//!     args:
//!     - serve            <- serde_yaml's sequence style
//! GOOSE_MODEL: x         <- the next top-level key ends the block
//! ```

use super::node::Node;

/// Why a YAML edit cannot be made (the caller adds the path).
#[derive(Debug)]
pub(crate) enum YamlError {
    NotEditable(String),
    Exists,
    Missing,
}

/// One line: where it starts and ends (its line end included).
#[derive(Debug, Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
}

fn lines(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            out.push(Line { start, end: i + 1 });
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push(Line {
            start,
            end: text.len(),
        });
    }
    out
}

/// A line's content without its line end.
fn content(text: &str, l: Line) -> &str {
    text[l.start..l.end].trim_end_matches(['\n', '\r'])
}

/// The indentation, or `None` for a blank or comment-only line.
fn indent_of(line: &str) -> Result<Option<usize>, YamlError> {
    let n = line.bytes().take_while(|b| *b == b' ').count();
    let rest = &line[n..];
    if rest.starts_with('\t') {
        return Err(YamlError::NotEditable(
            "a line is indented with a tab".into(),
        ));
    }
    if rest.trim().is_empty() || rest.starts_with('#') {
        return Ok(None);
    }
    Ok(Some(n))
}

/// A mapping key at the start of `rest` (`name:`, `"name":`, `'name':`)
/// and what follows its colon (comment removed, trimmed).
fn key_of(rest: &str) -> Option<(String, String)> {
    let (key, after) = if let Some(q) = rest.strip_prefix('"') {
        let mut end = None;
        let mut escaped = false;
        for (i, c) in q.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let end = end?;
        let key: String = serde_json::from_str(&format!("\"{}\"", &q[..end])).ok()?;
        (key, q[end + 1..].strip_prefix(':')?)
    } else if let Some(q) = rest.strip_prefix('\'') {
        let mut key = String::new();
        let mut chars = q.char_indices().peekable();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if chars.peek().map(|(_, n)| *n) == Some('\'') {
                    key.push('\'');
                    chars.next();
                } else {
                    end = Some(i);
                    break;
                }
            } else {
                key.push(c);
            }
        }
        (key, q[end? + 1..].strip_prefix(':')?)
    } else {
        if rest.starts_with(['-', '?', '[', '{', '&', '*', '!', '|', '>', '%', '@', '`']) {
            return None;
        }
        let i = rest
            .char_indices()
            .find(|(i, c)| *c == ':' && matches!(rest[i + 1..].chars().next(), None | Some(' ')))?
            .0;
        (rest[..i].trim_end().to_string(), &rest[i + 1..])
    };
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    let value = match after.find(" #") {
        Some(i) => &after[..i],
        None => after,
    };
    Some((key, value.trim().to_string()))
}

/// Where `extensions` is and what its block holds.
struct Extensions {
    /// The `extensions:` line.
    line: usize,
    /// What follows its colon: "" (a block, or nothing) or "{}".
    inline: String,
    /// The block's lines with content, deeper than the key.
    last_content: Option<usize>,
    /// The children's indentation.
    child_indent: Option<usize>,
    /// Each child's name, first line and end (exclusive).
    children: Vec<(String, usize, usize)>,
}

fn find(text: &str, ls: &[Line]) -> Result<Option<Extensions>, YamlError> {
    let mut at = None;
    for (i, l) in ls.iter().enumerate() {
        let c = content(text, *l);
        if c == "---" || c.starts_with("--- ") {
            if i > 0
                && ls[..i]
                    .iter()
                    .any(|p| indent_of(content(text, *p)).ok().flatten().is_some())
            {
                return Err(YamlError::NotEditable(
                    "the file has several YAML documents".into(),
                ));
            }
            continue;
        }
        if indent_of(c)? != Some(0) {
            continue;
        }
        if let Some((key, value)) = key_of(c) {
            if key == "extensions" {
                if at.is_some() {
                    return Err(YamlError::NotEditable("`extensions` is there twice".into()));
                }
                at = Some((i, value));
            }
        }
    }
    let Some((line, inline)) = at else {
        return Ok(None);
    };
    if !(inline.is_empty() || inline == "{}") {
        return Err(YamlError::NotEditable(format!(
            "`extensions` is written as `{inline}`, not as a block mapping"
        )));
    }
    let mut block_end = ls.len();
    let mut last_content = None;
    let mut child_indent = None;
    let mut starts: Vec<(String, usize)> = Vec::new();
    for (i, l) in ls.iter().enumerate().skip(line + 1) {
        let c = content(text, *l);
        match indent_of(c)? {
            None => {}
            Some(0) => {
                block_end = i;
                break;
            }
            Some(n) => {
                if !inline.is_empty() {
                    return Err(YamlError::NotEditable(
                        "`extensions: {}` is followed by indented lines".into(),
                    ));
                }
                last_content = Some(i);
                let ci = *child_indent.get_or_insert(n);
                if n < ci {
                    return Err(YamlError::NotEditable(format!(
                        "line {} of `extensions` is less indented than the entries before it",
                        i + 1
                    )));
                }
                if n == ci {
                    match key_of(&c[n..]) {
                        Some((name, _)) => starts.push((name, i)),
                        None => {
                            return Err(YamlError::NotEditable(format!(
                                "line {} of `extensions` is not a `name:` entry",
                                i + 1
                            )))
                        }
                    }
                }
            }
        }
    }
    let _ = block_end;
    let mut children = Vec::new();
    for (k, (name, start)) in starts.iter().enumerate() {
        let limit = starts
            .get(k + 1)
            .map_or(last_content.map_or(*start, |l| l) + 1, |n| n.1);
        let ci = child_indent.unwrap_or(0);
        let mut end = start + 1;
        for (i, l) in ls.iter().enumerate().take(limit).skip(start + 1) {
            let c = content(text, *l);
            let n = c.bytes().take_while(|b| *b == b' ').count();
            if !c.trim().is_empty() && n > ci {
                end = i + 1;
            }
        }
        children.push((name.clone(), *start, end));
    }
    Ok(Some(Extensions {
        line,
        inline,
        last_content,
        child_indent,
        children,
    }))
}

/// A YAML scalar for `s`: plain when that reads back as the same string,
/// else single-quoted, else double-quoted (control characters).
pub(crate) fn scalar(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let special = matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null" | "~"
    );
    let first_ok = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '/');
    let colon_ok = |i: usize| !matches!(s[i + 1..].chars().next(), None | Some(' '));
    let plain = !special
        && first_ok
        && s.char_indices().all(|(i, c)| {
            c.is_ascii_alphanumeric() || "_./@+=%-?&~".contains(c) || (c == ':' && colon_ok(i))
        });
    if plain {
        s.to_string()
    } else if s.chars().any(|c| c.is_control()) {
        serde_json::to_string(s).unwrap_or_default()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

fn write_field(out: &mut String, key: &str, node: &Node, indent: &str, unit: &str) {
    let key = scalar(key);
    match node {
        Node::Map(items) if items.is_empty() => out.push_str(&format!("{indent}{key}: {{}}\n")),
        Node::List(items) if items.is_empty() => out.push_str(&format!("{indent}{key}: []\n")),
        Node::Map(items) => {
            out.push_str(&format!("{indent}{key}:\n"));
            let inner = format!("{indent}{unit}");
            for (k, v) in items {
                write_field(out, k, v, &inner, unit);
            }
        }
        Node::List(items) => {
            out.push_str(&format!("{indent}{key}:\n"));
            for item in items {
                out.push_str(&format!("{indent}- {}\n", leaf(item)));
            }
        }
        leafy => out.push_str(&format!("{indent}{key}: {}\n", leaf(leafy))),
    }
}

fn leaf(node: &Node) -> String {
    match node {
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Num(n) => n.to_string(),
        Node::Str(s) => scalar(s),
        // Nested lists and maps in a list are not written by Goose's
        // fields; a flow form keeps them correct.
        Node::List(_) | Node::Map(_) => serde_json::to_string(&node.to_json()).unwrap_or_default(),
    }
}

/// Adds extension `name` (`entry`, a map) at the end of `extensions`.
pub(crate) fn add(text: &str, name: &str, entry: &Node) -> Result<String, YamlError> {
    let ls = lines(text);
    let found = find(text, &ls)?;
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let render = |indent: usize| {
        let mut out = String::new();
        let pad = " ".repeat(indent);
        write_field(&mut out, name, entry, &pad, &" ".repeat(indent.max(1)));
        if newline != "\n" {
            out = out.replace('\n', newline);
        }
        out
    };
    let Some(ext) = found else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push_str(newline);
        }
        out.push_str("extensions:");
        out.push_str(newline);
        out.push_str(&render(2));
        return Ok(out);
    };
    if ext.children.iter().any(|c| c.0 == name) {
        return Err(YamlError::Exists);
    }
    let l = ls[ext.line];
    if ext.inline == "{}" {
        let mut out = text[..l.start].to_string();
        out.push_str("extensions:");
        out.push_str(newline);
        out.push_str(&render(2));
        out.push_str(&text[l.end..]);
        return Ok(out);
    }
    let after = ext.last_content.unwrap_or(ext.line);
    let at = ls[after].end;
    let mut out = text[..at].to_string();
    if !out.ends_with('\n') {
        out.push_str(newline);
    }
    out.push_str(&render(ext.child_indent.unwrap_or(2)));
    out.push_str(&text[at..]);
    Ok(out)
}

/// Removes extension `name`; `extensions` left empty becomes
/// `extensions: {}`.
pub(crate) fn remove(text: &str, name: &str) -> Result<String, YamlError> {
    let ls = lines(text);
    let ext = find(text, &ls)?.ok_or(YamlError::Missing)?;
    let Some(&(_, start, end)) = ext.children.iter().find(|c| c.0 == name) else {
        return Err(YamlError::Missing);
    };
    let mut out = text[..ls[start].start].to_string();
    out.push_str(&text[ls[end - 1].end..]);
    let later_keys = ls[ext.line + 1..]
        .iter()
        .any(|l| indent_of(content(text, *l)).ok().flatten() == Some(0));
    if ext.children.len() == 1 && !later_keys && ext.last_content == Some(end - 1) {
        // The last key of the file, left empty: it goes (where an add
        // that created it put it).
        let mut out = text[..ls[ext.line].start].to_string();
        out.push_str(&text[ls[end - 1].end..]);
        return Ok(out);
    }
    if ext.children.len() == 1 {
        // Nothing is left under `extensions:`: an empty mapping, not null.
        let l = ls[ext.line];
        let line = content(text, l);
        let ending = &text[l.start + line.len()..l.end];
        let mut fixed = text[..l.start].to_string();
        fixed.push_str("extensions: {}");
        fixed.push_str(ending);
        fixed.push_str(&out[l.end..]);
        out = fixed;
    }
    Ok(out)
}

/// Sets extension `name`'s `enabled` line.
pub(crate) fn set_enabled(text: &str, name: &str, on: bool) -> Result<String, YamlError> {
    let ls = lines(text);
    let ext = find(text, &ls)?.ok_or(YamlError::Missing)?;
    let Some(&(_, start, end)) = ext.children.iter().find(|c| c.0 == name) else {
        return Err(YamlError::Missing);
    };
    let head = content(text, ls[start]);
    let ci = ext.child_indent.unwrap_or(0);
    if key_of(&head[ci..]).is_some_and(|(_, v)| !v.is_empty()) {
        return Err(YamlError::NotEditable(format!(
            "extension `{name}` is written on one line (flow style)"
        )));
    }
    let mut field_indent = None;
    for l in &ls[start + 1..end] {
        let c = content(text, *l);
        let Some(n) = indent_of(c)? else { continue };
        let fi = *field_indent.get_or_insert(n);
        if n != fi {
            continue;
        }
        if let Some((key, _)) = key_of(&c[n..]) {
            if key == "enabled" {
                let mut out = text[..l.start].to_string();
                out.push_str(&format!("{}enabled: {on}", " ".repeat(n)));
                out.push_str(&text[l.start + c.len()..]);
                return Ok(out);
            }
        }
    }
    let n = field_indent.unwrap_or(ci + 2);
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let at = ls[start].end;
    let mut out = text[..at].to_string();
    if !out.ends_with('\n') {
        out.push_str(newline);
    }
    out.push_str(&format!("{}enabled: {on}{newline}", " ".repeat(n)));
    out.push_str(&text[at..]);
    Ok(out)
}

/// The names under `extensions`, as lines (merge keys not applied).
pub(crate) fn names(text: &str) -> Result<Vec<String>, YamlError> {
    let ls = lines(text);
    Ok(find(text, &ls)?
        .map(|e| e.children.into_iter().map(|c| c.0).collect())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> Node {
        Node::Map(vec![
            (
                "args".into(),
                Node::List(vec![Node::Str("serve".into()), Node::Str("--demo".into())]),
            ),
            ("bundled".into(), Node::Null),
            ("cmd".into(), Node::Str("mcpwire".into())),
            ("enabled".into(), Node::Bool(true)),
            ("envs".into(), Node::Map(vec![])),
            ("name".into(), Node::Str("demo".into())),
            ("timeout".into(), Node::Num(300)),
            ("type".into(), Node::Str("stdio".into())),
        ])
    }

    const DEMO: &str = "  demo:\n    args:\n    - serve\n    - '--demo'\n    bundled: null\n    cmd: mcpwire\n    enabled: true\n    envs: {}\n    name: demo\n    timeout: 300\n    type: stdio\n";

    #[test]
    fn add_then_remove_is_byte_identical() {
        let goose = "GOOSE_PROVIDER: anthropic\nextensions:\n  developer:\n    bundled: true\n    display_name: Developer\n    enabled: true\n    name: developer\n    timeout: 300\n    type: builtin\n  # a note on memory\n  memory:\n    enabled: false\n    type: builtin\n\nGOOSE_MODEL: claude # the model\n";
        let added = add(goose, "demo", &demo()).unwrap();
        let want = goose.replace(
            "    type: builtin\n\nGOOSE_MODEL",
            &format!("    type: builtin\n{DEMO}\nGOOSE_MODEL"),
        );
        assert_eq!(added, want);
        assert_eq!(remove(&added, "demo").unwrap(), goose);
        let off = set_enabled(&added, "demo", false).unwrap();
        assert!(
            off.contains("    cmd: mcpwire\n    enabled: false\n"),
            "{off}"
        );
        assert_eq!(set_enabled(&off, "demo", true).unwrap(), added);
        // The middle one goes with its own lines only.
        let no_dev = remove(goose, "developer").unwrap();
        assert_eq!(
            no_dev,
            "GOOSE_PROVIDER: anthropic\nextensions:\n  # a note on memory\n  memory:\n    enabled: false\n    type: builtin\n\nGOOSE_MODEL: claude # the model\n"
        );
        assert!(matches!(
            add(goose, "memory", &demo()),
            Err(YamlError::Exists)
        ));
        assert!(matches!(remove(goose, "nope"), Err(YamlError::Missing)));
    }

    #[test]
    fn extensions_absent_empty_or_last() {
        let added = add("GOOSE_MODEL: x\n", "demo", &demo()).unwrap();
        assert_eq!(added, format!("GOOSE_MODEL: x\nextensions:\n{DEMO}"));
        assert_eq!(remove(&added, "demo").unwrap(), "GOOSE_MODEL: x\n");
        let empty = "extensions: {}\nGOOSE_MODEL: x\n";
        let added = add(empty, "demo", &demo()).unwrap();
        assert_eq!(added, format!("extensions:\n{DEMO}GOOSE_MODEL: x\n"));
        assert_eq!(remove(&added, "demo").unwrap(), empty);
        assert_eq!(
            add("", "demo", &demo()).unwrap(),
            format!("extensions:\n{DEMO}")
        );
        assert_eq!(remove(&format!("extensions:\n{DEMO}"), "demo").unwrap(), "");
        // Four-space children get four-space entries.
        let four = "extensions:\n    a:\n        type: builtin\n";
        let added = add(
            four,
            "b",
            &Node::Map(vec![("type".into(), Node::Str("sse".into()))]),
        )
        .unwrap();
        assert_eq!(
            added,
            "extensions:\n    a:\n        type: builtin\n    b:\n        type: sse\n"
        );
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely() {
        for bad in [
            "extensions: {a: {type: builtin}}\n",
            "extensions:\n\t a: 1\n",
            "extensions:\n  - a\n",
            "a: 1\n---\nextensions: {}\n",
            "extensions:\n    a:\n      type: x\n  b:\n    type: y\n",
        ] {
            assert!(
                matches!(add(bad, "demo", &demo()), Err(YamlError::NotEditable(_))),
                "{bad}"
            );
        }
        let flow = "extensions:\n  a: {type: builtin, enabled: true}\n";
        assert!(matches!(
            set_enabled(flow, "a", false),
            Err(YamlError::NotEditable(_))
        ));
    }

    #[test]
    fn scalars_read_back_as_strings() {
        assert_eq!(scalar("mcpwire"), "mcpwire");
        assert_eq!(scalar("/usr/bin/x"), "/usr/bin/x");
        assert_eq!(scalar("https://h/mcp?a=1"), "https://h/mcp?a=1");
        for s in [
            "--demo",
            "true",
            "No",
            "1.5",
            "a: b",
            "x #y",
            "",
            "@scope/pkg",
            "it's",
            "~",
            "a:",
            "http://h/ #x",
        ] {
            let q = scalar(s);
            let back = yaml_rust2::YamlLoader::load_from_str(&format!("k: {q}\n")).unwrap();
            assert_eq!(back[0]["k"].as_str(), Some(s), "{s} as {q}");
        }
        assert_eq!(scalar("a\nb"), "\"a\\nb\"");
    }
}
