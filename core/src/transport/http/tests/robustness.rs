//! Timers, chunking, and robustness against arbitrary inputs.

use super::*;

// ---- timers, chunking, robustness -----------------------------------------------

#[test]
fn poll_timeout_is_the_earliest_timer_and_handle_timeout_is_idempotent() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 200, &[SSE]);
    h.body(listener.exchange, "retry: 300\nid: l\ndata:\n\n");
    h.end(listener.exchange);
    for (id, retry) in [(1, 700), (2, 200)] {
        h.request(id, "x");
        let r = h.one();
        h.head(r.exchange, 200, &[SSE]);
        h.body(r.exchange, format!("retry: {retry}\nid: e\ndata:\n\n"));
        h.end(r.exchange);
    }
    h.events();
    let t0 = h.now;
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(200)));
    h.advance(ms(200));
    assert_eq!(h.sent().len(), 1);
    h.t.handle_timeout(h.now);
    assert_eq!(h.events(), []);
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(300)));
    h.advance(ms(100));
    assert_eq!(h.one().purpose, ExchangePurpose::Listen);
    assert_eq!(h.t.poll_timeout(), Some(t0 + ms(700)));
    h.advance(ms(400));
    assert_eq!(h.one().purpose, ExchangePurpose::Resume);
    assert_eq!(h.t.poll_timeout(), None);
}

/// What a conversation produced: delivered texts and events.
type Transcript = (Vec<String>, Vec<HttpEvent>);

/// A conversation whose bodies are fed in chunks chosen by `chunk`
/// (given the remaining length, returns the next chunk's length).
fn conversation(chunk: &mut dyn FnMut(usize) -> usize) -> Transcript {
    let mut h = Harness::new();
    let mut events = Vec::new();
    let mut feed = |h: &mut Harness, ex: ExchangeId, data: &[u8], events: &mut Vec<HttpEvent>| {
        let mut rest = data;
        while !rest.is_empty() {
            let n = chunk(rest.len()).clamp(1, rest.len());
            h.body(ex, &rest[..n]);
            events.extend(h.events());
            rest = &rest[n..];
        }
    };
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 200, &[SSE, ("Mcp-Session-Id", "s-1")]);
    let init_stream = format!(
        "\u{feff}id: 0\r\ndata:\r\n\r\n{}",
        ev(Some("1"), &result(0))
    );
    feed(&mut h, init.exchange, init_stream.as_bytes(), &mut events);
    h.end(init.exchange);
    h.t.request_done(0);
    h.notify("notifications/initialized");
    h.t.initialized(h.now, V);
    let confirm = h.one();
    h.head(confirm.exchange, 202, &[]);
    let listener = h.one().exchange;
    h.head(listener, 200, &[SSE]);
    h.request(1, "tools/call");
    let call = h.one();
    h.head(call.exchange, 200, &[SSE]);
    let call_stream = [
        "id: c0\ndata:\n\n".to_owned(),
        ": comment\r".to_owned(),
        "id: c1\rdata: {\"jsonrpc\":\"2.0\",\r".to_owned(),
        "data: \"method\":\"notifications/progress\"}\r\r".to_owned(),
        ev(Some("c2"), &req(0, "sampling/createMessage")),
        "retry: 250\nid: c3\ndata:\n\n".to_owned(),
    ]
    .concat();
    feed(&mut h, call.exchange, call_stream.as_bytes(), &mut events);
    h.end(call.exchange);
    events.extend(h.events());
    h.advance(ms(250));
    let get = h.one();
    assert_eq!(get.header("Last-Event-ID"), Some("c3"));
    h.head(get.exchange, 200, &[SSE]);
    let listen_stream = ev(Some("g1"), &note("notifications/resources/list_changed"));
    feed(&mut h, listener, listen_stream.as_bytes(), &mut events);
    let resumed = ev(Some("c4"), &result(1));
    feed(&mut h, get.exchange, resumed.as_bytes(), &mut events);
    h.end(get.exchange);
    h.request(2, "tools/list");
    let list = h.one();
    h.head(list.exchange, 200, &[JSON]);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{}]}}}}"#,
        vec![r#"{"name":"t"}"#; 50].join(",")
    );
    feed(&mut h, list.exchange, big.as_bytes(), &mut events);
    h.end(list.exchange);
    events.extend(h.events());
    (h.delivered, events)
}

