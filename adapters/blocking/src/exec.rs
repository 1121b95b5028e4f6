//! The blocking executor of a [`Session`]: the session and the
//! connection's I/O behind one lock, driven by the threads that wait.
//!
//! ```text
//!  caller thread:  lock → Session::request → write its bytes to stdin
//!                  (non-blocking) → wait:
//!                    outcome there?                    → return it
//!                    an exchange carrying its answer?  → run it here (ureq)
//!                    nobody leads the pipes?           → lead: poll(2) stdout,
//!                                                        stderr (and stdin) unlocked,
//!                                                        read under the lock (or,
//!                                                        without poll(2), wait for
//!                                                        the pipes' threads and take
//!                                                        what they read: pipes/)
//!                    else                              → park until woken
//!  leader leaving: the next waiting call leads (it is unparked)
//!  background:     leads the pipes when no call has for a while (server
//!                  requests, notifications, timers, the close), keeps the
//!                  timers of HTTP connections
//!  HTTP workers:   exchanges nobody waits on (listener, notifications,
//!                  answers, calls with a cancel token), on reused threads
//! ```
//!
//! A lone caller thus reads its own answer: one hop less than handing it
//! over from an owner thread, which is the difference between a raw pipe
//! loop and an MCP client here.

use std::sync::{Arc, Mutex};

use mcpwire_adapter::session::{Guard, HoldsSession};
use std::task::Poll;
use std::thread::Thread;
use std::time::{Duration, Instant};

use mcpwire::connection::{CloseReason, Input};
use mcpwire::transport::stdio::ExitStatus;
use mcpwire_adapter::session::{Effect, Info, Outcome, Session};
use mcpwire_adapter::wait::thread_waker;

use crate::http::{Drain, Exchange, Http, Report};
use crate::lock;
use crate::pipes::Pipes;

/// How long the background thread leaves the pipes to callers after the
/// last one led, before it leads them itself (a burst of calls keeps the
/// lead with the callers; an idle connection is read by the background).
const LINGER: Duration = Duration::from_millis(20);

/// Who reads the pipes now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leader {
    Nobody,
    /// The thread waiting for this call, ready or closed.
    Waiter(Wait),
    Background,
}

/// What a thread waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    Call(u64),
    Ready,
    Closed,
}

/// Everything behind the lock.
pub(crate) struct State {
    pub(crate) session: Session,
    pipes: Option<Pipes>,
    /// The stdio server's definition, to start it again ([`Effect::Spawn`]).
    server: Option<mcpwire::ServerConfig>,
    /// The proxies and TLS of the HTTP exchanges.
    network: mcpwire_adapter::net::Network,
    http: Option<Http>,
    leader: Leader,
    /// When a waiter last stopped leading, or the background did (a call
    /// got its answer): the background leads again only a [`LINGER`]
    /// after it.
    released: Instant,
    /// The background thread sleeps until then (`Some(None)`: until woken).
    background_until: Option<Option<Instant>>,
    buf: Box<[u8]>,
}

/// A session and its I/O, shared by the client handles, the waiting
/// threads, the background thread, the HTTP workers and the handlers.
pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) info: Arc<Info>,
    background: Mutex<Option<Thread>>,
}

impl Report for Shared {
    fn event(self: Arc<Self>, input: Input<'_>) -> bool {
        self.http_event(input, None).0
    }
}

