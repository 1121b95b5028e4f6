//! `--oauth`: the HTTP server guards `/mcp` with bearer tokens and is its own
//! OAuth 2.1 authorization server, so a client's whole flow runs against it.
//!
//! ```text
//!  POST /mcp (no/unknown/expired token) ─► 401 WWW-Authenticate: Bearer resource_metadata=…
//!  GET  /.well-known/oauth-protected-resource[/mcp]  RFC 9728 {resource, authorization_servers}
//!  GET  /.well-known/oauth-authorization-server      RFC 8414 (issuer http://127.0.0.1:PORT)
//!  POST /register   RFC 7591 → 201 {client_id}  (public clients, auth method `none`)
//!  GET  /authorize  checks everything, answers 302 redirect_uri?code=…&state=… at once
//!  POST /token      authorization_code (code, PKCE S256, redirect_uri, resource)
//!                   refresh_token (rotated: the old one stops working; with
//!                   --oauth-reuse-revokes a spent one revokes its whole grant)
//!  POST /oauth/expire  test control: every access token issued so far expires
//! ```
//!
//! Every OAuth request is logged as `{"event":"oauth","method":..,"path":..,
//! "status":N[,"grant_type":..][,"error":..]}`; a refused `/mcp` request as
//! `{"event":"oauth","path":"/mcp","status":401,"error":"missing"|"unknown"|"expired"}`.
//! With `--oauth-expire-after N` an access token is refused once it has been
//! accepted N times. With `--oauth-resource-root` the protected resource
//! (metadata `resource`, the `resource` parameter required) is the origin,
//! a parent of the endpoint. `POST /oauth/expire` expires every access token
//! issued so far (logged as `{"event":"tokens_expired","count":N}`), so a
//! test can make its clients refresh at a moment of its choosing. With
//! `--oauth-reuse-revokes`, a refresh token presented after it was spent
//! revokes the grant it belongs to (every access and refresh token issued
//! from one authorization code), logged as `{"event":"grant_revoked",
//! "grant":N}`, as servers that rotate refresh tokens do (RFC 9700
//! §4.14.2). With `--oauth-refresh-delay MS` a refresh is held MS ms first
//! (`{"event":"refresh_held"}`) and dropped, not carried out, if its client
//! went away meanwhile (`{"event":"refresh_abandoned"}`): the answer never
//! reached anyone, so no token was rotated. Every table is bounded: past
//! [`MAX_ENTRIES`] the oldest half is forgotten.

use crate::http::random_token;
use crate::log::Log;
use crate::opts::Options;
use crate::protocol::lock;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::Mutex;

/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";
/// Largest request body the OAuth endpoints read.
const MAX_OAUTH_BODY: usize = 64 * 1024;
/// Most clients, codes, access or refresh tokens remembered (each).
const MAX_ENTRIES: usize = 4096;
/// `expires_in` of an access token (informative: expiry is by use count).
const EXPIRES_IN: u64 = 3600;

/// A response for `http.rs` to write.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: vec![
                ("Content-Type", "application/json".into()),
                ("Cache-Control", "no-store".into()),
            ],
            body: body.to_string().into_bytes(),
        }
    }

    fn error(status: u16, error: &str, description: &str) -> Reply {
        Reply::json(
            status,
            json!({"error": error, "error_description": description}),
        )
    }

    fn redirect(location: String) -> Reply {
        Reply {
            status: 302,
            headers: vec![("Location", location)],
            body: Vec::new(),
        }
    }
}

struct Client {
    id: String,
    redirect_uris: Vec<String>,
}

struct Code {
    code: String,
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: String,
}

struct Access {
    token: String,
    /// Requests it was accepted for.
    uses: u64,
    /// The authorization it comes from.
    grant: u64,
    /// Expired by `POST /oauth/expire`.
    expired: bool,
}

struct Refresh {
    token: String,
    client_id: String,
    grant: u64,
}

/// Oldest first; bounded by [`MAX_ENTRIES`].
struct Table<T>(VecDeque<T>);

