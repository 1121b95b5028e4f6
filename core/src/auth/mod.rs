//! OAuth 2.1 authorization for HTTP servers (MCP `basic/authorization`), as
//! a sans-IO state machine: [`AuthFlow`] emits HTTP exchanges and "send the
//! user here" requests, consumes responses and the redirect, and ends with
//! an [`AuthState`] (tokens, client, endpoints) or a typed [`AuthError`].
//!
//! ```text
//!  401/403 ─► [refresh token] ─ok──────────────────────────────────────────► Done
//!                 │ none / refused
//!                 ▼
//!  protected-resource metadata (resource_metadata, path-aware, root)
//!     │ found                              │ none (2025-03-26 server)
//!     ▼                                    ▼
//!  AS metadata (RFC 8414, OIDC; issuer checked)   origin metadata ─ none ─► /authorize /token /register
//!     ▼
//!  client: pre-registered │ Client ID Metadata Document │ dynamic registration
//!     ▼
//!  authorization code + PKCE S256 + state + resource ─► Authorize{url} ─► redirect ─► token ─► Done
//!  (client_credentials grant: straight to the token endpoint)
//! ```
//!
//! The [`Connection`](crate::Connection) runs a flow when the Streamable
//! HTTP transport meets 401 (or 403 `insufficient_scope`), holds the
//! messages meanwhile, then sends them again with `Authorization: Bearer`.
//! Tokens only ever go to the MCP endpoint's origin; no token or secret
//! appears in a `Debug` output or an error message.

mod flow;
mod metadata;
#[cfg(test)]
mod tests;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::exchange::challenge::{bearer, parse_challenges, Challenge};
pub use crate::exchange::dpop::{DpopBinding, DpopError, DpopKey, ProofRequest, WallClock};
pub use flow::{AuthAction, AuthFlow, Trigger};
pub use metadata::{
    resource_covers, resource_metadata_urls, server_metadata_urls, ResourceMetadata, ServerMetadata,
};
pub use wire::{base64url, pkce_challenge, RandomError, Secrets};

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuthMethod {
    /// A public client: `client_id` in the body, no secret.
    None,
    /// HTTP Basic with the id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the body.
    ClientSecretPost,
    /// A signed JWT (RFC 7523) made by [`AuthConfig::assertion`].
    PrivateKeyJwt,
}

impl TokenAuthMethod {
    /// The RFC 8414 name.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenAuthMethod::None => "none",
            TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenAuthMethod::ClientSecretPost => "client_secret_post",
            TokenAuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    fn parse(s: &str) -> Option<TokenAuthMethod> {
        Some(match s {
            "none" => TokenAuthMethod::None,
            "client_secret_basic" => TokenAuthMethod::ClientSecretBasic,
            "client_secret_post" => TokenAuthMethod::ClientSecretPost,
            "private_key_jwt" => TokenAuthMethod::PrivateKeyJwt,
            _ => return None,
        })
    }
}

/// A client's identity at an authorization server (pre-registered, from a
/// Client ID Metadata Document, or dynamically registered).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCredentials {
    /// The client id (an HTTPS URL for a metadata document).
    pub client_id: String,
    /// The secret of a confidential client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The token endpoint authentication method; chosen from the server's
    /// metadata when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_method: Option<TokenAuthMethod>,
}

impl ClientCredentials {
    /// A client known by id only (a public client).
    pub fn public(client_id: impl Into<String>) -> Self {
        ClientCredentials {
            client_id: client_id.into(),
            client_secret: None,
            auth_method: None,
        }
    }

