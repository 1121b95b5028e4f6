//! Tokens: the store's lock around a refresh, the refresh itself, token
//! requests (with the client's authentication and a DPoP proof) and their
//! answers.

use std::time::Instant;

use serde::Deserialize;

use super::discovery::canonical_resource;
use super::{Answer, AuthAction, AuthFlow, Step};
use crate::auth::metadata::ServerMetadata;
use crate::auth::wire::{basic_credentials, encode_form};
use crate::auth::{
    AssertionClaims, AuthError, AuthState, ClientCredentials, DpopKey, ProofRequest,
    TokenAuthMethod, Tokens,
};
use crate::exchange::{HttpMethod, HttpUrl};

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct OAuthErrorBody {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

impl AuthFlow {
    /// Asks for the stored state under the store's lock before refreshing.
    pub(super) fn reload(&mut self, now: Instant) {
        let deadline = now
            .checked_add(self.config.store_lock_timeout)
            .unwrap_or(now);
        self.step = Step::Reload { deadline };
        self.locked = true;
        self.actions.push_back(AuthAction::LockStore {
            endpoint: self.endpoint.to_string(),
        });
    }

    /// Releases the store's lock, if the driver holds it for this flow.
    pub(super) fn unlock(&mut self) {
        if std::mem::take(&mut self.locked) {
            self.actions.push_back(AuthAction::UnlockStore);
        }
    }

    pub(super) fn refresh(&mut self, now: Instant) {
        let prev = self.previous.clone().expect("refreshable");
        // The tokens are for the stored resource (it may be a parent of the
        // endpoint, as its metadata said).
        self.resource = prev.resource.clone();
        self.client = Some(prev.client.clone());
        self.issuer = prev.issuer.clone();
        self.scope = prev.scope.clone();
        self.dpop = prev.dpop_key.clone().filter(|_| self.dpop_usable());
        self.step = Step::Refresh;
        let pairs = vec![
            ("grant_type".to_owned(), "refresh_token".to_owned()),
            (
                "refresh_token".to_owned(),
                prev.tokens.refresh_token.clone().unwrap_or_default(),
            ),
            ("resource".to_owned(), self.resource.clone()),
        ];
        self.post_token(now, &prev.token_endpoint, pairs);
    }

    pub(super) fn token_request(&mut self, now: Instant, pairs: Vec<(String, String)>) {
        let endpoint = self
            .server
            .as_ref()
            .and_then(|s| s.token_endpoint.clone())
            .unwrap_or_default();
        self.step = Step::Token;
        if let Err(e) = self.choose_dpop() {
            return self.fail(e);
        }
        self.post_token(now, &endpoint, pairs);
    }

    /// Whether proofs can be made (enabled, and a clock to date them).
    fn dpop_usable(&self) -> bool {
        self.config.dpop && self.config.wall_clock.is_some()
    }

    /// DPoP for the tokens when the authorization server lists ES256 for
    /// proofs or the resource challenged with `DPoP`: the stored key when
    /// there is one (tokens stay bound to one key), else a fresh one.
    fn choose_dpop(&mut self) -> Result<(), AuthError> {
        if self.dpop.is_some() || !self.dpop_usable() {
            return Ok(());
        }
        let listed = self
            .server
            .as_ref()
            .and_then(|s| s.dpop_signing_alg_values_supported.as_ref())
            .is_some_and(|algs| algs.iter().any(|a| a == "ES256"));
        if !listed && self.trigger.dpop_challenge().is_none() {
            return Ok(());
        }
        self.dpop = match self.previous.as_ref().and_then(|p| p.dpop_key.clone()) {
            Some(key) => Some(key),
            None => Some(DpopKey::generate().map_err(|e| AuthError::Config(e.to_string()))?),
        };
        Ok(())
    }

    /// POSTs a token request with the client's authentication.
    fn post_token(&mut self, now: Instant, endpoint: &str, mut pairs: Vec<(String, String)>) {
        let mut headers = vec![
            (
                "Content-Type".to_owned(),
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("Accept".to_owned(), "application/json".to_owned()),
        ];
        self.token_request = Some((endpoint.to_owned(), pairs.clone()));
        let Some(client) = self.client.clone() else {
            return self.fail(AuthError::Config("no client".into()));
        };
        if let Some(key) = &self.dpop {
            let Ok(url) = HttpUrl::parse(endpoint) else {
                return self.fail(AuthError::Metadata {
                    url: endpoint.to_owned(),
                    reason: "not an absolute http(s) URL".into(),
                });
            };
            let iat = self
                .config
                .wall_clock
                .map(|c| c.unix_secs(now))
                .unwrap_or_default();
            let request = ProofRequest {
                method: "POST",
                url: &url,
                access_token: None,
            };
            match key.proof(request, iat) {
                Ok(proof) => headers.push(("DPoP".to_owned(), proof)),
                Err(e) => return self.fail(AuthError::Config(e.to_string())),
            }
        }
        let method = self.auth_method(&client);
        if let Some(c) = self.client.as_mut() {
            c.auth_method = Some(method);
        }
        match method {
            TokenAuthMethod::None => pairs.push(("client_id".into(), client.client_id.clone())),
            TokenAuthMethod::ClientSecretBasic | TokenAuthMethod::ClientSecretPost => {
                let Some(secret) = client.client_secret.clone() else {
                    return self.fail(AuthError::Config(format!(
                        "{} needs a client secret",
                        method.as_str()
                    )));
                };
                if method == TokenAuthMethod::ClientSecretBasic {
                    headers.push((
                        "Authorization".to_owned(),
                        basic_credentials(&client.client_id, &secret),
                    ));
                } else {
                    pairs.push(("client_id".into(), client.client_id.clone()));
                    pairs.push(("client_secret".into(), secret));
                }
            }
            TokenAuthMethod::PrivateKeyJwt => {
                let Some(signer) = self.config.assertion.clone() else {
                    return self.fail(AuthError::Config(
                        "private_key_jwt needs an assertion signer".into(),
                    ));
                };
                let claims = AssertionClaims {
                    client_id: client.client_id.clone(),
                    audience: self.issuer.clone().unwrap_or_else(|| endpoint.to_owned()),
                    jti: self.secrets.nonce.clone(),
                };
                match signer(&claims) {
                    Ok(jwt) => {
                        pairs.push(("client_id".into(), client.client_id.clone()));
                        pairs.push((
                            "client_assertion_type".into(),
                            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
                        ));
                        pairs.push(("client_assertion".into(), jwt));
                    }
                    Err(e) => {
                        return self.fail(AuthError::Config(format!("signing the assertion: {e}")))
                    }
                }
            }
        }
        let body = encode_form(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        self.send(now, HttpMethod::Post, endpoint, headers, body.into_bytes());
    }

    /// The client's method, else one the server lists that the client can
    /// do (RFC 8414 default: `client_secret_basic`).
    fn auth_method(&self, client: &ClientCredentials) -> TokenAuthMethod {
        if let Some(m) = client.auth_method {
            return m;
        }
        let methods = self
            .server
            .as_ref()
            .map(ServerMetadata::auth_methods)
            .unwrap_or_else(|| vec!["client_secret_basic".into()]);
        let has = |m: &str| methods.iter().any(|x| x == m);
        if client.client_secret.is_some() {
            if has("client_secret_basic") || !has("client_secret_post") {
                TokenAuthMethod::ClientSecretBasic
            } else {
                TokenAuthMethod::ClientSecretPost
            }
        } else if self.config.assertion.is_some() && has("private_key_jwt") {
            TokenAuthMethod::PrivateKeyJwt
        } else {
            TokenAuthMethod::None
        }
    }

    pub(super) fn token_answer(
        &mut self,
        now: Instant,
        url: &str,
        answer: Answer,
        refreshing: bool,
    ) {
        // RFC 9449 §8: the server wants a nonce in the proof; send the same
        // request again, once, with the nonce it gave (remembered by now).
        if let Answer::Response { status: 400, body } = &answer {
            let asked = oauth_error(body).0 == "use_dpop_nonce";
            if asked && self.dpop.is_some() && self.answer_nonce.is_some() && !self.nonce_retried {
                if let Some((endpoint, pairs)) = self.token_request.clone() {
                    self.nonce_retried = true;
                    return self.post_token(now, &endpoint, pairs);
                }
            }
        }
        let dpop = self.dpop.is_some();
        let outcome = match answer {
            Answer::Response { status: 200, body } => {
                match serde_json::from_slice::<TokenResponse>(&body) {
                    Ok(t) if t.access_token.is_empty() => Err(AuthError::Metadata {
                        url: url.to_owned(),
                        reason: "empty access_token".into(),
                    }),
                    Ok(t)
                        if t.token_type.as_deref().is_some_and(|ty| {
                            let accepted = ty.eq_ignore_ascii_case("bearer")
                                || (dpop && ty.eq_ignore_ascii_case("dpop"));
                            !accepted
                        }) =>
                    {
                        Err(AuthError::Metadata {
                            url: url.to_owned(),
                            reason: format!(
                                "token_type {:?} is not {}",
                                t.token_type.unwrap_or_default(),
                                if dpop { "Bearer or DPoP" } else { "Bearer" }
                            ),
                        })
                    }
                    Ok(t) => Ok(t),
                    Err(e) => Err(AuthError::Metadata {
                        url: url.to_owned(),
                        reason: format!("not a token response: {e}"),
                    }),
                }
            }
            Answer::Response { status, body } => {
                let (error, description) = oauth_error(&body);
                Err(AuthError::Token {
                    status,
                    error,
                    description,
                })
            }
            Answer::Failed(message) => Err(AuthError::Exchange {
                url: url.to_owned(),
                message,
            }),
        };
        match outcome {
            Ok(t) => {
                let bound = t
                    .token_type
                    .as_deref()
                    .is_some_and(|ty| ty.eq_ignore_ascii_case("dpop"));
                let old_refresh = self
                    .previous
                    .as_ref()
                    .and_then(|p| p.tokens.refresh_token.clone());
                let tokens = Tokens {
                    access_token: t.access_token,
                    refresh_token: t
                        .refresh_token
                        .or(if refreshing { old_refresh } else { None }),
                    scope: t.scope,
                    expires_in: t.expires_in.and_then(|v| match v {
                        serde_json::Value::Number(n) => n.as_u64(),
                        serde_json::Value::String(s) => s.parse().ok(),
                        _ => None,
                    }),
                    expires_at: None,
                };
                let tokens = Tokens {
                    expires_at: tokens
                        .expires_in
                        .zip(self.config.wall_clock)
                        .map(|(secs, clock)| clock.unix_secs(now).saturating_add(secs)),
                    ..tokens
                };
                let state = AuthState {
                    resource: self.resource.clone(),
                    issuer: self.issuer.clone(),
                    token_endpoint: url.to_owned(),
                    client: self.client.clone().expect("chosen"),
                    tokens,
                    scope: self.scope.clone(),
                    dpop_key: self.dpop.clone().filter(|_| bound),
                };
                self.step = Step::Finished;
                // The driver saves it under the lock, then releases it.
                self.locked = false;
                self.actions.push_back(AuthAction::Done(state));
            }
            Err(e) if refreshing && !self.config.interactive => {
                // The refresh token is refused and nobody can log in: say
                // so, and why.
                let (status, error, description) = match e {
                    AuthError::Token {
                        status,
                        error,
                        description,
                    } => (status, error, description),
                    other => (0, other.to_string(), None),
                };
                self.fail(AuthError::RefreshRefused {
                    status,
                    error,
                    description,
                })
            }
            Err(e) if refreshing => {
                // Nothing to save: others may go on (and fail) meanwhile,
                // rather than wait for a user.
                self.unlock();
                // The refresh token is spent or refused: authorize afresh
                // (its client is reused unless the server forgot it).
                self.client_forgotten =
                    matches!(&e, AuthError::Token { error, .. } if error == "invalid_client");
                self.notes.push(format!("refresh failed: {e}"));
                self.client = None;
                self.resource = canonical_resource(&self.endpoint);
                self.discover(now);
            }
            Err(e) => self.fail(e),
        }
    }
}

/// The `error` and `error_description` of an OAuth error body, else the
/// body's start.
pub(super) fn oauth_error(body: &[u8]) -> (String, Option<String>) {
    match serde_json::from_slice::<OAuthErrorBody>(body) {
        Ok(e) => (e.error, e.error_description),
        Err(_) => {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)])
                .trim()
                .to_owned();
            (
                if text.is_empty() {
                    "(no body)".into()
                } else {
                    text
                },
                None,
            )
        }
    }
}
