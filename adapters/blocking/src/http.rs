//! HTTP exchanges with ureq, for the blocking executor. An exchange that
//! brings a call's answer ([`HttpRequest::carries`]) runs on that call's
//! own thread while it waits (no hand-off at all); every other one (the
//! GET listener, notifications, answers to the server, calls that may be
//! cancelled from elsewhere) runs on a pool of worker threads that are
//! reused, never one thread per exchange. Either way the head, the body
//! in chunks as they arrive (so SSE streams work) and the end or failure
//! go to the session.
//!
//! Proxies and TLS follow the client's [`Network`], as on tokio and smol:
//! the core picks each URL's route (`*_PROXY` / `NO_PROXY`, read once by
//! the adapter layer), and ureq gets one agent per route, each with that
//! proxy or none — never ureq's own reading of the environment — and the
//! same trust store, client certificate and verification switch as the
//! async adapters. ureq opens a `CONNECT` tunnel for every URL through a
//! proxy, plain `http` included (tokio and smol send those in absolute
//! form).

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use mcpwire::exchange::proxy::{ProxyError, ProxyUrl, Route};
use mcpwire::exchange::{ExchangeId, HttpMethod, HttpRequest, HttpUrl, ResponseHead};
use mcpwire::Input;
use mcpwire_adapter::net::Network;
use mcpwire_adapter::tls::ClientTls;
use ureq::http;

/// Where a worker reports an exchange's events: the executor, which the
/// HTTP layer knows only through this (no import cycle). `true`: go on.
pub(crate) trait Report: Send + Sync {
    fn event(self: Arc<Self>, input: Input<'_>) -> bool;
}

/// How long an idle worker waits for an exchange before it ends.
const WORKER_IDLE: Duration = Duration::from_secs(30);

/// Idle keep-alive connections kept (per host and in all): enough for 64
/// calls in flight to keep theirs.
const MAX_IDLE_CONNECTIONS: usize = 128;

/// A connection's input buffer, and each thread's body buffer: one read's
/// worth (a response head must fit in it).
const BUFFER: usize = 32 * 1024;

/// The agent of one connection and route: status codes are answers, not
/// errors (the core reads 4xx/5xx heads and bodies); no automatic
/// redirects (the core decides); no global timeout (SSE streams are
/// long-lived; the core owns the deadlines); `proxy` or none, whatever
/// the environment says (the route is the core's decision); the
/// client's TLS.
fn agent(proxy: Option<&ProxyUrl>, tls: &ClientTls) -> Result<ureq::Agent, String> {
    let proxy = proxy.map(ureq_proxy).transpose()?;
    let builder = ureq::Agent::config_builder()
        .proxy(proxy)
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .max_idle_connections(MAX_IDLE_CONNECTIONS)
        .max_idle_connections_per_host(MAX_IDLE_CONNECTIONS)
        // Per connection (ureq's default is 128 KiB each): with 64 calls
        // in flight that was 16 MiB of buffers.
        .input_buffer_size(BUFFER)
        .output_buffer_size(BUFFER / 2)
        .timeout_connect(Some(Duration::from_secs(30)))
        .user_agent(concat!("mcpwire-blocking/", env!("CARGO_PKG_VERSION")));
    #[cfg(feature = "tls")]
    let builder = builder.tls_config(tls_config(tls));
    #[cfg(not(feature = "tls"))]
    let _ = tls;
    Ok(ureq::Agent::with_parts(
        builder.build(),
        crate::tcp::connector(),
        ureq::unversioned::resolver::DefaultResolver::default(),
    ))
}

/// ureq's proxy for ours (an HTTP proxy, which ureq tunnels through with
/// `CONNECT`; the target's name is resolved by the proxy).
fn ureq_proxy(proxy: &ProxyUrl) -> Result<ureq::Proxy, String> {
    let mut builder = ureq::Proxy::builder(ureq::ProxyProtocol::Http)
        .host(proxy.host())
        .port(proxy.port())
        .resolve_target(false);
    if let Some(user) = proxy.user() {
        builder = builder.username(user);
    }
    if let Some(password) = proxy.password() {
        builder = builder.password(password);
    }
    builder.build().map_err(|e| format!("proxy {proxy}: {e}"))
}

/// ureq's TLS configuration for ours: the same roots (the system's store
/// or the fallback, plus the extra CAs), client certificate and
/// verification switch.
#[cfg(feature = "tls")]
fn tls_config(tls: &ClientTls) -> ureq::tls::TlsConfig {
    use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};