    /// A confidential client.
    pub fn confidential(client_id: impl Into<String>, secret: impl Into<String>) -> Self {
        ClientCredentials {
            client_id: client_id.into(),
            client_secret: Some(secret.into()),
            auth_method: None,
        }
    }
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

/// Tokens from the token endpoint.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// The bearer token.
    pub access_token: String,
    /// Used before asking the user again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The granted scope, if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Lifetime in seconds from issue, if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<u64>,
    /// When the access token expires, in seconds since the Unix epoch:
    /// `expires_in` from the moment the answer came (set by the flow when
    /// it has a [`WallClock`]; `None`: not known). Absolute, so that a
    /// state read back from a store later (by another process) still says
    /// whether its token is good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl Tokens {
    /// Whether the access token is expired at `unix_secs`, or will be
    /// within `skew` seconds (clocks differ, requests take time); `false`
    /// when the expiry is not known.
    pub fn expired(&self, unix_secs: u64, skew: u64) -> bool {
        self.expires_at
            .is_some_and(|at| at <= unix_secs.saturating_add(skew))
    }
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("scope", &self.scope)
            .field("expires_in", &self.expires_in)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Everything needed to use and renew access to one resource: what a token
/// store keeps (keyed by [`AuthState::issuer`] and [`AuthState::resource`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthState {
    /// The resource (RFC 8707 `resource`) the tokens are for.
    pub resource: String,
    /// The authorization server's issuer; `None` for a 2025-03-26 server
    /// without metadata (default endpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Where tokens are refreshed.
    pub token_endpoint: String,
    /// The client the tokens were issued to.
    pub client: ClientCredentials,
    /// The tokens.
    pub tokens: Tokens,
    /// The scope last asked for (step-up adds to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The DPoP key the tokens are bound to (RFC 9449; `None`: bearer
    /// tokens). Kept with them so that refreshed tokens stay bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<DpopKey>,
}

impl AuthState {
    /// `Bearer <token>` (see [`authorization`](Self::authorization) for
    /// the header to send).
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.tokens.access_token)
    }

    /// The `Authorization` header value for the resource: `DPoP <token>`
    /// for a DPoP-bound token, else `Bearer <token>`.
    pub fn authorization(&self) -> String {
        match self.dpop_key {
            Some(_) => format!("DPoP {}", self.tokens.access_token),
            None => self.bearer(),
        }
    }

    /// What a transport needs to prove possession of the key, for a
    /// DPoP-bound token (`None`: bearer, or no wall clock to date proofs).
    pub fn dpop_binding(&self, clock: Option<WallClock>) -> Option<DpopBinding> {
        Some(DpopBinding {
            key: self.dpop_key.clone()?,
            clock: clock?,
            access_token: self.tokens.access_token.clone(),
        })
    }
}

/// Which grant obtains the tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Grant {
    /// Authorization code with PKCE: a user approves in a browser.
    #[default]
    AuthorizationCode,
    /// Client credentials (machine to machine; needs a pre-registered
    /// client): no user involved.
    ClientCredentials,
    /// Workload identity federation: the RFC 7523 JWT bearer grant with
    /// the assertion [`AuthConfig::workload_identity`] reads (needs a
    /// pre-registered client): no user involved.
    JwtBearer,
    /// Enterprise-managed authorization (SEP-990, cross-app access): the
    /// enterprise IdP's ID token ([`AuthConfig::enterprise`]) is exchanged
    /// there for an ID-JAG (RFC 8693), which the MCP server's
    /// authorization server takes as a JWT bearer grant (RFC 7523; needs a
    /// pre-registered client): no user involved.
    EnterpriseManaged,
}

impl Grant {
    /// Whether the grant sends a user to the browser.
    pub fn needs_user(self) -> bool {
        self == Grant::AuthorizationCode
    }
}

/// Reads a credential (a compact JWT) when a flow needs one: a workload
/// identity token, an enterprise IdP's ID token. Called anew for every
/// token request, so a rotated file or a new command output is used once
/// the tokens expire. The driver provides it (the core does no I/O);
/// `mcpwire-adapter` has ones for a file, a variable and a command. Any
/// error will do (`Err("no token yet".into())` too): its message is
/// quoted in the [`AuthError::Config`] the flow fails with.
pub type CredentialSource = Arc<dyn Fn() -> Result<String, BoxError> + Send + Sync>;

/// The error of an application's callback ([`CredentialSource`],
/// [`AssertionSigner`]): any error, a `String` or a `&str` too (with
/// `.into()`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The enterprise identity provider of [`Grant::EnterpriseManaged`].
#[derive(Clone)]
pub struct EnterpriseIdp {
    /// Its token endpoint (RFC 8693 token exchange).
    pub token_endpoint: String,
    /// This client's id there.
    pub client_id: String,
    /// This client's secret there, if it has one (sent with HTTP Basic).
    pub client_secret: Option<String>,
    /// The user's ID token from the IdP (the exchange's subject token).
    pub id_token: CredentialSource,
}

