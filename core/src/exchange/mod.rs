//! The HTTP exchange vocabulary, a floor below both [`transport`] and
//! [`auth`]: one request and its response, as the driver performs it.
//!
//! ```text
//!   HttpRequest { exchange, method, url, headers, body, purpose, carries }
//!        │ driver performs it with any HTTP client
//!        ▼
//!   ResponseHead, body chunks, end | failure   (reported per ExchangeId)
//! ```
//!
//! Also here: [`HttpUrl`] (the absolute `http`/`https` URLs both floors
//! send to), the rule for following redirects as fetch does
//! ([`redirect`]), and `WWW-Authenticate` parsing ([`challenge`]), which
//! the transport reads to spot a step-up and the authorization flow reads
//! to find its metadata, and DPoP proofs ([`dpop`]), which both sign.
//! How an exchange reaches its server is decided here too: which proxy, if
//! any ([`proxy`]: the `*_PROXY` / `NO_PROXY` rules, pure), and the
//! `CONNECT` exchange that opens a tunnel through it ([`tunnel`]).
//!
//! [`transport`]: crate::transport
//! [`auth`]: crate::auth

pub mod challenge;
pub mod dpop;
pub mod proxy;
pub mod redirect;
pub mod tunnel;
pub mod url;

use std::fmt;

pub use crate::codec::http1::ResponseHead;
pub use proxy::{NoProxy, Proxies, ProxyEnv, ProxyError, ProxyUrl, Route};
pub use redirect::RedirectError;
pub use tunnel::{Tunnel, TunnelState};
pub use url::HttpUrl;

/// Identifies one HTTP exchange (request and its response) of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId(pub u64);

impl fmt::Display for ExchangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The HTTP methods the transports use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpMethod {
    /// Opens an SSE stream (listener, resumption, legacy stream).
    Get,
    /// Sends one JSON-RPC message.
    Post,
    /// Ends a session.
    Delete,
}

impl HttpMethod {
    /// `GET`, `POST`, `DELETE`.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Delete => "DELETE",
        }
    }
}

/// What an exchange is for; lets a driver pick a connection for it (a
/// long-lived stream deserves its own, a POST may reuse a pooled one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExchangePurpose {
    /// A POST carrying a request; its answer may be a long SSE stream.
    Request,
    /// A POST carrying a notification or response (expects 202).
    Notify,
    /// A GET for server-initiated messages (may stay open indefinitely).
    Listen,
    /// A GET resuming a request's stream with `Last-Event-ID`.
    Resume,
    /// The DELETE that ends a session.
    Close,
    /// Authorization traffic (metadata discovery, registration, tokens) to
    /// the authorization server or the resource's well-known URLs.
    Auth,
}

/// One HTTP request the driver must perform. Its `Debug` output hides
/// `Authorization` values and the bodies of authorization exchanges (codes,
/// secrets, tokens), so it may be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// Names the exchange in the inputs that report its response.
    pub exchange: ExchangeId,
    /// The method.
    pub method: HttpMethod,
    /// The absolute URL.
    pub url: HttpUrl,
    /// Headers, in order (the driver adds `Host`, `Content-Length` and
    /// connection management; nothing else).
    pub headers: Vec<(String, String)>,
    /// The body (empty for GET and DELETE).
    pub body: Vec<u8>,
    /// What it is for.
    pub purpose: ExchangePurpose,
    /// The request whose answer this exchange brings (the POST of a
    /// request, or the GET resuming its stream), by the id the
    /// application knows it by: a driver may perform the exchange on the
    /// thread or task that waits for that request.
    pub carries: Option<u64>,
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(n, v)| {
                if n.eq_ignore_ascii_case("authorization") {
                    (n.as_str(), "<redacted>")
                } else {
                    (n.as_str(), v.as_str())
                }
            })
            .collect();
        let body: &dyn fmt::Debug = if self.purpose == ExchangePurpose::Auth {
            &"<redacted>"
        } else {
            &String::from_utf8_lossy(&self.body)
        };
        f.debug_struct("HttpRequest")
            .field("exchange", &self.exchange)
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &headers)
            .field("body", body)
            .field("purpose", &self.purpose)
            .field("carries", &self.carries)
            .finish()
    }
}

impl HttpRequest {
    /// The value of a header set on this request.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
