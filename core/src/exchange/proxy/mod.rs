//! Which proxy an exchange goes through, decided in pure code: the
//! `*_PROXY` / `NO_PROXY` conventions (the environment is passed in, never
//! read here), a proxy given explicitly, or none.
//!
//! ```text
//!  ProxyEnv::from_lookup(env)   ──► Proxies::from_env ─┐
//!  "--proxy URL" / "proxy": URL ──► Proxies::explicit ─┼─► route(url) ─► Direct
//!  "--no-proxy" / "proxy": ""   ──► Proxies::direct ───┘                 Via(&ProxyUrl)
//!                                     NO_PROXY checked first               (or the error of
//!                                                                           a broken setting)
//! ```
//!
//! The rules, as curl and reqwest (the official Rust SDK's HTTP client)
//! read the same variables:
//! - `https_proxy` for `https` URLs, `http_proxy` for `http` URLs,
//!   `all_proxy` for either when the scheme's own is unset; each in lower
//!   case first, then upper case (`HTTPS_PROXY`, ...); an empty value is
//!   unset. Under CGI (`REQUEST_METHOD` set) upper-case `HTTP_PROXY` is
//!   ignored: a request's `Proxy:` header lands there ("httpoxy").
//! - `no_proxy` / `NO_PROXY`: entries separated by commas or white space;
//!   `*` (everything), a host name (matches the name and every subdomain;
//!   a leading `.` or `*.` changes nothing), an IP address, a CIDR range
//!   (`10.0.0.0/8`, `fd00::/8`), each optionally with `:port` (`[v6]:port`
//!   for IPv6). Case-insensitive; a trailing dot is ignored. Loopback is
//!   not implied: list `localhost,127.0.0.1` to keep local servers direct.
//!   It applies to an explicit proxy too.
//! - A proxy URL is `http://[user[:password]@]host[:port]` (port 80 when
//!   omitted; `host:port` alone means `http://`), user and password
//!   percent-decoded and sent as `Proxy-Authorization: Basic`. `https://`
//!   (TLS to the proxy itself) and SOCKS proxies are refused with an error
//!   that says so.
//!
//! [`ProxyUrl`]'s `Display` names a proxy without its password; every
//! error here does the same.

use std::fmt;
use std::net::IpAddr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::url::{HttpUrl, Scheme};
use crate::codec::preview;

/// An HTTP proxy: where to connect, and the credentials to present.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ProxyUrl {
    /// Lower-cased; IPv6 literals keep their brackets.
    host: String,
    port: u16,
    user: Option<String>,
    password: Option<String>,
}

