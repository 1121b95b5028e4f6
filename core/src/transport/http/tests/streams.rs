//! SSE streams: resumption after a disconnect, and the listener.

use super::*;

// ---- resumption ---------------------------------------------------------------

#[test]
fn sse_resume_waits_retry_then_sends_last_event_id() {
    // The conformance suite's `sse-retry`.
    let mut h = Harness::new();
    h.handshake();
    h.delivered.clear();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: event-1\nretry: 500\ndata: \n\n");
    h.end(r.exchange);
    assert!(h.events().iter().all(is_diag));
    let t0 = h.now;
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(500)));
    h.advance(ms(499));
    assert_eq!(h.events(), []);
    h.advance(ms(1));
    let get = h.one();
    assert_eq!(get.method, HttpMethod::Get);
    assert_eq!(get.purpose, ExchangePurpose::Resume);
    assert!(get.body.is_empty());
    assert_eq!(
        headers_of(&get),
        [
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", "sess-1"),
            ("MCP-Protocol-Version", V),
            ("Last-Event-ID", "event-1"),
        ]
    );
    h.head(get.exchange, 200, &[SSE]);
    h.body(get.exchange, ev(Some("event-2"), &result(1)));
    h.end(get.exchange);
    assert_eq!(h.delivered, [result(1)]);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), None);
}

/// An SSE event's data goes to the engine with its buffer (the engine
/// keeps a large result in it instead of copying it out); a JSON answer's
/// body is lent (its doubled buffer would be shrunk, which costs more than
/// the copy with glibc).
#[test]
fn an_sse_answer_is_handed_over_with_its_buffer_and_a_json_one_lent() {
    let mut h = Harness::new();
    h.handshake();
    h.delivered.clear();
    h.owned.clear();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, ev(Some("e1"), &result(1)));
    h.end(r.exchange);
    h.request(2, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[("Content-Type", "application/json")]);
    h.body(r.exchange, result(2));
    h.end(r.exchange);
    assert_eq!(h.delivered, [result(1), result(2)]);
    assert_eq!(h.owned, [true, false]);
}

#[test]
fn sse_resume_uses_default_retry_clamped_to_max_retry() {
    let mut h = Harness::with(HttpConfig {
        default_retry: ms(2000),
        max_retry: ms(5000),
        ..base()
    });
    h.handshake();
    h.request(1, "a");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: 1\ndata:\n\n");
    h.end(r.exchange);
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(2000)));

    h.request(2, "b");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: 1\nretry: 60000\ndata:\n\n");
    h.end(r.exchange);
    h.events();
    h.t.request_done(1);
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(5000)));
}

#[test]
fn sse_resume_attempts_are_bounded_then_fail_with_no_response() {
    let mut h = Harness::with(HttpConfig {
        max_resume_attempts: 2,
        ..base()
    });
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: e1\ndata:\n\n");
    h.failed(r.exchange, "connection reset");
    assert!(h.events().iter().all(is_diag));
    // Attempt 1: refused.
    h.advance(ms(1000));
    let get = h.one();
    h.failed(get.exchange, "connection refused");
    assert!(h.events().iter().all(is_diag));
    // Attempt 2: an empty stream.
    h.advance(ms(1000));
    let get = h.one();
    assert_eq!(get.header("Last-Event-ID"), Some("e1"));
    h.head(get.exchange, 200, &[SSE]);
    h.end(get.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn resume_attempt_count_resets_when_an_event_arrives() {
    let mut h = Harness::with(HttpConfig {
        max_resume_attempts: 1,
        ..base()
    });
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: e1\ndata:\n\n");
    h.end(r.exchange);
    for n in 2..5 {
        h.advance(ms(1000));
        let get = h.one();
        assert_eq!(
            get.header("Last-Event-ID"),
            Some(format!("e{}", n - 1).as_str())
        );
        h.head(get.exchange, 200, &[SSE]);
        h.body(get.exchange, format!("id: e{n}\ndata:\n\n"));
        h.end(get.exchange);
        assert!(h.events().iter().all(is_diag));
    }
    // A GET whose stream brings nothing uses up the one attempt.
    h.advance(ms(1000));
    let get = h.one();
    h.head(get.exchange, 200, &[SSE]);
    h.end(get.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
}

#[test]
fn stream_without_an_event_id_cannot_be_resumed_and_fails_at_once() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, ev(None, &note("notifications/progress")));
    h.end(r.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn disconnect_mid_stream_resumes_instead_of_cancelling() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(
        r.exchange,
        "id: a\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\nid: b\ndata: {\"js",
    );
    h.failed(r.exchange, "connection reset by peer");
    let events = h.events();
    assert!(events.iter().all(is_diag), "{events:?}");
    assert!(
        matches!(&events[..], [HttpEvent::Diagnostic(m)] if m.contains("connection reset by peer"))
    );
    h.advance(ms(1000));
    let get = h.one();
    // The half-received event "b" is not committed.
    assert_eq!(get.header("Last-Event-ID"), Some("a"));
    assert_eq!(get.purpose, ExchangePurpose::Resume);
}

#[test]
fn resume_answered_with_an_http_error_fails_with_it() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.advance(ms(1000));
    h.events();
    let get = h.t.exchanges.keys().copied().max().unwrap();
    h.head(get, 405, &[]);
    h.end(get);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::Http {
                status: 405,
                message: "HTTP 405: Method Not Allowed".into()
            }
        }]
    );
}

