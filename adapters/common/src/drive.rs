//! The async executor of a [`Session`]: the session and every I/O source
//! of its connection (the child's pipes and exit, HTTP exchanges, the
//! timer) behind one lock, driven by whoever holds it.
//!
//! ```text
//!   reactor ──source waker──► Router ──► the leader (a call waiting for its
//!     (stdout readable,         │          outcome: it drives, on its own task)
//!      exchange ready,          └──────► else the driver task (it drives)
//!      timer fired)
//!
//!   drive():  effects → stdin buffer / exchanges / signals / handler tasks
//!             flagged sources → poll with their own wakers → Session::input
//!             the core's deadline → the timer
//! ```
//!
//! Sources are always polled with their own wakers, never with a caller's,
//! so any task may drive and no wake-up is lost when the leader changes.
//! A call waiting for its outcome leads: the bytes of its answer are read,
//! decoded and completed on its own task, with no hop through the driver
//! (on smol, whose spawned tasks run on other threads, that hop was most
//! of the cost of a call). The driver task serves when no call waits, and
//! as a fallback when a leader has not answered a wake-up by the next
//! beat of the timer, nobody else having served meanwhile (a call future
//! held but not polled; see `Owes`).

use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures_io::{AsyncRead, AsyncWrite};
use mcpwire::connection::{CloseReason, Input};
use mcpwire::exchange::ExchangeId;
use mcpwire::rpc::RequestId;
use mcpwire::transport::stdio::ExitStatus;
use mcpwire::ServerConfig;

use crate::handlers::{BoxFuture, Handler};
use crate::http::{HttpClient, Inbox};
use crate::runtime::{Child, Runtime, SpawnError};
use crate::session::{Effect, Guard, HoldsSession, Info, Outcome, Session};
use crate::sync::{lock, spawn_abortable, AbortHandle};

/// Source bits of the [`Router`].
const STDIN: u32 = 1;
const STDOUT: u32 = 1 << 1;
const STDERR: u32 = 1 << 2;
const EXIT: u32 = 1 << 3;
const TIMER: u32 = 1 << 4;
const HTTP: u32 = 1 << 5;
/// Effects were queued by someone who could not perform them.
const EFFECTS: u32 = 1 << 6;
const ALL: u32 = (1 << 7) - 1;

/// Most rounds of one `drive` before it yields (a flood of input must not
/// keep a leader from returning its own outcome forever).
const MAX_ROUNDS: usize = 64;
/// Reads of one pipe per round.
const MAX_READS: usize = 16;
/// While calls wait, the timer fires at least this often: a leader woken
/// before a beat that nobody served since is taken for lost, and the
/// driver task serves in its place (see [`Owes`]).
const HEARTBEAT: Duration = Duration::from_millis(100);

/// Where source wake-ups go.
pub(crate) struct Router {
    bits: AtomicU32,
    /// Times anyone took the bits to serve the sources (a wake-up owed
    /// before the last one was answered by whoever took them).
    takes: AtomicU32,
    http_ready: Mutex<Vec<ExchangeId>>,
    target: Mutex<Target>,
}

/// What the leader owes since it was last woken.
///
/// A leader may be late (its task polls many calls, and another of them
/// served the sources meanwhile) or lost (a call future polled once and
/// then held, not polled: a `select!` that another branch won). Only the
/// timer tells them apart: a leader woken before a beat of the timer
/// ([`HEARTBEAT`], while calls wait) that nobody served since is taken
/// for lost, and the driver task is woken with it from then on, until it
/// polls again. (Every wake-up of the timer reaches the driver as well,
/// so that the beats go on whoever leads.) A burst of wake-ups (many
/// exchanges ready at once) or a late leader calls the driver in no more:
/// on smol, whose driver runs on another thread, that only had it contend
/// for the lock.
#[derive(Default, Clone, Copy, PartialEq)]
enum Owes {
    /// It polled since (or was never woken).
    #[default]
    Nothing,
    /// It was woken when [`Router::takes`] was this, and nobody has
    /// served the sources since (neither it nor another task).
    Since(u32),
    /// Taken for lost: the driver task is woken with it.
    Stuck,
}

