//! stdio transport: one JSON message per line on stdin/stdout.
//!
//! The main thread reads stdin; `tools/call` and `tasks/result` requests
//! (and 2026-07-28 `subscriptions/listen` streams) each run on their own
//! thread (a slow call never blocks others), the rest are answered inline.
//! Every write to stdout is one whole line under a lock, flushed.

use crate::opts::{EraMode, PreInit};
use crate::protocol::{
    classify, error_response, handle_notification, handle_request, lock, request_era, response,
    serve_subscription, subscribe, Ctx, Era, Incoming, Outbound, Outcome, Peer,
};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

struct StdoutSink {
    out: Mutex<std::io::Stdout>,
}

impl StdoutSink {
    fn line(&self, text: &str) -> bool {
        let mut out = lock(&self.out);
        let mut buf = Vec::with_capacity(text.len() + 1);
        buf.extend_from_slice(text.as_bytes());
        buf.push(b'\n');
        match out.write_all(&buf).and_then(|()| out.flush()) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("mcpwire-test-server: stdout write failed: {e}");
                false
            }
        }
    }
}

impl Outbound for StdoutSink {
    fn send(&self, msg: &Value) -> bool {
        self.line(&msg.to_string())
    }
    fn send_raw(&self, text: &str) -> bool {
        self.line(text)
    }
}

fn finish(sink: &StdoutSink, id: &Value, outcome: Outcome) {
    match outcome {
        Outcome::Reply(v) | Outcome::ExpireSession(v) | Outcome::SseDrop { reply: Some(v), .. } => {
            sink.send(&v);
        }
        Outcome::SseDrop { reply: None, .. } => {
            sink.send(&response(
                id,
                json!({"content": [{"type": "text", "text": "sse_drop only has an effect over HTTP"}],
                       "isError": true, "resultType": "complete"}),
            ));
        }
        Outcome::Silent => {}
        Outcome::Crash { code, message } => {
            eprintln!("{message}");
            std::process::exit(code);
        }
        Outcome::Http500 => {
            sink.send(&response(
                id,
                json!({"content": [{"type": "text", "text": "http_500 only has an effect over HTTP"}],
                       "isError": true}),
            ));
        }
    }
}

/// `stop_reading`: answers, then never reads stdin again (the pipe fills
/// up on the client's side), sending `method` requests every `every_ms`
/// until the process ends (`--max-lifetime`, a signal).
fn stop_reading(sink: &StdoutSink, id: &Value, args: &Value) -> ! {
    sink.send(&response(
        id,
        crate::protocol::text_result("not reading stdin any more"),
    ));
    let every = args["every_ms"].as_u64().unwrap_or(0);
    let method = args["method"].as_str().unwrap_or("ping");
    eprintln!("mcpwire-test-server: not reading stdin any more");
    let mut n = 0u64;
    loop {
        if every == 0 {
            std::thread::park();
            continue;
        }
        std::thread::sleep(std::time::Duration::from_millis(every));
        sink.send(&json!({"jsonrpc": "2.0", "id": format!("flood-{n}"), "method": method}));
        n += 1;
    }
}

