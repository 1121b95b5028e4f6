//! The flow against simulated HTTP: every branch of discovery,
//! registration, authorization, tokens, and hostile metadata.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::wire::query_pairs;
use super::*;
use crate::exchange::{ExchangeId, HttpMethod, HttpRequest, HttpUrl, ResponseHead};

const MCP: &str = "https://mcp.example/mcp";
const AS: &str = "https://auth.example";

/// A scripted web: URL (without query) → status and body.
#[derive(Default)]
struct Web {
    routes: HashMap<String, (u16, String)>,
    requests: Vec<HttpRequest>,
    /// URLs that never answer (the flow's timer must fire).
    silent: Vec<String>,
    /// A token endpoint that wants this DPoP nonce in proofs (400
    /// `use_dpop_nonce` with `DPoP-Nonce` otherwise).
    dpop_nonce: Option<(String, String)>,
    /// What the token store holds when the flow reads it under its lock.
    stored: Option<AuthState>,
    /// URL → (status, Location): redirects.
    moved: HashMap<String, (u16, String)>,
    /// The store's lock is never granted (another process holds it).
    store_stuck: bool,
}

impl Web {
    fn route(mut self, url: &str, status: u16, body: serde_json::Value) -> Self {
        self.routes
            .insert(url.to_owned(), (status, body.to_string()));
        self
    }

    fn stored(mut self, state: AuthState) -> Self {
        self.stored = Some(state);
        self
    }

    fn moved(mut self, url: &str, status: u16, location: &str) -> Self {
        self.moved
            .insert(url.to_owned(), (status, location.to_owned()));
        self
    }

    fn raw(mut self, url: &str, status: u16, body: &str) -> Self {
        self.routes
            .insert(url.to_owned(), (status, body.to_owned()));
        self
    }

    fn urls(&self) -> Vec<String> {
        self.requests.iter().map(|r| r.url.to_string()).collect()
    }

    fn form(&self, url: &str) -> HashMap<String, String> {
        let r = self
            .requests
            .iter()
            .rev()
            .find(|r| r.url.to_string() == url)
            .expect(url);
        query_pairs(std::str::from_utf8(&r.body).unwrap())
            .into_iter()
            .collect()
    }
}

fn head(status: u16) -> ResponseHead {
    ResponseHead {
        status,
        reason: String::new(),
        version: 1,
        headers: vec![("content-type".into(), b"application/json".to_vec())],
    }
}

fn trigger(www: &str) -> Trigger {
    Trigger {
        status: 401,
        challenges: parse_challenges([www]),
    }
}

fn secrets() -> Secrets {
    Secrets {
        verifier: "v".repeat(43),
        state: "the-state".into(),
        nonce: "jti-1".into(),
    }
}

fn prm(resource: &str, servers: &[&str]) -> serde_json::Value {
    serde_json::json!({"resource": resource, "authorization_servers": servers})
}

fn asm(issuer: &str) -> serde_json::Value {
    serde_json::json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    })
}

