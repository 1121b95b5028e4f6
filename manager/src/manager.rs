//! The manager: shared state read by the application, one supervisor
//! task per server writing it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use mcpwire::config::ServerConfig;
use mcpwire::manager::cache::{ToolCache, DEFAULT_TTL};
use mcpwire::manager::expand::expand_config;
use mcpwire::manager::names;
use mcpwire::manager::policy::{RetryPolicy, ServerMachine, ServerState, Startup};
use mcpwire::mcp::types::{CallToolResult, Tool};
use mcpwire_tokio::{CancelToken, Client, ConnectOptions, Progress, ProgressFn, RequestError};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cache_file::CacheFile;
use crate::consent::{self, Approvals, ConsentPolicy};
use crate::discovery::{resolve_inputs, Input, Scope, ServerEntry, ToolFilter};
use crate::paths::{self, Env};
use crate::supervisor;
use crate::Error;

/// How the manager starts and keeps its servers.
#[derive(Clone)]
pub struct ManagerOptions {
    pub(crate) startup_deadline: Duration,
    pub(crate) connect: ConnectOptions,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) call_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) cache: CacheSetting,
    pub(crate) cache_ttl: Duration,
    pub(crate) env: Env,
    pub(crate) seed: Option<u64>,
    pub(crate) consent: Option<Arc<dyn ConsentPolicy>>,
    pub(crate) inputs: Option<Arc<InputFn>>,
}

/// Supplies the value of an entry's input ([`ManagerOptions::inputs`]).
pub type InputFn = dyn Fn(&ServerEntry, &Input) -> Option<String> + Send + Sync;

#[derive(Clone, Debug)]
pub(crate) enum CacheSetting {
    UserDir,
    Path(PathBuf),
    Off,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions::new()
    }
}

impl ManagerOptions {
    /// Defaults: 250 ms startup deadline, the client's connect timeout
    /// (the entry's `timeout`, else 30 s), 30 s per call unless the entry
    /// or the call says otherwise, [`RetryPolicy::default`], the tool cache
    /// in the user's cache directory with a 30-day TTL, the process
    /// environment for `${VAR}`.
    pub fn new() -> Self {
        ManagerOptions {
            startup_deadline: Duration::from_millis(250),
            connect: ConnectOptions::new()
                .client_info("mcpwire-manager", env!("CARGO_PKG_VERSION")),
            connect_timeout: None,
            call_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            cache: CacheSetting::UserDir,
            cache_ttl: DEFAULT_TTL,
            env: Env::process(),
            seed: None,
            consent: None,
            inputs: None,
        }
    }

    /// Supplies the values of VS Code's `${input:ID}` ([`ServerEntry::inputs`]),
    /// asked once per starting server that has inputs (after consent).
    /// `None` fails that server, naming the input. Default: no values.
    /// The values replace the references literally and are never part of
    /// the tool cache's key or an approval's hash.
    pub fn inputs(
        mut self,
        f: impl Fn(&ServerEntry, &Input) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.inputs = Some(Arc::new(f));
        self
    }

    /// Who decides whether a server of a project's file may start
    /// ([`crate::consent`]). Default: the user's approvals file, read when
    /// the manager starts (unreadable: nothing approved). [`TrustAll`]
    /// starts every server.
    ///
    /// [`TrustAll`]: crate::TrustAll
    pub fn consent(mut self, policy: impl ConsentPolicy + 'static) -> Self {
        self.consent = Some(Arc::new(policy));
        self
    }

    /// How long [`Manager::start`] waits before exposing servers that are
    /// still connecting from the tool cache (servers without a cache
    /// entry are always waited for).
    pub fn startup_deadline(mut self, deadline: Duration) -> Self {
        self.startup_deadline = deadline;
        self
    }

    /// The options every connection is made with (client info, handlers
    /// for roots/sampling/elicitation, limits).
    pub fn connect_options(mut self, options: ConnectOptions) -> Self {
        self.connect = options;
        self
    }

    /// How long one connection attempt may take, handshake included.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// The default bound of a call (waiting for a connection included)
    /// when neither the call nor the server entry's `timeout` says.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The reconnect policy.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Keeps the tool cache in `file` instead of the user's cache
    /// directory.
    pub fn cache_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.cache = CacheSetting::Path(file.into());
        self
    }

    /// No tool cache (no reads, no writes).
    pub fn no_cache(mut self) -> Self {
        self.cache = CacheSetting::Off;
        self
    }

    /// How long cached tools are used (default 30 days).
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl;
        self
    }

    /// The environment for `${VAR}` expansion and for finding the cache
    /// directory.
    pub fn env(mut self, env: Env) -> Self {
        self.env = env;
        self
    }

    /// Seeds the reconnect jitter (default: from the clock and process id).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
}

