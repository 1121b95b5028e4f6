//! The client: pre-registered, a Client ID Metadata Document, the one of
//! the previous state, or dynamic registration (RFC 7591).

use std::time::Instant;

use serde::Deserialize;

use super::token::oauth_error;
use super::{Answer, AuthFlow, Step};
use crate::auth::metadata::same_issuer;
use crate::auth::{AuthError, AuthState, ClientCredentials, Grant, TokenAuthMethod};
use crate::exchange::{HttpMethod, HttpUrl};

#[derive(Deserialize)]
struct RegistrationResponse {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

impl AuthFlow {
    pub(super) fn choose_client(&mut self, now: Instant) {
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

    pub(super) fn register_answer(&mut self, now: Instant, url: &str, answer: Answer) {
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
}

/// The grant's name in messages.
fn grant_name(grant: Grant) -> &'static str {
    match grant {
        Grant::AuthorizationCode => "authorization code",
        Grant::ClientCredentials => "client credentials",
        Grant::JwtBearer => "JWT bearer",
        Grant::EnterpriseManaged => "enterprise-managed (ID-JAG)",
    }
}

/// `native` for a redirect to a loopback address or a custom scheme, `web`
/// for one to an HTTPS site (OpenID Connect registration's
/// `application_type`).
fn application_type(redirect_uri: &str) -> &'static str {
    match HttpUrl::parse(redirect_uri) {
        Ok(u) if !crate::auth::wire::is_loopback_host(u.host()) => "web",
        _ => "native",
    }
}
