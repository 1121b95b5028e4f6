//! HTTP/1.1 codec vectors: every response is decoded whole, split at every
//! point into two chunks and byte by byte (with empty chunks in between),
//! and all three must agree; plus request encoding and property tests.

use mcpwire::codec::http1::{
    Http1Error, Http1Limits, Request, ResponseDecoder, ResponseEvent, ResponseHead,
};
use proptest::prelude::*;

/// What one response decoded to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Response {
    head: Option<ResponseHead>,
    body: Vec<u8>,
    /// `Some(keep_alive)` once `End` was emitted.
    end: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    responses: Vec<Response>,
    error: Option<Http1Error>,
    /// Total bytes consumed over all `feed` calls (0 after a feed error).
    consumed: usize,
}

impl Outcome {
    fn only(&self) -> &Response {
        assert_eq!(self.responses.len(), 1, "{self:?}");
        &self.responses[0]
    }
    fn head(&self) -> &ResponseHead {
        self.only().head.as_ref().expect("a head")
    }
}

fn record(resp: &mut Response, ev: ResponseEvent<'_>) {
    assert!(resp.end.is_none(), "event after End: {ev:?}");
    match ev {
        ResponseEvent::Head(head) => {
            assert!(resp.head.is_none(), "second head");
            resp.head = Some(head);
        }
        ResponseEvent::Body(bytes) => {
            assert!(resp.head.is_some(), "body before head");
            assert!(!bytes.is_empty(), "empty Body event");
            resp.body.extend_from_slice(bytes);
        }
        ResponseEvent::End { keep_alive } => {
            assert!(resp.head.is_some(), "end before head");
            resp.end = Some(keep_alive);
        }
    }
}

/// Feeds `chunks` to a decoder expecting one response per entry of
/// `methods` (resetting between them and re-feeding leftover bytes), then
/// the EOF if `eof`.
fn decode(chunks: &[&[u8]], methods: &[&str], limits: Http1Limits, eof: bool) -> Outcome {
    let mut dec = ResponseDecoder::new(methods[0], limits);
    let mut next = 1;
    let mut out = Outcome {
        responses: vec![Response::default()],
        error: None,
        consumed: 0,
    };
    'chunks: for &chunk in chunks {
        let mut chunk = chunk;
        loop {
            let resp = out.responses.last_mut().unwrap();
            match dec.feed(chunk, |ev| record(resp, ev)) {
                Err(e) => {
                    assert_eq!(dec.error(), Some(&e));
                    // Sticky until reset.
                    assert_eq!(dec.feed(b"x", |ev| panic!("{ev:?}")), Err(e.clone()));
                    out.error = Some(e);
                    // How much was consumed before a feed error depends on
                    // the chunking; nothing after it counts anyway.
                    out.consumed = 0;
                    break 'chunks;
                }
                Ok(n) => {
                    assert!(n <= chunk.len());
                    out.consumed += n;
                    chunk = &chunk[n..];
                }
            }
            if !dec.is_done() {
                assert!(chunk.is_empty(), "unconsumed bytes before the end");
                break;
            }
            assert_eq!(dec.feed(b"more", |ev| panic!("{ev:?}")), Ok(0));
            if next == methods.len() {
                break 'chunks;
            }
            dec.reset(methods[next]);
            next += 1;
            out.responses.push(Response::default());
            if chunk.is_empty() {
                break;
            }
        }
    }
    if eof && out.error.is_none() {
        let was_done = dec.is_done();
        let resp = out.responses.last_mut().unwrap();
        let result = dec.finish_eof(|ev| {
            assert!(!was_done, "event from finish_eof when done");
            record(resp, ev)
        });
        if let Err(e) = result {
            out.error = Some(e);
        }
    }
    out
}