/// Options of one [`Manager::call`].
#[derive(Clone)]
pub struct CallOptions {
    timeout: Option<Duration>,
    wait: bool,
    progress: Option<ProgressFn>,
    cancel: Option<CancelToken>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions::new()
    }
}

impl CallOptions {
    /// Defaults: the entry's or the manager's timeout, wait for the
    /// connection, no progress, no cancel token.
    pub fn new() -> Self {
        CallOptions {
            timeout: None,
            wait: true,
            progress: None,
            cancel: None,
        }
    }

    /// Bounds the whole call: waiting for a (re)connection plus the
    /// request.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether a call to a server that is connecting or reconnecting
    /// waits for it (default yes) or fails at once with
    /// [`Error::Connecting`] / [`Error::Reconnecting`].
    pub fn wait_for_connection(mut self, wait: bool) -> Self {
        self.wait = wait;
        self
    }

    /// Calls `f` for each progress notification of the call.
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Cancels the call (while waiting, or in flight: the server is told)
    /// when `token` is cancelled.
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    fn for_client(&self, timeout: Duration) -> mcpwire_tokio::CallOptions {
        let mut o =
            mcpwire_tokio::CallOptions::new().timeout(timeout.max(Duration::from_millis(1)));
        if let Some(p) = &self.progress {
            let p = Arc::clone(p);
            o = o.on_progress(move |x| p(x));
        }
        if let Some(t) = &self.cancel {
            o = o.cancel_token(t.clone());
        }
        o
    }
}

/// A tool as an agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTool {
    /// `mcp__<server>__<tool>` (see [`mcpwire::manager::names`]).
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

pub(crate) struct Slot {
    pub(crate) name: String,
    source: Option<PathBuf>,
    scope: Scope,
    pub(crate) state: ServerState,
    first_attempt_done: bool,
    last_error: Option<String>,
    client: Option<Client>,
    generation: u64,
    transport: Option<&'static str>,
    tools: Vec<Tool>,
    tools_live: bool,
    agent_names: Vec<String>,
    request_timeout: Option<Duration>,
    /// The host entry's tool list: tools it leaves out are never exposed.
    filter: ToolFilter,
}

pub(crate) struct State {
    pub(crate) slots: Vec<Slot>,
    by_agent_name: HashMap<String, (usize, String)>,
    closed: bool,
}

impl State {
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

/// State shared by the manager handle and the supervisors.
pub(crate) struct Shared {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    pub(crate) cache: Option<CacheFile>,
    call_timeout: Duration,
    max_attempts: u32,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Publishes a supervisor's view: machine state, live client.
    pub(crate) fn publish(
        &self,
        idx: usize,
        machine: &ServerMachine,
        client: Option<&Client>,
        generation: u64,
    ) {
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
            self.bump();
        }
    }

    /// A server listed its tools.
    pub(crate) fn set_tools(&self, idx: usize, tools: Vec<Tool>) {
        {
            let mut st = self.lock();
            let slot = &mut st.slots[idx];
            slot.tools = tools;
            slot.tools.retain(|t| slot.filter.allows(&t.name));
            slot.tools_live = true;
            st.recompute_names();
        }
        self.bump();
    }
}

struct Inner {
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// Many MCP servers behind one handle: parallel startup with a tool
/// cache, reconnects, agent tool names. Cheap to clone. Dropping the last
/// clone stops the supervisors (connections close in the background);
/// [`Manager::close`] waits for them.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("servers", &self.inner.shared.lock().slots.len())
            .finish_non_exhaustive()
    }
}

