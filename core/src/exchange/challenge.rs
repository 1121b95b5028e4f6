//! `WWW-Authenticate` (RFC 9110 §11.6.1): every challenge of every header
//! line, its parameters (tokens or quoted strings with escapes) or its
//! token68, without ever failing — what cannot be parsed is skipped.

/// One challenge: `Bearer realm="x", scope="a b"`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Challenge {
    /// The scheme as sent (compare case-insensitively).
    pub scheme: String,
    /// A token68 instead of parameters, if that is what was sent.
    pub token68: Option<String>,
    /// The parameters in order; names lower-cased, values unescaped.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The value of parameter `name` (lower case), if present.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is a `Bearer` challenge.
    pub fn is_bearer(&self) -> bool {
        self.scheme.eq_ignore_ascii_case("bearer")
    }
}

/// Longest header value parsed; the rest is ignored (bounds the work).
const MAX_HEADER: usize = 16 * 1024;
/// Most challenges kept from all header lines together.
const MAX_CHALLENGES: usize = 32;
/// Most parameters kept per challenge.
const MAX_PARAMS: usize = 64;

/// Parses every challenge in these header values (all `WWW-Authenticate`
/// lines of a response).
pub fn parse_challenges<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<Challenge> {
    let mut out = Vec::new();
    for value in values {
        let mut end = value.len().min(MAX_HEADER);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        let mut p = Parser {
            s: &value.as_bytes()[..end],
            i: 0,
        };
        while out.len() < MAX_CHALLENGES {
            match p.challenge() {
                Some(c) => out.push(c),
                None => break,
            }
        }
    }
    out
}

/// The first `Bearer` challenge, if any.
pub fn bearer(challenges: &[Challenge]) -> Option<&Challenge> {
    challenges.iter().find(|c| c.is_bearer())
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token68_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn skip_ws_commas(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.i += 1;
        }
    }

    fn token(&mut self) -> Option<String> {
        let start = self.i;
        while self.peek().is_some_and(is_tchar) {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    /// Whether a `name = value` parameter starts here (not a new scheme,
    /// not a token68).
    fn at_param(&self) -> bool {
        let mut j = self.i;
        let start = j;
        while self.s.get(j).copied().is_some_and(is_tchar) {
            j += 1;
        }
        if j == start {
            return false;
        }
        while matches!(self.s.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        if self.s.get(j) != Some(&b'=') {
            return false;
        }
        j += 1;
        while matches!(self.s.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        // `abc==` followed by the end or a comma is a token68.
        !matches!(self.s.get(j), None | Some(b',' | b'='))
    }

    fn challenge(&mut self) -> Option<Challenge> {
        loop {
            self.skip_ws_commas();
            self.peek()?;
            match self.token() {
                Some(scheme) => return Some(self.rest_of(scheme)),
                // Garbage: skip one byte and try again.
                None => self.i += 1,
            }
        }
    }

    fn rest_of(&mut self, scheme: String) -> Challenge {
        let mut c = Challenge {
            scheme,
            ..Challenge::default()
        };
        self.skip_ws();
        if !self.at_param() {
            // A token68, or nothing.
            let start = self.i;
            while self.peek().is_some_and(is_token68_char) {
                self.i += 1;
            }
            while self.peek() == Some(b'=') {
                self.i += 1;
            }
            if self.i > start {
                c.token68 = Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned());
            }
            return c;
        }
        while self.at_param() {
            let name = self.token().unwrap_or_default().to_ascii_lowercase();
            self.skip_ws();
            self.i += 1; // '='
            self.skip_ws();
            let value = if self.peek() == Some(b'"') {
                self.quoted()
            } else {
                self.token().unwrap_or_default()
            };
            if c.params.len() < MAX_PARAMS {
                c.params.push((name, value));
            }
            self.skip_ws();
            if self.peek() == Some(b',') {
                self.skip_ws_commas();
            } else {
                // Junk after a value: skip to the next comma.
                while self.peek().is_some_and(|b| b != b',') {
                    self.i += 1;
                }
                self.skip_ws_commas();
            }
        }
        c
    }

    /// A quoted string starting at `"`; an unterminated one runs to the end.
    fn quoted(&mut self) -> String {
        self.i += 1;
        let mut out = Vec::new();
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    if let Some(n) = self.peek() {
                        out.push(n);
                        self.i += 1;
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: &str) -> Vec<Challenge> {
        parse_challenges([v])
    }

    #[test]
    fn bearer_with_quoted_params() {
        let c = one(
            r#"Bearer resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", scope="mcp:basic mcp:write", error="insufficient_scope""#,
        );
        assert_eq!(c.len(), 1);
        assert!(c[0].is_bearer());
        assert_eq!(c[0].param("scope"), Some("mcp:basic mcp:write"));
        assert_eq!(c[0].param("error"), Some("insufficient_scope"));
        assert_eq!(
            c[0].param("resource_metadata"),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
    }

    #[test]
    fn several_challenges_tokens_escapes_and_case() {
        let c = one(
            r#"Basic realm="a \"b\", c", BEARER Realm=api ,error = invalid_token, Negotiate abc123==, Foo"#,
        );
        let names: Vec<_> = c.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(names, ["Basic", "BEARER", "Negotiate", "Foo"]);
        assert_eq!(c[0].param("realm"), Some(r#"a "b", c"#));
        assert_eq!(c[1].param("realm"), Some("api"));
        assert_eq!(c[1].param("error"), Some("invalid_token"));
        assert_eq!(c[2].token68.as_deref(), Some("abc123=="));
        assert!(c[3].params.is_empty() && c[3].token68.is_none());
        assert_eq!(bearer(&c).unwrap().param("realm"), Some("api"));
    }

    #[test]
    fn several_header_lines() {
        let c = parse_challenges(["Basic realm=x", r#"Bearer scope="s""#]);
        assert_eq!(c.len(), 2);
        assert_eq!(bearer(&c).unwrap().param("scope"), Some("s"));
    }

    #[test]
    fn hostile_input_never_panics() {
        for v in [
            "",
            ",,,",
            "=",
            "Bearer =",
            "Bearer a=",
            r#"Bearer a=""#,
            "Bearer a=\"\\",
            "\u{e9}\u{e9}",
            "Bearer ,,, a=b,,c=\"d\"",
            "Bearer a=b junk junk, c=d",
            "Bearer a==b",
        ] {
            let _ = one(v);
        }
        let c = one("Bearer a=b junk junk, c=d");
        assert_eq!(c[0].param("a"), Some("b"));
        assert_eq!(c[0].param("c"), Some("d"));
        let long = format!("Bearer scope=\"{}\"", "x".repeat(100_000));
        assert!(one(&long)[0].param("scope").unwrap().len() < MAX_HEADER);
    }
}