/// Decodes `input` whole, at every split point and byte by byte; all must
/// give the same outcome, which is returned.
fn check_with(input: &[u8], methods: &[&str], limits: Http1Limits, eof: bool) -> Outcome {
    let whole = decode(&[input], methods, limits, eof);
    for split in 0..=input.len() {
        let (a, b) = input.split_at(split);
        assert_eq!(
            decode(&[a, b], methods, limits, eof),
            whole,
            "split at {split}"
        );
    }
    let mut bytes: Vec<&[u8]> = Vec::new();
    for byte in input.chunks(1) {
        bytes.push(byte);
        bytes.push(b"");
    }
    assert_eq!(decode(&bytes, methods, limits, eof), whole, "byte by byte");
    whole
}

/// One response to `GET`, default limits, then EOF.
fn check(input: &[u8]) -> Outcome {
    check_with(input, &["GET"], Http1Limits::default(), true)
}

fn small(f: impl FnOnce(&mut Http1Limits)) -> Http1Limits {
    let mut limits = Http1Limits::default();
    f(&mut limits);
    limits
}

// ---------------------------------------------------------------- framing

#[test]
fn content_length() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nMcp-Session-Id: abc\r\n\r\n{\"ok\":true}";
    let out = check(input);
    assert_eq!(out.error.clone(), None);
    assert_eq!(out.consumed, input.len());
    let head = out.head();
    assert_eq!(
        (head.status, head.reason.as_str(), head.version),
        (200, "OK", 1)
    );
    assert_eq!(head.headers.len(), 3);
    assert_eq!(head.header("mcp-session-id"), Some(&b"abc"[..]));
    assert_eq!(head.media_type().as_deref(), Some("application/json"));
    assert_eq!(out.only().body, b"{\"ok\":true}");
    assert_eq!(out.only().end, Some(true));
}

#[test]
fn content_length_zero_ends_at_head() {
    let out = check(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
    assert_eq!((out.head().status, out.only().end), (202, Some(true)));
    assert!(out.only().body.is_empty());
}

#[test]
fn chunked_with_extensions_trailers_uppercase_and_tiny_chunks() {
    let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        1;a=b\r\nh\r\n\
        A ; name=\"quoted;value\"\r\n0123456789\r\n\
        1\r\n!\r\n\
        000F\r\nabcdefghijklmno\r\n\
        0;last\r\nX-Trailer: 1\r\nY: 2\r\n\r\n";
    let out = check(input);
    assert_eq!(out.error.clone(), None);
    assert_eq!(out.consumed, input.len());
    assert_eq!(out.only().body, b"h0123456789!abcdefghijklmno");
    assert_eq!(out.only().end, Some(true));
}

#[test]
fn chunked_tolerates_bare_lf() {
    let input = b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n";
    let out = check(input);
    assert_eq!(out.error.clone(), None);
    assert_eq!(
        (out.only().body.as_slice(), out.only().end),
        (&b"abc"[..], Some(true))
    );
    assert_eq!(out.consumed, input.len());
}

#[test]
fn transfer_encoding_list_and_case() {
    let out = check(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: , CHUNKED\r\n\r\n2\r\nok\r\n0\r\n\r\n");
    assert_eq!(
        (out.only().body.as_slice(), out.only().end),
        (&b"ok"[..], Some(true))
    );
}

#[test]
fn close_delimited_until_eof() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\ndata: 2\n\n";
    let out = check(input);
    assert_eq!(out.error.clone(), None);
    assert_eq!(out.only().body, b"data: 1\n\ndata: 2\n\n");
    assert_eq!(out.only().end, Some(false));
    // Without EOF the body simply goes on.
    let out = check_with(input, &["GET"], Http1Limits::default(), false);
    assert_eq!((out.only().end, out.error.clone()), (None, None));
    assert_eq!(out.consumed, input.len());
}

#[test]
fn head_request_has_no_body() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nHTTP/1.1";
    let out = check_with(input, &["HEAD"], Http1Limits::default(), true);
    assert_eq!(out.error.clone(), None);
    assert_eq!((out.only().body.len(), out.only().end), (0, Some(true)));
    assert_eq!(out.consumed, input.len() - 8);
    // Chunked or close-delimited: still no body.
    let out = check_with(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        &["HEAD"],
        Http1Limits::default(),
        true,
    );
    assert_eq!((out.error.clone(), out.only().end), (None, Some(true)));
}

