//! Property-based state-machine test of `rpc::Engine` against a small
//! reference model.
//!
//! Random interleavings of requests, responses (ok, error, duplicate, late,
//! unknown id), timer ticks over virtual time, cancels, progress, server
//! requests, server cancellations, application answers, garbage and close
//! are applied to both; after every step the outputs the engine produced
//! (reduced to [`Ev`]s) must equal the model's prediction, and:
//! - every request completes exactly once (a final close completes the rest);
//! - pending never exceeds the limit and equals the model's count;
//! - `poll_timeout()` equals the model's earliest deadline;
//! - nothing is output after `Closed`;
//! - a request that ended by timeout or cancel (not `initialize`) produced
//!   exactly one `notifications/cancelled`, others none.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use mcpwire::rpc::{
    Engine, EngineConfig, LocalError, Output, RequestError, RequestId, RequestOptions,
    RespondStatus, SendKind,
};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::Value;

const MAX_PENDING: usize = 4;
const MAX_SERVER: usize = 2;
const DEFAULT_TIMEOUT: u64 = 100;
const DEFAULT_MAX_TOTAL: u64 = 300;
/// The engine keeps at least this many withdrawn server ids.
const WITHDRAWN_KEPT: usize = 16;

#[derive(Clone, Debug)]
enum Target {
    /// One of the ids issued so far (`idx % next_id`): pending or done.
    Issued(u16),
    /// An id never issued (yet).
    Unknown(u8),
}

#[derive(Clone, Debug)]
enum Op {
    Request {
        initialize: bool,
        timeout: Option<u64>,
        progress: bool,
        reset: bool,
        max_total: Option<u64>,
    },
    Response {
        target: Target,
        error: bool,
    },
    Tick {
        advance: u64,
    },
    Cancel {
        target: Target,
    },
    Progress {
        target: Target,
        value: u8,
    },
    ServerRequest {
        id: u8,
        string: bool,
        method: u8,
    },
    ServerCancel {
        id: u8,
        string: bool,
    },
    AppRespond {
        id: u8,
        string: bool,
    },
    Garbage {
        which: u8,
    },
    Close,
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => any::<u16>().prop_map(Target::Issued),
        1 => (0u8..4).prop_map(Target::Unknown),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            prop::bool::weighted(0.15),
            prop::option::of(0u64..200),
            any::<bool>(),
            prop::bool::weighted(0.3),
            prop::option::weighted(0.3, 1u64..400),
        )
            .prop_map(|(initialize, timeout, progress, reset, max_total)| Op::Request {
                initialize,
                timeout,
                progress,
                reset,
                max_total,
            }),
        5 => (target(), prop::bool::weighted(0.3)).prop_map(|(target, error)| Op::Response { target, error }),
        4 => prop_oneof![Just(0u64), 0u64..150].prop_map(|advance| Op::Tick { advance }),
        2 => target().prop_map(|target| Op::Cancel { target }),
        3 => (target(), 0u8..6).prop_map(|(target, value)| Op::Progress { target, value }),
        3 => (0u8..4, any::<bool>(), 0u8..3).prop_map(|(id, string, method)| Op::ServerRequest { id, string, method }),
        1 => (0u8..4, any::<bool>()).prop_map(|(id, string)| Op::ServerCancel { id, string }),
        2 => (0u8..4, any::<bool>()).prop_map(|(id, string)| Op::AppRespond { id, string }),
        1 => (0u8..6).prop_map(|which| Op::Garbage { which }),
        1 => Just(Op::Close),
    ]
}

/// An output reduced to what the model predicts.
#[derive(Clone, Debug, PartialEq)]
enum Ev {
    SendRequest(u64),
    SendCancelled {
        id: u64,
        reason: String,
    },
    SendResponse {
        id: RequestId,
        outcome: Result<String, i64>,
    },
    Complete {
        id: u64,
        outcome: Outcome,
    },
    Progress {
        id: u64,
        value: f64,
    },
    ServerRequest(RequestId),
    ServerRequestCancelled(RequestId),
    Notification(String),
    Diagnostic,
    Closed,
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Ok(String),
    Remote(i64),
    Timeout(u64),
    Cancelled(String),
    Closed,
}

