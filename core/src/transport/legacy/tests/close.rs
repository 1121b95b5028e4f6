//! Closing the transport.

use super::*;

#[test]
fn legacy_close_aborts_and_finishes() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(0);
    sim.send("{}", SendKind::Notification);
    let posts = requests(sim.events());
    sim.head(posts[1].exchange, &head(202, None, &[]));
    sim.t.begin_close(sim.now);
    assert_eq!(
        sim.events(),
        vec![
            LegacyEvent::Abort(GET),
            LegacyEvent::Abort(posts[0].exchange),
            LegacyEvent::Abort(posts[1].exchange),
            LegacyEvent::Finished,
        ]
    );
    assert_eq!(sim.t.poll_timeout(), None);
    // Nothing after Finished.
    sim.t.begin_close(sim.now);
    sim.request(1);
    sim.body(GET, b"data: {}\n\n");
    sim.end(GET);
    sim.failed(posts[0].exchange, "aborted");
    sim.t.handle_timeout(sim.now);
    assert_eq!(sim.events(), vec![]);
    assert!(sim.delivered.is_empty());

    // Before the endpoint: held messages are dropped, only the stream aborted.
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.request(0);
    sim.t.begin_close(sim.now);
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Abort(GET), LegacyEvent::Finished]
    );
}

#[test]
fn legacy_close_lets_a_cancellation_in_flight_reach_the_server() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(0);
    sim.send(
        r#"{"method":"notifications/cancelled"}"#,
        SendKind::Notification,
    );
    let posts = requests(sim.events());
    sim.t.begin_close(sim.now);
    // The stream and the request stop; the cancellation goes on.
    assert_eq!(
        sim.events(),
        vec![
            LegacyEvent::Abort(GET),
            LegacyEvent::Abort(posts[0].exchange)
        ]
    );
    assert!(sim.t.poll_timeout().is_some());
    sim.request(1);
    sim.head(posts[1].exchange, &head(202, None, &[]));
    let events = sim.events();
    assert!(
        events.ends_with(&[LegacyEvent::Abort(posts[1].exchange), LegacyEvent::Finished]),
        "{events:?}"
    );
    // Never answered: given up when the drain's time is over.
    let mut sim = Sim::new();
    sim.open("/m");
    sim.send("{}", SendKind::Notification);
    let posts = requests(sim.events());
    sim.t.begin_close(sim.now);
    sim.events();
    sim.now = sim.t.poll_timeout().unwrap();
    sim.t.handle_timeout(sim.now);
    assert_eq!(
        sim.events(),
        vec![LegacyEvent::Abort(posts[0].exchange), LegacyEvent::Finished]
    );
}