#[test]
fn chunking_does_not_change_delivered_messages_or_events() {
    let whole = conversation(&mut |n| n);
    assert_eq!(whole.0.len(), 6, "{:?}", whole.0);
    assert_eq!(
        whole.0[1],
        "{\"jsonrpc\":\"2.0\",\n\"method\":\"notifications/progress\"}"
    );
    assert!(whole.1.iter().all(is_diag), "{:?}", whole.1);
    assert_eq!(conversation(&mut |_| 1), whole);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..50 {
        let mut rng = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let got = conversation(&mut |n| (rng() % 40) as usize % n + 1);
        assert_eq!(got, whole);
    }
}

#[test]
fn arbitrary_inputs_never_panic_and_timers_stay_in_the_future() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut rng = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pieces: [&[u8]; 12] = [
        b"id: 1\n",
        b"data: ",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        b"\n\n",
        b"retry: 5\n",
        b"\r",
        b"[{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":1}]",
        b"\xff\xfe",
        b"event: x\n",
        b"id: \x01\n",
        b"data:\n\n",
    ];
    let statuses = [200, 202, 400, 404, 405, 500, 307, 303];
    let locations = ["/mcp/", "/mcp", "http://127.0.0.1:3002/x", ""];
    let types = ["text/event-stream", "application/json", "text/html", ""];
    for _ in 0..200 {
        let mut h = Harness::with(HttpConfig {
            max_body: 64,
            max_event: 64,
            default_retry: ms(10),
            max_resume_attempts: 2,
            max_listen_attempts: 2,
            ..base()
        });
        let mut open: Vec<ExchangeId> = Vec::new();
        let mut next_id = 0;
        for _ in 0..150 {
            let r = rng();
            let ex = if open.is_empty() {
                ExchangeId(r % 4)
            } else {
                open[(r as usize / 7) % open.len()]
            };
            match r % 13 {
                0 | 1 => {
                    h.request(next_id, "m");
                    next_id += 1;
                }
                2 => h.notify(if r % 2 == 0 {
                    "notifications/initialized"
                } else {
                    "n"
                }),
                3 => {
                    let ct = types[(r as usize / 3) % types.len()];
                    let status = statuses[(r as usize / 11) % statuses.len()];
                    let mut hs = vec![("Mcp-Session-Id", if r % 5 == 0 { "bad id" } else { "s" })];
                    if !ct.is_empty() {
                        hs.push(("Content-Type", ct));
                    }
                    let location = locations[(r as usize / 13) % locations.len()];
                    if !location.is_empty() {
                        hs.push(("Location", location));
                    }
                    h.head(ex, status, &hs);
                }
                4..=6 => {
                    let mut data = Vec::new();
                    for k in 0..(r % 5) {
                        data.extend_from_slice(pieces[((r >> (8 + k * 4)) % 12) as usize]);
                    }
                    h.body(ex, &data);
                }
                7 => h.end(ex),
                8 => h.failed(ex, "reset"),
                9 => h.advance(ms(r % 50)),
                10 => h.t.request_done(r % (next_id + 1)),
                11 => match r % 3 {
                    0 => h.t.initialized(h.now, V),
                    1 => h.t.reset_session(),
                    _ => {
                        if r % 7 == 0 {
                            h.t.begin_close(h.now)
                        }
                    }
                },
                _ => h.t.handle_timeout(h.now),
            }
            for e in h.events() {
                match e {
                    HttpEvent::Request(req) => open.push(req.exchange),
                    HttpEvent::Abort(ex) => open.retain(|o| *o != ex),
                    _ => {}
                }
            }
            h.t.handle_timeout(h.now);
            h.events();
            if let Some(t) = h.t.poll_timeout() {
                assert!(t > h.now);
            }
            assert!(h.t.held.len() <= MAX_HELD);
        }
    }
}