#[test]
fn no_body_for_204_and_304() {
    for status in ["204 No Content", "304 Not Modified"] {
        let input = format!("HTTP/1.1 {status}\r\nContent-Length: 5\r\n\r\nXXXXX");
        let out = check(input.as_bytes());
        assert_eq!(out.error.clone(), None);
        assert_eq!((out.only().body.len(), out.only().end), (0, Some(true)));
        assert_eq!(out.consumed, input.len() - 5, "{status}");
    }
}

#[test]
fn interim_responses_are_skipped() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\n\
        HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
        HTTP/1.1 102 Processing\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
    let out = check(input);
    assert_eq!(out.error.clone(), None);
    assert_eq!(out.head().status, 200);
    assert_eq!(out.head().header("link"), None);
    assert_eq!(
        (out.only().body.as_slice(), out.only().end),
        (&b"hi"[..], Some(true))
    );
    // A 1xx alone, then EOF: the response was started but never finished.
    let out = check(b"HTTP/1.1 100 Continue\r\n\r\n");
    assert_eq!(
        out.error,
        Some(Http1Error::UnexpectedEof {
            state: "response head"
        })
    );
    assert_eq!(out.only().head, None);
}

#[test]
fn switching_protocols_is_an_error() {
    let out = check(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n");
    assert_eq!(out.error.clone(), Some(Http1Error::UnexpectedUpgrade));
}

// ------------------------------------------------------------- keep-alive

#[test]
fn http10_keep_alive_only_when_asked() {
    let out = check(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!((out.head().version, out.only().end), (0, Some(false)));
    let out = check(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(out.only().end, Some(true));
    // No length: close-delimited, never kept alive.
    let out = check(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nhi");
    assert_eq!(
        (out.only().body.as_slice(), out.only().end),
        (&b"hi"[..], Some(false))
    );
}

#[test]
fn connection_close() {
    for conn in ["close", "Close", "foo, CLOSE", "keep-alive, close"] {
        let input = format!("HTTP/1.1 200 OK\r\nConnection: {conn}\r\nContent-Length: 1\r\n\r\nx");
        assert_eq!(check(input.as_bytes()).only().end, Some(false), "{conn}");
    }
    let out = check(b"HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 1\r\n\r\nx");
    assert_eq!(out.only().end, Some(true));
}

#[test]
fn chunked_wins_over_content_length_but_closes() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let out = check(input);
    assert_eq!(out.error.clone(), None);
    assert_eq!(
        (out.only().body.as_slice(), out.only().end),
        (&b"abc"[..], Some(false))
    );
    assert_eq!(out.consumed, input.len());
}

// ------------------------------------------------------------ bad framing

#[test]
fn duplicate_equal_content_length_is_fine() {
    let out = check(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length: 3, 003\r\n\r\nabc");
    assert_eq!((out.error.clone(), out.only().end), (None, Some(true)));
}

#[test]
fn conflicting_or_invalid_content_length() {
    let out = check(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd");
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::ConflictingContentLength)
    );
    assert_eq!(out.only().head, None, "no head for an unframeable response");
    let out = check(b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd");
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::ConflictingContentLength)
    );
    for bad in ["-1", "+3", "0x10", "3 4", "", "99999999999999999999"] {
        let input = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
        assert!(
            matches!(
                check(input.as_bytes()).error,
                Some(Http1Error::InvalidContentLength(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn unsupported_transfer_encoding() {
    for te in ["gzip", "gzip, chunked", "chunked, gzip", "chunked, chunked"] {
        let input = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\n");
        assert!(
            matches!(
                check(input.as_bytes()).error,
                Some(Http1Error::UnsupportedTransferEncoding(_))
            ),
            "{te}"
        );
    }
}

#[test]
fn invalid_chunk_size() {
    const HEAD: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    for bad in [
        "zz\r\n",
        "\r\n",
        "-1\r\n",
        "1 1\r\n",
        "10000000000000000\r\n",
        "0x1\r\n",
    ] {
        let out = check(format!("{HEAD}{bad}").as_bytes());
        assert!(
            matches!(out.error.clone(), Some(Http1Error::InvalidChunkSize(_))),
            "{bad:?}: {out:?}"
        );
        assert!(out.only().head.is_some());
    }
    // Data after the error never surfaces; data before it did.
    let out = check(format!("{HEAD}2\r\nok\r\nq\r\nlost").as_bytes());
    assert!(matches!(
        out.error.clone(),
        Some(Http1Error::InvalidChunkSize(_))
    ));
    assert_eq!(out.only().body, b"ok");
}

#[test]
fn missing_chunk_terminator() {
    let out = check(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n");
    assert_eq!(out.error.clone(), Some(Http1Error::MissingChunkTerminator));
    assert_eq!(out.only().body, b"abc");
    let out = check(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rX");
    assert_eq!(out.error.clone(), Some(Http1Error::MissingChunkTerminator));
}

#[test]
fn chunk_line_too_long() {
    let limits = small(|l| l.max_chunk_line = 8);
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    // Exactly 8 bytes with the CRLF: fine.
    let ok = format!("{head}1;abcd\r\nx\r\n0\r\n\r\n");
    let out = check_with(ok.as_bytes(), &["GET"], limits, true);
    assert_eq!((out.error.clone(), out.only().end), (None, Some(true)));
    let bad = format!("{head}1;abcde\r\nx\r\n0\r\n\r\n");
    let out = check_with(bad.as_bytes(), &["GET"], limits, true);
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::ChunkLineTooLong { limit: 8 })
    );
    // A never-ending line errors as soon as it is too long, without EOF.
    let endless = format!("{head}{}", "0".repeat(20));
    let out = check_with(endless.as_bytes(), &["GET"], limits, false);
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::ChunkLineTooLong { limit: 8 })
    );
}

#[test]
fn trailers_too_large() {
    let limits = small(|l| l.max_trailer_size = 16);
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
    // 14 + 2 = 16 bytes of trailer section: fine.
    let ok = format!("{head}X-Trailer: 1\r\n\r\n");
    let out = check_with(ok.as_bytes(), &["GET"], limits, true);
    assert_eq!((out.error.clone(), out.only().end), (None, Some(true)));
    let bad = format!("{head}X-Trailer: 12\r\n\r\n");
    let out = check_with(bad.as_bytes(), &["GET"], limits, true);
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::TrailersTooLarge { limit: 16 })
    );
    let many = format!("{head}{}", "a: b\r\n".repeat(10));
    let out = check_with(many.as_bytes(), &["GET"], limits, false);
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::TrailersTooLarge { limit: 16 })
    );
}

#[test]
fn head_too_large() {
    let head = b"HTTP/1.1 200 OK\r\nX-Pad: aaaaaaaaaaaaaaaaaaaa\r\nContent-Length: 0\r\n\r\n";
    let fits = small(|l| l.max_head_size = head.len());
    let out = check_with(head, &["GET"], fits, true);
    assert_eq!((out.error.clone(), out.only().end), (None, Some(true)));
    let tight = small(|l| l.max_head_size = head.len() - 1);
    let out = check_with(head, &["GET"], tight, true);
    assert_eq!(
        out.error,
        Some(Http1Error::HeadTooLarge {
            limit: head.len() - 1
        })
    );
    // Without an end in sight it errors as soon as the limit is reached.
    let endless = [&b"HTTP/1.1 200 OK\r\nX: "[..], &[b'a'; 200]].concat();
    let out = check_with(&endless, &["GET"], small(|l| l.max_head_size = 64), false);
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::HeadTooLarge { limit: 64 })
    );
    // Empty lines before the head count too.
    let padded = [&b"\r\n".repeat(40)[..], &head[..]].concat();
    let out = check_with(&padded, &["GET"], small(|l| l.max_head_size = 64), false);
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::HeadTooLarge { limit: 64 })
    );
}

