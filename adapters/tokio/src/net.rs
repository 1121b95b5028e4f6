//! The network primitives on tokio (resolution, TCP with `TCP_NODELAY`,
//! the TLS handshake); [`Stream`], the plain-or-TLS byte stream an
//! exchange reads and writes; [`Io`], which lends tokio's streams and
//! pipes the `futures-io` traits; and (Unix) `Stdout`, a stdio server's
//! stdout that reads the pipe itself when the driver says so.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A tokio reader or writer seen through the `futures-io` traits.
#[derive(Debug)]
pub struct Io<T>(pub(crate) T);

impl<T: AsyncRead + Unpin> futures_io::AsyncRead for Io<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut buf = ReadBuf::new(buf);
        ready!(Pin::new(&mut self.0).poll_read(cx, &mut buf))?;
        Poll::Ready(Ok(buf.filled().len()))
    }
}

impl<T: AsyncWrite + Unpin> futures_io::AsyncWrite for Io<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// A stdio server's stdout: told so by the driver ([`ReadNow`]), it
/// reads the pipe once itself, since tokio learns of an answer only from
/// its next wait; otherwise tokio's pipe.
///
/// [`ReadNow`]: mcpwire_adapter::process::ReadNow
#[cfg(unix)]
pub(crate) struct Stdout {
    pub(crate) io: tokio::process::ChildStdout,
    pub(crate) read_now: mcpwire_adapter::process::ReadNow,
}

#[cfg(unix)]
impl futures_io::AsyncRead for Stdout {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        use std::os::fd::AsFd;
        if self.read_now.take() {
            match mcpwire_adapter::process::read_now(self.io.as_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
        }
        let mut buf = ReadBuf::new(buf);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))?;
        Poll::Ready(Ok(buf.filled().len()))
    }
}

/// A connected byte stream to an HTTP server: plain TCP or TLS over TCP.
pub enum Stream {
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
    pub(crate) fn looks_alive(&self) -> bool {
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

/// Resolves `host` and `port` with tokio's resolver.
pub(crate) async fn resolve(host: String, port: u16) -> io::Result<Vec<SocketAddr>> {
    Ok(tokio::net::lookup_host((host.as_str(), port))
        .await?
        .collect())
}

/// Connects to `addr`, with `TCP_NODELAY`.
pub(crate) async fn connect_tcp(addr: SocketAddr) -> io::Result<TcpStream> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// The TLS handshake with tokio-rustls, with the client's configuration.
#[cfg(feature = "tls")]
pub(crate) fn tls_handshake(
    tcp: TcpStream,
    host: String,
    tls: &mcpwire_adapter::tls::ClientTls,
) -> impl std::future::Future<Output = io::Result<Stream>> + Send {
    let config = tls.rustls_config();
    async move {
        let name = mcpwire_adapter::tls::server_name(&host).map_err(io::Error::other)?;
        let tls = tokio_rustls::TlsConnector::from(config)
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
        "HTTPS is not supported: mcpwire-tokio was built without its `tls` feature",
    )))
}
