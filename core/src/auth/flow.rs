//! One authorization, from a 401/403 to tokens (see the [module
//! docs](super) for the steps).

use std::collections::VecDeque;
use std::time::Instant;

use serde::Deserialize;

use super::metadata::{
    check_server_metadata, resource_covers, resource_metadata_urls, same_issuer, secure_url,
    server_metadata_urls, ResourceMetadata, ServerMetadata,
};
use super::wire::{
    append_query, basic_credentials, encode_form, origin_string, pkce_challenge, query_pairs,
    Secrets,
};
use super::{
    AssertionClaims, AuthConfig, AuthError, AuthState, ClientCredentials, CredentialSource,
    DpopKey, Grant, ProofRequest, TokenAuthMethod, Tokens,
};
use crate::exchange::challenge::{bearer, Challenge};
use crate::exchange::redirect::{is_redirect, RedirectError, Redirects};
use crate::exchange::{
    ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, HttpUrl, ResponseHead,
};

/// What started a flow: the status and the challenges of the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// 401, or 403 with `error="insufficient_scope"`.
    pub status: u16,
    /// Every challenge of its `WWW-Authenticate` lines.
    pub challenges: Vec<Challenge>,
}

impl Trigger {
    /// A parameter of the `Bearer` challenge, else of the `DPoP` one.
    fn param(&self, name: &str) -> Option<&str> {
        bearer(&self.challenges)
            .or_else(|| self.dpop_challenge())
            .and_then(|c| c.param(name))
    }

    fn dpop_challenge(&self) -> Option<&Challenge> {
        self.challenges
            .iter()
            .find(|c| c.scheme.eq_ignore_ascii_case("dpop"))
    }

    /// Whether this is a step-up (403 `insufficient_scope`).
    pub fn is_step_up(&self) -> bool {
        self.status == 403 || self.param("error") == Some("insufficient_scope")
    }
}

/// What the flow asks of its driver (the [`Connection`](crate::Connection)),
/// from [`AuthFlow::poll_output`].
#[derive(Debug)]
#[non_exhaustive]
pub enum AuthAction {
    /// Perform this exchange; report it with the flow's `handle_*`.
    Http(HttpRequest),
    /// Stop this exchange.
    Abort(ExchangeId),
    /// Send the user agent to `url`; report the redirect to
    /// `redirect_uri` with [`AuthFlow::handle_redirect`].
    Authorize {
        /// The authorization URL.
        url: String,
    },
    /// A refresh is due: take the token store's lock (other processes
    /// and connections that share the store wait for it), read the state
    /// stored for `endpoint` under it and report it with
    /// [`AuthFlow::handle_stored`]. Hold the lock until this flow's
    /// `Done` (save its state, then release the lock) or
    /// [`UnlockStore`](Self::UnlockStore): from read to refresh to write,
    /// so that one refresh runs at a time and the others use its tokens.
    LockStore {
        /// The MCP endpoint whose state to read.
        endpoint: String,
    },
    /// Release the token store's lock of `LockStore`: nothing to save.
    UnlockStore,
    /// The store holds a newer state than the one that was refused
    /// (another process or connection refreshed meanwhile): use it; it is
    /// stored already (the last action, after `UnlockStore`).
    Adopted(AuthState),
    /// Authorized (the last action): save this state (under the lock of
    /// `LockStore` when it is held, then release it).
    Done(AuthState),
    /// Not authorized (the last action).
    Failed(AuthError),
}

#[derive(Debug)]
enum Step {
    /// Waiting for the stored state, read under the store's lock.
    Reload {
        deadline: Instant,
    },
    Refresh,
    ResourceMetadata {
        urls: Vec<String>,
        idx: usize,
    },
    ServerMetadata {
        urls: Vec<String>,
        idx: usize,
    },
    Register,
    /// SEP-990: the token exchange at the enterprise IdP.
    IdpExchange,
    Redirect {
        deadline: Instant,
    },
    Token,
    Finished,
}

#[derive(Debug)]
struct Current {
    id: ExchangeId,
    url: String,
    status: Option<u16>,
    body: Vec<u8>,
    deadline: Instant,
    /// The answer's `DPoP-Nonce`, if any.
    dpop_nonce: Option<String>,
    /// The request's method.
    method: HttpMethod,
    /// The request as sent, to follow a redirect with.
    follow: Redirects,
}

/// How an exchange ended.
enum Answer {
    Response { status: u16, body: Vec<u8> },
    Failed(String),
}

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

