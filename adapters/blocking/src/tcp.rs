//! The TCP connection under ureq: ureq's own `TcpConnector` and
//! `TcpTransport` do the same job with more system calls (the client's,
//! one pooled JSON call, `mcpwire-bench profile http`: 9.96 against
//! 4.00):
//!
//! - **the liveness probe**: ureq asks whether a pooled connection is
//!   still open when it pools it and again when it takes it. Its probe
//!   switches the socket to non-blocking, reads a byte and switches it
//!   back (three system calls); here it is one `recv` that peeks without
//!   waiting (`MSG_PEEK | MSG_DONTWAIT`). The answer is the same: open
//!   while nothing is there to read; closed at the end of the stream, on
//!   an error, or when the server sent bytes nobody asked for.
//! - **the request's head and body**: ureq hands a request over in two
//!   writes (its head, then its body), and the server gets two segments.
//!   A small write is held here until the next one or until the answer is
//!   awaited, so that a request goes out in one `writev`.
//! - **the read timeout**: each call asks for its own (its deadline, a few
//!   microseconds shorter than the last call's), and ureq sets
//!   `SO_RCVTIMEO` whenever it changes. Here it is set again only when
//!   the one in place is shorter than asked or longer by more than 50 ms
//!   (or an eighth of what is asked, if less): a read may end that much
//!   later, never sooner. A read interrupted by a signal goes on with
//!   only the time left, as ureq's does.
//!
//! Proxies (`CONNECT`) and TLS are still ureq's, chained around this
//! transport as in its default connector.

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Weak};
use std::time::Instant;

use ureq::unversioned::transport::time::Duration;
use ureq::unversioned::transport::{
    Buffers, ConnectProxyConnector, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout,
    ShutdownHandle, Transport,
};
use ureq::{Error, Timeout};

/// The connector chain of the blocking client's agents: a `CONNECT`
/// tunnel when the route has a proxy, else a connection of ours, then TLS
/// for `https` (ureq's default chain, with this connector for TCP).
pub(crate) fn connector() -> impl Connector<()> {
    let chain = ().chain(ConnectProxyConnector::default()).chain(TcpConnector);
    #[cfg(feature = "tls")]
    let chain = chain.chain(ureq::unversioned::transport::RustlsConnector::default());
    chain
}

thread_local! {
    /// Set by [`without_waiting`]: a read that would wait fails instead.
    static NO_WAIT: Cell<bool> = const { Cell::new(false) };
    /// The connection this thread last read from, and whether those bytes
    /// ended with the end of a chunked body ([`rest_is_here`]).
    static LAST_READ: RefCell<Option<(Weak<TcpStream>, bool)>> = const { RefCell::new(None) };
}

/// The end of a chunked body, after its last chunk's line end.
const CHUNKED_END: &[u8] = b"\r\n0\r\n\r\n";

/// Whether the rest of the body this thread is reading is here already:
/// the last bytes read ended with the end of a chunked body (plain HTTP;
/// ureq holds them), or the connection has bytes or its end waiting. Then
/// [`without_waiting`] reads it to its end; otherwise it may come later
/// (a server that writes a stream's end apart from its last event, as
/// uvicorn does) and is better read where waiting costs nobody.
pub(crate) fn rest_is_here() -> bool {
    LAST_READ.with(|last| match &*last.borrow() {
        Some((stream, ended)) => *ended || stream.upgrade().is_some_and(|s| readable(&s)),
        None => false,
    })
}

/// Runs `f` (reads through ureq on this thread) with reads that never
/// wait: one that would fails with `WouldBlock` instead, and ureq then
/// closes its connection rather than pool it.
pub(crate) fn without_waiting<T>(f: impl FnOnce() -> T) -> T {
    /// Puts the mode back as it was, also if `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_WAIT.with(|w| w.set(self.0));
        }
    }
    let _restore = Restore(NO_WAIT.with(|w| w.replace(true)));
    f()
}

/// Held writes beyond this go out at once (a request's head is a few
/// hundred bytes).
const HOLD: usize = 4096;

