//! Redirects of POSTs, the listener and the DELETE.

use super::*;

// ---- redirects -------------------------------------------------------------

impl Harness {
    /// Answers exchange `ex` with a redirect to `location`: it is aborted
    /// and the same request goes out again, as a new exchange, there.
    fn redirect(&mut self, sent: &HttpRequest, status: u16, location: &str) -> HttpRequest {
        self.head(sent.exchange, status, &[("Location", location)]);
        let events = actions(self.events());
        let [HttpEvent::Abort(aborted), HttpEvent::Request(next)] = &events[..] else {
            panic!("expected Abort and Request, got {events:?}");
        };
        assert_eq!(*aborted, sent.exchange);
        assert!(next.exchange > sent.exchange);
        assert_eq!(
            (next.method, &next.body, next.purpose, next.carries),
            (sent.method, &sent.body, sent.purpose, sent.carries)
        );
        next.clone()
    }

    /// Answers exchange `ex` with a redirect that is not followed: the
    /// failure of the request it carried.
    fn refused(
        &mut self,
        sent: &HttpRequest,
        status: u16,
        location: Option<&str>,
    ) -> RedirectError {
        let headers: Vec<(&str, &str)> = location.map(|l| ("Location", l)).into_iter().collect();
        self.head(sent.exchange, status, &headers);
        let events = actions(self.events());
        match &events[..] {
            [HttpEvent::Abort(a), HttpEvent::Fail {
                id,
                failure: RequestFailure::Redirect(e),
            }] => {
                assert_eq!((*a, Some(*id)), (sent.exchange, sent.carries));
                e.clone()
            }
            other => panic!("expected Abort and a redirect failure, got {other:?}"),
        }
    }
}

#[test]
fn a_307_to_the_slashed_path_moves_the_endpoint_for_everything_after() {
    for status in [307, 308] {
        let mut h = Harness::new();
        h.request(0, "initialize");
        let init = h.one();
        let moved = h.redirect(&init, status, "/mcp/");
        assert_eq!(moved.url.to_string(), "http://127.0.0.1:3001/mcp/");
        assert_eq!(moved.headers, init.headers);
        // Late reports about the redirected exchange are ignored.
        h.body(init.exchange, "<html>moved</html>");
        h.end(init.exchange);
        assert_eq!(h.events(), []);
        h.head(moved.exchange, 200, &[JSON, ("Mcp-Session-Id", "s-1")]);
        let events = h.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, HttpEvent::Note(n) if n.contains("moved"))),
            "{events:?}"
        );
        h.body(moved.exchange, result(0));
        h.end(moved.exchange);
        assert_eq!(h.delivered, [result(0)]);
        h.t.request_done(0);
        assert_eq!(h.t.url().to_string(), "http://127.0.0.1:3001/mcp/");
        h.notify("notifications/initialized");
        h.t.initialized(h.now, V);
        // The listener waits for notifications/initialized to be accepted.
        let confirm = h.one();
        h.head(confirm.exchange, 202, &[]);
        let sent = [confirm, h.one()];
        for r in &sent {
            assert_eq!(r.url.path(), "/mcp/", "{r:?}");
            assert_eq!(r.header("Mcp-Session-Id"), Some("s-1"));
        }
        assert_eq!(sent[1].purpose, ExchangePurpose::Listen);
        h.request(1, "tools/list");
        assert_eq!(h.one().url.path(), "/mcp/");
        h.t.begin_close(h.now);
        let delete = actions(h.events())
            .into_iter()
            .find_map(|e| match e {
                HttpEvent::Request(r) => Some(r),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            (delete.method, delete.url.path()),
            (HttpMethod::Delete, "/mcp/")
        );
    }
}

