//! The grants without a user: client credentials, workload identity
//! (RFC 7523) and enterprise-managed authorization (SEP-990).

use super::*;

#[test]
fn client_credentials_grant() {
    let mut m = asm(AS);
    m["grant_types_supported"] = serde_json::json!(["client_credentials"]);
    m["token_endpoint_auth_methods_supported"] = serde_json::json!(["client_secret_basic"]);
    m.as_object_mut()
        .unwrap()
        .remove("code_challenge_methods_supported");
    let web = happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m.clone(),
    );
    let cfg = AuthConfig {
        grant: Grant::ClientCredentials,
        client: Some(ClientCredentials::confidential("cc", "sec")),
        ..config()
    };
    let r = run_with(web, cfg, trigger(r#"Bearer scope="s1""#), None, |_| {
        panic!("no user")
    });
    ok(&r);
    let f = r.web.form("https://auth.example/token");
    assert_eq!(f["grant_type"], "client_credentials");
    assert_eq!(f["scope"], "s1");
    assert_eq!(f["resource"], MCP);
    assert_eq!(
        r.web.requests.last().unwrap().header("authorization"),
        Some(basic_of("cc", "sec").as_str())
    );

    // private_key_jwt: the signer gets the claims.
    m["token_endpoint_auth_methods_supported"] = serde_json::json!(["private_key_jwt"]);
    let web = happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m,
    );
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let cfg = AuthConfig {
        grant: Grant::ClientCredentials,
        client: Some(ClientCredentials::public("cc")),
        assertion: Some(Arc::new(move |c: &AssertionClaims| {
            *seen2.lock().unwrap() = Some(c.clone());
            Ok("h.p.s".into())
        })),
        ..config()
    };
    let r = run_with(web, cfg, trigger("Bearer"), None, |_| panic!("no user"));
    ok(&r);
    let f = r.web.form("https://auth.example/token");
    assert_eq!(f["client_assertion"], "h.p.s");
    assert_eq!(
        f["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    let c = seen.lock().unwrap().clone().unwrap();
    assert_eq!(
        (c.client_id.as_str(), c.audience.as_str(), c.jti.as_str()),
        ("cc", AS, "jti-1")
    );

    // Without a client: a configuration error, nothing registered.
    let cfg = AuthConfig {
        grant: Grant::ClientCredentials,
        ..config()
    };
    assert!(matches!(
        err(&run(happy(), cfg, "Bearer")),
        AuthError::Config(_)
    ));
}

// ---- workload identity (RFC 7523) and enterprise-managed (SEP-990) -----------

/// A web whose authorization server takes only the JWT bearer grant.
fn jwt_bearer_web(auth_method: &str) -> Web {
    let mut m = asm(AS);
    m["grant_types_supported"] = serde_json::json!(["urn:ietf:params:oauth:grant-type:jwt-bearer"]);
    m["token_endpoint_auth_methods_supported"] = serde_json::json!([auth_method]);
    m.as_object_mut()
        .unwrap()
        .remove("code_challenge_methods_supported");
    happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m,
    )
}

/// A credential source that counts its reads and gives `values` in turn
/// (the last one again when they run out).
fn counted(values: &[&str]) -> (CredentialSource, Arc<Mutex<usize>>) {
    let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
    let reads = Arc::new(Mutex::new(0));
    let r = reads.clone();
    let source: CredentialSource = Arc::new(move || {
        let mut n = r.lock().unwrap();
        *n += 1;
        Ok(values[(*n - 1).min(values.len() - 1)].clone())
    });
    (source, reads)
}

