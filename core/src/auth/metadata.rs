//! The two discovery documents (RFC 9728 protected-resource metadata, RFC
//! 8414 / OpenID Connect authorization-server metadata), where to look for
//! them, and what makes one unacceptable.

use serde::Deserialize;

use super::wire::{is_secure, origin_string, trimmed_path};
use super::AuthError;
use crate::exchange::HttpUrl;

/// RFC 9728 protected-resource metadata (the fields a client uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ResourceMetadata {
    /// The resource identifier.
    #[serde(default)]
    pub resource: Option<String>,
    /// Issuer identifiers of the authorization servers.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes the resource uses.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 authorization-server metadata (the fields a client uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ServerMetadata {
    /// The issuer identifier.
    #[serde(default)]
    pub issuer: Option<String>,
    /// Where the user agent is sent.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where codes and refresh tokens are exchanged.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// RFC 7591 dynamic registration, if offered.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// Scopes the server knows.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// Response types (`code` must be there when the list is given).
    #[serde(default)]
    pub response_types_supported: Option<Vec<String>>,
    /// Grant types (RFC 8414 default: authorization_code and implicit).
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    /// PKCE methods; `S256` must be listed.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Client authentication methods at the token endpoint (RFC 8414
    /// default: `client_secret_basic`).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// Client ID Metadata Documents accepted as `client_id`.
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
    /// RFC 9207: the authorization response carries `iss`.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: Option<bool>,
    /// RFC 9449: the JWS algorithms accepted in DPoP proofs.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

impl ServerMetadata {
    /// The token endpoint authentication methods, with the RFC default.
    pub fn auth_methods(&self) -> Vec<String> {
        self.token_endpoint_auth_methods_supported
            .clone()
            .unwrap_or_else(|| vec!["client_secret_basic".to_owned()])
    }
}

