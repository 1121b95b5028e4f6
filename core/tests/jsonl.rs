//! JSONL decoder vectors, each run whole, split at every point and byte by
//! byte, plus a round-trip property test.

use mcpwire::codec::jsonl::{self, JsonlConfig, JsonlDecoder, JsonlError};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Line(Vec<u8>),
    Err(JsonlError),
    Eof(JsonlError),
}

fn run_chunks(config: JsonlConfig, chunks: &[&[u8]]) -> Vec<Item> {
    let mut dec = JsonlDecoder::with_config(config);
    let mut out = Vec::new();
    for chunk in chunks {
        dec.feed(chunk, |l| {
            out.push(match l {
                Ok(line) => Item::Line(line.to_vec()),
                Err(e) => Item::Err(e),
            })
        });
        assert!(
            dec.buffered() <= config.max_line_len + 1,
            "buffer exceeded its bound"
        );
    }
    if let Some(e) = dec.finish() {
        out.push(Item::Eof(e));
    }
    out
}

/// Runs `input` whole, at every split point and byte by byte; all must
/// agree (an over-long line's report included: its length and glimpse do
/// not depend on where the chunks fell).
fn three_ways(config: JsonlConfig, input: &[u8]) -> Vec<Item> {
    let whole = run_chunks(config, &[input]);
    for split in 0..=input.len() {
        let (a, b) = input.split_at(split);
        assert_eq!(run_chunks(config, &[a, b]), whole, "split at {split}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run_chunks(config, &bytes), whole, "byte by byte");
    whole
}

fn line(s: &str) -> Item {
    Item::Line(s.as_bytes().to_vec())
}

const DEFAULT: JsonlConfig = JsonlConfig {
    max_line_len: jsonl::DEFAULT_MAX_LINE_LEN,
};

#[test]
fn plain_lines() {
    let got = three_ways(
        DEFAULT,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"a\":2}\n",
    );
    assert_eq!(
        got,
        vec![
            line("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"),
            line("{\"a\":2}")
        ]
    );
}

#[test]
fn crlf_and_blank_lines() {
    let got = three_ways(DEFAULT, b"\n\r\n{\"a\":1}\r\n \t \n\n{\"b\":2}\n\r\n");
    assert_eq!(got, vec![line("{\"a\":1}"), line("{\"b\":2}")]);
}

#[test]
fn lone_cr_inside_a_line_is_kept() {
    // Only one CR right before LF is a line ending; others are content.
    let got = three_ways(DEFAULT, b"a\rb\r\r\n");
    assert_eq!(got, vec![line("a\rb\r")]);
}

#[test]
fn partial_line_at_eof_is_reported() {
    let got = three_ways(DEFAULT, b"{\"a\":1}\n{\"b\":");
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], line("{\"a\":1}"));
    assert_eq!(
        got[1],
        Item::Eof(JsonlError::TruncatedAtEof {
            len: 5,
            preview: "{\"b\":".into()
        })
    );
}

#[test]
fn whitespace_at_eof_is_not_a_partial_line() {
    assert_eq!(three_ways(DEFAULT, b"{}\n  \r"), vec![line("{}")]);
}

#[test]
fn over_long_lines_are_skipped_and_decoding_recovers() {
    let cfg = JsonlConfig { max_line_len: 10 };
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"ok\":1}\n");
    input.extend_from_slice(&[b'x'; 50]);
    input.extend_from_slice(b"\n[1,2,3]\n");
    input.extend_from_slice(b"0123456789\r\n"); // exactly the limit, CRLF
    input.extend_from_slice(b"0123456789A\r\n"); // one over
    input.extend_from_slice(b"{}\n");
    input.extend_from_slice(&[b'y'; 30]); // over-long and unterminated
    let got = three_ways(cfg, &input);
    let too_long = |seen| JsonlError::LineTooLong {
        limit: 10,
        seen,
        glimpse: Default::default(),
    };
    assert_eq!(
        got,
        vec![
            line("{\"ok\":1}"),
            Item::Err(too_long(50)),
            line("[1,2,3]"),
            line("0123456789"),
            Item::Err(too_long(11)),
            line("{}"),
            Item::Eof(too_long(30)),
        ]
    );
}

