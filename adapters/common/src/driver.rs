//! The one task that owns the [`Connection`]: it performs the core's
//! outputs, feeds back what happened, and serves the [`Client`]'s commands.
//!
//! ```text
//!  Client ──cmd (bounded)──►┐
//!  dropped calls ──cancel──►│  loop: drain poll_output → perform
//!  handler answers ────────►│        wait { urgent | stdout | stderr | exit |
//!  stdout/stderr/exit tasks►│               http events | write slot | cmd |
//!  http exchanges ─────────►┘               deadline | exit grace }
//! ```
//!
//! No protocol decision is made here: every `if` about MCP lives in the core.
//! Nothing runtime-specific either: tasks and timers come from [`Runtime`].
//!
//! [`Client`]: crate::Client

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use futures_core::Stream;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use mcpwire::connection::{CallError, CloseReason, Connection, Input, Output};
use mcpwire::mcp::types::InitializeResult;
use mcpwire::mcp::ServerNotification;
use mcpwire::rpc::{ErrorObject, RequestError, RequestId, RequestOptions};
use mcpwire::transport::stdio::{ExitStatus, Signal};
use mcpwire::transport::ExchangeId;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::http::{ExchangeHandle, HttpClient, HttpInput};
use crate::options::{BoxFuture, ConnectOptions, ProgressFn};
use crate::runtime::{Child, Runtime};
use crate::sync::{spawn_abortable, AbortHandle, Broadcast};

/// How long the pipes may take to deliver their last bytes once the
/// process has exited.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How a call ends, as the waiting future sees it.
pub(crate) type Outcome = Result<Box<RawValue>, CallOrRequest>;

/// Either kind of failure of one call.
#[derive(Debug)]
pub(crate) enum CallOrRequest {
    Call(CallError),
    Request(RequestError),
}

/// A one-shot answer channel (capacity 1: the send never waits).
pub(crate) type Reply<T> = Sender<T>;

/// A fresh one-shot channel.
pub(crate) fn oneshot<T>() -> (Reply<T>, Receiver<T>) {
    async_channel::bounded(1)
}

/// What the client sends the driver.
pub(crate) enum Command {
    Request {
        ticket: u64,
        method: String,
        params: Option<Box<RawValue>>,
        options: RequestOptions,
        progress: Option<ProgressFn>,
        reply: Reply<Outcome>,
    },
    Notify {
        method: String,
        params: Option<Box<RawValue>>,
        reply: Reply<Result<(), CallError>>,
    },
    Close {
        reply: Reply<()>,
    },
}

