//! JSON with comments and trailing commas, as VS Code, Zed, Cursor and
//! Gemini CLI accept it: one pass that blanks the comments and the
//! trailing commas, then `serde_json`.
//!
//! `//` to the end of the line and `/* … */` become spaces (newlines are
//! kept, so `serde_json`'s line and column still point into the file); a
//! `,` followed only by whitespace or comments before `}` or `]` becomes
//! a space; a leading UTF-8 byte-order mark is dropped. Strings are
//! copied untouched, escapes included (`"a\"//b"` stays a string). All
//! the delimiters are ASCII, so the output is as valid UTF-8 as the input.

/// The text with comments and trailing commas blanked, or why not (an
/// unterminated `/*`).
pub(crate) fn strip(input: &[u8]) -> Result<Vec<u8>, String> {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let mut out = input.to_vec();
    // Index of a `,` whose fate depends on the next significant byte.
    let mut pending_comma: Option<usize> = None;
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'"' => {
                pending_comma = None;
                i += 1;
                while i < input.len() {
                    match input[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                // An unterminated string is left for serde_json to report.
                i += 1;
            }
            b'/' if input.get(i + 1) == Some(&b'/') => {
                while i < input.len() && input[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if input.get(i + 1) == Some(&b'*') => {
                let start = i;
                out[i] = b' ';
                out[i + 1] = b' ';
                i += 2;
                loop {
                    if i + 1 >= input.len() {
                        let line = 1 + input[..start].iter().filter(|b| **b == b'\n').count();
                        return Err(format!("unterminated /* comment (line {line})"));
                    }
                    if input[i] == b'*' && input[i + 1] == b'/' {
                        out[i] = b' ';
                        out[i + 1] = b' ';
                        i += 2;
                        break;
                    }
                    if !matches!(input[i], b'\n' | b'\r') {
                        out[i] = b' ';
                    }
                    i += 1;
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b',' => {
                pending_comma = Some(i);
                i += 1;
            }
            c => {
                if let (Some(at), b'}' | b']') = (pending_comma, c) {
                    out[at] = b' ';
                }
                pending_comma = None;
                i += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::strip;
    use serde_json::{json, Value};

    fn parse(text: &str) -> Value {
        let s = strip(text.as_bytes()).unwrap();
        serde_json::from_slice(&s)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&s)))
    }

    #[test]
    fn comments_and_trailing_commas_go() {
        let v = parse(
            "\u{feff}// header\n{\n  /* block\n  over lines */ \"a\": 1, // one\n  \"b\": [1, 2, /* two */ ],\n  \"c\": {\"d\": true,},\n}\n",
        );
        assert_eq!(v, json!({"a": 1, "b": [1, 2], "c": {"d": true}}));
    }

    #[test]
    fn strings_survive() {
        let v = parse(
            r#"{"url": "https://h//x", "q": "a\"//b", "r": "/* not */", "s": "\\", "t": ",]", "u": "é//ü",}"#,
        );
        assert_eq!(
            v,
            json!({"url": "https://h//x", "q": "a\"//b", "r": "/* not */", "s": "\\", "t": ",]", "u": "é//ü"})
        );
    }

    #[test]
    fn only_trailing_commas_go() {
        // A comma between values stays, even with comments around it.
        assert_eq!(parse("[1 /* c */ , // d\n 2]"), json!([1, 2]));
        // Two commas are still an error (not JSONC either).
        let s = strip(b"[1,,]").unwrap();
        assert!(serde_json::from_slice::<Value>(&s).is_err());
        // A comma with nothing after it is left for serde_json.
        let s = strip(b"[1,").unwrap();
        assert!(serde_json::from_slice::<Value>(&s).is_err());
    }

    #[test]
    fn positions_are_kept() {
        let s = strip(b"{\n/* a\nb */\n\"x\": tru,\n}").unwrap();
        let e = serde_json::from_slice::<Value>(&s).unwrap_err();
        assert_eq!(e.line(), 4, "{e}");
    }

    #[test]
    fn edge_cases() {
        assert!(strip(b"{} /* open").unwrap_err().contains("line 1"));
        assert!(strip(b"{}\n/*").unwrap_err().contains("line 2"));
        assert_eq!(parse("{}//"), json!({}));
        assert_eq!(parse("/**/{\"a\":\"*/\"}/***/"), json!({"a": "*/"}));
        assert_eq!(parse("{\"a\":1}\r\n// x\r\n"), json!({"a": 1}));
        // A string ending in an escaped backslash closes normally.
        assert_eq!(
            parse(r#"{"a":"\\", /* c */ "b":"//"}"#),
            json!({"a": "\\", "b": "//"})
        );
        // A lone slash is not a comment; serde_json rejects it.
        let s = strip(b"{\"a\": 1 / 2}").unwrap();
        assert!(serde_json::from_slice::<Value>(&s).is_err());
        // Every prefix of a nasty input either strips or says why, never panics.
        let nasty = br#"{"a\"": "//", /* x */ "b": [1,], // y
"c": "\\" ,}"#;
        for n in 0..=nasty.len() {
            let _ = strip(&nasty[..n]);
        }
    }
}