#[derive(Default)]
struct Target {
    /// The call that drives when woken, and its task's waker.
    leader: Option<(u64, Waker)>,
    /// Whether the leader answered its last wake-up.
    owes: Owes,
    driver: Option<Waker>,
}

impl Router {
    fn new() -> Self {
        Router {
            bits: AtomicU32::new(ALL),
            takes: AtomicU32::new(0),
            http_ready: Mutex::new(Vec::new()),
            target: Mutex::new(Target::default()),
        }
    }

    /// Source `bit` may be ready: wake whoever drives.
    fn signal(&self, bit: u32) {
        self.bits.fetch_or(bit, Ordering::SeqCst);
        let (first, second) = {
            let mut t = lock(&self.target);
            match &t.leader {
                Some((_, leader)) => {
                    let leader = leader.clone();
                    let takes = self.takes.load(Ordering::SeqCst);
                    t.owes = match t.owes {
                        Owes::Since(at) if at == takes && bit == TIMER => Owes::Stuck,
                        Owes::Since(at) if at == takes => Owes::Since(at),
                        Owes::Stuck => Owes::Stuck,
                        _ => Owes::Since(takes),
                    };
                    // The timer's wake-ups reach the driver too: if the
                    // leader is lost, nobody else would poll the fired
                    // timer and arm the next beat (they are rare: a beat
                    // or a deadline).
                    let fallback = if t.owes == Owes::Stuck || bit == TIMER {
                        t.driver.clone()
                    } else {
                        None
                    };
                    (Some(leader), fallback)
                }
                None => (t.driver.clone(), None),
            }
        };
        first.into_iter().chain(second).for_each(Waker::wake);
    }

    fn take_bits(&self) -> u32 {
        // Counted before the swap: a signal that saw the count before this
        // one set its bit before this swap, which serves it.
        self.takes.fetch_add(1, Ordering::SeqCst);
        self.bits.swap(0, Ordering::SeqCst)
    }

    fn pending_bits(&self) -> bool {
        self.bits.load(Ordering::Acquire) != 0
    }

    /// Call `id`, waiting with `waker`, drives from now on if nobody does,
    /// or in any case if it `drove` (its task was just polled and served
    /// the sources: a live leader, where the one it replaces may not have
    /// answered its wake-up yet — which would call the driver task in,
    /// on another thread for smol, to contend for the lock).
    fn claim(&self, id: u64, waker: &Waker, drove: bool) {
        let mut t = lock(&self.target);
        match &mut t.leader {
            Some((lead, w)) if *lead == id => {
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
                t.owes = Owes::Nothing;
            }
            Some(_) if !drove => {}
            _ => {
                let replaced = t.leader.replace((id, waker.clone())).is_some();
                t.owes = Owes::Nothing;
                // A source that signalled since this call drove woke the
                // leader replaced: the new one must not miss it.
                if replaced && self.pending_bits() {
                    drop(t);
                    waker.wake_by_ref();
                }
            }
        }
    }

    /// Call `id` stops waiting: if it led, `next` (another waiting call)
    /// leads, or nobody.
    fn resign(&self, id: u64, next: Option<(u64, Waker)>) {
        let heir = {
            let mut t = lock(&self.target);
            if t.leader.as_ref().is_none_or(|(lead, _)| *lead != id) {
                return;
            }
            t.leader = next;
            t.owes = Owes::Nothing;
            // A source may have signalled the leader after it last looked
            // at the bits: whoever drives now must not miss that.
            if !self.pending_bits() {
                return;
            }
            match &t.leader {
                Some((_, w)) => Some(w.clone()),
                None => t.driver.clone(),
            }
        };
        if let Some(w) = heir {
            w.wake();
        }
    }

