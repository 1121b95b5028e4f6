//! The one thread that owns the [`Connection`]: it performs the core's
//! outputs, feeds back what happened, and serves the [`Client`]'s calls.
//!
//! ```text
//!  Client calls, cancels, close, drop ──►┐
//!  stdout / stderr reader threads ──────►│  one mpsc channel of Events
//!  child waiter thread (exit) ──────────►│  loop: drain poll_output → perform
//!  stdin writer thread (wrote/failed) ──►│        recv_timeout(deadline - now)
//!  ureq worker threads (head/body/end) ─►│
//!  server-request handler threads ──────►┘
//! ```
//!
//! The owner never blocks on anything but its channel: stdin writes go to
//! a writer thread through a bounded `sync_channel` (what does not fit
//! waits in a backlog until the writer reports progress), HTTP exchanges
//! run on worker threads. Producers of data (pipes, HTTP bodies) take a
//! credit per chunk, returned when the owner has handled it, so a slow
//! owner bounds their memory.
//!
//! [`Client`]: crate::Client

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use mcpwire::connection::{CallError, CloseReason, Connection, Input, Output};
use mcpwire::mcp::types::InitializeResult;
use mcpwire::mcp::ServerNotification;
use mcpwire::rpc::{ErrorObject, RequestError, RequestId, RequestOptions};
use mcpwire::transport::stdio::ExitStatus;
use mcpwire::transport::{ExchangeId, ResponseHead};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::options::{ConnectOptions, ProgressFn};
use crate::process::{ChildProcess, WriteOp};

/// How long the pipes may take to deliver their last bytes once the
/// process has exited.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// Data chunks (pipes, HTTP bodies) in the channel at most.
const MAX_CHUNKS_IN_FLIGHT: usize = 256;

/// How a call ends, as the waiting thread sees it.
pub(crate) type Outcome = Result<Box<RawValue>, CallOrRequest>;

/// Either kind of failure of one call.
#[derive(Debug)]
pub(crate) enum CallOrRequest {
    Call(CallError),
    Request(RequestError),
}

/// Everything the owner hears about, on its one channel.
pub(crate) enum Event {
    Request {
        ticket: u64,
        method: String,
        params: Option<Box<RawValue>>,
        options: RequestOptions,
        progress: Option<ProgressFn>,
        reply: Sender<Outcome>,
    },
    Notify {
        method: String,
        params: Option<Box<RawValue>>,
        reply: Sender<Result<(), CallError>>,
    },
    Cancel {
        ticket: u64,
        reason: String,
    },
    Close {
        reply: Sender<()>,
    },
    /// The last `Client` handle is gone.
    Dropped,
    /// A handler's answer to a server request.
    Respond {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
    Stdout(Vec<u8>),
    StdoutEof,
    Stderr(Vec<u8>),
    StderrEof,
    Exited(ExitStatus),
    /// The stdin writer finished one operation (room in its queue).
    Wrote,
    WriteFailed(String),
    Http(ExchangeId, HttpEvent),
    /// The redirect handler's answer: the URL the user agent reached.
    Redirect(Result<String, String>),
}

/// What a ureq worker reports about its exchange.
pub(crate) enum HttpEvent {
    Head(ResponseHead),
    Body(Vec<u8>),
    End,
    Failed(String),
}

/// Counts data chunks in flight; producers wait when there are too many.
#[derive(Default)]
pub(crate) struct Credits {
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl Credits {
    /// Takes a credit, waiting while the owner is behind. False once the
    /// owner has stopped.
    pub(crate) fn acquire(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if s.1 {
                return false;
            }
            if s.0 < MAX_CHUNKS_IN_FLIGHT {
                s.0 += 1;
                return true;
            }
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn release(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0 = s.0.saturating_sub(1);
        self.cv.notify_one();
    }

    fn stop(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.1 = true;
        self.cv.notify_all();
    }
}

/// State shared with the client handles.
#[derive(Default)]
pub(crate) struct Shared {
    pub server: OnceLock<InitializeResult>,
    pub transport: OnceLock<&'static str>,
    /// Why the connection closed, once it has.
    pub closed: OnceLock<String>,
    pub notifications: Broadcast,
}

/// Fan-out of notifications to every [`Subscriber`]; each keeps at most
/// [`Broadcast::CAPACITY`] (the oldest are skipped).
#[derive(Default)]
pub(crate) struct Broadcast {
    state: Mutex<(Vec<Weak<Subscriber>>, bool)>,
}

/// One notifications queue.
#[derive(Default)]
pub(crate) struct Subscriber {
    queue: Mutex<(VecDeque<ServerNotification>, bool)>,
    cv: Condvar,
}

impl Broadcast {
    const CAPACITY: usize = 1024;

    pub(crate) fn subscribe(&self) -> Arc<Subscriber> {
        let sub = Arc::new(Subscriber::default());
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.1 {
            sub.close();
        } else {
            s.0.push(Arc::downgrade(&sub));
        }
        sub
    }

    fn send(&self, n: &ServerNotification) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0.retain(|w| match w.upgrade() {
            Some(sub) => {
                let mut q = sub.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if q.0.len() >= Self::CAPACITY {
                    q.0.pop_front();
                }
                q.0.push_back(n.clone());
                sub.cv.notify_all();
                true
            }
            None => false,
        });
    }

    fn close(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.1 = true;
        for w in s.0.drain(..) {
            if let Some(sub) = w.upgrade() {
                sub.close();
            }
        }
    }
}

impl Subscriber {
    fn close(&self) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.1 = true;
        self.cv.notify_all();
    }