#[test]
fn listener_or_resume_404_with_session_expires_the_session() {
    let mut h = Harness::new();
    let listener = h.handshake();
    h.head(listener.exchange, 404, &[]);
    assert_eq!(
        h.events(),
        [
            HttpEvent::Abort(listener.exchange),
            HttpEvent::SessionExpired
        ]
    );

    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\ndata:\n\n");
    h.end(r.exchange);
    h.advance(ms(1000));
    let get = h.one();
    h.head(get.exchange, 404, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(get.exchange));
    assert_eq!(
        events[1],
        HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::SessionExpired
        }
    );
    assert_eq!(events.last(), Some(&HttpEvent::SessionExpired));
}

#[test]
fn event_id_unfit_for_a_header_cannot_be_resumed() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "id: a\u{1}b\ndata:\n\n");
    h.end(r.exchange);
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
}

#[test]
fn huge_retry_and_timeouts_do_not_overflow() {
    let mut h = Harness::with(HttpConfig {
        max_retry: Duration::MAX,
        close_timeout: Duration::MAX,
        ..base()
    });
    h.handshake();
    h.request(1, "tools/call");
    let r = h.one();
    h.head(r.exchange, 200, &[SSE]);
    h.body(r.exchange, "retry: 18446744073709551615\nid: a\ndata:\n\n");
    h.end(r.exchange);
    assert!(h.t.poll_timeout().is_some_and(|t| t > h.now));
    h.t.begin_close(h.now);
    assert!(h.t.poll_timeout().is_some_and(|t| t > h.now));
}

#[test]
fn failed_initialize_lets_the_next_request_be_a_new_initialize() {
    // 401 (e.g. before a login): the next request is the initialize again.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.head(init.exchange, 401, &[("WWW-Authenticate", "Bearer")]);
    h.end(init.exchange);
    assert!(matches!(
        &h.events()[..],
        [HttpEvent::Fail {
            id: 0,
            failure: RequestFailure::Http { status: 401, .. }
        }]
    ));
    h.request(1, "initialize");
    let again = h.one();
    assert_eq!(again.body, req(1, "initialize").as_bytes());
    // Its stream breaks without an event id after the session id came:
    // failed, and the session id is forgotten.
    h.head(again.exchange, 200, &[SSE, ("Mcp-Session-Id", "s")]);
    h.failed(again.exchange, "reset");
    assert_eq!(
        actions(h.events()),
        [HttpEvent::Fail {
            id: 1,
            failure: RequestFailure::NoResponse { id: 1 }
        }]
    );
    assert_eq!(h.t.session_id(), None);
    // Timed out (completed unanswered): the same.
    h.request(2, "initialize");
    let third = h.one();
    h.t.request_done(2);
    assert_eq!(h.events(), [HttpEvent::Abort(third.exchange)]);
    let sent = h.initialize(3, Some("s"));
    assert_eq!(sent.len(), 2);
    // Completed after its response: not a failure.
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    h.answer_json(init.exchange, &result(0));
    h.t.request_done(0);
    h.request(1, "ping");
    assert_eq!(h.events(), []);
}

#[test]
fn era_headers_go_with_their_message_only_in_the_2026_era() {
    let era = || vec![("Mcp-Method".to_owned(), "tools/call".to_owned())];
    // Before the era: the transport leaves them out.
    let mut h = Harness::new();
    h.t.send_with(
        h.now,
        req(0, "initialize").into_bytes(),
        SendKind::Request { id: 0 },
        era(),
    );
    assert!(h.one().header("Mcp-Method").is_none());
    // In it, they go out, also when a 401 parks the message until the
    // authorization is done.
    let mut h = Harness::new();
    h.t.enable_auth();
    h.t.begin_modern("2026-07-28");
    h.t.send_with(
        h.now,
        req(0, "tools/call").into_bytes(),
        SendKind::Request { id: 0 },
        era(),
    );
    let post = h.one();
    assert_eq!(post.header("Mcp-Method"), Some("tools/call"));
    assert_eq!(post.header("MCP-Protocol-Version"), Some("2026-07-28"));
    h.head(post.exchange, 401, &[("WWW-Authenticate", "Bearer")]);
    assert!(h.events().iter().any(|e| matches!(
        e,
        HttpEvent::AuthRequired {
            request: Some(0),
            ..
        }
    )));
    h.t.authorized(h.now, "Bearer t".into());
    let again = h.one();
    assert_eq!(again.header("Mcp-Method"), Some("tools/call"));
    assert_eq!(again.header("Authorization"), Some("Bearer t"));
}
