//! Establishing a connection with the runtime's primitives: name
//! resolution, TCP to each address in turn, TLS for `https`; resolution
//! plus TCP under one timeout, the handshake under another.

use std::time::Duration;

use mcpwire::exchange::url::Scheme;
use mcpwire::exchange::HttpUrl;

use super::io_message;
use crate::runtime::{timeout, Runtime};

/// Connects to `url`'s host and port. The error says what failed and
/// where, e.g. `connect to 127.0.0.1:9: Connection refused`.
pub(super) async fn connect<R: Runtime>(
    url: &HttpUrl,
    limit: Duration,
) -> Result<R::Stream, String> {
    let host = url.host_unbracketed();
    let port = url.port();
    let Some(tcp) = timeout::<R, _>(limit, connect_tcp::<R>(host, port)).await else {
        return Err(format!(
            "connect to {}:{port}: connect timeout after {} ms",
            url.host(),
            limit.as_millis()
        ));
    };
    let tcp = tcp?;
    match url.scheme() {
        Scheme::Http => Ok(R::plain(tcp)),
        Scheme::Https => match timeout::<R, _>(limit, R::tls_handshake(tcp, host)).await {
            Some(Ok(stream)) => Ok(stream),
            Some(Err(e)) => Err(format!("TLS handshake with {host}: {e}")),
            None => Err(format!(
                "TLS handshake with {host}: timeout after {} ms",
                limit.as_millis()
            )),
        },
    }
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