/// What a supervisor needs to run one server.
pub(crate) struct Plan {
    pub(crate) idx: usize,
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
    pub(crate) raw: ServerConfig,
    pub(crate) machine: ServerMachine,
    pub(crate) connect: ConnectOptions,
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

impl Manager {
    /// Starts every server in parallel and returns when startup is over:
    /// every server has finished its first attempt, or the startup
    /// deadline has passed and every server still connecting has cached
    /// tools (exposed as deferred tools until it connects). Disabled and
    /// invalid entries never connect; their status says why. Entries with
    /// a name already seen are ignored (the first wins).
    pub async fn start(
        entries: impl IntoIterator<Item = ServerEntry>,
        options: ManagerOptions,
    ) -> Manager {
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
            Some(c) => c.load().await,
            None => ToolCache::new(),
        };
        let seed = options.seed.unwrap_or_else(default_seed);
        let mut connect = options.connect.clone();
        if let Some(t) = options.connect_timeout {
            connect = connect.connect_timeout(t);
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
        let mut seen = std::collections::HashSet::new();
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
                        .and_then(|c| {
                            expand_config(&c, options.env.as_fn()).map_err(|e| e.to_string())
                        })
                        .and_then(|c| match c.transport() {
                            Ok(_) => Ok(c),
                            Err(e) => Err(format!("invalid entry: {e}")),
                        });
                    match checked {
                        Err(e) => ServerMachine::failed(e),
                        Ok(config) => {
                            cached = cache.get(&entry.name, raw, now_sys).map(<[Tool]>::to_vec);
                            request_timeout = config.request_timeout();
                            let machine =
                                ServerMachine::new(options.retry.clone(), mix(seed ^ idx as u64));
                            plans.push(Plan {
                                idx,
                                name: entry.name.clone(),
                                config,
                                raw: raw.clone(),
                                machine: machine.clone(),
                                connect: match entry.startup_timeout {
                                    Some(t) => connect.clone().connect_timeout(t),
                                    None => connect.clone(),
                                },
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
            changed: watch::channel(0).0,
            cache: cache_file,
            call_timeout: options.call_timeout,
            max_attempts: options.retry.max_attempts,
        });
        let (shutdown, _) = watch::channel(false);
        let tasks = plans
            .into_iter()
            .map(|plan| {
                tokio::spawn(supervisor::run(
                    Arc::clone(&shared),
                    plan,
                    shutdown.subscribe(),
                ))
            })
            .collect();
        let manager = Manager {
            inner: Arc::new(Inner {
                shared,
                shutdown,
                tasks: Mutex::new(tasks),
            }),
        };

        // Wait for startup to be over.
        let mut changes = manager.inner.shared.changed.subscribe();
        loop {
            {
                let st = manager.inner.shared.lock();
                for (i, slot) in st.slots.iter().enumerate() {
                    if slot.first_attempt_done {
                        startup.handle_settled(i);
                    }
                }
            }
            startup.handle_timeout(Instant::now());
            if startup.is_ready() {
                break;
            }
            let timer = startup.poll_timeout();
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(timer.unwrap_or_else(Instant::now).into()), if timer.is_some() => {}
            }
        }
        let deferred: Vec<usize> = startup.deferred().collect();
        if !deferred.is_empty() {
            let st = manager.inner.shared.lock();
            for i in deferred {
                tracing::debug!(
                    "server `{}` still connecting after {:?}: {} cached tools exposed",
                    st.slots[i].name,
                    started.elapsed(),
                    st.slots[i].tools.len()
                );
            }
        }
        manager
    }

    /// Every tool of every server that can be called now or after its
    /// (re)connection: connected servers, reconnecting ones, and servers
    /// still connecting that have cached tools. Failed, disabled and closed
    /// servers' tools are left out.
    pub fn tools(&self) -> Vec<AgentTool> {
        let st = self.inner.shared.lock();
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

    /// The status of every server, in definition order.
    pub fn status(&self) -> Vec<ServerStatus> {
        let st = self.inner.shared.lock();
        st.slots
            .iter()
            .map(|s| ServerStatus {
                name: s.name.clone(),
                state: s.state.clone(),
                tools: s.tools.len(),
                tools_from_cache: !s.tools_live && !s.tools.is_empty(),
                transport: s.transport,
                max_attempts: self.inner.shared.max_attempts,
                last_error: s.last_error.clone(),
                source: s.source.clone(),
                scope: s.scope,
            })
            .collect()
    }

    /// The live client of `server`, if it is connected (for resources,
    /// prompts and everything else beyond tools).
    pub fn client(&self, server: &str) -> Option<Client> {
        let st = self.inner.shared.lock();
        st.slots
            .iter()
            .find(|s| s.name == server && s.state == ServerState::Connected)
            .and_then(|s| s.client.clone())
    }

    /// A receiver whose value changes whenever a server's state or tools
    /// change (re-read [`Manager::tools`] then).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.shared.changed.subscribe()
    }

    /// The tool cache file, if one is used.
    pub fn cache_path(&self) -> Option<&Path> {
        self.inner.shared.cache.as_ref().map(CacheFile::path)
    }

    /// Waits until no server is on its first connection attempt, at most
    /// `timeout`. Returns whether that happened.
    pub async fn wait_settled(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut changes = self.changes();
        loop {
            if self
                .inner
                .shared
                .lock()
                .slots
                .iter()
                .all(|s| s.first_attempt_done)
            {
                return true;
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() { return false },
                _ = tokio::time::sleep_until(deadline) => return false,
            }
        }
    }

    /// Calls the tool with agent name `tool` (see [`Manager::tools`]).
    ///
    /// While its server is connecting or reconnecting the call waits for
    /// it, within the call's timeout (the whole call is bounded by it),
    /// then fails with [`Error::Connecting`] or [`Error::Reconnecting`]. A
    /// call the client refused because its connection had just closed
    /// (never sent) waits for the reconnection and is sent then; a call
    /// that was sent is never sent twice.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        let started = Instant::now();
        let shared = &self.inner.shared;
        let (idx, server, tool_name, entry_timeout) = {
            let st = shared.lock();
            if st.closed {
                return Err(Error::Closed);
            }
            let (idx, tool_name) = st
                .by_agent_name
                .get(tool)
                .cloned()
                .ok_or_else(|| Error::UnknownTool(tool.to_string()))?;
            let slot = &st.slots[idx];
            (idx, slot.name.clone(), tool_name, slot.request_timeout)
        };
        let budget = options
            .timeout
            .or(entry_timeout)
            .unwrap_or(shared.call_timeout);
        let deadline = started + budget;
        let mut changes = shared.changed.subscribe();
        let mut dead_generation: Option<u64> = None;
        loop {
            let ready = {
                let st = shared.lock();
                if st.closed {
                    return Err(Error::Closed);
                }
                let slot = &st.slots[idx];
                match (&slot.state, &slot.client) {
                    (ServerState::Connected, Some(c))
                        if dead_generation != Some(slot.generation) =>
                    {
                        Ok((c.clone(), slot.generation))
                    }
                    (ServerState::Failed { error }, _) => {
                        return Err(Error::Failed {
                            server,
                            error: error.clone(),
                        })
                    }
                    (ServerState::Disabled, _) => return Err(Error::Disabled(server)),
                    (ServerState::NeedsApproval, _) => return Err(Error::NeedsApproval(server)),
                    (ServerState::Closed, _) => return Err(Error::Closed),
                    (ServerState::Connecting, _) => Err(None),
                    (ServerState::Reconnecting { attempt, .. }, _) => {
                        Err(Some((*attempt, slot.last_error.clone())))
                    }
                    (ServerState::Connected, _) => {
                        Err(Some((1, Some("connection closed".to_string()))))
                    }
                }
            };
            let waiting = match ready {
                Ok((client, generation)) => {
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    match client
                        .call_tool_with(
                            &tool_name,
                            arguments.clone(),
                            options.for_client(remaining),
                        )
                        .await
                    {
                        Err(e) if refused_as_closed(&e) => {
                            // Never sent: wait for the next connection.
                            dead_generation = Some(generation);
                            continue;
                        }
                        r => return r.map_err(|source| Error::Client { server, source }),
                    }
                }
                Err(w) => w,
            };
            let timed_out = |waited: Duration| match &waiting {
                None => Error::Connecting {
                    server: server.clone(),
                    waited,
                },
                Some((attempt, reason)) => Error::Reconnecting {
                    server: server.clone(),
                    attempt: *attempt,
                    max_attempts: shared.max_attempts,
                    reason: reason.clone().unwrap_or_else(|| "connection closed".into()),
                    waited,
                },
            };
            if !options.wait {
                return Err(timed_out(started.elapsed()));
            }
            let cancelled = async {
                match &options.cancel {
                    Some(t) => t.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = changes.changed() => if r.is_err() { return Err(Error::Closed) },
                _ = tokio::time::sleep_until(deadline.into()) => return Err(timed_out(started.elapsed())),
                _ = cancelled => return Err(Error::Client {
                    server,
                    source: mcpwire_tokio::Error::Request(RequestError::Cancelled {
                        reason: "cancelled by the client while waiting for the connection".into(),
                    }),
                }),
            }
        }
    }

    /// Closes every connection gracefully and waits for the supervisors.
    /// Calls made afterwards fail with [`Error::Closed`].
    pub async fn close(&self) {
        self.inner.shutdown.send_replace(true);
        let tasks =
            std::mem::take(&mut *self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            let _ = t.await;
        }
        self.inner.shared.lock().closed = true;
        self.inner.shared.bump();
    }
}

/// The client refused the call locally because its connection is closed:
/// nothing was sent, so it is safe to send it on the next connection.
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

fn refused_as_closed(e: &mcpwire_tokio::Error) -> bool {
    matches!(
        e,
        mcpwire_tokio::Error::Call(mcpwire::connection::CallError::Closed(_))
            | mcpwire_tokio::Error::ClientClosed
    )
}