/// The most a timeout kept in place may exceed the one asked for (and at
/// most an eighth of it): a call's own thread cannot be interrupted in a
/// read, so this is how late it may give up.
const SLACK: std::time::Duration = std::time::Duration::from_millis(50);

/// The least time a connect to one of several addresses gets.
const MIN_PER_ADDRESS: std::time::Duration = std::time::Duration::from_millis(10);

/// Opens the TCP connection, unless one was opened before it in the chain
/// (a tunnel through a proxy).
#[derive(Debug)]
pub(crate) struct TcpConnector;

impl<In: Transport> Connector<In> for TcpConnector {
    type Out = Either<In, Tcp>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, Error> {
        if chained.is_some() {
            return Ok(chained.map(Either::A));
        }
        let stream = connect(details)?;
        let config = details.config;
        if config.no_delay() {
            stream.set_nodelay(true)?;
        }
        let stream = Arc::new(stream);
        (details.register_shutdown)(Arc::downgrade(&stream) as Weak<dyn ShutdownHandle>)?;
        Ok(Some(Either::B(Tcp {
            stream,
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
            held: Vec::new(),
            held_timeout: NextTimeout::default(),
            read_timeout: None,
            write_timeout: None,
        })))
    }
}

/// The first of the resolved addresses that accepts. As ureq does, the
/// connect timeout is shared among them, halving from one to the next
/// (two addresses: two thirds, then a third), so that an address that
/// drops packets (a broken IPv6 route) leaves time for the next; an
/// address that refuses or cannot be routed to passes to the next at
/// once; any other failure is the answer.
fn connect(details: &ConnectionDetails) -> Result<TcpStream, Error> {
    let started = Instant::now();
    let budget = details.timeout.not_zero().map(|t| *t);
    let count = details.addrs.len();
    let total_weight = 2.0 * (1.0 - 0.5_f64.powi(count as i32));
    let mut weight = 1.0_f64;
    let mut last = None;
    for addr in &details.addrs {
        let attempt = match budget {
            Some(total) => {
                let left = total.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(Error::Timeout(Timeout::Connect));
                }
                let share = total.mul_f64(weight / total_weight).max(MIN_PER_ADDRESS);
                TcpStream::connect_timeout(addr, share.min(left))
            }
            None => TcpStream::connect(addr),
        };
        weight /= 2.0;
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                if budget.is_some_and(|total| started.elapsed() >= total) {
                    return Err(Error::Timeout(Timeout::Connect));
                }
                last = Some(Error::Timeout(Timeout::Connect));
            }
            Err(e) if address_only(&e) => last = Some(Error::Io(e)),
            Err(e) => return Err(Error::Io(e)),
        }
    }
    Err(last.unwrap_or_else(|| {
        Error::Io(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!("no address to connect to ({})", addrs(&details.addrs)),
        ))
    }))
}

/// Whether a connect's failure concerns only the address tried (refused,
/// or no route to it), so that the next one may still work.
fn address_only(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
            | io::ErrorKind::NetworkDown
            | io::ErrorKind::AddrNotAvailable
    )
}

fn addrs(addrs: &[SocketAddr]) -> String {
    let all: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    all.join(", ")
}

/// One TCP connection (see the module).
pub(crate) struct Tcp {
    /// Shared (weakly) with ureq's shutdown handle.
    stream: Arc<TcpStream>,
    buffers: LazyBuffers,
    /// A small write not sent yet (kept after a failed write: the
    /// connection is then never pooled).
    held: Vec<u8>,
    /// The write timeout ureq gave with the held write.
    held_timeout: NextTimeout,
    /// The timeouts set on the socket (`None`: none).
    read_timeout: Option<std::time::Duration>,
    write_timeout: Option<std::time::Duration>,
}