/// Why a proxy setting cannot be used, or why a proxy refused. Messages
/// name the proxy (never its password) and, for a setting, where it came
/// from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The proxy URL is malformed.
    #[error("{source_name}: invalid proxy URL `{url}`: {reason}")]
    InvalidUrl {
        /// Where the setting came from (`HTTPS_PROXY`, `--proxy`, ...).
        source_name: String,
        /// The URL, its password replaced by `***`.
        url: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A proxy of a kind this client does not speak (SOCKS, or TLS to the
    /// proxy).
    #[error("{source_name}: {scheme}:// proxies are not supported (only http:// proxies, which tunnel https with CONNECT)")]
    UnsupportedScheme {
        /// Where the setting came from.
        source_name: String,
        /// The scheme given, lower case.
        scheme: String,
    },
    /// The proxy answered 407: it wants credentials, or refused the ones
    /// sent.
    #[error("{}", auth_message(proxy, *sent_credentials, challenge.as_deref()))]
    AuthenticationRequired {
        /// The proxy, without its password.
        proxy: String,
        /// Whether `Proxy-Authorization` was sent (then it was refused).
        sent_credentials: bool,
        /// Its `Proxy-Authenticate` challenge, shortened.
        challenge: Option<String>,
    },
    /// The proxy refused to open the tunnel (any other status than 2xx).
    #[error("proxy {proxy} refused the tunnel to {target}: {status} {reason}")]
    TunnelRefused {
        /// The proxy, without its password.
        proxy: String,
        /// `host:port` asked for.
        target: String,
        /// The status.
        status: u16,
        /// Its reason phrase, shortened.
        reason: String,
    },
    /// The proxy's answer to `CONNECT` is not HTTP/1.1, or it sent bytes
    /// of its own after a 2xx (before the TLS handshake, which the client
    /// starts).
    #[error("proxy {proxy} answered CONNECT with {problem}")]
    Malformed {
        /// The proxy, without its password.
        proxy: String,
        /// What was wrong.
        problem: String,
    },
    /// The proxy closed the connection before it answered `CONNECT`.
    #[error("proxy {proxy} closed the connection before answering CONNECT {target}")]
    Closed {
        /// The proxy, without its password.
        proxy: String,
        /// `host:port` asked for.
        target: String,
    },
}

fn auth_message(proxy: &str, sent: bool, challenge: Option<&str>) -> String {
    let challenge = challenge
        .map(|c| format!(", it asks for `{c}`"))
        .unwrap_or_default();
    if sent {
        format!(
            "proxy {proxy} refused the credentials (407 Proxy Authentication Required{challenge}): \
             check the user and password in the proxy URL"
        )
    } else {
        format!(
            "proxy {proxy} requires authentication (407 Proxy Authentication Required{challenge}): \
             give them in the proxy URL, http://USER:PASSWORD@HOST:PORT"
        )
    }
}

impl ProxyUrl {
    /// Parses a proxy URL; `source_name` names the setting in errors
    /// (`HTTPS_PROXY`, `--proxy`, ...).
    pub fn parse(text: &str, source_name: &str) -> Result<ProxyUrl, ProxyError> {
        let text = text.trim();
        let bad = |reason| ProxyError::InvalidUrl {
            source_name: source_name.to_owned(),
            url: redact(text),
            reason,
        };
        if text
            .bytes()
            .any(|b| b <= b' ' || b == 0x7f || !b.is_ascii())
        {
            return Err(bad("contains whitespace, control or non-ASCII characters"));
        }
        let rest = match text.split_once("://") {
            Some((scheme, rest)) => {
                let scheme = scheme.to_ascii_lowercase();
                if scheme != "http" {
                    return Err(ProxyError::UnsupportedScheme {
                        source_name: source_name.to_owned(),
                        scheme: preview(scheme.as_bytes(), 16),
                    });
                }
                rest
            }
            None => text,
        };
        // Only the authority counts: a trailing `/` (or path) is ignored,
        // as curl does.
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(u) => {
                let (user, pass) = match u.split_once(':') {
                    Some((user, pass)) => (user, Some(pass)),
                    None => (u, None),
                };
                let user = percent_decode(user).ok_or_else(|| bad("bad percent-encoding"))?;
                let pass = pass
                    .map(|p| percent_decode(p).ok_or_else(|| bad("bad percent-encoding")))
                    .transpose()?;
                (Some(user), pass)
            }
        };
        let (host, port) = split_host_port(hostport).ok_or_else(|| bad("invalid host or port"))?;
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        Ok(ProxyUrl {
            host,
            port: port.unwrap_or(80),
            user,
            password,
        })
    }

    /// The host, lower case (IPv6 literals in brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The host without IPv6 brackets, for name resolution.
    pub fn host_unbracketed(&self) -> &str {
        unbracket(&self.host)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The user name, if the URL has one.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The password, if the URL has one (for an HTTP client that builds
    /// `Proxy-Authorization` itself; never shown in messages).
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The `Proxy-Authorization` value (`Basic base64(user:password)`), if
    /// the URL has credentials.
    pub fn authorization(&self) -> Option<String> {
        let user = self.user.as_deref()?;
        let pass = self.password.as_deref().unwrap_or("");
        Some(format!(
            "Basic {}",
            STANDARD.encode(format!("{user}:{pass}"))
        ))
    }
}

impl fmt::Display for ProxyUrl {
    /// `http://[user@]host:port`: never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("http://")?;
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyUrl")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// `host[:port]`, `[v6][:port]`: the host lower-cased, checked.
fn split_host_port(hostport: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (inner, after) = v6.split_once(']')?;
        inner.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{}]", inner.to_ascii_lowercase()), port)
    } else {
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        };
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        {
            return None;
        }
        (host.to_ascii_lowercase(), port)
    };
    let port = match port {
        None | Some("") => None,
        Some(p) if p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            match p.parse::<u16>() {
                Ok(0) | Err(_) => return None,
                Ok(n) => Some(n),
            }
        }
        Some(_) => return None,
    };
    Some((host, port))
}

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// `%XX` decoded; `None` on a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A proxy URL for an error message: the password (anything between the
/// first `:` of the user info and its `@`) becomes `***`; shortened.
fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let shown = match authority.rsplit_once('@') {
        Some((info, host)) => match info.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}{}", &rest[end..]),
            None => rest.to_owned(),
        },
        None => rest.to_owned(),
    };
    let whole = match scheme {
        Some(s) => format!("{s}://{shown}"),
        None => shown,
    };
    preview(whole.as_bytes(), 200)
}

