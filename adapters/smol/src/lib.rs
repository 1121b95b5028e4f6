//! # mcpwire-smol — an MCP client on smol
//!
//! The [`mcpwire`] core decides everything about the protocol, and the
//! runtime-neutral [`mcpwire_adapter`] drives it; this crate is the
//! [`Runtime`] that performs it on smol: `async-process` children for
//! stdio servers, `async-net` TCP (and TLS with futures-rustls, feature
//! `tls`) for Streamable HTTP and legacy SSE servers, `async-io` timers.
//! The API is the one of `mcpwire-tokio`, name for name.
//!
//! ```no_run
//! use mcpwire_smol::{CallOptions, Client, ServerConfig};
//! use serde_json::json;
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), mcpwire_smol::Error> {
//! smol::block_on(async {
//!     let client = Client::connect(ServerConfig::stdio("my-server").arg("--flag")).await?;
//!     let tools = client.list_tools().await?; // follows cursors
//!     let out = client.call_tool("echo", json!({"message": "hi"})).await?;
//!     let out = client
//!         .call_tool_with("slow", json!({}), CallOptions::new()
//!             .timeout(Duration::from_secs(5))
//!             .on_progress(|p| eprintln!("{}/{:?}", p.progress, p.total)))
//!         .await?;
//!     client.close().await?; // graceful
//!     # let _ = (tools, out);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! - Every call completes exactly once; a call whose future is dropped, or
//!   whose [`CancelToken`] fires, is cancelled and the server is told.
//! - Server requests (roots, sampling, elicitation) are answered by the
//!   handlers set in [`ConnectOptions`].
//! - The connection's tasks run on smol's global executor (`smol::spawn`),
//!   so a [`Client`] works from any executor: `smol::block_on`, an
//!   `async-executor` on several threads, or another runtime's thread.
//! - Dropping the last [`Client`] closes gracefully in the background.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod net;
#[cfg(unix)]
mod pipes;

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
pub use net::Stream;

/// An MCP client on smol (see [`mcpwire_adapter::Client`] for its
/// methods).
pub type Client = mcpwire_adapter::Client<Smol>;

/// The smol [`Runtime`]: tasks on smol's global executor, `async-io`
/// timers, `async-process` children and `async-net` sockets (TLS with
/// futures-rustls).
#[derive(Debug, Clone, Copy, Default)]
pub struct Smol;

impl Runtime for Smol {
    const NAME: &'static str = "mcpwire-smol";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    type Tcp = smol::net::TcpStream;
    type Stream = Stream;

    fn spawn(task: BoxFuture<()>) -> Result<(), SpawnError> {
        smol::spawn(task).detach();
        Ok(())
    }

    fn sleep_until(deadline: Instant) -> BoxFuture<()> {
        Box::pin(async move {
            smol::Timer::at(deadline).await;
        })
    }

    #[cfg(unix)]
    fn spawn_child(server: &ServerConfig) -> io::Result<Child> {
        pipes::spawn_child(server)
    }

    #[cfg(not(unix))]
    fn spawn_child(server: &ServerConfig) -> io::Result<Child> {
        let mut cmd = smol::process::Command::from(mcpwire_adapter::process::command(server)?);
        let mut child = cmd.kill_on_drop(true).spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("child pipes missing"));
        };
        Ok(Child {
            pid: Some(child.id()),
            group: mcpwire_adapter::process::group_of(Some(child.id())),
            stdin_probe: None,
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            read_now: None,
            wait: Box::pin(async move { child.status().await }),
        })
    }

    fn resolve(host: &str, port: u16) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send {
        net::resolve(host.to_owned(), port)
    }

    fn connect_tcp(addr: SocketAddr) -> impl Future<Output = io::Result<Self::Tcp>> + Send {
        net::connect_tcp(addr)
    }

    fn plain(tcp: Self::Tcp) -> Self::Stream {
        Stream::Tcp(tcp)
    }

    fn tls_handshake(
        tcp: Self::Tcp,
        host: &str,
        tls: &mcpwire_adapter::tls::ClientTls,
    ) -> impl Future<Output = io::Result<Self::Stream>> + Send {
        net::tls_handshake(tcp, host.to_owned(), tls)
    }

    fn looks_alive(stream: &Self::Stream) -> bool {
        stream.looks_alive()
    }
}
