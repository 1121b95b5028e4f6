//! The one task that owns the [`Connection`]: it performs the core's
//! outputs, feeds back what happened, and serves the [`Client`]'s commands.
//!
//! ```text
//!  Client ──cmd (bounded)──►┐
//!  dropped calls ──cancel──►│  loop: drain poll_output → perform
//!  handler answers ────────►│        select { cmd | stdout | stderr | exit |
//!  stdout/stderr/exit tasks►│                 http events | write slot | deadline }
//!  http exchanges ─────────►┘
//! ```
//!
//! No protocol decision is made here: every `if` about MCP lives in the core.
//!
//! [`Client`]: crate::Client

use std::collections::{HashMap, VecDeque};
use std::process::Stdio as StdStdio;
use std::sync::Arc;
use std::time::Instant;

use mcpwire::connection::{CallError, CloseReason, Connection, Input, Output};
use mcpwire::mcp::types::InitializeResult;
use mcpwire::mcp::ServerNotification;
use mcpwire::rpc::{ErrorObject, RequestError, RequestId, RequestOptions};
use mcpwire::transport::stdio::{ExitStatus, Signal};
use mcpwire::transport::ExchangeId;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command as ProcessCommand};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::http::{ExchangeHandle, HttpClient, HttpInput};
use crate::options::{ConnectOptions, ProgressFn};

/// How a call ends, as the waiting future sees it.
pub(crate) type Outcome = Result<Box<RawValue>, CallOrRequest>;

/// Either kind of failure of one call.
#[derive(Debug)]
pub(crate) enum CallOrRequest {
    Call(CallError),
    Request(RequestError),
}

