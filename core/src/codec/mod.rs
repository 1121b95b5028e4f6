//! Byte-level codecs: bytes in, frames out (and frames in, bytes out).
//!
//! Every decoder here is incremental (fed arbitrary chunks, giving the same
//! frames whatever the split), bounded (every buffer has a configurable limit
//! and exceeding it is a typed error the decoder recovers from) and
//! panic-free on any input (each has a fuzz target).
//!
//! - [`jsonl`]: newline-delimited JSON, the stdio transport's framing.
//! - [`sse`]: WHATWG `text/event-stream`, used by both HTTP transports.
//! - [`http1`]: an HTTP/1.1 client codec (request heads out, responses in).
//! - [`json`]: compact JSON out ([`json::Params`], a request's params as
//!   this crate's serializer writes them).
//! - `strings`: JSON strings at the byte level (escaped out, their plain
//!   runs found eight bytes at a time).
//! - `scan`: one JSON value's extent, checked as serde_json checks a
//!   `RawValue`, without serde (the common response's result).
//! - [`glimpse`]: what the first and last bytes of a frame too large to read
//!   say about it (a response's or request's id).

/// A table of the bytes for which `$pred` (over the byte `$c`) holds,
/// built at compile time: one lookup per byte where a byte is tested on
/// a hot path (a JSON string's escapes, an HTTP header's characters).
macro_rules! byte_table {
    (|$c:ident| $pred:expr) => {{
        let mut table = [false; 256];
        let mut b = 0;
        while b < 256 {
            let $c = b as u8;
            table[b] = $pred;
            b += 1;
        }
        table
    }};
}
pub(crate) use byte_table;

pub mod glimpse;
pub mod http1;
pub mod json;
pub mod jsonl;
pub(crate) mod scan;
pub mod sse;
pub(crate) mod strings;

/// A short, printable excerpt of `bytes` for error messages: at most
/// `max` bytes, lossily decoded, control characters escaped, `…` appended
/// when cut.
pub fn preview(bytes: &[u8], max: usize) -> String {
    let cut = bytes.len() > max;
    let head = &bytes[..bytes.len().min(max)];
    let text = String::from_utf8_lossy(head);
    let mut out = String::with_capacity(text.len() + 4);
    for ch in text.chars() {
        if ch.is_control() {
            out.extend(ch.escape_default());
        } else {
            out.push(ch);
        }
    }
    if cut {
        out.push('…');
    }
    out
}
