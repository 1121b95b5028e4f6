//! Newline-delimited JSON (JSONL): the framing of the stdio transport.
//!
//! One JSON message per `\n`-terminated line. The [`JsonlDecoder`] is fed
//! arbitrary byte chunks and reports every complete line exactly once; the
//! [`encode`] functions write one message as compact JSON plus `\n`.
//!
//! ```text
//!  chunk ──► memchr('\n') ──► whole line in the chunk? ──► borrowed, no copy
//!                          └► line split across chunks ──► copied into `partial`
//!                                                          (at most max_line_len;
//!                                                          a large one is given
//!                                                          away: Line::Owned)
//!  line longer than max_line_len ──► every byte up to the next '\n' is dropped
//!                                    (never buffered; its first 4 KiB and last
//!                                    256 bytes are kept), then LineTooLong with
//!                                    the line's size and what its ends show:
//!                                    a response's or request's id (Glimpse)
//! ```
//!
//! Each input byte is scanned once: a partial line is copied and remembered,
//! never rescanned, so a long line arriving in small pieces costs linear time.
//! Lines are trimmed of one trailing `\r` (CRLF is tolerated); blank lines are
//! skipped. A line that is not UTF-8 or not JSON is a [`Malformed`] frame and
//! decoding goes on: a server that logs to stdout does not kill the connection.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;

use super::glimpse::{Glimpse, Peek};
use super::preview;

/// Default bound on one line: 16 MiB.
///
/// MCP tool results carry images and embedded resources as base64 inside a
/// single line, so several MiB are legitimate; 16 MiB is four times the size
/// the TypeScript SDK's default body limit allows, and small enough that a
/// hostile server cannot make us hold more than that per connection.
pub const DEFAULT_MAX_LINE_LEN: usize = 16 * 1024 * 1024;

/// How many bytes of an offending line an error message quotes.
pub const PREVIEW_LEN: usize = 120;

/// Decoder configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonlConfig {
    /// Longest accepted line in bytes, excluding the line ending.
    pub max_line_len: usize,
}

impl Default for JsonlConfig {
    fn default() -> Self {
        JsonlConfig {
            max_line_len: DEFAULT_MAX_LINE_LEN,
        }
    }
}

/// A framing problem. Decoding continues after each one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonlError {
    /// A line exceeded the limit. Its bytes up to the next `\n` were
    /// skipped without being buffered; reported when that `\n` (or the end
    /// of the stream) came.
    #[error("a line of {seen} bytes exceeds the limit of {limit} bytes (max_line_len); skipped")]
    LineTooLong {
        /// The configured `max_line_len`.
        limit: usize,
        /// The line's length (up to the end of the stream if it had no `\n`).
        seen: usize,
        /// What the line's first and last bytes show: the id of the
        /// response or request it was, when they show it.
        glimpse: Glimpse,
    },
    /// The stream ended in the middle of a line (no final `\n`).
    #[error("stream ended inside a line of {len} bytes without a newline: {preview}")]
    TruncatedAtEof {
        /// Length of the unterminated line.
        len: usize,
        /// Its start, printable.
        preview: String,
    },
}

/// A line that is not a JSON message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed line ({reason}): {preview}")]
pub struct Malformed {
    /// Why it was rejected (`invalid UTF-8 …` or the JSON parser's message).
    pub reason: String,
    /// The start of the line, printable.
    pub preview: String,
}

impl Malformed {
    fn new(reason: impl Into<String>, line: &[u8]) -> Self {
        Malformed {
            reason: reason.into(),
            preview: preview(line, PREVIEW_LEN),
        }
    }
}

/// The largest buffer kept for the next partial line (a larger one is
/// given away with its line, or dropped).
const REUSED_CAPACITY: usize = 64 * 1024;

/// One complete line, without its line ending.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// Borrowed from the chunk fed, or from the decoder's buffer.
    Borrowed(&'a [u8]),
    /// A large line assembled from pieces: its buffer, the reader's to
    /// keep.
    Owned(Vec<u8>),
}

impl Line<'_> {
    /// The line's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Line::Borrowed(b) => b,
            Line::Owned(v) => v,
        }
    }
}

/// Incremental JSONL decoder. See the [module docs](self).
#[derive(Debug, Default)]
pub struct JsonlDecoder {
    config: JsonlConfig,
    /// The start of a line whose `\n` has not arrived yet.
    partial: Vec<u8>,
    /// True while skipping the rest of an over-long line.
    discarding: bool,
    /// The ends and length of the over-long line being skipped.
    peek: Peek,
    /// The length of the last line given away ([`Line::Owned`]): the
    /// room a line that outgrows the reused buffer gets at once (see
    /// [`JsonlDecoder::hold`]).
    last_large: usize,
}