#[test]
fn an_over_long_reply_names_its_id_whatever_the_split() {
    let cfg = JsonlConfig { max_line_len: 40 };
    let input = concat!(
        r#"{"result":{"content":[{"type":"text","text":"0123456789"}]},"jsonrpc":"2.0","id":5}"#,
        "\r\n",
        r#"{"jsonrpc":"2.0","id":"p","method":"sampling/createMessage","params":{}}"#,
        "\n{}\n"
    );
    let got = three_ways(cfg, input.as_bytes());
    let ids: Vec<_> = got
        .iter()
        .map(|i| match i {
            Item::Err(JsonlError::LineTooLong { glimpse, seen, .. }) => {
                Some((glimpse.kind, glimpse.id.clone(), *seen))
            }
            _ => None,
        })
        .collect();
    use mcpwire::codec::glimpse::Kind;
    assert_eq!(
        ids,
        vec![
            Some((Some(Kind::Response), Some("5".into()), 83)),
            Some((Some(Kind::Request), Some("\"p\"".into()), 72)),
            None
        ]
    );
}

#[test]
fn error_names_the_limit() {
    let e = JsonlError::LineTooLong {
        limit: 1024,
        seen: 2048,
        glimpse: Default::default(),
    };
    assert!(e.to_string().contains("1024"), "{e}");
    assert!(e.to_string().contains("max_line_len"), "{e}");
}

#[test]
fn invalid_utf8_and_non_json_are_malformed_frames() {
    let mut dec = JsonlDecoder::new();
    let mut frames = Vec::new();
    dec.feed_json::<serde_json::Value>(
        b"Server listening on stdio\n{\"x\":\xc3\x28}\n{\"x\":1}\n",
        |f| frames.push(f),
    );
    let kinds: Vec<&str> = frames
        .iter()
        .map(|f| match f {
            jsonl::Frame::Message(_) => "message",
            jsonl::Frame::Malformed(_) => "malformed",
            jsonl::Frame::Error(_) => "error",
        })
        .collect();
    assert_eq!(kinds, ["malformed", "malformed", "message"]);
    if let jsonl::Frame::Malformed(m) = &frames[1] {
        assert!(m.reason.contains("UTF-8"), "{m}");
        assert_eq!(m.preview, "{\"x\":\u{fffd}(}");
    }
}

#[test]
fn preview_is_short_and_escaped() {
    let long = format!("{}\u{1b}[31m", "z".repeat(500));
    let m = jsonl::parse_raw(long.as_bytes()).unwrap_err();
    assert!(m.preview.chars().count() <= jsonl::PREVIEW_LEN + 1);
    assert!(m.preview.ends_with('…'));
    let m = jsonl::parse_raw(b"\x1b[31mred").unwrap_err();
    assert!(!m.preview.contains('\u{1b}'), "{}", m.preview);
}

#[test]
fn long_line_in_small_chunks_is_linear() {
    // 4 MiB line fed 7 bytes at a time: with rescanning this would be
    // quadratic (~10^12 byte visits); linear finishes at once.
    let mut payload = Vec::with_capacity(4 << 20);
    payload.extend_from_slice(b"{\"data\":\"");
    payload.resize((4 << 20) - 2, b'a');
    payload.extend_from_slice(b"\"}\n");
    let mut dec = JsonlDecoder::new();
    let mut n = 0;
    for chunk in payload.chunks(7) {
        dec.feed(chunk, |l| {
            assert_eq!(l.unwrap().len(), payload.len() - 1);
            n += 1;
        });
    }
    assert_eq!(n, 1);
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        ".*".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(".*", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn encoded_messages_rechunked_decode_to_the_same(
        msgs in prop::collection::vec(json_value(), 0..8),
        crlf in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let mut stream = Vec::new();
        for m in &msgs {
            jsonl::encode(m, &mut stream).unwrap();
            if crlf {
                stream.pop();
                stream.extend_from_slice(b"\r\n");
            }
        }
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points {
            chunks.push(&stream[last..p]);
            last = p;
        }
        chunks.push(&stream[last..]);

        let mut dec = JsonlDecoder::new();
        let mut got = Vec::new();
        for c in chunks {
            dec.feed_json::<serde_json::Value>(c, |f| match f {
                jsonl::Frame::Message(v) => got.push(v),
                other => panic!("unexpected {other:?}"),
            });
        }
        prop_assert_eq!(dec.finish(), None);
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn arbitrary_bytes_respect_the_bound(
        data in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), any::<u8>()], 0..400),
        limit in 1usize..40,
        chunk in 1usize..50,
    ) {
        let cfg = JsonlConfig { max_line_len: limit };
        let mut dec = JsonlDecoder::with_config(cfg);
        for c in data.chunks(chunk) {
            dec.feed(c, |l| {
                if let Ok(line) = l {
                    assert!(line.len() <= limit);
                    assert!(!line.contains(&b'\n'));
                }
            });
            prop_assert!(dec.buffered() <= limit + 1);
        }
    }
}