    fn set_driver(&self, waker: &Waker) {
        let mut t = lock(&self.target);
        match &t.driver {
            Some(w) if w.will_wake(waker) => {}
            _ => t.driver = Some(waker.clone()),
        }
    }
}

/// The waker of one source.
struct SourceWaker {
    router: Weak<Router>,
    bit: u32,
}

impl Wake for SourceWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(router) = self.router.upgrade() {
            router.signal(self.bit);
        }
    }
}

/// The waker of one exchange.
struct ExchangeWaker {
    router: Weak<Router>,
    id: ExchangeId,
}

impl Wake for ExchangeWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(router) = self.router.upgrade() {
            lock(&router.http_ready).push(self.id);
            router.signal(HTTP);
        }
    }
}

fn source_waker(router: &Arc<Router>, bit: u32) -> Waker {
    Waker::from(Arc::new(SourceWaker {
        router: Arc::downgrade(router),
        bit,
    }))
}

/// The child's side of a stdio connection.
struct ChildIo {
    pid: Option<u32>,
    /// Its process group (killed if dropped before found empty).
    group: crate::process::Group,
    stdin: Option<Box<dyn AsyncWrite + Send + Unpin>>,
    /// Asks what the child has not read of stdin; dropped with `stdin`
    /// (it holds the pipe open).
    stdin_probe: Option<crate::process::StdinProbe>,
    /// Bytes for stdin not written yet (from `written` on).
    backlog: Vec<u8>,
    written: usize,
    /// Close stdin once the backlog is written.
    close_stdin: bool,
    stdout: Option<Box<dyn AsyncRead + Send + Unpin>>,
    stderr: Option<Box<dyn AsyncRead + Send + Unpin>>,
    exit: Option<BoxFuture<io::Result<std::process::ExitStatus>>>,
    /// Tells stdout to read the pipe itself ([`Child::read_now`]).
    read_now: Option<crate::process::ReadNow>,
    /// Whether reading stdout right after a write pays.
    after_write: crate::process::AfterWrite,
}

/// The armed timer.
struct Timer {
    at: Instant,
    /// Armed while calls waited: no later than a [`HEARTBEAT`] from then.
    beats: bool,
    sleep: BoxFuture<()>,
}

struct Exchange {
    future: BoxFuture<()>,
    inbox: Arc<Inbox>,
    waker: Waker,
}

impl ChildIo {
    fn new(c: Child) -> ChildIo {
        ChildIo {
            pid: c.pid,
            group: crate::process::Group::new(c.group),
            stdin: Some(c.stdin),
            stdin_probe: c.stdin_probe,
            backlog: Vec::new(),
            written: 0,
            close_stdin: false,
            stdout: Some(c.stdout),
            stderr: Some(c.stderr),
            exit: Some(c.wait),
            read_now: c.read_now,
            after_write: Default::default(),
        }
    }
}

/// Everything behind the lock.
pub(crate) struct State<R: Runtime> {
    pub(crate) session: Session,
    child: Option<ChildIo>,
    /// The stdio server's definition, to start it again
    /// ([`Effect::Spawn`]).
    server: Option<ServerConfig>,
    http: HttpClient<R>,
    exchanges: HashMap<ExchangeId, Exchange>,
    timer: Option<Timer>,
    handlers: HashMap<RequestId, AbortHandle>,
    buf: Box<[u8]>,
    wakers: [Waker; 5],
}

/// A session and its I/O, shared by the client handles, the call futures,
/// the driver task and the handler tasks.
pub(crate) struct Shared<R: Runtime> {
    state: Mutex<State<R>>,
    router: Arc<Router>,
    pub(crate) info: Arc<Info>,
}

