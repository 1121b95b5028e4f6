//! Throughput and memory of `rpc::Engine` alone (no I/O, no codec).
//!
//! - request/response pairs per second: `request()` → poll `Send` →
//!   `handle_message(response)` → poll `Complete`; median of 5 runs of
//!   1,000,000 pairs, with 1 and with 64 requests in flight (and once with
//!   progress tokens merged into params);
//! - bytes per pending request with 100,000 pending, without params, from a
//!   counting global allocator (live bytes delta / 100,000).
//!
//! Run: `cargo bench -p mcpwire --bench engine`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::hint::black_box;
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpwire::rpc::{Engine, EngineConfig, Output, RequestOptions};
use serde_json::value::RawValue;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PAIRS: u64 = 1_000_000;
const RUNS: usize = 5;

fn config(max_pending: usize) -> EngineConfig {
    EngineConfig::default().max_pending(max_pending)
}

fn response(buf: &mut Vec<u8>, id: u64) {
    buf.clear();
    let _ = write!(
        buf,
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"hi"}}]}}}}"#
    );
}

fn drain(engine: &mut Engine) -> usize {
    let mut n = 0;
    while let Some(out) = engine.poll_output() {
        if let Output::Complete {
            outcome: Err(e), ..
        } = &out
        {
            panic!("bench request failed: {e}");
        }
        black_box(out);
        n += 1;
    }
    n
}

/// Pairs per second with `in_flight` requests outstanding.
fn pairs_per_second(in_flight: usize, progress: bool) -> f64 {
    let params =
        RawValue::from_string(r#"{"name":"echo","arguments":{"message":"hi"}}"#.into()).unwrap();
    let opts = RequestOptions::default().progress(progress);
    let mut engine = Engine::new(config(in_flight.max(1)));
    let mut buf = Vec::with_capacity(128);
    let mut ids = VecDeque::with_capacity(in_flight);
    let now = Instant::now();
    let start = Instant::now();
    for _ in 0..in_flight - 1 {
        ids.push_back(
            engine
                .request(now, "tools/call", Some(&params), opts)
                .unwrap(),
        );
        drain(&mut engine);
    }
    let mut outputs = 0;
    for _ in 0..PAIRS {
        ids.push_back(
            engine
                .request(now, "tools/call", Some(&params), opts)
                .unwrap(),
        );
        outputs += drain(&mut engine);
        let id = ids.pop_front().unwrap();
        response(&mut buf, id);
        engine.handle_message(now, &buf);
        outputs += drain(&mut engine);
        black_box(engine.poll_timeout());
    }
    let elapsed = start.elapsed();
    assert_eq!(outputs as u64, 2 * PAIRS);
    assert_eq!(engine.stats().completed_ok, PAIRS);
    PAIRS as f64 / elapsed.as_secs_f64()
}

fn median(f: impl Fn() -> f64) -> (f64, f64, f64) {
    let mut runs: Vec<f64> = (0..RUNS).map(|_| f()).collect();
    runs.sort_by(f64::total_cmp);
    (runs[RUNS / 2], runs[0], runs[RUNS - 1])
}

fn bytes_per_pending(n: usize) -> (f64, f64) {
    let now = Instant::now();
    let before = LIVE.load(Ordering::Relaxed);
    let mut engine = Engine::new(config(n));
    for _ in 0..n {
        engine
            .request(
                now,
                "tools/call",
                None,
                RequestOptions::default().timeout(Duration::from_secs(60)),
            )
            .unwrap();
        drain(&mut engine);
    }
    let after = LIVE.load(Ordering::Relaxed);
    let per = (after - before) as f64 / n as f64;
    // Timeouts fire for all of them: everything is released again.
    engine.handle_timeout(now + Duration::from_secs(61));
    while engine.poll_output().is_some() {}
    let _ = engine.poll_timeout();
    let drained = LIVE.load(Ordering::Relaxed) as f64 - before as f64;
    black_box(&engine);
    (per, drained / n as f64)
}

fn main() {
    if cfg!(debug_assertions) {
        println!("(debug build: numbers are not meaningful; use `cargo bench`)");
    }
    for (label, in_flight, progress) in [
        ("1 in flight", 1, false),
        ("64 in flight", 64, false),
        ("1 in flight, progress token merged", 1, true),
    ] {
        let (med, min, max) = median(|| pairs_per_second(in_flight, progress));
        println!(
            "engine pairs/s, {label:<36} median {:>10.0}  (min {:.0}, max {:.0}; {PAIRS} pairs x {RUNS} runs)",
            med, min, max
        );
    }
    let (per, after_timeout) = bytes_per_pending(100_000);
    println!("engine bytes per pending request (100000 pending, no params): {per:.1}");
    println!("engine bytes per request still held after all timed out:       {after_timeout:.1}");
}