impl std::fmt::Debug for Tcp {
    /// The peer only: never the held or buffered bytes (a request's
    /// headers).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tcp")
            .field("peer", &self.stream.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

impl Tcp {
    /// Sends what is held, then `more`, in one write where they fit.
    fn send(&mut self, more: Option<usize>, timeout: NextTimeout) -> Result<(), Error> {
        let timeout = timeout.for_write();
        let after = checked(timeout)?;
        set_timeout(&self.stream, &mut self.write_timeout, after, false)?;
        let more = match more {
            Some(n) => &self.buffers.output()[..n],
            None => &[][..],
        };
        write_both(&self.stream, &self.held, more).map_err(|e| io_error(e, timeout.reason))?;
        self.held.clear();
        Ok(())
    }

    /// Sends what is held, with the timeout it was given.
    fn flush(&mut self) -> Result<(), Error> {
        if self.held.is_empty() {
            return Ok(());
        }
        self.send(None, self.held_timeout)
    }
}

/// Writes `a` then `b`, gathered into one system call while both remain.
fn write_both(mut stream: &TcpStream, a: &[u8], b: &[u8]) -> io::Result<()> {
    let (mut a, mut b) = (a, b);
    while !a.is_empty() {
        let n = match stream.write_vectored(&[io::IoSlice::new(a), io::IoSlice::new(b)]) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => other?,
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let from_a = n.min(a.len());
        a = &a[from_a..];
        b = &b[n - from_a..];
    }
    stream.write_all(b)
}

/// The time left, or ureq's timeout error when there is none.
fn checked(timeout: NextTimeout) -> Result<Option<std::time::Duration>, Error> {
    if timeout.after.is_zero() {
        return Err(Error::Timeout(timeout.reason));
    }
    Ok(match timeout.after {
        Duration::Exact(d) => Some(d),
        Duration::NotHappening => None,
    })
}

/// Sets the socket's read (or write) timeout to `want`, unless the one in
/// place (`set`) is no shorter and longer by at most an eighth and
/// [`SLACK`].
fn set_timeout(
    stream: &TcpStream,
    set: &mut Option<std::time::Duration>,
    want: Option<std::time::Duration>,
    read: bool,
) -> io::Result<()> {
    let keep = match (*set, want) {
        (None, None) => true,
        (Some(have), Some(want)) => have >= want && have - want <= (want / 8).min(SLACK),
        _ => false,
    };
    if keep {
        return Ok(());
    }
    let done = if read {
        stream.set_read_timeout(want)
    } else {
        stream.set_write_timeout(want)
    };
    match done {
        Ok(()) => *set = want,
        // As ureq: macOS refuses a new timeout once the peer closed with
        // request bytes unread, and the answer may still be readable; the
        // read or write says what happened (the one in place stays known).
        Err(e) if cfg!(target_os = "macos") && e.kind() == io::ErrorKind::InvalidInput => {}
        Err(e) => return Err(e),
    }
    Ok(())
}

fn io_error(e: io::Error, reason: Timeout) -> Error {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Error::Timeout(reason),
        _ => Error::Io(e),
    }
}

impl Transport for Tcp {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        if self.held.len() + amount <= HOLD {
            // Held until the next write or the wait for the answer.
            self.held
                .extend_from_slice(&self.buffers.output()[..amount]);
            self.held_timeout = timeout;
            return Ok(());
        }
        self.send(Some(amount), timeout)
    }

    /// ureq's default, but what is held goes out first even when the
    /// answer is buffered already (it would otherwise be skipped).
    fn maybe_await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush()?;
        if self.buffers.can_use_input() {
            return Ok(true);
        }
        self.await_input(timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush()?;
        if NO_WAIT.with(Cell::get) && !readable(&self.stream) {
            return Err(Error::Io(io::ErrorKind::WouldBlock.into()));
        }
        let timeout = timeout.for_read();
        let after = checked(timeout)?;
        set_timeout(&self.stream, &mut self.read_timeout, after, true)?;
        let started = std::time::Instant::now();
        let input = self.buffers.input_append_buf();
        let n = loop {
            match (&*self.stream).read(input) {
                // Interrupted by a signal: again, with only the time left
                // (the one in place may be longer than asked).
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if let Some(asked) = after {
                        let left = asked.saturating_sub(started.elapsed());
                        if left.is_zero() {
                            return Err(Error::Timeout(timeout.reason));
                        }
                        self.stream.set_read_timeout(Some(left))?;
                        self.read_timeout = Some(left);
                    }
                }
                other => break other.map_err(|e| io_error(e, timeout.reason))?,
            }
        };
        if n > 0 {
            let ended = input[..n].ends_with(CHUNKED_END);
            LAST_READ.with(|last| *last.borrow_mut() = Some((Arc::downgrade(&self.stream), ended)));
        }
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        self.held.is_empty() && !readable(&self.stream)
    }
}