impl JsonlDecoder {
    /// A decoder with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with the given limits.
    pub fn with_config(config: JsonlConfig) -> Self {
        JsonlDecoder {
            config,
            ..Self::default()
        }
    }

    /// The limits in force.
    pub fn config(&self) -> JsonlConfig {
        self.config
    }

    /// Bytes held for an incomplete line (never more than `max_line_len`).
    pub fn buffered(&self) -> usize {
        self.partial.len()
    }

    /// Feeds a chunk; calls `on` with every line it completes (without its
    /// line ending, blank lines skipped) or framing error, in stream order.
    ///
    /// Lines that lie wholly inside `input` are passed borrowed from it.
    pub fn feed(&mut self, input: &[u8], mut on: impl FnMut(Result<&[u8], JsonlError>)) {
        self.feed_lines(input, |line| match line {
            Ok(line) => on(Ok(line.bytes())),
            Err(e) => on(Err(e)),
        });
    }

    /// [`feed`](Self::feed), giving away the buffer of a line that was
    /// assembled from pieces and is too large to be kept for the next one
    /// ([`Line::Owned`]): its reader may keep it (a large answer is then
    /// held once, not copied out of the line).
    pub fn feed_lines(
        &mut self,
        mut input: &[u8],
        mut on: impl FnMut(Result<Line<'_>, JsonlError>),
    ) {
        let limit = self.config.max_line_len;
        while !input.is_empty() {
            let newline = memchr::memchr(b'\n', input);
            if self.discarding {
                match newline {
                    None => {
                        self.peek.push(input);
                        return;
                    }
                    Some(i) => {
                        self.peek.push(&input[..i]);
                        input = &input[i + 1..];
                        on(Err(self.skipped()));
                        continue;
                    }
                }
            }
            match newline {
                Some(i) => {
                    let piece = &input[..i];
                    input = &input[i + 1..];
                    if self.partial.is_empty() {
                        deliver(piece, limit, &mut |l| on(l.map(Line::Borrowed)));
                    } else if self.partial.len() + piece.len() > limit + 1 {
                        // +1: a trailing '\r' is not part of the line.
                        self.peek.push(&self.partial);
                        self.peek.push(piece);
                        self.partial.clear();
                        self.discarding = true;
                        on(Err(self.skipped()));
                    } else {
                        self.hold(piece.len());
                        let mut line = std::mem::take(&mut self.partial);
                        line.extend_from_slice(piece);
                        // Keep the allocation for the next partial line, but
                        // don't hold on to a huge one: give that one away.
                        if line.capacity() <= REUSED_CAPACITY {
                            deliver(&line, limit, &mut |l| on(l.map(Line::Borrowed)));
                            line.clear();
                            self.partial = line;
                        } else {
                            let mut taken = None;
                            deliver(&line, limit, &mut |l| match l {
                                Ok(l) => taken = Some(l.len()),
                                Err(e) => on(Err(e)),
                            });
                            if let Some(len) = taken {
                                line.truncate(len);
                                self.last_large = len;
                                on(Ok(Line::Owned(line)));
                            }
                        }
                    }
                }
                None => {
                    let total = self.partial.len() + input.len();
                    if total > limit + 1 {
                        self.peek.push(&self.partial);
                        self.peek.push(input);
                        self.partial = Vec::new();
                        self.discarding = true;
                    } else {
                        self.hold(input.len());
                        self.partial.extend_from_slice(input);
                    }
                    return;
                }
            }
        }
    }

    /// Feeds a chunk and parses each line as JSON into `T`, calling `on` for
    /// each message, malformed line or framing error.
    pub fn feed_json<T: DeserializeOwned>(&mut self, input: &[u8], mut on: impl FnMut(Frame<T>)) {
        self.feed(input, |line| {
            on(match line {
                Ok(line) => match parse_line(line) {
                    Ok(v) => Frame::Message(v),
                    Err(m) => Frame::Malformed(m),
                },
                Err(e) => Frame::Error(e),
            })
        });
    }

    /// Makes room for `more` bytes of the partial line. A line that
    /// outgrows the reused buffer is probably as large as the last large
    /// one (a tool that answers with 1 MiB tends to do it again): it gets
    /// that much room (and a sixteenth more) at once, instead of doubling
    /// its buffer step by step, where each step copies what came so far
    /// and holds both copies for a moment. Never more than the limit.
    fn hold(&mut self, more: usize) {
        let need = self.partial.len() + more;
        if need <= self.partial.capacity() || need <= REUSED_CAPACITY {
            return;
        }
        let room = self.last_large.saturating_add(self.last_large / 16);
        let room = room.min(self.config.max_line_len.saturating_add(2));
        if room > need {
            self.partial.reserve_exact(room - self.partial.len());
        }
    }

    /// The end of the over-long line being skipped: the report.
    fn skipped(&mut self) -> JsonlError {
        self.discarding = false;
        too_long(&mut self.peek, self.config.max_line_len)
    }

    /// The stream ended. Reports an unterminated final line, if any (or
    /// the over-long line being skipped), and resets the decoder.
    pub fn finish(&mut self) -> Option<JsonlError> {
        if self.discarding {
            return Some(self.skipped());
        }
        if self.partial.is_empty() {
            return None;
        }
        let line = std::mem::take(&mut self.partial);
        let trimmed = trim_cr(&line);
        if trimmed.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(JsonlError::TruncatedAtEof {
            len: line.len(),
            preview: preview(&line, PREVIEW_LEN),
        })
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    match line.split_last() {
        Some((b'\r', rest)) => rest,
        _ => line,
    }
}

/// The report on an over-long line whose bytes went through `peek`.
fn too_long(peek: &mut Peek, limit: usize) -> JsonlError {
    // A '\r' before the '\n' is not part of the line.
    let cr = usize::from(peek.last_byte() == Some(b'\r'));
    let (glimpse, seen) = peek.take();
    JsonlError::LineTooLong {
        limit,
        seen: seen - cr,
        glimpse,
    }
}

fn deliver(raw: &[u8], limit: usize, on: &mut impl FnMut(Result<&[u8], JsonlError>)) {
    let line = trim_cr(raw);
    if line.len() > limit {
        // As if it had come in pieces: the same report whatever the split.
        let mut peek = Peek::default();
        peek.push(raw);
        on(Err(too_long(&mut peek, limit)));
        return;
    }
    // Blank lines are skipped. The first byte of a real message is `{` or
    // `[`, so this check stops at once on every line that matters.
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    on(Ok(line));
}

/// One decoded item of [`JsonlDecoder::feed_json`].
#[derive(Debug)]
pub enum Frame<T> {
    /// A line that parsed as `T`.
    Message(T),
    /// A line that is not UTF-8 or not valid JSON for `T`.
    Malformed(Malformed),
    /// A framing problem (over-long line).
    Error(JsonlError),
}

/// Parses one line as JSON into `T`, checking UTF-8 first so that the error
/// says which of the two went wrong.
pub fn parse_line<T: DeserializeOwned>(line: &[u8]) -> Result<T, Malformed> {
    let text = std::str::from_utf8(line)
        .map_err(|e| Malformed::new(format!("invalid UTF-8 at byte {}", e.valid_up_to()), line))?;
    serde_json::from_str(text).map_err(|e| Malformed::new(format!("not JSON: {e}"), line))
}

/// Parses one line into raw JSON, validated but not interpreted.
pub fn parse_raw(line: &[u8]) -> Result<Box<RawValue>, Malformed> {
    parse_line(line)
}

/// Appends `message` as compact JSON plus `\n` to `out`.
///
/// The written line never contains a `\n` before its end: serde_json escapes
/// newlines inside strings, and whitespace that a [`RawValue`] may carry
/// between tokens is replaced by spaces.
pub fn encode<T: Serialize + ?Sized>(message: &T, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let start = out.len();
    serde_json::to_writer(&mut *out, message)?;
    end_line(out, start);
    Ok(())
}

/// Appends an already serialized JSON text plus `\n` to `out`, with the same
/// guarantee as [`encode`]. The caller vouches that `json` is one valid JSON
/// value (raw CR/LF can then only be whitespace between tokens).
pub fn encode_raw(json: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(json);
    end_line(out, start);
}

/// Turns one serialized JSON text in `message` into a line in place: raw
/// CR/LF (whitespace between tokens) become spaces and `\n` is appended.
/// The caller vouches that `message` is one valid JSON value.
pub fn end_line_in_place(message: &mut Vec<u8>) {
    end_line(message, 0);
}

fn end_line(out: &mut Vec<u8>, start: usize) {
    // In valid JSON a raw CR or LF can only be insignificant whitespace
    // (inside strings they must be escaped), so replacing it is lossless.
    let written = &mut out[start..];
    if memchr::memchr2(b'\n', b'\r', written).is_some() {
        for b in written.iter_mut() {
            if *b == b'\n' || *b == b'\r' {
                *b = b' ';
            }
        }
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(dec: &mut JsonlDecoder, input: &[u8]) -> Vec<Result<Vec<u8>, JsonlError>> {
        let mut out = Vec::new();
        dec.feed(input, |l| out.push(l.map(<[u8]>::to_vec)));
        out
    }

    /// A line assembled from pieces is borrowed while its buffer is small
    /// enough to keep, and given away (CR trimmed) when it is not.
    #[test]
    fn a_large_assembled_line_is_given_away() {
        let mut dec = JsonlDecoder::new();
        let big = format!("[\"{}\"]", "x".repeat(2 * REUSED_CAPACITY));
        let mut got = Vec::new();
        let mut take = |dec: &mut JsonlDecoder, input: &[u8]| {
            dec.feed_lines(input, |l| {
                got.push(match l.unwrap() {
                    Line::Borrowed(b) => (false, b.to_vec()),
                    Line::Owned(v) => (true, v),
                })
            })
        };
        take(&mut dec, b"[1,");
        take(&mut dec, b"2]\n");
        let (head, tail) = big.as_bytes().split_at(1000);
        take(&mut dec, head);
        take(&mut dec, tail);
        take(&mut dec, b"\r\n[3]\n");
        assert_eq!(
            got,
            vec![
                (false, b"[1,2]".to_vec()),
                (true, big.clone().into_bytes()),
                (false, b"[3]".to_vec()),
            ]
        );
        // The same lines through `feed`.
        let mut dec = JsonlDecoder::new();
        let input = format!("{big}\r\n");
        let (a, b) = input.as_bytes().split_at(7);
        assert_eq!(lines(&mut dec, a), vec![]);
        assert_eq!(lines(&mut dec, b), vec![Ok(big.into_bytes())]);
    }

    /// A large line after a large one gets the last one's room (and a
    /// sixteenth) at once, not a buffer doubled step by step; a longer one
    /// still grows past it, and the room never exceeds the limit.
    #[test]
    fn a_large_line_gets_the_last_large_lines_room_at_once() {
        let owned = |dec: &mut JsonlDecoder, line: &[u8], piece: usize| {
            let mut got = Vec::new();
            for chunk in line.chunks(piece).chain([&b"\n"[..]]) {
                dec.feed_lines(chunk, |l| {
                    if let Ok(Line::Owned(v)) = l {
                        got.push(v)
                    }
                });
            }
            assert_eq!(got.len(), 1);
            got.pop().unwrap_or_default()
        };
        let line = |n: usize| format!("[\"{}\"]", "y".repeat(n)).into_bytes();
        let mut dec = JsonlDecoder::new();
        let first = line(300_000);
        let len = first.len();
        assert_eq!(owned(&mut dec, &first, 10_000), first);
        // The same size again: one buffer of the room, never regrown.
        let again = owned(&mut dec, &first, 10_000);
        assert_eq!(again, first);
        assert_eq!(again.capacity(), len + len / 16);
        // Longer than the room: still whole.
        let longer = line(400_000);
        assert_eq!(owned(&mut dec, &longer, 10_000), longer);
        // The room is the last large line's, not the largest's.
        let next = owned(&mut dec, &first, 10_000);
        assert!(next.capacity() >= longer.len() && next == first);
        let after = owned(&mut dec, &first, 10_000);
        assert_eq!(after.capacity(), len + len / 16);

        // Never more room than the limit allows.
        let mut dec = JsonlDecoder::with_config(JsonlConfig {
            max_line_len: len + 10,
        });
        assert_eq!(owned(&mut dec, &first, 10_000), first);
        let capped = owned(&mut dec, &first, 10_000);
        assert_eq!(capped, first);
        assert_eq!(capped.capacity(), len + 12);
    }

    #[test]
    fn whole_lines_are_borrowed_and_crlf_trimmed() {
        let mut dec = JsonlDecoder::new();
        let got = lines(&mut dec, b"{\"a\":1}\r\n\n  \r\n[2]\n");
        assert_eq!(got, vec![Ok(b"{\"a\":1}".to_vec()), Ok(b"[2]".to_vec())]);
        assert_eq!(dec.buffered(), 0);
    }

    #[test]
    fn over_long_partial_line_is_not_buffered() {
        let mut dec = JsonlDecoder::with_config(JsonlConfig { max_line_len: 8 });
        let mut got = lines(&mut dec, b"0123456");
        assert!(got.is_empty());
        got = lines(&mut dec, b"789abcdef");
        assert!(got.is_empty());
        assert_eq!(dec.buffered(), 0);
        got = lines(&mut dec, &[b'x'; 1000]);
        assert!(got.is_empty());
        assert_eq!(dec.buffered(), 0);
        // Reported when the line ends, with its whole length.
        got = lines(&mut dec, b"zz\n{}\n");
        assert_eq!(
            got,
            vec![
                Err(JsonlError::LineTooLong {
                    limit: 8,
                    seen: 1018,
                    glimpse: Glimpse::default()
                }),
                Ok(b"{}".to_vec())
            ]
        );
    }

    #[test]
    fn an_over_long_response_names_its_id() {
        let mut dec = JsonlDecoder::with_config(JsonlConfig { max_line_len: 64 });
        let ts = format!(
            "{{\"result\":{{\"text\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":3}}\r\n",
            "a".repeat(20_000)
        );
        let py = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{\"text\":\"{}\"}}}}",
            "b".repeat(300)
        );
        let mut ids = Vec::new();
        for (i, piece) in ts.as_bytes().chunks(1000).enumerate() {
            for got in lines(&mut dec, piece) {
                match got {
                    Err(JsonlError::LineTooLong { seen, glimpse, .. }) => {
                        assert_eq!(i, ts.len() / 1000, "reported at the line's end");
                        assert_eq!(seen, ts.len() - 2, "without the CRLF");
                        ids.push(glimpse.response_id().map(str::to_owned));
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        // Whole in one chunk, then cut by the end of the stream.
        for got in lines(&mut dec, format!("{py}\n{py}").as_bytes()) {
            match got {
                Err(JsonlError::LineTooLong { glimpse, .. }) => {
                    ids.push(glimpse.response_id().map(str::to_owned))
                }
                other => panic!("{other:?}"),
            }
        }
        match dec.finish() {
            Some(JsonlError::LineTooLong { seen, glimpse, .. }) => {
                assert_eq!(seen, py.len());
                ids.push(glimpse.response_id().map(str::to_owned));
            }
            other => panic!("{other:?}"),
        }
        let n = |n: &str| Some(n.to_owned());
        assert_eq!(ids, vec![n("3"), n("4"), n("4")]);
        assert_eq!(dec.finish(), None);
    }

    #[test]
    fn line_of_exactly_the_limit_passes_with_crlf() {
        let mut dec = JsonlDecoder::with_config(JsonlConfig { max_line_len: 4 });
        let got = lines(&mut dec, b"[12]\r\n[123]\n");
        assert_eq!(got[0], Ok(b"[12]".to_vec()));
        assert!(matches!(
            got[1],
            Err(JsonlError::LineTooLong { limit: 4, .. })
        ));
        // Split so that the '\r' arrives in the partial buffer.
        let mut got = lines(&mut dec, b"[12]\r");
        got.extend(lines(&mut dec, b"\n"));
        assert_eq!(got, vec![Ok(b"[12]".to_vec())]);
    }

    #[test]
    fn eof_inside_a_line_is_reported() {
        let mut dec = JsonlDecoder::new();
        assert!(lines(&mut dec, b"{\"jsonrpc\":").is_empty());
        match dec.finish() {
            Some(JsonlError::TruncatedAtEof { len, preview }) => {
                assert_eq!(len, 11);
                assert_eq!(preview, "{\"jsonrpc\":");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(dec.finish(), None);
    }

    #[test]
    fn malformed_lines_do_not_stop_decoding() {
        let mut dec = JsonlDecoder::new();
        let mut got = Vec::new();
        dec.feed_json::<serde_json::Value>(b"npm WARN something\n\xff\xfe\n{\"ok\":true}\n", |f| {
            got.push(f)
        });
        assert_eq!(got.len(), 3);
        match &got[0] {
            Frame::Malformed(m) => {
                assert!(m.reason.starts_with("not JSON"), "{m}");
                assert_eq!(m.preview, "npm WARN something");
            }
            f => panic!("{f:?}"),
        }
        match &got[1] {
            Frame::Malformed(m) => assert_eq!(m.reason, "invalid UTF-8 at byte 0"),
            f => panic!("{f:?}"),
        }
        assert!(matches!(&got[2], Frame::Message(v) if v["ok"] == true));
    }

    #[test]
    fn encoder_never_embeds_newlines() {
        let raw =
            RawValue::from_string("{\n  \"a\": \"x\\ny\",\r\n  \"b\": [1,\n2]\n}".into()).unwrap();
        let mut out = Vec::new();
        encode(&raw, &mut out).unwrap();
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(out.last(), Some(&b'\n'));
        let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(back, serde_json::json!({"a": "x\ny", "b": [1, 2]}));

        let mut out = Vec::new();
        encode(&serde_json::json!({"m": "line1\nline2\r"}), &mut out).unwrap();
        assert_eq!(out, b"{\"m\":\"line1\\nline2\\r\"}\n");
    }
}
