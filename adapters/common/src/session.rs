//! The one runtime-neutral session between a [`Connection`] and its
//! callers, for every adapter: the async ones and the blocking one.
//!
//! ```text
//!  callers ──request/cancel/notify/close──►┐
//!  handlers ──respond──────────────────────►│ Session ──► Connection (sans-IO)
//!  executor ──input/timeout───────────────►│   │ bookkeeping, done here:
//!                                           │   │  completions → the waiting call's slot (+ its Waker)
//!                                           │   │  progress → the call's callback
//!                                           │   │  ready / closed → their waiters
//!                                           │   │  notifications → callback + every subscriber
//!                                           │   │  server requests → the handler for their kind
//!                                           │   ▼
//!  executor ◄──next_effect()───────────────┘ Effect: Write, CloseStdin, Signal, Http,
//!                                             AbortHttp, Handle, Withdraw, Authorize,
//!                                             LockTokens
//! ```
//!
//! A `Session` is a plain value: an executor keeps it behind its own lock
//! together with its I/O, calls one method, then drains
//! [`Session::next_effect`] and performs each effect. Waiting is by
//! [`Waker`]: a task's, or a thread's ([`crate::wait`]), so the same slots
//! serve `async` callers and blocking ones. No protocol decision is made
//! here; every MCP rule is the [`Connection`]'s.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Poll, Waker};
use std::time::Instant;

use mcpwire::connection::{CallError, CloseReason, Connection, Input, Output};
use mcpwire::exchange::{ExchangeId, HttpRequest};
use mcpwire::mcp::types::InitializeResult;
use mcpwire::mcp::{ServerNotification, ServerRequestKind};
use mcpwire::rpc::{ErrorObject, Params, RequestError, RequestId, RequestOptions, Stats};
use mcpwire::transport::stdio::Signal;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::auth::{AuthorizeError, Locked, RedirectHandler, StoreLock, TokenStore};
use crate::handlers::{DiagnosticFn, Handler, Handlers, NotificationFn};
use crate::options::ProgressFn;
use crate::sync::Broadcast;
use crate::Notifications;

/// How a call ends: its raw result, or how it failed.
pub type Outcome = Result<Box<RawValue>, RequestError>;

/// What the executor must perform for the session.
///
/// Exhaustive on purpose: a new effect is a compile error in every
/// executor, never an effect silently dropped.
pub enum Effect {
    /// Write these bytes to the child's stdin, in order.
    Write(Vec<u8>),
    /// Close the child's stdin (after what was written before).
    CloseStdin,
    /// Send this signal to the child's process group (the child alone
    /// when it has none).
    Signal(Signal),
    /// Check whether anything of the child's process group is left; report
    /// [`Input::GroupEmpty`] when nothing is (at once when the child has no
    /// group).
    CheckGroup,
    /// Report with [`Input::StdinUnread`] how much of what was written to
    /// the child's stdin it has not read yet (the pipe's and the
    /// executor's backlog), or `None` where that cannot be told.
    CheckStdin,
    /// Start the stdio server again from its definition in place of the
    /// child that was stopped (its exit and empty group were reported):
    /// from now on read and write only the new child's pipes, then report
    /// [`Input::Spawned`] (or [`Input::SpawnFailed`]). See
    /// [`mcpwire::connection::Output::Spawn`].
    Spawn,
    /// Perform this HTTP exchange; report it with [`Session::input`].
    Http(Box<HttpRequest>),
    /// Stop this exchange and report nothing more of it.
    AbortHttp(ExchangeId),
    /// Run `handler` for server request `id`, then give its answer to
    /// [`Session::respond`].
    Handle {
        /// The server's request id.
        id: RequestId,
        /// What to run.
        handler: Handler,
        /// The request's params (`null` when it had none).
        params: Value,
    },
    /// The server withdrew request `id`: stop its handler if it can be
    /// stopped (a late answer is dropped by the connection anyway).
    Withdraw(RequestId),
    /// Send the user agent to `url` with `handler` (it blocks: run it on
    /// a thread of its own, see [`crate::auth::authorize_on_thread`]) and
    /// give where it ended to [`Session::authorization`].
    Authorize {
        /// The application's redirect handler.
        handler: Arc<dyn RedirectHandler>,
        /// The authorization URL.
        url: String,
    },
    /// A refresh is due: take `store`'s lock and read the state for
    /// `endpoint` under it (it may wait for another process: do it on a
    /// thread of its own, see [`crate::auth::lock_on_thread`]), then give
    /// both to [`Session::store_locked`]. The session keeps the lock until
    /// the refreshed state is saved or the refresh is over.
    LockTokens {
        /// The application's token store.
        store: Arc<dyn TokenStore>,
        /// The MCP endpoint whose state to read.
        endpoint: String,
    },
}

