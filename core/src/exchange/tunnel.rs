//! A tunnel through an HTTP proxy, sans-IO: the `CONNECT` exchange that
//! opens it (RFC 9110 §9.3.6), as bytes out and the proxy's answer in.
//!
//! ```text
//!  Tunnel::new(proxy, host, port) ─ request() ─► bytes to write to the proxy
//!  feed(bytes read) ─► Pending ─► feed(more) ...
//!                   └► Open: the connection is the tunnel; start TLS to `host`
//!                   └► Err(ProxyError): 407 (credentials wanted or refused),
//!                      another status (refused), a malformed answer
//!  finish_eof()     ─► ProxyError::Closed (the proxy hung up before answering)
//! ```
//!
//! The target's name travels in the request (`CONNECT host:port`): the
//! proxy resolves it, never the client. A plain `http` URL needs no
//! tunnel: the request goes to the proxy in absolute form, and
//! [`proxy_refusal`] reads a 407 in its answer the same way.

use super::proxy::{ProxyError, ProxyUrl};
use super::ResponseHead;
use crate::codec::http1::{Http1Limits, Request, ResponseDecoder, ResponseEvent};
use crate::codec::preview;

/// The largest answer head a proxy may send to `CONNECT`.
pub const MAX_PROXY_HEAD: usize = 16 * 1024;

/// Where the tunnel stands after [`Tunnel::feed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelState {
    /// The proxy has not answered in full yet: read more.
    Pending,
    /// The proxy answered 2xx: the connection now carries the tunnel.
    Open,
}

/// One `CONNECT` exchange with a proxy.
#[derive(Debug)]
pub struct Tunnel {
    /// The proxy, for messages (no password).
    proxy: String,
    /// `host:port`.
    target: String,
    /// `Proxy-Authorization`, if the proxy URL has credentials.
    authorization: Option<String>,
    decoder: ResponseDecoder,
    /// Set once the answer decided it.
    outcome: Option<Result<(), ProxyError>>,
}

impl Tunnel {
    /// A tunnel through `proxy` to `host` (as in a URL: an IPv6 literal in
    /// brackets) and `port`.
    pub fn new(proxy: &ProxyUrl, host: &str, port: u16) -> Tunnel {
        let limits = Http1Limits {
            max_head_size: MAX_PROXY_HEAD,
            ..Http1Limits::default()
        };
        Tunnel {
            proxy: proxy.to_string(),
            target: format!("{host}:{port}"),
            authorization: proxy.authorization(),
            decoder: ResponseDecoder::new("CONNECT", limits),
            outcome: None,
        }
    }

    /// `host:port`, as asked of the proxy.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The request to write: `CONNECT host:port HTTP/1.1`, `Host`, and
    /// `Proxy-Authorization: Basic ...` when the proxy URL has
    /// credentials.
    pub fn request(&self) -> Result<Vec<u8>, ProxyError> {
        let mut request = Request::new("CONNECT", self.target.as_str(), self.target.as_str());
        if let Some(auth) = &self.authorization {
            request
                .headers
                .push(("Proxy-Authorization".into(), auth.clone()));
        }
        let mut out = Vec::new();
        request
            .encode(&mut out)
            .map_err(|e| ProxyError::Malformed {
                proxy: self.proxy.clone(),
                problem: format!("a request it could not be sent: {e}"),
            })?;
        Ok(out)
    }

    /// Takes bytes read from the proxy. Bytes after a 2xx head are an
    /// error: the client speaks first in the tunnel (TLS), so a proxy has
    /// nothing to say there.
    pub fn feed(&mut self, input: &[u8]) -> Result<TunnelState, ProxyError> {
        if let Some(outcome) = &self.outcome {
            return outcome.clone().map(|()| TunnelState::Open);
        }
        let mut head = None;
        let used = self.decoder.feed(input, |event| {
            if let ResponseEvent::Head(h) = event {
                head = Some(h);
            }
        });
        let outcome = match (used, head) {
            (Err(e), _) => Err(ProxyError::Malformed {
                proxy: self.proxy.clone(),
                problem: e.to_string(),
            }),
            (Ok(_), None) => return Ok(TunnelState::Pending),
            (Ok(used), Some(head)) if head.is_success() => {
                if used < input.len() {
                    Err(ProxyError::Malformed {
                        proxy: self.proxy.clone(),
                        problem: format!(
                            "{} bytes of its own after {} {}",
                            input.len() - used,
                            head.status,
                            preview(head.reason.as_bytes(), 40)
                        ),
                    })
                } else {
                    Ok(())
                }
            }
            (Ok(_), Some(head)) => Err(self.refusal(&head)),
        };
        self.outcome = Some(outcome.clone());
        outcome.map(|()| TunnelState::Open)
    }

    /// The proxy closed the connection: what that means now.
    pub fn finish_eof(&mut self) -> ProxyError {
        match &self.outcome {
            Some(Err(e)) => e.clone(),
            _ => ProxyError::Closed {
                proxy: self.proxy.clone(),
                target: self.target.clone(),
            },
        }
    }

    fn refusal(&self, head: &ResponseHead) -> ProxyError {
        if head.status == 407 {
            auth_required(&self.proxy, self.authorization.is_some(), head)
        } else {
            ProxyError::TunnelRefused {
                proxy: self.proxy.clone(),
                target: self.target.clone(),
                status: head.status,
                reason: preview(head.reason.as_bytes(), 80),
            }
        }
    }
}

/// The error a proxy's 407 to a request sent through it (plain `http`, in
/// absolute form) means; `None` for any other answer, which is the
/// server's.
pub fn proxy_refusal(proxy: &ProxyUrl, head: &ResponseHead) -> Option<ProxyError> {
    (head.status == 407)
        .then(|| auth_required(&proxy.to_string(), proxy.authorization().is_some(), head))
}