#[test]
fn too_many_headers() {
    let input = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    let out = check_with(input, &["GET"], small(|l| l.max_headers = 2), true);
    assert_eq!(
        out.error.clone(),
        Some(Http1Error::TooManyHeaders { limit: 2 })
    );
    let out = check_with(input, &["GET"], small(|l| l.max_headers = 3), true);
    assert_eq!(out.error.clone(), None);
    assert_eq!(out.head().headers.len(), 3);
}

#[test]
fn invalid_heads() {
    for bad in [
        &b"HTTP/2 200 OK\r\n\r\n"[..],
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
        b"HTTP/1.1 600 High\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n",
        b"ICY 200 OK\r\n\r\n",
        b"\r\n\r\nhello\n\n",
    ] {
        let out = check(bad);
        assert!(
            matches!(out.error.clone(), Some(Http1Error::InvalidHead(_))),
            "{bad:?}: {out:?}"
        );
        assert_eq!(out.only().head, None);
    }
}

#[test]
fn lenient_heads() {
    // Empty lines before the status line, no reason phrase, obs-fold,
    // non-UTF-8 values, padded values.
    let input = b"\r\n\nHTTP/1.1 200\r\nX-Fold: a\r\n  b\r\nX-Bytes: \xff\xfe\r\nX-Pad:  v \t\r\nContent-Length: 0\r\n\r\n";
    let out = check(input);
    assert_eq!(out.error.clone(), None);
    let head = out.head();
    assert_eq!((head.status, head.reason.as_str()), (200, ""));
    assert_eq!(head.header("x-fold"), Some(&b"a    b"[..]));
    assert_eq!(head.header("x-bytes"), Some(&b"\xff\xfe"[..]));
    assert_eq!(head.header_str("x-bytes"), None);
    assert_eq!(head.header_str("x-pad"), Some("v"));
    assert_eq!(out.consumed, input.len());
}