/// Whether a read would return at once (bytes, the end of the stream or
/// an error), looked at without taking a byte or waiting. Its negation is
/// the liveness probe: a pooled connection is open with nothing unasked
/// for in it when a read would wait.
#[cfg(unix)]
fn readable(stream: &TcpStream) -> bool {
    use rustix::net::{recv, RecvFlags};
    let mut byte = [0u8; 1];
    !matches!(
        recv(stream, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Err(rustix::io::Errno::WOULDBLOCK)
    )
}

/// [`readable`] where a read cannot be told not to wait: non-blocking
/// around the peek, as ureq does.
#[cfg(not(unix))]
fn readable(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let would_wait =
        matches!(stream.peek(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    stream.set_nonblocking(false).is_err() || !would_wait
}

#[cfg(test)]
mod tests {
    //! The transport under a ureq agent, against servers on real loopback
    //! sockets (std threads).

    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";

    /// How a test server treats each connection after its first answer.
    #[derive(Clone, Copy)]
    enum After {
        KeepAlive,
        Close,
        /// Sends bytes nobody asked for.
        Garbage,
        /// Reads the next request and never answers it.
        Silent,
    }

    /// A test server: its port, its accepts, the bytes of each
    /// connection's first read, and a word after each answer and what
    /// follows it (`After`) are done.
    struct Server {
        port: u16,
        accepts: Arc<AtomicUsize>,
        reads: mpsc::Receiver<Vec<u8>>,
        answered: mpsc::Receiver<()>,
    }

    impl Server {
        /// Waits until the server has answered (and closed, or sent its
        /// garbage): what the client's probe will see is there.
        fn answered(&self) {
            self.answered.recv_timeout(Duration::from_secs(10)).unwrap();
        }
    }

    /// A server answering `OK` to each request (a head and a body of its
    /// `Content-Length`).
    fn server(after: After) -> Server {
        let (tx, reads) = mpsc::channel();
        let (done, answered) = mpsc::channel();
        let (port, accepts) = listen(move |stream| serve(stream, after, tx.clone(), done.clone()));
        Server {
            port,
            accepts,
            reads,
            answered,
        }
    }

    fn serve(
        mut stream: TcpStream,
        after: After,
        reads: mpsc::Sender<Vec<u8>>,
        done: mpsc::Sender<()>,
    ) {
        let mut buf = vec![0u8; 256 * 1024];
        let mut seen = Vec::new();
        loop {
            let n = match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if seen.is_empty() {
                let _ = reads.send(buf[..n].to_vec());
            }
            seen.extend_from_slice(&buf[..n]);
            let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if seen.len() < end + 4 + length {
                continue;
            }
            seen.drain(..end + 4 + length);
            if stream.write_all(OK).is_err() {
                return;
            }
            match after {
                After::KeepAlive => {}
                After::Close => {
                    drop(stream);
                    let _ = done.send(());
                    return;
                }
                After::Garbage => {
                    let _ = stream.write_all(b"surprise");
                }
                After::Silent => {
                    let _ = done.send(());
                    // Holds the connection open, reading, never answering.
                    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
                    return;
                }
            }
            let _ = done.send(());
        }
    }

    fn agent() -> ureq::Agent {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build();
        ureq::Agent::with_parts(
            config,
            connector(),
            ureq::unversioned::resolver::DefaultResolver::default(),
        )
    }

    /// POSTs `body`; the status, or ureq's error.
    fn post(
        agent: &ureq::Agent,
        port: u16,
        body: Vec<u8>,
        timeout: Option<std::time::Duration>,
    ) -> Result<u16, ureq::Error> {
        let request = ureq::http::Request::post(format!("http://127.0.0.1:{port}/mcp"))
            .body(body)
            .map_err(ureq::Error::from)?;
        let request = agent
            .configure_request(request)
            .timeout_recv_response(timeout)
            .build();
        let mut response = agent.run(request)?;
        let _ = response.body_mut().read_to_vec();
        Ok(response.status().as_u16())
    }

    #[test]
    fn a_request_goes_out_in_one_write_and_its_connection_is_reused() {
        let Server {
            port,
            accepts,
            reads,
            ..
        } = server(After::KeepAlive);
        let agent = agent();
        for _ in 0..3 {
            assert_eq!(
                post(&agent, port, b"{\"a\":1}".to_vec(), None).unwrap(),
                200
            );
        }
        assert_eq!(accepts.load(Ordering::SeqCst), 1);
        // The server's first read held the head and the body.
        let first = reads.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(first.ends_with(b"\r\n\r\n{\"a\":1}"), "{first:?}");
        // A body larger than what is held goes out whole too.
        let big = vec![b'x'; 3 * HOLD];
        assert_eq!(post(&agent, port, big, None).unwrap(), 200);
    }

    /// Two calls to a server that treats its connections `after` each
    /// answer as said: both answered, on two connections.
    fn a_second_connection_after(after: After) {
        let server = server(after);
        let agent = agent();
        assert_eq!(
            post(&agent, server.port, b"{}".to_vec(), None).unwrap(),
            200
        );
        // The close (or the bytes) is there: the probe sees it.
        server.answered();
        assert_eq!(
            post(&agent, server.port, b"{}".to_vec(), None).unwrap(),
            200
        );
        assert_eq!(server.accepts.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_pooled_connection_the_server_closed_is_replaced() {
        a_second_connection_after(After::Close);
    }

    #[test]
    fn a_connection_with_unasked_for_bytes_is_not_reused() {
        a_second_connection_after(After::Garbage);
    }

    /// On one connection, the read timeout kept in place after a long one
    /// is not kept for a much shorter one.
    #[test]
    fn a_shorter_timeout_after_a_long_one_still_fires() {
        let server = server(After::Silent);
        let agent = agent();
        let long = Some(Duration::from_secs(20));
        assert_eq!(
            post(&agent, server.port, b"{}".to_vec(), long).unwrap(),
            200
        );
        server.answered();
        let started = Instant::now();
        let short = Some(Duration::from_millis(300));
        let err = post(&agent, server.port, b"{}".to_vec(), short).unwrap_err();
        assert!(matches!(err, ureq::Error::Timeout(_)), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // The same connection: the long timeout had been set on it.
        assert_eq!(server.accepts.load(Ordering::SeqCst), 1);
    }

    /// When a test server writes the end of its chunked bodies.
    #[derive(Clone, Copy, PartialEq)]
    enum End {
        /// With the first chunk, in one write.
        With,
        /// A moment later, in a write of its own.
        Later,
        /// Never: the stream stays open.
        Never,
    }

    /// A server answering every request with a chunked body whose first
    /// chunk is `hello`, its end written as `end` says.
    fn chunked_server(end: End) -> (u16, Arc<AtomicUsize>) {
        listen(move |mut stream| {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    return;
                }
                let mut answer =
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec();
                if end == End::With {
                    answer.extend_from_slice(b"0\r\n\r\n");
                }
                if stream.write_all(&answer).is_err() {
                    return;
                }
                match end {
                    End::With => {}
                    End::Later => {
                        std::thread::sleep(Duration::from_secs(1));
                        if stream.write_all(b"0\r\n\r\n").is_err() {
                            return;
                        }
                    }
                    End::Never => {
                        std::thread::sleep(Duration::from_secs(10));
                        return;
                    }
                }
            }
        })
    }

    /// A loopback listener that runs `serve` on a thread of its own for
    /// each connection: its port, and how many it accepted.
    fn listen(serve: impl Fn(TcpStream) + Send + Clone + 'static) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepts = Arc::new(AtomicUsize::new(0));
        let counter = accepts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                counter.fetch_add(1, Ordering::SeqCst);
                let serve = serve.clone();
                std::thread::spawn(move || serve(stream));
            }
        });
        (port, accepts)
    }

    /// Reads the first five bytes of a POST's body; then (with `wait`,
    /// once [`rest_is_here`] says so) the rest without waiting: whether
    /// the rest was here right after the first chunk, and whether the read
    /// reached its end.
    fn first_chunk_then_the_rest(agent: &ureq::Agent, port: u16, wait: bool) -> (bool, bool) {
        let request = ureq::http::Request::post(format!("http://127.0.0.1:{port}/mcp"))
            .body(b"{}".to_vec())
            .unwrap();
        let response = agent.run(request).unwrap();
        let mut body = response.into_body().into_reader();
        let mut first = [0u8; 5];
        body.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"hello");
        let here = rest_is_here();
        let deadline = Instant::now() + Duration::from_secs(20);
        while wait && !rest_is_here() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let read = without_waiting(|| std::io::copy(&mut body, &mut std::io::sink())).is_ok();
        (here, read)
    }

    #[test]
    fn an_end_written_with_the_last_chunk_is_here_and_read_without_waiting() {
        let (port, accepts) = chunked_server(End::With);
        let agent = agent();
        for _ in 0..3 {
            assert_eq!(first_chunk_then_the_rest(&agent, port, false), (true, true));
        }
        assert_eq!(accepts.load(Ordering::SeqCst), 1);
    }

    /// The end written apart from the last chunk (a second later) is not
    /// here at once (the executor then has a worker wait for it); once it
    /// came, it is, and is read to its end: the connection is reused.
    #[test]
    fn an_end_written_later_is_not_here_until_it_came() {
        let (port, accepts) = chunked_server(End::Later);
        let agent = agent();
        assert_eq!(first_chunk_then_the_rest(&agent, port, true), (false, true));
        assert_eq!(first_chunk_then_the_rest(&agent, port, true), (false, true));
        assert_eq!(accepts.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_rest_read_without_waiting_gives_up_on_an_open_stream_at_once() {
        let (port, accepts) = chunked_server(End::Never);
        let agent = agent();
        let started = Instant::now();
        assert_eq!(
            first_chunk_then_the_rest(&agent, port, false),
            (false, false)
        );
        assert_eq!(
            first_chunk_then_the_rest(&agent, port, false),
            (false, false)
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // Its connection was closed, not pooled: the second call opened one.
        assert_eq!(accepts.load(Ordering::SeqCst), 2);
        // And reads wait again afterwards.
        assert!(!NO_WAIT.with(Cell::get));
    }

    #[test]
    fn the_timeout_in_place_is_kept_only_when_no_shorter_and_a_little_longer() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let s = |ms| Some(Duration::from_millis(ms));
        let mut set = None;
        set_timeout(&stream, &mut set, s(8000), true).unwrap();
        assert_eq!(set, s(8000));
        // Shorter than the one in place by at most the slack: kept.
        set_timeout(&stream, &mut set, s(7960), true).unwrap();
        assert_eq!(set, s(8000));
        assert_eq!(stream.read_timeout().unwrap(), s(8000));
        // By more than the slack: set.
        set_timeout(&stream, &mut set, s(7900), true).unwrap();
        assert_eq!(set, s(7900));
        // A short one is kept only within an eighth of it.
        set_timeout(&stream, &mut set, s(1000), true).unwrap();
        assert_eq!(stream.read_timeout().unwrap(), s(1000));
        set_timeout(&stream, &mut set, s(900), true).unwrap();
        assert_eq!(set, s(900));
        set_timeout(&stream, &mut set, s(890), true).unwrap();
        assert_eq!(set, s(900));
        // Longer: set.
        set_timeout(&stream, &mut set, s(2000), true).unwrap();
        assert_eq!(stream.read_timeout().unwrap(), s(2000));
        set_timeout(&stream, &mut set, None, true).unwrap();
        assert_eq!(stream.read_timeout().unwrap(), None);
        assert_eq!(set, None);
    }
}