    let material = tls.material();
    let roots: Vec<Certificate<'static>> = material
        .roots
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    // The key as PEM: ureq makes its keys from PEM or from DER with a
    // kind it does not export. The adapter layer has parsed it already.
    let client = material.client.as_ref().and_then(|identity| {
        let chain: Vec<Certificate<'static>> = identity
            .chain
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        let key = PrivateKey::from_pem(&identity.key_pem).ok()?;
        Some(ClientCert::new_with_certs(&chain, key))
    });
    TlsConfig::builder()
        .root_certs(RootCerts::new_with_certs(&roots))
        .client_cert(client)
        .disable_verification(material.insecure)
        .build()
}

/// The exchanges of one connection.
pub(crate) struct Http {
    network: Network,
    /// One agent per route (`None`: directly), made when first needed.
    agents: HashMap<Option<ProxyUrl>, ureq::Agent>,
    pool: Arc<Pool>,
    /// Exchanges running, with their abort flags.
    running: HashMap<ExchangeId, Arc<AtomicBool>>,
}

impl Http {
    pub(crate) fn new(network: Network) -> Self {
        Http {
            network,
            agents: HashMap::new(),
            pool: Arc::new(Pool::default()),
            running: HashMap::new(),
        }
    }

    /// Whether the exchange still runs (not aborted, not ended).
    pub(crate) fn is_running(&self, id: ExchangeId) -> bool {
        self.running.contains_key(&id)
    }

    /// The exchange ended.
    pub(crate) fn ended(&mut self, id: ExchangeId) {
        self.running.remove(&id);
    }

