//! Sessions: expiry, re-initialization, the legacy fallback, and close.

use super::*;

// ---- sessions -----------------------------------------------------------------

/// After a handshake: request 1 meets a 404; returns its POST.
fn expire(h: &mut Harness) -> HttpRequest {
    h.request(1, "tools/list");
    let r = h.one();
    h.head(r.exchange, 404, &[]);
    r
}

#[test]
fn http_404_with_session_reinitializes_and_resends_once() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.body(listener.exchange, ev(Some("old-1"), &note("n")));
    let first = expire(&mut h);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(first.exchange),
            HttpEvent::Abort(listener.exchange),
            HttpEvent::SessionExpired
        ]
    );
    // Held until the new session is ready.
    h.request(2, "ping");
    h.notify("notifications/roots/list_changed");
    h.advance(ms(10_000));
    assert_eq!(h.events(), []);
    h.t.reset_session();
    assert_eq!(h.t.session_id(), None);
    let sent = h.initialize(3, Some("sess-2"));
    let bodies: Vec<&[u8]> = sent.iter().map(|r| &r.body[..]).collect();
    assert_eq!(
        bodies,
        [
            note("notifications/initialized").as_bytes(),
            first.body.as_slice(),
            req(2, "ping").as_bytes(),
            note("notifications/roots/list_changed").as_bytes(),
            b"",
        ]
    );
    for r in &sent {
        assert_eq!(r.header("Mcp-Session-Id"), Some("sess-2"));
        assert_eq!(r.header("MCP-Protocol-Version"), Some(V));
    }
    // The listener is reopened for the new session, without the old ids.
    assert_eq!(sent[4].purpose, ExchangePurpose::Listen);
    assert_eq!(sent[4].header("Last-Event-ID"), None);
    // The resent request is answered normally.
    h.answer_json(sent[1].exchange, &result(1));
    assert_eq!(h.delivered.last(), Some(&result(1)));
    assert_eq!(h.events(), []);
}

#[test]
fn second_404_for_a_resent_request_fails_it_with_session_expired() {
    let mut h = Harness::new();
    h.handshake();
    expire(&mut h);
    h.events();
    h.t.reset_session();
    let sent = h.initialize(2, Some("sess-2"));
    h.head(sent[0].exchange, 202, &[]);
    h.end(sent[0].exchange);
    h.head(sent[1].exchange, 404, &[]);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(sent[1].exchange),
            HttpEvent::Fail {
                id: 1,
                failure: RequestFailure::SessionExpired
            },
            HttpEvent::Abort(sent[2].exchange),
            HttpEvent::SessionExpired,
        ]
    );
    // Not sent a third time.
    h.t.reset_session();
    let sent = h.initialize(3, Some("sess-3"));
    assert_eq!(sent.len(), 2);
}