    /// The next notification: `Ok(None)` once closed and empty,
    /// `Err(())` if `deadline` passed first.
    pub(crate) fn recv(&self, deadline: Option<Instant>) -> Result<Option<ServerNotification>, ()> {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(n) = q.0.pop_front() {
                return Ok(Some(n));
            }
            if q.1 {
                return Ok(None);
            }
            q = match deadline {
                None => self.cv.wait(q).unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(());
                    }
                    self.cv
                        .wait_timeout(q, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }
}

struct Waiter {
    ticket: u64,
    reply: Sender<Outcome>,
    progress: Option<ProgressFn>,
}

struct Process {
    child: ChildProcess,
    /// Exit reported by the waiter thread, held until stdout/stderr ended.
    exit: Option<ExitStatus>,
    stdout_done: bool,
    stderr_done: bool,
    /// Reports the exit even if a pipe never ends (a grandchild holds it).
    exit_deadline: Option<Instant>,
    writer: SyncSender<WriteOp>,
    /// Writes that did not fit in the writer's queue yet.
    backlog: VecDeque<WriteOp>,
}

/// The connection's owner; [`Owner::run`] is its thread.
pub(crate) struct Owner {
    conn: Connection,
    options: ConnectOptions,
    shared: Arc<Shared>,
    rx: Receiver<Event>,
    tx: Sender<Event>,
    credits: Arc<Credits>,
    waiters: HashMap<u64, Waiter>,
    tickets: HashMap<u64, u64>,
    process: Option<Process>,
    agent: Option<ureq::Agent>,
    /// Exchanges running, with their abort flags.
    exchanges: HashMap<ExchangeId, Arc<AtomicBool>>,
    close_waiters: Vec<Sender<()>>,
    ready: Option<Sender<Result<(), String>>>,
    closed: bool,
}

impl Owner {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        conn: Connection,
        options: ConnectOptions,
        shared: Arc<Shared>,
        tx: Sender<Event>,
        rx: Receiver<Event>,
        child: Option<std::process::Child>,
        ready: Sender<Result<(), String>>,
    ) -> Self {
        let credits = Arc::new(Credits::default());
        let process = child.map(|c| {
            let (child, writer) = crate::process::start(c, &tx, &credits);
            Process {
                child,
                exit: None,
                stdout_done: false,
                stderr_done: false,
                exit_deadline: None,
                writer,
                backlog: VecDeque::new(),
            }
        });
        Owner {
            conn,
            options,
            shared,
            rx,
            tx,
            credits,
            waiters: HashMap::new(),
            tickets: HashMap::new(),
            process,
            agent: None,
            exchanges: HashMap::new(),
            close_waiters: Vec::new(),
            ready: Some(ready),
            closed: false,
        }
    }