#[test]
fn the_listener_and_the_delete_follow_redirects_too() {
    let mut h = Harness::new();
    let listener = h.handshake();
    // fetch follows 301/302/303 for a GET.
    let again = h.redirect(&listener, 302, "/listen");
    assert_eq!(again.url.path(), "/listen");
    assert_eq!(again.header("Mcp-Session-Id"), Some("sess-1"));
    assert_eq!(again.header("Accept"), Some("text/event-stream"));
    h.head(again.exchange, 200, &[SSE]);
    h.body(
        again.exchange,
        ev(Some("1"), &note("notifications/tools/list_changed")),
    );
    assert_eq!(
        h.delivered.last().unwrap(),
        &note("notifications/tools/list_changed")
    );
    // The GET's answer moved the endpoint.
    assert_eq!(h.t.url().path(), "/listen");
    h.t.begin_close(h.now);
    let delete = actions(h.events())
        .into_iter()
        .find_map(|e| match e {
            HttpEvent::Request(r) => Some(r),
            _ => None,
        })
        .unwrap();
    assert_eq!(delete.url.path(), "/listen");
    let delete = h.redirect(&delete, 307, "/mcp");
    assert_eq!(delete.method, HttpMethod::Delete);
    h.head(delete.exchange, 204, &[]);
    assert_eq!(
        h.events(),
        [HttpEvent::Abort(delete.exchange), HttpEvent::Finished]
    );
}

