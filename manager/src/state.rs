//! What every front end shares: the servers' state as the application
//! reads it, the start-up plan, the per-server supervisor's bookkeeping
//! and the steps of a call. Written once; the front ends only wait (on a
//! runtime's tasks and timers, or on threads) and perform.
//!
//! ```text
//!  front end ──prepare()──▶ Prepared { shared, plans, startup }
//!     │  one supervisor per plan (a task or a thread) drives a Supervisor:
//!     │     actions() → connect?   connected() / connect_failed() / lost()
//!     │     tools_listed()          timer()        closing()
//!     │  each writes Shared and bumps its Signal
//!     └─ call(): Shared::target → loop { Shared::step → call or wait on
//!                the Signal / deadline / cancel }
//! ```

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use event_listener::{Event, Listener};
use mcpwire::config::ServerConfig;
use mcpwire::mcp::types::{CallToolResult, Tool};
use mcpwire_adapter::options::ConnectOptions;
use mcpwire_adapter::pins::{PinStore, ToolChange, ToolPins};
use mcpwire_adapter::RequestError;

use crate::cache_file::CacheFile;
use crate::consent::{self, Approvals, ConsentPolicy};
use crate::discovery::{resolve_inputs, Scope, ServerEntry, ToolFilter};
use crate::options::{CacheSetting, InputFn, ManagerOptions};
use crate::paths;
use crate::policy::cache::ToolCache;
use crate::policy::expand::expand_config;
use crate::policy::machine::{Action, ServerMachine, ServerState, Startup};
use crate::policy::names;
use crate::Error;

/// A tool as an agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTool {
    /// `mcp__<server>__<tool>` (see [`crate::policy::names`]).
    pub name: String,
    /// The server.
    pub server: String,
    /// The tool as the server lists it (its own `name` included).
    pub tool: Tool,
    /// The server is not connected right now (still connecting — these
    /// are its cached tools — or reconnecting): a call waits for it within
    /// its timeout.
    pub deferred: bool,
}

/// One server's status.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    /// The server.
    pub name: String,
    /// connecting / connected / reconnecting / failed / disabled / closed.
    pub state: ServerState,
    /// How many tools it has (live, or cached while connecting).
    pub tools: usize,
    /// Whether those tools come from the cache (not listed by this
    /// process yet).
    pub tools_from_cache: bool,
    /// `stdio`, `streamable-http` or `sse`, once connected.
    pub transport: Option<&'static str>,
    /// The most reconnect attempts.
    pub max_attempts: u32,
    /// The last connection error or close reason.
    pub last_error: Option<String>,
    /// The file that defined it.
    pub source: Option<PathBuf>,
    /// The kind of that file.
    pub scope: Scope,
    /// How its tools differ from the ones pinned for it, when tool
    /// pinning is on ([`ManagerOptions::tool_pins`](crate::ManagerOptions::tool_pins))
    /// and its last listing differed (empty otherwise). A project's
    /// server's changed and new tools are withheld meanwhile.
    pub tool_changes: Vec<ToolChange>,
}

impl ServerStatus {
    /// A one-line description: `connected`, `reconnecting (attempt 2 of
    /// 6, next in 1.5 s)`, `failed: …`.
    pub fn describe(&self, now: Instant) -> String {
        match &self.state {
            ServerState::Reconnecting { attempt, next_at } => {
                let when = if *next_at > now {
                    format!(
                        "next in {:.1} s",
                        next_at.saturating_duration_since(now).as_secs_f64()
                    )
                } else {
                    "connecting".to_string()
                };
                format!(
                    "reconnecting (attempt {attempt} of {}, {when})",
                    self.max_attempts
                )
            }
            other => other.to_string(),
        }
    }
}

/// A version number and an event: "something changed" for any number of
/// waiters, async or blocking, and "closed" for good.
#[derive(Default)]
pub(crate) struct Signal {
    version: AtomicU64,
    closed: AtomicBool,
    event: Event,
}

