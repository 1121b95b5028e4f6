//! JSONL decoder: arbitrary bytes in arbitrary chunks. Invariants: no panic,
//! no line longer than the limit or containing '\n', the buffer never over
//! its bound, and the same lines and reports (an over-long line's size and
//! glimpse included) whether fed whole or chunked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire::codec::jsonl::{JsonlConfig, JsonlDecoder, JsonlError};

fn run(cfg: JsonlConfig, chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, JsonlError>> {
    let mut dec = JsonlDecoder::with_config(cfg);
    let mut out = Vec::new();
    for c in chunks {
        dec.feed(c, |l| match l {
            Ok(line) => {
                assert!(line.len() <= cfg.max_line_len);
                assert!(!line.contains(&b'\n'));
                // Exercise the JSON path as well; it must not panic.
                let _ = mcpwire::codec::jsonl::parse_raw(line);
                out.push(Ok(line.to_vec()));
            }
            Err(e @ JsonlError::LineTooLong { .. }) => out.push(Err(e)),
            Err(e) => panic!("unexpected mid-stream error {e:?}"),
        });
        assert!(dec.buffered() <= cfg.max_line_len + 1);
    }
    if let Some(e) = dec.finish() {
        assert!(matches!(
            e,
            JsonlError::TruncatedAtEof { .. } | JsonlError::LineTooLong { .. }
        ));
        out.push(Err(e));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let cfg = JsonlConfig {
        max_line_len: 1 + data[0] as usize * 4,
    };
    let step = 1 + data[1] as usize % 64;
    let body = &data[2..];
    let whole = run(cfg, &[body]);
    let chunks: Vec<&[u8]> = body.chunks(step).collect();
    assert_eq!(run(cfg, &chunks), whole);
});
