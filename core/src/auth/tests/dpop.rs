//! DPoP (RFC 9449).

use super::*;

// ---- DPoP (RFC 9449) --------------------------------------------------------

fn dpop_config() -> AuthConfig {
    AuthConfig {
        wall_clock: Some(WallClock::anchor(
            Instant::now(),
            std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        )),
        ..config()
    }
}

/// The happy web whose server offers DPoP (ES256) and issues DPoP tokens.
fn dpop_web() -> Web {
    let mut meta = asm(AS);
    meta["dpop_signing_alg_values_supported"] = serde_json::json!(["ES256"]);
    let mut token = token_ok();
    token["token_type"] = "DPoP".into();
    happy()
        .route(
            &format!("{AS}/.well-known/oauth-authorization-server"),
            200,
            meta,
        )
        .route(&format!("{AS}/token"), 200, token)
}

#[test]
fn dpop_token_request_carries_a_proof_and_binds_the_tokens() {
    let r = run(dpop_web(), dpop_config(), "Bearer");
    let s = ok(&r);
    let key = s.dpop_key.as_ref().expect("the tokens are bound");
    assert_eq!(s.authorization(), "DPoP at-1");
    let token_req = r
        .web
        .requests
        .iter()
        .find(|q| q.url.to_string() == format!("{AS}/token"))
        .unwrap();
    let c = proof_claims(token_req).expect("a proof at the token endpoint");
    assert_eq!(c["htm"], "POST");
    assert_eq!(c["htu"], format!("{AS}/token"));
    assert_eq!(c["iat"], 1_800_000_000u64);
    assert!(c.get("ath").is_none(), "no token yet");
    // The proof's key is the one kept with the tokens.
    use base64::Engine as _;
    let header: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token_req.header("dpop").unwrap().split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["jwk"].to_string(), key.jwk());
    // Only the token request carries a proof.
    assert_eq!(
        r.web
            .requests
            .iter()
            .filter(|q| q.header("dpop").is_some())
            .count(),
        1
    );
    // The key survives the token store's format.
    let stored: AuthState = serde_json::from_str(&serde_json::to_string(s).unwrap()).unwrap();
    assert_eq!(stored.dpop_key.as_ref(), Some(key));
}

#[test]
fn dpop_is_not_used_unless_offered_enabled_and_dated() {
    // Not offered: a bearer token, no proof.
    let r = run(happy(), dpop_config(), "Bearer");
    assert!(ok(&r).dpop_key.is_none());
    assert!(r.web.requests.iter().all(|q| q.header("dpop").is_none()));
    // Offered but disabled, or no clock: no proof, and a DPoP token_type
    // that was not asked for is refused.
    for cfg in [
        AuthConfig {
            dpop: false,
            ..dpop_config()
        },
        config(),
    ] {
        let r = run(dpop_web(), cfg, "Bearer");
        assert!(r.web.requests.iter().all(|q| q.header("dpop").is_none()));
        assert!(matches!(err(&r), AuthError::Metadata { reason, .. } if reason.contains("DPoP")));
    }
    // Offered, proof sent, but the server still issues a bearer token: not
    // bound.
    let mut web = dpop_web();
    web = web.route(&format!("{AS}/token"), 200, token_ok());
    let r = run(web, dpop_config(), "Bearer");
    assert!(ok(&r).dpop_key.is_none());
    assert_eq!(ok(&r).authorization(), "Bearer at-1");
}

#[test]
fn dpop_challenge_from_the_resource_is_enough() {
    let mut token = token_ok();
    token["token_type"] = "DPoP".into();
    let web = happy().route(&format!("{AS}/token"), 200, token);
    let r = run(web, dpop_config(), r#"DPoP algs="ES256""#);
    assert!(ok(&r).dpop_key.is_some());
}

#[test]
fn dpop_nonce_at_the_token_endpoint_is_retried_once() {
    let mut web = dpop_web();
    web.dpop_nonce = Some((format!("{AS}/token"), "as-nonce-1".into()));
    let r = run(web, dpop_config(), "Bearer");
    let s = ok(&r);
    let tokens: Vec<_> = r
        .web
        .requests
        .iter()
        .filter(|q| q.url.to_string() == format!("{AS}/token"))
        .collect();
    assert_eq!(
        tokens.len(),
        2,
        "the first without the nonce, the retry with it"
    );
    let first = proof_claims(tokens[0]).unwrap();
    let second = proof_claims(tokens[1]).unwrap();
    assert!(first.get("nonce").is_none());
    assert_eq!(second["nonce"], "as-nonce-1");
    assert_ne!(first["jti"], second["jti"], "a fresh proof");
    assert_eq!(
        r.web.form(&format!("{AS}/token"))["grant_type"],
        "authorization_code"
    );
    // The nonce is remembered for the server's origin.
    let key = s.dpop_key.as_ref().unwrap();
    assert_eq!(
        key.nonce_for(&HttpUrl::parse(&format!("{AS}/other")).unwrap())
            .as_deref(),
        Some("as-nonce-1")
    );
}

#[test]
fn dpop_nonce_that_keeps_failing_is_not_retried_forever() {
    // The server wants a nonce, but refuses even the retry: once only.
    let mut web = dpop_web();
    web = web.route(
        &format!("{AS}/token"),
        400,
        serde_json::json!({"error": "use_dpop_nonce"}),
    );
    web.dpop_nonce = Some((format!("{AS}/token"), "n".into()));
    let r = run(web, dpop_config(), "Bearer");
    assert!(matches!(err(&r), AuthError::Token { error, .. } if error == "use_dpop_nonce"));
    let n = r
        .web
        .requests
        .iter()
        .filter(|q| q.url.to_string() == format!("{AS}/token"))
        .count();
    assert_eq!(n, 2);
}

#[test]
fn dpop_refresh_keeps_the_stored_key() {
    let key = DpopKey::generate().unwrap();
    let mut prev = state_with("s", Some("rt-0"));
    prev.dpop_key = Some(key.clone());
    let web = Web::default().route(
        &format!("{AS}/token"),
        200,
        serde_json::json!({"access_token": "at-2", "token_type": "DPoP"}),
    );
    let r = run_with(web, dpop_config(), trigger("DPoP"), Some(prev), |_| {
        panic!("no user needed")
    });
    let s = ok(&r);
    assert_eq!(
        s.dpop_key.as_ref(),
        Some(&key),
        "refreshed tokens stay bound"
    );
    let c = proof_claims(&r.web.requests[0]).expect("the refresh proves the key");
    assert_eq!(c["htu"], format!("{AS}/token"));
    assert_eq!(
        r.web.form(&format!("{AS}/token"))["grant_type"],
        "refresh_token"
    );
}