impl Signal {
    pub(crate) fn bump(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
        self.event.notify(usize::MAX);
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.bump();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Resolves once the version differs from `seen` (or at once).
    pub(crate) async fn changed_since(&self, seen: u64) {
        loop {
            if self.version() != seen {
                return;
            }
            let listener = self.event.listen();
            if self.version() != seen {
                return;
            }
            listener.await;
        }
    }

    /// Wakes the blocking waiters without a change, so that they look at
    /// their `stop` condition.
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(crate) fn wake(&self) {
        self.event.notify(usize::MAX);
    }

    /// Blocks until the version differs from `seen`, `deadline` passes or
    /// `stop()` holds (looked at on each wake).
    pub(crate) fn wait_since(
        &self,
        seen: u64,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> Woke {
        loop {
            if self.version() != seen {
                return Woke::Changed;
            }
            if stop() {
                return Woke::Stopped;
            }
            let listener = self.event.listen();
            if self.version() != seen {
                return Woke::Changed;
            }
            if stop() {
                return Woke::Stopped;
            }
            match deadline {
                None => listener.wait(),
                Some(d) => {
                    if listener.wait_deadline(d).is_none() && Instant::now() >= d {
                        return if self.version() != seen {
                            Woke::Changed
                        } else {
                            Woke::Deadline
                        };
                    }
                }
            }
        }
    }
}

/// Why [`Signal::wait_since`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    Changed,
    Deadline,
    Stopped,
}

/// The changes of a manager's servers (state, tools): from
/// `Manager::changes`. Wait for the next one, then re-read
/// `Manager::tools` or `Manager::status`.
pub struct Changes {
    signal: Arc<Signal>,
    seen: u64,
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes").field("seen", &self.seen).finish()
    }
}

impl Changes {
    pub(crate) fn new(signal: Arc<Signal>) -> Self {
        let seen = signal.version();
        Changes { signal, seen }
    }

    /// Waits for the next change since this value was made or last
    /// returned. [`Error::Closed`] once the manager is closed.
    pub async fn changed(&mut self) -> Result<(), Error> {
        if self.signal.is_closed() {
            return Err(Error::Closed);
        }
        self.signal.changed_since(self.seen).await;
        self.seen = self.signal.version();
        if self.signal.is_closed() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Blocks until the next change, at most `timeout` (`None`: no
    /// bound). `Ok(false)` when the time ran out first; [`Error::Closed`]
    /// once the manager is closed.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<bool, Error> {
        if self.signal.is_closed() {
            return Err(Error::Closed);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let changed = self.signal.wait_since(self.seen, deadline, &|| false) == Woke::Changed;
        self.seen = self.signal.version();
        if self.signal.is_closed() {
            return Err(Error::Closed);
        }
        Ok(changed)
    }
}

/// Counts running supervisors; the close waits for none.
#[derive(Default)]
pub(crate) struct Running {
    count: AtomicUsize,
    done: Event,
}

impl Running {
    pub(crate) fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn finish(&self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
        self.done.notify(usize::MAX);
    }

    pub(crate) async fn all_done(&self) {
        loop {
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            let l = self.done.listen();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            l.await;
        }
    }

    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(crate) fn wait_all_done(&self) {
        loop {
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            let l = self.done.listen();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            l.wait();
        }
    }
}

/// A front end's client, as the shared state keeps it.
pub(crate) trait LiveClient: Clone + Send + Sync + 'static {
    fn transport(&self) -> &'static str;
}

pub(crate) struct Slot<C> {
    pub(crate) name: String,
    source: Option<PathBuf>,
    scope: Scope,
    pub(crate) state: ServerState,
    first_attempt_done: bool,
    last_error: Option<String>,
    client: Option<C>,
    generation: u64,
    transport: Option<&'static str>,
    tools: Vec<Tool>,
    tools_live: bool,
    agent_names: Vec<String>,
    request_timeout: Option<Duration>,
    /// The host entry's tool list: tools it leaves out are never exposed.
    filter: ToolFilter,
    /// Its tools' changes against their pins.
    tool_changes: Vec<ToolChange>,
}

pub(crate) struct State<C> {
    pub(crate) slots: Vec<Slot<C>>,
    by_agent_name: HashMap<String, (usize, String)>,
    closed: bool,
}

impl<C> State<C> {
    fn recompute_names(&mut self) {
        let pairs: Vec<(&str, &str)> = self
            .slots
            .iter()
            .flat_map(|s| {
                s.tools
                    .iter()
                    .map(move |t| (s.name.as_str(), t.name.as_str()))
            })
            .collect();
        let assigned = names::assign(&pairs);
        let mut it = assigned.into_iter();
        self.by_agent_name.clear();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            slot.agent_names = it.by_ref().take(slot.tools.len()).collect();
            for (n, t) in slot.agent_names.iter().zip(&slot.tools) {
                self.by_agent_name.insert(n.clone(), (i, t.name.clone()));
            }
        }
    }
}

