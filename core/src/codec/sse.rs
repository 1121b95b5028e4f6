//! Incremental, bounded decoder for WHATWG `text/event-stream` (server-sent
//! events), as used by both MCP HTTP transports.
//!
//! ```text
//!   bytes ──feed()──▶ [BOM strip] ─▶ [split lines: CR | LF | CRLF] ─▶ [fields] ─▶ SseItem
//!                                                                    blank line = dispatch
//! ```
//!
//! The decoder follows "Interpreting an event stream" of the WHATWG HTML
//! standard exactly, including its corner cases:
//!
//! - one leading UTF-8 BOM is stripped at stream start (only the first, also
//!   when split across chunks); the stream is decoded as UTF-8 with
//!   replacement characters for invalid sequences;
//! - CR, LF and CRLF end lines, also when the CR and the LF arrive in
//!   different chunks;
//! - lines starting with `:` are comments; a line without a colon is a field
//!   name with an empty value; one space after the colon is stripped;
//! - `data` appends its value and a LF to the data buffer, `event` sets the
//!   event type, `id` sets the last event id unless it contains NUL (an empty
//!   value resets it), `retry` sets the reconnection time if its value is all
//!   ASCII digits; other fields are ignored;
//! - a blank line commits the last event id and dispatches an event, unless
//!   the data buffer is empty, in which case nothing is dispatched. Note that
//!   `data:` with an empty value makes the buffer `"\n"`, which is *not* empty:
//!   the MCP "priming" event `id: 1\ndata:\n\n` (or `data: \n\n`) therefore
//!   dispatches an event with empty `data` and `id` `"1"`. Skipping such
//!   events is the transport's decision, not the codec's;
//! - at end of stream ([`SseDecoder::finish`]) an incomplete event is
//!   discarded.
//!
//! Each chunk is processed completely when fed; only an incomplete line is
//! kept, and no byte is scanned twice. Memory is bounded by
//! [`SseConfig::max_event_size`]: see there for the exact rule.

use std::time::Duration;

use memchr::{memchr, memchr2};

use super::glimpse::{Glimpse, Peek};