#[derive(Clone, Debug)]
struct MReq {
    deadline: u64,
    start: u64,
    timeout: u64,
    max_total: Option<u64>,
    last_progress: Option<u8>,
    progress: bool,
    reset: bool,
    initialize: bool,
}

impl MReq {
    fn deadline_from(&self, now: u64) -> u64 {
        let soft = now + self.timeout;
        self.max_total.map_or(soft, |m| soft.min(self.start + m))
    }
}

#[derive(Default)]
struct Model {
    now: u64,
    next_id: u64,
    pending: BTreeMap<u64, MReq>,
    server_open: BTreeSet<RequestId>,
    withdrawn: VecDeque<RequestId>,
    closed: bool,
}

fn sid(id: u8, string: bool) -> RequestId {
    if string {
        RequestId::String(format!("s{id}"))
    } else {
        RequestId::Number(i64::from(id))
    }
}

fn result_text(id: u64) -> String {
    format!(r#"{{"n":{id}}}"#)
}

const REMOTE_CODE: i64 = -32001;
const RESPOND_RESULT: &str = r#"{"r":1}"#;
const GARBAGE: [&str; 6] = [
    "not json",
    r#"[{"jsonrpc":"2.0","method":"x"}]"#,
    "{}",
    r#"{"jsonrpc":"2.0","id":null,"result":1}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#,
    r#"{"jsonrpc":"2.0","id":"g","method":1}"#,
];

impl Model {
    fn resolve(&self, t: &Target) -> u64 {
        match *t {
            Target::Issued(i) if self.next_id > 0 => u64::from(i) % self.next_id,
            Target::Issued(i) => 1000 + u64::from(i),
            Target::Unknown(k) => self.next_id + u64::from(k),
        }
    }

    fn earliest(&self) -> Option<u64> {
        if self.closed {
            return None;
        }
        self.pending.values().map(|r| r.deadline).min()
    }

    fn expire(&mut self, evs: &mut Vec<Ev>) {
        loop {
            let due = self
                .pending
                .iter()
                .filter(|(_, r)| r.deadline <= self.now)
                .map(|(id, r)| (r.deadline, *id))
                .min();
            let Some((deadline, id)) = due else { break };
            let Some(r) = self.pending.remove(&id) else {
                break;
            };
            let hard = r.max_total.map(|m| r.start + m);
            let ms = if hard == Some(deadline) {
                r.max_total.unwrap_or(r.timeout)
            } else {
                r.timeout
            };
            if !r.initialize {
                evs.push(Ev::SendCancelled {
                    id,
                    reason: format!("Request timeout after {ms}ms"),
                });
            }
            evs.push(Ev::Complete {
                id,
                outcome: Outcome::Timeout(ms),
            });
        }
    }
}

/// Applies `op` to both; returns the model's predicted events.
fn step(model: &mut Model, engine: &mut Engine, t0: Instant, op: &Op) -> Vec<Ev> {
    let mut evs = Vec::new();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    match op {
        Op::Request {
            initialize,
            timeout,
            progress,
            reset,
            max_total,
        } => {
            let method = if *initialize {
                "initialize"
            } else {
                "tools/call"
            };
            let mut opts = RequestOptions::default()
                .progress(*progress)
                .reset_timeout_on_progress(*reset);
            if let Some(t) = timeout {
                opts = opts.timeout(Duration::from_millis(*t));
            }
            if let Some(m) = max_total {
                opts = opts.max_total_timeout(Duration::from_millis(*m));
            }
            let params = RawValue::from_string(r#"{"name":"t"}"#.to_owned()).unwrap();
            let got = engine.request(at(model.now), method, Some(&params), opts);
            let expected = if model.closed {
                Err(LocalError::Closed)
            } else if model.pending.len() >= MAX_PENDING {
                Err(LocalError::TooManyPending { limit: MAX_PENDING })
            } else {
                let id = model.next_id;
                model.next_id += 1;
                let max_total = max_total.or(if *reset {
                    Some(DEFAULT_MAX_TOTAL)
                } else {
                    None
                });
                let mut r = MReq {
                    deadline: 0,
                    start: model.now,
                    timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
                    max_total,
                    last_progress: None,
                    progress: *progress || *reset,
                    reset: *reset,
                    initialize: *initialize,
                };
                r.deadline = r.deadline_from(model.now);
                model.pending.insert(id, r);
                evs.push(Ev::SendRequest(id));
                Ok(id)
            };
            assert_eq!(got, expected, "request()");
        }
        Op::Response { target, error } => {
            let id = model.resolve(target);
            let text = if *error {
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{REMOTE_CODE},"message":"no"}}}}"#
                )
            } else {
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#,
                    result_text(id)
                )
            };
            engine.handle_message(at(model.now), text.as_bytes());
            if !model.closed {
                if model.pending.remove(&id).is_some() {
                    let outcome = if *error {
                        Outcome::Remote(REMOTE_CODE)
                    } else {
                        Outcome::Ok(result_text(id))
                    };
                    evs.push(Ev::Complete { id, outcome });
                } else if id >= model.next_id {
                    evs.push(Ev::Diagnostic);
                }
            }
        }
        Op::Tick { advance } => {
            model.now += advance;
            engine.handle_timeout(at(model.now));
            if !model.closed {
                model.expire(&mut evs);
            }
        }
        Op::Cancel { target } => {
            let id = model.resolve(target);
            let got = engine.cancel(at(model.now), id, "stop");
            let expected = match model.pending.remove(&id) {
                Some(r) if !model.closed => {
                    if !r.initialize {
                        evs.push(Ev::SendCancelled {
                            id,
                            reason: "stop".into(),
                        });
                    }
                    evs.push(Ev::Complete {
                        id,
                        outcome: Outcome::Cancelled("stop".into()),
                    });
                    true
                }
                _ => false,
            };
            assert_eq!(got, expected, "cancel({id})");
        }
        Op::Progress { target, value } => {
            let id = model.resolve(target);
            let text = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":{value},"total":5}}}}"#
            );
            engine.handle_message(at(model.now), text.as_bytes());
            let now = model.now;
            if let Some(r) = model.pending.get_mut(&id) {
                if !model.closed && r.progress && r.last_progress.is_none_or(|last| *value > last) {
                    r.last_progress = Some(*value);
                    if r.reset {
                        r.deadline = r.deadline_from(now);
                    }
                    evs.push(Ev::Progress {
                        id,
                        value: f64::from(*value),
                    });
                }
            }
        }
        Op::ServerRequest { id, string, method } => {
            let rid = sid(*id, *string);
            let method = ["ping", "roots/list", "sampling/createMessage"][usize::from(*method)];
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{{}}}}"#,
                serde_json::to_string(&rid).unwrap()
            );
            engine.handle_message(at(model.now), text.as_bytes());
            if !model.closed {
                if model.server_open.contains(&rid) {
                    evs.push(Ev::Diagnostic);
                } else if method == "ping" {
                    evs.push(Ev::SendResponse {
                        id: rid,
                        outcome: Ok("{}".into()),
                    });
                } else if method != "roots/list" {
                    evs.push(Ev::SendResponse {
                        id: rid,
                        outcome: Err(-32601),
                    });
                } else if model.server_open.len() >= MAX_SERVER {
                    evs.push(Ev::SendResponse {
                        id: rid,
                        outcome: Err(-32603),
                    });
                    evs.push(Ev::Diagnostic);
                } else {
                    model.withdrawn.retain(|w| *w != rid);
                    model.server_open.insert(rid.clone());
                    evs.push(Ev::ServerRequest(rid));
                }
            }
        }
        Op::ServerCancel { id, string } => {
            let rid = sid(*id, *string);
            let text = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"r"}}}}"#,
                serde_json::to_string(&rid).unwrap()
            );
            engine.handle_message(at(model.now), text.as_bytes());
            if !model.closed && model.server_open.remove(&rid) {
                if model.withdrawn.len() >= WITHDRAWN_KEPT {
                    model.withdrawn.pop_front();
                }
                model.withdrawn.push_back(rid.clone());
                evs.push(Ev::ServerRequestCancelled(rid));
            }
        }
        Op::AppRespond { id, string } => {
            let rid = sid(*id, *string);
            let result = RawValue::from_string(RESPOND_RESULT.to_owned()).unwrap();
            let got = engine.respond(rid.clone(), Ok(result));
            let expected = if model.closed {
                Err(LocalError::Closed)
            } else if model.server_open.remove(&rid) {
                evs.push(Ev::SendResponse {
                    id: rid,
                    outcome: Ok(RESPOND_RESULT.into()),
                });
                Ok(RespondStatus::Sent)
            } else if let Some(pos) = model.withdrawn.iter().position(|w| *w == rid) {
                model.withdrawn.remove(pos);
                Ok(RespondStatus::Withdrawn)
            } else {
                Err(LocalError::UnknownServerRequest(rid))
            };
            assert_eq!(got, expected, "respond()");
        }
        Op::Garbage { which } => {
            let text = GARBAGE[usize::from(*which)];
            engine.handle_message(at(model.now), text.as_bytes());
            if !model.closed {
                match which {
                    4 => evs.push(Ev::Notification("notifications/message".into())),
                    5 => {
                        evs.push(Ev::SendResponse {
                            id: RequestId::from("g"),
                            outcome: Err(-32600),
                        });
                        evs.push(Ev::Diagnostic);
                    }
                    _ => evs.push(Ev::Diagnostic),
                }
            }
        }
        Op::Close => {
            engine.close("bye");
            if !model.closed {
                model.closed = true;
                for id in std::mem::take(&mut model.pending).into_keys() {
                    evs.push(Ev::Complete {
                        id,
                        outcome: Outcome::Closed,
                    });
                }
                model.server_open.clear();
                model.withdrawn.clear();
                evs.push(Ev::Closed);
            }
        }
    }
    evs
}

