//! The manager without an async runtime: the same policy, shared state
//! and options as the async one, run by one supervisor thread per server
//! over [`mcpwire_blocking::Client`]. Calls block the calling thread; any
//! number of threads may call at once.
//!
//! ```no_run
//! use mcpwire_manager::blocking::{Manager, ManagerOptions};
//! use mcpwire_manager::{CallOptions, Discovery};
//! use serde_json::json;
//!
//! let found = Discovery::new().discover();
//! let manager = Manager::start(found.servers, ManagerOptions::new());
//! for t in manager.tools() {
//!     println!("{}", t.name);
//! }
//! let out = manager.call("mcp__files__read", json!({"path": "a.txt"}), CallOptions::new());
//! manager.close();
//! # let _ = out;
//! ```

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire::mcp::types::{CallToolResult, Tool};
use mcpwire::mcp::ServerNotification;
use serde_json::Value;

use crate::discovery::ServerEntry;
use crate::options::CallOptions;
use crate::state::{
    cancelled_while_waiting, prepare, AgentTool, Changes, Listed, LiveClient, Running,
    ServerStatus, Shared, Step, Supervisor, Woke, CLOSE_GRACE,
};
use crate::Error;

pub use mcpwire_blocking::{CancelToken, Client, ConnectOptions, ServerConfig};

/// The manager's options with blocking connection handlers
/// ([`ConnectOptions`]).
pub type ManagerOptions = crate::ManagerOptions<mcpwire_adapter::Blocking>;

impl LiveClient for Client {
    fn transport(&self) -> &'static str {
        Client::transport(self)
    }
}

struct Inner {
    shared: Arc<Shared<Client>>,
    /// One per supervisor thread: how it is told to stop.
    stops: Mutex<Vec<mpsc::Sender<Event>>>,
    running: Arc<Running>,
}

impl Inner {
    fn stop_all(&self) {
        let stops = std::mem::take(&mut *self.stops.lock().unwrap_or_else(|p| p.into_inner()));
        for s in stops {
            let _ = s.send(Event::Shutdown);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The supervisors close their connections in the background.
        self.stop_all();
    }
}

/// Many MCP servers behind one handle, without an async runtime: parallel
/// startup with a tool cache, reconnects, agent tool names — the same
/// behaviour as the async [`crate::Manager`]. Cheap to clone, `Send` and
/// `Sync`. Dropping the last clone stops the supervisors (connections
/// close in the background); [`Manager::close`] waits for them.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("runtime", &"threads")
            .field("servers", &self.inner.shared.lock().slots.len())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Starts every server in parallel and returns when startup is over
    /// (as [`crate::Manager::start`] does).
    pub fn start(entries: impl IntoIterator<Item = ServerEntry>, options: ManagerOptions) -> Self {
        let mut prepared = prepare::<Client, _>(entries, &options);
        let shared = Arc::clone(&prepared.shared);
        let running = Arc::new(Running::default());
        let mut stops = Vec::new();
        for plan in std::mem::take(&mut prepared.plans) {
            let idx = plan.idx;
            let (tx, rx) = mpsc::channel();
            let (sup, connect) = Supervisor::new(Arc::clone(&shared), plan);
            let done = Arc::clone(&running);
            let events = tx.clone();
            running.add();
            let spawned = std::thread::Builder::new()
                .name(format!("mcpwire-manager {}", sup.name))
                .spawn(move || {
                    supervise(sup, connect, events, rx);
                    done.finish();
                });
            match spawned {
                Ok(_) => stops.push(tx),
                Err(e) => {
                    running.finish();
                    shared.fail_unstarted(idx, format!("no thread for its supervisor: {e}"));
                }
            }
        }
        let manager = Manager {
            inner: Arc::new(Inner {
                shared,
                stops: Mutex::new(stops),
                running,
            }),
        };
        let signal = Arc::clone(&manager.inner.shared.signal);
        loop {
            let seen = signal.version();
            match prepared.startup_over() {
                Ok(()) => break,
                Err(timer) => {
                    signal.wait_since(seen, timer, &|| false);
                }
            }
        }
        manager
    }

