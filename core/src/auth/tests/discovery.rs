//! Discovery of the protected resource and its authorization server:
//! metadata locations, legacy servers, hostile or odd documents, and
//! redirects of the flow's own exchanges.

use super::*;

#[test]
fn full_flow_with_dynamic_registration() {
    let r = run(happy(), config(), "Bearer");
    let s = ok(&r);
    assert_eq!(s.tokens.access_token, "at-1");
    assert_eq!(s.tokens.refresh_token.as_deref(), Some("rt-1"));
    assert_eq!(s.tokens.expires_in, Some(3600));
    assert_eq!(s.client.client_id, "dyn-1");
    assert_eq!(s.client.auth_method, Some(TokenAuthMethod::None));
    assert_eq!(s.issuer.as_deref(), Some(AS));
    assert_eq!(s.resource, MCP);
    assert_eq!(s.bearer(), "Bearer at-1");
    assert_eq!(
        r.web.urls(),
        [
            "https://mcp.example/.well-known/oauth-protected-resource/mcp",
            "https://auth.example/.well-known/oauth-authorization-server",
            "https://auth.example/register",
            "https://auth.example/token",
        ]
    );
    // The authorization request.
    let q: HashMap<_, _> = query_pairs(&r.authorize[0]).into_iter().collect();
    assert!(r.authorize[0].starts_with("https://auth.example/authorize?"));
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "dyn-1");
    assert_eq!(q["redirect_uri"], "http://127.0.0.1:5555/callback");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["code_challenge"], pkce_challenge(&"v".repeat(43)));
    assert_eq!(q["state"], "the-state");
    assert_eq!(q["resource"], MCP);
    assert!(!q.contains_key("scope"), "no scope anywhere: omitted");
    // Registration.
    let reg: serde_json::Value = serde_json::from_slice(&r.web.requests[2].body).unwrap();
    assert_eq!(reg["redirect_uris"][0], "http://127.0.0.1:5555/callback");
    assert_eq!(reg["token_endpoint_auth_method"], "none");
    assert_eq!(reg["application_type"], "native", "a loopback redirect");
    assert_eq!(
        reg["grant_types"],
        serde_json::json!(["authorization_code", "refresh_token"])
    );
    // Token request.
    let f = r.web.form("https://auth.example/token");
    assert_eq!(f["grant_type"], "authorization_code");
    assert_eq!(f["code"], "c0de");
    assert_eq!(f["code_verifier"], "v".repeat(43));
    assert_eq!(f["redirect_uri"], "http://127.0.0.1:5555/callback");
    assert_eq!(f["resource"], MCP);
    assert_eq!(f["client_id"], "dyn-1");
    let tok = r.web.requests.last().unwrap();
    assert_eq!(tok.method, HttpMethod::Post);
    assert_eq!(
        tok.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert!(tok.header("authorization").is_none());
    // No request of the flow carries a bearer token.
    assert!(r
        .web
        .requests
        .iter()
        .all(|q| q.header("authorization").is_none()));
}

#[test]
fn resource_metadata_from_the_challenge_comes_first() {
    let web = happy().route("https://mcp.example/custom/meta.json", 200, prm(MCP, &[AS]));
    let r = run(
        web,
        config(),
        r#"Bearer resource_metadata="https://mcp.example/custom/meta.json""#,
    );
    ok(&r);
    assert_eq!(r.web.urls()[0], "https://mcp.example/custom/meta.json");
    assert_eq!(
        r.web.urls()[1],
        "https://auth.example/.well-known/oauth-authorization-server"
    );
}

