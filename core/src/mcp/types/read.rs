//! The common tool result read straight from its text, without serde:
//! `{"content":[{"type":"text","text":"…"},…],"isError":false}`, its
//! members (and each content's) in any order, without whitespace. Anything
//! else (another member, another kind of content, `null`, a duplicate,
//! whitespace) is left to the `Deserialize` impl, which gives the same
//! result or the error.
//!
//! The text was checked as JSON before (it is a `RawValue`): a string ends
//! at its first unescaped quote and holds no control character, so finding
//! that quote is all the reading a string without escapes needs.
//!
//! ```text
//!  RawValue ──lone_plain──► one text without escapes: its ends compared, one scan for `"` and `\`
//!           ──common──────► Some(CallToolResult)              one pass; a lone text takes the RawValue's own buffer
//!           └─────────────► None ──► serde_json::from_str ──► the same result, or the error
//!  answer text ──ends, then common_end──► Some(end)   the same reading, each string checked: the engine's proof that a tools/call result is JSON
//!              └────────────────────────► None        the general scan (codec::scan) decides
//! ```
//!
//! A result whose only content is a text without escapes (the common tool
//! answer, and the one that can be large) takes the answer's buffer for
//! its text: what was received is moved to its start, not copied, so a
//! large result is held once, not twice.

use serde_json::value::RawValue;

use super::{CallToolResult, Content, Extra};

impl CallToolResult {
    /// Reads a result from checked JSON: the common shape (see the
    /// module) directly, anything else through `Deserialize`.
    pub fn from_raw(raw: Box<RawValue>) -> serde_json::Result<CallToolResult> {
        let read = match lone_plain(raw.get()) {
            Some((start, end, is_error)) => Some((Texts::One(Text::Plain(start, end)), is_error)),
            None => common(raw.get()),
        };
        let Some((texts, is_error)) = read else {
            return serde_json::from_str(raw.get());
        };
        let content = match texts {
            Texts::One(Text::Plain(start, end)) => {
                let mut text = String::from(Box::<str>::from(raw));
                text.truncate(end);
                text.drain(..start);
                vec![text_content(text)]
            }
            Texts::One(Text::Decoded(text)) => vec![text_content(text)],
            Texts::Many(texts) => texts
                .into_iter()
                .map(|t| {
                    text_content(match t {
                        Text::Plain(start, end) => raw.get()[start..end].to_owned(),
                        Text::Decoded(s) => s,
                    })
                })
                .collect(),
        };
        Ok(CallToolResult {
            content,
            structured_content: None,
            is_error,
            extra: Extra::new(),
        })
    }
}

fn text_content(text: String) -> Content {
    Content::Text {
        text,
        extra: Extra::new(),
    }
}

/// A text content's text: where it stands in the result when it has no
/// escapes, else decoded.
enum Text {
    Plain(usize, usize),
    Decoded(String),
}

/// A result's texts: one (the common case, without a list), or any number.
enum Texts {
    One(Text),
    Many(Vec<Text>),
}

/// How the commonest result of all starts: one text content, the key of
/// its text last (the text's opening quote follows).
const LONE_KEYS: &[u8; 34] = br#"{"content":[{"type":"text","text":"#;

/// Where the text of the commonest result starts: after [`LONE_KEYS`]
/// and its opening quote.
const LONE_TEXT_START: usize = LONE_KEYS.len() + 1;