#[test]
fn a_303_on_a_post_fails_naming_the_location_and_initialize_can_be_sent_again() {
    for status in [301, 302, 303] {
        let mut h = Harness::new();
        h.request(0, "initialize");
        let init = h.one();
        let e = h.refused(&init, status, Some("/mcp/"));
        let RedirectError::MethodChange {
            location, method, ..
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!((location.path(), *method), ("/mcp/", HttpMethod::Post));
        let m = e.to_string();
        assert!(
            m.contains("http://127.0.0.1:3001/mcp/") && m.contains(&format!("HTTP {status}")),
            "{m}"
        );
        // The endpoint did not move; the next request is a new initialize.
        assert_eq!(h.t.url().path(), "/mcp");
        h.request(1, "initialize");
        assert_eq!(h.one().url.path(), "/mcp");
    }
    // A DELETE is not turned into a GET either: the close just finishes.
    let mut h = Harness::new();
    h.handshake();
    h.t.begin_close(h.now);
    let delete = actions(h.events())
        .into_iter()
        .find_map(|e| match e {
            HttpEvent::Request(r) => Some(r),
            _ => None,
        })
        .unwrap();
    h.head(delete.exchange, 303, &[("Location", "/x")]);
    let events = h.events();
    assert_eq!(events.last(), Some(&HttpEvent::Finished), "{events:?}");
}

#[test]
fn five_hops_are_followed_a_sixth_or_a_loop_is_an_error() {
    let mut h = Harness::new();
    h.request(0, "initialize");
    let mut sent = h.one();
    for n in 1..=5 {
        sent = h.redirect(&sent, 307, &format!("/hop/{n}"));
    }
    let e = h.refused(&sent, 307, Some("/hop/6"));
    assert!(
        matches!(e, RedirectError::TooMany { limit: 5, .. }),
        "{e:?}"
    );

    let mut h = Harness::new();
    let listener = h.handshake();
    h.request(1, "tools/list");
    let list = h.one();
    let there = h.redirect(&list, 308, "/a");
    let e = h.refused(&there, 308, Some("/mcp"));
    assert!(matches!(e, RedirectError::Loop { .. }), "{e:?}");
    assert!(e.to_string().contains("redirect loop"), "{e}");
    // A listener that meets an unfollowable redirect gives up (the same GET
    // would meet it again), with a diagnostic.
    h.head(listener.exchange, 307, &[]);
    let events = h.events();
    assert_eq!(events[0], HttpEvent::Abort(listener.exchange));
    assert!(
        matches!(&events[1], HttpEvent::Diagnostic(d) if d.contains("without a Location")),
        "{events:?}"
    );
    assert_eq!(h.t.listener.state, ListenState::GaveUp);
    assert_eq!(h.t.poll_timeout(), None);
}

#[test]
fn a_redirect_without_or_with_an_unusable_location_fails_its_request() {
    let mut h = Harness::new();
    h.handshake();
    h.request(1, "tools/list");
    let r = h.one();
    let e = h.refused(&r, 307, None);
    assert!(
        matches!(e, RedirectError::NoLocation { status: 307, .. }),
        "{e:?}"
    );
    h.request(2, "tools/list");
    let r = h.one();
    let e = h.refused(&r, 307, Some("gopher://x/"));
    assert!(matches!(e, RedirectError::BadLocation { .. }), "{e:?}");
    // The session goes on.
    h.request(3, "ping");
    assert_eq!(h.one().header("Mcp-Session-Id"), Some("sess-1"));
}

#[test]
fn another_origin_is_refused_by_default_naming_both_urls() {
    let mut h = Harness::new();
    h.request(0, "initialize");
    let init = h.one();
    let e = h.refused(&init, 307, Some("http://localhost:3001/mcp/"));
    assert!(matches!(e, RedirectError::CrossOrigin { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains("http://127.0.0.1:3001/mcp") && m.contains("http://localhost:3001/mcp/"),
        "{m}"
    );
}

#[test]
fn allowed_cross_origin_redirects_leave_credentials_and_session_behind() {
    let config = HttpConfig {
        allow_cross_origin_redirects: true,
        headers: vec![
            ("Authorization".into(), "Bearer configured".into()),
            ("X-Api-Team".into(), "blue".into()),
        ],
        ..base()
    };
    // The session issued at home does not follow a request elsewhere, and
    // that origin's 404 is not taken for the end of the session.
    let mut h = Harness::with(config.clone());
    h.handshake();
    h.request(1, "tools/list");
    let list = h.one();
    assert_eq!(list.header("Authorization"), Some("Bearer configured"));
    let away = h.redirect(&list, 307, "http://127.0.0.1:4001/mcp");
    assert_eq!(away.header("Authorization"), None);
    assert_eq!(away.header("Mcp-Session-Id"), None);
    assert_eq!(away.header("X-Api-Team"), Some("blue"));
    h.head(away.exchange, 404, &[]);
    h.end(away.exchange);
    let events = actions(h.events());
    assert!(
        matches!(
            &events[..],
            [HttpEvent::Fail {
                id: 1,
                failure: RequestFailure::Http { status: 404, .. }
            }]
        ),
        "{events:?}"
    );
    h.request(2, "ping");
    assert_eq!(h.one().header("Mcp-Session-Id"), Some("sess-1"));

    // The initialize moved away: the other origin's session is its own, and
    // the bearer set for home (and the configured one) never goes there.
    let mut h = Harness::with(config);
    h.t.enable_auth();
    h.t.set_authorization(Some("Bearer token-for-home".into()));
    h.request(0, "initialize");
    let init = h.one();
    assert_eq!(init.header("Authorization"), Some("Bearer token-for-home"));
    let away = h.redirect(&init, 308, "http://[::1]:4001/mcp/");
    assert_eq!(away.header("Authorization"), None);
    h.answer_json_with_session(away.exchange, 0, "s-away");
    h.t.request_done(0);
    assert_eq!(h.t.url().to_string(), "http://[::1]:4001/mcp/");
    h.notify("notifications/initialized");
    h.t.initialized(h.now, V);
    let confirm = h.one();
    h.head(confirm.exchange, 202, &[]);
    let sent = [confirm, h.one()];
    for r in &sent {
        assert_eq!(r.url.to_string(), "http://[::1]:4001/mcp/");
        assert_eq!(r.header("Mcp-Session-Id"), Some("s-away"));
        assert_eq!(r.header("Authorization"), None, "{r:?}");
        assert_eq!(r.header("X-Api-Team"), Some("blue"));
    }
    // A bearer obtained for the new endpoint is sent there.
    h.t.set_authorization(Some("Bearer token-for-away".into()));
    h.request(1, "ping");
    assert_eq!(
        h.one().header("Authorization"),
        Some("Bearer token-for-away")
    );
}

#[test]
fn a_cancelled_request_aborts_its_redirected_exchange_once() {
    let mut h = Harness::new();
    h.handshake();
    let delivered = h.delivered.len();
    h.request(1, "tools/call");
    let call = h.one();
    let moved = h.redirect(&call, 307, "/mcp/");
    h.t.request_done(1);
    assert_eq!(h.events(), [HttpEvent::Abort(moved.exchange)]);
    h.head(moved.exchange, 200, &[JSON]);
    h.body(moved.exchange, result(1));
    h.end(moved.exchange);
    assert_eq!(h.events(), []);
    assert_eq!(h.delivered.len(), delivered);
    // Nothing succeeded there: the endpoint stays.
    assert_eq!(h.t.url().path(), "/mcp");
}
