//! POSTs: their failures, the order after `notifications/initialized`, and 202s.

use super::*;

#[test]
fn legacy_post_error_fails_the_request() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(1);
    let p1 = only_request(sim.events()).exchange;
    sim.head(p1, &head(500, Some("text/plain"), &[]));
    sim.body(p1, b"boom\n");
    sim.end(p1);
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fail {
            id: 1,
            failure: RequestFailure::Http {
                status: 500,
                message: "HTTP 500: boom".into()
            }
        }]
    );

    // A transport failure.
    sim.request(2);
    let p2 = only_request(sim.events()).exchange;
    sim.failed(p2, "connection reset");
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Fail {
            id: 2,
            failure: RequestFailure::Other("connection reset".into())
        }]
    );

    // The request completed meanwhile: its failure is ignored.
    sim.request(3);
    let p3 = only_request(sim.events()).exchange;
    sim.t.request_done(3);
    sim.head(p3, &head(404, None, &[]));
    sim.end(p3);
    assert_eq!(sim.events(), vec![]);

    // Notifications and responses only give diagnostics.
    sim.send("{}", SendKind::Notification);
    let p4 = only_request(sim.events()).exchange;
    sim.head(p4, &head(400, None, &[]));
    sim.end(p4);
    let mut events = sim.events();
    sim.send(
        "{}",
        SendKind::Response {
            id: RequestId::Number(0),
        },
    );
    let p5 = only_request(sim.events()).exchange;
    sim.failed(p5, "broken pipe");
    events.extend(sim.events());
    assert!(
        matches!(&events[..], [LegacyEvent::Diagnostic(a), LegacyEvent::Diagnostic(b)]
            if a.contains("HTTP 400: Bad Request") && b.contains("request 0") && b.contains("broken pipe")),
        "{events:?}"
    );

    // An exchange that ends without a head.
    sim.request(6);
    let p6 = only_request(sim.events()).exchange;
    sim.end(p6);
    let events = sim.events();
    assert!(
        matches!(
            &events[..],
            [LegacyEvent::Fail {
                id: 6,
                failure: RequestFailure::Other(_)
            }]
        ),
        "{events:?}"
    );

    // A long error body is cut and the exchange stopped.
    sim.request(7);
    let p7 = only_request(sim.events()).exchange;
    sim.head(p7, &head(502, None, &[]));
    sim.body(p7, &[b'e'; 4096]);
    let events = sim.events();
    assert_eq!(events[0], LegacyEvent::Abort(p7));
    assert!(
        matches!(&events[1..], [LegacyEvent::Fail { id: 7, failure: RequestFailure::Http { status: 502, message } }]
            if message.ends_with('…')),
        "{events:?}"
    );
    assert!(sim.delivered.is_empty());
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Nothing is POSTed after `notifications/initialized` until its 2xx head
/// (the POSTs travel on separate connections); then the held messages go,
/// in order. Held before the endpoint, the same holds.
#[test]
fn legacy_nothing_overtakes_initialized_until_it_is_accepted() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.send(INITIALIZED, SendKind::Notification);
    let confirm = only_request(sim.events());
    assert!(!sim.t.settled());
    sim.request(1);
    sim.send("{}", SendKind::Notification);
    sim.request(2);
    assert_eq!(sim.events(), vec![]);
    sim.head(confirm.exchange, &head(202, None, &[]));
    assert!(sim.t.settled());
    let bodies: Vec<Vec<u8>> = requests(sim.events()).into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies,
        [
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(),
            b"{}".to_vec(),
            br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#.to_vec(),
        ]
    );
    sim.end(confirm.exchange);
    assert_eq!(sim.events(), vec![]);

    let mut sim = Sim::new();
    let _ = sim.events();
    sim.send(INITIALIZED, SendKind::Notification);
    sim.request(1);
    sim.open("/m");
    let confirm = only_request(sim.events());
    assert_eq!(confirm.body, INITIALIZED.as_bytes());
    sim.head(confirm.exchange, &head(200, None, &[]));
    assert_eq!(
        only_request(sim.events()).body,
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
    );
}

/// A refused `notifications/initialized` is fatal; one that fails before
/// its head is sent again, once; nothing held goes out meanwhile.
#[test]
fn legacy_initialized_refused_is_fatal_and_failed_is_sent_again_once() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.send(INITIALIZED, SendKind::Notification);
    let confirm = only_request(sim.events());
    sim.request(1);
    sim.head(confirm.exchange, &head(400, Some("text/plain"), &[]));
    sim.body(confirm.exchange, b"not now");
    sim.end(confirm.exchange);
    let events = sim.events();
    assert_eq!(
        fatal(&events),
        "the server refused notifications/initialized: HTTP 400: not now"
    );
    assert!(!events.iter().any(|e| matches!(e, LegacyEvent::Request(_))));

    let mut sim = Sim::new();
    sim.open("/m");
    sim.send(INITIALIZED, SendKind::Notification);
    let confirm = only_request(sim.events());
    sim.request(1);
    sim.failed(confirm.exchange, "connection reset");
    let events = sim.events();
    assert!(
        matches!(&events[0], LegacyEvent::Diagnostic(_)),
        "{events:?}"
    );
    let again = only_request(events[1..].to_vec());
    assert_eq!(again.body, INITIALIZED.as_bytes());
    sim.end(again.exchange);
    let events = sim.events();
    assert_eq!(
        fatal(&events),
        "notifications/initialized could not be sent (twice): the server closed the connection without an answer"
    );
    assert!(!events.iter().any(|e| matches!(e, LegacyEvent::Request(_))));
}

#[test]
fn legacy_post_accepted_delivers_nothing() {
    let config = HttpConfig {
        max_body: 16,
        ..HttpConfig::default()
    };
    let mut sim = Sim::with(SSE_URL, config);
    sim.open("/m");
    sim.request(0);
    let p = only_request(sim.events()).exchange;
    sim.head(p, &head(202, Some("text/plain"), &[]));
    sim.body(p, b"Accepted");
    sim.end(p);
    assert_eq!(sim.events(), vec![]);
    assert!(sim.delivered.is_empty());

    // A 2xx body is drained, but not forever.
    sim.request(1);
    let p = only_request(sim.events()).exchange;
    sim.head(p, &head(200, Some("application/json"), &[]));
    sim.body(p, &[b' '; 17]);
    let events = sim.events();
    assert!(
        matches!(&events[..], [LegacyEvent::Abort(x), LegacyEvent::Diagnostic(_)] if *x == p),
        "{events:?}"
    );
    sim.end(p);
    assert_eq!(sim.events(), vec![]);
}
