//! Performing the HTTP exchanges the core asks for (`Output::Http`), over
//! the runtime's TCP or TLS streams ([`Runtime::Stream`]), with the core's
//! HTTP/1.1 codec ([`mcpwire::codec::http1`]). The driver uses it; it is
//! public so that adapters can test their streams against it.
//!
//! An exchange takes a pooled connection to the request's origin (or
//! connects), writes the request and streams the response back as
//! [`OwnedInput`]s (`HttpHead`, `HttpBody`, `HttpEnd`, `HttpFailed`), as the bytes arrive: long-lived SSE bodies are never
//! buffered. [`HttpClient::exchange`] gives it as a future to poll in place
//! (the session's executor does, so no task hop lies between the socket
//! and the connection) with a small [`Inbox`] of its events;
//! [`HttpClient::start`] runs it on a task of its own that sends them on a
//! bounded channel. Either way a full queue stops the reads, and TCP flow
//! control stops the server.
//!
//! Each URL's route comes from the client's [`Network`]: directly, or
//! through a proxy (a `CONNECT` tunnel for `https`, the request in
//! absolute form with `Proxy-Authorization` for `http`; see `connect`).
//! OAuth's exchanges and the legacy SSE stream are exchanges like any
//! other, so they take the same route.
//!
//! Connections (see `pool` for the policy):
//! - one exchange per connection at a time, no pipelining: concurrent
//!   exchanges use separate connections;
//! - after a response that allows keep-alive (and with no stray bytes
//!   after it) the connection goes back to the pool *before* `End` is
//!   reported, so the exchange the consumer starts next can reuse it;
//! - a pooled connection that turns out dead (the write fails, or it
//!   closes or resets before the first response byte) is retried once on a
//!   fresh connection, transparently (RFC 9112 §9.3.1: the usual race with
//!   a server's keep-alive timeout). This may repeat a non-idempotent POST
//!   that a server received and then dropped without answering.

mod connect;
mod pool;

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use async_channel::Sender;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use mcpwire::codec::http1::{
    Http1Error, Http1Limits, Request, ResponseDecoder, ResponseEvent, ResponseHead,
};
use mcpwire::exchange::proxy::{ProxyError, ProxyUrl, Route};
use mcpwire::exchange::tunnel::proxy_refusal;
use mcpwire::exchange::url::Scheme;
use mcpwire::exchange::{ExchangeId, HttpMethod, HttpRequest, HttpUrl};
use mcpwire::OwnedInput;
use tracing::debug;

use crate::handlers::BoxFuture;
use crate::net::Network;
use crate::runtime::Runtime;
use crate::sync::{lock, spawn_abortable, AbortHandle};
use pool::{Conn, Key, Pool};

/// Size of each connection's read buffer: the most one `read` returns,
/// hence the largest [`OwnedInput::HttpBody`].
const READ_BUFFER: usize = 64 * 1024;

/// How long a new TLS connection whose first write failed is read for the
/// alert that says why.
const ALERT_WAIT: Duration = Duration::from_millis(200);

/// Bodies up to this size are written together with the head, in one
/// write; larger ones follow it in a second.
const INLINE_BODY: usize = 64 * 1024;

/// Connection policy; [`Default`] is what [`HttpClient::new`] uses.
#[derive(Debug, Clone, Copy)]
pub struct HttpOptions {
    /// Limit on name resolution plus TCP connect, and separately on the TLS
    /// handshake (10 s).
    pub connect_timeout: Duration,
    /// How long a connection may stay idle in the pool (30 s).
    pub idle_timeout: Duration,
    /// Most idle connections kept per (scheme, host, port, proxy) (64: enough for
    /// 64 calls in flight to reuse their connections; with 4 the bench
    /// reconnected for most calls and ran 5.5x slower).
    pub max_idle_per_origin: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_idle_per_origin: 64,
        }
    }
}

/// Performs HTTP exchanges on runtime `R`, keeping a small pool of idle
/// keep-alive connections. Cheap to clone: clones share the pool.
pub struct HttpClient<R: Runtime> {
    inner: Arc<Inner<R>>,
}

