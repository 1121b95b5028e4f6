//! Limits: pending requests, queued and unwritten bytes.

use super::*;

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
