//! The grants once the client is known: the authorization code (the user's
//! redirect), client credentials, JWT bearer (RFC 7523) and
//! enterprise-managed authorization (SEP-990, an ID-JAG from the IdP).

use std::time::Instant;

use serde::Deserialize;

use super::token::oauth_error;
use super::{Answer, AuthAction, AuthFlow, Step};
use crate::auth::wire::{append_query, basic_credentials, encode_form, pkce_challenge};
use crate::auth::{AuthError, CredentialSource, Grant};
use crate::exchange::{HttpMethod, HttpUrl};

impl AuthFlow {
    pub(super) fn after_client(&mut self, now: Instant) {
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
            Ok(u) if crate::auth::wire::is_secure(&u) => {}
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

    pub(super) fn idp_exchange_answer(&mut self, now: Instant, url: &str, answer: Answer) {
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
}

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";

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
