//! Following an exchange's HTTP redirects as fetch does, once for every
//! transport: the rule, the hop count and the typed errors.
//!
//! ```text
//!  head 307/308 ─────────────────► same method, same body, same headers ─► Location
//!  head 301/302 ─ GET, DELETE ───► the same (fetch keeps the method)
//!               └ POST ──────────► MethodChange (fetch would send a GET)
//!  head 303 ───── GET ───────────► the same
//!               └ POST, DELETE ──► MethodChange
//!  no / unusable Location ► NoLocation / BadLocation · back to a URL of the chain ► Loop
//!  a sixth redirect ► TooMany · another origin ► CrossOrigin, unless allowed:
//!    then Authorization, Proxy-Authorization, Cookie and Mcp-Session-Id stay behind
//! ```
//!
//! A transport keeps a [`Redirects`] per exchange until its head arrives;
//! on a redirect status it asks [`Redirects::follow`] for the request to
//! send next (a new exchange) or for the reason not to.

use super::url::HttpUrl;
use super::{ExchangeId, HttpMethod, HttpRequest, ResponseHead};
use crate::codec::preview;

/// Redirects followed for one exchange at most (a sixth one is an error).
pub const MAX_REDIRECTS: usize = 5;

/// Headers that carry credentials or a session: never sent to an origin
/// other than the one they were meant for (lower case).
pub const CREDENTIAL_HEADERS: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "mcp-session-id",
];

/// Whether header `name` is one of [`CREDENTIAL_HEADERS`].
pub fn is_credential(name: &str) -> bool {
    CREDENTIAL_HEADERS
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

/// Whether `status` is a redirect fetch follows (301, 302, 303, 307, 308).
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Bytes of a `Location` quoted in an error.
const LOCATION_MAX: usize = 300;

/// Why a redirect was not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectError {
    /// The redirect has no `Location` header.
    #[error("HTTP {status} redirect from {from} without a Location header")]
    NoLocation {
        /// The redirect status.
        status: u16,
        /// The URL that answered it.
        from: HttpUrl,
    },
    /// The `Location` is not an `http(s)` URL we can send to.
    #[error("HTTP {status} redirect from {from} to an unusable Location {location:?}: {reason}")]
    BadLocation {
        /// The redirect status.
        status: u16,
        /// The URL that answered it.
        from: HttpUrl,
        /// The `Location` as sent (shortened).
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Following would change the method (a POST or DELETE into a GET).
    #[error(
        "HTTP {status} from {from} redirects the {} to {location}; following it would turn \
         the {} into a GET (only 307 and 308 keep the method): use {location} as the server URL",
        method.as_str(), method.as_str()
    )]
    MethodChange {
        /// The redirect status.
        status: u16,
        /// The method of the redirected request.
        method: HttpMethod,
        /// The URL that answered it.
        from: HttpUrl,
        /// Where it points.
        location: HttpUrl,
    },
    /// The redirect leads to another origin (scheme, host or port) and
    /// that is not allowed.
    #[error(
        "HTTP {status} from {from} redirects to another origin, {to}: refused (allow \
         cross-origin redirects to follow it; Authorization and Mcp-Session-Id are not sent there)"
    )]
    CrossOrigin {
        /// The redirect status.
        status: u16,
        /// The URL that answered it.
        from: HttpUrl,
        /// Where it points.
        to: HttpUrl,
    },
    /// The redirect points back to a URL of the chain.
    #[error("redirect loop: HTTP {status} from {from} back to {to}")]
    Loop {
        /// The redirect status.
        status: u16,
        /// The URL that answered it.
        from: HttpUrl,
        /// Where it points (already visited).
        to: HttpUrl,
    },
    /// More than [`MAX_REDIRECTS`] redirects.
    #[error("too many redirects: more than {limit} (the last from {from} to {to})")]
    TooMany {
        /// [`MAX_REDIRECTS`].
        limit: usize,
        /// The URL that answered the redirect not followed.
        from: HttpUrl,
        /// Where it points.
        to: HttpUrl,
    },
}

/// One exchange's request, kept until its head arrives so that it can be
/// sent again where a redirect points, with the URLs it was redirected
/// from.
#[derive(Debug, Clone)]
pub struct Redirects {
    /// The request as last sent.
    request: HttpRequest,
    /// The URLs redirected from, in order (at most [`MAX_REDIRECTS`]).
    from: Vec<HttpUrl>,
}

impl Redirects {
    /// Keeps `request` (as sent).
    pub fn new(request: HttpRequest) -> Self {
        Redirects {
            request,
            from: Vec::new(),
        }
    }

    /// The URL the request was last sent to.
    pub fn url(&self) -> &HttpUrl {
        &self.request.url
    }

    /// How many redirects were followed.
    pub fn hops(&self) -> usize {
        self.from.len()
    }

