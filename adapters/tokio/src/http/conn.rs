//! Establishing connections: name resolution, TCP (with `TCP_NODELAY`),
//! TLS for `https`, all under one connect timeout; and [`Stream`], the
//! plain-or-TLS byte stream an exchange reads and writes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use mcpwire::transport::url::Scheme;
use mcpwire::transport::HttpUrl;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connected byte stream to an HTTP server: plain TCP or TLS over TCP.
pub(super) enum Stream {
    /// `http`.
    Tcp(TcpStream),
    /// `https` (boxed: the TLS state is large).
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket underneath.
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Tcp(s) => s,
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    /// Whether an idle connection still looks usable, without waiting: the
    /// peer has not closed it and has sent nothing unsolicited. A cheap
    /// check on tokio's cached readiness, not a guarantee (the peer may
    /// close it a moment later); the exchange's retry covers the rest. On
    /// an idle connection any readable byte (EOF, a TLS alert, stray data)
    /// makes it unusable, so consuming one here is harmless.
    pub(super) fn looks_alive(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(
            self.tcp().try_read(&mut probe),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        )
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Connects to `url`'s host and port: resolves the name, tries each
/// address in turn, sets `TCP_NODELAY`, and for `https` performs the TLS
/// handshake. Resolution and TCP connect share `timeout`; the handshake
/// gets its own. Errors say what failed and where.
pub(super) async fn connect(url: &HttpUrl, timeout: Duration) -> Result<Stream, String> {
    let host = url.host_unbracketed();
    let port = url.port();
    let tcp = match tokio::time::timeout(timeout, connect_tcp(host, port)).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(format!(
                "connect to {}:{port}: connect timeout after {} ms",
                url.host(),
                timeout.as_millis()
            ))
        }
    };
    match url.scheme() {
        Scheme::Http => Ok(Stream::Tcp(tcp)),
        Scheme::Https => tls_handshake(tcp, host, timeout).await,
    }
}

/// Resolves `host` and connects to the first address that accepts.
async fn connect_tcp(host: &str, port: u16) -> Result<TcpStream, String> {
    let addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("resolve {host}: {}", io_message(&e)))?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(tcp) => {
                tcp.set_nodelay(true)
                    .map_err(|e| format!("set TCP_NODELAY on {addr}: {}", io_message(&e)))?;
                return Ok(tcp);
            }
            Err(e) => last = Some(format!("connect to {addr}: {}", io_message(&e))),
        }
    }
    Err(last.unwrap_or_else(|| format!("resolve {host}: no addresses")))
}

#[cfg(feature = "tls")]
async fn tls_handshake(tcp: TcpStream, host: &str, timeout: Duration) -> Result<Stream, String> {
    use tokio_rustls::rustls::pki_types::ServerName;

    let config = tls::config().map_err(|e| format!("TLS handshake with {host}: {e}"))?;
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| format!("TLS handshake with {host}: invalid server name"))?;
    let connector = tokio_rustls::TlsConnector::from(config);
    match tokio::time::timeout(timeout, connector.connect(name, tcp)).await {
        Ok(Ok(tls)) => Ok(Stream::Tls(Box::new(tls))),
        Ok(Err(e)) => Err(format!("TLS handshake with {host}: {}", io_message(&e))),
        Err(_) => Err(format!(
            "TLS handshake with {host}: timeout after {} ms",
            timeout.as_millis()
        )),
    }
}

#[cfg(not(feature = "tls"))]
async fn tls_handshake(_tcp: TcpStream, host: &str, _timeout: Duration) -> Result<Stream, String> {
    Err(format!(
        "https://{host}: HTTPS is not supported: mcpwire-tokio was built without its `tls` feature"
    ))
}

#[cfg(feature = "tls")]
mod tls {
    use std::sync::{Arc, OnceLock};

    use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

    /// The process-wide client configuration, built on first use: ring
    /// provider, safe default protocol versions, web PKI roots, ALPN
    /// `http/1.1` (the only protocol the codec speaks).
    pub(super) fn config() -> Result<Arc<ClientConfig>, String> {
        static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
        CONFIG.get_or_init(build).clone()
    }

    fn build() -> Result<Arc<ClientConfig>, String> {
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS configuration: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// An I/O error's text without the ` (os error N)` suffix: `Connection
/// refused`, `Connection reset by peer`, ...
pub(super) fn io_message(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_owned(),
        _ => text,
    }
}
