//! Vectors and properties for `codec::sse`: every vector is decoded whole,
//! split at every point into two chunks, and byte by byte, and must give the
//! same items, end state, last event id and retry each way.

use std::time::Duration;

use mcpwire::codec::glimpse::Glimpse;
use mcpwire::codec::sse::{SseConfig, SseDecoder, SseEnd, SseError, SseEvent, SseItem};
use proptest::prelude::*;

/// Everything observable after decoding a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    items: Vec<SseItem>,
    end: SseEnd,
    last_event_id: String,
    retry: Option<Duration>,
}

fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>, limit: usize) -> Outcome {
    let mut dec = SseDecoder::with_config(SseConfig {
        max_event_size: limit,
    });
    let mut items = Vec::new();
    for chunk in chunks {
        dec.feed(chunk, |item| items.push(item));
    }
    let end = dec.finish();
    Outcome {
        items,
        end,
        last_event_id: dec.last_event_id().to_owned(),
        retry: dec.retry(),
    }
}

/// Decodes `input` whole, split at every point, and byte by byte (with
/// empty chunks in between); asserts all agree and returns the outcome.
fn decode_all_ways(input: &[u8], limit: usize) -> Outcome {
    let whole = decode_chunks([input], limit);
    for at in 0..=input.len() {
        let (a, b) = input.split_at(at);
        assert_eq!(decode_chunks([a, b], limit), whole, "split at {at}");
    }
    let bytewise = decode_chunks(input.chunks(1).flat_map(|c| [c, &[][..]]), limit);
    assert_eq!(bytewise, whole, "byte by byte");
    whole
}

fn run(input: &[u8]) -> Outcome {
    decode_all_ways(input, SseConfig::default().max_event_size)
}

fn ev(event: &str, data: &str, id: &str) -> SseItem {
    SseItem::Event(SseEvent {
        event: event.into(),
        data: data.into(),
        id: id.into(),
    })
}

fn msg(data: &str) -> SseItem {
    ev("message", data, "")
}

/// The end of an event skipped for its size, whose data ends said nothing
/// (`size`: the bytes of its `data` values, joined by LF).
fn skipped(size: usize) -> SseItem {
    SseItem::Skipped {
        size,
        glimpse: Glimpse::default(),
    }
}

fn too_large(limit: usize) -> SseItem {
    SseItem::Error(SseError::EventTooLarge { limit })
}

// ---- WHATWG HTML, "Server-sent events" examples ----

#[test]
fn whatwg_stock_quote() {
    let out = run(b"data: YHOO\ndata: +2\ndata: 10\n\n");
    assert_eq!(out.items, vec![msg("YHOO\n+2\n10")]);
    assert_eq!(out.end, SseEnd::Clean);
}

