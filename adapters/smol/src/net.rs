//! The network primitives on smol: async-net (resolution, TCP with
//! `TCP_NODELAY`) and futures-rustls (the TLS handshake); and [`Stream`],
//! the plain-or-TLS byte stream an exchange reads and writes.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use smol::io::{AsyncRead, AsyncWrite};
use smol::net::TcpStream;

/// A connected byte stream to an HTTP server: plain TCP or TLS over TCP.
#[derive(Debug)]
pub enum Stream {
    /// `http`.
    Tcp(TcpStream),
    /// `https` (boxed: the TLS state is large).
    #[cfg(feature = "tls")]
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
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

    /// Whether an idle connection still looks usable, without waiting: a
    /// peek finds nothing to read (no EOF, no stray bytes). The peek is
    /// made on the socket itself (non-blocking), not through the reactor:
    /// async-net's `peek` polled once registers interest when it finds
    /// nothing, which costs an `epoll_ctl` on every reuse and leaves a
    /// waker behind that the response's arrival then wakes for nothing.
    pub(crate) fn looks_alive(&self) -> bool {
        let tcp: std::sync::Arc<smol::Async<std::net::TcpStream>> = self.tcp().clone().into();
        let mut probe = [0u8; 1];
        loop {
            match tcp.get_ref().peek(&mut probe) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return e.kind() == io::ErrorKind::WouldBlock,
                // EOF, or bytes nobody asked for.
                Ok(_) => return false,
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
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

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_close(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// Resolves `host` and `port` with async-net's resolver.
pub(crate) async fn resolve(host: String, port: u16) -> io::Result<Vec<SocketAddr>> {
    smol::net::resolve((host.as_str(), port)).await
}

/// Connects to `addr`, with `TCP_NODELAY`.
pub(crate) async fn connect_tcp(addr: SocketAddr) -> io::Result<TcpStream> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// The TLS handshake with futures-rustls, with the client's configuration.
#[cfg(feature = "tls")]
pub(crate) fn tls_handshake(
    tcp: TcpStream,
    host: String,
    tls: &mcpwire_adapter::tls::ClientTls,
) -> impl std::future::Future<Output = io::Result<Stream>> + Send {
    let config = tls.rustls_config();
    async move {
        let name = mcpwire_adapter::tls::server_name(&host).map_err(io::Error::other)?;
        let tls = futures_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await?;
        Ok(Stream::Tls(Box::new(tls)))
    }
}

/// No TLS in this build.
#[cfg(not(feature = "tls"))]
pub(crate) fn tls_handshake(
    _tcp: TcpStream,
    _host: String,
    _tls: &mcpwire_adapter::tls::ClientTls,
) -> impl std::future::Future<Output = io::Result<Stream>> + Send {
    std::future::ready(Err(io::Error::other(
        "HTTPS is not supported: mcpwire-smol was built without its `tls` feature",
    )))
}