impl<R: Runtime> Clone for HttpClient<R> {
    fn clone(&self) -> Self {
        HttpClient {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<R: Runtime> {
    options: HttpOptions,
    network: Network,
    pool: Mutex<Pool<R::Stream>>,
    /// Numbers connections for the logs.
    next_serial: AtomicU64,
}

impl<R: Runtime> HttpClient<R> {
    /// A client with an empty pool and the default policy, on the
    /// network the environment describes ([`Network::from_environment`]).
    pub fn new() -> Self {
        Self::with_options(HttpOptions::default())
    }

    /// A client with an empty pool and the given policy, on the network
    /// the environment describes.
    pub fn with_options(options: HttpOptions) -> Self {
        Self::with_network(options, Network::from_environment())
    }

    /// A client with an empty pool, the given policy and `network`
    /// (proxies and TLS).
    pub fn with_network(options: HttpOptions, network: Network) -> Self {
        HttpClient {
            inner: Arc::new(Inner {
                options,
                network,
                pool: Mutex::new(Pool::new(options.max_idle_per_origin, options.idle_timeout)),
                next_serial: AtomicU64::new(1),
            }),
        }
    }

    /// Starts performing `req` on a task spawned with [`Runtime::spawn`].
    /// Its response is reported as [`OwnedInput`]s on `events`, in order:
    /// `HttpHead` (1xx interim responses skipped), `HttpBody`* (never
    /// empty: what one socket read yielded, at most 64 KiB), `HttpEnd`, or
    /// `HttpFailed` at any point; nothing after `HttpEnd` or
    /// `HttpFailed`. Awaiting a send on the bounded `events` is the
    /// backpressure for streaming bodies. If the receiver is dropped, the
    /// exchange stops and its connection is closed.
    ///
    /// If the runtime cannot spawn the task, `Failed` is sent at once (if
    /// the channel has room).
    ///
    /// Dropping the returned handle does not stop the exchange;
    /// [`ExchangeHandle::abort`] does.
    pub fn start(&self, req: HttpRequest, events: Sender<OwnedInput>) -> ExchangeHandle {
        let id = req.exchange;
        let exchange = self.prepare(&req, Sink::Channel(events.clone()));
        match spawn_abortable::<R>(Box::pin(exchange.run(req))) {
            Ok(task) => ExchangeHandle { task: Some(task) },
            Err(why) => {
                let _ = events.try_send(OwnedInput::HttpFailed {
                    exchange: id,
                    error: why.to_string(),
                });
                ExchangeHandle { task: None }
            }
        }
    }

    /// Performs `req` as a future to poll in place: its events go to the
    /// returned [`Inbox`] (at most [`Inbox::CAPACITY`] at a time: the
    /// future waits for room, i.e. for [`Inbox::drain`]). Dropping the
    /// future stops the exchange and closes its connection.
    pub fn exchange(&self, req: HttpRequest) -> (BoxFuture<()>, Arc<Inbox>) {
        let inbox = Arc::new(Inbox::default());
        let exchange = self.prepare(&req, Sink::Inbox(inbox.clone()));
        (Box::pin(exchange.run(req)), inbox)
    }

    fn prepare(&self, req: &HttpRequest, sink: Sink) -> Exchange<R> {
        let proxy = match self.inner.network.route(&req.url) {
            Ok(Route::Direct) => Ok(None),
            Ok(Route::Via(proxy)) => Ok(Some(proxy.clone())),
            Err(e) => Err(e),
        };
        Exchange {
            client: Arc::clone(&self.inner),
            id: req.exchange,
            method: req.method,
            url: req.url.clone(),
            key: Key::of(&req.url, proxy.as_ref().ok().and_then(Option::as_ref)),
            proxy,
            sink,
        }
    }

    /// Closes the idle pooled connections and stops pooling: connections
    /// of exchanges still running are closed when they end. For when the
    /// client closes.
    pub fn shutdown(&self) {
        let idle = lock(&self.inner.pool).close();
        // Closed here, outside the lock.
        drop(idle);
    }

    /// How many idle connections the pool holds (all origins).
    pub fn idle_count(&self) -> usize {
        lock(&self.inner.pool).idle_count()
    }
}

impl<R: Runtime> Default for HttpClient<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Runtime> fmt::Debug for HttpClient<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Inner<R> {
    /// A pooled connection to `key`, if one is idle and looks alive.
    fn checkout(&self, key: &Key) -> Option<Conn<R::Stream>> {
        lock(&self.pool).take(key, Instant::now(), R::looks_alive)
    }

    /// Returns a connection to the pool after a kept-alive response.
    fn checkin(&self, key: Key, conn: Conn<R::Stream>) {
        lock(&self.pool).put(key, conn, Instant::now());
    }

    /// Drops the idle connections to `key`.
    fn purge(&self, key: &Key) {
        lock(&self.pool).purge(key);
    }

    /// A new connection to `url`'s origin, along `route`.
    async fn connect(&self, url: &HttpUrl, route: Route<'_>) -> Result<Conn<R::Stream>, String> {
        let stream =
            connect::connect::<R>(url, route, self.network.tls(), self.options.connect_timeout)
                .await?;
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        match route {
            Route::Direct => debug!(conn = serial, url = %LogUrl(url), "http connected"),
            Route::Via(proxy) => {
                debug!(conn = serial, url = %LogUrl(url), %proxy, "http connected through a proxy")
            }
        }
        Ok(Conn {
            stream,
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
            serial,
        })
    }
}

/// Controls a started exchange.
#[derive(Debug)]
pub struct ExchangeHandle {
    /// `None` if the task could not be spawned.
    task: Option<AbortHandle>,
}

impl ExchangeHandle {
    /// Stops the exchange: no event is sent after this returns (events
    /// already in the channel stay there), the task is cancelled and its
    /// connection closed, never pooled. Idempotent; a no-op once the
    /// exchange has ended. Must not be called from the exchange's task.
    pub fn abort(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Why an exchange stops early.
enum Stop {
    /// Report this failure.
    Failed(String),
    /// Report nothing: aborted, or nobody is listening.
    Gone,
}

/// Why one attempt on one connection stopped.
enum AttemptError {
    /// The connection was dead before any response byte: retry on a fresh
    /// one if it was pooled.
    Stale(String),
    /// Anything else.
    Stop(Stop),
}

impl From<Stop> for AttemptError {
    fn from(stop: Stop) -> Self {
        AttemptError::Stop(stop)
    }
}

/// The request's bytes, encoded once (a retry writes them again).
struct Wire {
    /// The head, and the body when small.
    head: Vec<u8>,
    /// A large body, written after the head (else empty).
    body: Vec<u8>,
}

impl Wire {
    /// Encodes `req` with the codec: `Host` from the URL, the core's
    /// headers in order, and the body with `Content-Length` (always for
    /// POST, even empty; for other methods only when there is a body).
    /// To a `forward_proxy` (plain `http` through a proxy) the target is
    /// the absolute URL, with the proxy's `Proxy-Authorization`.
    fn encode(req: HttpRequest, forward_proxy: Option<&ProxyUrl>) -> Result<Wire, Http1Error> {
        let HttpRequest {
            method,
            url,
            mut headers,
            body,
            ..
        } = req;
        let target = match forward_proxy {
            Some(proxy) => {
                if let Some(auth) = proxy.authorization() {
                    headers.push(("Proxy-Authorization".into(), auth));
                }
                url.to_string()
            }
            None => url.target().to_owned(),
        };
        let mut request = Request::new(method.as_str(), target, url.host_header());
        request.headers = headers;
        if method == HttpMethod::Post || !body.is_empty() {
            request.body = Some(body);
        }
        let mut head = Vec::new();
        if request.body.as_ref().map_or(0, Vec::len) <= INLINE_BODY {
            request.encode(&mut head)?;
            Ok(Wire {
                head,
                body: Vec::new(),
            })
        } else {
            request.encode_head(&mut head)?;
            let body = request.body.take().unwrap_or_default();
            Ok(Wire { head, body })
        }
    }

    /// Writes the request and flushes it (through TLS, if any).
    async fn write_to<S: futures_io::AsyncWrite + Unpin>(&self, stream: &mut S) -> io::Result<()> {
        stream.write_all(&self.head).await?;
        if !self.body.is_empty() {
            stream.write_all(&self.body).await?;
        }
        stream.flush().await
    }
}

/// What one `feed` (or `finish_eof`) produced, owned: one read's events.
#[derive(Default)]
struct Batch {
    head: Option<ResponseHead>,
    /// All body slices of the read, concatenated.
    body: Vec<u8>,
    /// `Some(keep_alive)` once the response ended.
    end: Option<bool>,
}

impl Batch {
    fn push(&mut self, event: ResponseEvent<'_>) {
        match event {
            ResponseEvent::Head(head) => self.head = Some(head),
            ResponseEvent::Body(bytes) => self.body.extend_from_slice(bytes),
            ResponseEvent::End { keep_alive } => self.end = Some(keep_alive),
        }
    }
}

/// The events of one exchange polled in place, until they are drained.
#[derive(Debug, Default)]
pub struct Inbox {
    state: Mutex<InboxState>,
}

#[derive(Debug, Default)]
struct InboxState {
    events: VecDeque<OwnedInput>,
    /// The exchange, waiting for room.
    waiting: Option<Waker>,
}

impl Inbox {
    /// Events held before the exchange waits: one read's worth (a head,
    /// its body bytes and the end).
    pub const CAPACITY: usize = 4;

    /// Takes every event queued, in order, and lets the exchange go on.
    pub fn drain(&self) -> VecDeque<OwnedInput> {
        let (events, waiting) = {
            let mut state = lock(&self.state);
            (std::mem::take(&mut state.events), state.waiting.take())
        };
        if let Some(w) = waiting {
            w.wake();
        }
        events
    }

    async fn push(&self, input: OwnedInput) {
        let mut input = Some(input);
        poll_fn(|cx| {
            let mut state = lock(&self.state);
            if state.events.len() < Self::CAPACITY {
                state.events.extend(input.take());
                Poll::Ready(())
            } else {
                state.waiting = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

/// Where an exchange's events go.
enum Sink {
    Channel(Sender<OwnedInput>),
    Inbox(Arc<Inbox>),
}

/// One exchange's state.
struct Exchange<R: Runtime> {
    client: Arc<Inner<R>>,
    id: ExchangeId,
    method: HttpMethod,
    url: HttpUrl,
    key: Key,
    /// The proxy it goes through (`None`: directly), or why the proxy
    /// setting it would use is broken.
    proxy: Result<Option<ProxyUrl>, ProxyError>,
    sink: Sink,
}

impl<R: Runtime> Exchange<R> {
    fn route(&self) -> Route<'_> {
        match &self.proxy {
            Ok(Some(proxy)) => Route::Via(proxy),
            _ => Route::Direct,
        }
    }

    /// The proxy a plain `http` request is sent to in absolute form.
    fn forward_proxy(&self) -> Option<&ProxyUrl> {
        match (&self.proxy, self.url.scheme()) {
            (Ok(Some(proxy)), Scheme::Http) => Some(proxy),
            _ => None,
        }
    }
}

impl<R: Runtime> Exchange<R> {
    async fn run(self, req: HttpRequest) {
        debug!(
            exchange = %self.id,
            method = self.method.as_str(),
            url = %LogUrl(&self.url),
            purpose = ?req.purpose,
            "http exchange"
        );
        match self.perform(req).await {
            Ok(()) => {}
            Err(Stop::Gone) => debug!(exchange = %self.id, "http exchange dropped"),
            Err(Stop::Failed(error)) => {
                debug!(
                    exchange = %self.id,
                    method = self.method.as_str(),
                    url = %LogUrl(&self.url),
                    %error,
                    "http exchange failed"
                );
                let _ = self
                    .emit(OwnedInput::HttpFailed {
                        exchange: self.id,
                        error,
                    })
                    .await;
            }
        }
    }

    /// Runs the exchange on a pooled or new connection, retrying once on a
    /// new one if the pooled one was dead.
    async fn perform(&self, req: HttpRequest) -> Result<(), Stop> {
        if let Err(broken) = &self.proxy {
            return Err(Stop::Failed(broken.to_string()));
        }
        let wire = Wire::encode(req, self.forward_proxy())
            .map_err(|e| Stop::Failed(format!("invalid request: {e}")))?;
        let mut fresh_only = false;
        loop {
            let pooled = if fresh_only {
                None
            } else {
                self.client.checkout(&self.key)
            };
            let reused = pooled.is_some();
            let conn = match pooled {
                Some(conn) => conn,
                // Boxed: a connect's future (the TCP connect, a proxy's
                // CONNECT, a TLS handshake) is most of an exchange's size,
                // and a pooled connection needs none of it.
                None => Box::pin(self.client.connect(&self.url, self.route()))
                    .await
                    .map_err(Stop::Failed)?,
            };
            let serial = conn.serial;
            match self.attempt(conn, &wire, reused).await {
                Ok(()) => return Ok(()),
                Err(AttemptError::Stale(why)) if reused => {
                    debug!(
                        exchange = %self.id,
                        conn = serial,
                        %why,
                        "pooled connection was dead; retrying on a new one"
                    );
                    self.client.purge(&self.key);
                    fresh_only = true;
                }
                Err(AttemptError::Stale(why)) => return Err(Stop::Failed(why)),
                Err(AttemptError::Stop(stop)) => return Err(stop),
            }
        }
    }

    /// Writes the request on `conn` and streams the response back. On a
    /// kept-alive end, returns the connection to the pool before sending
    /// `End`; in every other case the connection is dropped (closed).
    async fn attempt(
        &self,
        mut conn: Conn<R::Stream>,
        wire: &Wire,
        reused: bool,
    ) -> Result<(), AttemptError> {
        if let Err(e) = wire.write_to(&mut conn.stream).await {
            let mut why = format!("write: {}", io_message(&e));
            if !reused && self.url.scheme() == Scheme::Https {
                // A server that ended a TLS 1.3 handshake it did not like
                // (no client certificate, say) may have said why in an
                // alert still waiting to be read.
                let read =
                    crate::runtime::timeout::<R, _>(ALERT_WAIT, conn.stream.read(&mut conn.buf))
                        .await;
                if let Some(Err(e)) = read {
                    let tls = self.client.network.tls();
                    if let Some(explained) = tls.explain(self.url.host_unbracketed(), &e) {
                        why = explained;
                    }
                }
            }
            return Err(AttemptError::Stale(why));
        }
        let mut decoder = ResponseDecoder::new(self.method.as_str(), Http1Limits::default());
        let mut received = false;
        loop {
            let n = match conn.stream.read(&mut conn.buf).await {
                Ok(n) => n,
                // TLS peers that close without `close_notify`: an EOF like
                // any other. The decoder's framing still catches a
                // truncated length-delimited or chunked body.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
                Err(e) => {
                    let error = self
                        .client
                        .network
                        .tls()
                        .explain(self.url.host_unbracketed(), &e);
                    let error = error.unwrap_or_else(|| format!("read: {}", io_message(&e)));
                    return Err(if received {
                        Stop::Failed(error).into()
                    } else {
                        AttemptError::Stale(error)
                    });
                }
            };
            let mut batch = Batch::default();
            if n == 0 {
                return match decoder.finish_eof(|event| batch.push(event)) {
                    // A body delimited by the close: complete.
                    Ok(()) => {
                        self.deliver(&mut batch, conn.serial, reused).await?;
                        Ok(self.emit(OwnedInput::HttpEnd { exchange: self.id }).await?)
                    }
                    Err(Http1Error::NoResponse) if !received => {
                        Err(AttemptError::Stale(Http1Error::NoResponse.to_string()))
                    }
                    Err(e) => Err(Stop::Failed(e.to_string()).into()),
                };
            }
            received = true;
            let fed = decoder.feed(&conn.buf[..n], |event| batch.push(event));
            // Events before an error were valid: deliver them first.
            self.deliver(&mut batch, conn.serial, reused).await?;
            let used = fed.map_err(|e| Stop::Failed(format!("malformed response: {e}")))?;
            if let Some(keep_alive) = batch.end {
                if keep_alive && used == n {
                    self.client.checkin(self.key.clone(), conn);
                } else if used < n {
                    debug!(
                        exchange = %self.id,
                        conn = conn.serial,
                        extra = n - used,
                        "bytes after the response; closing the connection"
                    );
                }
                return Ok(self.emit(OwnedInput::HttpEnd { exchange: self.id }).await?);
            }
        }
    }

    /// Sends a batch's head and body (not its end).
    async fn deliver(&self, batch: &mut Batch, serial: u64, reused: bool) -> Result<(), Stop> {
        if let Some(head) = batch.head.take() {
            if let Some(refusal) = self.forward_proxy().and_then(|p| proxy_refusal(p, &head)) {
                // The proxy's answer, not the server's.
                return Err(Stop::Failed(refusal.to_string()));
            }
            debug!(
                exchange = %self.id,
                method = self.method.as_str(),
                url = %LogUrl(&self.url),
                status = head.status,
                conn = serial,
                reused,
                "http response"
            );
            self.emit(OwnedInput::HttpHead {
                exchange: self.id,
                head,
            })
            .await?;
        }
        if !batch.body.is_empty() {
            let body = std::mem::take(&mut batch.body);
            self.emit(OwnedInput::HttpBody {
                exchange: self.id,
                data: body,
            })
            .await?;
        }
        Ok(())
    }

    /// Sends one event, waiting for room; `Gone` if the channel's receiver
    /// was dropped. (An aborted exchange is not polled again, so it sends
    /// nothing after [`ExchangeHandle::abort`] or the drop of its future.)
    async fn emit(&self, input: OwnedInput) -> Result<(), Stop> {
        match &self.sink {
            Sink::Channel(events) => events.send(input).await.map_err(|_| Stop::Gone),
            Sink::Inbox(inbox) => {
                inbox.push(input).await;
                Ok(())
            }
        }
    }
}

/// Displays a URL for the logs: origin and path, not the query (which may
/// carry credentials).
struct LogUrl<'a>(&'a HttpUrl);

impl fmt::Display for LogUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.0.scheme().as_str(),
            self.0.host_header(),
            self.0.path()
        )
    }
}

/// An I/O error's text without the ` (os error N)` suffix: `Connection
/// refused`, `Connection reset by peer`, ...
pub fn io_message(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_owned(),
        _ => text,
    }
}