    pub(crate) fn run(mut self) {
        loop {
            self.drain();
            if self.closed {
                break;
            }
            let exit_deadline = self.process.as_ref().and_then(|p| p.exit_deadline);
            let deadline = match (self.conn.poll_timeout(), exit_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let event = match deadline {
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => {
                    let now = Instant::now();
                    if d <= now {
                        Err(RecvTimeoutError::Timeout)
                    } else {
                        self.rx.recv_timeout(d - now)
                    }
                }
            };
            match event {
                Ok(ev) => self.event(ev),
                Err(RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    if exit_deadline.is_some_and(|d| d <= now) {
                        self.report_exit_now();
                    }
                    self.conn.handle_timeout(now);
                }
                // We hold a sender ourselves: cannot happen.
                Err(RecvTimeoutError::Disconnected) => self.conn.close(Instant::now()),
            }
        }
        self.credits.stop();
        for (_, flag) in self.exchanges.drain() {
            flag.store(true, Ordering::SeqCst);
        }
        if let Some(p) = &mut self.process {
            // The core has seen the exit, so the waiter thread reaped it.
            p.backlog.clear();
        }
        for w in self.close_waiters.drain(..) {
            let _ = w.send(());
        }
    }

    /// Performs every output the core has queued.
    fn drain(&mut self) {
        while let Some(out) = self.conn.poll_output() {
            match out {
                Output::Write(bytes) => self.write(WriteOp::Bytes(bytes)),
                Output::CloseStdin => self.write(WriteOp::Close),
                Output::Signal(sig) => {
                    if let Some(p) = &self.process {
                        p.child.signal(sig);
                    }
                }
                Output::Http(req) => {
                    let flag = Arc::new(AtomicBool::new(false));
                    self.exchanges.insert(req.exchange, flag.clone());
                    let agent = self.agent.get_or_insert_with(crate::http::agent).clone();
                    crate::http::start(agent, req, self.tx.clone(), flag, self.credits.clone());
                }
                Output::AbortHttp(ex) => {
                    if let Some(flag) = self.exchanges.remove(&ex) {
                        flag.store(true, Ordering::SeqCst);
                    }
                }
                Output::Ready => {
                    if let (Some(server), Some(era)) = (&self.options.remember, self.conn.era()) {
                        mcpwire_adapter::era::remember(server, era);
                    }
                    if let Some(server) = self.conn.server() {
                        let _ = self.shared.server.set(server.clone());
                    }
                    let _ = self.shared.transport.set(self.conn.transport_name());
                    if let Some(r) = self.ready.take() {
                        let _ = r.send(Ok(()));
                    }
                }
                Output::Complete { id, outcome } => {
                    if let Some(w) = self.waiters.remove(&id) {
                        self.tickets.remove(&w.ticket);
                        let _ = w.reply.send(outcome.map_err(CallOrRequest::Request));
                    }
                }
                Output::Progress { id, progress } => {
                    if let Some(f) = self.waiters.get(&id).and_then(|w| w.progress.as_ref()) {
                        f(&progress);
                    }
                }
                Output::Notification(n) => {
                    if let Some(f) = &self.options.on_notification {
                        f(&n);
                    }
                    self.shared.notifications.send(&n);
                }
                Output::ServerRequest { id, method, params } => {
                    self.server_request(id, method, params)
                }
                Output::ServerRequestCancelled { id, reason } => {
                    // The handler thread cannot be stopped; its late answer
                    // is dropped by the core.
                    tracing::debug!(%id, ?reason, "server withdrew its request");
                }
                Output::Log(line) => tracing::debug!(target: "mcpwire::server_stderr", "{line}"),
                Output::Diagnostic(d) => tracing::warn!("{d}"),
                Output::Closed(reason) => self.on_closed(reason),
                Output::Authorize { url } => self.authorize(url),
                Output::Authorized(state) => {
                    if let Some(a) = &self.options.auth {
                        if let Err(e) = a.token_store().save(&state) {
                            tracing::warn!("could not save the tokens: {e}");
                        }
                    }
                }
                other => tracing::warn!("unhandled output {other:?}"),
            }
        }
    }

    /// Queues a stdin operation without ever blocking the owner.
    fn write(&mut self, op: WriteOp) {
        if let Some(p) = &mut self.process {
            p.backlog.push_back(op);
            Self::push_writes(p);
        }
    }

    fn push_writes(p: &mut Process) {
        while let Some(op) = p.backlog.pop_front() {
            match p.writer.try_send(op) {
                Ok(()) => {}
                Err(TrySendError::Full(op)) => {
                    p.backlog.push_front(op);
                    return;
                }
                // The writer is gone after a failed write: the core knows.
                Err(TrySendError::Disconnected(_)) => {
                    p.backlog.clear();
                    return;
                }
            }
        }
    }

    /// Runs the redirect handler on a thread of its own (it blocks until
    /// the user is back); its answer comes back as [`Event::Redirect`].
    fn authorize(&mut self, url: String) {
        let Some(handler) = self.options.auth.as_ref().map(|a| a.redirect_handler()) else {
            self.conn
                .authorization_failed(Instant::now(), "no redirect handler configured");
            return;
        };
        let tx = self.tx.clone();
        let spawned = mcpwire_adapter::auth::authorize_on_thread(handler, url, move |result| {
            let _ = tx.send(Event::Redirect(result));
        });
        if let Err(e) = spawned {
            self.conn.authorization_failed(Instant::now(), &e);
        }
    }

    fn on_closed(&mut self, reason: CloseReason) {
        tracing::debug!(%reason, "connection closed");
        self.closed = true;
        let _ = self.shared.closed.set(reason.to_string());
        self.shared.notifications.close();
        if let Some(r) = self.ready.take() {
            let _ = r.send(Err(reason.to_string()));
        }
        // The core has completed every request; any left would be a bug.
        for (_, w) in self.waiters.drain() {
            let _ = w
                .reply
                .send(Err(CallOrRequest::Request(RequestError::Closed {
                    reason: reason.to_string(),
                })));
        }
    }

    fn event(&mut self, ev: Event) {
        let now = Instant::now();
        match ev {
            Event::Request {
                ticket,
                method,
                params,
                options,
                progress,
                reply,
            } => match self.conn.request(now, &method, params.as_deref(), options) {
                Ok(id) => {
                    self.tickets.insert(ticket, id);
                    self.waiters.insert(
                        id,
                        Waiter {
                            ticket,
                            reply,
                            progress,
                        },
                    );
                }
                Err(e) => {
                    let _ = reply.send(Err(CallOrRequest::Call(e)));
                }
            },
            Event::Notify {
                method,
                params,
                reply,
            } => {
                let _ = reply.send(self.conn.notify(now, &method, params.as_deref()));
            }
            Event::Cancel { ticket, reason } => {
                if let Some(id) = self.tickets.remove(&ticket) {
                    self.conn.cancel(now, id, &reason);
                }
            }
            Event::Close { reply } => {
                self.close_waiters.push(reply);
                self.conn.close(now);
            }
            Event::Dropped => self.conn.close(now),
            Event::Respond { id, result } => {
                let result = result.map(|v| {
                    serde_json::value::to_raw_value(&v)
                        .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("valid JSON"))
                });
                if let Err(e) = self.conn.respond(now, id, result) {
                    tracing::debug!("answer to a server request dropped: {e}");
                }
            }
            Event::Stdout(b) => {
                self.credits.release();
                self.conn.handle_input(now, Input::Stdout(&b));
            }
            Event::Stderr(b) => {
                self.credits.release();
                self.conn.handle_input(now, Input::Stderr(&b));
            }
            Event::StdoutEof => {
                if let Some(p) = &mut self.process {
                    p.stdout_done = true;
                }
                self.conn.handle_input(now, Input::StdoutEof);
                self.maybe_report_exit();
            }
            Event::StderrEof => {
                if let Some(p) = &mut self.process {
                    p.stderr_done = true;
                }
                self.conn.handle_input(now, Input::StderrEof);
                self.maybe_report_exit();
            }
            Event::Exited(status) => {
                if let Some(p) = &mut self.process {
                    p.exit = Some(status);
                    p.exit_deadline = Some(now + EXIT_GRACE);
                }
                self.maybe_report_exit();
            }
            Event::Wrote => {
                if let Some(p) = &mut self.process {
                    Self::push_writes(p);
                }
            }
            Event::WriteFailed(err) => self.conn.handle_input(now, Input::WriteFailed(&err)),
            Event::Http(exchange, ev) => self.http_event(now, exchange, ev),
            Event::Redirect(Ok(callback)) => self.conn.authorization_response(now, &callback),
            Event::Redirect(Err(reason)) => self.conn.authorization_failed(now, &reason),
        }
    }