/// State shared by the manager handles and the supervisors.
pub(crate) struct Shared<C> {
    state: Mutex<State<C>>,
    pub(crate) signal: Arc<Signal>,
    pub(crate) cache: Option<CacheFile>,
    call_timeout: Duration,
    max_attempts: u32,
}

/// The server and tool of a call, and its budget.
pub(crate) struct Target {
    idx: usize,
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) budget: Duration,
}

/// What a call does next.
pub(crate) enum Step<C> {
    /// Send it on this connection (of this generation).
    Call(C, u64),
    /// Wait for the server to (re)connect.
    Wait(Waiting),
}

/// Why a call waits.
pub(crate) enum Waiting {
    Connecting,
    Reconnecting {
        attempt: u32,
        reason: Option<String>,
    },
}

impl<C: LiveClient> Shared<C> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn changes(&self) -> Changes {
        Changes::new(Arc::clone(&self.signal))
    }

    /// Publishes a supervisor's view: machine state, live client.
    fn publish(&self, idx: usize, machine: &ServerMachine, client: Option<&C>, generation: u64) {
        let changed = {
            let mut st = self.lock();
            let slot = &mut st.slots[idx];
            let before = (
                slot.state.clone(),
                slot.generation,
                slot.client.is_some(),
                slot.first_attempt_done,
            );
            slot.state = machine.state().clone();
            slot.first_attempt_done = machine.first_attempt_done();
            slot.last_error = machine.last_error().map(str::to_string);
            slot.client = client.cloned();
            slot.generation = generation;
            if let Some(c) = client {
                slot.transport = Some(c.transport());
            }
            before
                != (
                    slot.state.clone(),
                    slot.generation,
                    slot.client.is_some(),
                    slot.first_attempt_done,
                )
        };
        if changed {
            self.signal.bump();
        }
    }

    /// A server listed its tools.
    fn set_tools(&self, idx: usize, tools: Vec<Tool>) {
        {
            let mut st = self.lock();
            let slot = &mut st.slots[idx];
            slot.tools = tools;
            slot.tools.retain(|t| slot.filter.allows(&t.name));
            slot.tools_live = true;
            st.recompute_names();
        }
        self.signal.bump();
    }

    /// A server's tools' changes against their pins, after a listing.
    fn set_tool_changes(&self, idx: usize, changes: Vec<ToolChange>) {
        let changed = {
            let mut st = self.lock();
            let slot = &mut st.slots[idx];
            let changed = slot.tool_changes != changes;
            slot.tool_changes = changes;
            changed
        };
        if changed {
            self.signal.bump();
        }
    }

    /// A supervisor could not be started (the runtime refused the task
    /// or the thread): its server fails with `error`.
    pub(crate) fn fail_unstarted(&self, idx: usize, error: String) {
        let machine = ServerMachine::failed(error);
        self.publish(idx, &machine, None, 0);
    }

    pub(crate) fn tools(&self) -> Vec<AgentTool> {
        let st = self.lock();
        let mut out = Vec::new();
        for slot in &st.slots {
            // Connecting servers have tools here only from the cache.
            let visible = matches!(
                slot.state,
                ServerState::Connected | ServerState::Reconnecting { .. } | ServerState::Connecting
            );
            if !visible {
                continue;
            }
            let deferred = slot.state != ServerState::Connected;
            for (n, t) in slot.agent_names.iter().zip(&slot.tools) {
                out.push(AgentTool {
                    name: n.clone(),
                    server: slot.name.clone(),
                    tool: t.clone(),
                    deferred,
                });
            }
        }
        out
    }

    pub(crate) fn status(&self) -> Vec<ServerStatus> {
        let st = self.lock();
        st.slots
            .iter()
            .map(|s| ServerStatus {
                name: s.name.clone(),
                state: s.state.clone(),
                tools: s.tools.len(),
                tools_from_cache: !s.tools_live && !s.tools.is_empty(),
                transport: s.transport,
                max_attempts: self.max_attempts,
                last_error: s.last_error.clone(),
                source: s.source.clone(),
                scope: s.scope,
                tool_changes: s.tool_changes.clone(),
            })
            .collect()
    }

    pub(crate) fn client(&self, server: &str) -> Option<C> {
        let st = self.lock();
        st.slots
            .iter()
            .find(|s| s.name == server && s.state == ServerState::Connected)
            .and_then(|s| s.client.clone())
    }

    pub(crate) fn settled(&self) -> bool {
        self.lock().slots.iter().all(|s| s.first_attempt_done)
    }

    pub(crate) fn mark_closed(&self) {
        self.lock().closed = true;
        self.signal.close();
    }

    /// The server and tool behind agent name `tool`, and the call's
    /// budget.
    pub(crate) fn target(&self, tool: &str, timeout: Option<Duration>) -> Result<Target, Error> {
        let st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let (idx, tool_name) = st
            .by_agent_name
            .get(tool)
            .cloned()
            .ok_or_else(|| Error::UnknownTool(tool.to_string()))?;
        let slot = &st.slots[idx];
        Ok(Target {
            idx,
            server: slot.name.clone(),
            tool: tool_name,
            budget: timeout
                .or(slot.request_timeout)
                .unwrap_or(self.call_timeout),
        })
    }

    /// What a call to `target` does now. `dead_generation` is a
    /// connection that refused the call as closed (never sent): the call
    /// waits for the next one.
    pub(crate) fn step(
        &self,
        target: &Target,
        dead_generation: Option<u64>,
    ) -> Result<Step<C>, Error> {
        let st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let slot = &st.slots[target.idx];
        let server = || target.server.clone();
        match (&slot.state, &slot.client) {
            (ServerState::Connected, Some(c)) if dead_generation != Some(slot.generation) => {
                Ok(Step::Call(c.clone(), slot.generation))
            }
            (ServerState::Failed { error }, _) => Err(Error::Failed {
                server: server(),
                error: error.clone(),
            }),
            (ServerState::Disabled, _) => Err(Error::Disabled(server())),
            (ServerState::NeedsApproval, _) => Err(Error::NeedsApproval(server())),
            (ServerState::Closed, _) => Err(Error::Closed),
            (ServerState::Connecting, _) => Ok(Step::Wait(Waiting::Connecting)),
            (ServerState::Reconnecting { attempt, .. }, _) => {
                Ok(Step::Wait(Waiting::Reconnecting {
                    attempt: *attempt,
                    reason: slot.last_error.clone(),
                }))
            }
            (ServerState::Connected, _) => Ok(Step::Wait(Waiting::Reconnecting {
                attempt: 1,
                reason: Some("connection closed".to_string()),
            })),
        }
    }

    /// The error of a call that waited `waited` for its server in vain.
    pub(crate) fn waited_in_vain(
        &self,
        target: &Target,
        waiting: &Waiting,
        waited: Duration,
    ) -> Error {
        match waiting {
            Waiting::Connecting => Error::Connecting {
                server: target.server.clone(),
                waited,
            },
            Waiting::Reconnecting { attempt, reason } => Error::Reconnecting {
                server: target.server.clone(),
                attempt: *attempt,
                max_attempts: self.max_attempts,
                reason: reason.clone().unwrap_or_else(|| "connection closed".into()),
                waited,
            },
        }
    }
}