impl std::fmt::Debug for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Effect::Write(b) => write!(f, "Write({} bytes)", b.len()),
            Effect::CloseStdin => f.write_str("CloseStdin"),
            Effect::Signal(s) => write!(f, "Signal({s:?})"),
            Effect::CheckGroup => f.write_str("CheckGroup"),
            Effect::Spawn => f.write_str("Spawn"),
            Effect::CheckStdin => f.write_str("CheckStdin"),
            Effect::Http(r) => write!(f, "Http({r:?})"),
            Effect::AbortHttp(x) => write!(f, "AbortHttp({x})"),
            Effect::Handle { id, .. } => write!(f, "Handle({id})"),
            Effect::Withdraw(id) => write!(f, "Withdraw({id})"),
            Effect::Authorize { .. } => f.write_str("Authorize"),
            Effect::LockTokens { endpoint, .. } => write!(f, "LockTokens({endpoint})"),
        }
    }
}

/// What a session knows about its server, readable without the
/// executor's lock (each part is set once).
#[derive(Debug, Default)]
pub struct Info {
    /// The server's `initialize` result (in the 2026-07-28 era, the
    /// `server/discover` result in the same shape), once ready.
    pub server: OnceLock<InitializeResult>,
    /// `stdio`, `streamable-http` or `sse`, once ready.
    pub transport: OnceLock<&'static str>,
    /// Why the connection closed, once it has.
    pub closed: OnceLock<String>,
    /// The output schemas of the tools last listed.
    pub output: crate::output::OutputSchemas,
    /// How the era was found, once ready.
    pub era_finding: OnceLock<mcpwire::connection::EraFinding>,
    /// How long the connection took to be ready (from the session's
    /// start: the process was already started).
    pub connected_in: OnceLock<std::time::Duration>,
    /// Tool pinning, if on ([`crate::pins`]).
    pub pins: Option<crate::pins::ToolPins>,
    /// The tools the last listing withheld (changed or new since pinned),
    /// and why.
    pub withheld: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

/// What a session is built with besides its connection.
#[derive(Default)]
pub struct Setup {
    /// The server request handlers, by kind.
    pub handlers: Handlers,
    /// Called for every server notification.
    pub on_notification: Option<NotificationFn>,
    /// Called for every diagnostic (malformed input, unknown ids, skipped
    /// frames, transport notes).
    pub on_diagnostic: Option<DiagnosticFn>,
    /// Where to remember the server's era once known ([`crate::era`]).
    pub(crate) remember: Option<crate::era::Memory>,
    /// Where authorized states are saved, and who sends the user agent.
    pub auth: Option<(Arc<dyn RedirectHandler>, Arc<dyn TokenStore>)>,
    /// Results are not checked against the tools' output schemas.
    pub skip_output_validation: bool,
    /// Tool pinning, if on.
    pub pins: Option<crate::pins::ToolPins>,
}

/// An executor's state that holds a [`Session`].
pub trait HoldsSession {
    /// The session inside.
    fn session_mut(&mut self) -> &mut Session;
}

/// The lock on an executor's state: when it is released, the calls that
/// completed meanwhile are woken (after the unlock, see
/// [`Session::take_wakers`]).
pub struct Guard<'a, T: HoldsSession> {
    inner: Option<MutexGuard<'a, T>>,
}

impl<'a, T: HoldsSession> Guard<'a, T> {
    /// Locks `mutex` (a poisoned lock is taken over: nothing panics while
    /// holding one).
    pub fn lock(mutex: &'a Mutex<T>) -> Self {
        Guard {
            inner: Some(mutex.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }
}

impl<T: HoldsSession> Deref for Guard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.inner.as_ref().expect("held until dropped")
    }
}

impl<T: HoldsSession> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner.as_mut().expect("held until dropped")
    }
}

impl<T: HoldsSession> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        let Some(mut inner) = self.inner.take() else {
            return;
        };
        // Mostly none: a call that drives reads its own outcome.
        let wakers = inner.session_mut().take_wakers();
        drop(inner);
        if let Some(wakers) = wakers {
            wakers.into_iter().for_each(Waker::wake);
        }
    }
}