// --------------------------------------------------------------- EOF cases

#[test]
fn truncated_responses() {
    let cases: [(&[u8], &str); 7] = [
        (b"HTTP/1.1 200 OK\r\nContent-Len", "response head"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello",
            "body (Content-Length)",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            "chunk size line",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            "chunk data",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r",
            "chunk data",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            "chunk size line",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n",
            "trailer section",
        ),
    ];
    for (input, state) in cases {
        let out = check(input);
        assert_eq!(
            out.error,
            Some(Http1Error::UnexpectedEof { state }),
            "{input:?}"
        );
        assert_eq!(out.only().end, None);
        assert_eq!(out.consumed, input.len());
    }
    // Body bytes that arrived before the cut were delivered.
    let out = check(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
    assert_eq!(out.only().body, b"hello");
}

#[test]
fn eof_before_any_response() {
    assert_eq!(check(b"").error, Some(Http1Error::NoResponse));
    // A stray CRLF left over from the previous response is not a response.
    assert_eq!(check(b"\r\n").error, Some(Http1Error::NoResponse));
}

#[test]
fn errors_are_sticky_until_reset() {
    let mut dec = ResponseDecoder::new("GET", Http1Limits::default());
    let err = dec.feed(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", |_| {});
    assert!(matches!(err, Err(Http1Error::InvalidContentLength(_))));
    assert_eq!(dec.finish_eof(|_| {}), err.map(|_| ()));
    dec.reset("GET");
    assert_eq!(dec.error(), None);
    let mut events = Vec::new();
    let n = dec
        .feed(b"HTTP/1.1 204 No Content\r\n\r\n", |ev| events.push(ev))
        .unwrap();
    assert_eq!(n, 27);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1], ResponseEvent::End { keep_alive: true });
}

// ------------------------------------------------------------- keep-alive

