//! The scenarios of issue 9, each expanded into variants (one table row
//! group), and the job a client process is given.

use serde::{Deserialize, Serialize};

use mcpwire_bench::proto::Call;

/// How a client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transport {
    /// A child process speaking JSONL.
    Stdio,
    /// Streamable HTTP on 127.0.0.1; `sse` makes the server answer with
    /// SSE streams instead of JSON bodies.
    Http { sse: bool },
}

/// A bridge between the client and the echo server (scenario 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Via {
    /// None: the client talks to the echo server.
    #[default]
    Direct,
    /// stdio client → `mcpwire bridge --url` → the HTTP echo server.
    McpwireUrl,
    /// stdio client → `mcp-remote` (npm) → the HTTP echo server.
    McpRemote,
    /// HTTP client → `mcpwire bridge --listen` → the stdio echo server.
    McpwireListen,
    /// HTTP client → `supergateway --outputTransport streamableHttp
    /// --stateful` (npm) → the stdio echo server.
    Supergateway,
}

impl Via {
    /// Whether a peer from npm runs it.
    pub fn is_peer(self) -> bool {
        matches!(self, Via::McpRemote | Via::Supergateway)
    }
}

/// The tool call a variant repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallSpec {
    /// `echo` of the 100-byte argument.
    Echo,
    /// `big`, a text result of this many bytes.
    Big(usize),
}

impl CallSpec {
    pub fn call(self) -> Call {
        match self {
            CallSpec::Echo => Call::echo(),
            CallSpec::Big(n) => Call::big(n),
        }
    }
}

/// What one timed run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Workload {
    /// `calls` tool calls, at most `inflight` at a time, on one connection.
    Calls {
        call: CallSpec,
        calls: usize,
        inflight: usize,
    },
    /// `cycles` times: connect (spawn + initialize), then close, to a
    /// server that treats the era probe as `probe` says; `fresh`: each
    /// connect forgets the era found before (a first connect every time).
    Connect {
        cycles: usize,
        #[serde(default)]
        probe: ProbeReply,
        #[serde(default)]
        fresh: bool,
    },
}

/// What the stdio echo server does with a request before `initialize`
/// (the era probe of a client that probes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ProbeReply {
    /// An error (-32601).
    #[default]
    Error,
    /// Its process exits (`--pre-init exit`).
    Exits,
    /// No answer (`--pre-init silent`).
    Silent,
}

impl ProbeReply {
    /// The echo server's arguments for it.
    pub fn server_args(self) -> &'static [&'static str] {
        match self {
            ProbeReply::Error => &[],
            ProbeReply::Exits => &["--pre-init", "exit"],
            ProbeReply::Silent => &["--pre-init", "silent"],
        }
    }
}

/// One row group of the table: what every client does, the same way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variant {
    /// The scenario number of the issue (1–5; 6: bridges).
    pub scenario: u8,
    /// Row label, e.g. `stdio 10000 calls, 64 in flight`.
    pub label: String,
    /// How the client reaches the server (`transport` is the client's
    /// side of it).
    pub transport: Transport,
    /// A bridge between the client and the echo server, if any.
    #[serde(default)]
    pub via: Via,
    pub workload: Workload,
    /// Untimed calls (or cycles) before the timed runs.
    pub warmup: usize,
    /// Timed runs; calls/s is their median.
    pub runs: usize,
}

/// Names accepted on the command line.
pub const SCENARIOS: &[(&str, u8, &str)] = &[
    (
        "seq",
        1,
        "stdio, sequential tools/call echo of a 100-byte argument",
    ),
    (
        "inflight",
        2,
        "stdio, 1,000 and 10,000 calls with 64 and 1,024 in flight",
    ),
    ("big", 3, "stdio, 1 MiB tool result, sequential"),
    (
        "http",
        4,
        "Streamable HTTP on 127.0.0.1: sequential and 64 in flight, JSON and SSE",
    ),
    ("connect", 5, "stdio connect + initialize + close"),
    (
        "bridge",
        6,
        "sequential echo calls through mcpwire bridge, mcp-remote and supergateway, and direct",
    ),
];