impl Target {
    /// The outcome of a call sent on the connection of `generation`: the
    /// call's result, or (`Err`) that generation when the client refused
    /// the call because that connection had just closed: nothing was sent,
    /// so the call waits for the next one.
    pub(crate) fn settle(
        &self,
        result: Result<CallToolResult, mcpwire_adapter::Error>,
        generation: u64,
    ) -> Result<Result<CallToolResult, Error>, u64> {
        match result {
            Err(e) if refused_as_closed(&e) => Err(generation),
            r => Ok(r.map_err(|source| Error::Client {
                server: self.server.clone(),
                source,
            })),
        }
    }
}

/// The error of a call cancelled while it waited for its server.
pub(crate) fn cancelled_while_waiting(server: String) -> Error {
    Error::Client {
        server,
        source: mcpwire_adapter::Error::Request(RequestError::Cancelled {
            reason: "cancelled by the client while waiting for the connection".into(),
        }),
    }
}

/// The client refused the call locally because its connection is closed:
/// nothing was sent, so it is safe to send it on the next connection.
fn refused_as_closed(e: &mcpwire_adapter::Error) -> bool {
    matches!(
        e,
        mcpwire_adapter::Error::Call(mcpwire::connection::CallError::Closed(_))
            | mcpwire_adapter::Error::ClientClosed
    )
}