    /// Every tool of every server that can be called now or after its
    /// (re)connection (as [`crate::Manager::tools`]).
    pub fn tools(&self) -> Vec<AgentTool> {
        self.inner.shared.tools()
    }

    /// The status of every server, in definition order.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.inner.shared.status()
    }

    /// The live client of `server`, if it is connected.
    pub fn client(&self, server: &str) -> Option<Client> {
        self.inner.shared.client(server)
    }

    /// The changes of the servers' state and tools, from now on
    /// ([`Changes::wait`] blocks for the next).
    pub fn changes(&self) -> Changes {
        self.inner.shared.changes()
    }

    /// The tool cache file, if one is used.
    pub fn cache_path(&self) -> Option<&Path> {
        self.inner.shared.cache.as_ref().map(|c| c.path())
    }

    /// Blocks until no server is on its first connection attempt, at most
    /// `timeout`. Returns whether that happened.
    pub fn wait_settled(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let signal = &self.inner.shared.signal;
        loop {
            let seen = signal.version();
            if self.inner.shared.settled() {
                return true;
            }
            if signal.wait_since(seen, Some(deadline), &|| signal.is_closed()) != Woke::Changed {
                return self.inner.shared.settled();
            }
        }
    }

    /// Calls the tool with agent name `tool`, blocking (as
    /// [`crate::Manager::call`]: waits out a (re)connection within the
    /// call's timeout; a call is never sent twice).
    pub fn call(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        let started = Instant::now();
        let shared = &self.inner.shared;
        let target = shared.target(tool, options.timeout)?;
        let deadline = started + target.budget;
        let signal = Arc::clone(&shared.signal);
        // A cancel wakes the wait below, which then sees it.
        let hook = options.cancel.as_ref().map(|t| {
            let s = Arc::clone(&signal);
            (t, t.on_cancel(move || s.wake()))
        });
        let result = (|| {
            let mut dead_generation = None;
            loop {
                let seen = signal.version();
                let waiting = match shared.step(&target, dead_generation)? {
                    Step::Call(client, generation) => {
                        let remaining = deadline.saturating_duration_since(Instant::now());
                        let result = client.call_tool_with(
                            &target.tool,
                            arguments.clone(),
                            options.for_client(remaining),
                        );
                        match target.settle(result, generation) {
                            Ok(done) => return done,
                            Err(dead) => {
                                dead_generation = Some(dead);
                                continue;
                            }
                        }
                    }
                    Step::Wait(w) => w,
                };
                if !options.wait {
                    return Err(shared.waited_in_vain(&target, &waiting, started.elapsed()));
                }
                let cancelled = || options.cancel.as_ref().is_some_and(|t| t.is_cancelled());
                match signal.wait_since(seen, Some(deadline), &cancelled) {
                    Woke::Changed => {}
                    Woke::Deadline => {
                        return Err(shared.waited_in_vain(&target, &waiting, started.elapsed()))
                    }
                    Woke::Stopped => return Err(cancelled_while_waiting(target.server.clone())),
                }
            }
        })();
        if let Some((token, key)) = hook {
            token.forget(key);
        }
        result
    }

    /// Closes every connection gracefully and waits for the supervisors
    /// (and the tool cache's writes). Calls made afterwards fail with
    /// [`Error::Closed`].
    pub fn close(&self) {
        self.inner.stop_all();
        self.inner.running.wait_all_done();
        if let Some(cache) = &self.inner.shared.cache {
            cache.flush_blocking();
        }
        self.inner.shared.mark_closed();
    }
}

/// What a supervisor thread waits for.
enum Event {
    Shutdown,
    /// An attempt's result: the client, its notifications, its tools.
    Attempt(Result<Connected, mcpwire_adapter::Error>),
    /// A notification of the connection of this generation; `None`: its
    /// stream ended.
    Note(u64, Option<ServerNotification>),
}

/// A connection made, its notifications, its tools and where they came
/// from.
type Connected = (Client, mcpwire_blocking::Notifications, Vec<Tool>, Listed);