impl<R: Runtime> Shared<R> {
    /// The shared state of `session`, with its stdio server's `child`
    /// and definition.
    pub(crate) fn new(
        session: Session,
        child: Option<(Child, ServerConfig)>,
        http: HttpClient<R>,
    ) -> Arc<Self> {
        let router = Arc::new(Router::new());
        let info = session.info().clone();
        let wakers = [STDIN, STDOUT, STDERR, EXIT, TIMER].map(|bit| source_waker(&router, bit));
        let (child, server) = match child {
            Some((c, server)) => (Some(ChildIo::new(c)), Some(server)),
            None => (None, None),
        };
        Arc::new(Shared {
            state: Mutex::new(State {
                session,
                child,
                server,
                http,
                exchanges: HashMap::new(),
                timer: None,
                handlers: HashMap::new(),
                buf: vec![0; 64 * 1024].into_boxed_slice(),
                wakers,
            }),
            router,
            info,
        })
    }

    pub(crate) fn lock(&self) -> Guard<'_, State<R>> {
        Guard::lock(&self.state)
    }

    /// Runs `f` on the session, then performs what it asked for: here if
    /// this thread may create the runtime's resources, else by waking the
    /// one who drives.
    pub(crate) fn with<T>(self: &Arc<Self>, f: impl FnOnce(&mut Session) -> T) -> T {
        let mut state = self.lock();
        let out = f(&mut state.session);
        self.drive_or_poke(&mut state);
        out
    }

    fn drive_or_poke(self: &Arc<Self>, state: &mut State<R>) {
        if R::in_context() {
            state.drive(self);
        } else if state.session.has_effects() {
            self.router.signal(EFFECTS);
        }
    }

    /// Starts the driver task.
    pub(crate) fn spawn_driver(self: &Arc<Self>) -> Result<(), SpawnError> {
        let shared = self.clone();
        R::spawn(Box::pin(async move {
            poll_fn(|cx| {
                shared.router.set_driver(cx.waker());
                let mut state = shared.lock();
                state.drive(&shared);
                if state.finished() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
            let mut state = shared.lock();
            state.shutdown();
        }))
    }

    /// Waits until the session is ready (or failed).
    pub(crate) async fn ready(self: &Arc<Self>) -> Result<(), CloseReason> {
        poll_fn(|cx| {
            let mut state = self.lock();
            self.drive_or_poke(&mut state);
            state.session.poll_ready(cx.waker())
        })
        .await
    }

    /// Waits until the session is closed.
    pub(crate) async fn closed(self: &Arc<Self>) {
        poll_fn(|cx| {
            let mut state = self.lock();
            self.drive_or_poke(&mut state);
            state.session.poll_closed(cx.waker())
        })
        .await
    }

    /// Wakes whoever drives (effects were queued without being performed).
    pub(crate) fn poke(&self) {
        self.router.signal(EFFECTS);
    }

    /// Cancels call `id` (from any thread).
    pub(crate) fn cancel(self: &Arc<Self>, id: u64, reason: &str) {
        self.with(|s| s.cancel(Instant::now(), id, reason));
    }

    /// A call's answer to server request `id` from its handler.
    fn respond(
        self: &Arc<Self>,
        id: RequestId,
        answer: Result<serde_json::Value, mcpwire::rpc::ErrorObject>,
    ) {
        self.with(|s| s.respond(Instant::now(), id, answer));
    }

    /// The future of call `id`, started already.
    pub(crate) fn call(self: &Arc<Self>, id: u64) -> CallFuture<R> {
        CallFuture {
            shared: self.clone(),
            id,
            done: false,
        }
    }
}

impl<R: Runtime> HoldsSession for State<R> {
    fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}

impl<R: Runtime> crate::surface::SessionAccess for Shared<R> {
    fn info(&self) -> &Info {
        &self.info
    }

    fn inspect<T>(&self, f: impl FnOnce(&mut Session) -> T) -> T {
        f(&mut self.lock().session)
    }
}

/// Waits for one call's outcome, driving while it waits; dropping it
/// before the outcome cancels the call (and the server is told).
pub(crate) struct CallFuture<R: Runtime> {
    shared: Arc<Shared<R>>,
    id: u64,
    done: bool,
}

impl<R: Runtime> Future for CallFuture<R> {
    type Output = Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let this = &mut *self;
        let shared = &this.shared;
        let mut state = shared.lock();
        let drove = shared.router.pending_bits() || state.session.has_effects();
        if drove {
            state.session.unregister(this.id);
            shared.drive_or_poke(&mut state);
        }
        match state.session.poll_call(this.id, cx.waker()) {
            Poll::Ready(outcome) => {
                this.done = true;
                let next = state.session.other_waiter(Some(this.id));
                shared.router.resign(this.id, next);
                Poll::Ready(outcome)
            }
            Poll::Pending => {
                // Only a task that may drive leads (a tokio client polled
                // outside its runtime is served by the driver).
                if R::in_context() {
                    shared.router.claim(this.id, cx.waker(), drove);
                }
                Poll::Pending
            }
        }
    }
}

