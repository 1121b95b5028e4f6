//! Faults in what arrives: diagnostics, counters, invalid requests, batches.

use super::*;

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
