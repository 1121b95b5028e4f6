//! Requests and notifications from the server.

use super::*;

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