impl<R: Runtime> Drop for CallFuture<R> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let id = self.id;
        let shared = &self.shared;
        let mut state = shared.lock();
        state
            .session
            .abandon(Instant::now(), id, "request dropped by the client");
        let next = state.session.other_waiter(Some(id));
        shared.router.resign(id, next);
        if state.session.has_effects() {
            // Not necessarily on a runtime thread: let the driver send the
            // cancellation.
            shared.router.signal(EFFECTS);
        }
    }
}

impl<R: Runtime> State<R> {
    /// Performs the session's effects and services every source that may
    /// be ready, until nothing is left (or the round budget is spent).
    fn drive(&mut self, shared: &Arc<Shared<R>>) {
        let router = &shared.router;
        for _ in 0..MAX_ROUNDS {
            self.perform(shared);
            self.arm_timer(router);
            let bits = router.take_bits();
            if bits == 0 {
                return;
            }
            let now = Instant::now();
            let wrote = bits & STDIN != 0 && self.flush_stdin(now);
            if bits & STDOUT != 0 {
                self.read_pipe(now, true, router);
            } else if wrote {
                self.read_after_write(now, router);
            }
            if bits & STDERR != 0 {
                self.read_pipe(now, false, router);
            }
            if bits & EXIT != 0 {
                self.poll_exit(now);
            }
            if bits & HTTP != 0 {
                self.poll_exchanges(now, router);
            }
            if bits & TIMER != 0 {
                self.poll_timer(now);
            }
        }
        // Budget spent: come back after others had their turn.
        router.signal(EFFECTS);
    }

