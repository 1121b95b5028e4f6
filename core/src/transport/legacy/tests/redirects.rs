//! Redirects of the event stream and of POSTs.

use super::*;

/// The redirect of `ex` followed: `[Abort(ex), Request(next)]`.
fn followed(events: Vec<LegacyEvent>, ex: ExchangeId) -> HttpRequest {
    match <[LegacyEvent; 2]>::try_from(events) {
        Ok([LegacyEvent::Abort(a), LegacyEvent::Request(r)]) if a == ex => r,
        Ok(other) => panic!("expected Abort({ex}) and a request, got {other:?}"),
        Err(events) => panic!("expected Abort and a request, got {events:?}"),
    }
}

#[test]
fn legacy_stream_and_posts_follow_redirects() {
    let mut sim = Sim::new();
    let get = only_request(sim.events());
    sim.head(GET, &head(307, None, &[("Location", "/sse/")]));
    let get2 = followed(sim.events(), GET);
    assert_eq!(get2.url.to_string(), "http://127.0.0.1:3001/sse/");
    assert_eq!(
        (get2.method, &get2.headers),
        (HttpMethod::Get, &get.headers)
    );
    // The endpoint is relative to where the stream was found.
    sim.head(get2.exchange, &sse_head());
    sim.body(
        get2.exchange,
        b"event: endpoint\ndata: messages/?session_id=1\n\n",
    );
    sim.request(1);
    let post = only_request(sim.events());
    assert_eq!(
        post.url.to_string(),
        "http://127.0.0.1:3001/sse/messages/?session_id=1"
    );
    sim.head(
        post.exchange,
        &head(308, None, &[("Location", "/m2?session_id=1")]),
    );
    let post2 = followed(sim.events(), post.exchange);
    assert_eq!((post2.method, &post2.body), (HttpMethod::Post, &post.body));
    sim.head(post2.exchange, &head(202, None, &[]));
    sim.end(post2.exchange);
    assert_eq!(sim.events(), vec![]);
    // Answered there: later messages go there directly.
    sim.request(2);
    assert_eq!(only_request(sim.events()).url.target(), "/m2?session_id=1");
}

#[test]
fn legacy_redirects_not_followed_fail_the_post_or_the_stream() {
    let mut sim = Sim::new();
    sim.open("/m");
    sim.request(1);
    let post = only_request(sim.events());
    sim.head(
        post.exchange,
        &head(303, None, &[("Location", "/elsewhere")]),
    );
    match &sim.events()[..] {
        [LegacyEvent::Abort(a), LegacyEvent::Fail {
            id: 1,
            failure: RequestFailure::Redirect(e),
        }] => {
            assert_eq!(*a, post.exchange);
            let m = e.to_string();
            assert!(
                m.contains("http://127.0.0.1:3001/elsewhere") && m.contains("POST"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The stream: another origin is refused, naming both URLs.
    let mut sim = Sim::new();
    let _ = sim.events();
    sim.head(
        GET,
        &head(302, None, &[("Location", "http://localhost:3001/sse")]),
    );
    let events = sim.events();
    let message = fatal(&events);
    assert!(
        message.contains("http://127.0.0.1:3001/sse")
            && message.contains("http://localhost:3001/sse"),
        "{message}"
    );
}

#[test]
fn legacy_cross_origin_redirect_when_allowed_drops_credentials() {
    let config = HttpConfig {
        allow_cross_origin_redirects: true,
        headers: headers(&[("Authorization", "Bearer t"), ("X-Team", "blue")]),
        ..HttpConfig::default()
    };
    let mut sim = Sim::with(SSE_URL, config);
    let get = only_request(sim.events());
    assert_eq!(get.header("authorization"), Some("Bearer t"));
    sim.head(
        GET,
        &head(307, None, &[("Location", "http://127.0.0.1:4001/sse")]),
    );
    let away = followed(sim.events(), GET);
    assert_eq!(
        (away.header("authorization"), away.header("x-team")),
        (None, Some("blue"))
    );
    sim.head(away.exchange, &sse_head());
    sim.body(away.exchange, b"event: endpoint\ndata: /m\n\n");
    sim.request(1);
    let post = only_request(sim.events());
    assert_eq!(post.url.to_string(), "http://127.0.0.1:4001/m");
    assert_eq!(post.header("authorization"), None);
}
