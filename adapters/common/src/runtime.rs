//! What an adapter provides: the [`Runtime`] trait, the little the shared
//! client needs from an async runtime (tasks, timers, child processes and
//! TCP/TLS connections), and helpers written once over it.
//!
//! ```text
//!  Client<R> ──► session + I/O ──► R::spawn / R::sleep_until   (the driver task,
//!                   │                                          handlers, timers)
//!                   ├──► R::spawn_child                        (stdio servers)
//!                   └──► HttpClient<R> ──► R::resolve, R::connect_tcp,
//!                                          (a proxy's CONNECT on R::Tcp),
//!                                          R::tls_handshake    (HTTP servers)
//! ```
//!
//! # Bringing another executor
//!
//! `Runtime` is the way to run the client on an executor other than tokio
//! and smol: implement its eight items (the streams are `futures-io`
//! traits, so any reactor's sockets and pipes fit, through a small wrapper
//! if they use other traits), and `Client<YourRuntime>` is the whole
//! client — every protocol rule, the session, the HTTP exchange runner and
//! the pool come with it. Pipes and sockets are polled from whichever task
//! waits for a call, with wakers of the session's own: a reactor only has
//! to wake the waker it was last given, as every reactor does.
//! `tests/other_runtime.rs` implements it for a thread-per-task executor
//! over the `async-io` reactor (about 120 lines) and runs stdio and HTTP
//! calls, progress, timeouts, cancellation and concurrent tasks on it.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_io::{AsyncRead, AsyncWrite};
use mcpwire::config::ServerConfig;

use crate::handlers::BoxFuture;

/// Why a task or a thread could not be started ([`Runtime::spawn`], and
/// the threads of [`crate::auth`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// A thread could not be started (the OS refused).
    #[error("cannot start a thread: {0}")]
    Thread(#[source] io::Error),
    /// The runtime cannot run the task (e.g. tokio called outside a
    /// runtime): its reason, as it says.
    #[error(transparent)]
    Runtime(mcpwire::auth::BoxError),
}

impl SpawnError {
    /// A runtime's reason (`SpawnError::runtime("no tokio runtime")`).
    pub fn runtime(reason: impl Into<mcpwire::auth::BoxError>) -> Self {
        SpawnError::Runtime(reason.into())
    }
}

/// An async runtime, as the shared client uses it. Implemented by the
/// adapters (`mcpwire-tokio`, `mcpwire-smol`); a unit type names it, as in
/// `Client<Tokio>`.
pub trait Runtime: Send + Sync + 'static {
    /// The adapter's name, sent as `clientInfo.name` unless the caller sets
    /// one.
    const NAME: &'static str;
    /// The adapter's version, sent as `clientInfo.version`.
    const VERSION: &'static str;

    /// A connected TCP socket. The exchange runner speaks a proxy's
    /// `CONNECT` on it before the TLS handshake, hence the byte-stream
    /// traits.
    type Tcp: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// A connection to an HTTP server: plain TCP or TLS over TCP.
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// Runs `task` to completion in the background (detached). Fails,
    /// dropping `task`, when there is nowhere to run it (e.g. tokio called
    /// outside a runtime); the error says why
    /// ([`SpawnError::runtime`], or [`SpawnError::Thread`] for a runtime
    /// of threads).
    fn spawn(task: BoxFuture<()>) -> Result<(), SpawnError>;

    /// Resolves at `deadline` (at once if it has passed).
    fn sleep_until(deadline: Instant) -> BoxFuture<()>;

    /// Whether the calling thread may create the runtime's resources
    /// (timers, sockets, tasks). Where it may not (tokio outside its
    /// runtime), the session's work is left to the driver task.
    fn in_context() -> bool {
        true
    }

    /// Starts the process of a stdio server (`command`, `args`, `env`,
    /// `cwd`) with piped stdin, stdout and stderr.
    fn spawn_child(server: &ServerConfig) -> io::Result<Child>;

    /// Resolves `host` (a name or an IP address) and `port`.
    fn resolve(host: &str, port: u16) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send;

    /// Connects to `addr` and sets `TCP_NODELAY`.
    fn connect_tcp(addr: SocketAddr) -> impl Future<Output = io::Result<Self::Tcp>> + Send;

    /// The stream of a plain `http` connection.
    fn plain(tcp: Self::Tcp) -> Self::Stream;

    /// The TLS handshake of an `https` connection (directly, or in a
    /// proxy's tunnel), verifying `host` with `tls`'s
    /// [`rustls_config`](crate::tls::ClientTls::rustls_config) when the
    /// adapter has TLS; otherwise an error saying it was built without.
    /// The runner explains the error ([`ClientTls::explain`]: a rustls
    /// error inside the `io::Error` becomes "the certificate of HOST ...").
    ///
    /// [`ClientTls::explain`]: crate::tls::ClientTls::explain
    fn tls_handshake(
        tcp: Self::Tcp,
        host: &str,
        tls: &crate::tls::ClientTls,
    ) -> impl Future<Output = io::Result<Self::Stream>> + Send;

    /// Whether an idle pooled connection still looks usable, without
    /// waiting: the peer has not closed it and sent nothing unsolicited. A
    /// cheap probe, not a guarantee (the exchange runner retries a dead
    /// pooled connection once).
    fn looks_alive(stream: &Self::Stream) -> bool;
}

/// A started child process, as [`Runtime::spawn_child`] hands it over.
pub struct Child {
    /// The process id (for SIGTERM and SIGKILL).
    pub pid: Option<u32>,
    /// The process group it leads, if it was started in one of its own
    /// ([`crate::process::command`] does that on Unix:
    /// [`crate::process::group_of`]).
    pub group: Option<u32>,
    /// Its stdin.
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
    /// How to ask what the child has not read of its stdin
    /// ([`StdinProbe::of`](crate::process::StdinProbe::of) on the same
    /// pipe), or `None`: the era probe then counts a server's silence from
    /// the moment the probe was written.
    pub stdin_probe: Option<crate::process::StdinProbe>,
    /// Its stdout.
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    /// Set when `stdout`'s next read can be told to try the pipe itself
    /// (its runtime learns of readiness only from its own wait, which
    /// costs more than a read: five system calls in async-io, a park in
    /// tokio). The driver then reads once right after writing a lone
    /// call: the server, woken by the write, has often answered already
    /// (at once on a shared CPU). `None`: stdout is read when the runtime
    /// says it is ready.
    pub read_now: Option<crate::process::ReadNow>,
    /// Its stderr.
    pub stderr: Box<dyn AsyncRead + Send + Unpin>,
    /// Resolves with the exit status. It owns the process handle: dropping
    /// it before the process exited must kill the process.
    pub wait: BoxFuture<io::Result<std::process::ExitStatus>>,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Waits `duration` on `R`'s timer.
pub async fn sleep<R: Runtime>(duration: Duration) {
    R::sleep_until(Instant::now() + duration).await;
}

/// Runs `fut` for at most `duration`: `None` if the time ran out first
/// (`fut` is dropped then).
pub async fn timeout<R: Runtime, F: Future>(duration: Duration, fut: F) -> Option<F::Output> {
    futures_lite::future::or(async { Some(fut.await) }, async {
        sleep::<R>(duration).await;
        None
    })
    .await
}