/// What the client sends the driver.
pub(crate) enum Command {
    Request {
        ticket: u64,
        method: String,
        params: Option<Box<RawValue>>,
        options: RequestOptions,
        progress: Option<ProgressFn>,
        reply: oneshot::Sender<Outcome>,
    },
    Notify {
        method: String,
        params: Option<Box<RawValue>>,
        reply: oneshot::Sender<Result<(), CallError>>,
    },
    Close {
        reply: oneshot::Sender<()>,
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
}

use serde_json::Value;

/// State shared with the client handle.
pub(crate) struct Shared {
    pub server: std::sync::OnceLock<InitializeResult>,
    pub protocol_version: std::sync::OnceLock<String>,
    pub transport: std::sync::OnceLock<&'static str>,
    /// Why the connection closed, once it has.
    pub closed: std::sync::OnceLock<String>,
    /// Taken (dropped) when the connection closes, which ends every
    /// notification stream.
    pub notifications: std::sync::Mutex<Option<broadcast::Sender<ServerNotification>>>,
}

struct Waiter {
    ticket: u64,
    reply: oneshot::Sender<Outcome>,
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
    events: mpsc::Receiver<ProcEvent>,
    /// Every reader and the waiter have finished.
    events_closed: bool,
    /// Exit reported by the wait task, held until stdout/stderr ended.
    exit: Option<ExitStatus>,
    stdout_done: bool,
    stderr_done: bool,
    exit_grace: Option<tokio::time::Instant>,
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

pub(crate) struct Driver {
    conn: Connection,
    options: ConnectOptions,
    shared: Arc<Shared>,
    commands: mpsc::Receiver<Command>,
    urgent_rx: mpsc::UnboundedReceiver<Urgent>,
    urgent_tx: mpsc::UnboundedSender<Urgent>,
    waiters: HashMap<u64, Waiter>,
    tickets: HashMap<u64, u64>,
    process: Option<Process>,
    /// The stdin writer task's queue (the slot is the backpressure).
    writes: Option<mpsc::Sender<WriteOp>>,
    write_errors: mpsc::UnboundedReceiver<String>,
    http: HttpClient,
    http_events_tx: mpsc::Sender<HttpInput>,
    http_events: mpsc::Receiver<HttpInput>,
    exchanges: HashMap<ExchangeId, ExchangeHandle>,
    handlers: HashMap<RequestId, JoinHandle<()>>,
    /// Writes the writer task has not taken yet.
    backlog: VecDeque<Vec<u8>>,
    close_waiters: Vec<oneshot::Sender<()>>,
    ready: Option<oneshot::Sender<Result<(), String>>>,
    closed: bool,
}

/// Spawns the child process of a stdio server.
pub(crate) fn spawn_child(server: &mcpwire::config::ServerConfig) -> Result<Child, crate::Error> {
    let command = server.command.clone().unwrap_or_default();
    let mut cmd = ProcessCommand::new(&command);
    cmd.args(&server.args)
        .envs(&server.env)
        .stdin(StdStdio::piped())
        .stdout(StdStdio::piped())
        .stderr(StdStdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &server.cwd {
        cmd.current_dir(cwd);
    }
    cmd.spawn()
        .map_err(|source| crate::Error::Spawn { command, source })
}

impl Driver {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        conn: Connection,
        options: ConnectOptions,
        shared: Arc<Shared>,
        commands: mpsc::Receiver<Command>,
        urgent_tx: mpsc::UnboundedSender<Urgent>,
        urgent_rx: mpsc::UnboundedReceiver<Urgent>,
        child: Option<Child>,
        ready: oneshot::Sender<Result<(), String>>,
    ) -> Driver {
        let (http_events_tx, http_events) = mpsc::channel(64);
        let (write_err_tx, write_errors) = mpsc::unbounded_channel();
        let (process, writes) = match child.map(|child| start_process(child, write_err_tx)) {
            Some((p, w)) => (Some(p), Some(w)),
            None => (None, None),
        };
        Driver {
            conn,
            options,
            shared,
            commands,
            urgent_rx,
            urgent_tx,
            waiters: HashMap::new(),
            tickets: HashMap::new(),
            process,
            writes,
            write_errors,
            http: HttpClient::new(),
            http_events_tx,
            http_events,
            exchanges: HashMap::new(),
            handlers: HashMap::new(),
            backlog: VecDeque::new(),
            close_waiters: Vec::new(),
            ready: Some(ready),
            closed: false,
        }
    }

    pub(crate) async fn run(mut self) {
        let sleep = tokio::time::sleep(std::time::Duration::from_secs(3600));
        tokio::pin!(sleep);
        let mut armed: Option<Instant> = None;
        let mut commands_open = true;
        loop {
            self.drain().await;
            if self.closed {
                break;
            }
            let deadline = self.conn.poll_timeout();
            if deadline != armed {
                armed = deadline;
                if let Some(d) = deadline {
                    sleep.as_mut().reset(tokio::time::Instant::from_std(d));
                }
            }
            let exit_grace = self.process.as_ref().and_then(|p| p.exit_grace);
            let accept_commands = commands_open && self.backlog.is_empty();
            let wake = tokio::select! {
                biased;
                Some(urgent) = self.urgent_rx.recv() => Wake::Urgent(urgent),
                ev = recv_proc(&mut self.process) => Wake::Proc(ev),
                Some(err) = self.write_errors.recv() => Wake::WriteFailed(err),
                Some(ev) = self.http_events.recv() => Wake::Http(ev),
                permit = reserve_write(&self.writes), if !self.backlog.is_empty() => {
                    if let (Some(permit), Some(bytes)) = (permit, self.backlog.pop_front()) {
                        permit.send(WriteOp::Bytes(bytes));
                    }
                    Wake::Wrote
                }
                cmd = self.commands.recv(), if accept_commands => Wake::Command(cmd),
                () = &mut sleep, if armed.is_some() => Wake::Timer,
                () = sleep_until_opt(exit_grace) => Wake::ExitGrace,
            };
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
                    commands_open = false;
                    self.conn.close(Instant::now());
                }
                Wake::Timer => {
                    armed = None;
                    self.conn.handle_timeout(Instant::now());
                }
                Wake::ExitGrace => self.report_exit_now(),
            }
        }
        self.http.shutdown();
        for (_, h) in self.handlers.drain() {
            h.abort();
        }
        for (_, x) in self.exchanges.drain() {
            x.abort();
        }
        for w in self.close_waiters.drain(..) {
            let _ = w.send(());
        }
    }