#[test]
fn leftover_bytes_and_a_second_response() {
    let first = &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"[..];
    let second =
        &b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..];
    let third = &b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"[..];
    let input = [first, second, third].concat();

    // By hand: the first feed stops at the end of the first response.
    let mut dec = ResponseDecoder::new("POST", Http1Limits::default());
    let mut ends = Vec::new();
    let n = dec
        .feed(&input, |ev| {
            if let ResponseEvent::End { keep_alive } = ev {
                ends.push(keep_alive)
            }
        })
        .unwrap();
    assert_eq!((n, &ends[..]), (first.len(), &[true][..]));
    assert!(dec.is_done());
    dec.reset("POST");
    let n2 = dec.feed(&input[n..], |_| {}).unwrap();
    assert_eq!(n2, second.len());

    // Three ways, with a HEAD third request (no body despite the length).
    let out = check_with(
        &input,
        &["POST", "DELETE", "HEAD"],
        Http1Limits::default(),
        true,
    );
    assert_eq!(out.error.clone(), None);
    assert_eq!(out.consumed, input.len());
    let statuses: Vec<u16> = out
        .responses
        .iter()
        .map(|r| r.head.as_ref().unwrap().status)
        .collect();
    assert_eq!(statuses, [200, 201, 200]);
    assert_eq!(out.responses[0].body, b"hi");
    assert_eq!(out.responses[1].body, b"abc");
    assert!(out.responses.iter().all(|r| r.end == Some(true)));

    // Only two expected: the third is left unconsumed.
    let out = check_with(&input, &["POST", "POST"], Http1Limits::default(), true);
    assert_eq!(out.consumed, first.len() + second.len());
}

// -------------------------------------------------------------- streaming

#[test]
fn long_chunked_event_stream_is_streamed() {
    let mut dec = ResponseDecoder::new("GET", Http1Limits::default());
    let mut events: Vec<ResponseEvent<'static>> = Vec::new();
    let head =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(dec.feed(head, |ev| events.push(ev)).unwrap(), head.len());
    assert!(
        matches!(&events[..], [ResponseEvent::Head(h)] if h.media_type().as_deref() == Some("text/event-stream"))
    );
    // One big chunk announced, delivered in pieces: each piece surfaces at once.
    assert_eq!(dec.feed(b"400\r\n", |ev| events.push(ev)).unwrap(), 5);
    assert_eq!(events.len(), 1);
    let mut total = 0;
    for i in 0..64 {
        let piece: &'static [u8] = if i % 2 == 0 {
            b"data: {\"n\":12}\n\n"
        } else {
            b"event: x\ndata:\n\n"
        };
        assert_eq!(piece.len(), 16);
        events.clear();
        assert_eq!(dec.feed(piece, |ev| events.push(ev)).unwrap(), 16);
        assert_eq!(events, [ResponseEvent::Body(piece)]);
        total += 16;
    }
    assert_eq!(total, 0x400);
    assert!(!dec.is_done());
    events.clear();
    dec.feed(b"\r\n5\r\nlast\n\r\n0\r\n\r\n", |ev| events.push(ev))
        .unwrap();
    assert_eq!(
        events,
        [
            ResponseEvent::Body(b"last\n"),
            ResponseEvent::End { keep_alive: true }
        ]
    );
}

#[test]
fn content_length_body_is_borrowed_from_input() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let mut dec = ResponseDecoder::new("GET", Http1Limits::default());
    let mut body: Option<&[u8]> = None;
    dec.feed(input, |ev| {
        if let ResponseEvent::Body(b) = ev {
            body = Some(b)
        }
    })
    .unwrap();
    let body = body.unwrap();
    assert_eq!(body.as_ptr(), input[input.len() - 5..].as_ptr());
}

// --------------------------------------------------------------- encoding

#[test]
fn encode_post_exact_bytes() {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let req = Request::new("POST", "/mcp?x=1", "localhost:3000")
        .with_header("Accept", "application/json, text/event-stream")
        .with_header("Content-Type", "application/json")
        .with_header("Mcp-Session-Id", "abc-123")
        .with_body(body.to_vec());
    let mut out = b"previous".to_vec();
    req.encode(&mut out).unwrap();
    let expected = [
        &b"previous"[..],
        b"POST /mcp?x=1 HTTP/1.1\r\n",
        b"Host: localhost:3000\r\n",
        b"Accept: application/json, text/event-stream\r\n",
        b"Content-Type: application/json\r\n",
        b"Mcp-Session-Id: abc-123\r\n",
        b"Content-Length: 40\r\n",
        b"\r\n",
        body,
    ]
    .concat();
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&expected)
    );
}