    /// Stops exchange `id`: nothing more of it is reported, and its thread
    /// drops the connection at its next chunk.
    pub(crate) fn abort(&mut self, id: ExchangeId) {
        if let Some(flag) = self.running.remove(&id) {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// Prepares `req` to run on the calling thread.
    pub(crate) fn inline(&mut self, req: HttpRequest) -> Exchange {
        let abort = Arc::new(AtomicBool::new(false));
        self.running.insert(req.exchange, abort.clone());
        let (agent, proxy) = match self.network.route(&req.url) {
            Ok(route) => {
                let proxy = match route {
                    Route::Direct => None,
                    Route::Via(p) => Some(p.clone()),
                };
                let agent = match self.agents.get(&proxy) {
                    Some(agent) => Ok(agent.clone()),
                    None => agent(proxy.as_ref(), self.network.tls()).inspect(|agent| {
                        self.agents.insert(proxy.clone(), agent.clone());
                    }),
                };
                (agent, proxy)
            }
            Err(e) => (Err(e.to_string()), None),
        };
        Exchange {
            agent,
            proxy,
            tls: self.network.tls().clone(),
            req,
            abort,
            timeout: None,
        }
    }

    /// Runs `req` on a worker.
    pub(crate) fn dispatch(&mut self, shared: Weak<dyn Report>, req: HttpRequest) {
        let exchange = self.inline(req);
        self.pool.submit(Job::Exchange { shared, exchange });
    }

    /// Reads the rest of a body on a worker.
    pub(crate) fn drain(&self, rest: Drain) {
        self.pool.submit(Job::Drain(rest));
    }
}

/// One exchange, ready to run.
pub(crate) struct Exchange {
    /// The agent of its route, or why there is none.
    agent: Result<ureq::Agent, String>,
    /// The proxy it goes through, for messages.
    proxy: Option<ProxyUrl>,
    tls: ClientTls,
    req: HttpRequest,
    abort: Arc<AtomicBool>,
    /// Give up after this long (a call's own deadline, plus a little, so
    /// that its thread is never held past it).
    pub(crate) timeout: Option<Duration>,
}

impl Exchange {
    /// Performs it, giving each event to `report` (which says whether to
    /// go on: false once the exchange was aborted). When it stops early
    /// with a body of unknown length left, that body is returned: read to
    /// its end, the connection is reused ([`Drain::run`] on a worker,
    /// [`Drain::here`] on a call's thread).
    pub(crate) fn run(self, mut report: impl FnMut(Input<'_>) -> bool) -> Option<Drain> {
        let Exchange {
            agent,
            proxy,
            tls,
            mut req,
            abort,
            timeout,
        } = self;
        let exchange = req.exchange;
        let agent = match agent {
            Ok(agent) => agent,
            Err(e) => {
                report(Input::HttpFailed {
                    exchange,
                    error: &e,
                });
                return None;
            }
        };
        // What a failure is explained with, borrowed: made into words only
        // if the exchange fails.
        let body = std::mem::take(&mut req.body);
        let failure = Failure {
            url: &req.url,
            proxy: proxy.as_ref(),
            tls: &tls,
        };
        let response = match send(&agent, &req, body, timeout) {
            Ok(r) => r,
            Err(e) => {
                let error = failure.describe(e);
                report(Input::HttpFailed {
                    exchange,
                    error: &error,
                });
                return None;
            }
        };
        if abort.load(Ordering::SeqCst) {
            return None;
        }
        let length = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let head = ResponseHead {
            status: response.status().as_u16(),
            reason: response
                .status()
                .canonical_reason()
                .unwrap_or_default()
                .to_string(),
            version: if response.version() == http::Version::HTTP_10 {
                0
            } else {
                1
            },
            headers: response
                .headers()
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
                .collect(),
        };
        let go_on = report(Input::HttpHead {
            exchange,
            head: &head,
        });
        let mut body = response.into_body().into_reader();
        if !go_on {
            return Drain::rest(body, length, 0);
        }
        READ_BUFFER.with_borrow_mut(|buf| {
            let buf = &mut buf[..];
            let mut read = 0u64;
            loop {
                match body.read(buf) {
                    Ok(0) => {
                        report(Input::HttpEnd { exchange });
                        return None;
                    }
                    Ok(n) => {
                        read += n as u64;
                        if abort.load(Ordering::SeqCst)
                            || !report(Input::HttpBody {
                                exchange,
                                data: &buf[..n],
                            })
                        {
                            return Drain::rest(body, length, read);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let error = failure.tls_reason(&e).unwrap_or_else(|| e.to_string());
                        report(Input::HttpFailed {
                            exchange,
                            error: &error,
                        });
                        return None;
                    }
                }
            }
        })
    }
}

thread_local! {
    /// Each thread's body buffer, reused by every exchange it runs (one
    /// exchange at a time per thread): zeroing 64 KiB per call cost more
    /// than the whole rest of the call.
    static READ_BUFFER: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0u8; BUFFER].into_boxed_slice());
}

/// The rest of a body nobody wants, to read to its end so that its
/// connection goes back to the pool.
pub(crate) struct Drain(ureq::BodyReader<'static>);

/// The most of a body read only to keep its connection.
const MAX_DRAIN: u64 = 64 * 1024;

impl Drain {
    /// What is left of `body` after `read` bytes: read here when its
    /// length says the rest is small (and so already sent), dropped (the
    /// connection closed) when it is large, and returned when its length
    /// is unknown ([`Drain::run`], [`Drain::here`]).
    fn rest(mut body: ureq::BodyReader<'static>, length: Option<u64>, read: u64) -> Option<Drain> {
        match length {
            Some(total) if total.saturating_sub(read) <= MAX_DRAIN => {
                let _ = std::io::copy(&mut (&mut body).take(MAX_DRAIN), &mut std::io::sink());
                None
            }
            // Large: not worth the wait; dropping closes the connection.
            Some(_) => None,
            None => Some(Drain(body)),
        }
    }

    /// Reads it to its end, waiting for it (a worker's exchange: nobody
    /// waits on this thread).
    fn run(mut self) {
        let _ = std::io::copy(&mut (&mut self.0).take(MAX_DRAIN), &mut std::io::sink());
    }

    /// On a call's own thread, which must return the answer now: when the
    /// rest is here already ([`tcp::rest_is_here`](crate::tcp::rest_is_here):
    /// the end of an SSE answer's stream often comes with the answer), it
    /// is read here without waiting and the connection goes back to the
    /// pool at once; else it is given back, for a worker. Handing every
    /// rest to a worker cost a thread wake-up and a hand-back each call
    /// (4.6 futex calls a call): pinned, SSE sequential calls/s rose from
    /// 23k to 35k without it. Should the rest stop short all the same (a
    /// server that keeps writing), its connection is closed, not held.
    pub(crate) fn here(mut self) -> Option<Drain> {
        if !crate::tcp::rest_is_here() {
            return Some(self);
        }
        let _ = crate::tcp::without_waiting(|| {
            std::io::copy(&mut (&mut self.0).take(MAX_DRAIN), &mut std::io::sink())
        });
        None
    }
}

fn send(
    agent: &ureq::Agent,
    req: &HttpRequest,
    body: Vec<u8>,
    timeout: Option<Duration>,
) -> Result<http::Response<ureq::Body>, ureq::Error> {
    let mut builder = http::Request::builder()
        .method(req.method.as_str())
        .uri(req.url.to_string());
    for (name, value) in &req.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    fn run<S: ureq::AsSendBody>(
        agent: &ureq::Agent,
        request: http::Request<S>,
        timeout: Option<Duration>,
    ) -> Result<http::Response<ureq::Body>, ureq::Error> {
        // Not a global timeout: with one, ureq resolves the host on a
        // thread of its own for every request. The response and the body
        // each get the call's time.
        let request = agent
            .configure_request(request)
            .timeout_recv_response(timeout)
            .timeout_recv_body(timeout)
            .build();
        agent.run(request)
    }
    match req.method {
        HttpMethod::Post => builder
            .body(body)
            .map_err(ureq::Error::from)
            .and_then(|r| run(agent, r, timeout)),
        HttpMethod::Get | HttpMethod::Delete => builder
            .body(())
            .map_err(ureq::Error::from)
            .and_then(|r| run(agent, r, timeout)),
    }
}

/// What an exchange's failure is explained with.
struct Failure<'a> {
    url: &'a HttpUrl,
    proxy: Option<&'a ProxyUrl>,
    tls: &'a ClientTls,
}

impl Failure<'_> {
    /// `host:port`, as a tunnel asks for it.
    fn target(&self) -> String {
        format!("{}:{}", self.url.host(), self.url.port())
    }

    /// A message for a ureq failure, worded as the async adapters word
    /// theirs: TLS's reason (which certificate, what is wrong), the
    /// proxy's refusal (named, without its password), or ureq's own text
    /// (e.g. `Connection refused (os error 111)`).
    fn describe(&self, e: ureq::Error) -> String {
        if let Some(why) = self.tls_reason(&e) {
            return why;
        }
        let text = match e {
            ureq::Error::ConnectProxyFailed(reason) => {
                if let Some(proxy) = self.proxy {
                    return proxy_failure(proxy, &self.target(), &reason).to_string();
                }
                reason
            }
            ureq::Error::Io(io) => io.to_string(),
            other => other.to_string(),
        };
        match self.proxy {
            // Connecting to the proxy itself failed.
            Some(proxy) => format!("proxy {proxy}: {text}"),
            None => text,
        }
    }
}

impl Failure<'_> {
    /// TLS's reason, wherever ureq wrapped it: a `ureq::Error` (which
    /// reports no `source`), an `io::Error` around one, or the rustls
    /// error itself.
    fn tls_reason(&self, e: &(dyn std::error::Error + 'static)) -> Option<String> {
        if let Some(ureq) = e.downcast_ref::<ureq::Error>() {
            return match ureq {
                ureq::Error::Io(io) => self.tls_reason(io),
                #[cfg(feature = "tls")]
                ureq::Error::Rustls(tls) => self.tls.explain(self.url.host_unbracketed(), tls),
                _ => None,
            };
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if inner.is::<ureq::Error>() {
                    return self.tls_reason(inner);
                }
            }
        }
        self.tls.explain(self.url.host_unbracketed(), e)
    }
}