/// One call in flight.
struct Slot {
    outcome: Option<Outcome>,
    waker: Option<Waker>,
    progress: Option<ProgressFn>,
}

enum Handshake {
    Connecting(Vec<Waker>),
    Done,
    Failed(CloseReason),
}

/// The session: see the [module docs](self).
pub struct Session {
    conn: Connection,
    info: Arc<Info>,
    calls: mcpwire::rpc::IdSlots<Slot>,
    effects: VecDeque<Effect>,
    /// Bytes of the `Write` effects not yet taken by the executor, and
    /// what the executor holds unwritten: both count against the
    /// connection's queued-bytes limit.
    effect_bytes: usize,
    executor_unwritten: usize,
    setup: Setup,
    notifications: Broadcast<ServerNotification>,
    ready: Handshake,
    close_waiters: Vec<Waker>,
    /// Outcomes delivered so far.
    completed: u64,
    /// Wakers of calls completed, to wake once the executor's lock is
    /// released ([`Session::take_wakers`]).
    wake: Vec<Waker>,
    /// When the session started (for [`Info::connected_in`]).
    started: Instant,
    /// The token store's lock, held from `LockTokens` until the refreshed
    /// state is saved or the refresh is over.
    store_lock: Option<Box<dyn StoreLock>>,
    /// The connection's next deadline, once asked since its last change
    /// (see [`Session::conn_mut`]).
    deadline: Option<Option<Instant>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("conn", &self.conn)
            .field("calls", &self.calls.len())
            .field("effects", &self.effects.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session over `conn` (just built: its first outputs are taken
    /// here, so drain [`Session::next_effect`] next).
    pub fn new(conn: Connection, setup: Setup) -> Self {
        let mut session = Session {
            conn,
            info: Arc::new(Info {
                output: crate::output::OutputSchemas::new(!setup.skip_output_validation),
                pins: setup.pins.clone(),
                ..Info::default()
            }),
            calls: Default::default(),
            effects: VecDeque::new(),
            effect_bytes: 0,
            executor_unwritten: 0,
            setup,
            notifications: Broadcast::new(),
            ready: Handshake::Connecting(Vec::new()),
            close_waiters: Vec::new(),
            completed: 0,
            wake: Vec::new(),
            started: Instant::now(),
            store_lock: None,
            deadline: None,
        };
        session.pump(Instant::now());
        session
    }

    /// The parts of the session readable without a lock.
    pub fn info(&self) -> &Arc<Info> {
        &self.info
    }

    // ----- callers --------------------------------------------------------

    /// Sends a request; its outcome is taken with [`Session::poll_call`].
    pub fn request(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&Params>,
        options: RequestOptions,
        progress: Option<ProgressFn>,
    ) -> Result<u64, CallError> {
        let id = self
            .conn_mut()
            .request_params(now, method, params, options)?;
        self.calls.insert(
            id,
            Slot {
                outcome: None,
                waker: None,
                progress,
            },
        );
        self.pump(now);
        Ok(id)
    }

    /// The outcome of call `id` once it has one (the slot is then gone);
    /// until then `waker` is woken when it comes. A call the session does
    /// not know (taken already) reads as closed.
    pub fn poll_call(&mut self, id: u64, waker: &Waker) -> Poll<Outcome> {
        let Some(slot) = self.calls.get_mut(id) else {
            return Poll::Ready(Err(RequestError::Closed {
                reason: self.closed_reason().unwrap_or("call already ended").into(),
            }));
        };
        if slot.outcome.is_some() {
            let slot = self.calls.remove(id).expect("present");
            return Poll::Ready(slot.outcome.expect("checked"));
        }
        match &mut slot.waker {
            Some(w) if w.will_wake(waker) => {}
            w => *w = Some(waker.clone()),
        }
        Poll::Pending
    }

    /// Forgets the waker of call `id`: its waiter is about to drive the
    /// connection itself and reads the outcome right after (waking it from
    /// its own drive would only make its task run once more for nothing).
    pub fn unregister(&mut self, id: u64) {
        if let Some(slot) = self.calls.get_mut(id) {
            slot.waker = None;
        }
    }

    /// Whether call `id` has its outcome (or is unknown).
    pub fn is_done(&self, id: u64) -> bool {
        !matches!(self.calls.get(id), Some(s) if s.outcome.is_none())
    }

    /// The caller of `id` went away before its outcome: the call is
    /// cancelled (the server is told) and forgotten.
    pub fn abandon(&mut self, now: Instant, id: u64, reason: &str) {
        if self.calls.get(id).is_some_and(|s| s.outcome.is_none()) {
            self.conn_mut().cancel(now, id, reason);
        }
        self.calls.remove(id);
        self.pump(now);
    }

    /// Cancels call `id`: it completes as cancelled and the server is told.
    pub fn cancel(&mut self, now: Instant, id: u64, reason: &str) {
        self.conn_mut().cancel(now, id, reason);
        self.pump(now);
    }

    /// Sends a notification.
    pub fn notify(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), CallError> {
        self.conn_mut().notify(now, method, params)?;
        self.pump(now);
        Ok(())
    }

    /// Closes gracefully (see [`Connection::close`]).
    pub fn close(&mut self, now: Instant) {
        self.conn_mut().close(now);
        self.pump(now);
    }

    /// Ready once the handshake is done; the reason if the connection
    /// ended first.
    pub fn poll_ready(&mut self, waker: &Waker) -> Poll<Result<(), CloseReason>> {
        match &mut self.ready {
            Handshake::Done => Poll::Ready(Ok(())),
            Handshake::Failed(reason) => Poll::Ready(Err(reason.clone())),
            Handshake::Connecting(waiters) => {
                if !waiters.iter().any(|w| w.will_wake(waker)) {
                    waiters.push(waker.clone());
                }
                Poll::Pending
            }
        }
    }

    /// Ready once the connection is closed and its server stopped.
    pub fn poll_closed(&mut self, waker: &Waker) -> Poll<()> {
        if self.conn.is_closed() {
            return Poll::Ready(());
        }
        if !self.close_waiters.iter().any(|w| w.will_wake(waker)) {
            self.close_waiters.push(waker.clone());
        }
        Poll::Pending
    }

    /// Whether the handshake is over: ready, or failed.
    pub fn is_settled(&self) -> bool {
        !matches!(self.ready, Handshake::Connecting(_))
    }

    /// How many calls got their outcome so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Whether the connection is closed (nothing more will happen).
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    /// Why the connection closed, if it has.
    pub fn closed_reason(&self) -> Option<&str> {
        self.info.closed.get().map(String::as_str)
    }

    /// A new stream of the server's notifications.
    pub fn subscribe(&self) -> Notifications {
        Notifications::new(self.notifications.subscribe())
    }

    /// The connection's counters.
    pub fn stats(&self) -> Stats {
        self.conn.stats()
    }

    /// The executor's stdin backlog: bytes taken with [`Effect::Write`]
    /// and not written yet ([`Connection::set_unwritten`]).
    pub fn set_unwritten(&mut self, bytes: usize) {
        self.executor_unwritten = bytes;
        self.conn
            .set_unwritten(self.effect_bytes.saturating_add(bytes));
    }

    /// The buffer of an [`Effect::Write`] the executor has written, given
    /// back for the next message ([`Connection::recycle`]).
    pub fn recycle(&mut self, written: Vec<u8>) {
        self.conn.recycle(written);
    }

    /// Calls started and not yet collected (those whose outcome came
    /// but was not taken yet included): cheaper than
    /// [`waiting`](Self::waiting).
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Calls waiting for their outcome.
    pub fn waiting(&self) -> usize {
        self.calls.values().filter(|s| s.outcome.is_none()).count()
    }

    /// Someone waiting that could lead the child's pipes: a call's waiter,
    /// or a caller waiting for the connection to be ready (after the
    /// server was started again, whoever waits must read its new pipes).
    pub fn any_waiter(&self) -> Option<Waker> {
        if let Some((_, waker)) = self.other_waiter(None) {
            return Some(waker);
        }
        match &self.ready {
            Handshake::Connecting(waiters) => waiters.first().cloned(),
            _ => None,
        }
    }

    /// The waker of some call still waiting other than `except` (to hand
    /// a role over to it).
    pub fn other_waiter(&self, except: Option<u64>) -> Option<(u64, Waker)> {
        self.calls
            .iter()
            .filter(|(id, s)| Some(*id) != except && s.outcome.is_none())
            .find_map(|(id, s)| s.waker.clone().map(|w| (id, w)))
    }

    // ----- handlers -------------------------------------------------------

    /// A handler's answer to server request `id`.
    pub fn respond(&mut self, now: Instant, id: RequestId, answer: Result<Value, ErrorObject>) {
        let answer = answer.and_then(|v| {
            serde_json::value::to_raw_value(&v)
                .map_err(|e| ErrorObject::internal(format!("handler result: {e}")))
        });
        if let Err(e) = self.conn_mut().respond(now, id, answer) {
            tracing::debug!("answer to a server request dropped: {e}");
        }
        self.pump(now);
    }

    /// Where the user agent ended after [`Effect::Authorize`] (the URL it
    /// reached), or why it could not.
    pub fn authorization(&mut self, now: Instant, result: Result<String, AuthorizeError>) {
        match result {
            Ok(callback) => self.conn_mut().authorization_response(now, &callback),
            Err(reason) => self
                .conn_mut()
                .authorization_failed(now, &reason.to_string()),
        }
        self.pump(now);
    }

    /// The token store's lock and the state read under it, after
    /// [`Effect::LockTokens`].
    pub fn store_locked(&mut self, now: Instant, (lock, state): Locked) {
        self.store_lock = lock;
        self.conn_mut().stored_state(now, state);
        self.pump(now);
    }

    // ----- executor -------------------------------------------------------

    /// Something happened on the wire.
    pub fn input(&mut self, now: Instant, input: Input<'_>) {
        self.conn_mut().handle_input(now, input);
        self.pump(now);
    }

    /// A timer fired (early or spurious calls are harmless).
    pub fn timeout(&mut self, now: Instant) {
        self.conn_mut().handle_timeout(now);
        self.pump(now);
    }

    /// When [`Session::timeout`] must be called next (asked of the
    /// connection once after each change, however often it is asked).
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        match self.deadline {
            Some(known) => known,
            None => {
                let next = self.conn.poll_timeout();
                self.deadline = Some(next);
                next
            }
        }
    }

    /// The connection, to change it: its next deadline is asked again.
    /// (Taking its outputs and telling it the executor's backlog change
    /// no timer, and go through `self.conn` directly.)
    fn conn_mut(&mut self) -> &mut Connection {
        self.deadline = None;
        &mut self.conn
    }

    /// The next thing the executor must do.
    pub fn next_effect(&mut self) -> Option<Effect> {
        let effect = self.effects.pop_front();
        if let Some(Effect::Write(bytes)) = &effect {
            self.effect_bytes -= bytes.len();
            // The executor reports its backlog once it has taken these.
        }
        effect
    }

    /// The wakers of the calls completed since the last time, to wake
    /// after releasing the lock the session is kept behind (woken under
    /// it, a thousand waiting threads would wake only to wait for it).
    /// `None` when there are none (no buffer taken).
    pub fn take_wakers(&mut self) -> Option<Vec<Waker>> {
        (!self.wake.is_empty()).then(|| std::mem::take(&mut self.wake))
    }

    /// Whether effects wait to be performed.
    pub fn has_effects(&self) -> bool {
        !self.effects.is_empty()
    }

    // ----- internals ------------------------------------------------------

    /// Takes every output of the connection: bookkeeping here, the rest
    /// queued as effects.
    fn pump(&mut self, now: Instant) {
        while let Some(out) = self.conn.poll_output() {
            match out {
                Output::Write(bytes) => {
                    self.effect_bytes += bytes.len();
                    self.conn
                        .set_unwritten(self.effect_bytes.saturating_add(self.executor_unwritten));
                    self.effects.push_back(Effect::Write(bytes));
                }
                Output::CloseStdin => self.effects.push_back(Effect::CloseStdin),
                Output::Signal(s) => self.effects.push_back(Effect::Signal(s)),
                Output::CheckGroup => self.effects.push_back(Effect::CheckGroup),
                Output::Spawn => self.effects.push_back(Effect::Spawn),
                Output::CheckStdin => self.effects.push_back(Effect::CheckStdin),
                Output::Http(req) => self.effects.push_back(Effect::Http(req)),
                Output::AbortHttp(x) => self.effects.push_back(Effect::AbortHttp(x)),
                Output::Ready => self.on_ready(),
                Output::Complete { id, outcome } => {
                    if let Some(slot) = self.calls.get_mut(id) {
                        self.completed += 1;
                        slot.outcome = Some(outcome);
                        self.wake.extend(slot.waker.take());
                    }
                }
                Output::Progress { id, progress } => {
                    if let Some(f) = self.calls.get(id).and_then(|s| s.progress.as_ref()) {
                        f(&progress);
                    }
                }
                Output::Notification(n) => {
                    tracing::trace!(method = n.method(), "notification");
                    if let Some(f) = &self.setup.on_notification {
                        f(&n);
                    }
                    self.notifications.send(n);
                }
                Output::ServerRequest { id, method, params } => {
                    self.server_request(now, id, &method, params)
                }
                Output::ServerRequestCancelled { id, reason } => {
                    tracing::debug!(%id, ?reason, "server withdrew its request");
                    self.effects.push_back(Effect::Withdraw(id));
                }
                Output::Log(line) => tracing::debug!(target: "mcpwire::server_stderr", "{line}"),
                Output::Diagnostic(d) => {
                    if d.is_note() {
                        tracing::debug!("{d}");
                    } else {
                        tracing::warn!("{d}");
                    }
                    if let Some(f) = &self.setup.on_diagnostic {
                        f(&d);
                    }
                }
                Output::Authorize { url } => match &self.setup.auth {
                    Some((handler, _)) => {
                        tracing::info!("authorization needed: sending the user agent to the authorization server");
                        self.effects.push_back(Effect::Authorize {
                            handler: handler.clone(),
                            url,
                        })
                    }
                    None => self
                        .conn_mut()
                        .authorization_failed(now, "no redirect handler configured"),
                },
                Output::Authorized(state) => {
                    tracing::debug!(issuer = ?state.issuer, "authorized");
                    // Under the lock of the refresh if it is held (then
                    // released), else the store locks for the write.
                    let saved = match (self.store_lock.take(), &self.setup.auth) {
                        (Some(lock), _) => lock.save(&state),
                        (None, Some((_, store))) => store.save(&state),
                        (None, None) => Ok(()),
                    };
                    if let Err(e) = saved {
                        tracing::warn!("could not save the tokens: {e}");
                    }
                }
                Output::LockTokens { endpoint } => match &self.setup.auth {
                    Some((_, store)) => self.effects.push_back(Effect::LockTokens {
                        store: store.clone(),
                        endpoint,
                    }),
                    None => self.conn_mut().stored_state(now, None),
                },
                Output::UnlockTokens => self.store_lock = None,
                Output::Closed(reason) => self.on_closed(reason),
            }
        }
    }

    fn on_ready(&mut self) {
        if let (Some(memory), Some(era)) = (&self.setup.remember, self.conn.era()) {
            memory.remember(era);
        }
        if let Some(f) = self.conn.era_finding() {
            let _ = self.info.era_finding.set(f.clone());
        }
        let _ = self.info.connected_in.set(self.started.elapsed());
        if let Some(server) = self.conn.server() {
            let _ = self.info.server.set(server.clone());
        }
        let _ = self.info.transport.set(self.conn.transport_name());
        if let Handshake::Connecting(waiters) = std::mem::replace(&mut self.ready, Handshake::Done)
        {
            waiters.into_iter().for_each(Waker::wake);
        }
    }

    fn on_closed(&mut self, reason: CloseReason) {
        tracing::debug!(%reason, "connection closed");
        self.store_lock = None;
        let text = reason.to_string();
        let _ = self.info.closed.set(text.clone());
        self.notifications.close();
        if let Handshake::Connecting(waiters) =
            std::mem::replace(&mut self.ready, Handshake::Failed(reason))
        {
            waiters.into_iter().for_each(Waker::wake);
        }
        // The connection completes every request before Closed; a call
        // left would be a bug: fail it rather than let it hang.
        for slot in self.calls.values_mut().filter(|s| s.outcome.is_none()) {
            slot.outcome = Some(Err(RequestError::Closed {
                reason: text.clone(),
            }));
            if let Some(w) = slot.waker.take() {
                w.wake();
            }
        }
        self.close_waiters.drain(..).for_each(Waker::wake);
    }

    fn server_request(
        &mut self,
        now: Instant,
        id: RequestId,
        method: &str,
        params: Option<Box<RawValue>>,
    ) {
        let handler = ServerRequestKind::of(method).and_then(|k| self.setup.handlers.get(k));
        let Some(handler) = handler else {
            // The connection surfaces only what we declared; answer anyway.
            if let Err(e) = self
                .conn_mut()
                .respond(now, id, Err(ErrorObject::method_not_found()))
            {
                tracing::debug!("answer to a server request dropped: {e}");
            }
            return;
        };
        let params = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        self.effects.push_back(Effect::Handle {
            id,
            handler: handler.clone(),
            params,
        });
    }
}