#[test]
fn workload_identity_jwt_bearer_grant_reads_the_token_at_each_flow() {
    let (source, reads) = counted(&["wl.jwt.1\n", "wl.jwt.2"]);
    let cfg = AuthConfig {
        grant: Grant::JwtBearer,
        client: Some(ClientCredentials::public("workload")),
        workload_identity: Some(source),
        ..config()
    };
    for expected in ["wl.jwt.1", "wl.jwt.2"] {
        let r = run_with(
            jwt_bearer_web("none"),
            cfg.clone(),
            trigger(r#"Bearer scope="s1""#),
            None,
            |_| panic!("no user"),
        );
        ok(&r);
        let f = r.web.form(&format!("{AS}/token"));
        assert_eq!(
            f["grant_type"],
            "urn:ietf:params:oauth:grant-type:jwt-bearer"
        );
        assert_eq!(f["assertion"], expected, "read fresh, trimmed");
        assert_eq!(f["scope"], "s1");
        assert_eq!(f["resource"], MCP);
        assert_eq!(f["client_id"], "workload");
        assert!(!r.web.urls().iter().any(|u| u.ends_with("/register")));
    }
    assert_eq!(*reads.lock().unwrap(), 2);
}

#[test]
fn workload_identity_errors_are_typed_and_not_retried() {
    // The server refuses the assertion: the error, once, no other grant.
    let (source, _) = counted(&["wl"]);
    let cfg = AuthConfig {
        grant: Grant::JwtBearer,
        client: Some(ClientCredentials::public("workload")),
        workload_identity: Some(source),
        ..config()
    };
    let web = jwt_bearer_web("none").route(
        &format!("{AS}/token"),
        400,
        serde_json::json!({"error": "invalid_grant"}),
    );
    let r = run_with(web, cfg.clone(), trigger("Bearer"), None, |_| {
        panic!("no user")
    });
    assert!(matches!(err(&r), AuthError::Token { error, .. } if error == "invalid_grant"));
    let tokens = r
        .web
        .urls()
        .iter()
        .filter(|u| u.ends_with("/token"))
        .count();
    assert_eq!(tokens, 1);
    // A source that fails, or gives no token, or none at all: Config.
    for source in [
        Some(Arc::new(|| Err("no such file".into())) as CredentialSource),
        Some(Arc::new(|| Ok("  \n".to_owned())) as CredentialSource),
        Some(Arc::new(|| Ok("two words".to_owned())) as CredentialSource),
        None,
    ] {
        let cfg = AuthConfig {
            workload_identity: source,
            ..cfg.clone()
        };
        let r = run_with(jwt_bearer_web("none"), cfg, trigger("Bearer"), None, |_| {
            panic!("no user")
        });
        assert!(matches!(err(&r), AuthError::Config(_)), "{:?}", err(&r));
        assert!(!r.web.urls().iter().any(|u| u.ends_with("/token")));
    }
    // Without a client: Config, nothing sent to the token endpoint.
    let (source, _) = counted(&["wl"]);
    let cfg = AuthConfig {
        grant: Grant::JwtBearer,
        workload_identity: Some(source),
        ..config()
    };
    let r = run_with(jwt_bearer_web("none"), cfg, trigger("Bearer"), None, |_| {
        panic!("no user")
    });
    assert!(matches!(err(&r), AuthError::Config(m) if m.contains("pre-registered")));
}

const IDP: &str = "https://idp.example";

fn enterprise_config(id_token: CredentialSource, secret: Option<&str>) -> AuthConfig {
    AuthConfig {
        grant: Grant::EnterpriseManaged,
        client: Some(ClientCredentials::confidential("mcp-client", "mcp-secret")),
        enterprise: Some(EnterpriseIdp {
            token_endpoint: format!("{IDP}/token"),
            client_id: "idp-client".into(),
            client_secret: secret.map(str::to_owned),
            id_token,
        }),
        ..config()
    }
}

#[test]
fn enterprise_managed_exchanges_the_id_token_then_the_id_jag() {
    let (source, reads) = counted(&["id.token.1"]);
    let web = jwt_bearer_web("client_secret_basic").route(
        &format!("{IDP}/token"),
        200,
        serde_json::json!({
            "access_token": "id.jag.1",
            "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "token_type": "N_A",
        }),
    );
    let r = run_with(
        web,
        enterprise_config(source, None),
        trigger(r#"Bearer scope="s1""#),
        None,
        |_| panic!("no user"),
    );
    let s = ok(&r);
    assert_eq!(s.tokens.access_token, "at-1");
    assert_eq!(*reads.lock().unwrap(), 1);
    // First the token exchange at the IdP ...
    let x = r.web.form(&format!("{IDP}/token"));
    assert_eq!(
        x["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(
        x["requested_token_type"],
        "urn:ietf:params:oauth:token-type:id-jag"
    );
    assert_eq!(x["subject_token"], "id.token.1");
    assert_eq!(
        x["subject_token_type"],
        "urn:ietf:params:oauth:token-type:id_token"
    );
    assert_eq!(
        x["audience"], AS,
        "the ID-JAG is for this authorization server"
    );
    assert_eq!(x["resource"], MCP);
    assert_eq!(x["scope"], "s1");
    assert_eq!(x["client_id"], "idp-client");
    // ... then the ID-JAG as a JWT bearer grant, with the client's
    // authentication there.
    let idp_at = r
        .web
        .urls()
        .iter()
        .position(|u| u == &format!("{IDP}/token"));
    let as_at = r
        .web
        .urls()
        .iter()
        .position(|u| u == &format!("{AS}/token"));
    assert!(idp_at < as_at);
    let f = r.web.form(&format!("{AS}/token"));
    assert_eq!(
        f["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    assert_eq!(f["assertion"], "id.jag.1");
    assert_eq!(f["resource"], MCP);
    let as_req = r
        .web
        .requests
        .iter()
        .find(|q| q.url.to_string() == format!("{AS}/token"))
        .unwrap();
    assert_eq!(
        as_req.header("authorization"),
        Some(basic_of("mcp-client", "mcp-secret").as_str())
    );
    // No secret of the MCP client goes to the IdP.
    let idp_req = r
        .web
        .requests
        .iter()
        .find(|q| q.url.to_string() == format!("{IDP}/token"))
        .unwrap();
    assert_eq!(idp_req.header("authorization"), None);
}

#[test]
fn enterprise_managed_failures_are_typed() {
    let idp_answers = [
        (400, serde_json::json!({"error": "invalid_grant"})),
        (
            200,
            serde_json::json!({"access_token": "x", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
        ),
        (200, serde_json::json!({"access_token": ""})),
        (200, serde_json::json!({"nope": 1})),
    ];
    for (status, body) in idp_answers {
        let (source, _) = counted(&["id"]);
        let web =
            jwt_bearer_web("client_secret_basic").route(&format!("{IDP}/token"), status, body);
        let r = run_with(
            web,
            enterprise_config(source, Some("idp-secret")),
            trigger("Bearer"),
            None,
            |_| panic!("no user"),
        );
        match err(&r) {
            AuthError::Token {
                status: 400, error, ..
            } => assert_eq!(error, "invalid_grant"),
            AuthError::Metadata { url, .. } => assert_eq!(url, &format!("{IDP}/token")),
            e => panic!("unexpected {e:?}"),
        }
        assert!(!r.web.urls().iter().any(|u| u == &format!("{AS}/token")));
        // The IdP secret goes with HTTP Basic, not in the body.
        let idp_req = r
            .web
            .requests
            .iter()
            .find(|q| q.url.to_string() == format!("{IDP}/token"))
            .unwrap();
        assert_eq!(
            idp_req.header("authorization"),
            Some(basic_of("idp-client", "idp-secret").as_str())
        );
    }
    // An IdP over plain HTTP elsewhere than loopback is refused.
    let (source, _) = counted(&["id"]);
    let mut cfg = enterprise_config(source, None);
    cfg.enterprise.as_mut().unwrap().token_endpoint = "http://idp.example/token".into();
    let r = run_with(
        jwt_bearer_web("client_secret_basic"),
        cfg,
        trigger("Bearer"),
        None,
        |_| panic!("no user"),
    );
    assert!(matches!(err(&r), AuthError::InsecureUrl { .. }));
}