/// The variants of scenario `n`, with the counts or, with
/// `smoke`, counts small enough for CI (seconds for everything).
pub fn variants(n: u8, smoke: bool) -> Vec<Variant> {
    let runs = if smoke { 1 } else { 5 };
    let scale = |full: usize, tiny: usize| if smoke { tiny } else { full };
    let calls = |transport, call, calls: usize, inflight: usize, warmup, label: String| Variant {
        scenario: n,
        label,
        transport,
        via: Via::Direct,
        workload: Workload::Calls {
            call,
            calls,
            inflight,
        },
        warmup,
        runs,
    };
    match n {
        1 => {
            let c = scale(20_000, 200);
            vec![calls(
                Transport::Stdio,
                CallSpec::Echo,
                c,
                1,
                c / 10,
                format!("stdio, {c} sequential echo calls"),
            )]
        }
        2 => {
            let mut v = Vec::new();
            for total in [1_000, 10_000] {
                for inflight in [64, 1_024] {
                    let c = scale(total, total / 10);
                    v.push(calls(
                        Transport::Stdio,
                        CallSpec::Echo,
                        c,
                        inflight,
                        c,
                        format!("stdio, {c} echo calls, {inflight} in flight"),
                    ));
                }
            }
            v
        }
        3 => {
            let c = scale(200, 5);
            vec![calls(
                Transport::Stdio,
                CallSpec::Big(1 << 20),
                c,
                1,
                c / 10,
                format!("stdio, {c} sequential calls, 1 MiB result"),
            )]
        }
        4 => {
            let mut v = Vec::new();
            for sse in [false, true] {
                let kind = if sse { "SSE" } else { "JSON" };
                for (inflight, total) in [(1, 5_000), (64, 10_000)] {
                    let c = scale(total, 50);
                    let how = if inflight == 1 {
                        "sequential".to_string()
                    } else {
                        format!("{inflight} in flight")
                    };
                    v.push(calls(
                        Transport::Http { sse },
                        CallSpec::Echo,
                        c,
                        inflight,
                        c / 10,
                        format!("HTTP {kind}, {c} echo calls, {how}"),
                    ));
                }
            }
            v
        }
        5 => {
            let c = scale(40, 3);
            let connect = |label: String, cycles, probe, fresh| Variant {
                scenario: 5,
                label,
                transport: Transport::Stdio,
                via: Via::Direct,
                workload: Workload::Connect {
                    cycles,
                    probe,
                    fresh,
                },
                warmup: if smoke { 1 } else { 5 },
                runs,
            };
            // A silent server costs mcpwire's first connect its probe's
            // second: fewer cycles.
            let s = scale(5, 1);
            vec![
                connect(
                    format!("stdio connect + initialize + close, {c} per run"),
                    c,
                    ProbeReply::Error,
                    false,
                ),
                connect(
                    format!("stdio connect + close, a server that exits when probed, first connect, {c} per run"),
                    c,
                    ProbeReply::Exits,
                    true,
                ),
                connect(
                    format!("stdio connect + close, a server that exits when probed, era remembered, {c} per run"),
                    c,
                    ProbeReply::Exits,
                    false,
                ),
                connect(
                    format!("stdio connect + close, a server silent when probed, first connect, {s} per run"),
                    s,
                    ProbeReply::Silent,
                    true,
                ),
                connect(
                    format!("stdio connect + close, a server silent when probed, era remembered, {c} per run"),
                    c,
                    ProbeReply::Silent,
                    false,
                ),
            ]
        }
        6 => {
            let c = scale(2_000, 50);
            let row = |transport, via, what: &str| {
                let mut v = calls(
                    transport,
                    CallSpec::Echo,
                    c,
                    1,
                    c / 10,
                    format!("bridge: {what}, {c} sequential echo calls"),
                );
                v.via = via;
                v
            };
            let json = Transport::Http { sse: false };
            vec![
                row(
                    Transport::Stdio,
                    Via::Direct,
                    "stdio client → stdio server (direct)",
                ),
                row(json, Via::Direct, "HTTP client → HTTP server (direct)"),
                row(
                    Transport::Stdio,
                    Via::McpwireUrl,
                    "stdio client → mcpwire bridge --url → HTTP server",
                ),
                row(
                    Transport::Stdio,
                    Via::McpRemote,
                    "stdio client → mcp-remote → HTTP server",
                ),
                row(
                    json,
                    Via::McpwireListen,
                    "HTTP client → mcpwire bridge --listen → stdio server",
                ),
                row(
                    json,
                    Via::Supergateway,
                    "HTTP client → supergateway → stdio server",
                ),
            ]
        }
        _ => Vec::new(),
    }
}

/// What the orchestrator hands a client process (as JSON on its command
/// line).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub variant: Variant,
    /// The echo server binary.
    pub server: String,
    /// Seconds after which the client process gives up.
    pub limit_secs: u64,
}

/// What a client process reports back (one `RESULT <json>` line).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Measured {
    /// Calls (or connect cycles) per second of each timed run.
    pub rates: Vec<f64>,
    /// Median and 99th percentile latency of every timed call, in ns.
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Peak RSS of the client process (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// RSS once connected, before the first call, KiB.
    pub idle_rss_kib: u64,
}

impl Measured {
    /// Reads a finished client process's `RESULT <json>` line; a failed
    /// process is its exit status and the last non-empty line of its stderr.
    pub fn from_output(out: &std::process::Output) -> Result<Measured, String> {
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) {
            Some(json) if out.status.success() => {
                serde_json::from_str(json).map_err(|e| e.to_string())
            }
            _ => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
                Err(format!("{}: {}", out.status, last.unwrap_or("no output")))
            }
        }
    }
}