/// What a supervisor needs to run one server.
pub(crate) struct Plan<F> {
    pub(crate) idx: usize,
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
    pub(crate) raw: ServerConfig,
    pub(crate) machine: ServerMachine,
    pub(crate) connect: ConnectOptions<F>,
    /// Cached tools the server said are still fresh, and until when.
    pub(crate) fresh: Option<(Vec<Tool>, Instant)>,
    /// Where its tools are pinned, and under which key.
    pub(crate) pins: Option<(PinStore, String)>,
}

/// Where a connection's tools came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    /// Listed now; how long the server said the list stays fresh.
    Now(Option<Duration>),
    /// A cached list the server said is still fresh: not asked again.
    Fresh,
}

/// The manager before its supervisors run.
pub(crate) struct Prepared<C, F> {
    pub(crate) shared: Arc<Shared<C>>,
    pub(crate) plans: Vec<Plan<F>>,
    startup: Startup,
    started: Instant,
}

fn default_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// splitmix64: spreads per-server seeds apart.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Everything `Manager::start` decides before anything runs: the cache
/// read (one small file), consent, inputs, `${VAR}` expansion, each
/// entry's validation, the machines, the startup rule. Entries with a
/// name already seen are ignored (the first wins).
pub(crate) fn prepare<C: LiveClient, F>(
    entries: impl IntoIterator<Item = ServerEntry>,
    options: &ManagerOptions<F>,
) -> Prepared<C, F> {
    let started = Instant::now();
    let now_sys = SystemTime::now();
    let cache_file = match &options.cache {
        CacheSetting::Off => None,
        CacheSetting::Path(p) => Some(CacheFile::new(p.clone(), options.cache_ttl)),
        CacheSetting::UserDir => {
            paths::tool_cache_file(&options.env).map(|p| CacheFile::new(p, options.cache_ttl))
        }
    };
    let cache = match &cache_file {
        Some(c) => c.load(),
        None => ToolCache::new(),
    };
    let seed = options.seed.unwrap_or_else(default_seed);
    let mut connect = options.connect.clone();
    if let Some(t) = options.connect_timeout {
        connect = connect.connect_timeout(t);
    }
    // The eras found, beside the tool cache: a server of the handshake
    // era is probed once per user, not at every start.
    let eras = match &options.cache {
        CacheSetting::Off => None,
        CacheSetting::Path(p) => Some(p.with_file_name("eras.json")),
        CacheSetting::UserDir => paths::cache_dir(&options.env).map(|d| d.join("eras.json")),
    };
    if let (None, Some(path)) = (connect.era_cache_file(), eras) {
        connect = connect.era_cache(mcpwire_adapter::era::EraCache::at(path));
    }

    let consent: Arc<dyn ConsentPolicy> = match &options.consent {
        Some(policy) => Arc::clone(policy),
        None => Arc::new(Approvals::load_user(&options.env).unwrap_or_else(|e| {
            tracing::warn!("approvals not read, no project server is approved: {e}");
            Approvals::empty(PathBuf::new())
        })),
    };
    let mut startup = Startup::new(started, options.startup_deadline);
    let mut slots = Vec::new();
    let mut plans = Vec::new();
    let mut seen = HashSet::new();
    for entry in entries {
        if !seen.insert(entry.name.clone()) {
            tracing::debug!(
                "server `{}` from {} ignored: defined before",
                entry.name,
                entry.origin()
            );
            continue;
        }
        let idx = slots.len();
        let mut cached: Option<Vec<Tool>> = None;
        let mut request_timeout = None;
        let machine = match &entry.config {
            Err(e) => ServerMachine::failed(e.clone()),
            Ok(raw) if !raw.is_enabled() => ServerMachine::disabled(),
            Ok(_) if consent::needs_consent(&entry) && !consent.allows(&entry) => {
                tracing::info!(
                    "server `{}` ({}) needs approval before it runs",
                    entry.name,
                    entry.origin()
                );
                ServerMachine::needs_approval()
            }
            Ok(raw) => {
                let checked = with_inputs(&entry, raw, options.inputs.as_deref())
                    .and_then(|c| expand_config(&c, options.env.as_fn()).map_err(|e| e.to_string()))
                    .and_then(|c| match c.transport() {
                        Ok(_) => Ok(c),
                        Err(e) => Err(format!("invalid entry: {e}")),
                    });
                match checked {
                    Err(e) => ServerMachine::failed(e),
                    Ok(config) => {
                        cached = cache.get(&entry.name, raw, now_sys).map(<[Tool]>::to_vec);
                        let fresh = cache.fresh_listing(&entry.name, raw, now_sys).and_then(
                            |(tools, left)| {
                                Some((tools.to_vec(), Instant::now().checked_add(left)?))
                            },
                        );
                        request_timeout = config.request_timeout();
                        let machine =
                            ServerMachine::new(options.retry.clone(), mix(seed ^ idx as u64));
                        let mut plan_connect = match entry.startup_timeout {
                            Some(t) => connect.clone().connect_timeout(t),
                            None => connect.clone(),
                        };
                        let pins = options.pins.clone().zip(consent::pin_key(&entry));
                        if let Some((store, key)) = &pins {
                            plan_connect = plan_connect.pin_tools(
                                ToolPins::new(store.clone(), key.clone())
                                    .withhold(consent::needs_consent(&entry)),
                            );
                        }
                        plans.push(Plan {
                            idx,
                            name: entry.name.clone(),
                            config,
                            raw: raw.clone(),
                            machine: machine.clone(),
                            connect: plan_connect,
                            fresh,
                            pins,
                        });
                        machine
                    }
                }
            }
        };
        if let ServerState::Failed { error } = machine.state() {
            tracing::info!("server `{}` ({}): {error}", entry.name, entry.origin());
        }
        let id = startup.add(cached.is_some());
        if machine.first_attempt_done() {
            startup.handle_settled(id);
        }
        slots.push(Slot {
            name: entry.name.clone(),
            source: entry.source.clone(),
            scope: entry.scope,
            state: machine.state().clone(),
            first_attempt_done: machine.first_attempt_done(),
            last_error: machine.last_error().map(str::to_string),
            client: None,
            generation: 0,
            transport: None,
            tools: cached
                .unwrap_or_default()
                .into_iter()
                .filter(|t| entry.tools.allows(&t.name))
                .collect(),
            tools_live: false,
            agent_names: Vec::new(),
            request_timeout,
            filter: entry.tools.clone(),
            tool_changes: Vec::new(),
        });
    }
    let mut state = State {
        slots,
        by_agent_name: HashMap::new(),
        closed: false,
    };
    state.recompute_names();
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        signal: Arc::default(),
        cache: cache_file,
        call_timeout: options.call_timeout,
        max_attempts: options.retry.max_attempts,
    });
    Prepared {
        shared,
        plans,
        startup,
        started,
    }
}

