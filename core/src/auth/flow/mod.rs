//! One authorization, from a 401/403 to tokens (see the [module
//! docs](super) for the steps).
//!
//! This file holds the flow's types, its driver API (`handle_*`, polls) and
//! its exchanges; the steps are in `discovery` (resource and server
//! metadata, scope), `registration` (choosing or registering the client),
//! `grants` (the authorization code, JWT bearer and enterprise-managed
//! grants) and `token` (the store's lock, refresh, token requests and
//! answers).

mod discovery;
mod grants;
mod registration;
mod token;

use std::collections::VecDeque;
use std::time::Instant;

use super::metadata::{resource_covers, ResourceMetadata, ServerMetadata};
use super::wire::{query_pairs, Secrets};
use super::{AuthConfig, AuthError, AuthState, ClientCredentials, DpopKey, ProofRequest};
use crate::exchange::challenge::{bearer, Challenge};
use crate::exchange::redirect::{is_redirect, RedirectError, Redirects};
use crate::exchange::{
    ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, HttpUrl, ResponseHead,
};
use discovery::canonical_resource;

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
