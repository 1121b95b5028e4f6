//! The authorization code flow: scopes, step-up, refresh before
//! authorizing, redirects, non-interactive use, timeouts, and what
//! debug output never shows.

use super::*;

fn scope_of(r: &Run) -> Option<String> {
    let q: HashMap<_, _> = query_pairs(&r.authorize[0]).into_iter().collect();
    q.get("scope").cloned()
}

#[test]
fn scope_selection() {
    // From the challenge.
    let r = run(happy(), config(), r#"Bearer scope="mcp:basic""#);
    assert_eq!(scope_of(&r).as_deref(), Some("mcp:basic"));
    // Else from scopes_supported.
    let mut p = prm(MCP, &[AS]);
    p["scopes_supported"] = serde_json::json!(["a", "b"]);
    let web = happy().route(
        "https://mcp.example/.well-known/oauth-protected-resource/mcp",
        200,
        p,
    );
    let r = run(web, config(), "Bearer");
    assert_eq!(scope_of(&r).as_deref(), Some("a b"));
    // offline_access when the authorization server lists it.
    let mut m = asm(AS);
    m["scopes_supported"] = serde_json::json!(["mcp:basic", "offline_access"]);
    let web = happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m,
    );
    let r = run(web, config(), r#"Bearer scope="mcp:basic""#);
    assert_eq!(scope_of(&r).as_deref(), Some("mcp:basic offline_access"));
    // Configured scope wins.
    let cfg = AuthConfig {
        scope: Some("x".into()),
        ..config()
    };
    let r = run(happy(), cfg, r#"Bearer scope="mcp:basic""#);
    assert_eq!(scope_of(&r).as_deref(), Some("x"));
}

#[test]
fn step_up_adds_the_new_scope_and_reuses_the_client() {
    let trig = Trigger {
        status: 403,
        challenges: parse_challenges([r#"Bearer error="insufficient_scope", scope="mcp:write""#]),
    };
    let r = run_with(
        happy(),
        config(),
        trig,
        Some(state_with("mcp:basic", Some("rt"))),
        consent,
    );
    let s = ok(&r);
    assert_eq!(scope_of(&r).as_deref(), Some("mcp:basic mcp:write"));
    assert_eq!(s.scope.as_deref(), Some("mcp:basic mcp:write"));
    // Same server: the client is reused (no registration); no refresh on a
    // step-up (it cannot widen the scope).
    assert!(!r.web.urls().iter().any(|u| u.ends_with("/register")));
    assert_eq!(s.client.client_id, "old-client");
    assert_eq!(
        r.web.form("https://auth.example/token")["grant_type"],
        "authorization_code"
    );
}

#[test]
fn refresh_token_is_tried_first() {
    let web = Web::default().route(
        &format!("{AS}/token"),
        200,
        serde_json::json!({"access_token": "at-2", "token_type": "Bearer"}),
    );
    let r = run_with(
        web,
        config(),
        trigger("Bearer"),
        Some(state_with("s", Some("rt-0"))),
        |_| panic!("no user needed"),
    );
    let s = ok(&r);
    assert_eq!(s.tokens.access_token, "at-2");
    assert_eq!(
        s.tokens.refresh_token.as_deref(),
        Some("rt-0"),
        "kept when not rotated"
    );
    assert_eq!(r.web.requests.len(), 1);
    let f = r.web.form("https://auth.example/token");
    assert_eq!(f["grant_type"], "refresh_token");
    assert_eq!(f["refresh_token"], "rt-0");
    assert_eq!(f["resource"], MCP);
    assert_eq!(f["client_id"], "old-client");
}

#[test]
fn refused_refresh_falls_back_to_authorizing() {
    let web = happy().route(
        &format!("{AS}/token"),
        400,
        serde_json::json!({"error": "invalid_grant"}),
    );
    let r = run_with(
        web,
        config(),
        trigger("Bearer"),
        Some(state_with("s", Some("rt-0"))),
        consent,
    );
    // The token endpoint refuses everything here: the final error is the
    // code exchange's, after a full authorization.
    assert_eq!(r.authorize.len(), 1);
    match err(&r) {
        AuthError::Token {
            status: 400, error, ..
        } => assert_eq!(error, "invalid_grant"),
        e => panic!("{e}"),
    }
}

#[test]
fn bad_redirects_are_refused() {
    type Check = fn(&AuthError) -> bool;
    let cases: [(&str, Check); 5] = [
        // A stray redirect (not ours) with an error is not the server's refusal.
        ("http://127.0.0.1:5555/callback?error=access_denied", |e| matches!(e, AuthError::InvalidRedirect(_))),
        ("http://127.0.0.1:5555/callback?code=x&state=other", |e| matches!(e, AuthError::InvalidRedirect(_))),
        ("http://127.0.0.1:5555/callback?error=access_denied&error_description=no+way&state=the-state", |e| matches!(e, AuthError::Denied { error, description } if error == "access_denied" && description.as_deref() == Some("no way"))),
        ("http://127.0.0.1:5555/callback?state=the-state", |e| matches!(e, AuthError::InvalidRedirect(_))),
        ("http://127.0.0.1:5555/callback?code=x&state=the-state&iss=https%3A%2F%2Fevil.example", |e| matches!(e, AuthError::InvalidRedirect(m) if m.contains("mix-up"))),
    ];
    for (cb, check) in cases {
        let r = run_with(happy(), config(), trigger("Bearer"), None, |_| {
            cb.to_owned()
        });
        assert!(check(err(&r)), "{cb}: {}", err(&r));
        assert!(!r.web.urls().iter().any(|u| u.ends_with("/token")));
    }
    // iss equal to the issuer is fine.
    let r = run_with(happy(), config(), trigger("Bearer"), None, |_| {
        "http://127.0.0.1:5555/callback?code=x&state=the-state&iss=https%3A%2F%2Fauth.example"
            .into()
    });
    ok(&r);
}

#[test]
fn non_interactive_needs_a_user() {
    let cfg = AuthConfig {
        interactive: false,
        ..config()
    };
    let r = run(happy(), cfg.clone(), "Bearer");
    assert_eq!(err(&r), &AuthError::InteractionRequired);
    assert!(
        r.web.requests.is_empty(),
        "no registration for an authorization that cannot happen"
    );
    // A stored refresh token still works without a user…
    let web = Web::default().route(&format!("{AS}/token"), 200, token_ok());
    let r = run_with(
        web,
        cfg.clone(),
        trigger("Bearer"),
        Some(state_with("s", Some("rt"))),
        |_| panic!("no user"),
    );
    ok(&r);
    // …and when it is refused, the answer says so, and why (issue 34:
    // it used to say only that a user was needed).
    let web = Web::default().route(
        &format!("{AS}/token"),
        400,
        serde_json::json!({"error": "invalid_grant", "error_description": "grant revoked"}),
    );
    let r = run_with(
        web,
        cfg,
        trigger("Bearer"),
        Some(state_with("s", Some("rt"))),
        |_| panic!("no user"),
    );
    assert_eq!(
        err(&r),
        &AuthError::RefreshRefused {
            status: 400,
            error: "invalid_grant".into(),
            description: Some("grant revoked".into()),
        }
    );
    let text = err(&r).to_string();
    assert!(
        text.contains("refused the refresh")
            && text.contains("invalid_grant")
            && text.contains("grant revoked")
            && text.contains("--login"),
        "{text}"
    );
    assert_eq!(r.web.requests.len(), 1);
    // The store's lock was taken for the refresh and released.
    assert_eq!(r.locks, [true, false]);
}

#[test]
fn silent_servers_time_out_into_the_next_candidate() {
    let mut web = happy().route(
        "https://mcp.example/.well-known/oauth-protected-resource",
        200,
        prm(MCP, &[AS]),
    );
    web.silent
        .push("https://mcp.example/.well-known/oauth-protected-resource/mcp".into());
    ok(&run(web, config(), "Bearer"));
    // A silent token endpoint fails the flow.
    let mut web = happy();
    web.silent.push(format!("{AS}/token"));
    assert!(matches!(
        err(&run(web, config(), "Bearer")),
        AuthError::Exchange { .. }
    ));
}

#[test]
fn an_unanswered_authorization_times_out() {
    let mut now = Instant::now();
    let mut flow = AuthFlow::new(
        now,
        config(),
        HttpUrl::parse(MCP).unwrap(),
        trigger("Bearer"),
        None,
        secrets(),
        ExchangeId(0),
    );
    let mut web = happy();
    let mut failed = None;
    for _ in 0..20 {
        while let Some(a) = flow.poll_output() {
            match a {
                AuthAction::Http(req) => {
                    let key = req.url.to_string();
                    let (st, body) = web
                        .routes
                        .get(&key)
                        .cloned()
                        .unwrap_or((404, String::new()));
                    web.requests.push(req.clone());
                    flow.handle_head(now, req.exchange, &head(st));
                    flow.handle_body(now, req.exchange, body.as_bytes());
                    flow.handle_end(now, req.exchange);
                }
                AuthAction::Failed(e) => failed = Some(e),
                _ => {}
            }
        }
        if failed.is_some() {
            break;
        }
        now = flow.poll_timeout().unwrap();
        flow.handle_timeout(now);
    }
    assert!(matches!(failed, Some(AuthError::Abandoned(_))));
    // Secrets never show in Debug output.
    let s = state_with("s", Some("refresh-secret"));
    let dbg = format!(
        "{s:?} {:?}",
        ClientCredentials::confidential("id", "client-secret")
    );
    assert!(
        !dbg.contains("refresh-secret")
            && !dbg.contains("client-secret")
            && !dbg.contains("\"old\"")
    );
}

#[test]
fn requests_never_show_tokens_or_secrets_in_debug() {
    let r = run(happy(), config(), "Bearer");
    for req in &r.web.requests {
        let dbg = format!("{req:?}");
        assert!(!dbg.contains("v".repeat(43).as_str()), "{dbg}");
        assert!(!dbg.contains("c0de"), "{dbg}");
    }
    let req = HttpRequest {
        exchange: ExchangeId(1),
        method: HttpMethod::Post,
        url: HttpUrl::parse(MCP).unwrap(),
        headers: vec![("Authorization".into(), "Bearer sekrit".into())],
        body: b"{}".to_vec(),
        purpose: crate::exchange::ExchangePurpose::Request,
        carries: Some(3),
    };
    assert!(!format!("{req:?}").contains("sekrit"));
}