#[test]
fn encode_post_without_body_and_get() {
    let mut out = Vec::new();
    Request::new("POST", "/", "h").encode(&mut out).unwrap();
    assert_eq!(
        out,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
    );
    out.clear();
    Request::new("GET", "/sse", "h")
        .with_header("Last-Event-ID", "42")
        .encode(&mut out)
        .unwrap();
    assert_eq!(
        out,
        b"GET /sse HTTP/1.1\r\nHost: h\r\nLast-Event-ID: 42\r\n\r\n"
    );
}

#[test]
fn encode_rejects_injection_and_bad_lines() {
    let base = || Request::new("POST", "/mcp", "h");
    type Expect = fn(&Http1Error) -> bool;
    let cases: Vec<(Request, Expect)> = vec![
        (base().with_header("X-A\r\nEvil", "1"), |e| {
            matches!(e, Http1Error::InvalidHeaderName(_))
        }),
        (base().with_header("X-A:", "1"), |e| {
            matches!(e, Http1Error::InvalidHeaderName(_))
        }),
        (base().with_header("X A", "1"), |e| {
            matches!(e, Http1Error::InvalidHeaderName(_))
        }),
        (base().with_header("X-A", "1\r\nEvil: 2"), |e| {
            matches!(e, Http1Error::InvalidHeaderValue { .. })
        }),
        (base().with_header("X-A", "1\nEvil: 2"), |e| {
            matches!(e, Http1Error::InvalidHeaderValue { .. })
        }),
        (base().with_header("X-A", "1\rEvil"), |e| {
            matches!(e, Http1Error::InvalidHeaderValue { .. })
        }),
        (base().with_header("X-A", "a\0b"), |e| {
            matches!(e, Http1Error::InvalidHeaderValue { .. })
        }),
        (base().with_header("content-length", "5"), |e| {
            matches!(e, Http1Error::ReservedHeader(_))
        }),
        (base().with_header("Host", "other"), |e| {
            matches!(e, Http1Error::ReservedHeader(_))
        }),
        (base().with_header("Transfer-Encoding", "chunked"), |e| {
            matches!(e, Http1Error::ReservedHeader(_))
        }),
        (Request::new("PO ST", "/", "h"), |e| {
            matches!(e, Http1Error::InvalidMethod(_))
        }),
        (Request::new("POST\r\n", "/", "h"), |e| {
            matches!(e, Http1Error::InvalidMethod(_))
        }),
        (Request::new("", "/", "h"), |e| {
            matches!(e, Http1Error::InvalidMethod(_))
        }),
        (Request::new("GET", "/a b", "h"), |e| {
            matches!(e, Http1Error::InvalidTarget(_))
        }),
        (Request::new("GET", "/a\r\nX: y", "h"), |e| {
            matches!(e, Http1Error::InvalidTarget(_))
        }),
        (Request::new("GET", "ftp://h/", "h"), |e| {
            matches!(e, Http1Error::InvalidTarget(_))
        }),
        (Request::new("GET", "http://h/a b", "h"), |e| {
            matches!(e, Http1Error::InvalidTarget(_))
        }),
        (Request::new("GET", "", "h"), |e| {
            matches!(e, Http1Error::InvalidTarget(_))
        }),
        (Request::new("GET", "/", "h\r\nX: y"), |e| {
            matches!(e, Http1Error::InvalidHost(_))
        }),
        (Request::new("GET", "/", "a b"), |e| {
            matches!(e, Http1Error::InvalidHost(_))
        }),
    ];
    for (req, expected) in cases {
        let mut out = b"keep".to_vec();
        let err = req.encode(&mut out).unwrap_err();
        assert!(expected(&err), "{req:?} gave {err:?}");
        assert!(err.is_local());
        assert_eq!(out, b"keep", "nothing written on error");
    }
    // The asterisk form is fine, and the absolute form (to a proxy).
    assert!(Request::new("OPTIONS", "*", "h")
        .encode(&mut Vec::new())
        .is_ok());
    assert!(Request::new("GET", "http://h/", "h")
        .encode(&mut Vec::new())
        .is_ok());
}

