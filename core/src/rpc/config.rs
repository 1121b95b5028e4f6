//! Per-connection configuration ([`EngineConfig`]) and per-request options
//! ([`RequestOptions`]), with their documented defaults.

use std::time::Duration;

/// Configuration of one [`Engine`](super::Engine) (one connection).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Timeout of a request whose options set none. Default: 30 s.
    pub default_timeout: Duration,
    /// Hard maximum total time of a request that resets its timeout on
    /// progress but sets no `max_total_timeout` itself; `None` = unlimited.
    /// Default: 10 min.
    pub default_max_total_timeout: Option<Duration>,
    /// Most requests waiting for a response at once; `request()` returns
    /// [`LocalError::TooManyPending`](super::LocalError::TooManyPending)
    /// beyond it. Default: 1024.
    pub max_pending: usize,
    /// Most bytes not yet written to the peer: `Send` outputs queued but
    /// not yet polled, plus what the driver took and has not written yet
    /// ([`Engine::set_unwritten`](super::Engine::set_unwritten), a child's
    /// stdin). `request()` and `notify()` return
    /// [`LocalError::QueueFull`](super::LocalError::QueueFull) when a message
    /// would go beyond it (a message is always accepted into an empty queue).
    /// Replies the engine makes itself, `respond()` and cancellations go on
    /// up to twice this; beyond that the peer has not read for so long that
    /// they are dropped and counted ([`Stats::sends_dropped`](super::Stats::sends_dropped)),
    /// so memory stays bounded under a peer that stopped reading.
    /// Default: 16 MiB.
    pub max_queued_bytes: usize,
    /// Most server requests surfaced and not yet answered; beyond it a server
    /// request is answered at once with [`INTERNAL_ERROR`](super::INTERNAL_ERROR)
    /// "Too many concurrent requests". Default: 64.
    pub max_server_requests: usize,
    /// Accept JSON-RPC batches (a top-level array) from the server: set it
    /// only when protocol 2025-03-26 was negotiated. Default: false.
    pub accept_batches: bool,
    /// Methods of server requests the application answers (e.g.
    /// `roots/list`, `sampling/createMessage`, `elicitation/create`). Any
    /// other method is answered with -32601 "Method not found"; `ping` is
    /// always answered by the engine. Default: empty.
    pub handled_requests: Vec<String>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            default_timeout: Duration::from_secs(30),
            default_max_total_timeout: Some(Duration::from_secs(600)),
            max_pending: 1024,
            max_queued_bytes: 16 << 20,
            max_server_requests: 64,
            accept_batches: false,
            handled_requests: Vec::new(),
        }
    }
}

impl EngineConfig {
    /// Sets [`default_timeout`](Self::default_timeout).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// Sets [`default_max_total_timeout`](Self::default_max_total_timeout).
    pub fn default_max_total_timeout(mut self, max: Option<Duration>) -> Self {
        self.default_max_total_timeout = max;
        self
    }

    /// Sets [`max_pending`](Self::max_pending).
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = n;
        self
    }

    /// Sets [`max_queued_bytes`](Self::max_queued_bytes).
    pub fn max_queued_bytes(mut self, n: usize) -> Self {
        self.max_queued_bytes = n;
        self
    }

    /// Sets [`max_server_requests`](Self::max_server_requests).
    pub fn max_server_requests(mut self, n: usize) -> Self {
        self.max_server_requests = n;
        self
    }

    /// Sets [`accept_batches`](Self::accept_batches).
    pub fn accept_batches(mut self, yes: bool) -> Self {
        self.accept_batches = yes;
        self
    }

    /// Adds `method` to [`handled_requests`](Self::handled_requests).
    pub fn handle_request(mut self, method: impl Into<String>) -> Self {
        let method = method.into();
        if !self.handled_requests.contains(&method) {
            self.handled_requests.push(method);
        }
        self
    }

    pub(crate) fn handles(&self, method: &str) -> bool {
        self.handled_requests.iter().any(|m| m == method)
    }
}

/// Options of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// Time allowed for the response; `None` = the connection's
    /// [`default_timeout`](EngineConfig::default_timeout).
    pub timeout: Option<Duration>,
    /// Ask for progress: `params._meta.progressToken` is set to the request
    /// id, and `notifications/progress` for it become
    /// [`Output::Progress`](super::Output::Progress). Needs object params.
    pub progress: bool,
    /// Restart the timeout at each accepted progress notification (within
    /// the hard maximum).
    pub reset_timeout_on_progress: bool,
    /// Hard maximum total time, whatever the progress. `None` = the
    /// connection's [`default_max_total_timeout`](EngineConfig::default_max_total_timeout)
    /// when `reset_timeout_on_progress` is set, else no maximum.
    pub max_total_timeout: Option<Duration>,
    /// Ask the server even when a fresh cached result exists (2026-07-28
    /// `ttlMs` hints); the answer refreshes the cache.
    pub bypass_cache: bool,
    /// A `tools/call` that becomes a task completes with the created task
    /// (`{task: …}` or `resultType: "task"`) instead of being followed to
    /// its end; in 2025-11-25 it asks for a task when the tool allows one.
    pub detach_task: bool,
    /// The `ttl` asked for a task (2025-11-25 `params.task.ttl`).
    pub task_ttl: Option<Duration>,
    /// A timeout or a cancel ends it without `notifications/cancelled`
    /// (as `initialize` always does): the era probe of a stdio server,
    /// whose process is replaced when it stays silent.
    pub quiet: bool,
    /// A request relayed for a 2026-07-28 client of the caller's own (a
    /// bridge's): an `input_required` result completes it as it is, for
    /// the caller to answer with a retry of its own (`inputResponses`,
    /// `requestState`), and the client capabilities, client info and log
    /// level already in its params' `_meta` are kept (the connection's
    /// fill only what is missing; the protocol version is always the
    /// connection's). A `tools/call` that becomes a task completes with
    /// the task, for the relayed client to follow.
    pub relay: bool,
}

impl RequestOptions {
    /// Sets [`relay`](Self::relay).
    pub fn relay(mut self, yes: bool) -> Self {
        self.relay = yes;
        self
    }

    /// Sets [`timeout`](Self::timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets [`bypass_cache`](Self::bypass_cache).
    pub fn bypass_cache(mut self, yes: bool) -> Self {
        self.bypass_cache = yes;
        self
    }

    /// Sets [`progress`](Self::progress).
    pub fn progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }

    /// Sets [`reset_timeout_on_progress`](Self::reset_timeout_on_progress)
    /// (which implies `progress`).
    pub fn reset_timeout_on_progress(mut self, yes: bool) -> Self {
        self.reset_timeout_on_progress = yes;
        self.progress |= yes;
        self
    }

    /// Sets [`detach_task`](Self::detach_task).
    pub fn detach_task(mut self, yes: bool) -> Self {
        self.detach_task = yes;
        self
    }

    /// Sets [`task_ttl`](Self::task_ttl).
    pub fn task_ttl(mut self, ttl: Duration) -> Self {
        self.task_ttl = Some(ttl);
        self
    }

    /// Sets [`max_total_timeout`](Self::max_total_timeout).
    pub fn max_total_timeout(mut self, max: Duration) -> Self {
        self.max_total_timeout = Some(max);
        self
    }
}
