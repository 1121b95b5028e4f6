//! When to connect, when to reconnect, when to give up, when startup is
//! over: small pure state machines driven with `now` passed in.
//!
//! One [`ServerMachine`] per server:
//!
//! ```text
//!  new ──start──▶ Connecting ──connected──▶ Connected ──closed──▶ Reconnecting{1, next_at}
//!                   │  failed                  ▲                    │ timer: Action::Connect
//!                   ▼                          └──────connected─────┤
//!                 Failed ◀──── attempt = max_attempts and failed ───┘ failed: attempt+1, backoff
//!  disabled() ▶ Disabled         close() from anywhere ▶ Closed
//! ```
//!
//! Backoff before reconnect attempt `n` (1-based) is
//! `min(initial · 2^(n-1), max)`, shortened by a random fraction of up to
//! `jitter` (so it lies in `[(1-jitter)·d, d]`) from a xorshift generator
//! seeded by the caller. A connection that closes sooner than
//! `stable_after` after it was made continues the attempt count instead of
//! starting again at 1, so a server that crashes right after each connect
//! still ends in `Failed`.
//!
//! [`Startup`] decides when the manager's startup is over: when every
//! server has finished its first attempt, or at the deadline when every
//! server still connecting has cached tools to show in the meantime.
//!
//! Driver contract (as for `mcpwire::Connection`): after each
//! `start`/`handle_*`/`close`, drain [`ServerMachine::poll_output`], then
//! sleep until [`ServerMachine::poll_timeout`] and call `handle_timeout`.
//! A spurious `handle_timeout` is a no-op.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// Reconnect policy of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Delay before the first reconnect attempt (default 500 ms).
    pub initial_backoff: Duration,
    /// Cap of the doubling delay (default 30 s).
    pub max_backoff: Duration,
    /// Reconnect attempts before giving up (default 6; 0 never reconnects).
    pub max_attempts: u32,
    /// Fraction of the delay removed at random, 0.0 ..= 1.0 (default 0.2).
    pub jitter: f64,
    /// A connection that lived at least this long resets the attempt
    /// count when it closes (default 10 s).
    pub stable_after: Duration,
    /// Whether a failed *first* connect is retried like a lost
    /// connection (default false: it fails at once, which is what a wrong
    /// command or URL needs).
    pub retry_initial_connect: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_attempts: 6,
            jitter: 0.2,
            stable_after: Duration::from_secs(10),
            retry_initial_connect: false,
        }
    }
}

impl RetryPolicy {
    /// The delay before reconnect attempt `attempt` (1-based) without
    /// jitter.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(32);
        self.initial_backoff
            .saturating_mul(1u32 << doublings.min(31))
            .min(self.max_backoff)
    }
}

/// Where one server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// The first connection attempt is in progress.
    Connecting,
    /// Connected (and its tools listed).
    Connected,
    /// The connection was lost; attempt `attempt` starts at `next_at` (or
    /// is in progress when `next_at` has passed).
    Reconnecting {
        /// 1-based attempt number.
        attempt: u32,
        /// When that attempt starts.
        next_at: Instant,
    },
    /// Given up: the last error.
    Failed {
        /// Why.
        error: String,
    },
    /// `enabled: false` in its configuration.
    Disabled,
    /// Defined by a project's file and not approved by the user: never
    /// started until it is.
    NeedsApproval,
    /// Closed by the application.
    Closed,
}