/// Reduces an engine output to an `Ev`, checking the JSON on the way.
fn observe(out: Output) -> Ev {
    match out {
        Output::Send { bytes, kind } => {
            assert!(!bytes.contains(&b'\n'), "raw newline in output");
            let v: Value = serde_json::from_slice(&bytes).expect("output is JSON");
            assert_eq!(v["jsonrpc"], "2.0");
            match kind {
                SendKind::Request { id } => {
                    assert_eq!(v["id"], id);
                    assert_eq!(v["params"]["name"], "t");
                    let token = &v["params"]["_meta"]["progressToken"];
                    assert!(token.is_null() || *token == id, "progress token is the id");
                    Ev::SendRequest(id)
                }
                SendKind::Notification => {
                    assert_eq!(v["method"], "notifications/cancelled");
                    assert_eq!(v.as_object().unwrap().len(), 3);
                    assert_eq!(v["params"].as_object().unwrap().len(), 2);
                    Ev::SendCancelled {
                        id: v["params"]["requestId"].as_u64().unwrap(),
                        reason: v["params"]["reason"].as_str().unwrap().to_owned(),
                    }
                }
                SendKind::Response { id } => {
                    let wire_id: RequestId = serde_json::from_value(v["id"].clone()).unwrap();
                    assert_eq!(wire_id, id);
                    let outcome = match v.get("result") {
                        Some(r) => Ok(r.to_string()),
                        None => Err(v["error"]["code"].as_i64().unwrap()),
                    };
                    Ev::SendResponse { id, outcome }
                }
            }
        }
        Output::Complete { id, outcome } => Ev::Complete {
            id,
            outcome: match outcome {
                Ok(raw) => Outcome::Ok(raw.get().to_owned()),
                Err(RequestError::Remote(e)) => Outcome::Remote(e.code),
                Err(RequestError::Timeout { ms }) => Outcome::Timeout(ms),
                Err(RequestError::Cancelled { reason }) => Outcome::Cancelled(reason),
                Err(RequestError::Closed { reason }) => {
                    assert_eq!(reason, "bye");
                    Outcome::Closed
                }
                Err(other) => panic!("unexpected error {other:?}"),
            },
        },
        Output::Progress { id, progress } => {
            assert_eq!(progress.total, Some(5.0));
            Ev::Progress {
                id,
                value: progress.progress,
            }
        }
        Output::ServerRequest { id, method, .. } => {
            assert_eq!(method, "roots/list");
            Ev::ServerRequest(id)
        }
        Output::ServerRequestCancelled { id, reason } => {
            assert_eq!(reason.as_deref(), Some("r"));
            Ev::ServerRequestCancelled(id)
        }
        Output::Notification { method, .. } => Ev::Notification(method),
        Output::Diagnostic(_) => Ev::Diagnostic,
        Output::Closed { .. } => Ev::Closed,
    }
}