/// Our error for ureq's `CONNECT` refusal (its text is `proxy server
/// responded 407/Proxy Authentication Required`, or `proxy server did not
/// respond`).
fn proxy_failure(proxy: &ProxyUrl, target: &str, reason: &str) -> ProxyError {
    let status = reason
        .strip_prefix("proxy server responded ")
        .and_then(|rest| rest.split('/').next())
        .and_then(|code| code.parse::<u16>().ok());
    match status {
        Some(407) => ProxyError::AuthenticationRequired {
            proxy: proxy.to_string(),
            sent_credentials: proxy.authorization().is_some(),
            challenge: None,
        },
        // ureq gives the status twice (`403/403`): the reason phrase is the
        // standard one.
        Some(status) => ProxyError::TunnelRefused {
            proxy: proxy.to_string(),
            target: target.to_owned(),
            status,
            reason: http::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or_default()
                .to_owned(),
        },
        None => ProxyError::Closed {
            proxy: proxy.to_string(),
            target: target.to_owned(),
        },
    }
}

/// Work for a worker.
enum Job {
    /// An exchange, and where to report it.
    Exchange {
        shared: Weak<dyn Report>,
        exchange: Exchange,
    },
    /// The end of a body to read.
    Drain(Drain),
}

impl Job {
    fn run(self) {
        match self {
            Job::Exchange { shared, exchange } => {
                let rest = exchange.run(|event| match shared.upgrade() {
                    Some(shared) => shared.event(event),
                    None => false,
                });
                if let Some(rest) = rest {
                    rest.run();
                }
            }
            Job::Drain(rest) => rest.run(),
        }
    }
}