/// The commonest result of all by its two ends: one text, perhaps
/// `isError` after it, in the order the SDKs write them
/// (`{"content":[{"type":"text","text":"…"}]}`, `…}],"isError":b}`):
/// what lies between the text's quotes if it is that one string (which
/// the caller finds out), and `isError`.
fn lone_ends(bytes: &[u8]) -> Option<(&[u8], Option<bool>)> {
    let body = bytes.strip_prefix(LONE_KEYS)?.strip_prefix(b"\"")?;
    if let Some(body) = body.strip_suffix(br#""}]}"#) {
        Some((body, None))
    } else if let Some(body) = body.strip_suffix(br#""}],"isError":false}"#) {
        Some((body, Some(false)))
    } else {
        Some((body.strip_suffix(br#""}],"isError":true}"#)?, Some(true)))
    }
}

/// [`lone_ends`] of checked JSON with a text without escapes: where the
/// text stands, and `isError`. No quote and no backslash between the ends
/// means the text is one string that closes where the end begins, so that
/// one scan is all the reading.
fn lone_plain(text: &str) -> Option<(usize, usize, Option<bool>)> {
    let (body, is_error) = lone_ends(text.as_bytes())?;
    let start = LONE_TEXT_START;
    memchr::memchr2(b'"', b'\\', body)
        .is_none()
        .then_some((start, start + body.len(), is_error))
}

/// The texts and `isError` of the result `text` holds, when it has the
/// common shape.
fn common(text: &str) -> Option<(Texts, Option<bool>)> {
    let mut r = Reader {
        text,
        at: 0,
        mode: Mode::Read,
    };
    let mut texts = None;
    let is_error = r.result(|t| {
        texts = Some(match texts.take() {
            None => Texts::One(t),
            Some(Texts::One(first)) => Texts::Many(vec![first, t]),
            Some(Texts::Many(mut all)) => {
                all.push(t);
                Texts::Many(all)
            }
        });
    })?;
    (r.at == text.len()).then_some(())?;
    Some((texts.unwrap_or(Texts::Many(Vec::new())), is_error))
}

/// Where the common tool result at the start of `text` ends, checked as
/// JSON as it is read (each string by [`scan`](crate::codec::scan)'s
/// rules): the engine's check of a `tools/call` answer, cheaper than the
/// general scan because keys and literals are matched whole. `None` when
/// it is not the common shape; the general scan then decides.
pub(crate) fn common_end(text: &str) -> Option<usize> {
    // The commonest answer first: that result as its last member, so that
    // the answer's `}` ends the text. Its text checked as a string that
    // closes where the result's end begins proves it all JSON.
    let bytes = text.as_bytes();
    if let Some((b'}', result)) = bytes.split_last() {
        if let Some((body, _)) = lone_ends(result) {
            let start = LONE_TEXT_START;
            if crate::codec::scan::string(bytes, start) == Some(start + body.len() + 1) {
                return Some(result.len());
            }
        }
    }
    let mut r = Reader {
        text,
        at: 0,
        mode: Mode::Check,
    };
    r.result(|_| {})?;
    Some(r.at)
}

/// How a [`Reader`] takes strings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// From JSON checked before (a `RawValue`): to its first unescaped
    /// quote, escaped texts decoded.
    Read,
    /// From unchecked text: each string checked (and not decoded).
    Check,
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
    mode: Mode,
}

impl Reader<'_> {
    /// The result object: each text content's text to `text`, and
    /// `isError`.
    fn result(&mut self, mut text: impl FnMut(Text)) -> Option<Option<bool>> {
        if let Some(is_error) = self.lone_text(&mut text) {
            return Some(is_error);
        }
        self.at = 0;
        let (mut content, mut is_error) = (false, None);
        self.object(|r| {
            if !content && r.take(b"\"content\":") {
                content = true;
                r.contents(&mut text)
            } else if is_error.is_none() && r.take(b"\"isError\":") {
                is_error = Some(r.boolean()?);
                Some(())
            } else {
                None
            }
        })?;
        Some(is_error)
    }

    /// The commonest result of all, one text and perhaps `isError` after
    /// it, in the order the SDKs write them, read with three
    /// comparisons: `{"content":[{"type":"text","text":"…"}]}` or
    /// `…}],"isError":b}`. Anything else is read member by member.
    fn lone_text(&mut self, text: &mut impl FnMut(Text)) -> Option<Option<bool>> {
        self.take(LONE_KEYS).then_some(())?;
        let t = self.string()?;
        self.take(b"}]").then_some(())?;
        let is_error = if self.eat(b'}') {
            None
        } else {
            self.take(br#","isError":"#).then_some(())?;
            let b = self.boolean()?;
            self.eat(b'}').then_some(())?;
            Some(b)
        };
        text(t);
        Some(is_error)
    }

    /// Takes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let next = self.text.as_bytes().get(self.at) == Some(&byte);
        self.at += usize::from(next);
        next
    }

    /// Takes `bytes` (a member's key with its quotes and colon, a literal)
    /// if they are next: keys are matched whole, not read first.
    fn take<const N: usize>(&mut self, bytes: &[u8; N]) -> bool {
        let rest = self.text.as_bytes().get(self.at..);
        let next = rest.and_then(<[u8]>::first_chunk::<N>) == Some(bytes);
        self.at += if next { N } else { 0 };
        next
    }

    /// An object: `member` reads each member, key and value.
    fn object(&mut self, mut member: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'{').then_some(())?;
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            member(self)?;
            if self.eat(b'}') {
                return Some(());
            }
            self.eat(b',').then_some(())?;
        }
    }

    /// A string: where it stands when it has no escapes, else decoded by
    /// serde_json (a text content's text: multi-line output is common).
    fn string(&mut self) -> Option<Text> {
        let open = self.at;
        self.eat(b'"').then_some(())?;
        let bytes = self.text.as_bytes();
        if self.mode == Mode::Check {
            self.at = crate::codec::scan::string(bytes, self.at)?;
            return Some(Text::Plain(open + 1, self.at - 1));
        }
        let mut escaped = false;
        loop {
            let end = self.at + memchr::memchr2(b'"', b'\\', bytes.get(self.at..)?)?;
            if bytes[end] == b'"' {
                self.at = end + 1;
                return if escaped {
                    serde_json::from_str(self.text.get(open..self.at)?)
                        .ok()
                        .map(Text::Decoded)
                } else {
                    Some(Text::Plain(open + 1, end))
                };
            }
            // A backslash and the byte it escapes (a `\u`'s four hex
            // digits hold neither a quote nor a backslash).
            escaped = true;
            self.at = end + 2;
        }
    }

    /// `true` or `false`.
    fn boolean(&mut self) -> Option<bool> {
        if self.take(b"true") {
            Some(true)
        } else {
            self.take(b"false").then_some(false)
        }
    }

    /// An array of text contents: each one's text to `text`.
    fn contents(&mut self, text: &mut impl FnMut(Text)) -> Option<()> {
        self.eat(b'[').then_some(())?;
        if self.eat(b']') {
            return Some(());
        }
        loop {
            text(self.text_content()?);
            if self.eat(b']') {
                return Some(());
            }
            self.eat(b',').then_some(())?;
        }
    }

    /// `{"type":"text","text":…}`, in either order: its text.
    fn text_content(&mut self) -> Option<Text> {
        let (mut tagged, mut text) = (false, None);
        self.object(|r| {
            if !tagged && r.take(b"\"type\":") {
                tagged = r.take(b"\"text\"");
                tagged.then_some(())
            } else if text.is_none() && r.take(b"\"text\":") {
                text = Some(r.string()?);
                Some(())
            } else {
                None
            }
        })?;
        tagged.then_some(())?;
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `from_raw` gives, and whether the common path read it.
    fn read(text: &str) -> (serde_json::Result<CallToolResult>, bool) {
        let raw: Box<RawValue> = serde_json::from_str(text).expect("valid JSON");
        let fast = common(raw.get()).is_some();
        (CallToolResult::from_raw(raw), fast)
    }

    fn agrees(text: &str) -> bool {
        let (got, fast) = read(text);
        let serde: serde_json::Result<CallToolResult> = serde_json::from_str(text);
        match (&got, &serde) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
            (Err(_), Err(_)) => {}
            _ => panic!("{text}: from_raw {got:?}, serde {serde:?}"),
        }
        fast
    }

    #[test]
    fn the_common_results_are_read_directly() {
        for text in [
            r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#,
            r#"{"isError":true,"content":[{"text":"tag last","type":"text"}]}"#,
            r#"{"content":[]}"#,
            r#"{}"#,
            r#"{"content":[{"type":"text","text":"lone"}]}"#,
            r#"{"content":[{"type":"text","text":"lone, then"}],"isError":true}"#,
            r#"{"content":[{"type":"text","text":"lone"},{"type":"text","text":"not"}]}"#,
            r#"{"content":[{"type":"text","text":""},{"type":"text","text":"two"}]}"#,
            r#"{"content":[{"type":"text","text":"line\nnext \"q\" \\ \u00e9 \ud83d\ude00 \/"}]}"#,
            r#"{"content":[{"type":"text","text":"ends in a backslash\\"}]}"#,
            "{\"content\":[{\"type\":\"text\",\"text\":\"caf\u{e9} \u{1f600}\"}]}",
        ] {
            assert!(agrees(text), "not read directly: {text}");
        }
    }

    /// A lone text without escapes is the received buffer itself, moved
    /// to its start: a large result is not held twice.
    #[test]
    fn a_lone_plain_text_keeps_the_received_buffer() {
        let big = "x".repeat(1 << 20);
        let text = format!(r#"{{"content":[{{"type":"text","text":"{big}"}}],"isError":false}}"#);
        let raw: Box<RawValue> = serde_json::from_str(&text).unwrap();
        let received = raw.get().as_ptr();
        let result = CallToolResult::from_raw(raw).unwrap();
        let Content::Text { text, .. } = &result.content[0] else {
            panic!("{result:?}")
        };
        assert_eq!(text, &big);
        assert_eq!(text.as_ptr(), received);
        assert_eq!(result.is_error, Some(false));
        // Two texts, or an escaped one: copied (and still equal to serde's).
        assert!(agrees(
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#
        ));
        assert!(agrees(r#"{"content":[{"type":"text","text":"a\nb"}]}"#));
    }

    /// The commonest result is read by its ends; text that only looks
    /// like those ends (another member after the text, two texts, an
    /// escape) is read member by member, and agrees with serde either way.
    #[test]
    fn the_lone_plain_text_is_read_by_its_ends() {
        for (text, lone) in [
            (
                r#"{"content":[{"type":"text","text":"hi"}]}"#,
                Some((35, 37, None)),
            ),
            (
                r#"{"content":[{"type":"text","text":""}],"isError":false}"#,
                Some((35, 35, Some(false))),
            ),
            (
                r#"{"content":[{"type":"text","text":"x"}],"isError":true}"#,
                Some((35, 36, Some(true))),
            ),
            (r#"{"content":[{"type":"text","text":"a","x":"b"}]}"#, None),
            (
                r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
                None,
            ),
            (r#"{"content":[{"type":"text","text":"a\"}]}"}]}"#, None),
            (r#"{"content":[{"type":"text","text":"a\\"}]}"#, None),
            (
                r#"{"content":[{"type":"text","text":"a"}],"isError":false,"isError":true}"#,
                None,
            ),
        ] {
            assert_eq!(lone_plain(text), lone, "{text}");
            agrees(text);
        }
    }

    #[test]
    fn anything_else_goes_through_serde() {
        for text in [
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"x":1}}"#,
            r#"{"content":[{"type":"text","text":"a"}],"_meta":{}}"#,
            r#"{"content":[{"type":"text","text":"a"}],"isError":false,"_meta":{}}"#,
            r#"{"content":[{"type":"text","text":"a"}],"isError":true,"isError":true}"#,
            r#"{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}"#,
            r#"{"content":[{"type":"text","text":"a","annotations":{}}]}"#,
            r#"{"content":[{"type":"text"}]}"#,
            r#"{"content":[{"text":"untagged"}]}"#,
            r#"{"content":[{"type":"text","text":5}]}"#,
            r#"{"content":[{"type":"text","text":"a","text":"b"}]}"#,
            r#"{"content":[{"type":"text","type":"text","text":"a"}]}"#,
            r#"{"content":[{"type":"te\u0078t","text":"escaped tag"}]}"#,
            r#"{"content":[],"content":[]}"#,
            r#"{"isError":true,"isError":false}"#,
            r#"{"isError":null}"#,
            r#"{"isError":1}"#,
            r#"{"content":null}"#,
            r#"{"content":{}}"#,
            r#"{ "content":[]}"#,
            r#"{"content":[ ]}"#,
            r#"{"content" :[]}"#,
            r#"{"content":[{"type":"text", "text":"a"}]}"#,
            r#"{"cont\u0065nt":[]}"#,
            r#"[]"#,
            r#""text""#,
            r#"null"#,
        ] {
            assert!(!agrees(text), "read directly: {text}");
        }
    }

    /// The engine's check of a tool result: what it accepts is one JSON
    /// value ending where the general scan says; a string the scan
    /// refuses (a control character, an unknown escape, a surrogate half,
    /// no closing quote) it refuses too.
    #[test]
    fn the_check_accepts_only_what_the_general_scan_accepts() {
        use crate::codec::scan::value_end;
        for body in ["plain", "", r#"esc \" \\ \/ \n \u00e9"#, "caf\u{e9}"] {
            let text = format!(
                r#"{{"content":[{{"type":"text","text":"{body}"}}],"isError":false}},"id":1}}"#
            );
            let end = common_end(&text).unwrap_or_else(|| panic!("not checked: {text}"));
            assert_eq!(Some(end), value_end(&text), "{text}");
            assert!(text[end..].starts_with(r#","id""#), "{text}");
        }
        for body in ["tab\there", "\\x", "\\ud800", "\\u12", "unterminated"] {
            let text = format!(r#"{{"content":[{{"type":"text","text":"{body}"#);
            let text = if body == "unterminated" {
                text
            } else {
                format!(r#"{text}"}}]}}"#)
            };
            assert_eq!(common_end(&text), None, "{text:?}");
        }
        // The commonest answer, its result last, checked by its ends; a
        // text that only looks like them is read member by member.
        for (text, end) in [
            (r#"{"content":[{"type":"text","text":"a"}]}}"#, Some(40)),
            (
                r#"{"content":[{"type":"text","text":"a"}],"isError":true}}"#,
                Some(55),
            ),
            (
                r#"{"content":[{"type":"text","text":"a\"}]}"}]}}"#,
                Some(45),
            ),
            (r#"{"content":[{"type":"text","text":"a","x":"b"}]}}"#, None),
            (r#"{"content":[{"type":"text","text":"a"}]}"}]}}"#, Some(40)),
            (
                r#"{"content":[{"type":"text","text":"a\u0001"}]}}"#,
                Some(46),
            ),
            (
                "{\"content\":[{\"type\":\"text\",\"text\":\"a\u{1}\"}]}}",
                None,
            ),
        ] {
            assert_eq!(common_end(text), end, "{text}");
            if let Some(end) = end {
                assert_eq!(value_end(text), Some(end), "{text}");
            }
        }
        // Not the shape: the general scan decides.
        assert_eq!(common_end(r#"{"content":[],"structuredContent":{}}"#), None);
        assert_eq!(common_end(r#" {"content":[]}"#), None);
    }

    /// The commonest result around `body` (as it is, unescaped), with
    /// `isError` after the text when given.
    fn lone(body: &str, is_error: Option<bool>) -> String {
        let tail = is_error.map_or(String::new(), |e| format!(r#","isError":{e}"#));
        format!(r#"{{"content":[{{"type":"text","text":"{body}"}}]{tail}}}"#)
    }

    proptest::proptest! {
        /// Any text in the common shape: the check gives the general
        /// scan's end or nothing, never an end the scan would not.
        #[test]
        fn the_check_never_accepts_what_the_scan_refuses(
            body in "(\\PC|[\\x00-\\x1f\"\\\\]|\\\\u[0-9a-fA-FdD]{0,4}){0,40}",
            is_error in proptest::option::of(proptest::bool::ANY),
        ) {
            let text = format!("{}}}", lone(&body, is_error));
            let value = crate::codec::scan::value_end(&text);
            if let Some(end) = common_end(&text) {
                proptest::prop_assert_eq!(Some(end), value, "{:?}", text);
            }
            if value.is_some() {
                // The scan's check and this one differ only on surrogate
                // halves (both refuse them) or not at all.
                proptest::prop_assert_eq!(common_end(&text), value, "{:?}", text);
            }
        }

        /// Texts made of the bytes that make the commonest result's ends
        /// ambiguous (quotes, backslashes, brackets, a control character):
        /// the check by the ends gives the general scan's end or nothing,
        /// and the reading by the ends agrees with serde.
        #[test]
        fn texts_that_look_like_the_ends_are_read_right(
            body in "[a\"\\\\}\\],:x\\x01]{0,12}",
            is_error in proptest::option::of(proptest::bool::ANY),
        ) {
            let result = lone(&body, is_error);
            let text = format!("{result}}}");
            if let Some(end) = common_end(&text) {
                proptest::prop_assert_eq!(Some(end), crate::codec::scan::value_end(&text), "{:?}", text);
            }
            if serde_json::from_str::<serde_json::Value>(&result).is_ok() {
                agrees(&result);
            }
        }

        /// Results near the common shape (members and content members in
        /// any order, some twice, some foreign, values of every kind):
        /// whatever the direct reading gives is what serde gives.
        #[test]
        fn near_the_common_shape_agrees_with_serde(
            members in proptest::collection::vec((0usize..5, 0usize..8), 0..5),
            contents in proptest::collection::vec(proptest::collection::vec((0usize..4, 0usize..8), 0..4), 0..4),
        ) {
            const KEYS: [&str; 5] = ["content", "isError", "structuredContent", "_meta", "type"];
            const CONTENT_KEYS: [&str; 4] = ["type", "text", "annotations", "data"];
            const VALUES: [&str; 8] = [
                r#""text""#, r#""a\"b\n\u00e9""#, "true", "false", "null", "7", "[]", r#"{"k":"v"}"#,
            ];
            let array = contents
                .iter()
                .map(|members| {
                    let body: Vec<String> = members
                        .iter()
                        .map(|&(k, v)| format!("\"{}\":{}", CONTENT_KEYS[k], VALUES[v]))
                        .collect();
                    format!("{{{}}}", body.join(","))
                })
                .collect::<Vec<_>>()
                .join(",");
            let body: Vec<String> = members
                .iter()
                .map(|&(k, v)| match k {
                    0 if v % 2 == 0 => format!("\"content\":[{array}]"),
                    _ => format!("\"{}\":{}", KEYS[k], VALUES[v]),
                })
                .collect();
            agrees(&format!("{{{}}}", body.join(",")));
        }
    }
}