fn run(ops: &[Op]) {
    let config = EngineConfig::default()
        .default_timeout(Duration::from_millis(DEFAULT_TIMEOUT))
        .default_max_total_timeout(Some(Duration::from_millis(DEFAULT_MAX_TOTAL)))
        .max_pending(MAX_PENDING)
        .max_server_requests(MAX_SERVER)
        .handle_request("roots/list");
    let mut engine = Engine::new(config);
    let mut model = Model::default();
    let t0 = Instant::now();

    let mut completions: HashMap<u64, Outcome> = HashMap::new();
    let mut initialize: HashMap<u64, bool> = HashMap::new();
    let mut cancel_notes: HashMap<u64, usize> = HashMap::new();
    let mut saw_closed = false;

    let close = [Op::Close];
    for op in ops.iter().chain(&close) {
        if let Op::Request {
            initialize: init, ..
        } = op
        {
            initialize.insert(model.next_id, *init);
        }
        let expected = step(&mut model, &mut engine, t0, op);
        let got: Vec<Ev> = std::iter::from_fn(|| engine.poll_output())
            .map(observe)
            .collect();
        assert_eq!(got, expected, "after {op:?}");
        for ev in &got {
            assert!(!saw_closed, "output after Closed: {ev:?}");
            match ev {
                Ev::Complete { id, outcome } => {
                    let prev = completions.insert(*id, outcome.clone());
                    assert!(prev.is_none(), "request {id} completed twice");
                }
                Ev::SendCancelled { id, .. } => *cancel_notes.entry(*id).or_default() += 1,
                Ev::Closed => saw_closed = true,
                _ => {}
            }
        }
        assert!(engine.pending_len() <= MAX_PENDING);
        assert_eq!(engine.pending_len(), model.pending.len());
        assert_eq!(
            engine.poll_timeout(),
            model.earliest().map(|ms| t0 + Duration::from_millis(ms)),
            "poll_timeout after {op:?}"
        );
        assert_eq!(engine.queued_bytes(), 0);
    }

    assert!(saw_closed && engine.is_closed());
    for id in 0..model.next_id {
        let outcome = completions
            .get(&id)
            .unwrap_or_else(|| panic!("request {id} never completed"));
        let notes = cancel_notes.get(&id).copied().unwrap_or(0);
        let abandoned = matches!(outcome, Outcome::Timeout(_) | Outcome::Cancelled(_));
        let expected = usize::from(abandoned && !initialize[&id]);
        assert_eq!(
            notes, expected,
            "notifications/cancelled for {id} ({outcome:?})"
        );
    }
    assert_eq!(completions.len() as u64, model.next_id);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn engine_matches_model(ops in prop::collection::vec(op(), 1..150)) {
        run(&ops);
    }
}