#[test]
fn session_expiry_fails_the_streams_of_the_old_session() {
    let mut h = Harness::new();
    let listener = h.handshake();
    // 1: open stream; 2: waiting to resume; 3: POST unanswered.
    h.request(1, "a");
    let r1 = h.one();
    h.head(r1.exchange, 200, &[SSE]);
    h.body(r1.exchange, "id: x\ndata:\n\n");
    h.request(2, "b");
    let r2 = h.one();
    h.head(r2.exchange, 200, &[SSE]);
    h.body(r2.exchange, "id: y\ndata:\n\n");
    h.end(r2.exchange);
    h.request(3, "c");
    let r3 = h.one();
    h.events();
    h.request(5, "e");
    let r5 = h.one();
    h.head(r5.exchange, 404, &[]);
    // 2 cannot be resumed in another session: it fails. 1's stream is
    // still open: the server may still answer on it (one that ends the
    // session, then answers the call that ended it).
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(r5.exchange),
            HttpEvent::Fail {
                id: 2,
                failure: RequestFailure::SessionExpired
            },
            HttpEvent::Abort(listener.exchange),
            HttpEvent::SessionExpired,
        ]
    );
    assert_eq!(h.t.poll_timeout(), None);
    h.body(
        r1.exchange,
        "id: x2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
    );
    assert_eq!(
        h.delivered.last().map(String::as_str),
        Some(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
    );
    h.end(r1.exchange);
    // 3 meets its own 404 later: sent again, no second SessionExpired.
    h.head(r3.exchange, 404, &[]);
    assert_eq!(h.events(), [HttpEvent::Abort(r3.exchange)]);
    h.t.reset_session();
    let sent = h.initialize(6, Some("sess-2"));
    assert_eq!(sent[1].body, req(3, "c").as_bytes());
    assert_eq!(sent[2].body, req(5, "e").as_bytes());
    // A stream of the old session that ends without its answer: the
    // request fails then (no resumption across sessions).
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "a");
    let r1 = h.one();
    h.head(r1.exchange, 200, &[SSE]);
    h.body(r1.exchange, "id: x\ndata:\n\n");
    h.events();
    expire_with(&mut h, 2);
    h.events();
    h.end(r1.exchange);
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::SessionExpired
        }]
    );
    // A late 404 of the old session, once the new one is ready: sent at once.
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "a");
    let r1 = h.one();
    expire_with(&mut h, 2);
    h.events();
    h.t.reset_session();
    h.initialize(3, Some("sess-2"));
    h.head(r1.exchange, 404, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(r1.exchange));
    assert!(
        matches!(&events[1], HttpEvent::Request(r) if r.body == req(1, "a").as_bytes()
        && r.header("Mcp-Session-Id") == Some("sess-2"))
    );
    assert_eq!(events.len(), 2);
}

fn expire_with(h: &mut Harness, id: u64) {
    h.request(id, "x");
    let r = h.one();
    h.head(r.exchange, 404, &[]);
}

#[test]
fn sessions_expiring_in_a_row_without_success_are_fatal() {
    let mut h = Harness::new();
    let mut sent = h.initialize_unconfirmed(0, Some("s0"));
    for n in 1..=4 {
        // notifications/initialized meets a 404 at once.
        h.head(sent.exchange, 404, &[]);
        let events = actions(h.events());
        if n <= MAX_CONSECUTIVE_EXPIRIES {
            assert_eq!(events.last(), Some(&HttpEvent::SessionExpired), "{n}");
            h.t.reset_session();
            sent = h.initialize_unconfirmed(u64::from(n), Some("s"));
        } else {
            assert!(
                matches!(events.last(), Some(HttpEvent::Fatal(_))),
                "{events:?}"
            );
        }
    }
    // A success in between resets the count.
    let mut h = Harness::new();
    h.initialize(0, Some("s0"));
    for n in 1..=6 {
        h.request(100 + n, "ping");
        let r = h.one();
        h.answer_json(r.exchange, &result(100 + n));
        expire_with(&mut h, 200 + n);
        assert_eq!(actions(h.events()).last(), Some(&HttpEvent::SessionExpired));
        h.t.reset_session();
        let sent = h.initialize(n, Some("s"));
        // The request that met the 404 goes out again once accepted.
        assert_eq!(sent[1].body, req(200 + n, "x").as_bytes());
        h.answer_json(sent[1].exchange, &result(200 + n));
    }
}

/// After a 404: the new session's `notifications/initialized` goes out
/// alone; the request that met the 404, one sent meanwhile, a late 404 of
/// the old session and the listener all wait for its 2xx head, in any
/// order of inputs and however long it takes.
#[test]
fn nothing_overtakes_initialized_until_the_server_accepted_it() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "a");
    let r1 = h.one();
    h.request(2, "x");
    let r2 = h.one();
    h.head(r2.exchange, 404, &[]);
    h.events();
    h.t.reset_session();
    let confirm = h.initialize_unconfirmed(3, Some("sess-2"));
    assert_eq!(confirm.header("Mcp-Session-Id"), Some("sess-2"));
    h.request(4, "b");
    h.notify("notifications/roots/list_changed");
    h.head(r1.exchange, 404, &[]);
    assert_eq!(h.events(), [HttpEvent::Abort(r1.exchange)]);
    h.advance(ms(60_000));
    assert_eq!(h.events(), []);
    assert!(!h.t.settled());
    h.head(confirm.exchange, 202, &[]);
    let bodies: Vec<Vec<u8>> = h.sent().into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies,
        [
            req(1, "a").into_bytes(),
            req(2, "x").into_bytes(),
            req(4, "b").into_bytes(),
            note("notifications/roots/list_changed").into_bytes(),
            Vec::new(),
        ]
    );
    assert!(h.t.settled());
    h.end(confirm.exchange);
    assert_eq!(h.events(), []);
}