impl<T> Table<T> {
    fn push(&mut self, item: T) {
        if self.0.len() >= MAX_ENTRIES {
            self.0.drain(..MAX_ENTRIES / 2);
        }
        self.0.push_back(item);
    }

    fn position(&self, pred: impl Fn(&T) -> bool) -> Option<usize> {
        self.0.iter().position(pred)
    }

    fn take(&mut self, pred: impl Fn(&T) -> bool) -> Option<T> {
        let i = self.position(pred)?;
        self.0.remove(i)
    }
}

struct State {
    clients: Table<Client>,
    codes: Table<Code>,
    access: Table<Access>,
    refresh: Table<Refresh>,
    /// Refresh tokens used once, with their grant (to detect reuse).
    spent: Table<(String, u64)>,
    next_grant: u64,
}

/// The authorization server and the guard of `/mcp`.
pub struct OAuth {
    origin: String,
    scope: Option<String>,
    expire_after: Option<u64>,
    /// `--oauth-resource-root`: the protected resource is the origin.
    resource_root: bool,
    /// `--oauth-reuse-revokes`.
    reuse_revokes: bool,
    /// `--oauth-refresh-delay`.
    refresh_delay: Option<std::time::Duration>,
    state: Mutex<State>,
}

/// What the guard decided about an `/mcp` request.
pub enum Guard {
    Allow,
    Deny(Reply),
}

impl OAuth {
    pub fn new(port: u16, opts: &Options) -> OAuth {
        OAuth {
            origin: format!("http://127.0.0.1:{port}"),
            scope: opts.oauth_scope.clone(),
            expire_after: opts.oauth_expire_after,
            resource_root: opts.oauth_resource_root,
            reuse_revokes: opts.oauth_reuse_revokes,
            refresh_delay: opts
                .oauth_refresh_delay_ms
                .map(std::time::Duration::from_millis),
            state: Mutex::new(State {
                clients: Table(VecDeque::new()),
                codes: Table(VecDeque::new()),
                access: Table(VecDeque::new()),
                refresh: Table(VecDeque::new()),
                spent: Table(VecDeque::new()),
                next_grant: 1,
            }),
        }
    }

    /// The RFC 8707 resource: the MCP endpoint, or its origin.
    fn resource(&self) -> String {
        if self.resource_root {
            self.origin.clone()
        } else {
            format!("{}{MCP_PATH}", self.origin)
        }
    }

    fn resource_metadata_url(&self) -> String {
        format!(
            "{}/.well-known/oauth-protected-resource{MCP_PATH}",
            self.origin
        )
    }

    fn scopes(&self) -> Vec<&str> {
        self.scope
            .as_deref()
            .map(|s| s.split_whitespace().collect())
            .unwrap_or_default()
    }