#[derive(Deserialize)]
struct RegistrationResponse {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// One authorization in progress. See the [module docs](super).
pub struct AuthFlow {
    config: AuthConfig,
    endpoint: HttpUrl,
    trigger: Trigger,
    previous: Option<AuthState>,
    secrets: Secrets,
    step: Step,
    next_exchange: u64,
    current: Option<Current>,
    actions: VecDeque<AuthAction>,
    /// The `resource` parameter (RFC 8707).
    resource: String,
    /// The authorization server's issuer (`None`: 2025-03-26 defaults).
    issuer: Option<String>,
    /// A 2025-03-26 server: no protected-resource metadata.
    legacy: bool,
    prm: Option<ResourceMetadata>,
    server: Option<ServerMetadata>,
    client: Option<ClientCredentials>,
    scope: Option<String>,
    /// What discovery tried, for the error message.
    notes: Vec<String>,
    /// The server no longer knows the stored client (`invalid_client`):
    /// register again instead of reusing it.
    client_forgotten: bool,
    /// The DPoP key token requests prove (RFC 9449), once chosen.
    dpop: Option<DpopKey>,
    /// The last token request (endpoint, parameters before the client's
    /// authentication), to send again with a DPoP nonce.
    token_request: Option<(String, Vec<(String, String)>)>,
    /// The last answer's `DPoP-Nonce`.
    answer_nonce: Option<String>,
    /// A token request was already sent again for a nonce.
    nonce_retried: bool,
    /// The driver was asked to lock the token store and has not been
    /// told to release it yet.
    locked: bool,
}

impl std::fmt::Debug for AuthFlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFlow")
            .field("step", &self.step)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl AuthFlow {
    /// Starts an authorization for the MCP `endpoint` after `trigger`.
    /// `previous` is the state the failing requests used (its refresh
    /// token is tried first on a 401, its client reused at the same
    /// server). Exchanges are numbered from `first_exchange`.
    pub fn new(
        now: Instant,
        config: AuthConfig,
        endpoint: HttpUrl,
        trigger: Trigger,
        previous: Option<AuthState>,
        secrets: Secrets,
        first_exchange: ExchangeId,
    ) -> AuthFlow {
        let resource = canonical_resource(&endpoint);
        let mut flow = AuthFlow {
            config,
            endpoint,
            trigger,
            previous,
            secrets,
            step: Step::Finished,
            next_exchange: first_exchange.0,
            current: None,
            actions: VecDeque::new(),
            resource,
            issuer: None,
            legacy: false,
            prm: None,
            server: None,
            client: None,
            scope: None,
            notes: Vec::new(),
            client_forgotten: false,
            dpop: None,
            token_request: None,
            answer_nonce: None,
            nonce_retried: false,
            locked: false,
        };
        let refreshable = flow.previous.as_ref().is_some_and(|p| {
            p.tokens.refresh_token.is_some() && resource_covers(&p.resource, &flow.endpoint)
        });
        if !flow.trigger.is_step_up() && refreshable {
            flow.reload(now);
        } else if flow.config.grant.needs_user() && !flow.config.interactive {
            // Nobody to approve: don't touch the network (no registration
            // for an authorization that cannot happen).
            flow.fail(AuthError::InteractionRequired);
        } else {
            flow.discover(now);
        }
        flow
    }

    /// The next action, if any (drain it after every call, as every
    /// machine of this crate).
    #[must_use]
    pub fn poll_output(&mut self) -> Option<AuthAction> {
        self.actions.pop_front()
    }

    /// Whether the flow has ended (its `Done` or `Failed` is queued or
    /// taken).
    pub fn is_finished(&self) -> bool {
        matches!(self.step, Step::Finished)
    }

    /// Whether the flow waits for the stored state
    /// ([`AuthAction::LockStore`], [`handle_stored`](Self::handle_stored)).
    pub fn awaits_store(&self) -> bool {
        matches!(self.step, Step::Reload { .. })
    }

    /// Whether `exchange` is this flow's open exchange.
    pub fn owns(&self, exchange: ExchangeId) -> bool {
        self.current.as_ref().is_some_and(|c| c.id == exchange)
    }

    /// The id the next exchange would get.
    pub fn next_exchange(&self) -> ExchangeId {
        ExchangeId(self.next_exchange)
    }

    /// The deadline of the open exchange or of the user's authorization.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let redirect = match self.step {
            Step::Redirect { deadline } | Step::Reload { deadline } => Some(deadline),
            _ => None,
        };
        self.current
            .as_ref()
            .map(|c| c.deadline)
            .into_iter()
            .chain(redirect)
            .min()
    }

    /// Fires the deadlines due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(c) = &self.current {
            if c.deadline <= now {
                let secs = self.config.exchange_timeout.as_secs_f64();
                let c = self.current.take().expect("checked");
                self.actions.push_back(AuthAction::Abort(c.id));
                self.answer(
                    now,
                    &c.url,
                    Answer::Failed(format!("no answer within {secs:.0} s")),
                );
                return;
            }
        }
        match self.step {
            Step::Redirect { deadline } if deadline <= now => {
                let secs = self.config.authorize_timeout.as_secs();
                self.fail(AuthError::Abandoned(format!("no redirect within {secs} s")));
            }
            Step::Reload { deadline } if deadline <= now => {
                // Refreshing without the lock could spend a refresh token
                // another process is using (and get the grant revoked).
                let secs = self.config.store_lock_timeout.as_secs();
                self.fail(AuthError::Abandoned(format!(
                    "the token store stayed locked for {secs} s (another process refreshing?)"
                )));
            }
            _ => {}
        }
    }

    /// The response head of the flow's exchange. A redirect is followed
    /// as the MCP requests' are (the rule of [`Redirects`]: 307/308 keep a
    /// POST, at most five hops), within the origin; a metadata GET may
    /// also go to another secure origin (it carries no credentials), a
    /// token or registration request never.
    pub fn handle_head(&mut self, now: Instant, exchange: ExchangeId, head: &ResponseHead) {
        if is_redirect(head.status) && self.owns(exchange) {
            return self.redirected(now, head);
        }
        if let Some(c) = self.current.as_mut().filter(|c| c.id == exchange) {
            c.status = Some(head.status);
            c.dpop_nonce = head
                .header("dpop-nonce")
                .and_then(|v| std::str::from_utf8(v).ok())
                .map(|v| v.trim().to_owned());
        }
    }

    fn redirected(&mut self, now: Instant, head: &ResponseHead) {
        let next = ExchangeId(self.next_exchange);
        let c = self.current.as_mut().expect("owned");
        // Only a metadata GET may leave the origin (to a secure one).
        let is_get = c.method == HttpMethod::Get;
        let followed = match c.follow.follow(head, is_get, next) {
            Some(Ok(r)) if !super::wire::is_secure(&r.url) => Err(format!(
                "HTTP {} redirects to {}: refused (HTTPS is required except on loopback)",
                head.status, r.url
            )),
            Some(Ok(r)) => Ok(r),
            Some(Err(e @ RedirectError::CrossOrigin { .. })) => Err(format!(
                "{e}; an authorization server's token or registration request is not sent \
                 to another origin"
            )),
            Some(Err(e)) => Err(e.to_string()),
            None => return,
        };
        let old = c.id;
        self.actions.push_back(AuthAction::Abort(old));
        match followed {
            Ok(mut request) => {
                self.next_exchange += 1;
                // A DPoP proof names its URL (`htu`): a new one for the
                // new URL.
                if let Some(key) = self.dpop.as_ref().filter(|_| {
                    request
                        .headers
                        .iter()
                        .any(|(n, _)| n.eq_ignore_ascii_case("dpop"))
                }) {
                    let iat = self
                        .config
                        .wall_clock
                        .map(|c| c.unix_secs(now))
                        .unwrap_or_default();
                    let proof = key.proof(
                        ProofRequest {
                            method: request.method.as_str(),
                            url: &request.url,
                            access_token: None,
                        },
                        iat,
                    );
                    request
                        .headers
                        .retain(|(n, _)| !n.eq_ignore_ascii_case("dpop"));
                    if let Ok(p) = proof {
                        request.headers.push(("DPoP".to_owned(), p));
                    }
                }
                let c = self.current.as_mut().expect("owned");
                c.id = request.exchange;
                c.status = None;
                c.body.clear();
                c.dpop_nonce = None;
                self.actions.push_back(AuthAction::Http(request));
            }
            Err(message) => {
                let c = self.current.take().expect("owned");
                self.answer(now, &c.url, Answer::Failed(message));
            }
        }
    }

    /// Body bytes of the flow's exchange (bounded by `max_document`).
    pub fn handle_body(&mut self, _now: Instant, exchange: ExchangeId, data: &[u8]) {
        let max = self.config.max_document;
        let Some(c) = self.current.as_mut().filter(|c| c.id == exchange) else {
            return;
        };
        if c.body.len() + data.len() > max {
            let c = self.current.take().expect("checked");
            self.actions.push_back(AuthAction::Abort(c.id));
            self.fail(AuthError::Metadata {
                url: c.url,
                reason: format!("response larger than {max} bytes"),
            });
            return;
        }
        c.body.extend_from_slice(data);
    }

    /// The flow's exchange ended.
    pub fn handle_end(&mut self, now: Instant, exchange: ExchangeId) {
        if !self.owns(exchange) {
            return;
        }
        let c = self.current.take().expect("owned");
        self.answer_nonce = c.dpop_nonce.clone();
        if let (Some(key), Some(nonce), Ok(url)) =
            (&self.dpop, &c.dpop_nonce, HttpUrl::parse(&c.url))
        {
            key.remember_nonce(&url, nonce);
        }
        let answer = match c.status {
            Some(status) => Answer::Response {
                status,
                body: c.body,
            },
            None => Answer::Failed("the response ended before its head".into()),
        };
        self.answer(now, &c.url, answer);
    }

    /// The flow's exchange failed.
    pub fn handle_failed(&mut self, now: Instant, exchange: ExchangeId, error: &str) {
        if !self.owns(exchange) {
            return;
        }
        let c = self.current.take().expect("owned");
        self.answer(now, &c.url, Answer::Failed(error.to_owned()));
    }

    /// The user agent came back to the redirect URI: `callback` is that
    /// URL (or just its query).
    pub fn handle_redirect(&mut self, now: Instant, callback: &str) {
        if !matches!(self.step, Step::Redirect { .. }) {
            return;
        }
        let q = query_pairs(callback);
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        // The state first: an `error` in a redirect that is not ours must
        // not pass for the server's answer.
        if get("state").as_deref() != Some(self.secrets.state.as_str()) {
            return self.fail(AuthError::InvalidRedirect(
                "its state does not match the request's (not our authorization)".into(),
            ));
        }
        if let Some(error) = get("error") {
            return self.fail(AuthError::Denied {
                error,
                description: get("error_description"),
            });
        }
        let iss_required = self
            .server
            .as_ref()
            .and_then(|s| s.authorization_response_iss_parameter_supported)
            .unwrap_or(false);
        match (get("iss"), &self.issuer) {
            // RFC 9207 / SEP-2468: a simple string comparison, no URL
            // normalization (a trailing-slash variant is another issuer).
            (Some(iss), Some(issuer)) if iss != *issuer => {
                return self.fail(AuthError::InvalidRedirect(format!(
                    "it comes from issuer {iss}, not {issuer} (mix-up attack?)"
                )));
            }
            (None, Some(_)) if iss_required => {
                return self.fail(AuthError::InvalidRedirect(
                    "no `iss` although the server promises one".into(),
                ));
            }
            _ => {}
        }
        let Some(code) = get("code").filter(|c| !c.is_empty()) else {
            return self.fail(AuthError::InvalidRedirect("no code".into()));
        };
        let pairs = vec![
            ("grant_type".to_owned(), "authorization_code".to_owned()),
            ("code".to_owned(), code),
            ("redirect_uri".to_owned(), self.config.redirect_uri.clone()),
            ("code_verifier".to_owned(), self.secrets.verifier.clone()),
            ("resource".to_owned(), self.resource.clone()),
        ];
        self.token_request(now, pairs);
    }

    /// The application could not get the user's authorization (browser
    /// failed to open, user gave up…).
    pub fn handle_redirect_error(&mut self, message: &str) {
        if matches!(self.step, Step::Redirect { .. }) {
            self.fail(AuthError::Abandoned(message.to_owned()));
        }
    }

    /// Ends the flow now (the connection is closing).
    pub fn abandon(&mut self, message: &str) {
        if let Some(c) = self.current.take() {
            self.actions.push_back(AuthAction::Abort(c.id));
        }
        if !self.is_finished() {
            self.fail(AuthError::Abandoned(message.to_owned()));
        }
    }

    /// The state stored for the endpoint, read under the store's lock
    /// after [`AuthAction::LockStore`] (`None`: nothing stored, or no
    /// store). A newer state than the one refused, still good, is adopted
    /// ([`AuthAction::Adopted`]: another process refreshed); else the
    /// newest refresh token is used (a rotating server takes only that).
    pub fn handle_stored(&mut self, now: Instant, stored: Option<AuthState>) {
        if !self.awaits_store() {
            return;
        }
        let prev = self.previous.clone().expect("refreshable");
        let unix = self.config.wall_clock.map(|c| c.unix_secs(now));
        let skew = self.config.expiry_skew.as_secs();
        if let Some(s) = stored.filter(|s| resource_covers(&s.resource, &self.endpoint)) {
            let newer = s.tokens.access_token != prev.tokens.access_token;
            let good = unix.is_none_or(|u| !s.tokens.expired(u, skew));
            if newer && good {
                self.unlock();
                self.step = Step::Finished;
                self.actions.push_back(AuthAction::Adopted(s));
                return;
            }
            if s.tokens.refresh_token.is_some() {
                self.previous = Some(s);
            }
        }
        self.refresh(now);
    }

    // ---- steps ------------------------------------------------------------

    /// Asks for the stored state under the store's lock before refreshing.
    fn reload(&mut self, now: Instant) {
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
    fn unlock(&mut self) {
        if std::mem::take(&mut self.locked) {
            self.actions.push_back(AuthAction::UnlockStore);
        }
    }

    fn refresh(&mut self, now: Instant) {
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

    fn discover(&mut self, now: Instant) {
        let mut urls = Vec::new();
        if let Some(rm) = self.trigger.param("resource_metadata") {
            // Metadata elsewhere than at the endpoint's origin must be safe
            // to fetch.
            match HttpUrl::parse(rm) {
                Ok(u) if u.same_origin(&self.endpoint) || super::wire::is_secure(&u) => {
                    urls.push(rm.to_owned());
                }
                Ok(_) => {
                    return self.fail(AuthError::InsecureUrl { url: rm.to_owned() });
                }
                Err(e) => self
                    .notes
                    .push(format!("resource_metadata {rm:?}: {}", e.reason)),
            }
        }
        for u in resource_metadata_urls(&self.endpoint) {
            if !urls.contains(&u) {
                urls.push(u);
            }
        }
        let first = urls[0].clone();
        self.step = Step::ResourceMetadata { urls, idx: 0 };
        self.get(now, &first);
    }

    fn resource_metadata_answer(&mut self, now: Instant, url: &str, answer: Answer) {
        let Step::ResourceMetadata { urls, idx } = &self.step else {
            return;
        };
        let (urls, idx) = (urls.clone(), *idx);
        match parse_document::<ResourceMetadata>(answer) {
            Ok(prm) if !prm.authorization_servers.is_empty() => {
                if let Some(r) = &prm.resource {
                    if !resource_covers(r, &self.endpoint) {
                        return self.fail(AuthError::ResourceMismatch {
                            expected: self.endpoint.to_string(),
                            found: r.clone(),
                        });
                    }
                    self.resource = r.clone();
                }
                let issuer = prm.authorization_servers[0].clone();
                let issuer_url = match secure_url("authorization server", &issuer) {
                    Ok(u) => u,
                    Err(e) => return self.fail(e),
                };
                self.issuer = Some(issuer);
                self.prm = Some(prm);
                let urls = server_metadata_urls(&issuer_url);
                let first = urls[0].clone();
                self.step = Step::ServerMetadata { urls, idx: 0 };
                self.get(now, &first);
            }
            Ok(_) => {
                self.notes.push(format!("{url}: no authorization_servers"));
                self.next_resource_metadata(now, urls, idx);
            }
            Err(why) => {
                self.notes.push(format!("{url}: {why}"));
                self.next_resource_metadata(now, urls, idx);
            }
        }
    }

    fn next_resource_metadata(&mut self, now: Instant, urls: Vec<String>, idx: usize) {
        if let Some(next) = urls.get(idx + 1).cloned() {
            self.step = Step::ResourceMetadata { urls, idx: idx + 1 };
            return self.get(now, &next);
        }
        // A 2025-03-26 server: the authorization server is at the MCP
        // endpoint's origin (its path discarded).
        self.legacy = true;
        let origin = origin_string(&self.endpoint);
        self.issuer = None;
        let urls = vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ];
        let first = urls[0].clone();
        self.step = Step::ServerMetadata { urls, idx: 0 };
        self.get(now, &first);
    }

    fn server_metadata_answer(&mut self, now: Instant, url: &str, answer: Answer) {
        let Step::ServerMetadata { urls, idx } = &self.step else {
            return;
        };
        let (urls, idx) = (urls.clone(), *idx);
        let need_authorize = self.config.grant.needs_user();
        match parse_document::<ServerMetadata>(answer) {
            Ok(m) => {
                let expected = if self.legacy {
                    origin_string(&self.endpoint)
                } else {
                    self.issuer.clone().unwrap_or_default()
                };
                if let Err(e) = check_server_metadata(url, Some(&expected), &m, need_authorize) {
                    return self.fail(e);
                }
                self.issuer = m.issuer.clone().or(Some(expected));
                self.server = Some(m);
                self.choose_client(now);
            }
            Err(why) => {
                self.notes.push(format!("{url}: {why}"));
                if let Some(next) = urls.get(idx + 1).cloned() {
                    self.step = Step::ServerMetadata { urls, idx: idx + 1 };
                    return self.get(now, &next);
                }
                if !self.legacy {
                    let detail = self.notes.join("; ");
                    return self.fail(AuthError::Discovery {
                        resource: self.endpoint.to_string(),
                        detail,
                    });
                }
                // 2025-03-26 without metadata: the default endpoints.
                let origin = origin_string(&self.endpoint);
                self.server = Some(ServerMetadata {
                    authorization_endpoint: Some(format!("{origin}/authorize")),
                    token_endpoint: Some(format!("{origin}/token")),
                    registration_endpoint: Some(format!("{origin}/register")),
                    code_challenge_methods_supported: Some(vec!["S256".into()]),
                    ..ServerMetadata::default()
                });
                self.issuer = None;
                self.choose_client(now);
            }
        }
    }

    fn choose_client(&mut self, now: Instant) {
        self.scope = self.select_scope();
        let server = self.server.clone().expect("discovered");
        let same_server = |p: &AuthState| match (&p.issuer, &self.issuer) {
            (Some(a), Some(b)) => same_issuer(a, b),
            (None, None) => p.token_endpoint == server.token_endpoint.clone().unwrap_or_default(),
            _ => false,
        };
        if let Some(c) = &self.config.client {
            self.client = Some(c.clone());
        } else if !self.config.grant.needs_user() {
            return self.fail(AuthError::Config(format!(
                "the {} grant needs a pre-registered client",
                grant_name(self.config.grant)
            )));
        } else if let (Some(true), Some(url)) = (
            server.client_id_metadata_document_supported,
            &self.config.client_metadata_url,
        ) {
            self.client = Some(ClientCredentials {
                client_id: url.clone(),
                client_secret: None,
                auth_method: Some(TokenAuthMethod::None),
            });
        } else if let Some(p) = self
            .previous
            .as_ref()
            .filter(|p| !self.client_forgotten && same_server(p))
        {
            self.client = Some(p.client.clone());
        } else if let Some(reg) = &server.registration_endpoint {
            return self.register(now, reg.clone());
        } else {
            return self.fail(AuthError::Registration(
                "no client is configured and the authorization server offers no dynamic registration"
                    .into(),
            ));
        }
        self.after_client(now);
    }

    fn register(&mut self, now: Instant, endpoint: String) {
        let server = self.server.as_ref().expect("discovered");
        let methods = server.auth_methods();
        let method = if methods.iter().any(|m| m == "none") {
            "none"
        } else if methods.iter().any(|m| m == "client_secret_basic") {
            "client_secret_basic"
        } else if methods.iter().any(|m| m == "client_secret_post") {
            "client_secret_post"
        } else {
            "none"
        };
        let mut body = serde_json::json!({
            "client_name": self.config.client_name,
            "redirect_uris": [self.config.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            // SEP-837: a loopback (or custom-scheme) redirect is a native
            // application's; an HTTPS one a web application's.
            "application_type": application_type(&self.config.redirect_uri),
        });
        if let Some(s) = &self.scope {
            body["scope"] = serde_json::Value::String(s.clone());
        }
        self.step = Step::Register;
        let headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("Accept".to_owned(), "application/json".to_owned()),
        ];
        self.send(
            now,
            HttpMethod::Post,
            &endpoint,
            headers,
            body.to_string().into_bytes(),
        );
    }

    fn register_answer(&mut self, now: Instant, url: &str, answer: Answer) {
        match answer {
            Answer::Response { status, body } if (200..300).contains(&status) => {
                match serde_json::from_slice::<RegistrationResponse>(&body) {
                    Ok(r) if !r.client_id.is_empty() => {
                        self.client = Some(ClientCredentials {
                            client_id: r.client_id,
                            client_secret: r.client_secret.filter(|s| !s.is_empty()),
                            auth_method: r
                                .token_endpoint_auth_method
                                .as_deref()
                                .and_then(TokenAuthMethod::parse),
                        });
                        self.after_client(now);
                    }
                    Ok(_) => self.fail(AuthError::Registration(format!("{url}: empty client_id"))),
                    Err(e) => self.fail(AuthError::Registration(format!("{url}: {e}"))),
                }
            }
            Answer::Response { status, body } => {
                let (error, description) = oauth_error(&body);
                self.fail(AuthError::Registration(format!(
                    "HTTP {status} from {url}: {error}{}",
                    description.map(|d| format!(" ({d})")).unwrap_or_default()
                )))
            }
            Answer::Failed(message) => self.fail(AuthError::Exchange {
                url: url.to_owned(),
                message,
            }),
        }
    }

    fn after_client(&mut self, now: Instant) {
        match self.config.grant {
            Grant::AuthorizationCode => self.authorize(now),
            Grant::ClientCredentials => {
                let mut pairs = vec![("grant_type".to_owned(), "client_credentials".to_owned())];
                if let Some(s) = &self.scope {
                    pairs.push(("scope".to_owned(), s.clone()));
                }
                pairs.push(("resource".to_owned(), self.resource.clone()));
                self.token_request(now, pairs);
            }
            Grant::JwtBearer => {
                let Some(source) = self.config.workload_identity.clone() else {
                    return self.fail(AuthError::Config(
                        "the JWT bearer grant needs a workload identity token source".into(),
                    ));
                };
                match read_credential(&source, "workload identity token") {
                    Ok(assertion) => self.jwt_bearer(now, assertion),
                    Err(e) => self.fail(e),
                }
            }
            Grant::EnterpriseManaged => self.idp_exchange(now),
        }
    }

    /// RFC 7523 §2.1: the assertion is the grant.
    fn jwt_bearer(&mut self, now: Instant, assertion: String) {
        let mut pairs = vec![
            ("grant_type".to_owned(), JWT_BEARER.to_owned()),
            ("assertion".to_owned(), assertion),
        ];
        if let Some(s) = &self.scope {
            pairs.push(("scope".to_owned(), s.clone()));
        }
        pairs.push(("resource".to_owned(), self.resource.clone()));
        self.token_request(now, pairs);
    }

    /// SEP-990: the IdP's ID token for an ID-JAG naming this authorization
    /// server and resource (RFC 8693 token exchange at the IdP).
    fn idp_exchange(&mut self, now: Instant) {
        let Some(idp) = self.config.enterprise.clone() else {
            return self.fail(AuthError::Config(
                "enterprise-managed authorization needs an enterprise IdP".into(),
            ));
        };
        match HttpUrl::parse(&idp.token_endpoint) {
            Ok(u) if super::wire::is_secure(&u) => {}
            Ok(_) => {
                return self.fail(AuthError::InsecureUrl {
                    url: idp.token_endpoint,
                })
            }
            Err(e) => {
                return self.fail(AuthError::Config(format!(
                    "enterprise IdP token endpoint {:?}: {}",
                    idp.token_endpoint, e.reason
                )))
            }
        }
        let id_token = match read_credential(&idp.id_token, "enterprise ID token") {
            Ok(t) => t,
            Err(e) => return self.fail(e),
        };
        let audience = self.issuer.clone().unwrap_or_else(|| {
            self.server
                .as_ref()
                .and_then(|s| s.token_endpoint.clone())
                .unwrap_or_default()
        });
        let mut pairs = vec![
            ("grant_type", TOKEN_EXCHANGE),
            ("requested_token_type", ID_JAG),
            ("subject_token", id_token.as_str()),
            ("subject_token_type", ID_TOKEN),
            ("audience", audience.as_str()),
            ("resource", self.resource.as_str()),
        ];
        if let Some(s) = &self.scope {
            pairs.push(("scope", s.as_str()));
        }
        let mut headers = vec![
            (
                "Content-Type".to_owned(),
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("Accept".to_owned(), "application/json".to_owned()),
        ];
        match &idp.client_secret {
            Some(secret) => headers.push((
                "Authorization".to_owned(),
                basic_credentials(&idp.client_id, secret),
            )),
            None => pairs.push(("client_id", idp.client_id.as_str())),
        }
        let body = encode_form(pairs);
        self.step = Step::IdpExchange;
        self.send(
            now,
            HttpMethod::Post,
            &idp.token_endpoint,
            headers,
            body.into_bytes(),
        );
    }

    fn idp_exchange_answer(&mut self, now: Instant, url: &str, answer: Answer) {
        #[derive(Deserialize)]
        struct Exchanged {
            access_token: String,
            #[serde(default)]
            issued_token_type: Option<String>,
        }
        match answer {
            Answer::Response { status: 200, body } => {
                match serde_json::from_slice::<Exchanged>(&body) {
                    Ok(e) if e.access_token.is_empty() => self.fail(AuthError::Metadata {
                        url: url.to_owned(),
                        reason: "empty ID-JAG".into(),
                    }),
                    Ok(e) if e.issued_token_type.as_deref().is_some_and(|t| t != ID_JAG) => self
                        .fail(AuthError::Metadata {
                            url: url.to_owned(),
                            reason: format!(
                                "issued_token_type {:?} is not an ID-JAG",
                                e.issued_token_type.unwrap_or_default()
                            ),
                        }),
                    Ok(e) => self.jwt_bearer(now, e.access_token),
                    Err(e) => self.fail(AuthError::Metadata {
                        url: url.to_owned(),
                        reason: format!("not a token exchange response: {e}"),
                    }),
                }
            }
            Answer::Response { status, body } => {
                let (error, description) = oauth_error(&body);
                self.fail(AuthError::Token {
                    status,
                    error,
                    description,
                })
            }
            Answer::Failed(message) => self.fail(AuthError::Exchange {
                url: url.to_owned(),
                message,
            }),
        }
    }

    fn authorize(&mut self, now: Instant) {
        if !self.config.interactive {
            return self.fail(AuthError::InteractionRequired);
        }
        let server = self.server.as_ref().expect("discovered");
        let client = self.client.as_ref().expect("chosen");
        let endpoint = server.authorization_endpoint.clone().unwrap_or_default();
        let challenge = pkce_challenge(&self.secrets.verifier);
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", client.client_id.as_str()),
            ("redirect_uri", self.config.redirect_uri.as_str()),
            ("state", self.secrets.state.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ];
        if let Some(s) = &self.scope {
            pairs.push(("scope", s.as_str()));
        }
        pairs.push(("resource", self.resource.as_str()));
        let url = append_query(&endpoint, &encode_form(pairs));
        self.step = Step::Redirect {
            deadline: now
                .checked_add(self.config.authorize_timeout)
                .unwrap_or(now),
        };
        self.actions.push_back(AuthAction::Authorize { url });
    }

    fn token_request(&mut self, now: Instant, pairs: Vec<(String, String)>) {
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

    fn token_answer(&mut self, now: Instant, url: &str, answer: Answer, refreshing: bool) {
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

    /// The scope to ask for: configured, else the challenge's, else the
    /// resource's `scopes_supported`, else none; a step-up keeps what was
    /// asked before; `offline_access` is added when the server lists it.
    fn select_scope(&self) -> Option<String> {
        let mut scopes: Vec<String> = Vec::new();
        fn add(scopes: &mut Vec<String>, s: &str) {
            for part in s.split_whitespace() {
                if !scopes.iter().any(|x| x == part) {
                    scopes.push(part.to_owned());
                }
            }
        }
        if let Some(s) = &self.config.scope {
            add(&mut scopes, s);
        } else {
            if self.trigger.is_step_up() {
                if let Some(prev) = self.previous.as_ref().and_then(|p| p.scope.as_deref()) {
                    add(&mut scopes, prev);
                }
            }
            if let Some(s) = self.trigger.param("scope") {
                add(&mut scopes, s);
            } else if let Some(list) = self.prm.as_ref().and_then(|p| p.scopes_supported.as_ref()) {
                add(&mut scopes, &list.join(" "));
            }
        }
        if scopes.is_empty() {
            return None;
        }
        let offered = self
            .server
            .as_ref()
            .and_then(|s| s.scopes_supported.as_ref())
            .is_some_and(|l| l.iter().any(|x| x == "offline_access"));
        if self.config.offline_access && offered && self.config.grant.needs_user() {
            add(&mut scopes, "offline_access");
        }
        Some(scopes.join(" "))
    }

    // ---- exchanges --------------------------------------------------------

    fn get(&mut self, now: Instant, url: &str) {
        let headers = vec![("Accept".to_owned(), "application/json".to_owned())];
        self.send(now, HttpMethod::Get, url, headers, Vec::new());
    }

    fn send(
        &mut self,
        now: Instant,
        method: HttpMethod,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) {
        let parsed = match HttpUrl::parse(url) {
            Ok(u) => u,
            Err(e) => {
                return self.answer(now, url, Answer::Failed(format!("bad URL: {}", e.reason)));
            }
        };
        let id = ExchangeId(self.next_exchange);
        self.next_exchange += 1;
        let request = HttpRequest {
            exchange: id,
            method,
            url: parsed,
            headers,
            body,
            purpose: ExchangePurpose::Auth,
            carries: None,
        };
        self.current = Some(Current {
            id,
            url: url.to_owned(),
            status: None,
            body: Vec::new(),
            deadline: now.checked_add(self.config.exchange_timeout).unwrap_or(now),
            dpop_nonce: None,
            method,
            follow: Redirects::new(request.clone()),
        });
        self.actions.push_back(AuthAction::Http(request));
    }

    fn answer(&mut self, now: Instant, url: &str, answer: Answer) {
        match self.step {
            Step::Refresh => self.token_answer(now, url, answer, true),
            Step::ResourceMetadata { .. } => self.resource_metadata_answer(now, url, answer),
            Step::ServerMetadata { .. } => self.server_metadata_answer(now, url, answer),
            Step::Register => self.register_answer(now, url, answer),
            Step::IdpExchange => self.idp_exchange_answer(now, url, answer),
            Step::Token => self.token_answer(now, url, answer, false),
            Step::Reload { .. } | Step::Redirect { .. } | Step::Finished => {}
        }
    }

    fn fail(&mut self, error: AuthError) {
        if let Some(c) = self.current.take() {
            self.actions.push_back(AuthAction::Abort(c.id));
        }
        self.unlock();
        self.step = Step::Finished;
        self.actions.push_back(AuthAction::Failed(error));
    }
}

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";

/// The grant's name in messages.
fn grant_name(grant: Grant) -> &'static str {
    match grant {
        Grant::AuthorizationCode => "authorization code",
        Grant::ClientCredentials => "client credentials",
        Grant::JwtBearer => "JWT bearer",
        Grant::EnterpriseManaged => "enterprise-managed (ID-JAG)",
    }
}

/// Reads a credential from its source: one token of visible ASCII (a
/// compact JWT; surrounding white space is dropped).
fn read_credential(source: &CredentialSource, what: &str) -> Result<String, AuthError> {
    let value = source().map_err(|e| AuthError::Config(format!("reading the {what}: {e}")))?;
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(AuthError::Config(format!(
            "the {what} is empty or not a single token"
        )));
    }
    Ok(value.to_owned())
}

/// The endpoint as an RFC 8707 resource: no fragment (there is none in an
/// `HttpUrl`), no trailing `/` on a bare origin.
fn canonical_resource(endpoint: &HttpUrl) -> String {
    let s = endpoint.to_string();
    if endpoint.target() == "/" {
        s.trim_end_matches('/').to_owned()
    } else {
        s
    }
}

/// A JSON document from a 200 answer, or why not.
fn parse_document<T: serde::de::DeserializeOwned>(answer: Answer) -> Result<T, String> {
    match answer {
        Answer::Response { status: 200, body } => {
            serde_json::from_slice(&body).map_err(|e| format!("not a metadata document: {e}"))
        }
        Answer::Response { status, .. } => Err(format!("HTTP {status}")),
        Answer::Failed(m) => Err(m),
    }
}

/// The `error` and `error_description` of an OAuth error body, else the
/// body's start.
fn oauth_error(body: &[u8]) -> (String, Option<String>) {
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

/// `native` for a redirect to a loopback address or a custom scheme, `web`
/// for one to an HTTPS site (OpenID Connect registration's
/// `application_type`).
fn application_type(redirect_uri: &str) -> &'static str {
    match HttpUrl::parse(redirect_uri) {
        Ok(u) if !super::wire::is_loopback_host(u.host()) => "web",
        _ => "native",
    }
}