impl Shared {
    /// The executor of `session`, with its stdio server's child and
    /// definition.
    pub(crate) fn new(
        session: Session,
        child: Option<(std::process::Child, mcpwire::ServerConfig)>,
        network: mcpwire_adapter::net::Network,
    ) -> std::io::Result<Arc<Self>> {
        let (child, server) = match child {
            Some((c, server)) => (Some(c), Some(server)),
            None => (None, None),
        };
        let info = session.info().clone();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                session,
                pipes: None,
                server,
                network,
                http: None,
                leader: Leader::Nobody,
                released: Instant::now(),
                background_until: None,
                buf: vec![0; 64 * 1024].into_boxed_slice(),
            }),
            info,
            background: Mutex::new(None),
        });
        if let Some(child) = child {
            let pipes = shared.pipes_of(child)?;
            lock(&shared.state).pipes = Some(pipes);
        }
        let mut state = shared.lock();
        shared.perform(&mut state, None);
        drop(state);
        Ok(shared)
    }

    pub(crate) fn lock(&self) -> Guard<'_, State> {
        Guard::lock(&self.state)
    }

    /// The pipes of `child`, whose exit a thread of its own reports.
    fn pipes_of(self: &Arc<Self>, child: std::process::Child) -> std::io::Result<Pipes> {
        let weak = Arc::downgrade(self);
        Pipes::start(child, move |status| {
            if let Some(shared) = weak.upgrade() {
                shared.exited(status);
            }
        })
    }

    /// Starts the background thread.
    pub(crate) fn start_background(self: &Arc<Self>) -> std::io::Result<()> {
        let shared = self.clone();
        let thread = std::thread::Builder::new()
            .name("mcpwire-background".into())
            .spawn(move || shared.background())?;
        *lock(&self.background) = Some(thread.thread().clone());
        Ok(())
    }

    /// Starts a call: sends the request and performs what it asked for,
    /// keeping for this thread the exchanges that bring its answer when
    /// `inline` (a call that nothing else may end early).
    pub(crate) fn start_call(
        self: &Arc<Self>,
        method: &str,
        params: Option<&mcpwire::rpc::Params>,
        options: mcpwire::rpc::RequestOptions,
        progress: Option<mcpwire_adapter::ProgressFn>,
        inline: bool,
    ) -> Result<(u64, Vec<Exchange>), mcpwire::connection::CallError> {
        let mut state = self.lock();
        let id = state
            .session
            .request(Instant::now(), method, params, options, progress)?;
        let exchanges = self.perform(&mut state, inline.then_some(id));
        Ok((id, exchanges))
    }

    /// Runs `f` on the session and performs what it asked for.
    pub(crate) fn with<T>(self: &Arc<Self>, f: impl FnOnce(&mut Session) -> T) -> T {
        let mut state = self.lock();
        let out = f(&mut state.session);
        self.perform(&mut state, None);
        out
    }

    /// Performs the session's effects. Exchanges that bring call `mine`'s
    /// answer are returned, for the calling thread to run; the others go
    /// to the workers.
    fn perform(self: &Arc<Self>, state: &mut State, mine: Option<u64>) -> Vec<Exchange> {
        let mut inline = Vec::new();
        while let Some(effect) = state.session.next_effect() {
            match effect {
                Effect::Write(bytes) => {
                    let failed = state.pipes.as_mut().and_then(|p| p.write(&bytes));
                    let unwritten = state.pipes.as_ref().map_or(0, |p| p.backlog());
                    state.session.set_unwritten(unwritten);
                    // Written or copied into the backlog: the buffer is
                    // the next message's.
                    state.session.recycle(bytes);
                    if let Some(e) = failed {
                        state.session.input(Instant::now(), Input::WriteFailed(&e));
                    }
                }
                Effect::CloseStdin => {
                    if let Some(p) = &mut state.pipes {
                        p.close_stdin();
                    }
                }
                Effect::Signal(sig) => {
                    if let Some(p) = &mut state.pipes {
                        if !p.signal(sig) {
                            state.session.input(Instant::now(), Input::GroupEmpty);
                        }
                    }
                }
                Effect::CheckGroup => {
                    let alive = state.pipes.as_mut().is_some_and(|p| p.check_group());
                    if !alive {
                        state.session.input(Instant::now(), Input::GroupEmpty);
                    }
                }
                Effect::CheckStdin => {
                    let unread = state.pipes.as_ref().and_then(Pipes::unread);
                    state
                        .session
                        .input(Instant::now(), Input::StdinUnread(unread));
                }
                Effect::Spawn => {
                    let started = match &state.server {
                        Some(server) => {
                            crate::pipes::spawn_child(server).and_then(|child| self.pipes_of(child))
                        }
                        None => Err(std::io::Error::other("no stdio server to start")),
                    };
                    match started {
                        Ok(pipes) => {
                            // A leader polling the old pipes looks again,
                            // at the new ones.
                            if let Some(old) = state.pipes.replace(pipes) {
                                old.interrupt();
                            }
                            state.session.input(Instant::now(), Input::Spawned);
                            // Nobody may be leading (the old pipes had
                            // ended): a waiting caller leads the new ones
                            // (else the background does, after its linger).
                            if let Some(waker) = state.session.any_waiter() {
                                waker.wake();
                            }
                            self.wake_background();
                        }
                        Err(e) => {
                            let e = e.to_string();
                            state.session.input(Instant::now(), Input::SpawnFailed(&e));
                        }
                    }
                }
                Effect::Http(req) => {
                    let network = state.network.clone();
                    let http = state.http.get_or_insert_with(|| Http::new(network));
                    if mine.is_some() && req.carries == mine {
                        inline.push(http.inline(*req));
                    } else {
                        let report: std::sync::Weak<dyn Report> = Arc::<Shared>::downgrade(self);
                        http.dispatch(report, *req);
                    }
                }
                Effect::AbortHttp(id) => {
                    if let Some(http) = &mut state.http {
                        http.abort(id);
                    }
                }
                Effect::Handle {
                    id,
                    handler,
                    params,
                } => {
                    let weak = Arc::downgrade(self);
                    let rid = id.clone();
                    let ran = handler.run_on_thread(params, move |answer| {
                        if let Some(shared) = weak.upgrade() {
                            shared.with(|s| s.respond(Instant::now(), rid, answer));
                        }
                    });
                    if let Err(e) = ran {
                        state.session.respond(Instant::now(), id, Err(e));
                    }
                }
                // A handler thread cannot be stopped; the connection drops
                // its late answer.
                Effect::Withdraw(_) => {}
                Effect::Authorize { handler, url } => {
                    let weak = Arc::downgrade(self);
                    let spawned =
                        mcpwire_adapter::auth::authorize_on_thread(handler, url, move |result| {
                            if let Some(shared) = weak.upgrade() {
                                shared.with(|s| s.authorization(Instant::now(), result));
                            }
                        });
                    if let Err(e) = spawned {
                        state.session.authorization(Instant::now(), Err(e.into()));
                    }
                }
                Effect::LockTokens { store, endpoint } => {
                    let weak = Arc::downgrade(self);
                    let spawned =
                        mcpwire_adapter::auth::lock_on_thread(store, endpoint, move |locked| {
                            if let Some(shared) = weak.upgrade() {
                                shared.with(|s| s.store_locked(Instant::now(), locked));
                            }
                        });
                    if let Err(e) = spawned {
                        tracing::warn!("{e}: refreshing without the token store's lock");
                        state.session.store_locked(Instant::now(), (None, None));
                    }
                }
            }
        }
        // Whoever sleeps must hear of what changes its wait: a leader in
        // poll whose wait is over (its call cancelled from another thread,
        // the connection closed), or that should watch stdin, or any
        // sleeper that a deadline earlier than its own concerns.
        let polling = state.pipes.as_ref().is_some_and(|p| p.polling);
        if polling || state.background_until.is_some() {
            let deadline = state.session.poll_timeout();
            let earlier = |waits: Option<Instant>| match (deadline, waits) {
                (Some(d), Some(w)) => d < w,
                (Some(_), None) => true,
                _ => false,
            };
            if let Some(p) = state.pipes.as_ref().filter(|p| p.polling) {
                let stdin = p.backlog() > 0 && !p.polled_stdin;
                if stdin || earlier(p.polled_deadline) || state.leader_satisfied() {
                    p.interrupt();
                }
            }
            if state.background_until.is_some_and(earlier) {
                self.wake_background();
            }
        }
        inline
    }

    fn wake_background(&self) {
        if let Some(t) = lock(&self.background).as_ref() {
            t.unpark();
        }
    }

    /// The child exited (from its waiter thread).
    fn exited(self: &Arc<Self>, status: ExitStatus) {
        let mut state = self.lock();
        state.session.input(Instant::now(), Input::Exited(status));
        self.perform(&mut state, None);
        if let Some(p) = &state.pipes {
            p.interrupt();
        }
        drop(state);
        // The close may be over: the background thread ends then.
        self.wake_background();
    }

    /// An exchange's input (`HttpHead`, `HttpBody`, `HttpEnd` or
    /// `HttpFailed`), from the worker running it or from a caller running
    /// it itself (`mine`): whether to go on, and the exchanges that bring
    /// `mine`'s answer.
    pub(crate) fn http_event(
        self: &Arc<Self>,
        input: Input<'_>,
        mine: Option<u64>,
    ) -> (bool, Vec<Exchange>) {
        let Some(id) = input.exchange() else {
            return (false, Vec::new());
        };
        let mut state = self.lock();
        let running = state.http.as_ref().is_some_and(|h| h.is_running(id));
        if !running {
            return (false, Vec::new());
        }
        let now = Instant::now();
        // Head and body: more follows; end or failure: the exchange is over.
        let go_on = matches!(input, Input::HttpHead { .. } | Input::HttpBody { .. });
        if !go_on {
            if let Some(h) = &mut state.http {
                h.ended(id);
            }
        }
        if let Input::HttpFailed { .. } = input {
            // A call whose own timeout cut its exchange short: its
            // deadline has passed, so it ends as a timeout.
            state.session.timeout(now);
        }
        state.session.input(now, input);
        let inline = self.perform(&mut state, mine);
        let still = state.http.as_ref().is_some_and(|h| h.is_running(id));
        (go_on && still, inline)
    }

    /// Waits until `wait` is over (`deadline`: give up then), leading the
    /// pipes when nobody does and running the exchanges that bring a
    /// call's answer. `inline`: such exchanges already handed out.
    pub(crate) fn wait(
        self: &Arc<Self>,
        wait: Wait,
        mut inline: Vec<Exchange>,
        call_timeout: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Option<WaitOutcome> {
        let waker = thread_waker();
        let mut state = self.lock();
        loop {
            let poll = match wait {
                Wait::Call(id) => state.session.poll_call(id, &waker).map(WaitOutcome::Call),
                Wait::Ready => state.session.poll_ready(&waker).map(WaitOutcome::Ready),
                Wait::Closed => state
                    .session
                    .poll_closed(&waker)
                    .map(|()| WaitOutcome::Closed),
            };
            if let Poll::Ready(out) = poll {
                return Some(out);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            if let Some(mut exchange) = inline.pop() {
                drop(state);
                exchange.timeout = call_timeout.map(|t| t + Duration::from_millis(20));
                inline.extend(self.run_inline(exchange, wait));
                state = self.lock();
                continue;
            }
            let pipes_open = state.pipes.as_ref().is_some_and(Pipes::open);
            if pipes_open && state.leader == Leader::Nobody {
                // It reads its own outcome when it leaves the lead: no
                // wake-up to itself.
                if let Wait::Call(id) = wait {
                    state.session.unregister(id);
                }
                state.leader = Leader::Waiter(wait);
                state = self.lead(state, Leader::Waiter(wait), deadline);
                continue;
            }
            drop(state);
            match deadline {
                Some(d) => std::thread::park_timeout(d.saturating_duration_since(Instant::now())),
                None => std::thread::park(),
            }
            state = self.lock();
        }
    }

    fn run_inline(self: &Arc<Self>, exchange: Exchange, wait: Wait) -> Vec<Exchange> {
        let mine = match wait {
            Wait::Call(id) => Some(id),
            _ => None,
        };
        let mut more = Vec::new();
        let rest = exchange.run(|event| {
            let (go_on, inline) = self.http_event(event, mine);
            more.extend(inline);
            go_on
        });
        if let Some(rest) = rest.and_then(Drain::here) {
            if let Some(http) = &self.lock().http {
                http.drain(rest);
            }
        }
        more
    }

    /// Reads and writes the pipes as `me` until `me`'s wait is over (or,
    /// for the background, until a call got its answer), then hands the
    /// lead to another waiting call, if any.
    fn lead<'a>(
        self: &'a Arc<Self>,
        mut state: Guard<'a, State>,
        me: Leader,
        deadline: Option<Instant>,
    ) -> Guard<'a, State> {
        // The background stops leading once a call got its answer: that
        // caller leads its next call itself.
        let seen = state.session.completed();
        loop {
            let done = match me {
                Leader::Waiter(wait) => state.satisfied(wait),
                Leader::Background => state.session.is_closed(),
                Leader::Nobody => true,
            };
            let answered = me == Leader::Background && state.session.completed() != seen;
            if done || answered {
                break;
            }
            // The clock read once for the deadline, the read and the
            // poll's timeout (microseconds apart: a wake-up that late is
            // harmless), and not at all once the wait is over.
            let now = Instant::now();
            let State {
                session,
                pipes,
                buf,
                ..
            } = &mut *state;
            let Some(pipes) = pipes.as_mut().filter(|p| p.open()) else {
                break;
            };
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            // A read before the poll(2): the answer to a lone call just
            // written is often there already.
            let in_flight = session.calls_in_flight();
            if pipes.read_after_write(buf, in_flight, |input| session.input(now, input)) {
                self.perform(&mut state, None);
                continue;
            }
            let set = pipes.poll_set();
            let wake_at = [state.session.poll_timeout(), deadline]
                .into_iter()
                .flatten()
                .min();
            let pipes = state.pipes.as_mut().expect("checked");
            pipes.polling = true;
            pipes.polled_deadline = wake_at;
            pipes.polled_stdin = pipes.watches_stdin();
            drop(state);
            let ready = set.poll(wake_at, now);
            drop(set);
            state = self.lock();
            let now = Instant::now();
            let State {
                session,
                pipes,
                buf,
                ..
            } = &mut *state;
            let Some(pipes) = pipes.as_mut() else { break };
            pipes.polling = false;
            pipes.service(ready, buf, |input| session.input(now, input));
            session.set_unwritten(pipes.backlog());
            if wake_at.is_some_and(|d| d <= now) {
                session.timeout(now);
            }
            self.perform(&mut state, None);
        }
        state.leader = Leader::Nobody;
        if let Leader::Waiter(_) = me {
            state.released = Instant::now();
        }
        // The next waiting call leads.
        let except = match me {
            Leader::Waiter(Wait::Call(id)) => Some(id),
            _ => None,
        };
        if let Some((_, waker)) = state.session.other_waiter(except) {
            waker.wake();
        }
        state
    }

    /// The background thread: leads the pipes when no caller has for a
    /// while, keeps the timers, and ends once the connection is closed.
    fn background(self: Arc<Self>) {
        let mut state = self.lock();
        loop {
            if state.session.is_closed() {
                break;
            }
            let now = Instant::now();
            let pipes_open = state.pipes.as_ref().is_some_and(Pipes::open);
            if pipes_open && state.leader == Leader::Nobody && now >= state.released + LINGER {
                state.leader = Leader::Background;
                state = self.lead(state, Leader::Background, None);
                // A call got its answer: its caller leads its next call
                // itself (and a waiting one was woken to lead). Leading
                // again at once would keep every later call on this
                // thread, a hop there and back a call, for good.
                state.released = Instant::now();
                continue;
            }
            // Keep the timers (the pipes' leader, if any, keeps them too).
            if state.session.poll_timeout().is_some_and(|d| d <= now) {
                state.session.timeout(now);
                self.perform(&mut state, None);
                continue;
            }
            let mut until = state.session.poll_timeout();
            if pipes_open && state.leader == Leader::Nobody {
                let linger_end = state.released + LINGER;
                until = Some(until.map_or(linger_end, |d| d.min(linger_end)));
            } else if pipes_open {
                // A caller leads: look again now and then.
                let check = now + LINGER;
                until = Some(until.map_or(check, |d| d.min(check)));
            }
            state.background_until = Some(until);
            drop(state);
            match until {
                Some(d) => std::thread::park_timeout(d.saturating_duration_since(Instant::now())),
                None => std::thread::park(),
            }
            state = self.lock();
            state.background_until = None;
        }
        drop(state);
        *lock(&self.background) = None;
    }
}

impl HoldsSession for State {
    fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}

impl mcpwire_adapter::surface::SessionAccess for Shared {
    fn info(&self) -> &Info {
        &self.info
    }

    fn inspect<T>(&self, f: impl FnOnce(&mut Session) -> T) -> T {
        f(&mut self.lock().session)
    }
}

impl State {
    /// Whether the wait of the thread leading the pipes is over.
    fn leader_satisfied(&self) -> bool {
        match self.leader {
            Leader::Waiter(wait) => self.satisfied(wait),
            Leader::Background => self.session.is_closed(),
            Leader::Nobody => false,
        }
    }

    fn satisfied(&self, wait: Wait) -> bool {
        match wait {
            Wait::Call(id) => self.session.is_done(id),
            Wait::Ready => self.session.is_settled(),
            Wait::Closed => self.session.is_closed(),
        }
    }
}

/// What a wait ended with.
pub(crate) enum WaitOutcome {
    Call(Outcome),
    Ready(Result<(), CloseReason>),
    Closed,
}