/// `bytes` as UTF-8, invalid sequences replaced: checked by
/// `str::from_utf8` first, whose ASCII path is many times faster on a
/// long value (a result of a few MiB in one `data` line) than the
/// replacing decoder's, which is only run when there is something to
/// replace.
fn utf8(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The UTF-8 byte order mark, stripped once at stream start.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Limits of an [`SseDecoder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseConfig {
    /// Upper bound, in bytes, on what one event may hold while it is being
    /// parsed: the data buffer, the event type and a not yet committed `id`
    /// (all counted after UTF-8 decoding) plus the raw bytes of the current
    /// line. Exceeding it yields [`SseError::EventTooLarge`] once; the rest of
    /// that event (every line up to the next blank line) is then skipped
    /// without being buffered, and the following event parses normally.
    ///
    /// Consequently every dispatched event has
    /// `event.len() + data.len() <= max_event_size` (where the default type
    /// `"message"`, which is not buffered, counts as 0), and the decoder never
    /// buffers more than about twice this value (the event in progress plus
    /// the retained last event id, itself bounded by the limit).
    ///
    /// Default: [`SseConfig::DEFAULT_MAX_EVENT_SIZE`] (8 MiB). MCP tool
    /// results routinely carry base64 images of a few MiB in one event, so
    /// the default leaves room for them.
    pub max_event_size: usize,
}

impl SseConfig {
    /// The default for [`SseConfig::max_event_size`]: 8 MiB.
    pub const DEFAULT_MAX_EVENT_SIZE: usize = 8 * 1024 * 1024;
}

impl Default for SseConfig {
    fn default() -> Self {
        SseConfig {
            max_event_size: Self::DEFAULT_MAX_EVENT_SIZE,
        }
    }
}

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event type: the last `event` field of the event, or `"message"`
    /// when there was none (or it was empty).
    pub event: String,
    /// The `data` lines joined with `\n` (without a trailing `\n`).
    pub data: String,
    /// The last event id at dispatch time. It persists across events until an
    /// `id` field changes it, and is empty if none was ever set (or it was
    /// reset by an empty `id`).
    pub id: String,
}

/// What [`SseDecoder::feed`] produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A complete event, dispatched by a blank line.
    Event(SseEvent),
    /// The peer misbehaved; the decoder has already recovered and keeps
    /// going.
    Error(SseError),
    /// The blank line ending an event dropped for its size (after its
    /// [`SseError::EventTooLarge`]): what the first and last bytes of its
    /// data showed (the id of the response it was, when they show it).
    Skipped {
        /// Bytes of the event's data (and of the lines after the overflow)
        /// that went by.
        size: usize,
        /// What its data's ends show.
        glimpse: Glimpse,
    },
}

/// A peer error detected while decoding an event stream.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseError {
    /// An event (or one of its lines) exceeded
    /// [`SseConfig::max_event_size`]; the event was dropped. Lines up to the
    /// next blank line are skipped; `retry` and `id` fields that came before
    /// the overflow keep their effect (the `id` is committed at that blank
    /// line, so a resumption does not replay the dropped event).
    #[error("SSE event exceeds the limit of {limit} bytes; event dropped")]
    EventTooLarge {
        /// The configured limit, in bytes.
        limit: usize,
    },
}

/// How a stream ended, as reported by [`SseDecoder::finish`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseEnd {
    /// The stream ended between events: nothing was lost.
    Clean,
    /// The stream ended inside an event (a partial line, fields without the
    /// final blank line, or an event being skipped after
    /// [`SseError::EventTooLarge`]); per the standard it was discarded.
    IncompleteEvent,
}

/// Incremental decoder for one `text/event-stream` (see the
/// [module docs](self)).
///
/// Feed it chunks with [`feed`](Self::feed) as they arrive, then call
/// [`finish`](Self::finish) at end of stream. After `finish` the decoder is
/// ready for a new stream (e.g. after a reconnect): it keeps
/// [`last_event_id`](Self::last_event_id) and [`retry`](Self::retry) and
/// expects a BOM again.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    limit: usize,
    /// `Some(n)`: at stream start, `n` bytes of a BOM matched so far.
    bom: Option<u8>,
    /// The previous line ended with CR: a LF right after it is skipped.
    skip_lf: bool,
    /// Raw bytes of the current, unterminated line.
    line: Vec<u8>,
    /// Skipping the rest of an oversized event, up to the next blank line.
    discarding: bool,
    /// While discarding: the current line has bytes (so it is not blank).
    discard_line_nonempty: bool,
    /// While discarding: the ends of the skipped event's data.
    skip: SkippedData,
    data: String,
    event: String,
    /// An `id` seen in the current event, committed at the blank line.
    pending_id: Option<String>,
    last_event_id: String,
    retry: Option<Duration>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default [`SseConfig`].
    pub fn new() -> Self {
        Self::with_config(SseConfig::default())
    }

    /// A decoder with the given limits.
    pub fn with_config(config: SseConfig) -> Self {
        SseDecoder {
            limit: config.max_event_size,
            bom: Some(0),
            skip_lf: false,
            line: Vec::new(),
            discarding: false,
            discard_line_nonempty: false,
            skip: SkippedData::default(),
            data: String::new(),
            event: String::new(),
            pending_id: None,
            last_event_id: String::new(),
            retry: None,
        }
    }

    /// The last event id committed by a blank line, to send as
    /// `Last-Event-ID` when resuming. Empty if none.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The reconnection time from the last valid `retry` field, if any. It
    /// takes effect as soon as the `retry` line is complete (as in the
    /// standard), even if its event is never dispatched.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Feeds a chunk of the stream; calls `on` for every item completed by
    /// it, in stream order. Any split of the stream into chunks yields the
    /// same items.
    pub fn feed(&mut self, input: &[u8], mut on: impl FnMut(SseItem)) {
        let mut input = input;
        if let Some(matched) = self.bom {
            let mut n = usize::from(matched);
            let mut i = 0;
            while n < BOM.len() && i < input.len() && input[i] == BOM[n] {
                n += 1;
                i += 1;
            }
            input = &input[i..];
            if n == BOM.len() {
                self.bom = None;
            } else if input.is_empty() {
                // Still a possible BOM prefix (n < 3, so it fits in u8).
                self.bom = Some(n as u8);
                return;
            } else {
                // Not a BOM: the bytes held so far start the first line.
                self.bom = None;
                self.partial(&BOM[..n], &mut on);
            }
        }
        while !input.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if input[0] == b'\n' {
                    input = &input[1..];
                    continue;
                }
            }
            match memchr2(b'\r', b'\n', input) {
                Some(i) => {
                    self.skip_lf = input[i] == b'\r';
                    self.end_line(&input[..i], &mut on);
                    input = &input[i + 1..];
                }
                None => {
                    self.partial(input, &mut on);
                    break;
                }
            }
        }
    }

    /// Ends the stream: discards an incomplete event (as the standard
    /// requires) and reports whether there was one. An `id` of the discarded
    /// event is not committed. The decoder is then ready for a new stream,
    /// keeping [`last_event_id`](Self::last_event_id) and
    /// [`retry`](Self::retry).
    pub fn finish(&mut self) -> SseEnd {
        let incomplete = self.discarding
            || !self.line.is_empty()
            || self.bom.is_some_and(|n| n > 0)
            || !self.data.is_empty()
            || !self.event.is_empty()
            || self.pending_id.is_some();
        self.bom = Some(0);
        self.skip_lf = false;
        self.line.clear();
        self.discarding = false;
        self.discard_line_nonempty = false;
        self.skip = SkippedData::default();
        self.data.clear();
        self.event.clear();
        self.pending_id = None;
        if incomplete {
            SseEnd::IncompleteEvent
        } else {
            SseEnd::Clean
        }
    }

    /// Decoded bytes the event in progress holds (the current line aside).
    fn held(&self) -> usize {
        self.data.len() + self.event.len() + self.pending_id.as_ref().map_or(0, String::len)
    }

    /// Buffers `bytes` (free of CR and LF) as part of the current line.
    fn partial(&mut self, bytes: &[u8], on: &mut impl FnMut(SseItem)) {
        if bytes.is_empty() {
            return;
        }
        if self.discarding {
            self.discard_line_nonempty = true;
            self.skip.line_bytes(bytes);
            return;
        }
        let needed = self.line.len() + bytes.len();
        if needed + self.held() > self.limit {
            self.overflow(true, bytes, on);
            return;
        }
        if needed > self.line.capacity() {
            // Grow geometrically, but never past the limit.
            let cap = needed.max(self.line.capacity() * 2).min(self.limit);
            self.line.reserve_exact(cap - self.line.len());
        }
        self.line.extend_from_slice(bytes);
    }

    /// A line terminator was found; `tail` is the part of the line in the
    /// current chunk.
    fn end_line(&mut self, tail: &[u8], on: &mut impl FnMut(SseItem)) {
        if self.discarding {
            let blank = tail.is_empty() && !self.discard_line_nonempty;
            self.discard_line_nonempty = false;
            if blank {
                // The end of the skipped event: commit its id (as a dispatch
                // would) so that a resumption does not replay it.
                self.discarding = false;
                if let Some(id) = self.pending_id.take() {
                    self.last_event_id = id;
                }
                let (glimpse, size) = self.skip.take();
                on(SseItem::Skipped { size, glimpse });
            } else {
                self.skip.line_bytes(tail);
                self.skip.end_line();
            }
            return;
        }
        if self.line.is_empty() {
            self.process_line(tail, on);
        } else if self.line.len() + tail.len() + self.held() > self.limit {
            self.overflow(false, tail, on);
        } else {
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(tail);
            self.process_line(&line, on);
            line.clear();
            self.line = line;
        }
    }

    /// Reports an oversized event and starts skipping the rest of it.
    /// `mid_line`: the current line is not yet terminated; the line so far
    /// is `self.line` followed by `more`.
    fn overflow(&mut self, mid_line: bool, more: &[u8], on: &mut impl FnMut(SseItem)) {
        on(SseItem::Error(SseError::EventTooLarge {
            limit: self.limit,
        }));
        // Keep the ends of the data for the report at the event's end:
        // what came before, then the value of the line that overflowed.
        self.skip.peek.push(self.data.as_bytes());
        let line = std::mem::take(&mut self.line);
        self.skip.line_bytes(&line);
        self.skip.line_bytes(more);
        if !mid_line {
            self.skip.end_line();
        }
        self.discarding = true;
        self.discard_line_nonempty = mid_line;
        self.data = String::new();
        self.event = String::new();
    }

    /// Interprets one complete line (without its terminator).
    fn process_line(&mut self, line: &[u8], on: &mut impl FnMut(SseItem)) {
        if line.is_empty() {
            self.dispatch(on);
            return;
        }
        if line.len() + self.held() > self.limit {
            self.overflow(false, line, on);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match memchr(b':', line) {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                let value = utf8(value);
                if self.held() + value.len() + 1 > self.limit {
                    self.overflow(false, line, on);
                    return;
                }
                let needed = self.data.len() + value.len() + 1;
                if needed > self.data.capacity() {
                    let cap = needed.max(self.data.capacity() * 2).min(self.limit);
                    self.data.reserve_exact(cap - self.data.len());
                }
                self.data.push_str(&value);
                self.data.push('\n');
            }
            b"event" => {
                let value = utf8(value);
                if self.held() - self.event.len() + value.len() > self.limit {
                    self.overflow(false, line, on);
                    return;
                }
                self.event.clear();
                self.event.push_str(&value);
            }
            b"id" => {
                if memchr(0, value).is_some() {
                    return;
                }
                let value = utf8(value);
                let pending = self.pending_id.as_ref().map_or(0, String::len);
                if self.held() - pending + value.len() > self.limit {
                    self.overflow(false, line, on);
                    return;
                }
                self.pending_id = Some(value.into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = value.iter().fold(0u64, |ms, d| {
                    ms.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                self.retry = Some(Duration::from_millis(ms));
            }
            _ => {}
        }
    }

    /// A blank line: commit the id, dispatch the event if it has data.
    fn dispatch(&mut self, on: &mut impl FnMut(SseItem)) {
        if let Some(id) = self.pending_id.take() {
            self.last_event_id = id;
        }
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the LF appended after the last `data` line
        let event = if self.event.is_empty() {
            String::from("message")
        } else {
            std::mem::take(&mut self.event)
        };
        on(SseItem::Event(SseEvent {
            event,
            data,
            id: self.last_event_id.clone(),
        }));
    }
}

/// The data of an event being skipped for its size, as far as its ends go:
/// every `data` line's value followed by LF, the same whatever the split.
#[derive(Debug, Default, Clone)]
struct SkippedData {
    peek: Peek,
    /// The current line's first bytes while undecided (at most 6).
    start: Vec<u8>,
    /// Whether the current line is a `data` line, once known.
    is_data: Option<bool>,
}

impl SkippedData {
    /// More bytes of the current line.
    fn line_bytes(&mut self, bytes: &[u8]) {
        match self.is_data {
            Some(true) => self.peek.push(bytes),
            Some(false) => {}
            None => {
                let take = (6 - self.start.len()).min(bytes.len());
                self.start.extend_from_slice(&bytes[..take]);
                if self.start.len() == 6 {
                    self.decide();
                    if self.is_data == Some(true) {
                        self.peek.push(&bytes[take..]);
                    }
                }
            }
        }
    }

    /// Decides on the start seen: six bytes, or the whole line.
    fn decide(&mut self) {
        let start = std::mem::take(&mut self.start);
        let value = match start.strip_prefix(b"data:") {
            Some(v) => Some(v.strip_prefix(b" ").unwrap_or(v)),
            None => (start == b"data").then_some(&[][..]),
        };
        if let Some(v) = value {
            self.peek.push(v);
        }
        self.is_data = Some(value.is_some());
    }

    /// The current line ended.
    fn end_line(&mut self) {
        if self.is_data.is_none() {
            self.decide();
        }
        if self.is_data == Some(true) {
            self.peek.push(b"\n");
        }
        self.is_data = None;
    }

    /// The report, and a reset for the next event.
    fn take(&mut self) -> (Glimpse, usize) {
        // The data's last LF is not part of it (as in a dispatch).
        let lf = usize::from(self.peek.last_byte() == Some(b'\n'));
        let (glimpse, size) = self.peek.take();
        self.start.clear();
        self.is_data = None;
        (glimpse, size - lf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &[u8], limit: usize) -> (Vec<SseItem>, SseEnd, SseDecoder) {
        let mut dec = SseDecoder::with_config(SseConfig {
            max_event_size: limit,
        });
        let mut items = Vec::new();
        dec.feed(input, |item| items.push(item));
        let end = dec.finish();
        (items, end, dec)
    }

    fn event(event: &str, data: &str, id: &str) -> SseItem {
        SseItem::Event(SseEvent {
            event: event.into(),
            data: data.into(),
            id: id.into(),
        })
    }

    #[test]
    fn simple_event() {
        let (items, end, dec) = decode(b"event: a\ndata: x\nid: 7\n\n", 1024);
        assert_eq!(items, vec![event("a", "x", "7")]);
        assert_eq!(end, SseEnd::Clean);
        assert_eq!(dec.last_event_id(), "7");
    }

    #[test]
    fn priming_event_is_dispatched_with_empty_data() {
        let (items, _, dec) = decode(b"id: p\ndata:\n\n", 1024);
        assert_eq!(items, vec![event("message", "", "p")]);
        assert_eq!(dec.last_event_id(), "p");
    }

    #[test]
    fn id_only_event_commits_id_without_dispatch() {
        let (items, end, dec) = decode(b"id: q\n\n", 1024);
        assert!(items.is_empty());
        assert_eq!(end, SseEnd::Clean);
        assert_eq!(dec.last_event_id(), "q");
    }

    #[test]
    fn limit_is_exact() {
        // "data: " + 4 bytes: the line is 10 bytes, the event holds 5.
        let (items, _, _) = decode(b"data: abcd\n\n", 10);
        assert_eq!(items, vec![event("message", "abcd", "")]);
        let (items, _, _) = decode(b"data: abcd\n\n", 9);
        assert_eq!(
            items,
            vec![
                SseItem::Error(SseError::EventTooLarge { limit: 9 }),
                SseItem::Skipped {
                    size: 4,
                    glimpse: Glimpse::default()
                }
            ]
        );
    }

    #[test]
    fn replacement_characters_count_against_the_limit() {
        // 4 invalid bytes become 4 × U+FFFD = 12 bytes (+1 LF) > 12.
        let (items, _, _) = decode(b"data:\xFF\xFF\xFF\xFF\n\n", 12);
        assert_eq!(
            items[0],
            SseItem::Error(SseError::EventTooLarge { limit: 12 })
        );
        assert!(matches!(items[1], SseItem::Skipped { .. }));
        let (items, _, _) = decode(b"data:\xFF\xFF\xFF\xFF\n\n", 13);
        assert_eq!(
            items,
            vec![event("message", "\u{FFFD}".repeat(4).as_str(), "")]
        );
    }

    #[test]
    fn retry_saturates() {
        let (_, _, dec) = decode(b"retry: 99999999999999999999999999\n", 1024);
        assert_eq!(dec.retry(), Some(Duration::from_millis(u64::MAX)));
        let (_, _, dec) = decode(b"retry:\n", 1024);
        assert_eq!(dec.retry(), None);
    }

    #[test]
    fn decoder_is_reusable_after_finish() {
        let mut dec = SseDecoder::new();
        let mut items = Vec::new();
        dec.feed(b"\xEF\xBB\xBFid: 1\ndata: a\n\ndata: partial", |i| {
            items.push(i)
        });
        assert_eq!(dec.finish(), SseEnd::IncompleteEvent);
        dec.feed(b"\xEF\xBB\xBFdata: b\n\n", |i| items.push(i));
        assert_eq!(dec.finish(), SseEnd::Clean);
        assert_eq!(
            items,
            vec![event("message", "a", "1"), event("message", "b", "1")]
        );
    }
}