    fn perform(&mut self, shared: &Arc<Shared<R>>) {
        while let Some(effect) = self.session.next_effect() {
            match effect {
                Effect::Write(bytes) => {
                    if let Some(c) = &mut self.child {
                        if c.stdin.is_some() && !c.close_stdin {
                            if c.backlog.is_empty() {
                                // Nothing waits: the message is the backlog
                                // (no copy), and the written one's buffer
                                // is the next message's.
                                let written = std::mem::replace(&mut c.backlog, bytes);
                                c.written = 0;
                                self.session.recycle(written);
                            } else {
                                c.backlog.extend_from_slice(&bytes);
                                self.session.recycle(bytes);
                            }
                            shared.router.bits.fetch_or(STDIN, Ordering::AcqRel);
                        }
                        let unwritten = c.backlog.len() - c.written;
                        self.session.set_unwritten(unwritten);
                    }
                }
                Effect::CloseStdin => {
                    if let Some(c) = &mut self.child {
                        c.close_stdin = true;
                        shared.router.bits.fetch_or(STDIN, Ordering::AcqRel);
                    }
                }
                Effect::Signal(sig) => {
                    if let Some(c) = &mut self.child {
                        if c.group.is_known() {
                            if !c.group.signal(sig) {
                                self.session.input(Instant::now(), Input::GroupEmpty);
                            }
                        } else if let Some(pid) = c.pid {
                            crate::process::signal(pid, sig);
                        }
                    }
                }
                Effect::CheckGroup => {
                    let alive = self.child.as_mut().is_some_and(|c| c.group.check());
                    if !alive {
                        self.session.input(Instant::now(), Input::GroupEmpty);
                    }
                }
                Effect::CheckStdin => {
                    let unread = self.child.as_ref().and_then(|c| {
                        let pipe = c.stdin_probe.as_ref()?.unread()?;
                        Some(pipe + (c.backlog.len() - c.written))
                    });
                    self.session
                        .input(Instant::now(), Input::StdinUnread(unread));
                }
                Effect::Spawn => {
                    let spawned = match &self.server {
                        Some(server) => R::spawn_child(server),
                        None => Err(io::Error::other("no stdio server to start")),
                    };
                    match spawned {
                        Ok(c) => {
                            // The old child's pipes go with it: nothing of
                            // them is read again.
                            self.child = Some(ChildIo::new(c));
                            shared
                                .router
                                .bits
                                .fetch_or(STDOUT | STDERR | EXIT | STDIN, Ordering::AcqRel);
                            self.session.input(Instant::now(), Input::Spawned);
                        }
                        Err(e) => {
                            let e = e.to_string();
                            self.session.input(Instant::now(), Input::SpawnFailed(&e));
                        }
                    }
                }
                Effect::Http(req) => {
                    let id = req.exchange;
                    let (future, inbox) = self.http.exchange(*req);
                    let waker = Waker::from(Arc::new(ExchangeWaker {
                        router: Arc::downgrade(&shared.router),
                        id,
                    }));
                    self.exchanges.insert(
                        id,
                        Exchange {
                            future,
                            inbox,
                            waker,
                        },
                    );
                    lock(&shared.router.http_ready).push(id);
                    shared.router.bits.fetch_or(HTTP, Ordering::AcqRel);
                }
                Effect::AbortHttp(id) => {
                    // Dropping the future closes its connection.
                    self.exchanges.remove(&id);
                }
                Effect::Handle {
                    id,
                    handler,
                    params,
                } => self.handle(shared, id, handler, params),
                Effect::Withdraw(id) => {
                    if let Some(task) = self.handlers.remove(&id) {
                        task.abort();
                    }
                }
                Effect::Authorize { handler, url } => {
                    let weak = Arc::downgrade(shared);
                    let spawned = crate::auth::authorize_on_thread(handler, url, move |result| {
                        if let Some(shared) = weak.upgrade() {
                            shared.with(|s| s.authorization(Instant::now(), result));
                        }
                    });
                    if let Err(e) = spawned {
                        self.session.authorization(Instant::now(), Err(e.into()));
                    }
                }
                Effect::LockTokens { store, endpoint } => {
                    let weak = Arc::downgrade(shared);
                    let spawned = crate::auth::lock_on_thread(store, endpoint, move |locked| {
                        if let Some(shared) = weak.upgrade() {
                            shared.with(|s| s.store_locked(Instant::now(), locked));
                        }
                    });
                    if let Err(e) = spawned {
                        tracing::warn!("{e}: refreshing without the token store's lock");
                        self.session.store_locked(Instant::now(), (None, None));
                    }
                }
            }
        }
    }

    /// Runs a server request's handler: an `async` one on a task of its
    /// own (aborted if the server withdraws the request), a blocking one
    /// on a thread.
    fn handle(
        &mut self,
        shared: &Arc<Shared<R>>,
        id: RequestId,
        handler: Handler,
        params: serde_json::Value,
    ) {
        let weak = Arc::downgrade(shared);
        match handler {
            Handler::Async(f) => {
                let rid = id.clone();
                let task = spawn_abortable::<R>(Box::pin(async move {
                    let answer = f(params).await;
                    if let Some(shared) = weak.upgrade() {
                        shared.respond(rid, answer);
                    }
                }));
                match task {
                    Ok(task) => {
                        self.handlers.insert(id, task);
                    }
                    Err(why) => self.session.respond(
                        Instant::now(),
                        id,
                        Err(mcpwire::rpc::ErrorObject::internal(why.to_string())),
                    ),
                }
            }
            handler @ Handler::Blocking(_) => {
                let rid = id.clone();
                let ran = handler.run_on_thread(params, move |answer| {
                    if let Some(shared) = weak.upgrade() {
                        shared.respond(rid, answer);
                    }
                });
                if let Err(e) = ran {
                    self.session.respond(Instant::now(), id, Err(e));
                }
            }
        }
    }

