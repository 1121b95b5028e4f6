//! HTTP/1.1 response decoder: arbitrary bytes in arbitrary chunks, read as
//! a kept-alive connection carrying up to 8 responses. Invariants: no
//! panic, `consumed <= input` on every call (less only when the response
//! ended), body bytes never exceed input bytes, heads within the limits,
//! and the same outcome whether fed whole or chunked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::codec::http1::{Http1Error, Http1Limits, ResponseDecoder, ResponseEvent};

#[derive(Debug, PartialEq, Eq)]
enum Item {
    Head(u16, usize),
    /// Adjacent Body events merged: how the bytes were cut is not an outcome.
    Body(Vec<u8>),
    End(bool),
    Err(Http1Error),
}

fn push(
    items: &mut Vec<Item>,
    limits: &Http1Limits,
    fed: usize,
    body_total: &mut usize,
    ev: ResponseEvent<'_>,
) {
    match ev {
        ResponseEvent::Head(head) => {
            assert!(head.status >= 200 && head.status <= 599);
            assert!(head.version <= 1);
            assert!(head.headers.len() <= limits.max_headers);
            let size = head.reason.len()
                + head
                    .headers
                    .iter()
                    .map(|(n, v)| n.len() + v.len())
                    .sum::<usize>();
            assert!(size <= limits.max_head_size, "head content {size} > limit");
            items.push(Item::Head(head.status, head.headers.len()));
        }
        ResponseEvent::Body(bytes) => {
            assert!(!bytes.is_empty());
            *body_total += bytes.len();
            assert!(*body_total <= fed, "more body than input");
            match items.last_mut() {
                Some(Item::Body(prev)) => prev.extend_from_slice(bytes),
                _ => items.push(Item::Body(bytes.to_vec())),
            }
        }
        ResponseEvent::End { keep_alive } => items.push(Item::End(keep_alive)),
    }
}

/// Method of response `i`: bit `i` of `heads` set means HEAD.
fn method(heads: u8, i: usize) -> &'static str {
    if heads >> i & 1 == 1 {
        "HEAD"
    } else {
        "GET"
    }
}

fn run(limits: Http1Limits, heads: u8, chunks: &[&[u8]]) -> (Vec<Item>, Option<usize>) {
    let mut dec = ResponseDecoder::new(method(heads, 0), limits);
    let mut items = Vec::new();
    let (mut fed, mut consumed, mut body_total, mut response) = (0, 0, 0, 0);
    'chunks: for &chunk in chunks {
        let mut chunk = chunk;
        loop {
            fed += chunk.len();
            let result = dec.feed(chunk, |ev| {
                push(&mut items, &limits, fed, &mut body_total, ev)
            });
            match result {
                Ok(n) => {
                    assert!(n <= chunk.len());
                    consumed += n;
                    fed -= chunk.len() - n;
                    chunk = &chunk[n..];
                }
                Err(e) => {
                    assert_eq!(dec.error(), Some(&e));
                    items.push(Item::Err(e));
                    return (items, None);
                }
            }
            if !dec.is_done() {
                assert!(chunk.is_empty(), "stopped short without ending");
                break;
            }
            assert_eq!(dec.feed(b"x", |_| panic!("event after End")), Ok(0));
            response += 1;
            if response == 8 {
                break 'chunks;
            }
            dec.reset(method(heads, response));
            if chunk.is_empty() {
                break;
            }
        }
    }
    if let Err(e) = dec.finish_eof(|ev| push(&mut items, &limits, fed, &mut body_total, ev)) {
        items.push(Item::Err(e));
        return (items, None);
    }
    (items, Some(consumed))
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let heads = data[0];
    let steps = [1 + data[1] as usize % 64, 1 + data[2] as usize % 5];
    let limits = Http1Limits {
        max_head_size: 32 + data[3] as usize % 4 * 64,
        max_headers: 1 + data[3] as usize / 4 % 8,
        max_chunk_line: 3 + data[3] as usize / 32 % 4 * 8,
        max_trailer_size: 2 + data[3] as usize / 32 * 8,
    };
    let input = &data[4..];
    let whole = run(limits, heads, &[input]);
    let mut chunks = Vec::new();
    let mut rest = input;
    let mut i = 0;
    while !rest.is_empty() {
        let n = steps[i % 2].min(rest.len());
        chunks.push(&rest[..n]);
        rest = &rest[n..];
        i += 1;
    }
    assert_eq!(run(limits, heads, &chunks), whole);
});