/// A refusal of `notifications/initialized` (a status other than 2xx,
/// 404 or an authorization) ends the connection, quoting the answer; the
/// held messages are never sent.
#[test]
fn refused_initialized_is_fatal_and_releases_nothing() {
    let mut h = Harness::new();
    let confirm = h.initialize_unconfirmed(0, Some("s"));
    h.request(1, "tools/list");
    h.head(confirm.exchange, 400, &[JSON]);
    h.body(confirm.exchange, r#"{"error":"no"}"#);
    assert_eq!(h.events(), []);
    h.end(confirm.exchange);
    match h.events().as_slice() {
        [HttpEvent::Fatal(m)] => assert_eq!(
            m,
            r#"the server refused notifications/initialized: HTTP 400: {"error":"no"}"#
        ),
        other => panic!("{other:?}"),
    }
    h.request(2, "ping");
    assert!(matches!(
        h.events().as_slice(),
        [HttpEvent::Fail { id: 2, .. }]
    ));
}

/// A failure before the head (reset, refused connection) sends the
/// notification again, once; nothing else goes out meanwhile; a second
/// failure ends the connection.
#[test]
fn failed_initialized_post_is_sent_again_once_then_fatal() {
    let mut h = Harness::new();
    let confirm = h.initialize_unconfirmed(0, Some("s"));
    h.request(1, "tools/list");
    h.failed(confirm.exchange, "connection reset");
    let again = h.one();
    assert_eq!(again.body, confirm.body);
    assert_eq!(again.header("Mcp-Session-Id"), Some("s"));
    h.head(again.exchange, 202, &[]);
    let sent = h.sent();
    assert_eq!(sent[0].body, req(1, "tools/list").as_bytes());
    assert_eq!(sent[1].purpose, ExchangePurpose::Listen);

    let mut h = Harness::new();
    let confirm = h.initialize_unconfirmed(0, Some("s"));
    h.request(1, "tools/list");
    h.end(confirm.exchange);
    let again = h.one();
    h.failed(again.exchange, "connection reset");
    match actions(h.events()).as_slice() {
        [HttpEvent::Fatal(m)] => assert_eq!(
            m,
            "notifications/initialized could not be sent (twice): connection reset"
        ),
        other => panic!("{other:?}"),
    }
}

/// A 401 on `notifications/initialized` (auth enabled): it is sent again
/// first once authorized, and still nothing else before its 2xx; if the
/// authorization fails, the session cannot start.
#[test]
fn initialized_meeting_401_waits_for_the_authorization() {
    for succeed in [true, false] {
        let mut h = Harness::new();
        h.t.enable_auth();
        let confirm = h.initialize_unconfirmed(0, Some("s"));
        h.request(1, "tools/list");
        h.head(confirm.exchange, 401, &[("WWW-Authenticate", "Bearer")]);
        let events = actions(h.events());
        assert!(
            matches!(
                events.as_slice(),
                [
                    HttpEvent::Abort(_),
                    HttpEvent::AuthRequired { request: None, .. }
                ]
            ),
            "{events:?}"
        );
        h.request(2, "ping");
        assert_eq!(h.events(), []);
        if !succeed {
            h.t.authorization_failed("login refused");
            assert!(matches!(
                actions(h.events()).last(),
                Some(HttpEvent::Fatal(m)) if m.ends_with("login refused")
            ));
            continue;
        }
        h.t.authorized(h.now, "Bearer t".into());
        let again = h.one();
        assert_eq!(again.body, confirm.body);
        assert_eq!(again.header("Authorization"), Some("Bearer t"));
        h.head(again.exchange, 202, &[]);
        let bodies: Vec<Vec<u8>> = h.sent().into_iter().map(|r| r.body).collect();
        assert_eq!(
            bodies,
            [
                req(1, "tools/list").into_bytes(),
                req(2, "ping").into_bytes(),
                Vec::new()
            ]
        );
    }
}

#[test]
fn first_initialize_answered_400_404_405_falls_back_to_legacy() {
    for status in [400, 404, 405] {
        let mut h = Harness::new();
        h.request(0, "initialize");
        let init = h.one();
        h.notify("notifications/initialized");
        h.head(init.exchange, status, &[]);
        let mut expected = vec![HttpEvent::Abort(init.exchange)];
        if status == 400 {
            // Its body is read first (a -32022 would be a 2026-07-28
            // server's refusal): the fallback comes at its end.
            assert_eq!(h.events(), []);
            h.body(init.exchange, "Bad Request: no session");
            h.end(init.exchange);
            expected.clear();
        }
        expected.push(HttpEvent::FallbackToLegacy {
            resend: vec![
                (
                    req(0, "initialize").into_bytes(),
                    SendKind::Request { id: 0 },
                ),
                (
                    note("notifications/initialized").into_bytes(),
                    SendKind::Notification,
                ),
            ],
        });
        assert_eq!(h.events(), expected);
        assert!(h.delivered.is_empty(), "{:?}", h.delivered);
        h.body(init.exchange, "x");
        h.end(init.exchange);
        h.t.begin_close(h.now);
        assert_eq!(h.events(), [HttpEvent::Finished]);
    }
    // 400 with -32022 for the initialize: a 2026-07-28 server refusing
    // the handshake (a remembered era gone stale): its error reaches the
    // connection, which probes again; no fallback.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 400, &[("Content-Type", "application/json")]);
    let refusal = r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}"#;
    h.body(init.exchange, refusal);
    h.end(init.exchange);
    assert!(h.events().iter().all(is_diag));
    assert_eq!(h.delivered, [refusal]);
    h.t.begin_modern("2026-07-28");
    h.request(1, "server/discover");
    let probe = h.one();
    assert_eq!(probe.method, HttpMethod::Post);
    assert_eq!(probe.header("MCP-Protocol-Version"), Some("2026-07-28"));
    // Any other error is a plain failure.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 500, &[]);
    h.end(init.exchange);
    assert!(matches!(
        &h.events()[..],
        [HttpEvent::Fail {
            id: 0,
            failure: RequestFailure::Http { status: 500, .. }
        }]
    ));
}