#[test]
fn root_resource_metadata_and_path_aware_issuer() {
    let issuer = "https://auth.example/tenant1";
    let web = Web::default()
        .route(
            "https://mcp.example/.well-known/oauth-protected-resource",
            200,
            prm("https://mcp.example", &[issuer]),
        )
        .route(
            "https://auth.example/tenant1/.well-known/openid-configuration",
            200,
            asm(issuer),
        )
        .route(
            &format!("{issuer}/register"),
            201,
            serde_json::json!({"client_id": "c"}),
        )
        .route(&format!("{issuer}/token"), 200, token_ok());
    let r = run(web, config(), "Bearer");
    let s = ok(&r);
    assert_eq!(
        s.resource, "https://mcp.example",
        "the metadata's resource is used"
    );
    assert_eq!(
        r.web.urls()[..5],
        [
            "https://mcp.example/.well-known/oauth-protected-resource/mcp",
            "https://mcp.example/.well-known/oauth-protected-resource",
            "https://auth.example/.well-known/oauth-authorization-server/tenant1",
            "https://auth.example/.well-known/openid-configuration/tenant1",
            "https://auth.example/tenant1/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn legacy_server_with_metadata_at_its_origin() {
    let origin = "https://mcp.example";
    let web = Web::default()
        .route(
            &format!("{origin}/.well-known/oauth-authorization-server"),
            200,
            asm(origin),
        )
        .route(
            &format!("{origin}/register"),
            201,
            serde_json::json!({"client_id": "c"}),
        )
        .route(&format!("{origin}/token"), 200, token_ok());
    let r = run(web, config(), "Bearer");
    let s = ok(&r);
    assert_eq!(s.issuer.as_deref(), Some(origin));
}

#[test]
fn legacy_server_metadata_naming_another_issuer_is_refused() {
    // The 0.1.16 conformance mock's mistake: metadata at the root naming
    // `<origin>/oauth` (RFC 8414 §3.3 forbids using it).
    let origin = "https://mcp.example";
    let web = Web::default().route(
        &format!("{origin}/.well-known/oauth-authorization-server"),
        200,
        asm("https://mcp.example/oauth"),
    );
    let r = run(web, config(), "Bearer");
    assert!(
        matches!(err(&r), AuthError::IssuerMismatch { .. }),
        "{}",
        err(&r)
    );
    assert!(r.authorize.is_empty());
}

#[test]
fn legacy_server_without_metadata_uses_default_endpoints() {
    let web = Web::default()
        .route(
            "https://mcp.example/register",
            201,
            serde_json::json!({"client_id": "c", "client_secret": "s"}),
        )
        .route(
            "https://mcp.example/token",
            200,
            serde_json::json!({"access_token": "t", "token_type": "bearer"}),
        );
    let r = run(web, config(), "Bearer");
    let s = ok(&r);
    assert_eq!(s.issuer, None);
    assert_eq!(s.token_endpoint, "https://mcp.example/token");
    assert!(r.authorize[0].starts_with("https://mcp.example/authorize?"));
    // A secret and no metadata: client_secret_basic (RFC 8414 default).
    assert_eq!(
        s.client.auth_method,
        Some(TokenAuthMethod::ClientSecretBasic)
    );
    let tok = r.web.requests.last().unwrap();
    assert!(tok.header("authorization").unwrap().starts_with("Basic "));
}

#[test]
fn missing_s256_is_refused() {
    for methods in [serde_json::json!(["plain"]), serde_json::Value::Null] {
        let mut m = asm(AS);
        if methods.is_null() {
            m.as_object_mut()
                .unwrap()
                .remove("code_challenge_methods_supported");
        } else {
            m["code_challenge_methods_supported"] = methods;
        }
        let web = happy().route(
            &format!("{AS}/.well-known/oauth-authorization-server"),
            200,
            m,
        );
        let r = run(web, config(), "Bearer");
        assert!(matches!(err(&r), AuthError::PkceUnsupported { .. }));
        assert!(r.authorize.is_empty());
    }
}

#[test]
fn plain_http_endpoints_off_loopback_are_refused() {
    let mut m = asm(AS);
    m["token_endpoint"] = "http://auth.example/token".into();
    let web = happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m,
    );
    assert!(matches!(
        err(&run(web, config(), "Bearer")),
        AuthError::InsecureUrl { .. }
    ));
    // An authorization server named over plain HTTP.
    let web = happy().route(
        "https://mcp.example/.well-known/oauth-protected-resource/mcp",
        200,
        prm(MCP, &["http://auth.example"]),
    );
    assert!(matches!(
        err(&run(web, config(), "Bearer")),
        AuthError::InsecureUrl { .. }
    ));
    // resource_metadata over plain HTTP at another host.
    let r = run(
        happy(),
        config(),
        r#"Bearer resource_metadata="http://evil.example/m""#,
    );
    assert!(matches!(err(&r), AuthError::InsecureUrl { .. }));
}

#[test]
fn oversized_documents_are_refused() {
    let huge = format!(
        "{{\"resource\":\"{MCP}\",\"x\":\"{}\"}}",
        "a".repeat(300 * 1024)
    );
    let web = happy().raw(
        "https://mcp.example/.well-known/oauth-protected-resource/mcp",
        200,
        &huge,
    );
    let r = run(web, config(), "Bearer");
    match err(&r) {
        AuthError::Metadata { reason, .. } => assert!(reason.contains("larger than"), "{reason}"),
        e => panic!("{e}"),
    }
}

#[test]
fn garbage_metadata_is_skipped_then_reported() {
    let web = Web::default()
        .raw(
            "https://mcp.example/.well-known/oauth-protected-resource/mcp",
            200,
            "<html>",
        )
        .route(
            "https://mcp.example/.well-known/oauth-protected-resource",
            200,
            prm(MCP, &[AS]),
        )
        .raw(
            &format!("{AS}/.well-known/oauth-authorization-server"),
            200,
            "[1,2]",
        );
    let r = run(web, config(), "Bearer");
    match err(&r) {
        AuthError::Discovery { detail, .. } => {
            assert!(detail.contains("not a metadata document"), "{detail}");
            assert!(detail.contains("HTTP 404"), "{detail}");
        }
        e => panic!("{e}"),
    }
}

#[test]
fn resource_mismatch_is_refused_before_authorizing() {
    let web = happy().route(
        "https://mcp.example/.well-known/oauth-protected-resource/mcp",
        200,
        prm("https://evil.example/mcp", &[AS]),
    );
    let r = run(web, config(), "Bearer");
    assert!(matches!(err(&r), AuthError::ResourceMismatch { .. }));
    assert_eq!(r.web.requests.len(), 1);
}

// ---- redirects of the flow's own exchanges ---------------------------------

#[test]
fn same_origin_redirects_are_followed_by_every_exchange() {
    let web = happy()
        .moved(&format!("{AS}/token"), 307, "/v2/token")
        .route(&format!("{AS}/v2/token"), 200, token_ok())
        .moved(
            &format!("{AS}/register"),
            308,
            "https://auth.example/v2/register",
        )
        .route(
            &format!("{AS}/v2/register"),
            201,
            serde_json::json!({"client_id": "dyn-2"}),
        );
    let r = run(web, config(), "Bearer");
    let s = ok(&r);
    assert_eq!(s.client.client_id, "dyn-2");
    assert_eq!(s.tokens.access_token, "at-1");
    // The token request went again, whole, to the new URL; the state
    // keeps the endpoint the metadata named.
    let f = r.web.form(&format!("{AS}/v2/token"));
    assert_eq!(f["grant_type"], "authorization_code");
    assert_eq!(s.token_endpoint, format!("{AS}/token"));
}

#[test]
fn a_token_or_registration_request_never_leaves_the_origin() {
    for (url, ok_route) in [
        (format!("{AS}/token"), "https://evil.example/token"),
        (format!("{AS}/register"), "https://evil.example/register"),
    ] {
        let web = happy()
            .moved(&url, 307, ok_route)
            .route(ok_route, 200, token_ok());
        let r = run(web, config(), "Bearer");
        let e = err(&r).to_string();
        assert!(e.contains("another origin"), "{e}");
        assert!(
            !r.web
                .urls()
                .iter()
                .any(|u| u.starts_with("https://evil.example")),
            "{:?}",
            r.web.urls()
        );
    }
    // A POST redirected with 302 would become a GET: refused.
    let web = happy().moved(&format!("{AS}/token"), 302, "/v2/token");
    let r = run(web, config(), "Bearer");
    assert!(err(&r).to_string().contains("307 and 308"), "{}", err(&r));
}

#[test]
fn a_metadata_document_may_move_to_another_secure_origin() {
    let web = happy()
        .moved(
            &format!("{AS}/.well-known/oauth-authorization-server"),
            301,
            "https://docs.example/as.json",
        )
        .route("https://docs.example/as.json", 200, asm(AS));
    ok(&run(web, config(), "Bearer"));
    // Not to plain HTTP off loopback.
    let web = happy()
        .moved(
            &format!("{AS}/.well-known/oauth-authorization-server"),
            301,
            "http://docs.example/as.json",
        )
        .route("http://docs.example/as.json", 200, asm(AS));
    let r = run(web, config(), "Bearer");
    assert!(
        !r.web
            .urls()
            .iter()
            .any(|u| u.starts_with("http://docs.example")),
        "{:?}",
        r.web.urls()
    );
}