    /// `head` answered the request: if it is a redirect (see
    /// [`is_redirect`]), the request to send next as exchange `next`, or
    /// why not; `None` if it is not a redirect. Going to another origin
    /// needs `cross_origin`, and drops the [`CREDENTIAL_HEADERS`].
    pub fn follow(
        &mut self,
        head: &ResponseHead,
        cross_origin: bool,
        next: ExchangeId,
    ) -> Option<Result<HttpRequest, RedirectError>> {
        if !is_redirect(head.status) {
            return None;
        }
        Some(self.next(head, cross_origin, next))
    }

    fn next(
        &mut self,
        head: &ResponseHead,
        cross_origin: bool,
        next: ExchangeId,
    ) -> Result<HttpRequest, RedirectError> {
        let status = head.status;
        let from = self.request.url.clone();
        let Some(raw) = head.header("location") else {
            return Err(RedirectError::NoLocation { status, from });
        };
        let bad = |reason: String| RedirectError::BadLocation {
            status,
            from: from.clone(),
            location: preview(raw, LOCATION_MAX),
            reason,
        };
        let text = std::str::from_utf8(raw).map_err(|_| bad("not UTF-8".into()))?;
        if text.trim().is_empty() {
            return Err(bad("empty".into()));
        }
        let to = from.join(text).map_err(|e| bad(e.reason.into()))?;
        let method = self.request.method;
        let keeps_method = match status {
            307 | 308 => true,
            301 | 302 => method != HttpMethod::Post,
            _ => method == HttpMethod::Get,
        };
        if !keeps_method {
            return Err(RedirectError::MethodChange {
                status,
                method,
                from,
                location: to,
            });
        }
        if to == from || self.from.contains(&to) {
            return Err(RedirectError::Loop { status, from, to });
        }
        if self.from.len() >= MAX_REDIRECTS {
            return Err(RedirectError::TooMany {
                limit: MAX_REDIRECTS,
                from,
                to,
            });
        }
        if !to.same_origin(&from) {
            if !cross_origin {
                return Err(RedirectError::CrossOrigin { status, from, to });
            }
            self.request.headers.retain(|(n, _)| !is_credential(n));
        }
        self.from.push(from);
        self.request.url = to;
        self.request.exchange = next;
        Ok(self.request.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::ExchangePurpose;

    fn post(url: &str) -> HttpRequest {
        HttpRequest {
            exchange: ExchangeId(0),
            method: HttpMethod::Post,
            url: HttpUrl::parse(url).unwrap(),
            headers: vec![
                ("Accept".into(), "application/json".into()),
                ("Authorization".into(), "Bearer t".into()),
                ("Mcp-Session-Id".into(), "s1".into()),
                ("Cookie".into(), "c=1".into()),
                ("X-Custom".into(), "kept".into()),
            ],
            body: b"{}".to_vec(),
            purpose: ExchangePurpose::Request,
            carries: Some(3),
        }
    }

    fn redirect(status: u16, location: Option<&[u8]>) -> ResponseHead {
        ResponseHead {
            status,
            reason: String::new(),
            version: 1,
            headers: location
                .map(|l| vec![("Location".to_owned(), l.to_vec())])
                .unwrap_or_default(),
        }
    }

    #[test]
    fn keeps_method_body_and_headers_and_resolves_relative_locations() {
        for status in [307, 308] {
            let mut r = Redirects::new(post("http://127.0.0.1:9/mcp"));
            let next = r
                .follow(&redirect(status, Some(b"/mcp/")), false, ExchangeId(7))
                .unwrap()
                .unwrap();
            assert_eq!(next.url.to_string(), "http://127.0.0.1:9/mcp/");
            assert_eq!(next.exchange, ExchangeId(7));
            assert_eq!(next.method, HttpMethod::Post);
            assert_eq!(next.body, b"{}");
            assert_eq!(next.headers, post("http://h/").headers);
            assert_eq!(
                (next.purpose, next.carries),
                (ExchangePurpose::Request, Some(3))
            );
            assert_eq!((r.hops(), r.url()), (1, &next.url));
        }
        assert!(Redirects::new(post("http://h/"))
            .follow(&redirect(200, None), false, ExchangeId(1))
            .is_none());
        assert!(Redirects::new(post("http://h/"))
            .follow(&redirect(304, None), false, ExchangeId(1))
            .is_none());
    }

    #[test]
    fn method_changing_redirects_are_refused_naming_the_location() {
        for status in [301, 302, 303] {
            let mut r = Redirects::new(post("http://h/mcp"));
            let e = r
                .follow(&redirect(status, Some(b"elsewhere")), false, ExchangeId(1))
                .unwrap()
                .unwrap_err();
            assert!(matches!(e, RedirectError::MethodChange { .. }), "{e:?}");
            let m = e.to_string();
            assert!(m.contains(&format!("HTTP {status}")), "{m}");
            assert!(m.contains("http://h/elsewhere"), "{m}");
            assert!(m.contains("POST into a GET"), "{m}");
        }
        // GET follows them all; DELETE keeps its method on 301/302 only.
        for (method, status, ok) in [
            (HttpMethod::Get, 301, true),
            (HttpMethod::Get, 302, true),
            (HttpMethod::Get, 303, true),
            (HttpMethod::Delete, 301, true),
            (HttpMethod::Delete, 303, false),
        ] {
            let mut req = post("http://h/mcp");
            req.method = method;
            let mut r = Redirects::new(req);
            let out = r
                .follow(&redirect(status, Some(b"/x")), false, ExchangeId(1))
                .unwrap();
            assert_eq!(out.is_ok(), ok, "{method:?} {status}");
        }
    }

    #[test]
    fn missing_and_unusable_locations_are_errors() {
        let mut r = Redirects::new(post("http://h/mcp"));
        let e = r
            .follow(&redirect(307, None), false, ExchangeId(1))
            .unwrap();
        assert!(matches!(
            e,
            Err(RedirectError::NoLocation { status: 307, .. })
        ));
        for bad in [
            &b""[..],
            b"  ",
            b"\xff\xfe",
            b"ftp://h/x",
            b"mailto:a@b",
            b"http://",
            b"/a b",
        ] {
            let mut r = Redirects::new(post("http://h/mcp"));
            let e = r
                .follow(&redirect(308, Some(bad)), false, ExchangeId(1))
                .unwrap();
            assert!(
                matches!(e, Err(RedirectError::BadLocation { .. })),
                "{bad:?}: {e:?}"
            );
            assert_eq!(r.hops(), 0);
        }
    }

    #[test]
    fn five_hops_at_most_and_loops_are_cut_short() {
        let mut r = Redirects::new(post("http://h/0"));
        for n in 1..=5 {
            let loc = format!("/{n}");
            let next = r
                .follow(&redirect(307, Some(loc.as_bytes())), false, ExchangeId(n))
                .unwrap()
                .unwrap();
            assert_eq!(next.url.path(), loc);
        }
        let e = r
            .follow(&redirect(307, Some(b"/6")), false, ExchangeId(6))
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(e, RedirectError::TooMany { limit: 5, .. }),
            "{e:?}"
        );
        let m = e.to_string();
        assert!(m.contains("http://h/5") && m.contains("http://h/6"), "{m}");

        let mut r = Redirects::new(post("http://h/a"));
        r.follow(&redirect(307, Some(b"/b")), false, ExchangeId(1))
            .unwrap()
            .unwrap();
        let e = r
            .follow(&redirect(307, Some(b"/a")), false, ExchangeId(2))
            .unwrap();
        assert!(matches!(e, Err(RedirectError::Loop { .. })), "{e:?}");
        let mut r = Redirects::new(post("http://h/a"));
        let e = r
            .follow(&redirect(308, Some(b"/a")), false, ExchangeId(1))
            .unwrap();
        assert!(matches!(e, Err(RedirectError::Loop { .. })), "{e:?}");
    }

    #[test]
    fn another_origin_is_refused_unless_allowed_and_then_gets_no_credentials() {
        for other in ["http://h:8/mcp", "https://h/mcp", "http://g/mcp", "//g/mcp"] {
            let mut r = Redirects::new(post("http://h/mcp"));
            let e = r
                .follow(&redirect(307, Some(other.as_bytes())), false, ExchangeId(1))
                .unwrap()
                .unwrap_err();
            let m = e.to_string();
            assert!(matches!(e, RedirectError::CrossOrigin { .. }), "{e:?}");
            assert!(
                m.contains("http://h/mcp") && m.contains("another origin"),
                "{m}"
            );
        }
        let mut r = Redirects::new(post("http://h/mcp"));
        let next = r
            .follow(
                &redirect(307, Some(b"http://g:81/mcp/")),
                true,
                ExchangeId(1),
            )
            .unwrap()
            .unwrap();
        assert_eq!(next.url.to_string(), "http://g:81/mcp/");
        let names: Vec<&str> = next.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["Accept", "X-Custom"]);
        // They do not come back on the way home.
        let back = r
            .follow(&redirect(307, Some(b"http://h/mcp/")), true, ExchangeId(2))
            .unwrap()
            .unwrap();
        assert_eq!(back.header("authorization"), None);
        // Same origin: everything is kept.
        let mut r = Redirects::new(post("http://h/mcp"));
        let next = r
            .follow(&redirect(307, Some(b"http://H:80/x")), false, ExchangeId(1))
            .unwrap()
            .unwrap();
        assert_eq!(next.header("authorization"), Some("Bearer t"));
        assert_eq!(next.header("mcp-session-id"), Some("s1"));
    }
}