#[test]
fn reinitialize_answered_404_is_a_failure_not_a_fallback() {
    let mut h = Harness::new();
    h.handshake();
    expire(&mut h);
    h.events();
    h.t.reset_session();
    h.request(2, "initialize");
    let init = h.one();
    assert_eq!(init.header("Mcp-Session-Id"), None);
    h.head(init.exchange, 404, &[]);
    h.end(init.exchange);
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 2,
            failure: RequestFailure::Http {
                status: 404,
                message: "HTTP 404: Not Found".into()
            }
        }]
    );
}

#[test]
fn initialize_answered_as_sse_with_priming_sets_the_session() {
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 200, &[SSE, ("mcp-session-id", "abc-123")]);
    h.body(init.exchange, "id: 1\ndata: \n\n");
    h.body(init.exchange, ev(Some("2"), &result(0)));
    assert_eq!(h.t.session_id(), Some("abc-123"));
    assert_eq!(h.delivered, [result(0)]);
    h.t.request_done(0);
    assert_eq!(h.events(), [HttpEvent::Abort(init.exchange)]);
}

// ---- close ------------------------------------------------------------------

#[test]
fn close_aborts_everything_sends_delete_and_finishes_on_its_answer() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.t.begin_close(h.now);
    let events = h.events();
    assert_eq!(
        events[..2],
        [
            HttpEvent::Abort(listener.exchange),
            HttpEvent::Abort(r.exchange)
        ]
    );
    let HttpEvent::Request(delete) = &events[2] else {
        panic!("{events:?}")
    };
    assert_eq!(events.len(), 3);
    assert_eq!(delete.method, HttpMethod::Delete);
    assert_eq!(delete.purpose, ExchangePurpose::Close);
    assert_eq!(
        headers_of(delete),
        [("Mcp-Session-Id", "sess-1"), ("MCP-Protocol-Version", V)]
    );
    h.t.begin_close(h.now);
    h.request(2, "ping");
    assert_eq!(
        h.events(),
        [HttpEvent::Fail {
            id: 2,
            failure: RequestFailure::Other("the connection is closed".into())
        }]
    );
    h.head(delete.exchange, 200, &[]);
    assert_eq!(
        h.events(),
        [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
    );
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn close_lets_a_cancellation_in_flight_reach_the_server_before_the_delete() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    // The call timed out: its notifications/cancelled is out.
    h.notify("notifications/cancelled");
    let cancel = h.one();
    h.t.begin_close(h.now);
    // Everything but the cancellation stops; no DELETE yet.
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(listener.exchange),
            HttpEvent::Abort(r.exchange)
        ]
    );
    h.head(cancel.exchange, 202, &[]);
    h.end(cancel.exchange);
    let events = h.events();
    let Some(HttpEvent::Request(delete)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(delete.method, HttpMethod::Delete);
    h.head(delete.exchange, 200, &[]);
    assert!(h.events().contains(&HttpEvent::Finished));
    // A cancellation that gets no answer is given up at the close timeout.
    let mut h = Harness::new();
    h.handshake();
    h.notify("notifications/cancelled");
    let cancel = h.one();
    h.t.begin_close(h.now);
    h.events();
    let until = h.t.poll_timeout().expect("a close timeout");
    h.now = until;
    h.t.handle_timeout(h.now);
    let events = h.events();
    assert!(
        events.contains(&HttpEvent::Abort(cancel.exchange)),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, HttpEvent::Request(r) if r.method == HttpMethod::Delete)),
        "{events:?}"
    );
}

