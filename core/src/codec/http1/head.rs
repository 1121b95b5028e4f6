//! Response heads: parsing with httparse, header look-ups, body framing
//! (RFC 9112 §6.3) and keep-alive (§9.3).

use super::{list_elements, trim_ows, Http1Error, Http1Limits};
use crate::codec::preview;

/// A final (non-1xx) response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code, 100..=599 (never 1xx here: interim responses are
    /// skipped by the decoder).
    pub status: u16,
    /// The reason phrase (may be empty).
    pub reason: String,
    /// The minor version: 1 for HTTP/1.1, 0 for HTTP/1.0.
    pub version: u8,
    /// The header lines in order, as received: names as sent (compare them
    /// case-insensitively, or use [`ResponseHead::header`]), values with
    /// surrounding whitespace trimmed and obsolete line folding replaced by
    /// spaces. Values are bytes: HTTP allows non-UTF-8 (obs-text).
    pub headers: Vec<(String, Vec<u8>)>,
}

impl ResponseHead {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// The first value of header `name` (case-insensitive), if it is UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Every value of header `name` (case-insensitive), in order.
    pub fn header_all<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s [u8]> + 's {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// The raw `Content-Type` value, e.g. `text/event-stream; charset=utf-8`.
    pub fn content_type(&self) -> Option<&str> {
        self.header_str("content-type")
    }

    /// The media type of `Content-Type` without parameters, lowercased:
    /// `application/json`, `text/event-stream`, ...
    pub fn media_type(&self) -> Option<String> {
        let ct = self.content_type()?;
        let essence = ct.split(';').next().unwrap_or("").trim_matches([' ', '\t']);
        Some(essence.to_ascii_lowercase())
    }

    /// True for 2xx statuses.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// True if a `Connection` header lists `token` (case-insensitive).
    pub fn has_connection_option(&self, token: &str) -> bool {
        self.header_all("connection")
            .flat_map(list_elements)
            .any(|e| e.eq_ignore_ascii_case(token.as_bytes()))
    }
}

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body at all (HEAD request, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Until the connection closes.
    Close,
}

/// Parses a complete head (`bytes` ends right after its blank line, and does
/// not start with an empty line).
pub(super) fn parse(bytes: &[u8], limits: &Http1Limits) -> Result<ResponseHead, Http1Error> {
    // A header line takes at least 3 bytes (`a:\n`), so this never runs out
    // before `max_headers` does, and a huge limit allocates nothing silly.
    let slots = limits.max_headers.min(bytes.len() / 2 + 1);
    let mut headers = vec![httparse::EMPTY_HEADER; slots];
    let mut response = httparse::Response::new(&mut headers);
    let mut config = httparse::ParserConfig::default();
    config.allow_obsolete_multiline_headers_in_responses(true);
    match config.parse_response(&mut response, bytes) {
        Ok(httparse::Status::Complete(n)) if n == bytes.len() => {}
        Ok(_) => return Err(invalid(bytes, "head ends at an unexpected place")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Http1Error::TooManyHeaders {
                limit: limits.max_headers,
            })
        }
        Err(e) => return Err(invalid(bytes, &e.to_string())),
    }
    let status = response.code.unwrap_or(0);
    if !(100..=599).contains(&status) {
        return Err(invalid(bytes, "status code out of range"));
    }
    let headers = response
        .headers
        .iter()
        .map(|h| {
            let value = trim_ows(h.value)
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect();
            (h.name.to_owned(), value)
        })
        .collect();
    Ok(ResponseHead {
        status,
        reason: response.reason.unwrap_or("").to_owned(),
        version: response.version.unwrap_or(1),
        headers,
    })
}

fn invalid(head: &[u8], what: &str) -> Http1Error {
    Http1Error::InvalidHead(format!("{what} in {:?}", preview(head, 80)))
}

/// What the request was, as far as the response's framing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// `HEAD`: no body, whatever the headers say.
    Head,
    /// `CONNECT`: a 2xx has no body; the connection is a tunnel after it.
    Connect,
    /// Anything else.
    Other,
}

impl Asked {
    pub(super) fn of(method: &str) -> Asked {
        match method {
            "HEAD" => Asked::Head,
            "CONNECT" => Asked::Connect,
            _ => Asked::Other,
        }
    }
}