    /// Writes what waits for the child's stdin; true when some of it went.
    fn flush_stdin(&mut self, now: Instant) -> bool {
        let Some(c) = &mut self.child else {
            return false;
        };
        let mut cx = Context::from_waker(&self.wakers[0]);
        let mut failed = None;
        let mut wrote = false;
        if let Some(stdin) = &mut c.stdin {
            while c.written < c.backlog.len() {
                match Pin::new(&mut **stdin).poll_write(&mut cx, &c.backlog[c.written..]) {
                    Poll::Ready(Ok(0)) => {
                        failed = Some("stdin closed".to_owned());
                        break;
                    }
                    Poll::Ready(Ok(n)) => {
                        c.written += n;
                        wrote = true;
                    }
                    Poll::Ready(Err(e)) => {
                        failed = Some(e.to_string());
                        break;
                    }
                    Poll::Pending => break,
                }
            }
            if c.written == c.backlog.len() {
                c.backlog.clear();
                c.written = 0;
                if let Poll::Ready(Err(e)) = Pin::new(&mut **stdin).poll_flush(&mut cx) {
                    failed = Some(e.to_string());
                }
            } else if c.written > 64 * 1024 && c.written * 2 > c.backlog.len() {
                c.backlog.drain(..c.written);
                c.written = 0;
            }
        }
        if failed.is_some() {
            c.stdin = None;
            c.stdin_probe = None;
            c.backlog.clear();
            c.written = 0;
        }
        let unwritten = c.backlog.len() - c.written;
        let drained = c.backlog.is_empty();
        if c.close_stdin && drained {
            c.stdin_probe = None;
            if let Some(mut stdin) = c.stdin.take() {
                // Closing a pipe does not wait; a Pending here only means
                // the close happens when it is dropped, now.
                let _ = Pin::new(&mut *stdin).poll_close(&mut cx);
            }
        }
        self.session.set_unwritten(unwritten);
        if let Some(e) = failed {
            self.session.input(now, Input::WriteFailed(&e));
        }
        wrote
    }

    /// One look at stdout right after a write, when that has paid lately
    /// ([`Child::read_now`], [`AfterWrite::should_read`]).
    ///
    /// [`AfterWrite::should_read`]: crate::process::AfterWrite::should_read
    fn read_after_write(&mut self, now: Instant, router: &Router) {
        let in_flight = self.session.calls_in_flight();
        let Some(c) = &mut self.child else { return };
        let Some(read_now) = &c.read_now else { return };
        let ready = c.backlog.is_empty() && c.stdout.is_some();
        if !c.after_write.should_read(in_flight, ready) {
            return;
        }
        read_now.set();
        let found = self.read_pipe(now, true, router);
        if let Some(c) = &mut self.child {
            c.after_write.found(found);
        }
    }

    /// Reads the pipe until it would block; true when it gave bytes or
    /// ended.
    fn read_pipe(&mut self, now: Instant, stdout: bool, router: &Router) -> bool {
        let Some(c) = &mut self.child else {
            return false;
        };
        let (pipe, waker) = if stdout {
            (&mut c.stdout, &self.wakers[1])
        } else {
            (&mut c.stderr, &self.wakers[2])
        };
        let mut cx = Context::from_waker(waker);
        for round in 0..MAX_READS {
            let Some(p) = pipe.as_mut() else {
                return round > 0;
            };
            match Pin::new(&mut **p).poll_read(&mut cx, &mut self.buf) {
                Poll::Ready(Ok(n)) if n > 0 => {
                    let data = &self.buf[..n];
                    let input = if stdout {
                        Input::Stdout(data)
                    } else {
                        Input::Stderr(data)
                    };
                    self.session.input(now, input);
                }
                // EOF, or an error that ends the pipe all the same.
                Poll::Ready(_) => {
                    *pipe = None;
                    let eof = if stdout {
                        Input::StdoutEof
                    } else {
                        Input::StderrEof
                    };
                    self.session.input(now, eof);
                    return true;
                }
                Poll::Pending => return round > 0,
            }
        }
        router
            .bits
            .fetch_or(if stdout { STDOUT } else { STDERR }, Ordering::AcqRel);
        true
    }