/// Where to look for the protected-resource metadata of `resource` when the
/// challenge names none: the path-aware well-known URL, then the root one
/// (RFC 9728 §3.1).
pub fn resource_metadata_urls(resource: &HttpUrl) -> Vec<String> {
    let origin = origin_string(resource);
    let path = trimmed_path(resource);
    let mut urls = Vec::with_capacity(2);
    if !path.is_empty() {
        urls.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    urls
}

/// Where to look for an authorization server's metadata, in the order the
/// MCP specification gives: RFC 8414 path-inserted, OpenID Connect
/// path-inserted, OpenID Connect path-appended (the last two collapse for
/// an issuer without a path).
pub fn server_metadata_urls(issuer: &HttpUrl) -> Vec<String> {
    let origin = origin_string(issuer);
    let path = trimmed_path(issuer);
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Parses a URL that authorization traffic will use: absolute HTTP(S), and
/// HTTPS unless the host is a loopback one.
pub fn secure_url(what: &str, url: &str) -> Result<HttpUrl, AuthError> {
    let parsed = HttpUrl::parse(url).map_err(|e| AuthError::Metadata {
        url: url.to_owned(),
        reason: format!("{what} is not a usable URL: {}", e.reason),
    })?;
    if !is_secure(&parsed) {
        return Err(AuthError::InsecureUrl {
            url: url.to_owned(),
        });
    }
    Ok(parsed)
}

/// Whether two issuer identifiers are the same URL (an empty path and `/`
/// are the same; nothing else is forgiven).
pub fn same_issuer(a: &str, b: &str) -> bool {
    a.strip_suffix('/').unwrap_or(a) == b.strip_suffix('/').unwrap_or(b)
}

/// Whether the metadata's `resource` covers the MCP endpoint the client
/// talks to: same origin, and its path is the endpoint's path or a parent
/// of it (at a segment boundary).
pub fn resource_covers(resource: &str, endpoint: &HttpUrl) -> bool {
    let Ok(r) = HttpUrl::parse(resource) else {
        return false;
    };
    if !r.same_origin(endpoint) {
        return false;
    }
    let rp = trimmed_path(&r);
    let ep = trimmed_path(endpoint);
    ep == rp || (ep.starts_with(rp) && ep.as_bytes().get(rp.len()) == Some(&b'/'))
}

/// Checks an authorization server's metadata for use with the
/// authorization-code grant: issuer, endpoints, PKCE, response type.
pub fn check_server_metadata(
    doc_url: &str,
    expected_issuer: Option<&str>,
    m: &ServerMetadata,
    need_authorize: bool,
) -> Result<(), AuthError> {
    if let Some(expected) = expected_issuer {
        match &m.issuer {
            Some(found) if same_issuer(found, expected) => {}
            found => {
                return Err(AuthError::IssuerMismatch {
                    expected: expected.to_owned(),
                    found: found.clone().unwrap_or_else(|| "(none)".into()),
                })
            }
        }
    }
    let token = m
        .token_endpoint
        .as_deref()
        .ok_or_else(|| AuthError::Metadata {
            url: doc_url.to_owned(),
            reason: "no token_endpoint".into(),
        })?;
    secure_url("token_endpoint", token)?;
    if let Some(r) = &m.registration_endpoint {
        secure_url("registration_endpoint", r)?;
    }
    if need_authorize {
        let auth = m
            .authorization_endpoint
            .as_deref()
            .ok_or_else(|| AuthError::Metadata {
                url: doc_url.to_owned(),
                reason: "no authorization_endpoint".into(),
            })?;
        secure_url("authorization_endpoint", auth)?;
        if !m
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|l| l.iter().any(|x| x == "S256"))
        {
            return Err(AuthError::PkceUnsupported {
                issuer: m.issuer.clone().unwrap_or_else(|| doc_url.to_owned()),
            });
        }
        if let Some(types) = &m.response_types_supported {
            if !types.iter().any(|t| t == "code") {
                return Err(AuthError::Metadata {
                    url: doc_url.to_owned(),
                    reason: "response_types_supported does not list `code`".into(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> HttpUrl {
        HttpUrl::parse(s).unwrap()
    }

    #[test]
    fn resource_metadata_candidates() {
        assert_eq!(
            resource_metadata_urls(&u("https://h.example/a/mcp")),
            [
                "https://h.example/.well-known/oauth-protected-resource/a/mcp",
                "https://h.example/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            resource_metadata_urls(&u("http://localhost:8080/")),
            ["http://localhost:8080/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn server_metadata_candidates() {
        assert_eq!(
            server_metadata_urls(&u("https://as.example/tenant1")),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            server_metadata_urls(&u("https://as.example")),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn resource_coverage() {
        let ep = u("https://h.example/api/mcp");
        assert!(resource_covers("https://h.example/api/mcp", &ep));
        assert!(resource_covers("https://h.example/api/mcp/", &ep));
        assert!(resource_covers("https://h.example/api", &ep));
        assert!(resource_covers("https://h.example", &ep));
        assert!(!resource_covers("https://h.example/ap", &ep));
        assert!(!resource_covers("https://evil.example/api/mcp", &ep));
        assert!(!resource_covers("http://h.example/api/mcp", &ep));
        assert!(!resource_covers("https://h.example:444/api/mcp", &ep));
        assert!(!resource_covers("not a url", &ep));
    }

    #[test]
    fn insecure_endpoints_are_refused_off_loopback() {
        assert!(secure_url("x", "https://as.example/token").is_ok());
        assert!(secure_url("x", "http://127.0.0.1:9/token").is_ok());
        assert!(secure_url("x", "http://localhost/token").is_ok());
        assert!(matches!(
            secure_url("x", "http://as.example/token"),
            Err(AuthError::InsecureUrl { .. })
        ));
        assert!(matches!(
            secure_url("x", "ftp://as.example/"),
            Err(AuthError::Metadata { .. })
        ));
    }

    #[test]
    fn metadata_checks() {
        let good = ServerMetadata {
            issuer: Some("https://as.example".into()),
            authorization_endpoint: Some("https://as.example/authorize".into()),
            token_endpoint: Some("https://as.example/token".into()),
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            ..Default::default()
        };
        assert!(check_server_metadata("d", Some("https://as.example/"), &good, true).is_ok());
        let wrong = ServerMetadata {
            issuer: Some("https://as.example/oauth".into()),
            ..good.clone()
        };
        assert!(matches!(
            check_server_metadata("d", Some("https://as.example"), &wrong, true),
            Err(AuthError::IssuerMismatch { .. })
        ));
        let plain = ServerMetadata {
            code_challenge_methods_supported: Some(vec!["plain".into()]),
            ..good.clone()
        };
        assert!(matches!(
            check_server_metadata("d", None, &plain, true),
            Err(AuthError::PkceUnsupported { .. })
        ));
        // Without PKCE methods a client-credentials client still works.
        assert!(check_server_metadata("d", None, &plain, false).is_ok());
        let absent = ServerMetadata {
            code_challenge_methods_supported: None,
            ..good.clone()
        };
        assert!(check_server_metadata("d", None, &absent, true).is_err());
        let http = ServerMetadata {
            token_endpoint: Some("http://as.example/token".into()),
            ..good
        };
        assert!(matches!(
            check_server_metadata("d", None, &http, true),
            Err(AuthError::InsecureUrl { .. })
        ));
    }
}