#[test]
fn encoded_request_round_trips_through_httparse() {
    let req = Request::new("DELETE", "/mcp", "example.com")
        .with_header("Mcp-Session-Id", "s\tp a c e")
        .with_body(b"x".to_vec());
    let mut out = Vec::new();
    req.encode(&mut out).unwrap();
    // Sanity-check our own output with a response-side-independent parse:
    // the head ends right before the body.
    let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(&out[head_end..], b"x");
    assert!(out.starts_with(b"DELETE /mcp HTTP/1.1\r\nHost: example.com\r\n"));
}

// ------------------------------------------------------------- properties

/// Splits `input` at the given points (taken modulo its length).
fn split_at_points<'a>(input: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = points.iter().map(|p| p % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut last = 0;
    for cut in cuts {
        pieces.push(&input[last..cut]);
        last = cut;
    }
    pieces.push(&input[last..]);
    pieces
}

fn encode_chunked(
    body: &[u8],
    sizes: &[usize],
    exts: &[bool],
    upper: bool,
    trailers: bool,
) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].min(rest.len());
        let size = if upper {
            format!("{n:X}")
        } else {
            format!("{n:x}")
        };
        out.extend_from_slice(size.as_bytes());
        if exts[i % exts.len()] {
            out.extend_from_slice(b" ;ext=\"v;1\";flag");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
        i += 1;
    }
    out.extend_from_slice(b"0\r\n");
    if trailers {
        out.extend_from_slice(b"X-Checksum: 1\r\nX-Other: 2\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

proptest! {
    #[test]
    fn chunked_round_trip(
        body in prop::collection::vec(any::<u8>(), 0..600),
        sizes in prop::collection::vec(1usize..80, 1..8),
        exts in prop::collection::vec(any::<bool>(), 1..8),
        upper in any::<bool>(),
        trailers in any::<bool>(),
        points in prop::collection::vec(any::<usize>(), 0..12),
        leftover in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let encoded = encode_chunked(&body, &sizes, &exts, upper, trailers);
        let input = [&encoded[..], &leftover[..]].concat();
        let pieces = split_at_points(&input, &points);
        let out = decode(&pieces, &["GET"], Http1Limits::default(), true);
        prop_assert_eq!(out.error.clone(), None);
        prop_assert_eq!(&out.only().body, &body);
        prop_assert_eq!(out.only().end, Some(true));
        prop_assert_eq!(out.consumed, encoded.len());
    }

    #[test]
    fn content_length_round_trip(
        body in prop::collection::vec(any::<u8>(), 0..600),
        points in prop::collection::vec(any::<usize>(), 0..12),
        leftover in prop::collection::vec(any::<u8>(), 0..8),
        close in any::<bool>(),
    ) {
        let conn = if close { "Connection: close\r\n" } else { "" };
        let head = format!("HTTP/1.1 200 OK\r\n{conn}Content-Length: {}\r\n\r\n", body.len());
        let input = [head.as_bytes(), &body, &leftover].concat();
        let pieces = split_at_points(&input, &points);
        let out = decode(&pieces, &["POST"], Http1Limits::default(), true);
        prop_assert_eq!(out.error.clone(), None);
        prop_assert_eq!(&out.only().body, &body);
        prop_assert_eq!(out.only().end, Some(!close));
        prop_assert_eq!(out.consumed, head.len() + body.len());
    }

    #[test]
    fn arbitrary_bytes_agree_whole_and_split(
        input in prop::collection::vec(any::<u8>(), 0..200),
        points in prop::collection::vec(any::<usize>(), 0..6),
        prefix in 0usize..4,
    ) {
        // Mostly-garbage input behind a plausible prefix must still give the
        // same outcome however it is split.
        let prefixes: [&[u8]; 4] = [
            b"",
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n",
        ];
        let input = [prefixes[prefix], &input[..]].concat();
        let limits = small(|l| { l.max_head_size = 128; l.max_chunk_line = 16; l.max_trailer_size = 32 });
        let whole = decode(&[&input], &["GET", "GET"], limits, true);
        let pieces = split_at_points(&input, &points);
        prop_assert_eq!(decode(&pieces, &["GET", "GET"], limits, true), whole);
    }
}
