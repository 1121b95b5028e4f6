//! Discovery: the protected resource's metadata, then its authorization
//! server's (RFC 9728, RFC 8414, OpenID Connect; 2025-03-26 defaults), and
//! the scope they lead to.

use std::time::Instant;

use super::{Answer, AuthFlow, Step};
use crate::auth::metadata::{
    check_server_metadata, resource_covers, resource_metadata_urls, secure_url,
    server_metadata_urls, ResourceMetadata, ServerMetadata,
};
use crate::auth::wire::origin_string;
use crate::auth::AuthError;
use crate::exchange::HttpUrl;

impl AuthFlow {
    pub(super) fn discover(&mut self, now: Instant) {
        let mut urls = Vec::new();
        if let Some(rm) = self.trigger.param("resource_metadata") {
            // Metadata elsewhere than at the endpoint's origin must be safe
            // to fetch.
            match HttpUrl::parse(rm) {
                Ok(u) if u.same_origin(&self.endpoint) || crate::auth::wire::is_secure(&u) => {
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

    pub(super) fn resource_metadata_answer(&mut self, now: Instant, url: &str, answer: Answer) {
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

    pub(super) fn server_metadata_answer(&mut self, now: Instant, url: &str, answer: Answer) {
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

    /// The scope to ask for: configured, else the challenge's, else the
    /// resource's `scopes_supported`, else none; a step-up keeps what was
    /// asked before; `offline_access` is added when the server lists it.
    pub(super) fn select_scope(&self) -> Option<String> {
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
}

/// The endpoint as an RFC 8707 resource: no fragment (there is none in an
/// `HttpUrl`), no trailing `/` on a bare origin.
pub(super) fn canonical_resource(endpoint: &HttpUrl) -> String {
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