/// Connects, subscribes to notifications (before listing, so no
/// `list_changed` is missed) and lists the tools, unless the server said
/// the last list (`fresh`) is still fresh.
fn connect(
    config: ServerConfig,
    options: ConnectOptions,
    fresh: Option<Vec<Tool>>,
) -> Result<Connected, mcpwire_adapter::Error> {
    let client = Client::connect_with(config, options)?;
    let notes = client.notifications();
    let (tools, listed) = match fresh {
        _ if client.server().capabilities.tools.is_none() => (Vec::new(), Listed::Now(None)),
        Some(tools) => {
            client.remember_tools(&tools);
            (tools, Listed::Fresh)
        }
        None => {
            let (tools, ttl) = client.list_tools_fresh_for()?;
            (tools, Listed::Now(ttl))
        }
    };
    Ok((client, notes, tools, listed))
}

/// One server's thread: attempts and notification streams run on threads
/// of their own and report here; timers are the receive's timeout.
fn supervise(
    mut sup: Supervisor<Client>,
    options: ConnectOptions,
    events: mpsc::Sender<Event>,
    rx: mpsc::Receiver<Event>,
) {
    let mut live: Option<(Client, u64)> = None;
    let mut generation = 0u64;
    loop {
        if sup.actions() {
            let (config, options, tx) = (sup.config.clone(), options.clone(), events.clone());
            let fresh = sup.fresh_tools();
            let spawned = std::thread::Builder::new()
                .name(format!("mcpwire-connect {}", sup.name))
                .spawn(move || {
                    // Sent to nobody when the manager closed meanwhile:
                    // the client is dropped and closes in the background.
                    let _ = tx.send(Event::Attempt(connect(config, options, fresh)));
                });
            if let Err(e) = spawned {
                sup.connect_failed(format!("no thread to connect on: {e}"));
                continue;
            }
        }
        sup.publish(live.as_ref().map(|(c, _)| c));
        let event = match sup.timeout() {
            Some(t) => match rx.recv_timeout(t.saturating_duration_since(Instant::now())) {
                Ok(e) => Some(e),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => Some(Event::Shutdown),
            },
            None => Some(rx.recv().unwrap_or(Event::Shutdown)),
        };
        match event {
            None => sup.timer(),
            Some(Event::Shutdown) => break,
            Some(Event::Attempt(r)) => match r {
                Ok((client, notes, tools, listed)) => {
                    generation += 1;
                    let (tx, g) = (events.clone(), generation);
                    let forwarded = std::thread::Builder::new()
                        .name(format!("mcpwire-notes {}", sup.name))
                        .spawn(move || {
                            for n in notes {
                                if tx.send(Event::Note(g, Some(n))).is_err() {
                                    return;
                                }
                            }
                            let _ = tx.send(Event::Note(g, None));
                        });
                    match forwarded {
                        Ok(_) => {
                            sup.connected(&client, tools, listed);
                            live = Some((client, generation));
                        }
                        Err(e) => {
                            let _ = client.close_timeout(CLOSE_GRACE);
                            sup.connect_failed(format!("no thread for its notifications: {e}"));
                        }
                    }
                }
                Err(e) => sup.connect_failed(e.to_string()),
            },
            Some(Event::Note(g, note)) => {
                let current = live.as_ref().is_some_and(|(_, lg)| *lg == g);
                match note {
                    _ if !current => {}
                    Some(ServerNotification::ToolsListChanged) => {
                        let client = live.as_ref().map(|(c, _)| c.clone());
                        if let Some(client) = client {
                            sup.tools_listed(client.list_tools_fresh_for());
                        }
                    }
                    Some(_) => {}
                    None => {
                        if let Some((gone, _)) = live.take() {
                            sup.lost(gone.closed_reason());
                        }
                    }
                }
            }
        }
    }
    // Shutdown: no more attempts; close the live connection gracefully.
    sup.closing();
    if let Some((client, _)) = live {
        let _ = client.close_timeout(CLOSE_GRACE);
    }
}