    /// Checks the bearer token of a request to the MCP endpoint.
    pub fn guard(&self, authorization: Option<&str>, method: &str, log: &Log) -> Guard {
        let token = authorization.and_then(|a| {
            let (scheme, rest) = a.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
        let error = match token {
            None => "missing",
            Some(token) => {
                let mut st = lock(&self.state);
                match st.access.position(|a| a.token == token) {
                    None => "unknown",
                    Some(i) => {
                        let a = &mut st.access.0[i];
                        if a.expired || self.expire_after.is_some_and(|n| a.uses >= n) {
                            st.access.0.remove(i);
                            "expired"
                        } else {
                            a.uses += 1;
                            return Guard::Allow;
                        }
                    }
                }
            }
        };
        log.event(
            "oauth",
            json!({"method": method, "path": MCP_PATH, "status": 401, "error": error}),
        );
        let mut challenge = format!(
            "Bearer resource_metadata=\"{}\"",
            self.resource_metadata_url()
        );
        if let Some(scope) = &self.scope {
            challenge.push_str(&format!(", scope=\"{}\"", quote(scope)));
        }
        if error != "missing" {
            challenge.push_str(", error=\"invalid_token\"");
        }
        let mut reply = Reply::error(401, "invalid_token", &format!("{error} bearer token"));
        reply.headers.push(("WWW-Authenticate", challenge));
        Guard::Deny(reply)
    }

    /// How long to hold this request before [`serve`](Self::serve) (a
    /// refresh, with `--oauth-refresh-delay`).
    pub fn hold(&self, method: &str, target: &str, body: &[u8]) -> Option<std::time::Duration> {
        let delay = self.refresh_delay?;
        let path = target.split('?').next().unwrap_or(target);
        let form = parse_form(&String::from_utf8_lossy(body));
        (method == "POST" && path == "/token" && get(&form, "grant_type") == Some("refresh_token"))
            .then_some(delay)
    }

    /// Answers the metadata and authorization-server paths; `None` for any
    /// other path.
    pub fn serve(&self, method: &str, target: &str, body: &[u8], log: &Log) -> Option<Reply> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut entry = json!({"method": method, "path": path});
        let reply = match (method, path) {
            ("GET", p)
                if p == "/.well-known/oauth-protected-resource"
                    || p == format!("/.well-known/oauth-protected-resource{MCP_PATH}") =>
            {
                let mut doc = json!({
                    "resource": self.resource(),
                    "authorization_servers": [self.origin],
                    "bearer_methods_supported": ["header"],
                });
                if self.scope.is_some() {
                    doc["scopes_supported"] = json!(self.scopes());
                }
                Reply::json(200, doc)
            }
            ("GET", "/.well-known/oauth-authorization-server") => {
                let mut doc = json!({
                    "issuer": self.origin,
                    "authorization_endpoint": format!("{}/authorize", self.origin),
                    "token_endpoint": format!("{}/token", self.origin),
                    "registration_endpoint": format!("{}/register", self.origin),
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code", "refresh_token"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                });
                if self.scope.is_some() {
                    doc["scopes_supported"] = json!(self.scopes());
                }
                Reply::json(200, doc)
            }
            (_, "/register" | "/token") if body.len() > MAX_OAUTH_BODY => {
                Reply::error(413, "invalid_request", "body too large")
            }
            ("POST", "/register") => self.register(body),
            ("POST", "/oauth/expire") => {
                let mut st = lock(&self.state);
                let mut count = 0;
                for a in st.access.0.iter_mut().filter(|a| !a.expired) {
                    a.expired = true;
                    count += 1;
                }
                drop(st);
                log.event("tokens_expired", json!({ "count": count }));
                Reply::json(200, json!({ "expired": count }))
            }
            ("GET", "/authorize") => self.authorize(query),
            ("POST", "/token") => {
                let form = parse_form(&String::from_utf8_lossy(body));
                if let Some(g) = get(&form, "grant_type") {
                    entry["grant_type"] = json!(g);
                }
                self.token(&form, log)
            }
            (
                _,
                "/.well-known/oauth-protected-resource"
                | "/.well-known/oauth-authorization-server"
                | "/register"
                | "/authorize"
                | "/token",
            ) => Reply::error(405, "invalid_request", "method not allowed"),
            (_, p) if p.starts_with("/.well-known/") => {
                Reply::error(404, "not_found", "no such document")
            }
            _ => return None,
        };
        entry["status"] = json!(reply.status);
        if reply.status >= 400 {
            if let Ok(Value::Object(e)) = serde_json::from_slice::<Value>(&reply.body) {
                if let Some(code) = e.get("error") {
                    entry["error"] = code.clone();
                }
            }
        }
        if reply.status == 302 {
            let location = reply.headers[0].1.as_str();
            if let Some(e) = get(&parse_form(location), "error") {
                entry["error"] = json!(e);
            }
        }
        log.event("oauth", entry);
        Some(reply)
    }

    fn register(&self, body: &[u8]) -> Reply {
        let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(body) else {
            return Reply::error(400, "invalid_client_metadata", "body is not a JSON object");
        };
        let redirect_uris: Vec<String> = match req.get("redirect_uris") {
            Some(Value::Array(list)) if !list.is_empty() && list.len() <= 16 => {
                match list.iter().map(|v| v.as_str().map(str::to_owned)).collect() {
                    Some(l) => l,
                    None => {
                        return Reply::error(
                            400,
                            "invalid_redirect_uri",
                            "redirect_uris must be strings",
                        )
                    }
                }
            }
            _ => return Reply::error(400, "invalid_redirect_uri", "redirect_uris: 1 to 16 needed"),
        };
        if let Some(m) = req.get("token_endpoint_auth_method") {
            if m != "none" {
                return Reply::error(
                    400,
                    "invalid_client_metadata",
                    "only token_endpoint_auth_method `none` is supported",
                );
            }
        }
        let id = format!("client-{}", random_token());
        let mut doc = json!({
            "client_id": id,
            "client_id_issued_at": 0,
            "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        if let Some(name) = req.get("client_name").and_then(Value::as_str) {
            doc["client_name"] = json!(name);
        }
        lock(&self.state).clients.push(Client { id, redirect_uris });
        Reply::json(201, doc)
    }

    fn authorize(&self, query: &str) -> Reply {
        let q = parse_form(query);
        let (Some(client_id), Some(redirect_uri)) = (get(&q, "client_id"), get(&q, "redirect_uri"))
        else {
            return Reply::error(400, "invalid_request", "client_id and redirect_uri needed");
        };
        let known = lock(&self.state)
            .clients
            .0
            .iter()
            .any(|c| c.id == client_id && c.redirect_uris.iter().any(|u| u == redirect_uri));
        if !known {
            // Never redirect to an unregistered URI.
            return Reply::error(
                400,
                "invalid_request",
                "unknown client_id or unregistered redirect_uri",
            );
        }
        let state = get(&q, "state");
        let back = |pairs: &[(&str, &str)]| {
            let mut all: Vec<(&str, &str)> = pairs.to_vec();
            if let Some(s) = state {
                all.push(("state", s));
            }
            let sep = if redirect_uri.contains('?') { '&' } else { '?' };
            Reply::redirect(format!("{redirect_uri}{sep}{}", encode_form(&all)))
        };
        let refuse = |why: &str| back(&[("error", "invalid_request"), ("error_description", why)]);
        if get(&q, "response_type") != Some("code") {
            return back(&[("error", "unsupported_response_type")]);
        }
        if state.unwrap_or("").is_empty() {
            return refuse("state needed");
        }
        let Some(challenge) = get(&q, "code_challenge").filter(|c| c.len() == 43) else {
            return refuse("code_challenge (S256, 43 characters) needed");
        };
        if get(&q, "code_challenge_method") != Some("S256") {
            return refuse("code_challenge_method must be S256");
        }
        let Some(resource) = get(&q, "resource") else {
            return refuse("resource needed (RFC 8707)");
        };
        if resource != self.resource() {
            return back(&[("error", "invalid_target")]);
        }
        let asked: Vec<&str> = get(&q, "scope")
            .map(|s| s.split_whitespace().collect())
            .unwrap_or_default();
        if !self.scopes().iter().all(|s| asked.contains(s)) {
            return back(&[("error", "invalid_scope")]);
        }
        let code = random_token();
        lock(&self.state).codes.push(Code {
            code: code.clone(),
            client_id: client_id.to_owned(),
            redirect_uri: redirect_uri.to_owned(),
            challenge: challenge.to_owned(),
            resource: resource.to_owned(),
        });
        back(&[("code", &code)])
    }

    fn token(&self, form: &[(String, String)], log: &Log) -> Reply {
        let Some(client_id) = get(form, "client_id") else {
            return Reply::error(401, "invalid_client", "client_id needed");
        };
        if let Some(r) = get(form, "resource") {
            if r != self.resource() {
                return Reply::error(400, "invalid_target", "resource is not this server's");
            }
        }
        let mut st = lock(&self.state);
        if !st.clients.0.iter().any(|c| c.id == client_id) {
            return Reply::error(401, "invalid_client", "unknown client_id");
        }
        match get(form, "grant_type") {
            Some("authorization_code") => {
                let Some(code) = get(form, "code") else {
                    return Reply::error(400, "invalid_request", "code needed");
                };
                // A code is used once, right or wrong.
                let Some(c) = st.codes.take(|c| c.code == code) else {
                    return Reply::error(400, "invalid_grant", "unknown or used code");
                };
                if c.client_id != client_id {
                    return Reply::error(400, "invalid_grant", "code issued to another client");
                }
                if get(form, "redirect_uri") != Some(c.redirect_uri.as_str()) {
                    return Reply::error(400, "invalid_grant", "redirect_uri differs");
                }
                if get(form, "resource") != Some(c.resource.as_str()) {
                    return Reply::error(400, "invalid_target", "resource needed (RFC 8707)");
                }
                let Some(verifier) = get(form, "code_verifier") else {
                    return Reply::error(400, "invalid_request", "code_verifier needed");
                };
                if !(43..=128).contains(&verifier.len())
                    || URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) != c.challenge
                {
                    return Reply::error(400, "invalid_grant", "PKCE verification failed");
                }
                let grant = st.next_grant;
                st.next_grant += 1;
                Self::issue(&mut st, client_id, grant)
            }
            Some("refresh_token") => {
                let Some(token) = get(form, "refresh_token") else {
                    return Reply::error(400, "invalid_request", "refresh_token needed");
                };
                // Rotated: the old refresh token is spent.
                match st.refresh.take(|r| r.token == token) {
                    Some(r) if r.client_id == client_id => {
                        st.spent.push((r.token, r.grant));
                        Self::issue(&mut st, client_id, r.grant)
                    }
                    Some(_) => Reply::error(400, "invalid_grant", "token issued to another client"),
                    None => {
                        let reused = st.spent.0.iter().find(|(t, _)| t == token).map(|s| s.1);
                        match reused {
                            Some(grant) if self.reuse_revokes => {
                                // RFC 9700 4.14.2: a refresh token used twice
                                // may be stolen; the whole grant goes.
                                st.access.0.retain(|a| a.grant != grant);
                                st.refresh.0.retain(|r| r.grant != grant);
                                drop(st);
                                log.event("grant_revoked", json!({ "grant": grant }));
                                Reply::error(
                                    400,
                                    "invalid_grant",
                                    "refresh token reused: the grant is revoked",
                                )
                            }
                            _ => {
                                Reply::error(400, "invalid_grant", "unknown or spent refresh token")
                            }
                        }
                    }
                }
            }
            Some(_) => Reply::error(400, "unsupported_grant_type", "unsupported grant_type"),
            None => Reply::error(400, "invalid_request", "grant_type needed"),
        }
    }

    fn issue(st: &mut State, client_id: &str, grant: u64) -> Reply {
        let access = format!("at-{}", random_token());
        let refresh = format!("rt-{}", random_token());
        st.access.push(Access {
            token: access.clone(),
            uses: 0,
            grant,
            expired: false,
        });
        st.refresh.push(Refresh {
            token: refresh.clone(),
            client_id: client_id.to_owned(),
            grant,
        });
        Reply::json(
            200,
            json!({
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": EXPIRES_IN,
                "refresh_token": refresh,
            }),
        )
    }
}

/// `s` for a quoted-string (backslash before `"` and `\`).
fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The pairs of a form body or query string (also of a whole URL: what
/// precedes `?` is skipped); at most 64 pairs.
fn parse_form(s: &str) -> Vec<(String, String)> {
    let s = s.split_once('?').map_or(s, |(_, q)| q);
    s.split('&')
        .filter(|p| !p.is_empty())
        .take(64)
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding (`+` is a space; bad escapes kept as they are).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| char::from(c).to_digit(16);
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode_form(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        let mut out = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}