pub fn run(ctx: Arc<Ctx>) -> ! {
    let sink = Arc::new(StdoutSink {
        out: Mutex::new(std::io::stdout()),
    });
    let peer = Arc::new(Peer::default());
    // Legacy tasks' status notifications: straight to stdout.
    let notify_sink = sink.clone();
    peer.set_notifier(Arc::new(move |msg: &Value| notify_sink.send(msg)));
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = Vec::new();
    let mut initialized = false;
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("mcpwire-test-server: stdin read failed: {e}");
                break;
            }
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let msg: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                ctx.log.invalid("stdio", &line);
                eprintln!("mcpwire-test-server: unparsable line: {e}");
                sink.send(&error_response(&Value::Null, -32700, "Parse error"));
                continue;
            }
        };
        ctx.log.message("stdio", &msg);
        if let Incoming::Request { method, .. } = classify(&msg) {
            if method == "initialize" {
                initialized = true;
            } else if !initialized && method != "ping" && pre_init(&ctx) {
                continue;
            }
        }
        match classify(&msg) {
            Incoming::Request { id, method, params }
                if method == "tools/call" && params["name"] == "stop_reading" =>
            {
                stop_reading(&sink, &id, &params["arguments"]);
            }
            Incoming::Request { id, method, params } => {
                let era = match request_era(&ctx, &id, &method, &params) {
                    Ok(era) => era,
                    Err(refusal) => {
                        sink.send(&refusal);
                        continue;
                    }
                };
                let cancel = peer.begin(&id);
                if era == Era::Modern && method == "subscriptions/listen" {
                    // Registered before the next line is read, served on
                    // a thread of its own until cancelled.
                    match subscribe(&ctx, &id, &params) {
                        Ok(sub) => {
                            let (ctx, peer, sink) = (ctx.clone(), peer.clone(), sink.clone());
                            std::thread::spawn(move || {
                                let outcome = serve_subscription(&ctx, &id, sub, &cancel, &*sink);
                                complete(&peer, &sink, &id, &cancel, outcome);
                            });
                        }
                        Err(_) => {
                            let outcome = handle_request(
                                &ctx, &peer, era, &id, &method, &params, &cancel, &*sink,
                            );
                            complete(&peer, &sink, &id, &cancel, outcome);
                        }
                    }
                } else if method == "tools/call" || method == "tasks/result" {
                    let (ctx, peer, sink) = (ctx.clone(), peer.clone(), sink.clone());
                    std::thread::spawn(move || {
                        let outcome = handle_request(
                            &ctx, &peer, era, &id, &method, &params, &cancel, &*sink,
                        );
                        complete(&peer, &sink, &id, &cancel, outcome);
                    });
                } else {
                    let outcome =
                        handle_request(&ctx, &peer, era, &id, &method, &params, &cancel, &*sink);
                    complete(&peer, &sink, &id, &cancel, outcome);
                }
            }
            Incoming::Notification { method, params } => {
                handle_notification(&ctx, &peer, &method, &params);
            }
            Incoming::Response { id, message } => {
                if !peer.deliver(&id, message) {
                    eprintln!("mcpwire-test-server: response with unknown id {id}");
                }
            }
            Incoming::Invalid { id, reason } => {
                sink.send(&error_response(
                    &id,
                    -32600,
                    &format!("Invalid Request: {reason}"),
                ));
            }
        }
    }
    ctx.log.event("stdin_eof", json!({}));
    if ctx.opts.ignore_stdin_eof {
        linger();
    }
    crate::note("stdin closed, exiting");
    std::process::exit(0)
}

/// How long a server told to ignore its stdin's end outlives it: long
/// enough for any close a test watches (grace, SIGTERM, SIGKILL), short
/// enough that a test process which ends first leaves nothing behind.
const LINGER: std::time::Duration = std::time::Duration::from_secs(30);

/// `--ignore-stdin-eof`: stdin ended; serve on (or sit) for [`LINGER`],
/// then exit by itself.
pub(crate) fn linger() -> ! {
    crate::note(&format!(
        "stdin closed, ignoring it for {} s (--ignore-stdin-eof)",
        LINGER.as_secs()
    ));
    std::thread::sleep(LINGER);
    crate::note(&format!(
        "exiting {} s after stdin closed",
        LINGER.as_secs()
    ));
    std::process::exit(0)
}

/// A request before `initialize` (legacy era, `--pre-init`): whether it
/// was dealt with (no answer); `error` answers it as usual.
fn pre_init(ctx: &Ctx) -> bool {
    if ctx.opts.era != EraMode::Legacy {
        return false;
    }
    match ctx.opts.pre_init {
        PreInit::Error => false,
        PreInit::Silent => true,
        PreInit::Exit => {
            // What the official Rust SDK before 3.x prints and does.
            eprintln!("Error: ConnectionClosed(\"initialized request\")");
            std::process::exit(1)
        }
        PreInit::CloseStdout => {
            close_stdout();
            eprintln!("mcpwire-test-server: closed stdout (--pre-init close-stdout)");
            true
        }
    }
}

/// Closes file descriptor 1 (the process goes on reading stdin).
#[cfg(unix)]
#[allow(unsafe_code)]
fn close_stdout() {
    use std::os::fd::FromRawFd;
    let _ = std::io::stdout().flush();
    // SAFETY: fd 1 is this process's stdout; nothing writes to it after
    // this (every later write fails with EBADF and is logged).
    drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(1) });
}

/// Unix only (the suites that ask for it run there): ends the process.
#[cfg(not(unix))]
fn close_stdout() {
    eprintln!("mcpwire-test-server: --pre-init close-stdout is Unix only");
    std::process::exit(2)
}

fn complete(peer: &Peer, sink: &StdoutSink, id: &Value, cancel: &AtomicBool, outcome: Outcome) {
    peer.finish(id);
    if cancel.load(Ordering::SeqCst) {
        return; // cancelled: never answer
    }
    finish(sink, id, outcome);
}