fn auth_required(proxy: &str, sent: bool, head: &ResponseHead) -> ProxyError {
    ProxyError::AuthenticationRequired {
        proxy: proxy.to_owned(),
        sent_credentials: sent,
        challenge: head.header("proxy-authenticate").map(|c| preview(c, 80)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(url: &str) -> ProxyUrl {
        ProxyUrl::parse(url, "test").unwrap()
    }

    /// Feeds `answer` whole, in two parts at every split point, and byte
    /// by byte: the outcome is the same.
    fn outcomes(p: &ProxyUrl, answer: &[u8]) -> Result<TunnelState, ProxyError> {
        let whole = {
            let mut t = Tunnel::new(p, "mcp.example", 443);
            t.feed(answer)
        };
        for split in 1..answer.len() {
            let mut t = Tunnel::new(p, "mcp.example", 443);
            let first = t.feed(&answer[..split]);
            let got = match first {
                Ok(TunnelState::Pending) => t.feed(&answer[split..]),
                done => done,
            };
            assert_eq!(got, whole, "split at {split}");
        }
        let mut t = Tunnel::new(p, "mcp.example", 443);
        let mut last = Ok(TunnelState::Pending);
        for b in answer {
            last = t.feed(std::slice::from_ref(b));
            if last != Ok(TunnelState::Pending) {
                break;
            }
        }
        assert_eq!(last, whole, "byte by byte");
        whole
    }

    #[test]
    fn the_request_names_the_target_and_carries_basic_credentials() {
        let t = Tunnel::new(&proxy("http://gw:3128"), "mcp.example", 443);
        assert_eq!(
            t.request().unwrap(),
            b"CONNECT mcp.example:443 HTTP/1.1\r\nHost: mcp.example:443\r\n\r\n"
        );
        let t = Tunnel::new(&proxy("http://ada:l%40velace@gw:3128"), "[::1]", 8443);
        assert_eq!(t.target(), "[::1]:8443");
        assert_eq!(
            String::from_utf8(t.request().unwrap()).unwrap(),
            "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\
             Proxy-Authorization: Basic YWRhOmxAdmVsYWNl\r\n\r\n"
        );
    }

    #[test]
    fn a_2xx_opens_the_tunnel() {
        let p = proxy("http://gw:3128");
        assert_eq!(
            outcomes(&p, b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Ok(TunnelState::Open)
        );
        // Headers that would frame a body do not: the tunnel starts.
        assert_eq!(
            outcomes(
                &p,
                b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\nProxy-Agent: x\r\n\r\n"
            ),
            Ok(TunnelState::Open)
        );
        // An interim 100 first is skipped.
        assert_eq!(
            outcomes(&p, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"),
            Ok(TunnelState::Open)
        );
    }

    #[test]
    fn bytes_after_the_2xx_are_refused() {
        let mut t = Tunnel::new(&proxy("http://gw:3128"), "h", 443);
        let e = t.feed(b"HTTP/1.1 200 OK\r\n\r\nhello").unwrap_err();
        assert!(e.to_string().contains("5 bytes of its own"), "{e}");
    }

    #[test]
    fn a_407_names_the_proxy_and_never_the_password() {
        let with = proxy("http://ada:hunter2@gw:3128");
        let answer = b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                       Proxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 3\r\n\r\nno!";
        let e = outcomes(&with, answer).unwrap_err();
        assert_eq!(
            e,
            ProxyError::AuthenticationRequired {
                proxy: "http://ada@gw:3128".into(),
                sent_credentials: true,
                challenge: Some("Basic realm=\"corp\"".into()),
            }
        );
        assert!(!e.to_string().contains("hunter2"));
        let without = proxy("http://gw:3128");
        let e = outcomes(&without, answer).unwrap_err();
        assert!(e.to_string().contains("requires authentication"), "{e}");
    }

    #[test]
    fn other_refusals_and_garbage() {
        let p = proxy("http://gw:3128");
        let e = outcomes(&p, b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "proxy http://gw:3128 refused the tunnel to mcp.example:443: 403 Forbidden"
        );
        let e = outcomes(&p, b"SSH-2.0-OpenSSH_9.6\r\n\r\n").unwrap_err();
        assert!(matches!(e, ProxyError::Malformed { .. }), "{e}");
        let e = outcomes(&p, b"HTTP/1.1 101 Switching Protocols\r\n\r\n").unwrap_err();
        assert!(matches!(e, ProxyError::Malformed { .. }), "{e}");
        // A head past the bound.
        let mut t = Tunnel::new(&p, "h", 1);
        let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
        while big.len() <= MAX_PROXY_HEAD {
            big.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert!(matches!(t.feed(&big), Err(ProxyError::Malformed { .. })));
    }

    #[test]
    fn eof_before_an_answer() {
        let mut t = Tunnel::new(&proxy("http://gw:3128"), "h", 443);
        assert_eq!(t.feed(b"HTTP/1.1 2"), Ok(TunnelState::Pending));
        assert_eq!(
            t.finish_eof().to_string(),
            "proxy http://gw:3128 closed the connection before answering CONNECT h:443"
        );
    }

    #[test]
    fn a_407_to_a_request_in_absolute_form() {
        let p = proxy("http://ada:pw@gw:3128");
        let head = |status| ResponseHead {
            status,
            reason: String::new(),
            version: 1,
            headers: Vec::new(),
        };
        assert!(proxy_refusal(&p, &head(200)).is_none());
        assert!(proxy_refusal(&p, &head(401)).is_none());
        let e = proxy_refusal(&p, &head(407)).unwrap();
        assert!(e.to_string().contains("refused the credentials"), "{e}");
    }
}
