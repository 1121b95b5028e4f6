//! HTTP exchanges with ureq, for the blocking executor. An exchange that
//! brings a call's answer ([`HttpRequest::carries`]) runs on that call's
//! own thread while it waits (no hand-off at all); every other one (the
//! GET listener, notifications, answers to the server, calls that may be
//! cancelled from elsewhere) runs on a pool of worker threads that are
//! reused, never one thread per exchange. Either way the head, the body
//! in chunks as they arrive (so SSE streams work) and the end or failure
//! go to the session.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use mcpwire::exchange::{ExchangeId, HttpMethod, HttpRequest, ResponseHead};
use ureq::http;

use crate::exec::Shared;

/// How long an idle worker waits for an exchange before it ends.
const WORKER_IDLE: Duration = Duration::from_secs(30);

/// Idle keep-alive connections kept (per host and in all): enough for 64
/// calls in flight to keep theirs.
const MAX_IDLE_CONNECTIONS: usize = 128;

/// A connection's input buffer, and each thread's body buffer: one read's
/// worth (a response head must fit in it).
const BUFFER: usize = 32 * 1024;

/// The agent of one connection: status codes are answers, not errors (the
/// core reads 4xx/5xx heads and bodies); no automatic redirects (the core
/// decides); no global timeout (SSE streams are long-lived; the core owns
/// the deadlines).
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
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
        .user_agent(concat!("mcpwire-blocking/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// One event of an exchange.
pub(crate) enum HttpEvent<'a> {
    Head(ResponseHead),
    Body(&'a [u8]),
    End,
    Failed(String),
}

/// The exchanges of one connection.
pub(crate) struct Http {
    agent: ureq::Agent,
    pool: Arc<Pool>,
    /// Exchanges running, with their abort flags.
    running: HashMap<ExchangeId, Arc<AtomicBool>>,
}

impl Http {
    pub(crate) fn new() -> Self {
        Http {
            agent: agent(),
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
        Exchange {
            agent: self.agent.clone(),
            req,
            abort,
            timeout: None,
        }
    }

    /// Runs `req` on a worker.
    pub(crate) fn dispatch(&mut self, shared: Weak<Shared>, req: HttpRequest) {
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
    agent: ureq::Agent,
    req: HttpRequest,
    abort: Arc<AtomicBool>,
    /// Give up after this long (a call's own deadline, plus a little, so
    /// that its thread is never held past it).
    pub(crate) timeout: Option<Duration>,
}

impl Exchange {
    pub(crate) fn id(&self) -> ExchangeId {
        self.req.exchange
    }

    /// Performs it, giving each event to `report` (which says whether to
    /// go on: false once the exchange was aborted). When it stops early
    /// with a body of unknown length left, that body is returned: reading
    /// it to its end (which may take a while) lets the connection be
    /// reused, so a worker does that.
    pub(crate) fn run(self, mut report: impl FnMut(HttpEvent<'_>) -> bool) -> Option<Drain> {
        let Exchange {
            agent,
            req,
            abort,
            timeout,
        } = self;
        let response = match send(&agent, req, timeout) {
            Ok(r) => r,
            Err(e) => {
                report(HttpEvent::Failed(e));
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
        let go_on = report(HttpEvent::Head(head));
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
                        report(HttpEvent::End);
                        return None;
                    }
                    Ok(n) => {
                        read += n as u64;
                        if abort.load(Ordering::SeqCst) || !report(HttpEvent::Body(&buf[..n])) {
                            return Drain::rest(body, length, read);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        report(HttpEvent::Failed(e.to_string()));
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
    /// length says the rest is small (and so already sent), else returned
    /// for a worker.
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

    fn run(mut self) {
        let _ = std::io::copy(&mut (&mut self.0).take(MAX_DRAIN), &mut std::io::sink());
    }
}

fn send(
    agent: &ureq::Agent,
    req: HttpRequest,
    timeout: Option<Duration>,
) -> Result<http::Response<ureq::Body>, String> {
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
    ) -> Result<http::Response<ureq::Body>, String> {
        // Not a global timeout: with one, ureq resolves the host on a
        // thread of its own for every request. The response and the body
        // each get the call's time.
        let request = agent
            .configure_request(request)
            .timeout_recv_response(timeout)
            .timeout_recv_body(timeout)
            .build();
        agent.run(request).map_err(describe)
    }
    match req.method {
        HttpMethod::Post => builder
            .body(req.body)
            .map_err(|e| e.to_string())
            .and_then(|r| run(agent, r, timeout)),
        HttpMethod::Get | HttpMethod::Delete => builder
            .body(())
            .map_err(|e| e.to_string())
            .and_then(|r| run(agent, r, timeout)),
    }
}

/// A short message for a ureq failure (e.g. `Connection refused (os
/// error 111)`).
fn describe(e: ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

/// Work for a worker.
enum Job {
    /// An exchange, and where to report it.
    Exchange {
        shared: Weak<Shared>,
        exchange: Exchange,
    },
    /// The end of a body to read.
    Drain(Drain),
}

impl Job {
    fn run(self) {
        match self {
            Job::Exchange { shared, exchange } => {
                let id = exchange.id();
                let rest = exchange.run(|event| match shared.upgrade() {
                    Some(shared) => shared.http_event(id, event, None).0,
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
            let Some((_, worker)) = crate::exec::lock(&self.idle).pop() else {
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
        crate::exec::lock(&p.idle).push((me, tx.clone()));
        drop(p);
        job = match rx.recv_timeout(WORKER_IDLE) {
            Ok(j) => Some(j),
            Err(RecvTimeoutError::Timeout) => {
                let Some(p) = pool.upgrade() else { return };
                let mut idle = crate::exec::lock(&p.idle);
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
