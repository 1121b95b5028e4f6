//! The measuring loops, written once for every client.
//!
//! A client is added by implementing [`AsyncClient`] (any async runtime:
//! the runtime only provides `block_on`) or [`BlockingClient`], then one
//! line in `clients::CLIENTS`. The loops here do the rest the same way for
//! everyone: warm-up, timed runs, a latency per call, peak RSS.
//!
//! ```text
//! connect ─► idle RSS ─► warm-up (untimed) ─► runs × { calls, ≤ inflight at once } ─► peak RSS ─► close
//! ```

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use mcpwire_bench::proto::Call;

use crate::scenario::{Job, Measured, Workload};

/// Any error a client reports; the run stops at the first one.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// Where the server is, as the client process set it up.
#[derive(Debug, Clone)]
pub enum Target {
    /// Spawn `command args…` (the echo server, stdio mode); `fresh`: a
    /// client that remembers eras forgets the one found before.
    Stdio {
        command: String,
        args: Vec<String>,
        fresh: bool,
    },
    /// The Streamable HTTP endpoint of an already running echo server.
    Http { url: String },
}

/// A client library driven from async code. `call` may be polled many
/// times concurrently (the in-flight scenarios keep up to 1,024 calls of
/// the same client pending in one task).
#[allow(async_fn_in_trait)] // single-threaded executors only: no Send needed
pub trait AsyncClient: Sized {
    /// Connects and completes the `initialize` handshake.
    async fn connect(target: &Target) -> Result<Self, Error>;
    /// One `tools/call`; returns the bytes of text in the result.
    async fn call(&self, call: &Call) -> Result<usize, Error>;
    /// Closes gracefully (stdio: until the server exited).
    async fn close(self) -> Result<(), Error>;
}

/// A blocking client library. For `inflight > 1` the loop calls it from
/// that many threads at once.
pub trait BlockingClient: Sized + Sync {
    /// Connects and completes the `initialize` handshake.
    fn connect(target: &Target) -> Result<Self, Error>;
    /// One `tools/call`; returns the bytes of text in the result.
    fn call(&self, call: &Call) -> Result<usize, Error>;
    /// Closes gracefully (stdio: until the server exited).
    fn close(self) -> Result<(), Error>;
}

/// Runs `job` with an async client; the caller wraps this in its
/// runtime's `block_on`.
pub async fn run_async<C: AsyncClient>(job: &Job, target: &Target) -> Result<Measured, Error> {
    let v = &job.variant;
    match v.workload {
        Workload::Calls {
            call,
            calls,
            inflight,
        } => {
            let call = call.call();
            let client = C::connect(target).await?;
            let mut rec = Recorder::new(calls * v.runs);
            async_calls(&client, &call, v.warmup, inflight, None).await?;
            for run in 0..v.runs {
                let start = Instant::now();
                async_calls(&client, &call, calls, inflight, Some((&rec, run * calls))).await?;
                rec.run(calls, start.elapsed());
            }
            let m = rec.finish();
            client.close().await?;
            Ok(m)
        }
        Workload::Connect { cycles, .. } => {
            let mut rec = Recorder::new(cycles * v.runs);
            for _ in 0..v.warmup {
                C::connect(target).await?.close().await?;
            }
            for run in 0..v.runs {
                let start = Instant::now();
                for i in 0..cycles {
                    let t = Instant::now();
                    C::connect(target).await?.close().await?;
                    rec.record(run * cycles + i, t.elapsed());
                }
                rec.run(cycles, start.elapsed());
            }
            Ok(rec.finish())
        }
    }
}

/// `n` calls, at most `inflight` pending, all polled from this task.
async fn async_calls<C: AsyncClient>(
    client: &C,
    call: &Call,
    n: usize,
    inflight: usize,
    rec: Option<(&Recorder, usize)>,
) -> Result<(), Error> {
    let timed = |i: usize| async move {
        let t = Instant::now();
        let got = client.call(call).await?;
        check(call, got)?;
        if let Some((rec, base)) = rec {
            rec.record(base + i, t.elapsed());
        }
        Ok::<(), Error>(())
    };
    if inflight <= 1 {
        for i in 0..n {
            timed(i).await?;
        }
        return Ok(());
    }
    let mut pending = FuturesUnordered::new();
    let mut issued = 0;
    while issued < n.min(inflight) {
        pending.push(timed(issued));
        issued += 1;
    }
    while let Some(done) = pending.next().await {
        done?;
        if issued < n {
            pending.push(timed(issued));
            issued += 1;
        }
    }
    Ok(())
}

/// Runs `job` with a blocking client (threads for `inflight > 1`).
pub fn run_blocking<C: BlockingClient>(job: &Job, target: &Target) -> Result<Measured, Error> {
    let v = &job.variant;
    match v.workload {
        Workload::Calls {
            call,
            calls,
            inflight,
        } => {
            let call = call.call();
            let client = C::connect(target)?;
            let mut rec = Recorder::new(calls * v.runs);
            if inflight <= 1 {
                sequential(&client, &call, v.warmup, None)?;
                for run in 0..v.runs {
                    let start = Instant::now();
                    sequential(&client, &call, calls, Some((&rec, run * calls)))?;
                    rec.run(calls, start.elapsed());
                }
            } else {
                let threads = inflight.min(calls.max(v.warmup));
                let elapsed = in_flight(&client, &call, threads, v.warmup, calls, v.runs, &rec)?;
                for d in elapsed {
                    rec.run(calls, d);
                }
            }
            let m = rec.finish();
            client.close()?;
            Ok(m)
        }
        Workload::Connect { cycles, .. } => {
            let mut rec = Recorder::new(cycles * v.runs);
            for _ in 0..v.warmup {
                C::connect(target)?.close()?;
            }
            for run in 0..v.runs {
                let start = Instant::now();
                for i in 0..cycles {
                    let t = Instant::now();
                    C::connect(target)?.close()?;
                    rec.record(run * cycles + i, t.elapsed());
                }
                rec.run(cycles, start.elapsed());
            }
            Ok(rec.finish())
        }
    }
}

