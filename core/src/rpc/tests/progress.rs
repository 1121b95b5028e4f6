//! Progress notifications: routing, filtering, and the timeout they reset.

use super::*;

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