    fn poll_exit(&mut self, now: Instant) {
        let Some(c) = &mut self.child else { return };
        let Some(exit) = &mut c.exit else { return };
        let mut cx = Context::from_waker(&self.wakers[3]);
        if let Poll::Ready(status) = exit.as_mut().poll(&mut cx) {
            c.exit = None;
            // Reaped: its pid may be reused, never signal it again.
            c.pid = None;
            let status = match status {
                Ok(s) => crate::process::exit_status(s),
                Err(_) => ExitStatus {
                    code: None,
                    signal: None,
                },
            };
            self.session.input(now, Input::Exited(status));
        }
    }

    fn poll_exchanges(&mut self, now: Instant, router: &Router) {
        let ready = std::mem::take(&mut *lock(&router.http_ready));
        for id in ready {
            let Some(x) = self.exchanges.get_mut(&id) else {
                continue;
            };
            let mut cx = Context::from_waker(&x.waker);
            let finished = x.future.as_mut().poll(&mut cx).is_ready();
            let inbox = x.inbox.clone();
            if finished {
                self.exchanges.remove(&id);
            }
            for event in inbox.drain() {
                self.session.input(now, event.as_input());
            }
        }
    }

    fn poll_timer(&mut self, now: Instant) {
        let Some(timer) = &mut self.timer else {
            return;
        };
        let mut cx = Context::from_waker(&self.wakers[4]);
        if timer.sleep.as_mut().poll(&mut cx).is_ready() {
            self.timer = None;
            self.session.timeout(now);
        }
    }

    /// Arms a timer for the core's next deadline when it is earlier than
    /// the armed one. A timer that fires early is harmless (the session
    /// ignores an early timeout and the next one is armed), and keeping it
    /// saves a timer per call: each call's new deadline is later. While
    /// calls wait, the timer beats at least every [`HEARTBEAT`] (for a
    /// lost leader, see [`Owes`]).
    fn arm_timer(&mut self, router: &Router) {
        let due = self.session.poll_timeout();
        // Most rounds: a timer armed no later than the deadline, beating
        // if calls wait.
        if let Some(t) = &self.timer {
            if due.is_none_or(|d| d >= t.at) && (t.beats || self.session.calls_in_flight() == 0) {
                return;
            }
        }
        let beats = self.session.calls_in_flight() > 0;
        let at = if beats {
            let beat = Instant::now() + HEARTBEAT;
            due.map_or(beat, |d| d.min(beat))
        } else if let Some(d) = due {
            d
        } else {
            return;
        };
        let mut sleep = R::sleep_until(at);
        let mut cx = Context::from_waker(&self.wakers[4]);
        if sleep.as_mut().poll(&mut cx).is_ready() {
            router.bits.fetch_or(TIMER, Ordering::AcqRel);
            sleep = Box::pin(std::future::ready(()));
        }
        self.timer = Some(Timer { at, beats, sleep });
    }

    /// The session is closed and nothing of it runs any more.
    fn finished(&self) -> bool {
        self.session.is_closed()
    }

    /// After the close: stop what still runs.
    fn shutdown(&mut self) {
        self.http.shutdown();
        for (_, task) in self.handlers.drain() {
            task.abort();
        }
        self.exchanges.clear();
        self.timer = None;
        if let Some(c) = &mut self.child {
            c.stdin = None;
            c.stdin_probe = None;
            c.stdout = None;
            c.stderr = None;
        }
    }
}