fn token_ok() -> serde_json::Value {
    serde_json::json!({"access_token": "at-1", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt-1"})
}

/// The usual happy web: path-aware PRM, AS metadata, DCR, token.
fn happy() -> Web {
    Web::default()
        .route(
            "https://mcp.example/.well-known/oauth-protected-resource/mcp",
            200,
            prm(MCP, &[AS]),
        )
        .route(
            &format!("{AS}/.well-known/oauth-authorization-server"),
            200,
            asm(AS),
        )
        .route(
            &format!("{AS}/register"),
            201,
            serde_json::json!({"client_id": "dyn-1"}),
        )
        .route(&format!("{AS}/token"), 200, token_ok())
}

struct Run {
    web: Web,
    authorize: Vec<String>,
    result: Option<Result<AuthState, AuthError>>,
    /// `LockStore` and `UnlockStore` seen, in order (`true`: lock).
    locks: Vec<bool>,
    /// The result was `Adopted` (the store's), not `Done`.
    adopted: bool,
}

/// Drives a flow: performs its exchanges against `web`, answers each
/// authorization with `redirect` (given the authorization URL), stops at
/// the end.
fn run_with(
    web: Web,
    config: AuthConfig,
    trig: Trigger,
    previous: Option<AuthState>,
    redirect: impl Fn(&str) -> String,
) -> Run {
    let mut now = Instant::now();
    let endpoint = HttpUrl::parse(MCP).unwrap();
    let mut flow = AuthFlow::new(
        now,
        config,
        endpoint,
        trig,
        previous,
        secrets(),
        ExchangeId(1 << 62),
    );
    let mut run = Run {
        web,
        authorize: Vec::new(),
        result: None,
        locks: Vec::new(),
        adopted: false,
    };
    for _ in 0..100 {
        let mut progressed = false;
        while let Some(a) = flow.poll_output() {
            progressed = true;
            match a {
                AuthAction::Http(req) => {
                    let key = req.url.to_string();
                    let key = key.split('?').next().unwrap().to_owned();
                    let ex = req.exchange;
                    run.web.requests.push(req);
                    if run.web.silent.contains(&key) {
                        continue;
                    }
                    let (mut status, mut body) = run
                        .web
                        .routes
                        .get(&key)
                        .cloned()
                        .unwrap_or((404, "Not Found".into()));
                    let mut h = head(status);
                    if let Some((st, location)) = run.web.moved.get(&key) {
                        h = head(*st);
                        h.headers
                            .push(("location".into(), location.as_bytes().to_vec()));
                        body = String::new();
                    }
                    if let Some((url, nonce)) = &run.web.dpop_nonce {
                        let req = run.web.requests.last().unwrap();
                        let sent =
                            proof_claims(req).and_then(|c| c["nonce"].as_str().map(str::to_owned));
                        if *url == key && sent.as_deref() != Some(nonce.as_str()) {
                            status = 400;
                            h = head(status);
                            body = r#"{"error":"use_dpop_nonce"}"#.into();
                        }
                        if *url == key {
                            h.headers
                                .push(("DPoP-Nonce".into(), nonce.as_bytes().to_vec()));
                        }
                    }
                    flow.handle_head(now, ex, &h);
                    // In two pieces, to exercise buffering.
                    let (a, b) = body.as_bytes().split_at(body.len() / 2);
                    flow.handle_body(now, ex, a);
                    flow.handle_body(now, ex, b);
                    flow.handle_end(now, ex);
                }
                AuthAction::Abort(_) => {}
                AuthAction::Authorize { url } => {
                    let cb = redirect(&url);
                    run.authorize.push(url);
                    flow.handle_redirect(now, &cb);
                }
                AuthAction::LockStore { endpoint } => {
                    assert_eq!(endpoint, MCP);
                    run.locks.push(true);
                    if !run.web.store_stuck {
                        flow.handle_stored(now, run.web.stored.clone());
                    }
                }
                AuthAction::UnlockStore => run.locks.push(false),
                AuthAction::Adopted(s) => {
                    run.adopted = true;
                    run.result = Some(Ok(s));
                }
                AuthAction::Done(s) => run.result = Some(Ok(s)),
                AuthAction::Failed(e) => run.result = Some(Err(e)),
            }
        }
        if run.result.is_some() {
            assert!(flow.is_finished());
            assert!(flow.poll_output().is_none());
            return run;
        }
        if !progressed {
            let t = flow.poll_timeout().expect("a stuck flow has a timer");
            now = t + Duration::from_millis(1);
            flow.handle_timeout(now);
        }
    }
    panic!("flow did not finish");
}

/// Answers like a consenting user: the callback with a code and the state.
fn consent(url: &str) -> String {
    let q: HashMap<_, _> = query_pairs(url).into_iter().collect();
    format!(
        "http://127.0.0.1:5555/callback?code=c0de&state={}",
        q["state"]
    )
}

fn run(web: Web, config: AuthConfig, www: &str) -> Run {
    run_with(web, config, trigger(www), None, consent)
}

fn ok(r: &Run) -> &AuthState {
    match r.result.as_ref().unwrap() {
        Ok(s) => s,
        Err(e) => panic!("flow failed: {e}\nrequests: {:?}", r.web.urls()),
    }
}

fn err(r: &Run) -> &AuthError {
    match r.result.as_ref().unwrap() {
        Ok(_) => panic!("flow succeeded\nrequests: {:?}", r.web.urls()),
        Err(e) => e,
    }
}

fn config() -> AuthConfig {
    AuthConfig {
        redirect_uri: "http://127.0.0.1:5555/callback".into(),
        ..AuthConfig::default()
    }
}

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

fn state_with(scope: &str, refresh: Option<&str>) -> AuthState {
    AuthState {
        resource: MCP.into(),
        issuer: Some(AS.into()),
        token_endpoint: format!("{AS}/token"),
        client: ClientCredentials {
            client_id: "old-client".into(),
            client_secret: None,
            auth_method: Some(TokenAuthMethod::None),
        },
        tokens: Tokens {
            access_token: "old".into(),
            refresh_token: refresh.map(Into::into),
            scope: None,
            expires_in: None,
            expires_at: None,
        },
        scope: Some(scope.into()),
        dpop_key: None,
    }
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

fn basic_of(id: &str, secret: &str) -> String {
    super::wire::basic_credentials(id, secret)
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

// ---- DPoP (RFC 9449) --------------------------------------------------------

/// The claims of a request's `DPoP` proof, if it has one.
fn proof_claims(req: &HttpRequest) -> Option<serde_json::Value> {
    use base64::Engine as _;
    let proof = req.header("dpop")?;
    let part = proof.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

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
        Some(Arc::new(|| Err("no such file".to_owned())) as CredentialSource),
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

// ---- a refresh shared with other processes (issue 29) ----------------------

fn with_token(mut s: AuthState, access: &str, refresh: &str, expires_at: Option<u64>) -> AuthState {
    s.tokens.access_token = access.into();
    s.tokens.refresh_token = Some(refresh.into());
    s.tokens.expires_at = expires_at;
    s
}

/// A config with a wall clock: the Unix time at the flow's `now` is
/// `unix` (about; the flow's `now` is taken a moment later).
fn clocked(unix: u64) -> AuthConfig {
    AuthConfig {
        interactive: false,
        wall_clock: Some(WallClock::anchor(
            Instant::now(),
            std::time::UNIX_EPOCH + Duration::from_secs(unix),
        )),
        ..config()
    }
}

const NOW: u64 = 1_900_000_000;

#[test]
fn a_newer_stored_state_is_adopted_without_a_refresh() {
    let mine = state_with("s", Some("rt-old"));
    // Another process refreshed: its token is good for an hour.
    let theirs = with_token(mine.clone(), "at-theirs", "rt-theirs", Some(NOW + 3600));
    let web = Web::default()
        .route(&format!("{AS}/token"), 200, token_ok())
        .stored(theirs.clone());
    let r = run_with(web, clocked(NOW), trigger("Bearer"), Some(mine), |_| {
        panic!("no user")
    });
    assert!(r.adopted);
    assert_eq!(ok(&r), &theirs);
    assert!(r.web.requests.is_empty(), "{:?}", r.web.urls());
    assert_eq!(r.locks, [true, false]);
}

#[test]
fn a_stored_state_about_to_expire_is_refreshed_with_its_refresh_token() {
    let mine = state_with("s", Some("rt-old"));
    // Newer, but it expires within the skew (60 s): refresh, with the
    // newest refresh token (a rotating server takes only that one).
    let theirs = with_token(mine.clone(), "at-theirs", "rt-theirs", Some(NOW + 30));
    let web = Web::default()
        .route(&format!("{AS}/token"), 200, token_ok())
        .stored(theirs);
    let r = run_with(web, clocked(NOW), trigger("Bearer"), Some(mine), |_| {
        panic!("no user")
    });
    assert!(!r.adopted);
    let s = ok(&r);
    assert_eq!(s.tokens.access_token, "at-1");
    assert_eq!(
        r.web.form(&format!("{AS}/token"))["refresh_token"],
        "rt-theirs"
    );
    // The absolute expiry: expires_in (3600) from the answer's time.
    let at = s.tokens.expires_at.expect("expires_at");
    assert!((NOW + 3600..NOW + 3610).contains(&at), "{at}");
    // Done keeps the lock: the driver saves under it, then releases.
    assert_eq!(r.locks, [true]);
}

#[test]
fn the_same_stored_state_is_refreshed_and_an_empty_store_too() {
    let mine = state_with("s", Some("rt-old"));
    for stored in [Some(mine.clone()), None] {
        let mut web = Web::default().route(&format!("{AS}/token"), 200, token_ok());
        web.stored = stored;
        let r = run_with(
            web,
            clocked(NOW),
            trigger("Bearer"),
            Some(mine.clone()),
            |_| panic!("no user"),
        );
        assert_eq!(ok(&r).tokens.access_token, "at-1");
        assert_eq!(
            r.web.form(&format!("{AS}/token"))["refresh_token"],
            "rt-old"
        );
        assert_eq!(r.locks, [true]);
    }
    // A state stored for another resource is not ours.
    let mut other = with_token(mine.clone(), "at-x", "rt-x", Some(NOW + 3600));
    other.resource = "https://other.example/mcp".into();
    let web = Web::default()
        .route(&format!("{AS}/token"), 200, token_ok())
        .stored(other);
    let r = run_with(web, clocked(NOW), trigger("Bearer"), Some(mine), |_| {
        panic!("no user")
    });
    assert!(!r.adopted);
    assert_eq!(
        r.web.form(&format!("{AS}/token"))["refresh_token"],
        "rt-old"
    );
}

#[test]
fn a_store_locked_too_long_fails_the_refresh_without_sending_it() {
    let mut web = Web::default().route(&format!("{AS}/token"), 200, token_ok());
    web.store_stuck = true;
    let r = run_with(
        web,
        clocked(NOW),
        trigger("Bearer"),
        Some(state_with("s", Some("rt"))),
        |_| panic!("no user"),
    );
    assert!(
        matches!(err(&r), AuthError::Abandoned(m) if m.contains("token store stayed locked")),
        "{}",
        err(&r)
    );
    assert!(r.web.requests.is_empty());
    assert_eq!(r.locks, [true, false]);
}

#[test]
fn a_step_up_does_not_lock_the_store() {
    let trig = Trigger {
        status: 403,
        challenges: parse_challenges([r#"Bearer error="insufficient_scope", scope="mcp:write""#]),
    };
    let r = run_with(
        happy(),
        config(),
        trig,
        Some(state_with("s", Some("rt"))),
        consent,
    );
    ok(&r);
    assert!(r.locks.is_empty());
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
