//! Drives one `rpc::Engine` with an arbitrary sequence of operations:
//! requests, notifications, arbitrary incoming bytes, structured (often
//! almost valid) messages, well-formed responses to pending ids, progress,
//! time advances and timeouts, cancels, server requests and answers, close,
//! and partial polling (so the outbound queue limit is hit).
//!
//! Invariants: no panic; every request completes exactly once (a final close
//! completes the rest); nothing is output after `Closed`; every `Send` is one
//! JSON text without a raw newline; `poll_timeout()` after
//! `handle_timeout(now)` is later than `now`.
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire::rpc::{Engine, EngineConfig, ErrorObject, Output, RequestId, RequestOptions};
use serde_json::value::RawValue;

#[derive(Arbitrary, Debug)]
struct Input {
    accept_batches: bool,
    max_pending: u8,
    max_queued_bytes: u16,
    max_server_requests: u8,
    /// Drain all outputs after each op (else only `Poll` drains).
    auto_drain: bool,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Request {
        method: Method,
        params: Params,
        timeout_ms: Option<u16>,
        progress: bool,
        reset: bool,
        max_total_ms: Option<u16>,
    },
    Notify {
        method: String,
        params: Params,
    },
    Bytes(Vec<u8>),
    Json(Vec<(Key, Val)>),
    Batch(Vec<Vec<(Key, Val)>>),
    Response {
        pick: u16,
        error: bool,
        result: Val,
    },
    Progress {
        pick: u16,
        progress: i32,
        total: Option<u16>,
    },
    Advance {
        ms: u32,
    },
    Timeout,
    Cancel {
        pick: u16,
        reason: String,
    },
    ServerRequest {
        id: Id,
        method: Method,
    },
    ServerCancel {
        id: Id,
    },
    Respond {
        id: Id,
        error: bool,
    },
    Poll {
        n: u8,
    },
    Close,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Method {
    Initialize,
    Ping,
    ToolsCall,
    RootsList,
    Sampling,
    Other,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Initialize => "initialize",
            Method::Ping => "ping",
            Method::ToolsCall => "tools/call",
            Method::RootsList => "roots/list",
            Method::Sampling => "sampling/createMessage",
            Method::Other => "x\n\"y\u{1}",
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Params {
    None,
    Object(Vec<(Key, Val)>),
    Array(Vec<Val>),
    Raw(String),
}

#[derive(Arbitrary, Debug, Clone)]
enum Id {
    Num(i8),
    Str(u8),
    Big(i64),
}

impl Id {
    fn request_id(&self) -> RequestId {
        match self {
            Id::Num(n) => RequestId::Number(i64::from(*n)),
            Id::Str(n) => RequestId::String(format!("s{n}")),
            Id::Big(n) => RequestId::Number(*n),
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Code,
    Message,
    Data,
    Meta,
    ProgressToken,
    Progress,
    Total,
    RequestId,
    Reason,
    Other(String),
}

#[derive(Arbitrary, Debug, Clone)]
enum Val {
    Null,
    Bool(bool),
    Int(i64),
    Small(u8),
    Float(f64),
    Str(String),
    Version,
    KnownMethod(Method),
    Obj(Vec<(Key, Val)>),
    Arr(Vec<Val>),
}

fn write_key(out: &mut String, key: &Key) {
    let name = match key {
        Key::Jsonrpc => "jsonrpc",
        Key::Id => "id",
        Key::Method => "method",
        Key::Params => "params",
        Key::Result => "result",
        Key::Error => "error",
        Key::Code => "code",
        Key::Message => "message",
        Key::Data => "data",
        Key::Meta => "_meta",
        Key::ProgressToken => "progressToken",
        Key::Progress => "progress",
        Key::Total => "total",
        Key::RequestId => "requestId",
        Key::Reason => "reason",
        Key::Other(s) => s,
    };
    out.push_str(&serde_json::to_string(name).unwrap_or_default());
}

fn write_obj(out: &mut String, members: &[(Key, Val)]) {
    out.push('{');
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_key(out, k);
        out.push(':');
        write_val(out, v);
    }
    out.push('}');
}

fn write_val(out: &mut String, val: &Val) {
    match val {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(n) => out.push_str(&n.to_string()),
        Val::Small(n) => out.push_str(&n.to_string()),
        Val::Float(f) if f.is_finite() => out.push_str(&f.to_string()),
        Val::Float(_) => out.push('0'),
        Val::Str(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
        Val::Version => out.push_str("\"2.0\""),
        Val::KnownMethod(m) => out.push_str(&serde_json::to_string(m.name()).unwrap_or_default()),
        Val::Obj(members) => write_obj(out, members),
        Val::Arr(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_val(out, v);
            }
            out.push(']');
        }
    }
}

fn raw(text: String) -> Option<Box<RawValue>> {
    RawValue::from_string(text).ok()
}

struct Harness {
    engine: Engine,
    now: Instant,
    issued: Vec<u64>,
    completed: HashSet<u64>,
    closed_seen: bool,
}

impl Harness {
    fn poll(&mut self, limit: usize) {
        for _ in 0..limit {
            let Some(out) = self.engine.poll_output() else {
                return;
            };
            assert!(!self.closed_seen, "output after Closed: {out:?}");
            match out {
                Output::Send { bytes, .. } => {
                    assert!(!bytes.contains(&b'\n'), "raw newline in a Send");
                    serde_json::from_slice::<&RawValue>(&bytes).expect("Send is JSON");
                }
                Output::Complete { id, .. } => {
                    assert!(self.issued.contains(&id), "completion of unknown id {id}");
                    assert!(self.completed.insert(id), "request {id} completed twice");
                }
                Output::Closed { .. } => self.closed_seen = true,
                _ => {}
            }
        }
    }

    fn pick(&self, pick: u16) -> u64 {
        if self.issued.is_empty() {
            u64::from(pick)
        } else {
            // Mostly an issued id (pending or done), sometimes a fresh one.
            let i = usize::from(pick) % (self.issued.len() + 1);
            self.issued
                .get(i)
                .copied()
                .unwrap_or(u64::from(pick) + 1_000_000)
        }
    }
}

fuzz_target!(|input: Input| {
    let config = EngineConfig::default()
        .default_timeout(Duration::from_millis(500))
        .max_pending(usize::from(input.max_pending))
        .max_queued_bytes(usize::from(input.max_queued_bytes))
        .max_server_requests(usize::from(input.max_server_requests))
        .accept_batches(input.accept_batches)
        .handle_request("roots/list")
        .handle_request("sampling/createMessage");
    let mut h = Harness {
        engine: Engine::new(config),
        now: Instant::now(),
        issued: Vec::new(),
        completed: HashSet::new(),
        closed_seen: false,
    };

    for op in &input.ops {
        let now = h.now;
        match op {
            Op::Request {
                method,
                params,
                timeout_ms,
                progress,
                reset,
                max_total_ms,
            } => {
                let mut opts = RequestOptions::default()
                    .progress(*progress)
                    .reset_timeout_on_progress(*reset);
                if let Some(t) = timeout_ms {
                    opts = opts.timeout(Duration::from_millis(u64::from(*t)));
                }
                if let Some(m) = max_total_ms {
                    opts = opts.max_total_timeout(Duration::from_millis(u64::from(*m)));
                }
                let params = params_raw(params);
                if let Ok(id) = h
                    .engine
                    .request(now, method.name(), params.as_deref(), opts)
                {
                    assert!(
                        h.issued.last().is_none_or(|last| id > *last),
                        "ids increase"
                    );
                    h.issued.push(id);
                }
            }
            Op::Notify { method, params } => {
                let params = params_raw(params);
                let _ = h.engine.notify(method, params.as_deref());
            }
            Op::Bytes(bytes) => {
                // A response's id is given back only for text that is one.
                if let Some(id) = h.engine.handle_message(now, bytes) {
                    assert!(std::str::from_utf8(bytes).is_ok(), "id {id} from non-UTF-8");
                }
            }
            Op::Json(members) => {
                let mut text = String::new();
                write_obj(&mut text, members);
                h.engine.handle_message(now, text.as_bytes());
            }
            Op::Batch(items) => {
                let mut text = String::from("[");
                for (i, members) in items.iter().enumerate() {
                    if i > 0 {
                        text.push(',');
                    }
                    write_obj(&mut text, members);
                }
                text.push(']');
                h.engine.handle_message(now, text.as_bytes());
            }
            Op::Response {
                pick,
                error,
                result,
            } => {
                let id = h.pick(*pick);
                let text = if *error {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32000,"message":"e"}}}}"#
                    )
                } else {
                    let mut r = String::new();
                    write_val(&mut r, result);
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{r}}}"#)
                };
                h.engine.handle_message(now, text.as_bytes());
            }
            Op::Progress {
                pick,
                progress,
                total,
            } => {
                let id = h.pick(*pick);
                let total = total
                    .map(|t| format!(r#","total":{t}"#))
                    .unwrap_or_default();
                let text = format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":{progress}{total}}}}}"#
                );
                h.engine.handle_message(now, text.as_bytes());
            }
            Op::Advance { ms } => {
                h.now += Duration::from_millis(u64::from(*ms));
                h.engine.handle_timeout(h.now);
                if let Some(next) = h.engine.poll_timeout() {
                    assert!(next > h.now, "poll_timeout not after handle_timeout");
                }
            }
            Op::Timeout => h.engine.handle_timeout(now),
            Op::Cancel { pick, reason } => {
                let id = h.pick(*pick);
                if h.engine.cancel(now, id, reason) {
                    // It was pending: issued, and not completed before.
                    assert!(h.issued.contains(&id) && !h.completed.contains(&id));
                }
            }
            Op::ServerRequest { id, method } => {
                let id = serde_json::to_string(&id.request_id()).unwrap_or_default();
                let text = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":{},"params":{{}}}}"#,
                    serde_json::to_string(method.name()).unwrap_or_default()
                );
                h.engine.handle_message(now, text.as_bytes());
            }
            Op::ServerCancel { id } => {
                let id = serde_json::to_string(&id.request_id()).unwrap_or_default();
                let text = format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
                );
                h.engine.handle_message(now, text.as_bytes());
            }
            Op::Respond { id, error } => {
                let response = if *error {
                    Err(ErrorObject::new(-1, "User rejected"))
                } else {
                    Ok(raw("{}".to_owned()).expect("valid JSON"))
                };
                let _ = h.engine.respond(id.request_id(), response);
            }
            Op::Poll { n } => h.poll(usize::from(*n)),
            Op::Close => h.engine.close("fuzz"),
        }
        if input.auto_drain {
            h.poll(usize::MAX);
        }
        assert!(h.engine.pending_len() <= usize::from(input.max_pending));
    }

    h.engine.close("end");
    h.poll(usize::MAX);
    assert!(h.closed_seen, "close() must output Closed");
    for id in &h.issued {
        assert!(h.completed.contains(id), "request {id} never completed");
    }
    assert_eq!(h.engine.pending_len(), 0);
    assert_eq!(h.engine.poll_timeout(), None);
});

fn params_raw(params: &Params) -> Option<Box<RawValue>> {
    match params {
        Params::None => None,
        Params::Object(members) => {
            let mut text = String::new();
            write_obj(&mut text, members);
            raw(text)
        }
        Params::Array(items) => {
            let mut text = String::new();
            write_val(&mut text, &Val::Arr(items.clone()));
            raw(text)
        }
        Params::Raw(text) => raw(text.clone()),
    }
}
