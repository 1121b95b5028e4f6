//! Fuzz `codec::sse`: arbitrary bytes, fed whole and in arbitrary chunks,
//! with a small limit. Checks: no panic, the size bound holds for every
//! event, and the chunking does not change the items or the end state.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire::codec::sse::{SseConfig, SseDecoder, SseEnd, SseItem};

const LIMIT: usize = 4096;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    /// Chunk sizes, used cyclically (0 = an empty chunk).
    sizes: Vec<u8>,
    /// Use a tiny limit instead of `LIMIT`, to hit the overflow paths often.
    tiny: Option<u8>,
    stream: &'a [u8],
}

type Outcome = (Vec<SseItem>, SseEnd, String, Option<std::time::Duration>);

fn decode<'a>(chunks: impl Iterator<Item = &'a [u8]>, limit: usize) -> Outcome {
    let mut dec = SseDecoder::with_config(SseConfig {
        max_event_size: limit,
    });
    let mut items = Vec::new();
    for chunk in chunks {
        dec.feed(chunk, |item| items.push(item));
    }
    let end = dec.finish();
    (items, end, dec.last_event_id().to_owned(), dec.retry())
}

fuzz_target!(|input: Input<'_>| {
    let limit = input.tiny.map_or(LIMIT, usize::from);
    let stream = input.stream;

    let whole = decode(std::iter::once(stream), limit);
    for item in &whole.0 {
        if let SseItem::Event(e) = item {
            // The default type "message" is not buffered, so not counted.
            let ty = if e.event == "message" {
                0
            } else {
                e.event.len()
            };
            assert!(ty + e.data.len() <= limit, "event over the limit");
            assert!(e.id.len() <= limit, "id over the limit");
        }
    }
    assert!(whole.2.len() <= limit);

    let sizes: &[u8] = if input.sizes.is_empty() {
        &[1]
    } else {
        &input.sizes
    };
    let mut rest = stream;
    let mut chunks = Vec::new();
    let mut empty_run = 0;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let mut n = usize::from(size).min(rest.len());
        // Empty chunks are allowed, but a list of zeros must still progress.
        empty_run = if n == 0 { empty_run + 1 } else { 0 };
        if empty_run > 2 {
            n = 1;
            empty_run = 0;
        }
        let (a, b) = rest.split_at(n);
        chunks.push(a);
        rest = b;
    }
    let chunked = decode(chunks.into_iter(), limit);
    assert_eq!(whole, chunked, "chunking changed the result");
});