/// One call, checked, its latency recorded under index `i` if timed.
fn timed_call<C: BlockingClient>(
    client: &C,
    call: &Call,
    i: usize,
    rec: Option<(&Recorder, usize)>,
) -> Result<(), Error> {
    let t = Instant::now();
    let got = client.call(call)?;
    check(call, got)?;
    if let Some((rec, base)) = rec {
        rec.record(base + i, t.elapsed());
    }
    Ok(())
}

fn sequential<C: BlockingClient>(
    client: &C,
    call: &Call,
    n: usize,
    rec: Option<(&Recorder, usize)>,
) -> Result<(), Error> {
    (0..n).try_for_each(|i| timed_call(client, call, i, rec))
}

/// `threads` threads, started once (their start-up is not the client's
/// cost), make `warmup` calls, then `runs` runs of `calls` calls; returns
/// each run's duration, from the moment the threads are let go to the
/// moment the last call ended.
fn in_flight<C: BlockingClient>(
    client: &C,
    call: &Call,
    threads: usize,
    warmup: usize,
    calls: usize,
    runs: usize,
    rec: &Recorder,
) -> Result<Vec<Duration>, Error> {
    let gate = Barrier::new(threads + 1);
    let next = AtomicUsize::new(0);
    // The calls of the round under way and where its latencies go.
    let round = Mutex::new((0usize, None::<usize>));
    let failed = Mutex::new(None::<String>);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                gate.wait();
                let (n, base) = *round.lock().unwrap();
                if n == usize::MAX {
                    return;
                }
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    if let Err(e) = timed_call(client, call, i, base.map(|b| (rec, b))) {
                        failed.lock().unwrap().get_or_insert(e.to_string());
                    }
                }
                gate.wait();
            });
        }
        let go = |n: usize, base: Option<usize>| {
            *round.lock().unwrap() = (n, base);
            next.store(0, Ordering::Relaxed);
            let start = Instant::now();
            gate.wait();
            gate.wait();
            start.elapsed()
        };
        go(warmup, None);
        let elapsed: Vec<Duration> = (0..runs).map(|run| go(calls, Some(run * calls))).collect();
        *round.lock().unwrap() = (usize::MAX, None);
        gate.wait();
        match failed.lock().unwrap().take() {
            Some(e) => Err(e.into()),
            None => Ok(elapsed),
        }
    })
}

/// Fails unless the result carried the expected text.
pub fn check(call: &Call, got: usize) -> Result<(), Error> {
    if got == call.expect {
        Ok(())
    } else {
        Err(format!(
            "{}: expected {} bytes of text, got {got}",
            call.tool, call.expect
        )
        .into())
    }
}

/// Latencies (one slot per timed call, allocated and touched up front so
/// that they do not count as the client's memory) and run rates.
pub struct Recorder {
    slots: Vec<AtomicU32>,
    rates: Vec<f64>,
    idle_rss_kib: u64,
}

impl Recorder {
    /// Room for `n` latencies; also takes the idle RSS (call it once
    /// connected, before the first call).
    pub fn new(n: usize) -> Recorder {
        let slots: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(u32::MAX)).collect();
        Recorder {
            slots,
            rates: Vec::new(),
            idle_rss_kib: proc_status_kib("VmRSS:"),
        }
    }

    /// Latency of call `i` (capped at ~4.3 s).
    pub fn record(&self, i: usize, d: Duration) {
        let ns = u32::try_from(d.as_nanos()).unwrap_or(u32::MAX - 1);
        if let Some(slot) = self.slots.get(i) {
            slot.store(ns, Ordering::Relaxed);
        }
    }

    /// One timed run of `n` calls took `d`.
    pub fn run(&mut self, n: usize, d: Duration) {
        self.rates.push(n as f64 / d.as_secs_f64());
    }

    /// The summary, with the peak RSS so far.
    pub fn finish(self) -> Measured {
        let mut lat: Vec<u32> = self
            .slots
            .into_iter()
            .map(AtomicU32::into_inner)
            .filter(|&ns| ns != u32::MAX)
            .collect();
        // Selection, not a sort: linear in the calls, so that the harness
        // adds the same few instructions to every call whatever their
        // number (`profile` takes the difference of N and 2N calls).
        let mut pct = |p: usize| {
            if lat.is_empty() {
                0
            } else {
                let at = (lat.len() * p / 100).min(lat.len() - 1);
                u64::from(*lat.select_nth_unstable(at).1)
            }
        };
        Measured {
            rates: self.rates,
            p50_ns: pct(50),
            p99_ns: pct(99),
            peak_rss_kib: proc_status_kib("VmHWM:"),
            idle_rss_kib: self.idle_rss_kib,
        }
    }
}

/// A `kB` field of /proc/self/status (0 where there is none).
pub fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}