impl<C: LiveClient, F> Prepared<C, F> {
    /// Whether startup is over (see [`Startup`]); if not, when to look
    /// again at the latest (a change of any server's state is the other
    /// reason to).
    pub(crate) fn startup_over(&mut self) -> Result<(), Option<Instant>> {
        {
            let st = self.shared.lock();
            for (i, slot) in st.slots.iter().enumerate() {
                if slot.first_attempt_done {
                    self.startup.handle_settled(i);
                }
            }
        }
        self.startup.handle_timeout(Instant::now());
        if self.startup.is_ready() {
            let deferred: Vec<usize> = self.startup.deferred().collect();
            let st = self.shared.lock();
            for i in deferred {
                tracing::debug!(
                    "server `{}` still connecting after {:?}: {} cached tools exposed",
                    st.slots[i].name,
                    self.started.elapsed(),
                    st.slots[i].tools.len()
                );
            }
            return Ok(());
        }
        Err(self.startup.poll_timeout())
    }
}

/// One server's supervisor, whatever runs it: performs what its
/// [`ServerMachine`] asks and tells the shared state what happened.
pub(crate) struct Supervisor<C> {
    shared: Arc<Shared<C>>,
    pub(crate) idx: usize,
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
    raw: ServerConfig,
    machine: ServerMachine,
    generation: u64,
    /// The tools the server last said stay fresh, until when.
    fresh: Option<(Vec<Tool>, Instant)>,
    /// Where its tools are pinned, and under which key.
    pins: Option<(PinStore, String)>,
}

