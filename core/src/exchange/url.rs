//! The small part of URLs an HTTP client needs: `http(s)://host[:port]/path?query`.
//!
//! Parsed strictly (ASCII hosts, no user info, no fragment sent), joined
//! with relative references per RFC 3986 §5.2 (legacy SSE `endpoint` events
//! carry one), and compared by origin. Kept here rather than pulling in a
//! full WHATWG URL crate: the adapters need host, port and request target,
//! nothing more.

use std::fmt;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain TCP, default port 80.
    Http,
    /// TLS, default port 443.
    Https,
}

impl Scheme {
    /// The default port.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// `http` / `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// An absolute `http`/`https` URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpUrl {
    scheme: Scheme,
    /// Lower-cased; IPv6 literals keep their brackets.
    host: String,
    port: u16,
    /// Path (always starting with `/`) and optional `?query`.
    target: String,
}

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL `{url}`: {reason}")]
pub struct UrlError {
    /// The URL (shortened).
    pub url: String,
    /// What is wrong.
    pub reason: &'static str,
}

fn err(url: &str, reason: &'static str) -> UrlError {
    UrlError {
        url: crate::codec::preview(url.as_bytes(), 200),
        reason,
    }
}

impl HttpUrl {
    /// Parses an absolute `http://` or `https://` URL.
    pub fn parse(url: &str) -> Result<HttpUrl, UrlError> {
        let url_trimmed = url.trim();
        if url_trimmed
            .bytes()
            .any(|b| b <= b' ' || b == 0x7f || !b.is_ascii())
        {
            return Err(err(
                url,
                "contains whitespace, control or non-ASCII characters",
            ));
        }
        let (scheme, rest) = match url_trimmed.split_once("://") {
            Some((s, rest)) if s.eq_ignore_ascii_case("http") => (Scheme::Http, rest),
            Some((s, rest)) if s.eq_ignore_ascii_case("https") => (Scheme::Https, rest),
            Some(_) => return Err(err(url, "scheme is not http or https")),
            None => return Err(err(url, "not an absolute http(s) URL")),
        };
        let rest = rest.split('#').next().unwrap_or("");
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, target) = rest.split_at(auth_end);
        if authority.contains('@') {
            return Err(err(
                url,
                "user info in URLs is not supported (use a header)",
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let close = v6
                .find(']')
                .ok_or_else(|| err(url, "unclosed IPv6 literal"))?;
            let (inner, after) = v6.split_at(close);
            if inner.is_empty()
                || !inner
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
            {
                return Err(err(url, "invalid IPv6 literal"));
            }
            let after = &after[1..];
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(err(url, "junk after IPv6 literal")),
            };
            (format!("[{}]", inner.to_ascii_lowercase()), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
                None => (authority.to_ascii_lowercase(), None),
            }
        };
        if host.is_empty() {
            return Err(err(url, "empty host"));
        }
        if !host.starts_with('[')
            && !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        {
            return Err(err(url, "invalid host"));
        }
        let port = match port {
            None | Some("") => scheme.default_port(),
            Some(p) => {
                if !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 5 {
                    return Err(err(url, "invalid port"));
                }
                match p.parse::<u16>() {
                    Ok(0) | Err(_) => return Err(err(url, "invalid port")),
                    Ok(n) => n,
                }
            }
        };
        let target = if target.is_empty() {
            "/".to_string()
        } else if target.starts_with('?') {
            format!("/{target}")
        } else {
            target.to_string()
        };
        Ok(HttpUrl {
            scheme,
            host,
            port,
            target: remove_dot_segments_in_target(&target),
        })
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host, lower-case (IPv6 literals in brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The host without IPv6 brackets, for name resolution and TLS.
    pub fn host_unbracketed(&self) -> &str {
        self.host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host)
    }

    /// The port (explicit or the scheme's default).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The request target: path and query, starting with `/`.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The path alone.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("/")
    }

