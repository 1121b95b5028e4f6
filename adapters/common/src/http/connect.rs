//! Establishing a connection with the runtime's primitives: name
//! resolution, TCP to each address in turn, a `CONNECT` tunnel when an
//! `https` URL goes through a proxy, TLS for `https`. Resolution plus TCP
//! under one timeout, the tunnel under another, the handshake under a
//! third.
//!
//! ```text
//!  Direct:           TCP host:port ──────────────────────────► (TLS host)
//!  Via proxy, http:  TCP proxy ─────────────────────────────► request in absolute form
//!  Via proxy, https: TCP proxy ─► CONNECT host:port ─► 2xx ─► TLS host
//! ```
//!
//! Through a proxy the target's name is never resolved here: it travels in
//! the `CONNECT` request (or the absolute URL) and the proxy resolves it.

use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use mcpwire::exchange::proxy::{ProxyUrl, Route};
use mcpwire::exchange::tunnel::{Tunnel, TunnelState};
use mcpwire::exchange::url::Scheme;
use mcpwire::exchange::HttpUrl;

use super::io_message;
use crate::runtime::{timeout, Runtime};
use crate::tls::ClientTls;

/// Connects to `url` along `route`. The error says what failed and where,
/// e.g. `connect to 127.0.0.1:9: Connection refused`, `proxy
/// http://gw:3128 refused the credentials (407 ...)`, `the certificate of
/// mcp.example is not signed by a CA this client trusts ...`.
pub(super) async fn connect<R: Runtime>(
    url: &HttpUrl,
    route: Route<'_>,
    tls: &ClientTls,
    limit: Duration,
) -> Result<R::Stream, String> {
    let (host, port, proxy) = match route {
        Route::Direct => (url.host_unbracketed(), url.port(), None),
        Route::Via(p) => (p.host_unbracketed(), p.port(), Some(p)),
    };
    let Some(tcp) = timeout::<R, _>(limit, connect_tcp::<R>(host, port)).await else {
        return Err(format!(
            "connect to {}{}:{port}: connect timeout after {} ms",
            proxy.map_or("", |_| "proxy "),
            if proxy.is_some() { host } else { url.host() },
            limit.as_millis()
        ));
    };
    let tcp = tcp.map_err(|e| match proxy {
        Some(p) => format!("proxy {p}: {e}"),
        None => e,
    })?;
    let tcp = match (proxy, url.scheme()) {
        (Some(p), Scheme::Https) => match timeout::<R, _>(limit, tunnel::<R>(tcp, p, url)).await {
            Some(result) => result?,
            None => {
                return Err(format!(
                    "proxy {p} did not answer CONNECT {}:{} within {} ms",
                    url.host(),
                    url.port(),
                    limit.as_millis()
                ))
            }
        },
        _ => tcp,
    };
    match url.scheme() {
        Scheme::Http => Ok(R::plain(tcp)),
        Scheme::Https => {
            let name = url.host_unbracketed();
            match timeout::<R, _>(limit, R::tls_handshake(tcp, name, tls)).await {
                Some(Ok(stream)) => Ok(stream),
                Some(Err(e)) => Err(tls
                    .explain(name, &e)
                    .unwrap_or_else(|| format!("TLS handshake with {name}: {}", io_message(&e)))),
                None => Err(format!(
                    "TLS handshake with {name}: timeout after {} ms",
                    limit.as_millis()
                )),
            }
        }
    }
}

/// Opens a tunnel to `url`'s host and port through `proxy` on `tcp`.
async fn tunnel<R: Runtime>(
    mut tcp: R::Tcp,
    proxy: &ProxyUrl,
    url: &HttpUrl,
) -> Result<R::Tcp, String> {
    let mut tunnel = Tunnel::new(proxy, url.host(), url.port());
    let request = tunnel.request().map_err(|e| e.to_string())?;
    let io = |e: std::io::Error| {
        format!(
            "proxy {proxy}: CONNECT {}: {}",
            tunnel_target(url),
            io_message(&e)
        )
    };
    tcp.write_all(&request).await.map_err(io)?;
    tcp.flush().await.map_err(io)?;
    // The answer is a head (bounded by the tunnel); a small buffer will do.
    let mut buf = [0u8; 2048];
    loop {
        let n = tcp.read(&mut buf).await.map_err(io)?;
        if n == 0 {
            return Err(tunnel.finish_eof().to_string());
        }
        match tunnel.feed(&buf[..n]) {
            Ok(TunnelState::Pending) => {}
            Ok(TunnelState::Open) => {
                tracing::debug!(proxy = %proxy, target = tunnel.target(), "tunnel open");
                return Ok(tcp);
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn tunnel_target(url: &HttpUrl) -> String {
    format!("{}:{}", url.host(), url.port())
}

/// Resolves `host` and connects to the first address that accepts.
async fn connect_tcp<R: Runtime>(host: &str, port: u16) -> Result<R::Tcp, String> {
    let addrs = R::resolve(host, port)
        .await
        .map_err(|e| format!("resolve {host}: {}", io_message(&e)))?;
    let mut last = None;
    for addr in addrs {
        match R::connect_tcp(addr).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(format!("connect to {addr}: {}", io_message(&e))),
        }
    }
    Err(last.unwrap_or_else(|| format!("resolve {host}: no addresses")))
}
