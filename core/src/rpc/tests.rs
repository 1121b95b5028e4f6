//! Unit tests of the engine: every completion path, the exact JSON sent,
//! server requests, diagnostics and limits.

use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::*;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct H {
    e: Engine,
    t0: Instant,
}

impl H {
    fn new(config: EngineConfig) -> Self {
        H {
            e: Engine::new(config),
            t0: Instant::now(),
        }
    }

    fn at(&self, ms_: u64) -> Instant {
        self.t0 + ms(ms_)
    }

    fn req(&mut self, method: &str, opts: RequestOptions) -> u64 {
        let id = self.e.request(self.t0, method, None, opts).unwrap();
        let sent = self.sends();
        assert_eq!(sent.len(), 1);
        id
    }

    fn recv(&mut self, at: u64, text: &str) {
        self.e.handle_message(self.at(at), text.as_bytes());
    }

    fn drain(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.e.poll_output()).collect()
    }

    fn sends(&mut self) -> Vec<String> {
        self.drain()
            .into_iter()
            .map(|o| match o {
                Output::Send { bytes, .. } => String::from_utf8(bytes).unwrap(),
                other => panic!("expected Send, got {other:?}"),
            })
            .collect()
    }
}

fn complete(out: &Output) -> (u64, &Result<Box<RawValue>, RequestError>) {
    match out {
        Output::Complete { id, outcome } => (*id, outcome),
        other => panic!("expected Complete, got {other:?}"),
    }
}

fn failed(out: &Output) -> (u64, &RequestError) {
    let (id, outcome) = complete(out);
    (id, outcome.as_ref().expect_err("expected a failure"))
}

fn send_text(out: &Output) -> &str {
    match out {
        Output::Send { bytes, .. } => std::str::from_utf8(bytes).unwrap(),
        other => panic!("expected Send, got {other:?}"),
    }
}

#[test]
fn ids_are_sequential_and_requests_exact() {
    let mut h = H::new(EngineConfig::default());
    let p = raw(r#"{"name":"echo","arguments":{"m":"a\nb"}}"#);
    for expected in 0..3u64 {
        let id =
            h.e.request(h.t0, "tools/call", Some(&p), RequestOptions::default())
                .unwrap();
        assert_eq!(id, expected);
        let out = h.drain();
        assert_eq!(out.len(), 1);
        match &out[0] {
            Output::Send { bytes, kind } => {
                assert_eq!(*kind, SendKind::Request { id });
                assert_eq!(
                    std::str::from_utf8(bytes).unwrap(),
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"m":"a\nb"}}}}}}"#
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(h.e.pending_len(), 3);
    assert_eq!(h.e.stats().requests_sent, 3);
}

#[test]
fn pretty_params_and_odd_methods_never_carry_a_newline() {
    let mut h = H::new(EngineConfig::default());
    let p = raw("{\n  \"a\": \"x y\",\n  \"b\": [1,\n 2]\n}");
    h.e.request(h.t0, "we\"ird\nname", Some(&p), RequestOptions::default())
        .unwrap();
    let sent = h.sends();
    assert_eq!(
        sent[0],
        r#"{"jsonrpc":"2.0","id":0,"method":"we\"ird\nname","params":{"a":"x y","b":[1,2]}}"#
    );
    assert!(!sent[0].contains('\n'));
    h.e.notify("n", Some(&p)).unwrap();
    assert_eq!(
        h.sends()[0],
        r#"{"jsonrpc":"2.0","method":"n","params":{"a":"x y","b":[1,2]}}"#
    );
}