impl fmt::Debug for EnterpriseIdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterpriseIdp")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// What a client assertion (RFC 7523 `private_key_jwt`) must say. The
/// signer adds `iat` and `exp` from its clock and signs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionClaims {
    /// `iss` and `sub`: the client id.
    pub client_id: String,
    /// `aud`: the authorization server's issuer (its token endpoint when
    /// the issuer is unknown).
    pub audience: String,
    /// `jti`: unique per assertion.
    pub jti: String,
}

/// Makes a signed client assertion (a compact JWT) from its claims. Any
/// error will do ([`BoxError`]): its message is quoted in the
/// [`AuthError::Config`] the flow fails with.
pub type AssertionSigner = Arc<dyn Fn(&AssertionClaims) -> Result<String, BoxError> + Send + Sync>;

/// How a connection authorizes itself to an HTTP server.
#[derive(Clone)]
pub struct AuthConfig {
    /// `client_name` for dynamic registration.
    pub client_name: String,
    /// Where the authorization server sends the user agent back
    /// (`http://127.0.0.1:<port>/callback` for a loopback listener).
    pub redirect_uri: String,
    /// Pre-registered client credentials (used first when set).
    pub client: Option<ClientCredentials>,
    /// The HTTPS URL of this client's metadata document (used as
    /// `client_id` when the server supports Client ID Metadata Documents).
    pub client_metadata_url: Option<String>,
    /// Which grant to use.
    pub grant: Grant,
    /// Whether a user can be sent to the browser. When false, a flow that
    /// needs one fails with [`AuthError::InteractionRequired`] (a stored
    /// refresh token is still used).
    pub interactive: bool,
    /// Ask for `offline_access` (refresh tokens) when the authorization
    /// server lists it and some scope is requested.
    pub offline_access: bool,
    /// Authorization flows in a row (without a request succeeding in
    /// between) before the connection gives up on a resource.
    pub max_attempts: u32,
    /// State from a token store: its access token is sent from the first
    /// request; its refresh token and client are used first on a 401.
    pub state: Option<AuthState>,
    /// Signs client assertions for `private_key_jwt`.
    pub assertion: Option<AssertionSigner>,
    /// The scope to ask for, instead of the challenge's or the metadata's.
    pub scope: Option<String>,
    /// Ask for DPoP-bound tokens (RFC 9449) when the authorization server
    /// lists ES256 in `dpop_signing_alg_values_supported` or the resource
    /// challenges with `DPoP` (default true; needs `wall_clock`).
    pub dpop: bool,
    /// Dates DPoP proofs (the core has no clock). Without it no DPoP is
    /// used: tokens are requested as bearer tokens.
    pub wall_clock: Option<WallClock>,
    /// The workload's identity token for [`Grant::JwtBearer`].
    pub workload_identity: Option<CredentialSource>,
    /// The enterprise IdP for [`Grant::EnterpriseManaged`].
    pub enterprise: Option<EnterpriseIdp>,
    /// How long before its stored expiry an access token counts as
    /// expired (default 60 s: clocks differ, a request takes time). See
    /// [`Tokens::expired`].
    pub expiry_skew: Duration,
    /// How long the token store may stay locked by another process or
    /// connection before a due refresh gives up waiting (default 60 s;
    /// see [`AuthAction::LockStore`]).
    pub store_lock_timeout: Duration,
    /// How long the user has to complete the authorization (default 5 min).
    pub authorize_timeout: Duration,
    /// How long each discovery, registration or token exchange may take
    /// (default 30 s).
    pub exchange_timeout: Duration,
    /// Largest metadata, registration or token response accepted (default
    /// 256 KiB).
    pub max_document: usize,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            client_name: "mcpwire".into(),
            redirect_uri: "http://127.0.0.1/callback".into(),
            client: None,
            client_metadata_url: None,
            grant: Grant::AuthorizationCode,
            interactive: true,
            offline_access: true,
            max_attempts: 3,
            state: None,
            assertion: None,
            scope: None,
            dpop: true,
            wall_clock: None,
            workload_identity: None,
            enterprise: None,
            expiry_skew: Duration::from_secs(60),
            store_lock_timeout: Duration::from_secs(60),
            authorize_timeout: Duration::from_secs(300),
            exchange_timeout: Duration::from_secs(30),
            max_document: 256 * 1024,
        }
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("client_name", &self.client_name)
            .field("redirect_uri", &self.redirect_uri)
            .field("client", &self.client)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("grant", &self.grant)
            .field("interactive", &self.interactive)
            .field("max_attempts", &self.max_attempts)
            .field("state", &self.state.as_ref().map(|s| &s.resource))
            .field("assertion", &self.assertion.as_ref().map(|_| "<signer>"))
            .field("scope", &self.scope)
            .field("dpop", &self.dpop)
            .field(
                "workload_identity",
                &self.workload_identity.as_ref().map(|_| "<source>"),
            )
            .field("enterprise", &self.enterprise)
            .finish_non_exhaustive()
    }
}