/// A long deterministic run hitting every op many times.
#[test]
fn long_mixed_run() {
    let mut ops = Vec::new();
    for i in 0..3000u64 {
        let k = (i * 7919) % 97;
        ops.push(match i % 11 {
            0 | 1 => Op::Request {
                initialize: k % 9 == 0,
                timeout: (k % 3 == 0).then_some(k),
                progress: k % 2 == 0,
                reset: k % 4 == 0,
                max_total: (k % 5 == 0).then_some(k * 2),
            },
            2 | 3 => Op::Response {
                target: Target::Issued(k as u16),
                error: k % 3 == 0,
            },
            4 => Op::Tick { advance: k },
            5 => Op::Progress {
                target: Target::Issued(k as u16),
                value: (k % 6) as u8,
            },
            6 => Op::Cancel {
                target: Target::Issued(k as u16),
            },
            7 => Op::ServerRequest {
                id: (k % 4) as u8,
                string: k % 2 == 0,
                method: (k % 3) as u8,
            },
            8 => Op::ServerCancel {
                id: (k % 4) as u8,
                string: k % 2 == 0,
            },
            9 => Op::AppRespond {
                id: (k % 4) as u8,
                string: k % 2 == 0,
            },
            _ => Op::Garbage {
                which: (k % 6) as u8,
            },
        });
    }
    run(&ops);
}