#[test]
fn result_completes_once_and_duplicates_are_late() {
    let mut h = H::new(EngineConfig::default());
    let id = h.req("tools/list", RequestOptions::default());
    h.recv(1, r#"{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}"#);
    let out = h.drain();
    assert_eq!(out.len(), 1);
    let (done, outcome) = complete(&out[0]);
    assert_eq!(done, id);
    assert_eq!(outcome.as_ref().unwrap().get(), r#"{"tools":[]}"#);
    h.recv(2, r#"{"jsonrpc":"2.0","id":0,"result":{"tools":[]}}"#);
    assert!(h.drain().is_empty());
    assert_eq!(h.e.stats().late_responses, 1);
    assert_eq!(h.e.stats().completed_ok, 1);
    assert_eq!(h.e.pending_len(), 0);
    assert_eq!(h.e.poll_timeout(), None);
}

#[test]
fn result_null_is_a_result() {
    let mut h = H::new(EngineConfig::default());
    h.req("x", RequestOptions::default());
    h.recv(0, r#"{"jsonrpc":"2.0","id":0,"result":null}"#);
    let out = h.drain();
    assert_eq!(complete(&out[0]).1.as_ref().unwrap().get(), "null");
}

#[test]
fn remote_error_completes_with_code_message_data() {
    let mut h = H::new(EngineConfig::default());
    h.req("x", RequestOptions::default());
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"bad args","data":{"f":"a"}}}"#,
    );
    let out = h.drain();
    let err = complete(&out[0]).1.as_ref().unwrap_err();
    assert_eq!(err.to_string(), "MCP error -32602: bad args");
    match err {
        RequestError::Remote(e) => {
            assert_eq!(e.code, INVALID_PARAMS);
            assert_eq!(e.data.as_ref().unwrap().get(), r#"{"f":"a"}"#);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.e.stats().completed_error, 1);
}

#[test]
fn timeout_cancels_on_the_wire_and_late_response_is_dropped() {
    let mut h = H::new(EngineConfig::default().default_timeout(ms(1000)));
    let id = h.req("tools/call", RequestOptions::default());
    assert_eq!(h.e.poll_timeout(), Some(h.at(1000)));
    h.e.handle_timeout(h.at(999));
    assert!(h.drain().is_empty());
    h.e.handle_timeout(h.at(1000));
    let out = h.drain();
    assert_eq!(out.len(), 2);
    assert_eq!(
        send_text(&out[0]),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0,"reason":"Request timeout after 1000ms"}}"#
    );
    let (done, outcome) = complete(&out[1]);
    assert_eq!(done, id);
    let err = outcome.as_ref().unwrap_err();
    assert_eq!(*err, RequestError::Timeout { ms: 1000 });
    assert_eq!(err.to_string(), "Request timeout after 1000ms");
    // Idempotent, and the late response is not an error.
    h.e.handle_timeout(h.at(1000));
    h.e.handle_timeout(h.at(5000));
    h.recv(5000, r#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
    assert!(h.drain().is_empty());
    assert_eq!(h.e.stats().late_responses, 1);
    assert_eq!(h.e.stats().timed_out, 1);
    assert_eq!(h.e.poll_timeout(), None);
}

#[test]
fn per_request_timeout_overrides_the_default() {
    let mut h = H::new(EngineConfig::default());
    h.req("a", RequestOptions::default());
    h.req("b", RequestOptions::default().timeout(ms(50)));
    assert_eq!(h.e.poll_timeout(), Some(h.at(50)));
    h.e.handle_timeout(h.at(50));
    let out = h.drain();
    assert_eq!(failed(&out[1]), (1, &RequestError::Timeout { ms: 50 }));
    assert_eq!(h.e.poll_timeout(), Some(h.at(30_000)));
}

#[test]
fn cancel_sends_exact_notification_and_completes() {
    let mut h = H::new(EngineConfig::default());
    for _ in 0..4 {
        h.req("tools/call", RequestOptions::default());
    }
    assert!(h.e.cancel(h.at(1), 3, "user \"aborted\""));
    let out = h.drain();
    assert_eq!(out.len(), 2);
    assert_eq!(
        send_text(&out[0]),
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user \"aborted\""}}"#
    );
    let err = complete(&out[1]).1.as_ref().unwrap_err();
    assert_eq!(err.to_string(), "Request cancelled: user \"aborted\"");
    assert!(!h.e.cancel(h.at(1), 3, "again"));
    assert!(!h.e.cancel(h.at(1), 99, "never sent"));
    assert!(h.drain().is_empty());
    h.recv(
        2,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"late"}}"#,
    );
    assert!(h.drain().is_empty());
    assert_eq!(h.e.stats().late_responses, 1);
    assert_eq!(h.e.pending_len(), 3);
}