#[test]
fn request_done_aborts_the_open_stream_and_stops_resuming() {
    let mut h = Harness::new();
    h.handshake();
    h.delivered.clear();
    // An open stream.
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.t.request_done(1);
    assert_eq!(h.events(), [HttpEvent::Abort(r.exchange)]);
    h.body(r.exchange, ev(None, &result(1)));
    h.end(r.exchange);
    assert!(h.delivered.is_empty());
    assert_eq!(h.events(), []);
    // A stream waiting to be resumed.
    h.request(2, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.events();
    assert!(h.t.poll_timeout().is_some());
    h.t.request_done(2);
    assert_eq!(h.t.poll_timeout(), None);
    h.advance(ms(5000));
    assert_eq!(h.events(), []);
    // A POST not yet answered.
    h.request(3, "tools/call");
    let r = h.one();
    h.t.request_done(3);
    assert_eq!(h.events(), [HttpEvent::Abort(r.exchange)]);
}

#[test]
fn response_on_the_listener_stops_resumption() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.events();
    h.body(listener.exchange, ev(None, &result(1)));
    assert_eq!(h.delivered.last(), Some(&result(1)));
    assert_eq!(h.t.poll_timeout(), None);
    h.advance(ms(5000));
    assert_eq!(h.events(), []);
}

// ---- listener ---------------------------------------------------------------

#[test]
fn listener_opens_after_initialized_and_delivers_server_requests() {
    let mut h = Harness::new();
    let listener = h.handshake();
    assert_eq!(listener.method, HttpMethod::Get);
    assert_eq!(listener.header("Last-Event-ID"), None);
    h.delivered.clear();
    h.head(listener.exchange, 200, &[SSE]);
    let elicit = r#"{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}"#;
    h.body(listener.exchange, ": keep-alive\n\n");
    h.body(listener.exchange, ev(Some("g1"), elicit));
    assert_eq!(h.delivered, [elicit]);
    assert_eq!(h.events(), []);
}

#[test]
fn listener_settles_on_its_head_or_after_listen_settle() {
    // Settles when the listener's head arrives.
    let mut h = Harness::with(HttpConfig {
        listen_settle: ms(1000),
        ..base()
    });
    let listener = h.handshake();
    assert!(!h.t.settled());
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(1000)));
    h.head(listener.exchange, 200, &[SSE]);
    assert!(h.t.settled());
    assert_eq!(h.t.poll_timeout(), None);

    // Or on 405, or when it fails.
    let mut h = Harness::with(HttpConfig {
        listen_settle: ms(1000),
        ..base()
    });
    let listener = h.handshake();
    h.head(listener.exchange, 405, &[]);
    assert!(h.t.settled());

    // Or when the wait runs out (a server that holds the head back).
    let mut h = Harness::with(HttpConfig {
        listen_settle: ms(1000),
        ..base()
    });
    h.handshake();
    h.advance(ms(999));
    assert!(!h.t.settled());
    h.advance(ms(1));
    assert!(h.t.settled());
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn listener_is_not_opened_when_listen_is_off() {
    let mut h = Harness::with(HttpConfig {
        listen: false,
        ..base()
    });
    let sent = h.initialize(0, Some("s"));
    assert_eq!(sent.len(), 1);
}

#[test]
fn listener_405_disables_it_quietly() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 405, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(listener.exchange));
    assert!(events[1..].iter().all(is_diag));
    assert_eq!(h.t.poll_timeout(), None);
    h.advance(ms(60_000));
    assert_eq!(h.events(), []);
}

#[test]
fn listener_reopens_after_stream_end_with_last_event_id() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.body(listener.exchange, "retry: 200\n");
    h.body(
        listener.exchange,
        ev(Some("L1"), &note("notifications/tools/list_changed")),
    );
    h.end(listener.exchange);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), Some(h.now + ms(200)));
    h.advance(ms(200));
    let again = h.one();
    assert_eq!(again.purpose, ExchangePurpose::Listen);
    assert_eq!(again.header("Last-Event-ID"), Some("L1"));
    assert_eq!(again.header("Mcp-Session-Id"), Some("sess-1"));
}

#[test]
fn listener_failures_back_off_exponentially_then_give_up() {
    let mut h = Harness::with(HttpConfig {
        default_retry: ms(100),
        max_listen_attempts: 3,
        ..base()
    });
    let mut listener = h.handshake();
    for (n, delay) in [100, 200, 400].into_iter().enumerate() {
        if n == 1 {
            h.head(listener.exchange, 500, &[]);
            assert_eq!(h.events()[0], HttpEvent::Abort(listener.exchange));
        } else {
            h.failed(listener.exchange, "connection refused");
            assert!(h.events().iter().all(is_diag));
        }
        assert_eq!(h.t.poll_timeout(), Some(h.now + ms(delay)));
        h.advance(ms(delay - 1));
        assert_eq!(h.events(), []);
        h.advance(ms(1));
        listener = h.one();
        assert_eq!(listener.purpose, ExchangePurpose::Listen);
    }
    // A stream that ends without any event is a failure too: the 4th.
    h.head(listener.exchange, 200, &[SSE]);
    h.end(listener.exchange);
    match &h.events()[..] {
        [HttpEvent::Diagnostic(m)] => assert!(m.contains("giving up"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn listener_failure_count_resets_when_an_event_arrives() {
    let mut h = Harness::with(HttpConfig {
        default_retry: ms(100),
        max_listen_attempts: 1,
        ..base()
    });
    let mut listener = h.handshake();
    for _ in 0..3 {
        h.failed(listener.exchange, "refused");
        h.advance(ms(100));
        listener = h.one();
        h.head(listener.exchange, 200, &[SSE]);
        h.body(listener.exchange, "id: x\ndata:\n\n");
        h.failed(listener.exchange, "reset");
        h.advance(ms(100));
        listener = h.one();
        assert_eq!(listener.header("Last-Event-ID"), Some("x"));
    }
}
