//! Request encoding: a validated HTTP/1.1 request head (and body) into bytes.

use super::{is_token, Http1Error};
use crate::codec::preview;

/// An HTTP/1.1 request to encode.
///
/// The codec writes `Host` from [`Request::host`] and `Content-Length` from
/// [`Request::body`] itself, and never sends a chunked body: a caller header
/// named `Host`, `Content-Length` or `Transfer-Encoding` (any case) is
/// rejected with [`Http1Error::ReservedHeader`] rather than silently
/// replaced. Everything else (`Accept`, `Content-Type`, `Connection`, ...)
/// is written as given, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The method, e.g. `POST`; must be an RFC 9110 token (case-sensitive:
    /// `HEAD` and `head` are different methods).
    pub method: String,
    /// The request-target: origin-form (`/path?query`, starting with `/`),
    /// `*`, absolute-form (`http://host/path`, to a proxy) or, for
    /// `CONNECT` only, authority-form (`host:port`); visible ASCII only
    /// (percent-encode the rest).
    pub target: String,
    /// The `Host` header value: `host[:port]` (IPv6 in brackets).
    pub host: String,
    /// Further headers, written in order after `Host`.
    pub headers: Vec<(String, String)>,
    /// The body. `Some` always gets a `Content-Length`; `None` gets
    /// `Content-Length: 0` for `POST`, `PUT` and `PATCH`, nothing otherwise.
    pub body: Option<Vec<u8>>,
}