#[test]
fn initialize_is_never_cancelled_on_the_wire() {
    let mut h = H::new(EngineConfig::default());
    h.req("initialize", RequestOptions::default().timeout(ms(10)));
    h.req("initialize", RequestOptions::default());
    h.e.handle_timeout(h.at(10));
    let out = h.drain();
    assert_eq!(out.len(), 1);
    assert_eq!(failed(&out[0]), (0, &RequestError::Timeout { ms: 10 }));
    assert!(h.e.cancel(h.at(10), 1, "stop"));
    let out = h.drain();
    assert_eq!(out.len(), 1);
    assert!(matches!(
        complete(&out[0]).1,
        Err(RequestError::Cancelled { .. })
    ));
}

#[test]
fn close_completes_all_in_order_then_nothing() {
    let mut h = H::new(EngineConfig::default().handle_request("roots/list"));
    for _ in 0..3 {
        h.req("x", RequestOptions::default());
    }
    h.recv(0, r#"{"jsonrpc":"2.0","id":1,"result":1}"#);
    h.recv(0, r#"{"jsonrpc":"2.0","id":"s","method":"roots/list"}"#);
    h.drain();
    for _ in 0..20 {
        h.req("x", RequestOptions::default());
    }
    h.e.close("child exited");
    let out = h.drain();
    assert_eq!(out.len(), 23);
    let ids: Vec<u64> = out[..22].iter().map(|o| complete(o).0).collect();
    let mut expected: Vec<u64> = (0..23).filter(|&i| i != 1).collect();
    expected.sort_unstable();
    assert_eq!(ids, expected);
    let err = complete(&out[0]).1.as_ref().unwrap_err();
    assert_eq!(err.to_string(), "Transport closed: child exited");
    assert!(matches!(&out[22], Output::Closed { reason } if reason == "child exited"));
    assert!(h.e.is_closed());
    // Nothing after Closed, whatever happens.
    h.recv(1, r#"{"jsonrpc":"2.0","id":2,"result":1}"#);
    h.recv(1, r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
    h.recv(1, "garbage");
    h.e.handle_timeout(h.at(1_000_000));
    h.e.close("twice");
    assert!(!h.e.cancel(h.at(1), 4, "x"));
    assert_eq!(
        h.e.request(h.t0, "x", None, RequestOptions::default()),
        Err(LocalError::Closed)
    );
    assert_eq!(h.e.notify("x", None), Err(LocalError::Closed));
    assert_eq!(
        h.e.respond(RequestId::from("s"), Ok(raw("{}"))),
        Err(LocalError::Closed)
    );
    assert!(h.drain().is_empty());
    assert_eq!(h.e.poll_timeout(), None);
    assert_eq!(h.e.stats().closed, 22);
}

#[test]
fn close_without_reason_says_transport_closed() {
    let mut h = H::new(EngineConfig::default());
    h.req("x", RequestOptions::default());
    h.e.close("");
    let out = h.drain();
    assert_eq!(
        complete(&out[0]).1.as_ref().unwrap_err().to_string(),
        "Transport closed"
    );
}

#[test]
fn progress_is_routed_and_filtered() {
    let mut h = H::new(EngineConfig::default());
    h.req("plain", RequestOptions::default());
    let p = raw(r#"{"name":"slow","_meta":{"trace":"t"}}"#);
    let id =
        h.e.request(
            h.t0,
            "tools/call",
            Some(&p),
            RequestOptions::default().progress(true),
        )
        .unwrap();
    assert_eq!(
        h.sends()[0],
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","_meta":{"trace":"t","progressToken":1}}}"#
    );
    let progress = |token: &str, value: f64| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":{value},"total":10,"message":"m"}}}}"#
        )
    };
    h.recv(1, &progress("1", 1.0));
    let out = h.drain();
    match &out[..] {
        [Output::Progress { id: got, progress }] => {
            assert_eq!(*got, id);
            assert_eq!(
                *progress,
                Progress {
                    progress: 1.0,
                    total: Some(10.0),
                    message: Some("m".into()),
                    task: None,
                }
            );
        }
        other => panic!("{other:?}"),
    }
    h.recv(2, &progress("1", 1.0)); // not increasing
    h.recv(2, &progress("1", 0.5)); // decreasing
    h.recv(2, &progress("0", 5.0)); // request without progress
    h.recv(2, &progress("7", 5.0)); // unknown token
    h.recv(2, &progress("\"1\"", 5.0)); // not our token type
    h.recv(
        2,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}"#,
    );
    h.recv(2, r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#);
    assert!(h.drain().is_empty());
    assert_eq!(h.e.stats().progress_ignored, 7);
    h.recv(3, &progress("1", 2.5));
    assert!(matches!(&h.drain()[..], [Output::Progress { .. }]));
    assert_eq!(h.e.stats().progress_delivered, 2);
}

#[test]
fn progress_on_request_without_params_and_array_params_rejected() {
    let mut h = H::new(EngineConfig::default());
    h.e.request(h.t0, "a", None, RequestOptions::default().progress(true))
        .unwrap();
    assert_eq!(
        h.sends()[0],
        r#"{"jsonrpc":"2.0","id":0,"method":"a","params":{"_meta":{"progressToken":0}}}"#
    );
    let arr = raw("[1]");
    assert!(matches!(
        h.e.request(
            h.t0,
            "a",
            Some(&arr),
            RequestOptions::default().progress(true)
        ),
        Err(LocalError::InvalidParams(_))
    ));
    let num = raw("1");
    assert!(matches!(
        h.e.request(h.t0, "a", Some(&num), RequestOptions::default()),
        Err(LocalError::InvalidParams(_))
    ));
    assert!(matches!(
        h.e.notify("a", Some(&num)),
        Err(LocalError::InvalidParams(_))
    ));
    // Failed calls used no id.
    assert_eq!(
        h.e.request(h.t0, "a", Some(&arr), RequestOptions::default()),
        Ok(1)
    );
}

#[test]
fn progress_resets_the_timeout_up_to_the_hard_maximum() {
    let mut h = H::new(EngineConfig::default());
    let opts = RequestOptions::default()
        .timeout(ms(100))
        .reset_timeout_on_progress(true)
        .max_total_timeout(ms(250));
    h.req("slow", opts);
    assert_eq!(h.e.poll_timeout(), Some(h.at(100)));
    let progress = |v: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":0,"progress":{v}}}}}"#
        )
    };
    h.recv(90, &progress(1));
    h.drain();
    assert_eq!(h.e.poll_timeout(), Some(h.at(190)));
    h.e.handle_timeout(h.at(100)); // the old deadline is stale
    assert!(h.drain().is_empty());
    h.recv(180, &progress(2));
    h.drain();
    assert_eq!(h.e.poll_timeout(), Some(h.at(250)));
    h.e.handle_timeout(h.at(250));
    let out = h.drain();
    assert_eq!(failed(&out[1]).1, &RequestError::Timeout { ms: 250 });
    assert!(send_text(&out[0]).contains(r#""reason":"Request timeout after 250ms""#));

    // Without reset, progress does not move the deadline.
    let mut h = H::new(EngineConfig::default());
    h.req(
        "slow",
        RequestOptions::default().timeout(ms(100)).progress(true),
    );
    h.recv(90, &progress(1));
    h.drain();
    assert_eq!(h.e.poll_timeout(), Some(h.at(100)));
}

#[test]
fn server_requests_have_their_own_id_space() {
    let mut h = H::new(EngineConfig::default().handle_request("roots/list"));
    h.req("tools/list", RequestOptions::default()); // our id 0
    h.recv(
        1,
        r#"{"jsonrpc":"2.0","id":0,"method":"roots/list","params":{}}"#,
    );
    let out = h.drain();
    match &out[..] {
        [Output::ServerRequest { id, method, params }] => {
            assert_eq!(*id, RequestId::Number(0));
            assert_eq!(method, "roots/list");
            assert_eq!(params.as_ref().unwrap().get(), "{}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.e.pending_len(), 1);
    assert_eq!(
        h.e.respond(RequestId::Number(0), Ok(raw(r#"{"roots":[]}"#))),
        Ok(RespondStatus::Sent)
    );
    let out = h.drain();
    match &out[..] {
        [Output::Send { bytes, kind }] => {
            assert_eq!(
                *kind,
                SendKind::Response {
                    id: RequestId::Number(0)
                }
            );
            assert_eq!(bytes, br#"{"jsonrpc":"2.0","id":0,"result":{"roots":[]}}"#);
        }
        other => panic!("{other:?}"),
    }
    // Our request 0 is still waiting for its own response.
    h.recv(2, r#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
    assert_eq!(complete(&h.drain()[0]).0, 0);
    // Answered once: a second respond is a local error.
    assert_eq!(
        h.e.respond(RequestId::Number(0), Ok(raw("{}"))),
        Err(LocalError::UnknownServerRequest(RequestId::Number(0)))
    );
}

#[test]
fn string_ids_and_error_answers() {
    let mut h = H::new(EngineConfig::default().handle_request("sampling/createMessage"));
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","id":"abc-1","method":"sampling/createMessage","params":{"x":1}}"#,
    );
    assert!(
        matches!(&h.drain()[..], [Output::ServerRequest { id: RequestId::String(s), .. }] if s == "abc-1")
    );
    let err = ErrorObject::new(-1, "User rejected").with_data(raw(r#"{"why":"no"}"#));
    assert_eq!(
        h.e.respond(RequestId::from("abc-1"), Err(err)),
        Ok(RespondStatus::Sent)
    );
    assert_eq!(
        h.sends()[0],
        r#"{"jsonrpc":"2.0","id":"abc-1","error":{"code":-1,"message":"User rejected","data":{"why":"no"}}}"#
    );
}

#[test]
fn ping_is_answered_and_unknown_methods_get_method_not_found() {
    let mut h = H::new(EngineConfig::default());
    h.recv(0, r#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#);
    h.recv(0, r#"{"jsonrpc":"2.0","id":7,"method":"roots/list"}"#);
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","id":8,"method":"elicitation/create","params":{}}"#,
    );
    assert_eq!(
        h.sends(),
        vec![
            r#"{"jsonrpc":"2.0","id":"p1","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}"#,
            r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"Method not found"}}"#,
        ]
    );
    let s = h.e.stats();
    assert_eq!(
        (s.pings_answered, s.methods_not_found, s.server_requests),
        (1, 2, 0)
    );
}

#[test]
fn server_cancel_withdraws_and_late_respond_is_dropped() {
    let mut h = H::new(EngineConfig::default().handle_request("sampling/createMessage"));
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{}}"#,
    );
    h.drain();
    h.recv(1, r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"timeout"}}"#);
    match &h.drain()[..] {
        [Output::ServerRequestCancelled { id, reason }] => {
            assert_eq!(*id, RequestId::Number(5));
            assert_eq!(reason.as_deref(), Some("timeout"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.e.server_requests_len(), 0);
    assert_eq!(
        h.e.respond(RequestId::Number(5), Ok(raw("{}"))),
        Ok(RespondStatus::Withdrawn)
    );
    assert!(h.drain().is_empty());
    assert_eq!(h.e.stats().responds_dropped, 1);
    // Cancelling something not open is counted and ignored.
    h.recv(
        1,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#,
    );
    h.recv(
        1,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#,
    );
    assert!(h.drain().is_empty());
    assert_eq!(h.e.stats().cancellations_ignored, 2);
}

#[test]
fn too_many_server_requests_are_refused() {
    let mut h = H::new(
        EngineConfig::default()
            .handle_request("roots/list")
            .max_server_requests(2),
    );
    for id in 1..=3 {
        h.recv(
            0,
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"roots/list"}}"#),
        );
    }
    let out = h.drain();
    assert_eq!(out.len(), 4);
    assert!(matches!(&out[0], Output::ServerRequest { .. }));
    assert!(matches!(&out[1], Output::ServerRequest { .. }));
    assert_eq!(
        send_text(&out[2]),
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Too many concurrent requests"}}"#
    );
    assert!(matches!(
        &out[3],
        Output::Diagnostic(Diagnostic::ServerRequestRejected {
            id: RequestId::Number(3),
            ..
        })
    ));
    // ping is answered whatever the count.
    h.recv(0, r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#);
    assert_eq!(h.sends().len(), 1);
    // Answering one frees a slot.
    let _ = h.e.respond(RequestId::Number(1), Ok(raw("{}"))).unwrap();
    h.drain();
    h.recv(0, r#"{"jsonrpc":"2.0","id":9,"method":"roots/list"}"#);
    assert!(matches!(&h.drain()[..], [Output::ServerRequest { .. }]));
}

#[test]
fn duplicate_open_server_request_id_is_diagnosed_not_answered() {
    let mut h = H::new(EngineConfig::default().handle_request("roots/list"));
    h.recv(0, r#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#);
    h.drain();
    h.recv(0, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert!(matches!(
        &h.drain()[..],
        [Output::Diagnostic(Diagnostic::Invalid {
            reason: InvalidReason::DuplicateRequestId,
            ..
        })]
    ));
}

#[test]
fn notifications_are_surfaced() {
    let mut h = H::new(EngineConfig::default());
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
    );
    h.recv(0, r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#);
    let out = h.drain();
    assert!(
        matches!(&out[0], Output::Notification { method, params: None } if method == "notifications/tools/list_changed")
    );
    assert!(
        matches!(&out[1], Output::Notification { params: Some(p), .. } if p.get() == r#"{"level":"info","data":"x"}"#)
    );
    assert_eq!(h.e.stats().notifications_received, 2);
}

#[test]
fn faults_become_diagnostics_and_counters() {
    let mut h = H::new(EngineConfig::default());
    h.req("x", RequestOptions::default());
    h.recv(0, "{not json");
    h.recv(0, "\u{1}");
    h.e.handle_message(h.t0, b"\xff\xfe");
    h.recv(0, "42");
    h.recv(0, r#"{"id":0,"result":1}"#);
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","id":0,"result":1,"error":{"code":1,"message":"m"}}"#,
    );
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
    );
    h.recv(0, r#"{"jsonrpc":"2.0","method":7}"#);
    h.recv(0, r#"{"jsonrpc":"2.0","id":12,"result":1}"#);
    h.recv(0, r#"{"jsonrpc":"2.0","id":"0","result":1}"#);
    let out = h.drain();
    let kinds: Vec<String> = out
        .iter()
        .map(|o| match o {
            Output::Diagnostic(Diagnostic::Malformed { .. }) => "malformed".to_string(),
            Output::Diagnostic(Diagnostic::Invalid { reason, .. }) => format!("{reason:?}"),
            Output::Diagnostic(Diagnostic::UnknownResponse { id }) => format!("unknown {id}"),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "malformed",
            "malformed",
            "malformed",
            "NotAnObject",
            "MissingVersion",
            "ResultAndError",
            "NullId",
            "MethodNotString",
            "unknown 12",
            "unknown \"0\"",
        ]
    );
    let s = h.e.stats();
    assert_eq!((s.malformed, s.invalid, s.unknown_responses), (3, 5, 2));
    // The request is still pending: nothing above touched it.
    assert_eq!(h.e.pending_len(), 1);
}

#[test]
fn invalid_request_with_an_id_is_answered_invalid_request() {
    let mut h = H::new(EngineConfig::default());
    h.recv(
        0,
        r#"{"jsonrpc":"2.0","id":"q","method":"roots/list","params":"oops"}"#,
    );
    let out = h.drain();
    assert_eq!(
        send_text(&out[0]),
        r#"{"jsonrpc":"2.0","id":"q","error":{"code":-32600,"message":"Invalid Request"}}"#
    );
    assert!(matches!(
        &out[1],
        Output::Diagnostic(Diagnostic::Invalid {
            reason: InvalidReason::ParamsNotStructured,
            ..
        })
    ));
}

#[test]
fn batches_only_when_accepted() {
    let batch = r#"[{"jsonrpc":"2.0","id":0,"result":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":1,"method":"ping"},7]"#;
    let mut h = H::new(EngineConfig::default());
    h.req("x", RequestOptions::default());
    h.recv(0, batch);
    assert!(matches!(
        &h.drain()[..],
        [Output::Diagnostic(Diagnostic::Invalid {
            reason: InvalidReason::BatchNotAccepted,
            ..
        })]
    ));
    assert_eq!(h.e.pending_len(), 1);

    let mut h = H::new(EngineConfig::default().accept_batches(true));
    h.req("x", RequestOptions::default());
    h.recv(0, batch);
    let out = h.drain();
    assert_eq!(out.len(), 4);
    assert_eq!(complete(&out[0]).1.as_ref().unwrap().get(), "\"a\"");
    assert!(matches!(&out[1], Output::Notification { .. }));
    assert_eq!(
        send_text(&out[2]),
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
    );
    assert!(matches!(
        &out[3],
        Output::Diagnostic(Diagnostic::Invalid {
            reason: InvalidReason::NotAnObject,
            ..
        })
    ));
    h.recv(0, "[]");
    h.recv(0, r#"[[{"jsonrpc":"2.0","method":"n"}]]"#);
    assert_eq!(h.drain().len(), 2);
    assert_eq!(h.e.stats().batches, 2);
}

#[test]
fn pending_limit() {
    let mut h = H::new(EngineConfig::default().max_pending(2));
    h.req("a", RequestOptions::default());
    h.req("b", RequestOptions::default());
    assert_eq!(
        h.e.request(h.t0, "c", None, RequestOptions::default()),
        Err(LocalError::TooManyPending { limit: 2 })
    );
    h.recv(0, r#"{"jsonrpc":"2.0","id":0,"result":1}"#);
    h.drain();
    assert_eq!(
        h.e.request(h.t0, "c", None, RequestOptions::default()),
        Ok(2)
    );
}

#[test]
fn queued_bytes_limit() {
    let mut h = H::new(EngineConfig::default().max_queued_bytes(60));
    // Always admitted into an empty queue, even when larger than the limit.
    let big = raw(&format!(r#"{{"s":"{}"}}"#, "x".repeat(200)));
    assert_eq!(
        h.e.request(h.t0, "a", Some(&big), RequestOptions::default()),
        Ok(0)
    );
    assert!(h.e.queued_bytes() > 60);
    assert!(matches!(
        h.e.request(h.t0, "b", None, RequestOptions::default()),
        Err(LocalError::QueueFull { limit: 60, .. })
    ));
    assert!(matches!(
        h.e.notify("n", None),
        Err(LocalError::QueueFull { .. })
    ));
    // Automatic replies and cancellations are still queued.
    h.recv(0, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert!(h.e.cancel(h.t0, 0, "stop"));
    let out = h.drain();
    assert_eq!(out.len(), 4);
    assert_eq!(h.e.queued_bytes(), 0);
    assert_eq!(
        h.e.request(h.t0, "b", None, RequestOptions::default()),
        Ok(1)
    );
    let b = r#"{"jsonrpc":"2.0","id":1,"method":"b"}"#.len();
    assert_eq!(h.e.queued_bytes(), b);
    assert_eq!(
        h.e.notify("n", None),
        Err(LocalError::QueueFull {
            queued: b,
            limit: 60
        })
    );
    h.drain();
    assert_eq!(h.e.notify("n", None), Ok(()));
}

/// A peer that stopped reading: what the driver holds unwritten counts
/// with the queue, requests fail typed, and the engine's own replies go
/// on up to twice the limit, then are dropped and counted.
#[test]
fn unwritten_bytes_count_and_own_replies_stay_bounded() {
    let mut h = H::new(EngineConfig::default().max_queued_bytes(100));
    assert_eq!(h.req("a", RequestOptions::default()), 0);
    h.drain();
    h.e.set_unwritten(90);
    assert_eq!(
        h.e.request(h.t0, "b", None, RequestOptions::default()),
        Err(LocalError::QueueFull {
            queued: 90,
            limit: 100
        })
    );
    // Own replies are still queued up to 200 bytes waiting ...
    let ping = |id: u32| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
    h.recv(0, &ping(1));
    let out = h.drain();
    assert!(matches!(&out[..], [Output::Send { .. }]), "{out:?}");
    // ... and dropped beyond, with one diagnostic per run of drops.
    h.e.set_unwritten(190);
    h.recv(0, &ping(2));
    h.recv(0, &ping(3));
    assert!(h.e.cancel(h.t0, 0, "stop"));
    let out = h.drain();
    assert!(
        matches!(
            &out[..],
            [
                Output::Diagnostic(Diagnostic::SendsDropped {
                    unwritten: 190,
                    limit: 200
                }),
                Output::Complete { id: 0, .. }
            ]
        ),
        "{out:?}"
    );
    assert_eq!(h.e.stats().sends_dropped, 3);
    assert_eq!(h.e.queued_bytes(), 0);
    // Written meanwhile: everything flows again.
    h.e.set_unwritten(0);
    h.recv(0, &ping(4));
    assert!(matches!(&h.drain()[..], [Output::Send { .. }]));
    assert_eq!(h.req("c", RequestOptions::default()), 1);
}

#[test]
fn poll_timeout_tracks_the_earliest_live_deadline() {
    let mut h = H::new(EngineConfig::default());
    h.req("a", RequestOptions::default().timeout(ms(300)));
    h.req("b", RequestOptions::default().timeout(ms(100)));
    h.req("c", RequestOptions::default().timeout(ms(200)));
    assert_eq!(h.e.poll_timeout(), Some(h.at(100)));
    h.recv(0, r#"{"jsonrpc":"2.0","id":1,"result":1}"#);
    assert_eq!(h.e.poll_timeout(), Some(h.at(200)));
    assert!(h.e.cancel(h.t0, 2, "x"));
    assert_eq!(h.e.poll_timeout(), Some(h.at(300)));
    h.e.handle_timeout(h.at(300));
    assert_eq!(h.e.poll_timeout(), None);
    h.drain();
    // A huge timeout saturates (at ~584 years), it does not panic.
    h.req("d", RequestOptions::default().timeout(Duration::MAX));
    assert!(h.e.poll_timeout().is_some_and(|d| d > h.at(1 << 40)));
}

#[test]
fn stale_deadlines_do_not_accumulate() {
    let mut h = H::new(EngineConfig::default());
    for i in 0..10_000u64 {
        let id =
            h.e.request(h.t0, "x", None, RequestOptions::default())
                .unwrap();
        h.drain();
        h.recv(i, &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":1}}"#));
        h.drain();
    }
    assert!(h.e.deadlines_len() <= 2 + 64);
}

#[test]
fn timeouts_fire_in_deadline_then_id_order() {
    let mut h = H::new(EngineConfig::default());
    h.req("a", RequestOptions::default().timeout(ms(20)));
    h.req("b", RequestOptions::default().timeout(ms(10)));
    h.req("c", RequestOptions::default().timeout(ms(10)));
    h.e.handle_timeout(h.at(1000));
    let ids: Vec<u64> = h
        .drain()
        .iter()
        .filter_map(|o| match o {
            Output::Complete { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [1, 2, 0]);
}
