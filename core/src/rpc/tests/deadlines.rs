//! Deadlines: the earliest timer, stale deadlines, firing order.

use super::*;

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