/// Worker threads, reused: each idle one waits on a channel of its own.
#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<(usize, Sender<Job>)>>,
    next: AtomicUsize,
}

impl Pool {
    /// Hands `job` to an idle worker, or to a new one.
    fn submit(self: &Arc<Self>, mut job: Job) {
        loop {
            let Some((_, worker)) = crate::lock(&self.idle).pop() else {
                break;
            };
            match worker.send(job) {
                Ok(()) => return,
                Err(mpsc::SendError(back)) => job = back,
            }
        }
        let pool = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("mcpwire-http".into())
            .spawn(move || worker(pool, job));
        if let Err(e) = spawned {
            tracing::error!("cannot start an HTTP worker thread: {e}");
        }
    }
}

fn worker(pool: Weak<Pool>, first: Job) {
    let (tx, rx) = mpsc::channel::<Job>();
    let mut job = Some(first);
    while let Some(j) = job.take() {
        j.run();
        let Some(p) = pool.upgrade() else { return };
        let me = p.next.fetch_add(1, Ordering::Relaxed);
        crate::lock(&p.idle).push((me, tx.clone()));
        drop(p);
        job = match rx.recv_timeout(WORKER_IDLE) {
            Ok(j) => Some(j),
            Err(RecvTimeoutError::Timeout) => {
                let Some(p) = pool.upgrade() else { return };
                let mut idle = crate::lock(&p.idle);
                match idle.iter().position(|(k, _)| *k == me) {
                    Some(i) => {
                        idle.remove(i);
                        None
                    }
                    // Taken just now: a job is on its way.
                    None => {
                        drop(idle);
                        rx.recv().ok()
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => None,
        };
    }
}