#[test]
fn close_finishes_on_delete_405_or_failure() {
    for fail in [false, true] {
        let mut h = Harness::new();
        h.handshake();
        h.t.begin_close(h.now);
        let delete = h.events().into_iter().find_map(|e| match e {
            HttpEvent::Request(r) => Some(r),
            _ => None,
        });
        let delete = delete.unwrap();
        if fail {
            h.failed(delete.exchange, "connection refused");
            assert_eq!(h.events(), [HttpEvent::Finished]);
        } else {
            h.head(delete.exchange, 405, &[]);
            assert_eq!(
                h.events(),
                [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
            );
        }
    }
}

#[test]
fn close_finishes_after_close_timeout_without_an_answer() {
    let mut h = Harness::new();
    h.handshake();
    h.t.begin_close(h.now);
    let events = h.events();
    assert!(matches!(
        events[..],
        [HttpEvent::Abort(_), HttpEvent::Request(_)]
    ));
    let HttpEvent::Request(delete) = events[1].clone() else {
        unreachable!()
    };
    assert_eq!(h.t.poll_timeout(), Some(h.now + Duration::from_secs(2)));
    h.advance(ms(1999));
    assert_eq!(h.events(), []);
    h.advance(ms(1));
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
    );
    h.advance(ms(1));
    h.head(delete.exchange, 200, &[]);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn close_without_session_finishes_at_once() {
    let mut h = Harness::new();
    h.t.begin_close(h.now);
    assert_eq!(h.events(), [HttpEvent::Finished]);

    let mut h = Harness::new();
    let sent = h.initialize(0, None);
    h.t.begin_close(h.now);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(sent[0].exchange),
            HttpEvent::Abort(sent[1].exchange),
            HttpEvent::Finished
        ]
    );
    // After a 404 the session is already gone: nothing to delete.
    let mut h = Harness::new();
    h.handshake();
    expire(&mut h);
    h.events();
    h.t.begin_close(h.now);
    assert_eq!(h.events(), [HttpEvent::Finished]);
}