/// One `NO_PROXY` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// `*`.
    All,
    /// A name and its subdomains.
    Name { name: String, port: Option<u16> },
    /// One address.
    Ip { ip: IpAddr, port: Option<u16> },
    /// A range of addresses.
    Cidr { net: IpAddr, prefix: u8 },
}

/// The hosts that are reached directly whatever proxy is set: a parsed
/// `NO_PROXY` (see the module docs for the syntax). Entries that parse as
/// nothing are dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoProxy {
    entries: Vec<Entry>,
}

impl NoProxy {
    /// Parses a list separated by commas or white space.
    pub fn parse(list: &str) -> NoProxy {
        let entries = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter_map(parse_entry)
            .collect();
        NoProxy { entries }
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `host` (as in a URL: IPv6 in brackets or not) at `port` is
    /// to be reached directly.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let host = unbracket(host).trim_end_matches('.').to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        self.entries.iter().any(|entry| match entry {
            Entry::All => true,
            Entry::Name { name, port: p } => {
                port_ok(*p, port)
                    && (host == *name
                        || (host.len() > name.len()
                            && host.ends_with(name.as_str())
                            && host.as_bytes()[host.len() - name.len() - 1] == b'.'))
            }
            Entry::Ip { ip: want, port: p } => port_ok(*p, port) && ip == Some(*want),
            Entry::Cidr { net, prefix } => ip.is_some_and(|ip| in_range(ip, *net, *prefix)),
        })
    }
}

fn port_ok(want: Option<u16>, port: u16) -> bool {
    want.is_none_or(|w| w == port)
}

fn parse_entry(raw: &str) -> Option<Entry> {
    let e = raw.trim().to_ascii_lowercase();
    if e.is_empty() {
        return None;
    }
    if e == "*" {
        return Some(Entry::All);
    }
    if let Some((addr, bits)) = e.split_once('/') {
        let net: IpAddr = unbracket(addr).parse().ok()?;
        let prefix: u8 = bits.parse().ok()?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        return (prefix <= max).then_some(Entry::Cidr { net, prefix });
    }
    if let Ok(ip) = e.parse::<IpAddr>() {
        return Some(Entry::Ip { ip, port: None });
    }
    let (host, port) = split_host_port(e.strip_prefix("*.").unwrap_or(&e))?;
    if let Ok(ip) = unbracket(&host).parse::<IpAddr>() {
        return Some(Entry::Ip { ip, port });
    }
    let name = host.trim_start_matches('.').trim_end_matches('.');
    if name.is_empty() {
        return None;
    }
    Some(Entry::Name {
        name: name.to_owned(),
        port,
    })
}