impl ServerState {
    /// A short word: `connecting`, `connected`, `reconnecting`, `failed`,
    /// `disabled`, `needs approval`, `closed`.
    pub fn label(&self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Reconnecting { .. } => "reconnecting",
            ServerState::Failed { .. } => "failed",
            ServerState::Disabled => "disabled",
            ServerState::NeedsApproval => "needs approval",
            ServerState::Closed => "closed",
        }
    }

    /// Whether no more connection attempts will be made.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            ServerState::Failed { .. }
                | ServerState::Disabled
                | ServerState::NeedsApproval
                | ServerState::Closed
        )
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerState::Reconnecting { attempt, .. } => {
                write!(f, "reconnecting (attempt {attempt})")
            }
            ServerState::Failed { error } => write!(f, "failed: {error}"),
            other => f.write_str(other.label()),
        }
    }
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Start a connection attempt (spawn or open, initialize, list tools)
    /// and report its end with `handle_connected` or
    /// `handle_connect_failed`. `attempt` is 0 for the first connect.
    Connect {
        /// 0 for the first connect, then the reconnect attempt number.
        attempt: u32,
    },
    /// No more attempts: the server is now `Failed` with this error.
    GiveUp {
        /// The error now in [`ServerState::Failed`].
        error: String,
    },
}

/// A xorshift64* generator: enough to spread reconnects, no dependency.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A generator from `seed` (any value; 0 is replaced by a constant).
    pub fn new(seed: u64) -> Self {
        Jitter(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next value in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        let v = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (v >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    New,
    /// An attempt is in progress.
    Attempting,
    /// Waiting for `next_at` before attempt `attempt`.
    Waiting,
    Up,
    Done,
}

/// The connect/reconnect state machine of one server.
#[derive(Debug, Clone)]
pub struct ServerMachine {
    policy: RetryPolicy,
    jitter: Jitter,
    state: ServerState,
    phase: Phase,
    /// The current or next reconnect attempt (0 = first connect).
    attempt: u32,
    next_at: Option<Instant>,
    connected_at: Option<Instant>,
    /// The attempt that produced the current connection.
    connected_by: u32,
    last_error: Option<String>,
    actions: VecDeque<Action>,
}

impl ServerMachine {
    /// A server to connect, not started yet (state `Connecting`).
    pub fn new(policy: RetryPolicy, seed: u64) -> Self {
        ServerMachine {
            policy,
            jitter: Jitter::new(seed),
            state: ServerState::Connecting,
            phase: Phase::New,
            attempt: 0,
            next_at: None,
            connected_at: None,
            connected_by: 0,
            last_error: None,
            actions: VecDeque::new(),
        }
    }

    /// A disabled server: never connects.
    pub fn disabled() -> Self {
        let mut m = ServerMachine::new(RetryPolicy::default(), 1);
        m.state = ServerState::Disabled;
        m.phase = Phase::Done;
        m
    }

    /// A server the user has not approved: `NeedsApproval`, never started.
    pub fn needs_approval() -> Self {
        let mut m = ServerMachine::new(RetryPolicy::default(), 1);
        m.state = ServerState::NeedsApproval;
        m.phase = Phase::Done;
        m
    }

    /// A server that cannot be used (invalid configuration): `Failed`
    /// from the start.
    pub fn failed(error: impl Into<String>) -> Self {
        let mut m = ServerMachine::new(RetryPolicy::default(), 1);
        let error = error.into();
        m.last_error = Some(error.clone());
        m.state = ServerState::Failed { error };
        m.phase = Phase::Done;
        m
    }

    /// The current state.
    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// The policy in force.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The last connect error or close reason, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Whether the first connect attempt is over (whatever its outcome).
    pub fn first_attempt_done(&self) -> bool {
        match self.phase {
            Phase::New => false,
            Phase::Attempting => self.attempt > 0,
            Phase::Waiting | Phase::Up | Phase::Done => true,
        }
    }

    /// Starts the first connect: queues [`Action::Connect`]. No-op unless
    /// new.
    pub fn start(&mut self, _now: Instant) {
        if self.phase != Phase::New {
            return;
        }
        self.phase = Phase::Attempting;
        self.actions.push_back(Action::Connect { attempt: 0 });
    }

    /// The attempt in progress succeeded.
    pub fn handle_connected(&mut self, now: Instant) {
        if self.phase != Phase::Attempting {
            return;
        }
        self.phase = Phase::Up;
        self.connected_at = Some(now);
        self.connected_by = self.attempt;
        self.next_at = None;
        self.state = ServerState::Connected;
    }

    /// The attempt in progress failed with `error`.
    pub fn handle_connect_failed(&mut self, now: Instant, error: impl Into<String>) {
        if self.phase != Phase::Attempting {
            return;
        }
        let error = error.into();
        self.last_error = Some(error.clone());
        if self.attempt == 0 && !self.policy.retry_initial_connect {
            self.give_up(error);
            return;
        }
        self.schedule(now, self.attempt + 1);
    }

    /// The connection closed without being asked to (process exit, stream
    /// failure, session that could not be re-initialized).
    pub fn handle_closed(&mut self, now: Instant, reason: impl Into<String>) {
        if self.phase != Phase::Up {
            return;
        }
        self.last_error = Some(reason.into());
        let lived = self
            .connected_at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let next = if lived >= self.policy.stable_after {
            1
        } else {
            self.connected_by + 1
        };
        self.connected_at = None;
        self.schedule(now, next);
    }

    /// Timer: starts a due reconnect attempt. Idempotent.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.phase != Phase::Waiting {
            return;
        }
        match self.next_at {
            Some(at) if now >= at => {
                self.phase = Phase::Attempting;
                self.actions.push_back(Action::Connect {
                    attempt: self.attempt,
                });
            }
            _ => {}
        }
    }

    /// The application closed the server: no more actions.
    pub fn close(&mut self) {
        self.phase = Phase::Done;
        self.state = ServerState::Closed;
        self.next_at = None;
        self.actions.clear();
    }

    /// The next action, if any.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When to call [`ServerMachine::handle_timeout`].
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Waiting => self.next_at,
            _ => None,
        }
    }

    fn schedule(&mut self, now: Instant, attempt: u32) {
        if attempt > self.policy.max_attempts {
            let last = self.last_error.clone().unwrap_or_default();
            let error = if self.policy.max_attempts == 0 {
                format!("connection lost ({last}); reconnecting is disabled")
            } else {
                format!(
                    "gave up after {} reconnect attempts; last error: {last}",
                    self.policy.max_attempts
                )
            };
            self.give_up(error);
            return;
        }
        let base = self.policy.base_delay(attempt);
        let cut = self.policy.jitter.clamp(0.0, 1.0) * self.jitter.next_f64();
        let delay = base.mul_f64(1.0 - cut);
        let next_at = now + delay;
        self.attempt = attempt;
        self.next_at = Some(next_at);
        self.phase = Phase::Waiting;
        self.state = ServerState::Reconnecting { attempt, next_at };
    }

    fn give_up(&mut self, error: String) {
        self.phase = Phase::Done;
        self.next_at = None;
        self.state = ServerState::Failed {
            error: error.clone(),
        };
        self.actions.push_back(Action::GiveUp { error });
    }
}