/// How long a closing connection may take when the manager closes.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(5);

impl<C: LiveClient> Supervisor<C> {
    pub(crate) fn new<F>(shared: Arc<Shared<C>>, plan: Plan<F>) -> (Self, ConnectOptions<F>) {
        let mut machine = plan.machine;
        machine.start(Instant::now());
        (
            Supervisor {
                shared,
                idx: plan.idx,
                name: plan.name,
                config: plan.config,
                raw: plan.raw,
                machine,
                generation: 0,
                fresh: plan.fresh,
                pins: plan.pins,
            },
            plan.connect,
        )
    }

    /// Drains the machine's actions: whether to start a connection
    /// attempt now.
    pub(crate) fn actions(&mut self) -> bool {
        let mut connect = false;
        while let Some(action) = self.machine.poll_output() {
            match action {
                Action::Connect { attempt } => {
                    if attempt > 0 {
                        tracing::info!("server `{}`: reconnect attempt {attempt}", self.name);
                    }
                    connect = true;
                }
                Action::GiveUp { error } => {
                    tracing::warn!("server `{}`: {error}", self.name);
                }
            }
        }
        connect
    }

    /// Publishes the machine's state with `live`, the connection now.
    pub(crate) fn publish(&self, live: Option<&C>) {
        self.shared
            .publish(self.idx, &self.machine, live, self.generation);
    }

    /// When to call [`Supervisor::timer`].
    pub(crate) fn timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    pub(crate) fn timer(&mut self) {
        self.machine.handle_timeout(Instant::now());
    }

