//! Client registration, client authentication at the token endpoint,
//! and token endpoint errors.

use super::*;

#[test]
fn registration_preference() {
    // Pre-registered wins: no registration, its secret used per metadata.
    let mut m = asm(AS);
    m["token_endpoint_auth_methods_supported"] = serde_json::json!(["client_secret_post"]);
    m["client_id_metadata_document_supported"] = true.into();
    let web = happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m.clone(),
    );
    let cfg = AuthConfig {
        client: Some(ClientCredentials::confidential("pre", "sec")),
        client_metadata_url: Some("https://client.example/meta.json".into()),
        ..config()
    };
    let r = run(web, cfg, "Bearer");
    ok(&r);
    assert!(!r.web.urls().iter().any(|u| u.ends_with("/register")));
    let f = r.web.form("https://auth.example/token");
    assert_eq!(
        (f["client_id"].as_str(), f["client_secret"].as_str()),
        ("pre", "sec")
    );
    // Then the Client ID Metadata Document.
    let web = happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m,
    );
    let cfg = AuthConfig {
        client_metadata_url: Some("https://client.example/meta.json".into()),
        ..config()
    };
    let r = run(web, cfg, "Bearer");
    assert_eq!(ok(&r).client.client_id, "https://client.example/meta.json");
    assert!(!r.web.urls().iter().any(|u| u.ends_with("/register")));
    // Neither, and no registration endpoint: a clear error.
    let mut m = asm(AS);
    m.as_object_mut().unwrap().remove("registration_endpoint");
    let web = happy().route(
        &format!("{AS}/.well-known/oauth-authorization-server"),
        200,
        m,
    );
    assert!(matches!(
        err(&run(web, config(), "Bearer")),
        AuthError::Registration(_)
    ));
}

#[test]
fn token_endpoint_auth_methods() {
    for (methods, reg, expect) in [
        (
            vec!["client_secret_basic"],
            serde_json::json!({"client_id": "c", "client_secret": "s", "token_endpoint_auth_method": "client_secret_basic"}),
            TokenAuthMethod::ClientSecretBasic,
        ),
        (
            vec!["client_secret_post"],
            serde_json::json!({"client_id": "c", "client_secret": "s"}),
            TokenAuthMethod::ClientSecretPost,
        ),
        (
            vec!["none"],
            serde_json::json!({"client_id": "c"}),
            TokenAuthMethod::None,
        ),
    ] {
        let mut m = asm(AS);
        m["token_endpoint_auth_methods_supported"] = serde_json::json!(methods);
        let web = happy()
            .route(
                &format!("{AS}/.well-known/oauth-authorization-server"),
                200,
                m,
            )
            .route(&format!("{AS}/register"), 201, reg);
        let r = run(web, config(), "Bearer");
        assert_eq!(ok(&r).client.auth_method, Some(expect));
        let tok = r.web.requests.last().unwrap();
        let f = r.web.form("https://auth.example/token");
        match expect {
            TokenAuthMethod::ClientSecretBasic => {
                assert_eq!(
                    tok.header("authorization"),
                    Some(basic_of("c", "s").as_str())
                );
                assert!(!f.contains_key("client_secret"));
            }
            TokenAuthMethod::ClientSecretPost => {
                assert!(tok.header("authorization").is_none());
                assert_eq!(f["client_secret"], "s");
            }
            _ => {
                assert!(tok.header("authorization").is_none());
                assert!(!f.contains_key("client_secret"));
                assert_eq!(f["client_id"], "c");
            }
        }
        // The registration asked for what the server supports.
        let reg: serde_json::Value = serde_json::from_slice(&r.web.requests[2].body).unwrap();
        assert_eq!(reg["token_endpoint_auth_method"], methods[0]);
    }
}

#[test]
fn token_errors_are_typed() {
    let web = happy().route(
        &format!("{AS}/token"),
        400,
        serde_json::json!({"error": "invalid_client", "error_description": "who are you"}),
    );
    let e = err(&run(web, config(), "Bearer")).clone();
    assert_eq!(
        e,
        AuthError::Token {
            status: 400,
            error: "invalid_client".into(),
            description: Some("who are you".into())
        }
    );
    assert!(e.to_string().contains("who are you"));
    let web = happy().route(
        &format!("{AS}/token"),
        200,
        serde_json::json!({"access_token": "x", "token_type": "mac"}),
    );
    assert!(matches!(
        err(&run(web, config(), "Bearer")),
        AuthError::Metadata { .. }
    ));
}
