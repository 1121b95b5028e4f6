//! Decoder throughput in MB/s over a realistic stream (1 KiB JSON-RPC
//! responses), printed beside the practical ceiling: memchr counting the
//! newlines of the same bytes. A benchmark, not a test: nothing is asserted
//! about speed.
//!
//! `cargo bench -p mcpwire --bench codecs` (MCPWIRE_BENCH_SMOKE=1 for a
//! seconds-long run).

use std::hint::black_box;
use std::time::{Duration, Instant};

use mcpwire::codec::http1::{Http1Limits, ResponseDecoder, ResponseEvent};
use mcpwire::codec::jsonl::JsonlDecoder;
use mcpwire::codec::sse::{SseDecoder, SseItem};

/// Read size the adapters use.
const CHUNK: usize = 64 * 1024;

fn message(i: usize, size: usize) -> String {
    let head =
        format!(r#"{{"jsonrpc":"2.0","id":{i},"result":{{"content":[{{"type":"text","text":""#);
    let tail = r#""}],"isError":false}}"#;
    let fill = size.saturating_sub(head.len() + tail.len());
    let mut m = head;
    for j in 0..fill {
        m.push((b'a' + (j % 26) as u8) as char);
    }
    m.push_str(tail);
    m
}

fn jsonl_stream(total: usize) -> Vec<u8> {
    let mut s = Vec::with_capacity(total + 2048);
    let mut i = 0;
    while s.len() < total {
        s.extend_from_slice(message(i, 1023).as_bytes());
        s.push(b'\n');
        i += 1;
    }
    s
}

fn sse_stream(total: usize) -> Vec<u8> {
    let mut s = Vec::with_capacity(total + 2048);
    let mut i = 0;
    while s.len() < total {
        s.extend_from_slice(format!("id: {i}\nevent: message\ndata: ").as_bytes());
        s.extend_from_slice(message(i, 1000).as_bytes());
        s.extend_from_slice(b"\n\n");
        i += 1;
    }
    s
}

fn chunked_body(body: &[u8]) -> Vec<u8> {
    let mut s =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for c in body.chunks(4096) {
        s.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        s.extend_from_slice(c);
        s.extend_from_slice(b"\r\n");
    }
    s.extend_from_slice(b"0\r\n\r\n");
    s
}

/// Median MB/s of `runs` passes of `f` over `bytes` bytes.
fn measure(bytes: usize, runs: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut rates = Vec::with_capacity(runs);
    let mut check = 0;
    for _ in 0..runs {
        let t = Instant::now();
        check += f();
        let dt = t.elapsed().max(Duration::from_nanos(1));
        rates.push(bytes as f64 / dt.as_secs_f64() / 1e6);
    }
    black_box(check);
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    rates[rates.len() / 2]
}

fn main() {
    let smoke = std::env::var_os("MCPWIRE_BENCH_SMOKE").is_some();
    let (total, runs) = if smoke { (1 << 20, 3) } else { (64 << 20, 11) };

    let jsonl = jsonl_stream(total);
    let sse = sse_stream(total);
    let http = chunked_body(&sse);

    let ceiling = measure(jsonl.len(), runs, || {
        jsonl
            .chunks(CHUNK)
            .map(|c| memchr::memchr_iter(b'\n', c).count())
            .sum()
    });
    let framing = measure(jsonl.len(), runs, || {
        let mut dec = JsonlDecoder::new();
        let mut n = 0;
        for c in jsonl.chunks(CHUNK) {
            dec.feed(c, |l| {
                n += l.map_or(0, |l| black_box(l).len().min(1));
            });
        }
        n
    });
    let framing_small = measure(jsonl.len(), runs, || {
        let mut dec = JsonlDecoder::new();
        let mut n = 0;
        for c in jsonl.chunks(1500) {
            dec.feed(c, |l| {
                n += l.map_or(0, |l| black_box(l).len().min(1));
            });
        }
        n
    });
    let framing_json = measure(jsonl.len(), runs, || {
        let mut dec = JsonlDecoder::new();
        let mut n = 0;
        for c in jsonl.chunks(CHUNK) {
            dec.feed_json::<Box<serde_json::value::RawValue>>(c, |f| {
                if let mcpwire::codec::jsonl::Frame::Message(_) = f {
                    n += 1;
                }
            });
        }
        n
    });
    let sse_rate = measure(sse.len(), runs, || {
        let mut dec = SseDecoder::new();
        let mut n = 0;
        for c in sse.chunks(CHUNK) {
            dec.feed(c, |item| {
                if let SseItem::Event(e) = item {
                    n += black_box(e.data.len()).min(1);
                }
            });
        }
        n
    });
    let http_rate = measure(http.len(), runs, || {
        let mut dec = ResponseDecoder::new("GET", Http1Limits::default());
        let mut n = 0;
        for c in http.chunks(CHUNK) {
            let mut at = 0;
            while at < c.len() {
                let used = dec
                    .feed(&c[at..], |e| {
                        if let ResponseEvent::Body(b) = e {
                            n += black_box(b).len();
                        }
                    })
                    .expect("valid response");
                if used == 0 {
                    break;
                }
                at += used;
            }
        }
        n
    });

    println!(
        "codec throughput, {} MiB stream of ~1 KiB JSON-RPC responses, {}-byte reads, median of {runs}",
        total >> 20,
        CHUNK
    );
    println!("{:<44} {:>10} {:>10}", "decoder", "MB/s", "x ceiling");
    let row = |name: &str, rate: f64| {
        println!("{name:<44} {rate:>10.0} {:>10.2}", rate / ceiling);
    };
    row("memchr newline count (ceiling)", ceiling);
    row("jsonl framing (64 KiB reads)", framing);
    row("jsonl framing (1500-byte reads)", framing_small);
    row("jsonl framing + JSON validation (RawValue)", framing_json);
    row("sse events (64 KiB reads)", sse_rate);
    row("http1 chunked body (64 KiB reads)", http_rate);
}