    /// The `Host` header value: host, and the port when not the default.
    pub fn host_header(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// `scheme://host:port`, the origin used for same-origin checks.
    pub fn origin(&self) -> (Scheme, &str, u16) {
        (self.scheme, &self.host, self.port)
    }

    /// Whether `other` has the same scheme, host and port.
    pub fn same_origin(&self, other: &HttpUrl) -> bool {
        self.origin() == other.origin()
    }

    /// Resolves a reference (absolute URL, `//host/..`, `/path`, `path`,
    /// `?query`) against this URL (RFC 3986 §5.2).
    pub fn join(&self, reference: &str) -> Result<HttpUrl, UrlError> {
        let r = reference.trim();
        if has_scheme(r) {
            // Absolute (RFC 3986 §4.3): `mailto:x` or `http:x` is no
            // relative path, and parsing refuses what is not http(s)://.
            return HttpUrl::parse(r);
        }
        if let Some(rest) = r.strip_prefix("//") {
            return HttpUrl::parse(&format!("{}://{rest}", self.scheme.as_str()));
        }
        let r = r.split('#').next().unwrap_or("");
        if r.bytes().any(|b| b <= b' ' || b == 0x7f || !b.is_ascii()) {
            return Err(err(
                reference,
                "contains whitespace, control or non-ASCII characters",
            ));
        }
        let target = if r.is_empty() {
            self.target.clone()
        } else if r.starts_with('/') {
            r.to_string()
        } else if r.starts_with('?') {
            format!("{}{r}", self.path())
        } else {
            let base = self.path();
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{r}")
        };
        Ok(HttpUrl {
            scheme: self.scheme,
            host: self.host.clone(),
            port: self.port,
            target: remove_dot_segments_in_target(&target),
        })
    }
}

/// Whether a reference starts with a scheme: `ALPHA *( ALPHA / DIGIT /
/// "+" / "-" / "." ) ":"` (RFC 3986 §3.1).
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else {
        return false;
    };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

fn remove_dot_segments_in_target(target: &str) -> String {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    if !path.split('/').any(|s| s == "." || s == "..") {
        return target.to_string();
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let mut p = String::with_capacity(path.len());
    for s in &out {
        p.push('/');
        p.push_str(s);
    }
    if p.is_empty() {
        p.push('/');
    }
    if let Some(q) = query {
        p.push('?');
        p.push_str(q);
    }
    p
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        f.write_str(&self.target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_parts() {
        let u = HttpUrl::parse("http://127.0.0.1:3001/mcp?x=1#frag").unwrap();
        assert_eq!(u.scheme(), Scheme::Http);
        assert_eq!(u.host(), "127.0.0.1");
        assert_eq!(u.port(), 3001);
        assert_eq!(u.target(), "/mcp?x=1");
        assert_eq!(u.path(), "/mcp");
        assert_eq!(u.host_header(), "127.0.0.1:3001");
        assert_eq!(u.to_string(), "http://127.0.0.1:3001/mcp?x=1");

        let u = HttpUrl::parse("HTTPS://Example.COM").unwrap();
        assert_eq!((u.host(), u.port(), u.target()), ("example.com", 443, "/"));
        assert_eq!(u.host_header(), "example.com");

        let u = HttpUrl::parse("http://[::1]:8080/a").unwrap();
        assert_eq!(
            (u.host(), u.host_unbracketed(), u.port()),
            ("[::1]", "::1", 8080)
        );
    }

    #[test]
    fn refuses_what_it_cannot_send() {
        for bad in [
            "ftp://h/",
            "h/mcp",
            "http://",
            "http://u:p@h/",
            "http://h:99999/",
            "http://h:0/",
            "http://h:x/",
            "http://h /",
            "http://[::1/",
            "http://hé/",
        ] {
            assert!(HttpUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn joins_relative_references() {
        let base = HttpUrl::parse("http://127.0.0.1:9/a/sse?x=1").unwrap();
        let j = |r: &str| base.join(r).unwrap().to_string();
        assert_eq!(
            j("/messages/?session_id=42"),
            "http://127.0.0.1:9/messages/?session_id=42"
        );
        assert_eq!(
            j("message?sessionId=1"),
            "http://127.0.0.1:9/a/message?sessionId=1"
        );
        assert_eq!(j("../m"), "http://127.0.0.1:9/m");
        assert_eq!(j("?y=2"), "http://127.0.0.1:9/a/sse?y=2");
        assert_eq!(j("http://other:1/p"), "http://other:1/p");
        assert_eq!(j("//other/p"), "http://other/p");
        assert_eq!(j("./a:b"), "http://127.0.0.1:9/a/a:b");
        assert_eq!(j("m?x=a:b"), "http://127.0.0.1:9/a/m?x=a:b");
        for other_scheme in ["mailto:a@b", "ftp://h/x", "http:/x", "javascript:x"] {
            assert!(base.join(other_scheme).is_err(), "{other_scheme}");
        }
        assert!(!base.same_origin(&base.join("//other/p").unwrap()));
        assert!(base.same_origin(&base.join("/x").unwrap()));
    }
}