    fn http_event(&mut self, now: Instant, exchange: ExchangeId, ev: HttpEvent) {
        if let HttpEvent::Body(_) = ev {
            self.credits.release();
        }
        if !self.exchanges.contains_key(&exchange) {
            return; // aborted: not reported further
        }
        match ev {
            HttpEvent::Head(head) => self.conn.handle_input(
                now,
                Input::HttpHead {
                    exchange,
                    head: &head,
                },
            ),
            HttpEvent::Body(data) => self.conn.handle_input(
                now,
                Input::HttpBody {
                    exchange,
                    data: &data,
                },
            ),
            HttpEvent::End => {
                self.exchanges.remove(&exchange);
                self.conn.handle_input(now, Input::HttpEnd { exchange });
            }
            HttpEvent::Failed(error) => {
                self.exchanges.remove(&exchange);
                self.conn.handle_input(
                    now,
                    Input::HttpFailed {
                        exchange,
                        error: &error,
                    },
                );
            }
        }
    }

    fn server_request(&mut self, id: RequestId, method: String, params: Option<Box<RawValue>>) {
        let tx = self.tx.clone();
        let Some(handler) = self.options.handler(&method) else {
            // The core only surfaces methods we declared; answer anyway.
            let _ = tx.send(Event::Respond {
                id,
                result: Err(ErrorObject::new(-32601, "Method not found")),
            });
            return;
        };
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let rid = id.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpwire-handler".into())
            .spawn(move || {
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(params)))
                        .unwrap_or_else(|_| Err(ErrorObject::new(-32603, "handler panicked")));
                let _ = tx.send(Event::Respond { id: rid, result });
            });
        if let Err(e) = spawned {
            let _ = self.tx.send(Event::Respond {
                id,
                result: Err(ErrorObject::new(-32603, format!("no handler thread: {e}"))),
            });
        }
    }

    fn maybe_report_exit(&mut self) {
        if let Some(p) = &self.process {
            if p.exit.is_some() && p.stdout_done && p.stderr_done {
                self.report_exit_now();
            }
        }
    }

    fn report_exit_now(&mut self) {
        let Some(p) = &mut self.process else { return };
        p.exit_deadline = None;
        if let Some(status) = p.exit.take() {
            self.conn
                .handle_input(Instant::now(), Input::Exited(status));
        }
    }
}
