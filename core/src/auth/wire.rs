//! Small encodings the flow needs: form/query encoding and decoding
//! (`application/x-www-form-urlencoded`), base64, PKCE, randomness, and
//! the URL checks (loopback hosts, HTTPS).

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::exchange::url::Scheme;
use crate::exchange::HttpUrl;

/// Percent-encodes `s` for a form body or a query component (RFC 3986
/// unreserved characters stay, space becomes `%20`).
pub(crate) fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// `k1=v1&k2=v2…`, each part encoded.
pub(crate) fn encode_form<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str(&encode_component(k));
        out.push('=');
        out.push_str(&encode_component(v));
    }
    out
}

/// Decodes one query or form component (`+` is a space; a bad `%` escape
/// is kept as is; invalid UTF-8 is replaced).
pub(crate) fn decode_component(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex_val(bytes[i + 1]), hex_val(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The decoded `key=value` pairs of a query string (or of a whole URL:
/// everything up to the first `?` and from the first `#` is ignored).
pub(crate) fn query_pairs(url_or_query: &str) -> Vec<(String, String)> {
    let s = match url_or_query.find('?') {
        Some(i) => &url_or_query[i + 1..],
        None if url_or_query.contains("://") => "",
        None => url_or_query,
    };
    let s = s.split('#').next().unwrap_or_default();
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode_component(k), decode_component(v)),
            None => (decode_component(p), String::new()),
        })
        .collect()
}

/// `url` with `query` appended (`?` or `&`), before any fragment.
pub(crate) fn append_query(url: &str, query: &str) -> String {
    let (base, fragment) = match url.find('#') {
        Some(i) => (&url[..i], &url[i..]),
        None => (url, ""),
    };
    let sep = if !base.contains('?') {
        "?"
    } else if base.ends_with('?') || base.ends_with('&') {
        ""
    } else {
        "&"
    };
    format!("{base}{sep}{query}{fragment}")
}

/// Base64url without padding (PKCE, JWT parts, random strings).
pub fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `Basic` credentials for `client_secret_basic` (RFC 6749 §2.3.1: both
/// parts form-encoded first).
pub(crate) fn basic_credentials(client_id: &str, secret: &str) -> String {
    let raw = format!(
        "{}:{}",
        encode_component(client_id),
        encode_component(secret)
    );
    format!("Basic {}", STANDARD.encode(raw.as_bytes()))
}

/// The PKCE S256 challenge of a verifier.
pub fn pkce_challenge(verifier: &str) -> String {
    base64url(&Sha256::digest(verifier.as_bytes()))
}

/// The per-authorization secrets: the PKCE verifier and the `state`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secrets {
    /// The PKCE code verifier (43 characters from 32 random bytes).
    pub verifier: String,
    /// The `state` parameter (22 characters from 16 random bytes).
    pub state: String,
    /// The `jti` of a client assertion, if one is made.
    pub nonce: String,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets { .. }")
    }
}

/// The operating system's random source failed: no secrets can be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no random numbers: {0}")]
pub struct RandomError(getrandom::Error);

impl Secrets {
    /// Fresh secrets from the operating system's random source.
    pub fn generate() -> Result<Secrets, RandomError> {
        let mut buf = [0u8; 64];
        getrandom::fill(&mut buf).map_err(RandomError)?;
        Ok(Secrets {
            verifier: base64url(&buf[..32]),
            state: base64url(&buf[32..48]),
            nonce: base64url(&buf[48..]),
        })
    }
}

/// Whether the host is a loopback name or address (`localhost`,
/// `127.0.0.0/8`, `::1`), where plain HTTP is acceptable.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if h.eq_ignore_ascii_case("localhost") || h == "::1" {
        return true;
    }
    h.parse::<std::net::Ipv4Addr>()
        .is_ok_and(|a| a.is_loopback())
}

/// Whether `url` may carry authorization traffic: HTTPS, or HTTP to a
/// loopback host.
pub(crate) fn is_secure(url: &HttpUrl) -> bool {
    url.scheme() == Scheme::Https || is_loopback_host(url.host())
}

/// `scheme://host[:port]` of a URL, the port only when not the default.
pub(crate) fn origin_string(url: &HttpUrl) -> String {
    let (scheme, host, port) = url.origin();
    if port == scheme.default_port() {
        format!("{}://{}", scheme.as_str(), host)
    } else {
        format!("{}://{}:{}", scheme.as_str(), host, port)
    }
}

/// The path of a URL without its query, `""` for `/`, no trailing `/`.
pub(crate) fn trimmed_path(url: &HttpUrl) -> &str {
    url.path().trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_round_trip() {
        let enc = encode_form([("a b", "x&y=z"), ("u", "http://h/p?q=1")]);
        assert_eq!(enc, "a%20b=x%26y%3Dz&u=http%3A%2F%2Fh%2Fp%3Fq%3D1");
        let back = query_pairs(&enc);
        assert_eq!(back[0], ("a b".into(), "x&y=z".into()));
        assert_eq!(back[1], ("u".into(), "http://h/p?q=1".into()));
    }

    #[test]
    fn decode_is_lenient() {
        assert_eq!(decode_component("a+b%2"), "a b%2");
        assert_eq!(decode_component("%zz%41"), "%zzA");
        assert_eq!(decode_component("%"), "%");
        assert_eq!(decode_component("%4"), "%4");
        assert_eq!(decode_component("%ff"), "\u{fffd}");
    }

    #[test]
    fn query_of_a_url() {
        let q = query_pairs("http://127.0.0.1:5/cb?code=x%2By&state=s#frag");
        assert_eq!(
            q,
            vec![("code".into(), "x+y".into()), ("state".into(), "s".into())]
        );
        assert!(query_pairs("http://h/cb").is_empty());
        assert_eq!(append_query("https://a/x", "k=v"), "https://a/x?k=v");
        assert_eq!(
            append_query("https://a/x?p=1#f", "k=v"),
            "https://a/x?p=1&k=v#f"
        );
    }

    #[test]
    fn pkce_matches_rfc7636_appendix_b() {
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn secrets_are_fresh_and_well_formed() {
        let a = Secrets::generate().unwrap();
        let b = Secrets::generate().unwrap();
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.verifier.len(), 43);
        assert!(a
            .verifier
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
    }

    #[test]
    fn basic_credentials_encode_both_parts() {
        // "a:b" with the colon in the id encoded first.
        assert_eq!(
            basic_credentials("a:b", "s"),
            format!("Basic {}", STANDARD.encode("a%3Ab:s"))
        );
    }

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "127.0.0.1",
            "127.9.9.9",
            "[::1]",
            "::1",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "example.com",
            "10.0.0.1",
            "localhost.example.com",
            "[::2]",
            "128.0.0.1",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