/// When the manager's startup is over.
///
/// Ready when every server has finished its first connect attempt, or —
/// once the deadline has passed — when every server still on its first
/// attempt has cached tools to expose as deferred tools. Servers without
/// a cache are waited for (their own connect timeout bounds the wait).
#[derive(Debug, Clone)]
pub struct Startup {
    deadline: Instant,
    deadline_passed: bool,
    /// (has cache, settled) per server id.
    servers: Vec<(bool, bool)>,
}

impl Startup {
    /// Starts the clock: the deadline is `now + deadline`.
    pub fn new(now: Instant, deadline: Duration) -> Self {
        Startup {
            deadline: now + deadline,
            deadline_passed: deadline.is_zero(),
            servers: Vec::new(),
        }
    }

    /// Adds a server; returns its id (0, 1, …).
    pub fn add(&mut self, has_cache: bool) -> usize {
        self.servers.push((has_cache, false));
        self.servers.len() - 1
    }

    /// Server `id` finished its first attempt (or never needed one:
    /// disabled, invalid).
    pub fn handle_settled(&mut self, id: usize) {
        if let Some(s) = self.servers.get_mut(id) {
            s.1 = true;
        }
    }

    /// Timer: notes that the deadline passed. Idempotent.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now >= self.deadline {
            self.deadline_passed = true;
        }
    }

    /// Whether startup is over.
    pub fn is_ready(&self) -> bool {
        self.servers
            .iter()
            .all(|&(cache, settled)| settled || (self.deadline_passed && cache))
    }

    /// The servers still connecting that are exposed from their cache
    /// (meaningful once ready).
    pub fn deferred(&self) -> impl Iterator<Item = usize> + '_ {
        self.servers
            .iter()
            .enumerate()
            .filter(|(_, &(cache, settled))| cache && !settled)
            .map(|(i, _)| i)
    }

    /// When to call [`Startup::handle_timeout`]: the deadline, while it
    /// matters.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        (!self.deadline_passed && !self.is_ready()).then_some(self.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulated time: a base instant plus milliseconds.
    struct Clock(Instant);
    impl Clock {
        fn at(&self, ms: u64) -> Instant {
            self.0 + Duration::from_millis(ms)
        }
    }

    fn no_jitter() -> RetryPolicy {
        RetryPolicy {
            jitter: 0.0,
            max_attempts: 4,
            ..RetryPolicy::default()
        }
    }

    /// Drives the machine to the next wakeup and returns the action.
    fn fire(m: &mut ServerMachine) -> (Instant, Option<Action>) {
        let at = m.poll_timeout().expect("a timer");
        m.handle_timeout(at);
        (at, m.poll_output())
    }

    #[test]
    fn first_connect_then_crash_then_reconnect() {
        let c = Clock(Instant::now());
        let mut m = ServerMachine::new(no_jitter(), 7);
        assert_eq!(m.state(), &ServerState::Connecting);
        assert!(m.poll_output().is_none(), "nothing before start");
        m.start(c.at(0));
        assert_eq!(m.poll_output(), Some(Action::Connect { attempt: 0 }));
        assert!(!m.first_attempt_done());
        assert_eq!(m.poll_timeout(), None);
        m.handle_connected(c.at(40));
        assert!(m.first_attempt_done());
        assert_eq!(m.state(), &ServerState::Connected);
        m.handle_closed(c.at(20_000), "server exited with status 1");
        assert_eq!(
            m.state(),
            &ServerState::Reconnecting {
                attempt: 1,
                next_at: c.at(20_500)
            }
        );
        // Early or spurious timers do nothing.
        m.handle_timeout(c.at(20_499));
        assert_eq!(m.poll_output(), None);
        let (at, a) = fire(&mut m);
        assert_eq!(at, c.at(20_500));
        assert_eq!(a, Some(Action::Connect { attempt: 1 }));
        m.handle_timeout(c.at(20_600));
        assert_eq!(m.poll_output(), None, "one attempt at a time");
        assert_eq!(m.poll_timeout(), None, "no timer while attempting");
        m.handle_connected(c.at(20_700));
        assert_eq!(m.state(), &ServerState::Connected);
        assert_eq!(m.last_error(), Some("server exited with status 1"));
    }

    #[test]
    fn backoff_doubles_to_the_cap_then_gives_up_with_the_last_error() {
        let c = Clock(Instant::now());
        let policy = RetryPolicy {
            max_backoff: Duration::from_millis(1500),
            ..no_jitter()
        };
        let mut m = ServerMachine::new(policy, 1);
        m.start(c.at(0));
        let _ = m.poll_output();
        m.handle_connected(c.at(10));
        m.handle_closed(c.at(60_000), "stdout closed");
        let mut now = c.at(60_000);
        let mut delays = Vec::new();
        for n in 1..=4 {
            let (at, a) = fire(&mut m);
            assert_eq!(a, Some(Action::Connect { attempt: n }));
            delays.push(at - now);
            now = at + Duration::from_millis(5);
            m.handle_connect_failed(now, format!("spawn failed #{n}"));
        }
        assert_eq!(
            delays,
            [500, 1000, 1500, 1500].map(Duration::from_millis),
            "500 ms doubling, capped"
        );
        let ServerState::Failed { error } = m.state().clone() else {
            panic!("{:?}", m.state())
        };
        assert!(
            error.contains("gave up after 4 reconnect attempts"),
            "{error}"
        );
        assert!(error.contains("spawn failed #4"), "{error}");
        assert_eq!(m.poll_output(), Some(Action::GiveUp { error }));
        assert_eq!(m.poll_timeout(), None);
        m.handle_timeout(now + Duration::from_secs(100));
        assert_eq!(m.poll_output(), None, "failed is final");
    }

    #[test]
    fn jitter_stays_within_bounds_and_depends_on_the_seed() {
        let c = Clock(Instant::now());
        let policy = RetryPolicy {
            jitter: 0.5,
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        let delays = |seed| {
            let mut m = ServerMachine::new(policy.clone(), seed);
            m.start(c.at(0));
            m.handle_connected(c.at(0));
            m.handle_closed(c.at(100_000), "x");
            let mut out = Vec::new();
            let mut now = c.at(100_000);
            while let Some(at) = m.poll_timeout() {
                out.push(at - now);
                m.handle_timeout(at);
                now = at;
                m.handle_connect_failed(now, "no");
            }
            out
        };
        let a = delays(1);
        assert_eq!(a.len(), 3);
        for (n, d) in a.iter().enumerate() {
            let base = policy.base_delay(n as u32 + 1);
            assert!(*d <= base && *d >= base / 2, "attempt {}: {d:?}", n + 1);
        }
        assert_eq!(a, delays(1), "same seed, same delays");
        assert_ne!(a, delays(2), "another seed spreads differently");
    }

    #[test]
    fn flapping_connections_keep_counting_stable_ones_reset() {
        let c = Clock(Instant::now());
        let mut m = ServerMachine::new(no_jitter(), 1);
        m.start(c.at(0));
        assert_eq!(m.poll_output(), Some(Action::Connect { attempt: 0 }));
        m.handle_connected(c.at(0));
        let mut now = c.at(50_000);
        m.handle_closed(now, "crash");
        // Connect, crash at once, four times: attempts 1, 2, 3, 4.
        for n in 1..=4 {
            let (at, a) = fire(&mut m);
            assert_eq!(a, Some(Action::Connect { attempt: n }));
            m.handle_connected(at);
            now = at + Duration::from_millis(100);
            m.handle_closed(now, format!("crash {n}"));
        }
        assert!(
            matches!(m.state(), ServerState::Failed { .. }),
            "{:?}",
            m.state()
        );

        // A connection that lived past stable_after starts again at 1.
        let mut m = ServerMachine::new(no_jitter(), 1);
        m.start(c.at(0));
        assert_eq!(m.poll_output(), Some(Action::Connect { attempt: 0 }));
        m.handle_connected(c.at(0));
        m.handle_closed(c.at(1000), "crash");
        let (at, _) = fire(&mut m);
        m.handle_connect_failed(at, "refused");
        let (at, a) = fire(&mut m);
        assert_eq!(a, Some(Action::Connect { attempt: 2 }));
        m.handle_connected(at);
        m.handle_closed(at + Duration::from_secs(11), "crash later");
        assert!(matches!(
            m.state(),
            ServerState::Reconnecting { attempt: 1, .. }
        ));
    }

    #[test]
    fn first_connect_failure_fails_unless_retried() {
        let c = Clock(Instant::now());
        let mut m = ServerMachine::new(no_jitter(), 1);
        m.start(c.at(0));
        let _ = m.poll_output();
        m.handle_connect_failed(c.at(5), "cannot start `nope`: not found");
        assert_eq!(
            m.state(),
            &ServerState::Failed {
                error: "cannot start `nope`: not found".into()
            }
        );
        assert!(m.first_attempt_done());

        let policy = RetryPolicy {
            retry_initial_connect: true,
            ..no_jitter()
        };
        let mut m = ServerMachine::new(policy, 1);
        m.start(c.at(0));
        let _ = m.poll_output();
        m.handle_connect_failed(c.at(5), "refused");
        assert!(m.first_attempt_done());
        assert_eq!(
            m.state(),
            &ServerState::Reconnecting {
                attempt: 1,
                next_at: c.at(505)
            }
        );
    }

    #[test]
    fn zero_attempts_means_no_reconnect() {
        let c = Clock(Instant::now());
        let mut m = ServerMachine::new(
            RetryPolicy {
                max_attempts: 0,
                ..no_jitter()
            },
            1,
        );
        m.start(c.at(0));
        let _ = m.poll_output();
        m.handle_connected(c.at(1));
        m.handle_closed(c.at(2), "exit 3");
        let ServerState::Failed { error } = m.state() else {
            panic!()
        };
        assert!(
            error.contains("exit 3") && error.contains("disabled"),
            "{error}"
        );
    }

    #[test]
    fn close_and_fixed_states_ignore_events() {
        let c = Clock(Instant::now());
        let mut m = ServerMachine::new(no_jitter(), 1);
        m.start(c.at(0));
        m.handle_connected(c.at(1));
        m.handle_closed(c.at(2), "x");
        m.close();
        assert_eq!(m.state(), &ServerState::Closed);
        assert_eq!(m.poll_timeout(), None);
        m.handle_timeout(c.at(10_000));
        m.handle_connected(c.at(10_000));
        assert_eq!(m.poll_output(), None);
        assert_eq!(m.state(), &ServerState::Closed);

        let mut d = ServerMachine::disabled();
        d.start(c.at(0));
        assert_eq!(d.poll_output(), None);
        assert_eq!(d.state().to_string(), "disabled");
        let mut f = ServerMachine::failed("stdio server without `command`");
        f.start(c.at(0));
        assert_eq!(f.poll_output(), None);
        assert_eq!(
            f.state().to_string(),
            "failed: stdio server without `command`"
        );
        assert!(f.first_attempt_done() && d.first_attempt_done());
    }

    #[test]
    fn startup_waits_for_uncached_servers_and_defers_cached_ones() {
        let c = Clock(Instant::now());
        let deadline = Duration::from_millis(250);

        // All fast: ready before the deadline.
        let mut s = Startup::new(c.at(0), deadline);
        let a = s.add(false);
        let b = s.add(true);
        assert!(!s.is_ready());
        assert_eq!(s.poll_timeout(), Some(c.at(250)));
        s.handle_settled(a);
        s.handle_settled(b);
        assert!(s.is_ready());
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.deferred().count(), 0);

        // A slow server with a cache: ready at the deadline, deferred.
        let mut s = Startup::new(c.at(0), deadline);
        let fast = s.add(false);
        let slow = s.add(true);
        s.handle_settled(fast);
        s.handle_timeout(c.at(249));
        assert!(!s.is_ready());
        s.handle_timeout(c.at(250));
        assert!(s.is_ready());
        assert_eq!(s.deferred().collect::<Vec<_>>(), [slow]);
        assert_eq!(s.poll_timeout(), None);

        // A slow server without a cache: awaited past the deadline.
        let mut s = Startup::new(c.at(0), deadline);
        let cached = s.add(true);
        let uncached = s.add(false);
        s.handle_timeout(c.at(300));
        assert!(!s.is_ready());
        assert_eq!(s.poll_timeout(), None, "nothing left to time");
        s.handle_settled(uncached);
        assert!(s.is_ready());
        assert_eq!(s.deferred().collect::<Vec<_>>(), [cached]);

        // No servers, or a zero deadline with caches: ready at once.
        assert!(Startup::new(c.at(0), deadline).is_ready());
        let mut s = Startup::new(c.at(0), Duration::ZERO);
        s.add(true);
        assert!(s.is_ready());
    }
}
