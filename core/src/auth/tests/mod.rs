//! The flow against simulated HTTP: every branch of discovery,
//! registration, authorization, tokens, and hostile metadata.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::wire::query_pairs;
use super::*;
use crate::exchange::{ExchangeId, HttpMethod, HttpRequest, HttpUrl, ResponseHead};

mod authorization;
mod discovery;
mod dpop;
mod grants;
mod registration;
mod store;

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

fn basic_of(id: &str, secret: &str) -> String {
    super::wire::basic_credentials(id, secret)
}

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
