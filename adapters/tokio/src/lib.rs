//! # mcpwire-tokio — an MCP client on tokio
//!
//! The [`mcpwire`] core decides everything about the protocol; this crate
//! performs it on tokio: child processes for stdio servers, TCP (and TLS
//! with the `tls` feature) for Streamable HTTP and legacy SSE servers, and
//! timers.
//!
//! ```no_run
//! use mcpwire_tokio::{CallOptions, Client, ServerConfig};
//! use serde_json::json;
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), mcpwire_tokio::Error> {
//! let client = Client::connect(ServerConfig::stdio("my-server").arg("--flag")).await?;
//! let tools = client.list_tools().await?; // follows cursors
//! let out = client.call_tool("echo", json!({"message": "hi"})).await?;
//! let out = client
//!     .call_tool_with("slow", json!({}), CallOptions::new()
//!         .timeout(Duration::from_secs(5))
//!         .on_progress(|p| eprintln!("{}/{:?}", p.progress, p.total)))
//!     .await?;
//! client.close().await?; // graceful
//! # let _ = (tools, out); Ok(()) }
//! ```
//!
//! - Every call completes exactly once; a call whose future is dropped, or
//!   whose [`CancelToken`] fires, is cancelled and the server is told
//!   (`notifications/cancelled`).
//! - Server requests (roots, sampling, elicitation) are answered by the
//!   handlers set in [`ConnectOptions`]; only those capabilities are
//!   declared. Anything else gets "method not found", never silence.
//! - One task owns the connection; writes are awaited (backpressure); the
//!   timer is reset only when the deadline changes.
//! - Dropping the last [`Client`] closes gracefully in the background; the
//!   child is killed if the runtime goes away first.
//!
//! The client itself is runtime-neutral ([`mcpwire_adapter`], shared with
//! `mcpwire-smol`); this crate is its [`Runtime`] for tokio: `Client` is
//! `mcpwire_adapter::Client<Tokio>`. Call it from within a tokio runtime
//! (current-thread or multi-thread).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
mod http_tests;
mod net;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use mcpwire_adapter::runtime::Child;

pub use mcpwire_adapter::auth;
pub use mcpwire_adapter::era::{self, EraCache};
pub use mcpwire_adapter::net::{Network, NetworkOptions, ProxyChoice};
pub use mcpwire_adapter::types;
#[cfg(feature = "keychain")]
pub use mcpwire_adapter::KeychainStore;
pub use mcpwire_adapter::{ext, EraFinding, ToolUi, TraceContext, TraceError};
pub use mcpwire_adapter::{
    methods, BoxFuture, CallError, CallOptions, CancelToken, ConnectOptions, Error, ErrorObject,
    Handler, Notifications, Progress, ProgressFn, RequestError, RequestHandler, Runtime,
    ServerConfig, ServerNotification, SpawnError, Stats,
};
pub use mcpwire_adapter::{
    AuthOptions, AuthorizeError, EnterpriseIdpOptions, FileStore, LoopbackRedirect, MemoryStore,
    RedirectHandler, StoreError, StoreLock, TokenSource, TokenSourceError, TokenStore,
};
pub use mcpwire_adapter::{ProxyEnv, TlsSettings};
pub use net::{Io, Stream};

/// An MCP client on tokio (see [`mcpwire_adapter::Client`] for its
/// methods).
pub type Client = mcpwire_adapter::Client<Tokio>;

/// The tokio [`Runtime`]: tasks on the current runtime, its timers,
/// `tokio::process` children and `tokio::net` sockets (TLS with
/// tokio-rustls).
#[derive(Debug, Clone, Copy, Default)]
pub struct Tokio;

impl Runtime for Tokio {
    const NAME: &'static str = "mcpwire-tokio";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    type Tcp = Io<tokio::net::TcpStream>;
    type Stream = Io<Stream>;

    fn spawn(task: BoxFuture<()>) -> Result<(), SpawnError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| SpawnError::runtime("no tokio runtime"))?;
        runtime.spawn(task);
        Ok(())
    }

    fn sleep_until(deadline: Instant) -> BoxFuture<()> {
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }

    fn in_context() -> bool {
        tokio::runtime::Handle::try_current().is_ok()
    }

    fn spawn_child(server: &ServerConfig) -> io::Result<Child> {
        let mut cmd = tokio::process::Command::from(mcpwire_adapter::process::command(server)?);
        let mut child = cmd.kill_on_drop(true).spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("child pipes missing"));
        };
        #[cfg(unix)]
        let stdin_probe = mcpwire_adapter::process::StdinProbe::of(&stdin);
        #[cfg(not(unix))]
        let stdin_probe = None;
        #[cfg(unix)]
        let (stdout, read_now): (Box<dyn futures_io::AsyncRead + Send + Unpin>, _) = {
            let read_now = mcpwire_adapter::process::ReadNow::default();
            let stdout = net::Stdout {
                io: stdout,
                read_now: read_now.clone(),
            };
            (Box::new(stdout), Some(read_now))
        };
        #[cfg(not(unix))]
        let (stdout, read_now) = (Box::new(Io(stdout)), None);
        Ok(Child {
            pid: child.id(),
            group: mcpwire_adapter::process::group_of(child.id()),
            stdin_probe,
            stdin: Box::new(Io(stdin)),
            stdout,
            read_now,
            stderr: Box::new(Io(stderr)),
            wait: Box::pin(async move { child.wait().await }),
        })
    }

    fn resolve(host: &str, port: u16) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send {
        net::resolve(host.to_owned(), port)
    }

    fn connect_tcp(addr: SocketAddr) -> impl Future<Output = io::Result<Self::Tcp>> + Send {
        let connect = net::connect_tcp(addr);
        async move { connect.await.map(Io) }
    }

    fn plain(tcp: Self::Tcp) -> Self::Stream {
        Io(Stream::Tcp(tcp.0))
    }

    fn tls_handshake(
        tcp: Self::Tcp,
        host: &str,
        tls: &mcpwire_adapter::tls::ClientTls,
    ) -> impl Future<Output = io::Result<Self::Stream>> + Send {
        let handshake = net::tls_handshake(tcp.0, host.to_owned(), tls);
        async move { handshake.await.map(Io) }
    }

    fn looks_alive(stream: &Self::Stream) -> bool {
        stream.0.looks_alive()
    }
}