    /// Performs every output the core has queued.
    async fn drain(&mut self) {
        while let Some(out) = self.conn.poll_output() {
            match out {
                Output::Write(bytes) => self.write(bytes),
                Output::CloseStdin => {
                    // Everything queued before must reach the child first.
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
                    if let Some(server) = self.conn.server() {
                        let _ = self.shared.server.set(server.clone());
                        let _ = self
                            .shared
                            .protocol_version
                            .set(server.protocol_version.clone());
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
                    tracing::trace!(method = n.method(), "notification");
                    if let Some(tx) = self
                        .shared
                        .notifications
                        .lock()
                        .expect("not poisoned")
                        .as_ref()
                    {
                        let _ = tx.send(n);
                    }
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
                other => tracing::warn!("unhandled output {other:?}"),
            }
        }
    }

    fn write(&mut self, bytes: Vec<u8>) {
        let Some(w) = &self.writes else { return };
        if !self.backlog.is_empty() {
            self.backlog.push_back(bytes);
            return;
        }
        match w.try_send(WriteOp::Bytes(bytes)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(WriteOp::Bytes(b))) => self.backlog.push_back(b),
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
        self.shared
            .notifications
            .lock()
            .expect("not poisoned")
            .take();
        if let Some(r) = self.ready.take() {
            let _ = r.send(Err(reason.to_string()));
        }
        // Every waiter has completed by now (the core guarantees it); any
        // left would be a bug: fail them rather than hang.
        for (_, w) in self.waiters.drain() {
            let _ = w
                .reply
                .send(Err(CallOrRequest::Request(RequestError::Closed {
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
                    let _ = reply.send(Err(CallOrRequest::Call(e)));
                }
            },
            Command::Notify {
                method,
                params,
                reply,
            } => {
                let _ = reply.send(self.conn.notify(now, &method, params.as_deref()));
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
        }
    }

    fn server_request(&mut self, id: RequestId, method: String, params: Option<Box<RawValue>>) {
        let urgent = self.urgent_tx.clone();
        let Some(handler) = self.options.handler(&method) else {
            // The core only surfaces methods we declared; answer anyway.
            let _ = urgent.send(Urgent::Respond {
                id,
                result: Err(ErrorObject::new(-32601, "Method not found")),
            });
            return;
        };
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let rid = id.clone();
        let task = tokio::spawn(async move {
            let result = handler(params).await;
            let _ = urgent.send(Urgent::Respond { id: rid, result });
        });
        self.handlers.insert(id, task);
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
                self.maybe_report_exit();
            }
            Some(ProcEvent::Exited(status)) => {
                p.exit = Some(status);
                // Give the pipes a moment to deliver the last words.
                p.exit_grace =
                    Some(tokio::time::Instant::now() + std::time::Duration::from_millis(500));
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

async fn recv_proc(process: &mut Option<Process>) -> Option<ProcEvent> {
    match process {
        Some(p) if !p.events_closed => p.events.recv().await,
        _ => std::future::pending().await,
    }
}

async fn reserve_write(
    writes: &Option<mpsc::Sender<WriteOp>>,
) -> Option<mpsc::Permit<'_, WriteOp>> {
    match writes {
        Some(w) => w.reserve().await.ok(),
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn start_process(
    mut child: Child,
    write_errors: mpsc::UnboundedSender<String>,
) -> (Process, mpsc::Sender<WriteOp>) {
    let (tx, events) = mpsc::channel(64);
    let child_pid = child.id();
    let stdin = child.stdin.take();
    if let Some(mut stdout) = child.stdout.take() {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match stdout.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(ProcEvent::Stdout(buf[..n].to_vec())).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(ProcEvent::StdoutEof).await;
        });
    }
    if let Some(mut stderr) = child.stderr.take() {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8 * 1024];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(ProcEvent::Stderr(buf[..n].to_vec())).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(ProcEvent::StderrEof).await;
        });
    }
    {
        let tx = tx.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            let status = match status {
                Ok(s) => crate::process::exit_status(s),
                Err(_) => ExitStatus {
                    code: None,
                    signal: None,
                },
            };
            let _ = tx.send(ProcEvent::Exited(status)).await;
        });
    }
    let (writes, mut write_rx) = mpsc::channel::<WriteOp>(64);
    let mut stdin_w = stdin;
    tokio::spawn(async move {
        while let Some(op) = write_rx.recv().await {
            match op {
                WriteOp::Bytes(b) => {
                    if let Some(w) = stdin_w.as_mut() {
                        if let Err(e) = w.write_all(&b).await {
                            let _ = write_errors.send(e.to_string());
                            stdin_w = None;
                        }
                    }
                }
                WriteOp::Close => {
                    if let Some(mut w) = stdin_w.take() {
                        let _ = w.shutdown().await;
                    }
                }
            }
        }
    });
    let process = Process {
        child_pid,
        events,
        events_closed: false,
        exit: None,
        stdout_done: false,
        stderr_done: false,
        exit_grace: None,
    };
    (process, writes)
}
