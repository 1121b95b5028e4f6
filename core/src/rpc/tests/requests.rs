//! Client requests: ids and exact JSON, results and remote errors,
//! timeouts, cancellation and close.

use super::*;

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

/// A large line handed over with its buffer (`Line::Owned`) completes its
/// request with the result moved to the buffer's start; any other shape,
/// or an id nobody waits for, goes the usual way.
#[test]
fn an_owned_line_becomes_its_result_in_place() {
    use crate::codec::jsonl::Line;
    let mut h = H::new(EngineConfig::default());
    let text = "x".repeat(100_000);
    let result = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);

    let id = h.req("tools/call", RequestOptions::default());
    let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#).into_bytes();
    let buffer = line.as_ptr();
    h.e.handle_line(h.t0, Line::Owned(line));
    let out = h.drain();
    let (got, outcome) = complete(&out[0]);
    let raw = outcome.as_ref().unwrap();
    assert_eq!((got, raw.get()), (id, result.as_str()));
    // Moved, not copied (glibc shrinks an allocation in place; another
    // allocator may move it).
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert_eq!(raw.get().as_ptr(), buffer);
    }

    // Spaced (the general path), an error, and a late answer.
    let id = h.req("tools/call", RequestOptions::default());
    let spaced = format!(r#"{{ "jsonrpc":"2.0","id":{id},"result":{result}}}"#);
    h.e.handle_line(h.t0, Line::Owned(spaced.into_bytes()));
    let out = h.drain();
    assert_eq!(complete(&out[0]).1.as_ref().unwrap().get(), result);
    let id = h.req("tools/call", RequestOptions::default());
    let error =
        format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-1,"message":"{text}"}}}}"#);
    h.e.handle_line(h.t0, Line::Owned(error.into_bytes()));
    let out = h.drain();
    assert!(matches!(failed(&out[0]).1, RequestError::Remote(e) if e.message == text));
    let late = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
    h.e.handle_line(h.t0, Line::Owned(late.into_bytes()));
    assert!(h.drain().is_empty());
    assert_eq!(h.e.stats().late_responses, 1);
    assert_eq!(h.e.stats().completed_ok, 2);
}

/// What a handled text gives back: the id of the response it was (the
/// common one or any other, ours, late or unknown, borrowed or handed
/// over), and nothing for anything else (a batch, a request, a
/// notification, a string id, text that is not JSON-RPC).
#[test]
fn a_handled_response_gives_its_id() {
    use crate::codec::jsonl::Line;
    let mut h = H::new(EngineConfig {
        accept_batches: true,
        ..EngineConfig::default()
    });
    // The common response lent, a spaced one and the common one handed
    // over, an error lent.
    let cases = [
        (
            "tools/call",
            r#"{"jsonrpc":"2.0","id":ID,"result":{"content":[]}}"#,
            false,
        ),
        (
            "ping",
            r#"{ "jsonrpc": "2.0", "id": ID, "result": {} }"#,
            true,
        ),
        ("ping", r#"{"jsonrpc":"2.0","id":ID,"result":{}}"#, true),
        (
            "ping",
            r#"{"jsonrpc":"2.0","id":ID,"error":{"code":-1,"message":"no"}}"#,
            false,
        ),
    ];
    let mut error = String::new();
    let mut id = 0;
    for (method, text, owned) in cases {
        h.drain();
        id = h.req(method, RequestOptions::default());
        let text = text.replace("ID", &id.to_string());
        let line = if owned {
            Line::Owned(text.clone().into_bytes())
        } else {
            Line::Borrowed(text.as_bytes())
        };
        assert_eq!(h.e.handle_line(h.t0, line), Some(id), "{text}");
        error = text;
    }
    // Late (answered above), and an id never used: responses all the same.
    assert_eq!(h.e.handle_message(h.t0, error.as_bytes()), Some(id));
    let unknown = br#"{"jsonrpc":"2.0","id":999,"result":{}}"#;
    assert_eq!(h.e.handle_message(h.t0, unknown), Some(999));
    for other in [
        &br#"[{"jsonrpc":"2.0","id":0,"result":{}}]"#[..],
        br#"{"jsonrpc":"2.0","id":"s","result":{}}"#,
        br#"{"jsonrpc":"2.0","id":-1,"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
        br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
        br#"{"jsonrpc":"2.0","id":0,"result":"#,
        b"not json",
        b"\xff",
    ] {
        let line = Line::Owned(other.to_vec());
        assert_eq!(h.e.handle_line(h.t0, line), None, "{other:?}");
        assert_eq!(h.e.handle_message(h.t0, other), None, "{other:?}");
    }
}