/// Decides the body framing (RFC 9112 §6.3) and whether the connection can
/// be reused afterwards (§9.3).
pub(super) fn framing(head: &ResponseHead, asked: Asked) -> Result<(Framing, bool), Http1Error> {
    if asked == Asked::Connect && head.is_success() {
        // §6.3 rule 2: the tunnel starts right after the head; the
        // connection no longer carries HTTP.
        return Ok((Framing::None, false));
    }
    let mut keep_alive = if head.version >= 1 {
        !head.has_connection_option("close")
    } else {
        head.has_connection_option("keep-alive") && !head.has_connection_option("close")
    };
    if asked == Asked::Head || head.status == 204 || head.status == 304 {
        return Ok((Framing::None, keep_alive));
    }
    let mut codings = head
        .header_all("transfer-encoding")
        .flat_map(list_elements)
        .peekable();
    if codings.peek().is_some() {
        let codings: Vec<&[u8]> = codings.collect();
        if codings.len() != 1 || !codings[0].eq_ignore_ascii_case(b"chunked") {
            let all: Vec<String> = codings.iter().map(|c| preview(c, 32)).collect();
            return Err(Http1Error::UnsupportedTransferEncoding(all.join(", ")));
        }
        // Chunked wins over Content-Length, but the pair smells of request
        // smuggling, and an HTTP/1.0 peer should not send chunked at all:
        // read this body, then close (RFC 9112 §6.1, §6.3).
        if head.header("content-length").is_some() || head.version == 0 {
            keep_alive = false;
        }
        return Ok((Framing::Chunked, keep_alive));
    }
    let mut length = None;
    for value in head.header_all("content-length") {
        // `Content-Length: 5, 5` is a list of identical values too.
        let mut any = false;
        for element in value.split(|&b| b == b',').map(trim_ows) {
            any = true;
            let n = parse_decimal(element)
                .ok_or_else(|| Http1Error::InvalidContentLength(preview(value, 32)))?;
            match length {
                Some(prev) if prev != n => return Err(Http1Error::ConflictingContentLength),
                _ => length = Some(n),
            }
        }
        if !any {
            return Err(Http1Error::InvalidContentLength(preview(value, 32)));
        }
    }
    match length {
        Some(n) => Ok((Framing::Length(n), keep_alive)),
        None => Ok((Framing::Close, false)),
    }
}

/// A non-empty run of ASCII digits that fits in a u64.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(version: u8, status: u16, headers: &[(&str, &str)]) -> ResponseHead {
        ResponseHead {
            status,
            reason: String::new(),
            version,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn decimal() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"0012"), Some(12));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_decimal(b"18446744073709551616"), None);
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"+1"), None);
        assert_eq!(parse_decimal(b"1 2"), None);
    }

    #[test]
    fn framing_rules() {
        let f = |h: &ResponseHead| framing(h, Asked::Other);
        assert_eq!(f(&head(1, 200, &[])), Ok((Framing::Close, false)));
        assert_eq!(
            f(&head(1, 200, &[("Content-Length", "5")])),
            Ok((Framing::Length(5), true))
        );
        assert_eq!(
            f(&head(
                1,
                200,
                &[("content-length", "5, 5"), ("Content-Length", "5")]
            )),
            Ok((Framing::Length(5), true))
        );
        assert_eq!(
            f(&head(
                1,
                200,
                &[("content-length", "5"), ("Content-Length", "6")]
            )),
            Err(Http1Error::ConflictingContentLength)
        );
        assert!(matches!(
            f(&head(1, 200, &[("content-length", "5,")])),
            Err(Http1Error::InvalidContentLength(_))
        ));
        assert!(matches!(
            f(&head(1, 200, &[("content-length", "")])),
            Err(Http1Error::InvalidContentLength(_))
        ));
        assert_eq!(
            f(&head(1, 200, &[("Transfer-Encoding", "Chunked")])),
            Ok((Framing::Chunked, true))
        );
        assert_eq!(
            f(&head(
                1,
                200,
                &[("Transfer-Encoding", "chunked"), ("Content-Length", "x")]
            )),
            Ok((Framing::Chunked, false))
        );
        for te in [
            "gzip, chunked",
            "chunked, chunked",
            "chunked, gzip",
            "identity",
        ] {
            assert!(matches!(
                f(&head(1, 200, &[("Transfer-Encoding", te)])),
                Err(Http1Error::UnsupportedTransferEncoding(_))
            ));
        }
        assert_eq!(
            f(&head(1, 204, &[("Content-Length", "x")])),
            Ok((Framing::None, true))
        );
        assert_eq!(
            f(&head(1, 304, &[("Connection", "close")])),
            Ok((Framing::None, false))
        );
        assert_eq!(
            framing(&head(1, 200, &[("Content-Length", "9")]), Asked::Head),
            Ok((Framing::None, true))
        );
        // A 2xx to CONNECT is a tunnel, whatever its headers; any other
        // answer has the usual framing.
        for status in [200, 204, 299] {
            assert_eq!(
                framing(&head(1, status, &[("Content-Length", "9")]), Asked::Connect),
                Ok((Framing::None, false))
            );
        }
        assert_eq!(
            framing(&head(1, 407, &[("Content-Length", "9")]), Asked::Connect),
            Ok((Framing::Length(9), true))
        );
        assert_eq!(
            f(&head(0, 200, &[("Content-Length", "1")])),
            Ok((Framing::Length(1), false))
        );
        assert_eq!(
            f(&head(
                0,
                200,
                &[("Content-Length", "1"), ("connection", "Keep-Alive")]
            )),
            Ok((Framing::Length(1), true))
        );
        assert_eq!(
            f(&head(
                1,
                200,
                &[("Content-Length", "1"), ("connection", "upgrade, CLOSE")]
            )),
            Ok((Framing::Length(1), false))
        );
    }

    #[test]
    fn media_type() {
        let h = head(
            1,
            200,
            &[("Content-Type", " Text/Event-Stream ; charset=utf-8")],
        );
        assert_eq!(h.media_type().as_deref(), Some("text/event-stream"));
        assert_eq!(
            h.header("CONTENT-TYPE"),
            Some(&b" Text/Event-Stream ; charset=utf-8"[..])
        );
        assert_eq!(head(1, 200, &[]).media_type(), None);
    }
}