fn in_range(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The proxy variables of an environment, as found (lower case first,
/// then upper case; empty values skipped), with the name each came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    /// `http_proxy` / `HTTP_PROXY`.
    pub http: Option<(String, String)>,
    /// `https_proxy` / `HTTPS_PROXY`.
    pub https: Option<(String, String)>,
    /// `all_proxy` / `ALL_PROXY`.
    pub all: Option<(String, String)>,
    /// `no_proxy` / `NO_PROXY`.
    pub no_proxy: Option<(String, String)>,
}

impl ProxyEnv {
    /// Reads the variables through `lookup` (say, `|k| std::env::var(k).ok()`
    /// in an adapter; a map in a test).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> ProxyEnv {
        let get = |lower: &str, upper: &str| -> Option<(String, String)> {
            [lower, upper].into_iter().find_map(|name| {
                lookup(name)
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| (name.to_owned(), v))
            })
        };
        let cgi = lookup("REQUEST_METHOD").is_some();
        ProxyEnv {
            http: if cgi {
                get("http_proxy", "http_proxy")
            } else {
                get("http_proxy", "HTTP_PROXY")
            },
            https: get("https_proxy", "HTTPS_PROXY"),
            all: get("all_proxy", "ALL_PROXY"),
            no_proxy: get("no_proxy", "NO_PROXY"),
        }
    }

    /// Whether no proxy variable is set (`NO_PROXY` alone counts as none).
    pub fn is_empty(&self) -> bool {
        self.http.is_none() && self.https.is_none() && self.all.is_none()
    }
}

/// A proxy setting as parsed: the proxy, or why it cannot be used (kept
/// until a URL would go through it, so that a broken `HTTP_PROXY` does not
/// stop `https` exchanges).
type Slot = Option<Result<ProxyUrl, ProxyError>>;

/// Where each exchange goes: the proxies for `http` and `https` URLs and
/// the hosts reached directly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proxies {
    http: Slot,
    https: Slot,
    no_proxy: NoProxy,
}

/// How an exchange reaches its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// A connection to the URL's own host.
    Direct,
    /// Through this proxy: a `CONNECT` tunnel for `https`, the request in
    /// absolute form for `http`.
    Via(&'a ProxyUrl),
}

impl Proxies {
    /// No proxy at all (`--no-proxy`, `"proxy": ""`).
    pub fn direct() -> Proxies {
        Proxies::default()
    }

    /// What the environment says (see the module docs).
    pub fn from_env(env: &ProxyEnv) -> Proxies {
        let slot = |v: &Option<(String, String)>| -> Slot {
            v.as_ref().map(|(name, url)| ProxyUrl::parse(url, name))
        };
        let all = slot(&env.all);
        Proxies {
            http: slot(&env.http).or_else(|| all.clone()),
            https: slot(&env.https).or(all),
            no_proxy: env
                .no_proxy
                .as_ref()
                .map(|(_, list)| NoProxy::parse(list))
                .unwrap_or_default(),
        }
    }

    /// One proxy for every URL but those `no_proxy` lists (an explicit
    /// `--proxy` or a server entry's `proxy`; `source_name` names it in
    /// errors). The URL is checked here.
    pub fn explicit(
        url: &str,
        source_name: &str,
        no_proxy: NoProxy,
    ) -> Result<Proxies, ProxyError> {
        let proxy = ProxyUrl::parse(url, source_name)?;
        Ok(Proxies {
            http: Some(Ok(proxy.clone())),
            https: Some(Ok(proxy)),
            no_proxy,
        })
    }

    /// The `NO_PROXY` list in force.
    pub fn no_proxy(&self) -> &NoProxy {
        &self.no_proxy
    }

    /// Whether any URL goes through a proxy.
    pub fn is_direct(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// How to reach `url`; the error of a broken setting when the URL
    /// would use it.
    pub fn route(&self, url: &HttpUrl) -> Result<Route<'_>, ProxyError> {
        let slot = match url.scheme() {
            Scheme::Http => &self.http,
            Scheme::Https => &self.https,
        };
        match slot {
            None => Ok(Route::Direct),
            Some(_) if self.no_proxy.matches(url.host(), url.port()) => Ok(Route::Direct),
            Some(Ok(proxy)) => Ok(Route::Via(proxy)),
            Some(Err(e)) => Err(e.clone()),
        }
    }
}

#[cfg(test)]
mod tests;