/// `HTTP 400 invalid_grant ("…")` for a refused refresh.
fn refusal(status: u16, error: &str, description: Option<&str>) -> String {
    let mut s = match status {
        0 => error.to_owned(),
        _ => format!("HTTP {status} {error}"),
    };
    if let Some(d) = description {
        s.push_str(&format!(" ({d:?})"));
    }
    s
}

/// Why authorization failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No authorization server could be found for the resource.
    #[error("no authorization server found for {resource}: {detail}")]
    Discovery {
        /// The MCP endpoint.
        resource: String,
        /// What was tried.
        detail: String,
    },
    /// A metadata, registration or token document is unusable.
    #[error("unusable document from {url}: {reason}")]
    Metadata {
        /// Where it came from.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The authorization server's metadata names another issuer (RFC 8414
    /// §3.3): it must not be used.
    #[error("authorization server metadata names issuer {found}, expected {expected}")]
    IssuerMismatch {
        /// The issuer the metadata was fetched for.
        expected: String,
        /// The issuer it names.
        found: String,
    },
    /// The authorization server does not support PKCE with S256.
    #[error("authorization server {issuer} does not support PKCE S256 (code_challenge_methods_supported); refusing to authorize")]
    PkceUnsupported {
        /// The server.
        issuer: String,
    },
    /// An authorization URL is plain HTTP to a non-loopback host.
    #[error("refusing insecure authorization URL {url} (HTTPS is required except on loopback)")]
    InsecureUrl {
        /// The URL.
        url: String,
    },
    /// The protected-resource metadata is for another resource.
    #[error("protected resource metadata is for {found}, not for {expected}")]
    ResourceMismatch {
        /// The MCP endpoint.
        expected: String,
        /// The resource the metadata names.
        found: String,
    },
    /// The client could not be registered.
    #[error("client registration failed: {0}")]
    Registration(String),
    /// A user must approve in a browser, and the flow is not interactive.
    #[error("authorization requires a user: log in first (e.g. `mcpwire --url <url> --login`)")]
    InteractionRequired,
    /// The token endpoint refused the stored refresh token (it was
    /// revoked, rotated away or expired), and the flow is not interactive:
    /// a user must log in again.
    #[error("the authorization server refused the refresh: {}; log in again (e.g. `mcpwire --url <url> --login`)", refusal(*status, error, description.as_deref()))]
    RefreshRefused {
        /// The HTTP status (0: the exchange itself failed).
        status: u16,
        /// The endpoint's `error` code (`invalid_grant` for a revoked or
        /// spent refresh token), or what went wrong.
        error: String,
        /// The endpoint's `error_description`.
        description: Option<String>,
    },
    /// The authorization server or the user refused.
    #[error("authorization refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Denied {
        /// The `error` code.
        error: String,
        /// The `error_description`.
        description: Option<String>,
    },
    /// The redirect does not belong to this authorization (state or issuer
    /// mismatch, no code).
    #[error("invalid authorization response: {0}")]
    InvalidRedirect(String),
    /// The token endpoint refused.
    #[error("token request failed: HTTP {status}: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Token {
        /// The HTTP status.
        status: u16,
        /// The `error` code, or the body's start.
        error: String,
        /// The `error_description`.
        description: Option<String>,
    },
    /// An exchange with the authorization server failed or timed out.
    #[error("authorization request to {url} failed: {message}")]
    Exchange {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
    },
    /// The user did not complete the authorization in time, or the
    /// application gave up on it.
    #[error("authorization not completed: {0}")]
    Abandoned(String),
    /// The server kept refusing after this many authorizations in a row.
    #[error("still unauthorized after {0} authorization attempts; giving up")]
    TooManyAttempts(u32),
    /// The configuration cannot work (e.g. client credentials without a
    /// client, no random numbers).
    #[error("authorization not possible: {0}")]
    Config(String),
}