#[test]
fn whatwg_four_blocks_with_ids() {
    let out = run(b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n");
    assert_eq!(
        out.items,
        vec![
            ev("message", "first event", "1"),
            ev("message", "second event", ""),
            ev("message", " third event", ""),
        ]
    );
    assert_eq!(out.last_event_id, "");
    assert_eq!(out.end, SseEnd::Clean);
}

#[test]
fn whatwg_last_event_id_after_first_block() {
    let out = run(b": test stream\n\ndata: first event\nid: 1\n\n");
    assert_eq!(out.last_event_id, "1");
}

#[test]
fn whatwg_data_without_colon_and_unterminated_block() {
    let out = run(b"data\n\ndata\ndata\n\ndata:");
    assert_eq!(out.items, vec![msg(""), msg("\n")]);
    assert_eq!(out.end, SseEnd::IncompleteEvent);
}

#[test]
fn whatwg_space_after_colon_is_optional() {
    let out = run(b"data:test\n\ndata: test\n\n");
    assert_eq!(out.items, vec![msg("test"), msg("test")]);
}

#[test]
fn whatwg_event_types() {
    let out = run(
        b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
    );
    assert_eq!(
        out.items,
        vec![
            ev("add", "73857293", ""),
            ev("remove", "2153", ""),
            ev("add", "113411", ""),
        ]
    );
}

#[test]
fn comments_only_dispatch_nothing() {
    let out = run(b": test stream\n:\n:another\n\n\n");
    assert_eq!(out.items, vec![]);
    assert_eq!(out.end, SseEnd::Clean);
}

// ---- line endings ----

#[test]
fn lf_cr_crlf_and_mixed_line_endings() {
    let expected = vec![ev("x", "a\nb", "1"), ev("message", "c", "1")];
    for input in [
        &b"event: x\nid: 1\ndata: a\ndata: b\n\ndata: c\n\n"[..],
        b"event: x\rid: 1\rdata: a\rdata: b\r\rdata: c\r\r",
        b"event: x\r\nid: 1\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n",
        b"event: x\rid: 1\r\ndata: a\ndata: b\r\n\rdata: c\n\r",
    ] {
        let out = run(input);
        assert_eq!(out.items, expected, "{:?}", String::from_utf8_lossy(input));
        assert_eq!(out.end, SseEnd::Clean);
    }
}

#[test]
fn cr_at_chunk_boundary_then_lf_is_one_line_end() {
    let out = decode_chunks([&b"data: a\r"[..], b"\ndata: b\r", b"\n\r", b"\n"], 1024);
    assert_eq!(out.items, vec![msg("a\nb")]);
    // And CR then CR across chunks is two line ends (a blank line).
    let out = decode_chunks([&b"data: a\r"[..], b"\r"], 1024);
    assert_eq!(out.items, vec![msg("a")]);
}

#[test]
fn lf_cr_is_two_line_ends() {
    let out = run(b"data: a\n\rdata: b\n\n");
    assert_eq!(out.items, vec![msg("a"), msg("b")]);
}

// ---- BOM ----

#[test]
fn leading_bom_is_stripped() {
    let out = run(b"\xEF\xBB\xBFdata: a\n\n");
    assert_eq!(out.items, vec![msg("a")]);
    let out = decode_chunks([&b"\xEF"[..], b"\xBB", b"\xBFdata: a\n\n"], 1024);
    assert_eq!(out.items, vec![msg("a")]);
}

#[test]
fn second_bom_is_not_stripped() {
    // The second BOM becomes part of the field name: an unknown field.
    let out = run(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n");
    assert_eq!(out.items, vec![msg("b")]);
    // A BOM inside data is kept.
    let out = run(b"\xEF\xBB\xBFdata:\xEF\xBB\xBFa\n\n");
    assert_eq!(out.items, vec![msg("\u{FEFF}a")]);
}

#[test]
fn bom_prefix_that_is_not_a_bom_is_content() {
    // EF BB followed by 'd': a replacement character, then "data...".
    let out = run(b"\xEF\xBBdata: a\n\ndata: b\n\n");
    assert_eq!(out.items, vec![msg("b")]);
    let out = run(b"\xEF\xBB\n\ndata: b\n\n");
    assert_eq!(out.items, vec![msg("b")]);
    let out = run(b"\xEF\xBB");
    assert_eq!(out.end, SseEnd::IncompleteEvent);
    let out = run(b"\xEF\xBB\xBF");
    assert_eq!(out.end, SseEnd::Clean);
}

// ---- fields ----

#[test]
fn field_without_colon_has_empty_value() {
    let out = run(b"event\ndata\nid\n\n");
    assert_eq!(out.items, vec![msg("")]);
    let out = run(b"id: 5\n\nid\n\n");
    assert_eq!(out.last_event_id, "");
}

#[test]
fn only_one_space_is_stripped_and_colons_in_values_are_kept() {
    let out = run(b"event:  spaced\ndata:a:b: c\ndata:\tx\n\n");
    assert_eq!(out.items, vec![ev(" spaced", "a:b: c\n\tx", "")]);
}

#[test]
fn unknown_fields_and_case_are_ignored() {
    let out = run(b"Data: no\nDATA: no\nfoo: bar\ndata : no\ndata: yes\n\n");
    assert_eq!(out.items, vec![msg("yes")]);
}

#[test]
fn id_with_nul_is_ignored() {
    let out = run(b"id: 1\n\nid: a\0b\ndata: x\n\n");
    assert_eq!(out.items, vec![ev("message", "x", "1")]);
    assert_eq!(out.last_event_id, "1");
}

#[test]
fn id_persists_across_events_and_empty_id_resets() {
    let out = run(b"id: 7\ndata: a\n\ndata: b\n\nid:\ndata: c\n\n");
    assert_eq!(
        out.items,
        vec![ev("message", "a", "7"), ev("message", "b", "7"), msg("c")]
    );
}

#[test]
fn last_id_in_event_wins_and_event_type_resets() {
    let out = run(b"id: 1\nevent: e\nid: 2\ndata: a\n\ndata: b\n\n");
    assert_eq!(out.items, vec![ev("e", "a", "2"), ev("message", "b", "2")]);
}

#[test]
fn retry_only_with_ascii_digits() {
    let out = run(b"retry: 1500\n\n");
    assert_eq!(out.retry, Some(Duration::from_millis(1500)));
    for bad in [
        &b"retry: 15x\n"[..],
        b"retry: -1\n",
        b"retry: 1.5\n",
        b"retry:  15\n",
        b"retry: 15 \n",
        b"retry: \xD9\xA1\n", // ARABIC-INDIC DIGIT ONE
        b"retry\n",
    ] {
        let out = run(&[&b"retry: 100\n"[..], bad, b"\n"].concat());
        assert_eq!(
            out.retry,
            Some(Duration::from_millis(100)),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // retry takes effect at once, even if its event is never completed.
    let out = run(b"data: x\nretry: 0\n");
    assert_eq!(out.retry, Some(Duration::ZERO));
    assert_eq!(out.items, vec![]);
}

#[test]
fn mcp_priming_event_dispatches_empty_data_and_sets_id() {
    for input in [
        &b"id: prime-1\ndata: \n\n"[..],
        b"id: prime-1\ndata:\n\n",
        b"id: prime-1\r\ndata: \r\n\r\n",
    ] {
        let out = run(input);
        // Per the standard the data buffer is "\n", so an event is dispatched;
        // the transport skips events with empty data.
        assert_eq!(out.items, vec![ev("message", "", "prime-1")]);
        assert_eq!(out.last_event_id, "prime-1");
    }
    // Without any data line nothing is dispatched, but the id is committed.
    let out = run(b"id: prime-2\n\n");
    assert_eq!(out.items, vec![]);
    assert_eq!(out.last_event_id, "prime-2");
    assert_eq!(out.end, SseEnd::Clean);
}

// ---- end of stream ----

#[test]
fn eof_discards_partial_event() {
    for input in [
        &b"data: a\n\ndata: b\n"[..],
        b"data: a\n\ndata: b",
        b"data: a\n\nevent: x\n",
        b"data: a\n\nda",
    ] {
        let out = run(input);
        assert_eq!(out.items, vec![msg("a")]);
        assert_eq!(out.end, SseEnd::IncompleteEvent);
    }
    // An id of the discarded event is not committed.
    let out = run(b"id: 1\ndata: a\n\nid: 2\ndata: b\n");
    assert_eq!(out.last_event_id, "1");
    assert_eq!(out.end, SseEnd::IncompleteEvent);
    // A trailing comment or CR is not an incomplete event.
    assert_eq!(run(b"data: a\n\n: bye\n").end, SseEnd::Clean);
    assert_eq!(run(b"data: a\r\r").end, SseEnd::Clean);
}

// ---- UTF-8 ----

#[test]
fn unicode_split_across_chunks() {
    let out = run("event: ünï\ndata: é€😀\ndata: 日本\n\n".as_bytes());
    assert_eq!(out.items, vec![ev("ünï", "é€😀\n日本", "")]);
}

#[test]
fn invalid_utf8_is_replaced() {
    let out = run(b"data: a\xFFb\xE2\x82\ndata: \xF0\x9F\x98\n\n");
    assert_eq!(out.items, vec![msg("a\u{FFFD}b\u{FFFD}\n\u{FFFD}")]);
}

// ---- limits ----

#[test]
fn oversize_line_then_recovery() {
    let limit = 20;
    let out = decode_all_ways(
        b"id: a\ndata: 0123456789ABCDEFGHIJ\ndata: more\nid: b\n\ndata: ok\n\n",
        limit,
    );
    // The skipped event's id (set before the overflow) is committed; lines
    // after the overflow are ignored.
    assert_eq!(
        out.items,
        vec![too_large(limit), skipped(25), ev("message", "ok", "a")]
    );
    assert_eq!(out.end, SseEnd::Clean);
}

#[test]
fn oversize_by_accumulation_then_recovery() {
    let limit = 16;
    let out = decode_all_ways(
        b"data: 12345\ndata: 12345\ndata: 12345\ndata: 12345\n\ndata: 1234567890\n\n",
        limit,
    );
    assert_eq!(
        out.items,
        vec![too_large(limit), skipped(23), msg("1234567890")]
    );
}

#[test]
fn oversize_event_type_and_comment() {
    let limit = 8;
    let out = decode_all_ways(
        b"event: 123456789\ndata: a\n\n: a long comment line\n\ndata: b\n\n",
        limit,
    );
    assert_eq!(
        out.items,
        vec![
            too_large(limit),
            skipped(1),
            too_large(limit),
            skipped(0),
            msg("b")
        ]
    );
}

#[test]
fn oversize_unterminated_at_eof() {
    let out = decode_all_ways(b"data: ok\n\ndata: this line is far too long", 12);
    assert_eq!(out.items, vec![msg("ok"), too_large(12)]);
    assert_eq!(out.end, SseEnd::IncompleteEvent);
}

#[test]
fn oversize_is_reported_once_per_event() {
    let long = "x".repeat(100);
    let input = format!("data: {long}\ndata: {long}\n:{long}\n\ndata: y\n\n");
    let out = decode_all_ways(input.as_bytes(), 32);
    assert_eq!(out.items, vec![too_large(32), skipped(201), msg("y")]);
}

#[test]
fn big_chunk_of_a_huge_event_is_not_buffered() {
    // Feeding 1 MiB in one chunk after the limit was exceeded must work and
    // recover; memory is not observable here, but the path is exercised.
    let mut dec = SseDecoder::with_config(SseConfig {
        max_event_size: 1024,
    });
    let mut items = Vec::new();
    dec.feed(b"data: ", |i| items.push(i));
    dec.feed(&vec![b'z'; 1 << 20], |i| items.push(i));
    dec.feed(&vec![b'z'; 1 << 20], |i| items.push(i));
    dec.feed(b"\n\ndata: fine\n\n", |i| items.push(i));
    assert_eq!(items, vec![too_large(1024), skipped(2 << 20), msg("fine")]);
}

#[test]
fn a_skipped_response_shows_its_id_whatever_the_split() {
    // TypeScript's order (id last), CRLF line ends, an id line before the
    // data, and a second data line: the glimpse reads the joined data.
    let text = "t".repeat(64);
    let input = format!(
        "event: message\r\nid: 7\r\ndata: {{\"result\":{{\"text\":\"{text}\"}},\r\ndata:\"jsonrpc\":\"2.0\",\"id\":42}}\r\n\r\ndata: {{}}\n\n"
    );
    let out = decode_all_ways(input.as_bytes(), 48);
    match &out.items[..] {
        [e, SseItem::Skipped { size, glimpse }, last] => {
            assert_eq!(*e, too_large(48));
            assert_eq!(glimpse.response_id(), Some("42"));
            assert_eq!(*size, 22 + text.len() + 1 + 24);
            assert_eq!(*last, ev("message", "{}", "7"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(out.last_event_id, "7");
}

#[test]
fn many_events_in_one_chunk() {
    let payload = "p".repeat(1000);
    let one = format!("id: {{n}}\ndata: {payload}\n\n");
    let mut input = String::new();
    for n in 0..100 {
        input.push_str(&one.replace("{n}", &n.to_string()));
    }
    let out = decode_chunks([input.as_bytes()], 4096);
    assert_eq!(out.items.len(), 100);
    assert_eq!(out.last_event_id, "99");
    assert!(matches!(&out.items[5], SseItem::Event(e) if e.id == "5" && e.data == payload));
}

// ---- a reference decoder, written straight from the standard ----

/// Whole-stream reference: decode lossily, strip one BOM, split lines,
/// interpret. No limit.
fn reference(input: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(input);
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(&text);
    let mut items = Vec::new();
    let (mut data, mut event, mut id_buf, mut last_id) =
        (String::new(), String::new(), None::<String>, String::new());
    let mut retry = None;
    let mut rest = text;
    let trailing = loop {
        let Some(i) = rest.find(['\r', '\n']) else {
            break !rest.is_empty();
        };
        let line = &rest[..i];
        let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[i + skip..];
        if line.is_empty() {
            if let Some(id) = id_buf.take() {
                last_id = id;
            }
            if !data.is_empty() {
                data.pop();
                let ty = if event.is_empty() {
                    "message".to_owned()
                } else {
                    event.clone()
                };
                items.push(SseItem::Event(SseEvent {
                    event: ty,
                    data: std::mem::take(&mut data),
                    id: last_id.clone(),
                }));
            }
            data.clear();
            event.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (name, value) = match line.split_once(':') {
            Some((n, v)) => (n, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match name {
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            "event" => event = value.to_owned(),
            "id" if !value.contains('\0') => id_buf = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                let ms = value.bytes().fold(0u64, |a, d| {
                    a.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                retry = Some(Duration::from_millis(ms));
            }
            _ => {}
        }
    };
    let incomplete = trailing || !data.is_empty() || !event.is_empty() || id_buf.is_some();
    Outcome {
        items,
        end: if incomplete {
            SseEnd::IncompleteEvent
        } else {
            SseEnd::Clean
        },
        last_event_id: last_id,
        retry,
    }
}

#[test]
fn reference_agrees_on_the_whatwg_examples() {
    for input in [
        &b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"[..],
        b"data\n\ndata\ndata\n\ndata:",
        b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\r\n\r\n",
    ] {
        assert_eq!(run(input), reference(input));
    }
}

// ---- properties ----

#[derive(Debug, Clone)]
struct Spec {
    event: Option<String>,
    data: Vec<String>,
    id: Option<String>,
    retry: Option<u32>,
    comment: Option<String>,
    /// Write `field:value` instead of `field: value` where that is unambiguous.
    tight: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::option::of("[^\r\n]{0,8}"),
        proptest::collection::vec("[^\r\n]{0,16}", 1..4),
        proptest::option::of("[^\r\n\\x00]{0,8}"),
        proptest::option::of(any::<u32>()),
        proptest::option::of("[^\r\n]{0,8}"),
        any::<bool>(),
    )
        .prop_map(|(event, data, id, retry, comment, tight)| Spec {
            event,
            data,
            id,
            retry,
            comment,
            tight,
        })
}

/// Encodes lines with line endings chosen by `style` (0 LF, 1 CR, 2 CRLF,
/// 3 mixed from `picks`), never letting a CR be followed by a LF that ends
/// the next (blank) line.
fn encode(lines: &[String], style: u8, picks: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev_cr = false;
    for (i, line) in lines.iter().enumerate() {
        out.extend_from_slice(line.as_bytes());
        let mut pick = if style == 3 {
            picks[i % picks.len()] % 3
        } else {
            style
        };
        if pick == 0 && prev_cr && line.is_empty() {
            pick = 2;
        }
        out.extend_from_slice([&b"\n"[..], b"\r", b"\r\n"][usize::from(pick)]);
        prev_cr = pick == 1;
    }
    out
}

fn field(name: &str, value: &str, tight: bool) -> String {
    if tight && !value.starts_with(' ') {
        format!("{name}:{value}")
    } else {
        format!("{name}: {value}")
    }
}

fn chunked<'a>(input: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
    at.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for a in at {
        chunks.push(&input[start..a]);
        start = a;
    }
    chunks.push(&input[start..]);
    chunks
}

/// Interesting fragments for random streams.
const TOKENS: &[&[u8]] = &[
    b"data",
    b"data:",
    b"data: ",
    b"event:",
    b"event: ",
    b"id:",
    b"id: ",
    b"retry:",
    b"retry: ",
    b":",
    b" ",
    b"\r",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"x",
    b"42",
    b"\0",
    b"\xEF\xBB\xBF",
    b"\xEF\xBB",
    b"\xFF",
    "é".as_bytes(),
    "😀".as_bytes(),
    b"\xF0\x9F",
    b"DATA",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_events_roundtrip(
        specs in proptest::collection::vec(spec(), 0..8),
        bom in any::<bool>(),
        style in 0u8..4,
        picks in proptest::collection::vec(any::<u8>(), 1..16),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut lines = Vec::new();
        let mut expected = Vec::new();
        let (mut last_id, mut retry) = (String::new(), None);
        for s in &specs {
            if let Some(c) = &s.comment {
                lines.push(format!(":{c}"));
            }
            if let Some(e) = &s.event {
                lines.push(field("event", e, s.tight));
            }
            if let Some(id) = &s.id {
                lines.push(field("id", id, s.tight));
                last_id = id.clone();
            }
            if let Some(r) = s.retry {
                lines.push(field("retry", &r.to_string(), s.tight));
                retry = Some(Duration::from_millis(u64::from(r)));
            }
            for d in &s.data {
                lines.push(field("data", d, s.tight));
            }
            lines.push(String::new());
            let event = match &s.event {
                Some(e) if !e.is_empty() => e.clone(),
                _ => "message".to_owned(),
            };
            expected.push(ev(&event, &s.data.join("\n"), &last_id));
        }
        let mut input = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        input.extend(encode(&lines, style, &picks));

        let out = decode_chunks(chunked(&input, &cuts), usize::MAX);
        prop_assert_eq!(&out.items, &expected);
        prop_assert_eq!(out.end, SseEnd::Clean);
        prop_assert_eq!(&out.last_event_id, &last_id);
        prop_assert_eq!(out.retry, retry);
        prop_assert_eq!(&decode_chunks([&input[..]], usize::MAX), &out);
    }

    #[test]
    fn token_soup_matches_reference_and_any_chunking(
        tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..80),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let input = tokens.concat();
        let whole = decode_chunks([&input[..]], usize::MAX);
        prop_assert_eq!(&whole, &reference(&input));
        prop_assert_eq!(&decode_chunks(chunked(&input, &cuts), usize::MAX), &whole);
        let bytewise = decode_chunks(input.chunks(1), usize::MAX);
        prop_assert_eq!(&bytewise, &whole);
    }

    #[test]
    fn token_soup_with_small_limit_is_bounded_and_split_invariant(
        tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..80),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        limit in 0usize..24,
    ) {
        let input = tokens.concat();
        let whole = decode_chunks([&input[..]], limit);
        for item in &whole.items {
            if let SseItem::Event(e) = item {
                // The default type "message" is not buffered, so not counted.
                let ty = if e.event == "message" { 0 } else { e.event.len() };
                prop_assert!(ty + e.data.len() <= limit);
                prop_assert!(e.id.len() <= limit);
            }
        }
        prop_assert!(whole.last_event_id.len() <= limit);
        prop_assert_eq!(&decode_chunks(chunked(&input, &cuts), limit), &whole);
        prop_assert_eq!(&decode_chunks(input.chunks(1), limit), &whole);
    }
}