impl Request {
    /// A request without extra headers or body.
    pub fn new(
        method: impl Into<String>,
        target: impl Into<String>,
        host: impl Into<String>,
    ) -> Self {
        Self {
            method: method.into(),
            target: target.into(),
            host: host.into(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// Adds a header (builder style).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body (builder style).
    #[must_use]
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Checks method, target, host and headers without writing anything.
    pub fn validate(&self) -> Result<(), Http1Error> {
        if !is_token(self.method.as_bytes()) {
            return Err(Http1Error::InvalidMethod(preview(
                self.method.as_bytes(),
                64,
            )));
        }
        if !valid_target(self.target.as_bytes(), self.method == "CONNECT") {
            return Err(Http1Error::InvalidTarget(preview(
                self.target.as_bytes(),
                64,
            )));
        }
        if self.host.is_empty() || !self.host.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Http1Error::InvalidHost(preview(self.host.as_bytes(), 64)));
        }
        for (name, value) in &self.headers {
            if !is_token(name.as_bytes()) {
                return Err(Http1Error::InvalidHeaderName(preview(name.as_bytes(), 64)));
            }
            if ["host", "content-length", "transfer-encoding"]
                .iter()
                .any(|r| name.eq_ignore_ascii_case(r))
            {
                return Err(Http1Error::ReservedHeader(name.clone()));
            }
            if !value.bytes().all(valid_value_byte) {
                return Err(Http1Error::InvalidHeaderValue { name: name.clone() });
            }
        }
        Ok(())
    }

    /// Appends the request head (request line, `Host`, the headers,
    /// `Content-Length` when due, blank line) to `out`, but not the body:
    /// for callers that write the body separately. On error nothing is
    /// appended.
    pub fn encode_head(&self, out: &mut Vec<u8>) -> Result<(), Http1Error> {
        self.validate()?;
        let extra: usize = self
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 4)
            .sum();
        out.reserve(self.method.len() + self.target.len() + self.host.len() + extra + 64);
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(self.host.as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        let length = match &self.body {
            Some(body) => Some(body.len()),
            None if matches!(self.method.as_str(), "POST" | "PUT" | "PATCH") => Some(0),
            None => None,
        };
        if let Some(length) = length {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(length.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Appends the whole request (head and body) to `out`. On error nothing
    /// is appended.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Http1Error> {
        self.encode_head(out)?;
        if let Some(body) = &self.body {
            out.extend_from_slice(body);
        }
        Ok(())
    }
}

/// Origin-form (`/` then visible ASCII), asterisk-form (`*`),
/// absolute-form (`http://` or `https://` then visible ASCII) or, for
/// `CONNECT`, authority-form (`host:port`, no `/`, `?`, `#` or `@`).
fn valid_target(t: &[u8], connect: bool) -> bool {
    let visible = t.iter().all(|b| b.is_ascii_graphic());
    if connect {
        return visible
            && !t.is_empty()
            && !t.iter().any(|b| matches!(b, b'/' | b'?' | b'#' | b'@'))
            && t.iter().rposition(|&b| b == b':').is_some_and(|i| {
                i > 0 && i + 1 < t.len() && t[i + 1..].iter().all(u8::is_ascii_digit)
            });
    }
    match t {
        b"*" => true,
        [b'/', ..] => visible,
        _ => {
            let lower = t.to_ascii_lowercase();
            (lower.starts_with(b"http://") || lower.starts_with(b"https://")) && visible
        }
    }
}

/// RFC 9110 field-value bytes: visible ASCII, SP, HTAB and obs-text; no
/// CR, LF, NUL or other control bytes.
fn valid_value_byte(b: u8) -> bool {
    FIELD_VALUE[usize::from(b)]
}

/// [`valid_value_byte`] for each byte (a table: every header value of
/// every request is checked byte by byte).
const FIELD_VALUE: [bool; 256] =
    crate::codec::byte_table!(|c| c == b'\t' || c == b' ' || c.is_ascii_graphic() || c >= 0x80);

#[cfg(test)]
mod tests {
    use super::*;

    /// The table says what the RFC's definition says, for every byte.
    #[test]
    fn the_field_value_table_is_the_definition() {
        for b in 0..=255u8 {
            let want = b == b'\t' || b == b' ' || b.is_ascii_graphic() || b >= 0x80;
            assert_eq!(valid_value_byte(b), want, "{b:#04x}");
        }
    }

    fn encode(req: &Request) -> Result<String, Http1Error> {
        let mut out = b"prefix".to_vec();
        let result = req.encode(&mut out);
        if result.is_err() {
            assert_eq!(out, b"prefix", "nothing written on error");
        }
        result.map(|()| String::from_utf8(out[6..].to_vec()).unwrap())
    }

    #[test]
    fn get_without_body_has_no_content_length() {
        let req = Request::new("GET", "/sse?x=1", "[::1]:8080")
            .with_header("Accept", "text/event-stream");
        assert_eq!(
            encode(&req).unwrap(),
            "GET /sse?x=1 HTTP/1.1\r\nHost: [::1]:8080\r\nAccept: text/event-stream\r\n\r\n"
        );
    }

    #[test]
    fn post_and_put_without_body_get_zero_length() {
        for m in ["POST", "PUT", "PATCH"] {
            let out = encode(&Request::new(m, "/", "h")).unwrap();
            assert!(out.ends_with("Content-Length: 0\r\n\r\n"), "{out}");
        }
        let out = encode(&Request::new("DELETE", "*", "h")).unwrap();
        assert_eq!(out, "DELETE * HTTP/1.1\r\nHost: h\r\n\r\n");
    }

    #[test]
    fn head_only() {
        let req = Request::new("POST", "/", "h").with_body(b"abc".to_vec());
        let mut out = Vec::new();
        req.encode_head(&mut out).unwrap();
        assert_eq!(
            out,
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n"
        );
    }

    #[test]
    fn proxy_forms() {
        let req = Request::new("CONNECT", "mcp.example:443", "mcp.example:443")
            .with_header("Proxy-Authorization", "Basic dTpw");
        assert_eq!(
            encode(&req).unwrap(),
            "CONNECT mcp.example:443 HTTP/1.1\r\nHost: mcp.example:443\r\n\
             Proxy-Authorization: Basic dTpw\r\n\r\n"
        );
        let req = Request::new("CONNECT", "[::1]:8443", "[::1]:8443");
        assert!(encode(&req).is_ok());
        let req = Request::new(
            "POST",
            "http://mcp.example:8080/mcp?x=1",
            "mcp.example:8080",
        );
        assert!(encode(&req)
            .unwrap()
            .starts_with("POST http://mcp.example:8080/mcp?x=1 HTTP/1.1\r\n"));
        for bad in [
            "h",
            "h:",
            ":1",
            "h:x",
            "/p",
            "h:1/p",
            "u@h:1",
            "h :1",
            "http://h:1",
        ] {
            assert!(
                matches!(
                    encode(&Request::new("CONNECT", bad, "h")),
                    Err(Http1Error::InvalidTarget(_))
                ),
                "{bad}"
            );
        }
        // Authority-form is for CONNECT only.
        assert!(encode(&Request::new("GET", "h:1", "h")).is_err());
        assert!(encode(&Request::new("GET", "ftp://h/", "h")).is_err());
    }

    #[test]
    fn rejections() {
        let bad = |r: Request| encode(&r).unwrap_err();
        assert!(matches!(
            bad(Request::new("", "/", "h")),
            Http1Error::InvalidMethod(_)
        ));
        assert!(matches!(
            bad(Request::new("G T", "/", "h")),
            Http1Error::InvalidMethod(_)
        ));
        assert!(matches!(
            bad(Request::new("GET", "", "h")),
            Http1Error::InvalidTarget(_)
        ));
        assert!(matches!(
            bad(Request::new("GET", "x", "h")),
            Http1Error::InvalidTarget(_)
        ));
        assert!(matches!(
            bad(Request::new("GET", "/a b", "h")),
            Http1Error::InvalidTarget(_)
        ));
        assert!(matches!(
            bad(Request::new("GET", "**", "h")),
            Http1Error::InvalidTarget(_)
        ));
        assert!(matches!(
            bad(Request::new("GET", "/é", "h")),
            Http1Error::InvalidTarget(_)
        ));
        assert!(matches!(
            bad(Request::new("GET", "/", "")),
            Http1Error::InvalidHost(_)
        ));
        assert!(matches!(
            bad(Request::new("GET", "/", "h\r\nX: y")),
            Http1Error::InvalidHost(_)
        ));
        let r = || Request::new("GET", "/", "h");
        assert!(matches!(
            bad(r().with_header("A\r\nB", "v")),
            Http1Error::InvalidHeaderName(_)
        ));
        assert!(matches!(
            bad(r().with_header("", "v")),
            Http1Error::InvalidHeaderName(_)
        ));
        assert!(matches!(
            bad(r().with_header("A", "v\r\nB: x")),
            Http1Error::InvalidHeaderValue { .. }
        ));
        assert!(matches!(
            bad(r().with_header("A", "v\0")),
            Http1Error::InvalidHeaderValue { .. }
        ));
        assert!(matches!(
            bad(r().with_header("A", "v\x7f")),
            Http1Error::InvalidHeaderValue { .. }
        ));
        for name in ["host", "Content-Length", "TRANSFER-ENCODING"] {
            assert_eq!(
                bad(r().with_header(name, "1")),
                Http1Error::ReservedHeader(name.into())
            );
        }
        // HTAB, SP and non-ASCII are fine in values.
        assert!(encode(&r().with_header("A", "x\ty é")).is_ok());
    }
}
