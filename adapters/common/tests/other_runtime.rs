//! Bringing another executor: [`Runtime`] implemented here for a
//! thread-per-task executor over the `async-io` reactor (neither tokio nor
//! smol: every spawned task gets a std thread running
//! `futures_lite::future::block_on`), and the whole client working on it
//! against a real server process and a real loopback HTTP server. Unix
//! only: `async-io` watches pipes there, and only sockets on Windows.
#![cfg(unix)]

use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use mcpwire_adapter::process::KillOnDrop;
use mcpwire_adapter::runtime::{Child, SpawnError};
use mcpwire_adapter::{BoxFuture, CallOptions, Client, Runtime, ServerConfig};
use mcpwire_tests::suite::support::{http_server, server_bin};
use serde_json::json;

/// Tasks are threads; I/O and timers are async-io's.
struct Threads;

impl Runtime for Threads {
    const NAME: &'static str = "threads-runtime";
    const VERSION: &'static str = "0";

    type Tcp = Async<TcpStream>;
    type Stream = Async<TcpStream>;

    fn spawn(task: BoxFuture<()>) -> Result<(), SpawnError> {
        std::thread::Builder::new()
            .name("threads-runtime-task".into())
            .spawn(move || futures_lite::future::block_on(task))
            .map(drop)
            .map_err(SpawnError::Thread)
    }

    fn sleep_until(deadline: Instant) -> BoxFuture<()> {
        Box::pin(async move {
            Timer::at(deadline).await;
        })
    }

    fn spawn_child(server: &ServerConfig) -> io::Result<Child> {
        let mut child = mcpwire_adapter::process::command(server)?.spawn()?;
        let stdin = Async::new(child.stdin.take().expect("piped"))?;
        let stdout = Async::new(child.stdout.take().expect("piped"))?;
        let stderr = Async::new(child.stderr.take().expect("piped"))?;
        let pid = child.id();
        // The exit is waited for on a thread; dropping the wait before
        // the exit kills the child (the `Child::wait` contract).
        let (guard, exited) = KillOnDrop::new(pid);
        let (tx, rx) = async_channel::bounded(1);
        std::thread::spawn(move || {
            let status = child.wait();
            exited.store(true, Ordering::SeqCst);
            let _ = tx.send_blocking(status);
        });
        Ok(Child {
            pid: Some(pid),
            group: mcpwire_adapter::process::group_of(Some(pid)),
            // Not told: the era probe counts from its own sending.
            stdin_probe: None,
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            read_now: None,
            wait: Box::pin(async move {
                let _guard = guard;
                rx.recv()
                    .await
                    .unwrap_or_else(|_| Err(io::Error::other("waiter gone")))
            }),
        })
    }

    fn resolve(host: &str, port: u16) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send {
        let addrs = (host, port).to_socket_addrs().map(Iterator::collect);
        std::future::ready(addrs)
    }

    async fn connect_tcp(addr: SocketAddr) -> io::Result<Self::Tcp> {
        let tcp = Async::<TcpStream>::connect(addr).await?;
        tcp.get_ref().set_nodelay(true)?;
        Ok(tcp)
    }

    fn plain(tcp: Self::Tcp) -> Self::Stream {
        tcp
    }

    fn tls_handshake(
        _tcp: Self::Tcp,
        _host: &str,
        _tls: &mcpwire_adapter::tls::ClientTls,
    ) -> impl Future<Output = io::Result<Self::Stream>> + Send {
        std::future::ready(Err(io::Error::other("no TLS in this runtime")))
    }

    fn looks_alive(stream: &Self::Stream) -> bool {
        let mut probe = [0u8; 1];
        matches!(
            stream.get_ref().peek(&mut probe),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        )
    }
}

/// Runs `f` as a task of the runtime and waits for it on this thread.
fn run<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    Threads::spawn(Box::pin(async move {
        let _ = tx.send(f.await);
    }))
    .unwrap();
    rx.recv_timeout(Duration::from_secs(30))
        .expect("task ended")
}

#[test]
fn stdio_calls_progress_notifications_and_close() {
    run(async {
        let client = Client::<Threads>::connect(ServerConfig::stdio(server_bin()))
            .await
            .unwrap();
        assert_eq!(client.server().server_info.name, "mcpwire-test-server");
        assert_eq!(client.list_tools().await.unwrap().len(), 20);
        let r = client
            .call_tool("echo", json!({"message": "hi"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "Echo: hi");
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        let options = CallOptions::new().on_progress(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        client
            .call_tool_with("slow", json!({"steps": 3, "ms": 10}), options)
            .await
            .unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 3);
        // Concurrent calls from tasks on other threads.
        let mut tasks = Vec::new();
        for i in 0..8 {
            let client = client.clone();
            let (tx, rx) = async_channel::bounded(1);
            Threads::spawn(Box::pin(async move {
                let r = client
                    .call_tool("echo", json!({"message": i.to_string()}))
                    .await;
                let _ = tx.send(r.map(|r| r.text())).await;
            }))
            .unwrap();
            tasks.push(rx);
        }
        for (i, rx) in tasks.into_iter().enumerate() {
            assert_eq!(rx.recv().await.unwrap().unwrap(), format!("Echo: {i}"));
        }
        client.close().await.unwrap();
    });
}

#[test]
fn a_timeout_and_a_dropped_call_end_on_time() {
    run(async {
        let client = Client::<Threads>::connect(ServerConfig::stdio(server_bin()))
            .await
            .unwrap();
        let started = Instant::now();
        let e = client
            .call_tool_with(
                "slow",
                json!({"steps": 600, "ms": 60_000}),
                CallOptions::new().timeout(Duration::from_millis(200)),
            )
            .await
            .unwrap_err();
        assert!(e.is_timeout(), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not the server's 60 s"
        );
        // A dropped call is cancelled; the connection goes on.
        let call = client.call_tool("slow", json!({"steps": 600, "ms": 60_000}));
        let raced = futures_lite::future::or(
            async {
                call.await.ok();
                false
            },
            async {
                Timer::after(Duration::from_millis(50)).await;
                true
            },
        )
        .await;
        assert!(raced);
        client.ping().await.unwrap();
        client.close().await.unwrap();
    });
}

#[test]
fn streamable_http_on_a_loopback_socket() {
    let server = http_server(&[]);
    let url = server.url.clone();
    run(async move {
        let client = Client::<Threads>::connect(ServerConfig::http(url))
            .await
            .unwrap();
        assert_eq!(client.transport(), "streamable-http");
        let r = client
            .call_tool("echo", json!({"message": "over http"}))
            .await
            .unwrap();
        assert_eq!(r.text(), "Echo: over http");
        client.close().await.unwrap();
    });
}