    /// An attempt connected and listed `tools`.
    /// The tools to use without listing them on the next connection: the
    /// last list, while the server's `ttlMs` says it is fresh.
    pub(crate) fn fresh_tools(&self) -> Option<Vec<Tool>> {
        let (tools, until) = self.fresh.as_ref()?;
        (Instant::now() < *until).then(|| tools.clone())
    }

    pub(crate) fn connected(&mut self, client: &C, tools: Vec<Tool>, listed: Listed) {
        self.generation += 1;
        self.shared.set_tools(self.idx, tools.clone());
        self.pins_checked();
        self.machine.handle_connected(Instant::now());
        tracing::debug!(
            "server `{}`: connected over {}",
            self.name,
            client.transport()
        );
        // Waiting calls go first; the cache write follows.
        self.publish(Some(client));
        if let Listed::Now(ttl) = listed {
            self.store(tools, ttl);
        }
    }

    pub(crate) fn connect_failed(&mut self, error: String) {
        tracing::debug!("server `{}`: connect failed: {error}", self.name);
        self.machine.handle_connect_failed(Instant::now(), error);
    }

    /// The tools were listed again (`notifications/tools/list_changed`).
    pub(crate) fn tools_listed(
        &mut self,
        tools: Result<(Vec<Tool>, Option<Duration>), mcpwire_adapter::Error>,
    ) {
        // The server said the list changed: what it said before is stale.
        self.fresh = None;
        match tools {
            Ok((tools, ttl)) => {
                self.shared.set_tools(self.idx, tools.clone());
                self.pins_checked();
                self.store(tools, ttl);
            }
            // A closing connection ends the notification stream next.
            Err(e) => tracing::debug!("server `{}`: re-listing tools failed: {e}", self.name),
        }
    }

    /// A listing was checked against the pins (by the client): publishes
    /// what differs from them.
    fn pins_checked(&self) {
        let Some((store, key)) = &self.pins else {
            return;
        };
        match store.pending(key) {
            Ok(changes) => {
                for c in &changes {
                    tracing::warn!("server `{}`: tool {}", self.name, c.summary());
                }
                self.shared.set_tool_changes(self.idx, changes);
            }
            Err(e) => tracing::warn!("server `{}`: tool pins not read: {e}", self.name),
        }
    }

    /// The live connection ended (its notification stream did).
    pub(crate) fn lost(&mut self, reason: Option<&str>) {
        let reason = reason.unwrap_or("connection closed").to_string();
        tracing::warn!("server `{}`: connection lost: {reason}", self.name);
        self.machine.handle_closed(Instant::now(), reason);
    }

    /// The manager closes: no more attempts.
    pub(crate) fn closing(&mut self) {
        self.machine.close();
        self.publish(None);
    }

    /// Remembers a list just made: on disk (with the server's freshness)
    /// and, while fresh, for the next connection.
    fn store(&mut self, tools: Vec<Tool>, ttl: Option<Duration>) {
        self.fresh = ttl
            .and_then(|t| Instant::now().checked_add(t))
            .map(|until| (tools.clone(), until));
        if let Some(cache) = &self.shared.cache {
            cache.store(&self.name, &self.raw, tools, ttl);
        }
    }
}

/// The entry with its inputs' values in place (the entry itself when it
/// has none).
fn with_inputs(
    entry: &ServerEntry,
    raw: &ServerConfig,
    inputs: Option<&InputFn>,
) -> Result<ServerConfig, String> {
    if entry.inputs.is_empty() {
        return Ok(raw.clone());
    }
    let mut values = HashMap::new();
    for input in &entry.inputs {
        let Some(v) = inputs.and_then(|f| f(entry, input)) else {
            let what = input
                .description
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            return Err(format!(
                "input `{}`{what} has no value: the host did not supply it",
                input.id
            ));
        };
        values.insert(input.id.clone(), v);
    }
    resolve_inputs(raw, &|id| values.get(id).cloned())
}