/// Sent outside the bounded command channel, from places that must not
/// wait: dropped call futures, cancel tokens, handler tasks.
pub(crate) enum Urgent {
    Cancel {
        ticket: u64,
        reason: String,
    },
    Respond {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
    /// The redirect handler's answer: the URL the user agent reached.
    Redirect(Result<String, String>),
}

/// A receiver the driver polls by hand (pinned: it is `!Unpin`).
type Inbox<T> = Pin<Box<Receiver<T>>>;

/// State shared with the client handle.
pub(crate) struct Shared {
    pub server: OnceLock<InitializeResult>,
    pub transport: OnceLock<&'static str>,
    /// Why the connection closed, once it has.
    pub closed: OnceLock<String>,
    /// Closed when the connection closes, which ends every notification
    /// stream.
    pub notifications: Broadcast<ServerNotification>,
}

struct Waiter {
    ticket: u64,
    reply: Reply<Outcome>,
    progress: Option<ProgressFn>,
}

enum ProcEvent {
    Stdout(Vec<u8>),
    StdoutEof,
    Stderr(Vec<u8>),
    StderrEof,
    Exited(ExitStatus),
}

struct Process {
    child_pid: Option<u32>,
    events: Inbox<ProcEvent>,
    /// Every reader and the waiter have finished.
    events_closed: bool,
    /// Exit reported by the wait task, held until stdout/stderr ended.
    exit: Option<ExitStatus>,
    stdout_done: bool,
    stderr_done: bool,
    /// Reports the exit even if a pipe never ends (a grandchild holds it).
    exit_grace: Option<BoxFuture<()>>,
}

enum Wake {
    Urgent(Urgent),
    Proc(Option<ProcEvent>),
    WriteFailed(String),
    Http(HttpInput),
    Wrote,
    Command(Option<Command>),
    Timer,
    ExitGrace,
}

enum WriteOp {
    Bytes(Vec<u8>),
    Close,
}

/// The connection's owner; [`Driver::run`] is its task.
pub(crate) struct Driver<R: Runtime> {
    conn: Connection,
    options: ConnectOptions,
    shared: Arc<Shared>,
    commands: Inbox<Command>,
    commands_open: bool,
    urgent_rx: Inbox<Urgent>,
    urgent_tx: Sender<Urgent>,
    waiters: HashMap<u64, Waiter>,
    tickets: HashMap<u64, u64>,
    process: Option<Process>,
    /// The stdin writer task's queue (its capacity is the backpressure).
    writes: Option<Sender<WriteOp>>,
    write_errors: Inbox<String>,
    /// Writes the writer task has not taken yet.
    backlog: VecDeque<Vec<u8>>,
    /// The oldest of the backlog, waiting for room in `writes`.
    write_in_flight: Option<BoxFuture<()>>,
    http: HttpClient<R>,
    http_events_tx: Sender<HttpInput>,
    http_events: Inbox<HttpInput>,
    exchanges: HashMap<ExchangeId, ExchangeHandle>,
    handlers: HashMap<RequestId, AbortHandle>,
    /// The core's deadline, and the timer armed for it.
    timer: Option<(Instant, BoxFuture<()>)>,
    close_waiters: Vec<Reply<()>>,
    ready: Option<Reply<Result<(), String>>>,
    closed: bool,
    /// The server whose era to record once known.
    remember: Option<mcpwire::ServerConfig>,
}

impl<R: Runtime> Driver<R> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        conn: Connection,
        options: ConnectOptions,
        remember: Option<mcpwire::ServerConfig>,
        shared: Arc<Shared>,
        commands: Receiver<Command>,
        urgent_tx: Sender<Urgent>,
        urgent_rx: Receiver<Urgent>,
        child: Option<Child>,
        ready: Reply<Result<(), String>>,
    ) -> Self {
        let (http_events_tx, http_events) = async_channel::bounded(64);
        let (write_err_tx, write_errors) = async_channel::unbounded();
        let (process, writes) = match child.map(|c| start_process::<R>(c, write_err_tx)) {
            Some((p, w)) => (Some(p), Some(w)),
            None => (None, None),
        };
        Driver {
            conn,
            options,
            shared,
            commands: Box::pin(commands),
            commands_open: true,
            urgent_rx: Box::pin(urgent_rx),
            urgent_tx,
            waiters: HashMap::new(),
            tickets: HashMap::new(),
            process,
            writes,
            write_errors: Box::pin(write_errors),
            backlog: VecDeque::new(),
            write_in_flight: None,
            http: HttpClient::new(),
            http_events_tx,
            http_events: Box::pin(http_events),
            exchanges: HashMap::new(),
            handlers: HashMap::new(),
            timer: None,
            close_waiters: Vec::new(),
            ready: Some(ready),
            closed: false,
            remember,
        }
    }

    pub(crate) async fn run(mut self) {
        loop {
            self.drain().await;
            if self.closed {
                break;
            }
            // Arm a new timer only when the core needs to wake earlier
            // than the armed one. A timer that fires early is harmless
            // (`handle_timeout` before a deadline is a no-op; the loop then
            // arms the real one), and keeping it saves, per call, a timer
            // registration and an allocation — and on tokio an eventfd
            // write and an extra wake-up, since each call's new deadline
            // used to replace the previous one.
            match (self.conn.poll_timeout(), &self.timer) {
                (Some(d), Some((armed, _))) if *armed <= d => {}
                (Some(d), _) => self.timer = Some((d, R::sleep_until(d))),
                (None, _) => {} // an armed timer fires once, spuriously
            }
            let wake = poll_fn(|cx| self.poll_wake(cx)).await;
            match wake {
                Wake::Urgent(u) => self.urgent(u),
                Wake::Proc(ev) => self.proc_event(ev),
                Wake::WriteFailed(err) => {
                    self.conn
                        .handle_input(Instant::now(), Input::WriteFailed(&err));
                }
                Wake::Http(ev) => self.http_event(ev),
                Wake::Wrote => {}
                Wake::Command(Some(cmd)) => self.command(cmd),
                Wake::Command(None) => {
                    // Every Client handle is gone: close gracefully.
                    self.commands_open = false;
                    self.conn.close(Instant::now());
                }
                Wake::Timer => {
                    self.timer = None;
                    self.conn.handle_timeout(Instant::now());
                }
                Wake::ExitGrace => self.report_exit_now(),
            }
        }
        // Commands sent while the connection closed: the channel's buffer
        // outlives this receiver (the clients hold senders), so drop them
        // here, which fails their calls with the close reason.
        self.commands.close();
        while self.commands.try_recv().is_ok() {}
        self.http.shutdown();
        for (_, h) in self.handlers.drain() {
            h.abort();
        }
        for (_, x) in self.exchanges.drain() {
            x.abort();
        }
        for w in self.close_waiters.drain(..) {
            let _ = w.try_send(());
        }
    }

    /// The next thing to handle, in priority order.
    fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<Wake> {
        if let Poll::Ready(Some(u)) = self.urgent_rx.as_mut().poll_next(cx) {
            return Poll::Ready(Wake::Urgent(u));
        }
        if let Some(p) = self.process.as_mut().filter(|p| !p.events_closed) {
            if let Poll::Ready(ev) = p.events.as_mut().poll_next(cx) {
                return Poll::Ready(Wake::Proc(ev));
            }
        }
        if let Poll::Ready(Some(err)) = self.write_errors.as_mut().poll_next(cx) {
            return Poll::Ready(Wake::WriteFailed(err));
        }
        if let Poll::Ready(Some(ev)) = self.http_events.as_mut().poll_next(cx) {
            return Poll::Ready(Wake::Http(ev));
        }
        if self.write_in_flight.is_none() {
            if let (Some(w), Some(bytes)) = (&self.writes, self.backlog.pop_front()) {
                let w = w.clone();
                self.write_in_flight = Some(Box::pin(async move {
                    let _ = w.send(WriteOp::Bytes(bytes)).await;
                }));
            }
        }
        if let Some(write) = &mut self.write_in_flight {
            if write.as_mut().poll(cx).is_ready() {
                self.write_in_flight = None;
                return Poll::Ready(Wake::Wrote);
            }
        }
        if self.commands_open && self.backlog.is_empty() && self.write_in_flight.is_none() {
            if let Poll::Ready(cmd) = self.commands.as_mut().poll_next(cx) {
                return Poll::Ready(Wake::Command(cmd));
            }
        }
        if let Some((_, sleep)) = &mut self.timer {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Timer);
            }
        }
        if let Some(grace) = self.process.as_mut().and_then(|p| p.exit_grace.as_mut()) {
            if grace.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::ExitGrace);
            }
        }
        Poll::Pending
    }

    /// Performs every output the core has queued.
    async fn drain(&mut self) {
        while let Some(out) = self.conn.poll_output() {
            match out {
                Output::Write(bytes) => self.write(bytes),
                Output::CloseStdin => {
                    // Everything queued before must reach the child first.
                    if let Some(write) = self.write_in_flight.take() {
                        write.await;
                    }
                    let backlog: Vec<_> = self.backlog.drain(..).collect();
                    if let Some(w) = &self.writes {
                        for b in backlog {
                            let _ = w.send(WriteOp::Bytes(b)).await;
                        }
                        let _ = w.send(WriteOp::Close).await;
                    }
                }
                Output::Signal(sig) => self.signal(sig),
                Output::Http(req) => {
                    let ex = req.exchange;
                    let handle = self.http.start(req, self.http_events_tx.clone());
                    self.exchanges.insert(ex, handle);
                }
                Output::AbortHttp(ex) => {
                    if let Some(h) = self.exchanges.remove(&ex) {
                        h.abort();
                    }
                }
                Output::Ready => {
                    if let (Some(server), Some(era)) = (&self.remember, self.conn.era()) {
                        crate::era::remember(server, era);
                    }
                    if let Some(server) = self.conn.server() {
                        let _ = self.shared.server.set(server.clone());
                    }
                    let _ = self.shared.transport.set(self.conn.transport_name());
                    if let Some(r) = self.ready.take() {
                        let _ = r.try_send(Ok(()));
                    }
                }
                Output::Complete { id, outcome } => {
                    if let Some(w) = self.waiters.remove(&id) {
                        self.tickets.remove(&w.ticket);
                        let _ = w.reply.try_send(outcome.map_err(CallOrRequest::Request));
                    }
                }
                Output::Progress { id, progress } => {
                    if let Some(f) = self.waiters.get(&id).and_then(|w| w.progress.as_ref()) {
                        f(&progress);
                    }
                }
                Output::Notification(n) => {
                    tracing::trace!(method = n.method(), "notification");
                    self.shared.notifications.send(n);
                }
                Output::ServerRequest { id, method, params } => {
                    self.server_request(id, method, params)
                }
                Output::ServerRequestCancelled { id, reason } => {
                    tracing::debug!(%id, ?reason, "server withdrew its request");
                    if let Some(h) = self.handlers.remove(&id) {
                        h.abort();
                    }
                }
                Output::Log(line) => tracing::debug!(target: "mcpwire::server_stderr", "{line}"),
                Output::Diagnostic(d) => tracing::warn!("{d}"),
                Output::Closed(reason) => self.on_closed(reason),
                Output::Authorize { url } => self.authorize(url),
                Output::Authorized(state) => {
                    tracing::debug!(issuer = ?state.issuer, "authorized");
                    if let Some(a) = &self.options.auth {
                        if let Err(e) = a.store.save(&state) {
                            tracing::warn!("could not save the tokens: {e}");
                        }
                    }
                }
                other => tracing::warn!("unhandled output {other:?}"),
            }
        }
    }

    fn write(&mut self, bytes: Vec<u8>) {
        let Some(w) = &self.writes else { return };
        if !self.backlog.is_empty() || self.write_in_flight.is_some() {
            self.backlog.push_back(bytes);
            return;
        }
        match w.try_send(WriteOp::Bytes(bytes)) {
            Ok(()) => {}
            Err(async_channel::TrySendError::Full(WriteOp::Bytes(b))) => self.backlog.push_back(b),
            Err(_) => {} // writer gone: the child is exiting; the core will hear of it
        }
    }

    fn signal(&mut self, sig: Signal) {
        let Some(pid) = self.process.as_ref().and_then(|p| p.child_pid) else {
            return;
        };
        crate::process::signal(pid, sig);
    }

    fn on_closed(&mut self, reason: CloseReason) {
        tracing::debug!(%reason, "connection closed");
        self.closed = true;
        let _ = self.shared.closed.set(reason.to_string());
        self.shared.notifications.close();
        if let Some(r) = self.ready.take() {
            let _ = r.try_send(Err(reason.to_string()));
        }
        // Every waiter has completed by now (the core guarantees it); any
        // left would be a bug: fail them rather than hang.
        for (_, w) in self.waiters.drain() {
            let _ = w
                .reply
                .try_send(Err(CallOrRequest::Request(RequestError::Closed {
                    reason: reason.to_string(),
                })));
        }
    }

    fn command(&mut self, cmd: Command) {
        let now = Instant::now();
        match cmd {
            Command::Request {
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
                    let _ = reply.try_send(Err(CallOrRequest::Call(e)));
                }
            },
            Command::Notify {
                method,
                params,
                reply,
            } => {
                let _ = reply.try_send(self.conn.notify(now, &method, params.as_deref()));
            }
            Command::Close { reply } => {
                self.close_waiters.push(reply);
                self.conn.close(now);
            }
        }
    }

    fn urgent(&mut self, u: Urgent) {
        let now = Instant::now();
        match u {
            Urgent::Cancel { ticket, reason } => {
                if let Some(id) = self.tickets.remove(&ticket) {
                    self.conn.cancel(now, id, &reason);
                }
            }
            Urgent::Respond { id, result } => {
                self.handlers.remove(&id);
                let result = result.map(|v| {
                    serde_json::value::to_raw_value(&v)
                        .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("valid JSON"))
                });
                if let Err(e) = self.conn.respond(now, id, result) {
                    tracing::debug!("answer to a server request dropped: {e}");
                }
            }
            Urgent::Redirect(Ok(callback)) => self.conn.authorization_response(now, &callback),
            Urgent::Redirect(Err(reason)) => self.conn.authorization_failed(now, &reason),
        }
    }

    /// Runs the redirect handler on a thread of its own (it blocks until
    /// the user is back); its answer comes back as [`Urgent::Redirect`].
    fn authorize(&mut self, url: String) {
        let Some(handler) = self.options.auth.as_ref().map(|a| a.redirect.clone()) else {
            self.conn
                .authorization_failed(Instant::now(), "no redirect handler configured");
            return;
        };
        tracing::info!("authorization needed: sending the user agent to the authorization server");
        let urgent = self.urgent_tx.clone();
        let spawned = crate::auth::authorize_on_thread(handler, url, move |result| {
            let _ = urgent.send_blocking(Urgent::Redirect(result));
        });
        if let Err(e) = spawned {
            self.conn.authorization_failed(Instant::now(), &e);
        }
    }

    fn server_request(&mut self, id: RequestId, method: String, params: Option<Box<RawValue>>) {
        let urgent = self.urgent_tx.clone();
        let Some(handler) = self.options.handler(&method) else {
            // The core only surfaces methods we declared; answer anyway.
            let _ = urgent.try_send(Urgent::Respond {
                id,
                result: Err(ErrorObject::new(-32601, "Method not found")),
            });
            return;
        };
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let rid = id.clone();
        let task = spawn_abortable::<R>(Box::pin(async move {
            let result = handler(params).await;
            let _ = urgent.try_send(Urgent::Respond { id: rid, result });
        }));
        match task {
            Ok(task) => {
                self.handlers.insert(id, task);
            }
            Err(why) => {
                let _ = self.urgent_tx.try_send(Urgent::Respond {
                    id,
                    result: Err(ErrorObject::new(-32603, why)),
                });
            }
        }
    }

    fn http_event(&mut self, ev: HttpInput) {
        let now = Instant::now();
        match ev {
            HttpInput::Head(exchange, head) => self.conn.handle_input(
                now,
                Input::HttpHead {
                    exchange,
                    head: &head,
                },
            ),
            HttpInput::Body(exchange, data) => self.conn.handle_input(
                now,
                Input::HttpBody {
                    exchange,
                    data: &data,
                },
            ),
            HttpInput::End(exchange) => {
                self.exchanges.remove(&exchange);
                self.conn.handle_input(now, Input::HttpEnd { exchange });
            }
            HttpInput::Failed(exchange, error) => {
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

    fn proc_event(&mut self, ev: Option<ProcEvent>) {
        let now = Instant::now();
        let Some(p) = &mut self.process else { return };
        match ev {
            Some(ProcEvent::Stdout(b)) => self.conn.handle_input(now, Input::Stdout(&b)),
            Some(ProcEvent::StdoutEof) => {
                p.stdout_done = true;
                self.conn.handle_input(now, Input::StdoutEof);
                self.maybe_report_exit();
            }
            Some(ProcEvent::Stderr(b)) => self.conn.handle_input(now, Input::Stderr(&b)),
            Some(ProcEvent::StderrEof) => {
                p.stderr_done = true;
                self.conn.handle_input(now, Input::StderrEof);
                self.maybe_report_exit();
            }
            Some(ProcEvent::Exited(status)) => {
                p.exit = Some(status);
                // Give the pipes a moment to deliver the last words.
                p.exit_grace = Some(R::sleep_until(Instant::now() + EXIT_GRACE));
                self.maybe_report_exit();
            }
            None => {
                // All event senders gone: the process side is over.
                p.events_closed = true;
                if p.exit.is_some() {
                    self.report_exit_now();
                }
            }
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
        p.exit_grace = None;
        if let Some(status) = p.exit.take() {
            p.child_pid = None;
            self.conn
                .handle_input(Instant::now(), Input::Exited(status));
        }
    }
}

/// Starts the tasks around a child: a reader for stdout and one for
/// stderr, a waiter for the exit, and the stdin writer.
fn start_process<R: Runtime>(
    child: Child,
    write_errors: Sender<String>,
) -> (Process, Sender<WriteOp>) {
    let (tx, events) = async_channel::bounded(64);
    let Child {
        pid,
        stdin,
        stdout,
        stderr,
        wait,
    } = child;
    let reader = |mut pipe: Box<dyn futures_io::AsyncRead + Send + Unpin>,
                  size: usize,
                  data: fn(Vec<u8>) -> ProcEvent,
                  eof: ProcEvent| {
        let tx = tx.clone();
        async move {
            let mut buf = vec![0u8; size];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(data(buf[..n].to_vec())).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(eof).await;
        }
    };
    spawn_or_log::<R>(Box::pin(reader(
        stdout,
        64 * 1024,
        ProcEvent::Stdout,
        ProcEvent::StdoutEof,
    )));
    spawn_or_log::<R>(Box::pin(reader(
        stderr,
        8 * 1024,
        ProcEvent::Stderr,
        ProcEvent::StderrEof,
    )));
    spawn_or_log::<R>(Box::pin(async move {
        let status = match wait.await {
            Ok(s) => crate::process::exit_status(s),
            Err(_) => ExitStatus {
                code: None,
                signal: None,
            },
        };
        let _ = tx.send(ProcEvent::Exited(status)).await;
    }));
    let (writes, write_rx) = async_channel::bounded::<WriteOp>(64);
    spawn_or_log::<R>(Box::pin(async move {
        // Dropped (the pipe closed) on `Close` or after a failed write.
        let mut stdin = Some(stdin);
        while let Ok(op) = write_rx.recv().await {
            match op {
                WriteOp::Bytes(b) => {
                    if let Some(w) = stdin.as_mut() {
                        if let Err(e) = write_flushed(w.as_mut(), &b).await {
                            let _ = write_errors.try_send(e.to_string());
                            stdin = None;
                        }
                    }
                }
                WriteOp::Close => {
                    if let Some(mut w) = stdin.take() {
                        let _ = w.close().await;
                    }
                }
            }
        }
    }));
    let process = Process {
        child_pid: pid,
        events: Box::pin(events),
        events_closed: false,
        exit: None,
        stdout_done: false,
        stderr_done: false,
        exit_grace: None,
    };
    (process, writes)
}

async fn write_flushed(
    w: &mut (dyn futures_io::AsyncWrite + Send + Unpin),
    bytes: &[u8],
) -> std::io::Result<()> {
    w.write_all(bytes).await?;
    w.flush().await
}

/// Spawns one of the process tasks; the driver runs on the runtime, so
/// this does not fail in practice.
fn spawn_or_log<R: Runtime>(task: BoxFuture<()>) {
    if let Err(why) = R::spawn(task) {
        tracing::error!("cannot spawn a process task: {why}");
    }
}
