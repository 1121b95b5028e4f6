//! The async manager, on any [`Runtime`]: one supervisor task per server
//! (spawned with `R::spawn`, timers from `R::sleep_until`) over
//! [`mcpwire_adapter::Client<R>`]. `tokio::Manager` and
//! `smol::Manager` are this type.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_lite::future::or;
use mcpwire::mcp::types::{CallToolResult, Tool};
use mcpwire::mcp::ServerNotification;
use mcpwire_adapter::{Client, ConnectOptions, Notifications, Runtime};
use serde_json::Value;

use crate::discovery::ServerEntry;
use crate::options::{CallOptions, ManagerOptions};
use crate::state::{
    cancelled_while_waiting, prepare, AgentTool, Changes, Listed, LiveClient, Running,
    ServerStatus, Shared, Signal, Step, Supervisor, CLOSE_GRACE,
};
use crate::Error;

impl<R: Runtime> LiveClient for Client<R> {
    fn transport(&self) -> &'static str {
        Client::transport(self)
    }
}

struct Inner<R: Runtime> {
    shared: Arc<Shared<Client<R>>>,
    shutdown: Arc<Signal>,
    running: Arc<Running>,
}

impl<R: Runtime> Drop for Inner<R> {
    fn drop(&mut self) {
        // The supervisors close their connections in the background.
        self.shutdown.close();
    }
}

/// Many MCP servers behind one handle, on the async runtime `R`: parallel
/// startup with a tool cache, reconnects, agent tool names. Cheap to
/// clone. Dropping the last clone stops the supervisors (connections
/// close in the background); [`Manager::close`] waits for them.
///
/// Name it through its runtime: `tokio::Manager`,
/// `smol::Manager` (or `Manager<YourRuntime>` for a runtime of
/// your own). `blocking::Manager` is the same manager on threads.
pub struct Manager<R: Runtime> {
    inner: Arc<Inner<R>>,
}

impl<R: Runtime> Clone for Manager<R> {
    fn clone(&self) -> Self {
        Manager {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<R: Runtime> std::fmt::Debug for Manager<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("runtime", &R::NAME)
            .field("servers", &self.inner.shared.lock().slots.len())
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Manager<R> {
    /// Starts every server in parallel and returns when startup is over:
    /// every server has finished its first attempt, or the startup
    /// deadline has passed and every server still connecting has cached
    /// tools (exposed as deferred tools until it connects). Disabled and
    /// invalid entries never connect; their status says why. Entries with
    /// a name already seen are ignored (the first wins).
    pub async fn start(
        entries: impl IntoIterator<Item = ServerEntry>,
        options: ManagerOptions,
    ) -> Self {
        let mut prepared = prepare::<Client<R>, mcpwire_adapter::Async>(entries, &options);
        let shared = Arc::clone(&prepared.shared);
        let shutdown = Arc::new(Signal::default());
        let running = Arc::new(Running::default());
        for plan in std::mem::take(&mut prepared.plans) {
            let idx = plan.idx;
            running.add();
            let (shared, shutdown, done) = (
                Arc::clone(&shared),
                Arc::clone(&shutdown),
                Arc::clone(&running),
            );
            let (sup, connect) = Supervisor::new(shared, plan);
            let task = Box::pin(async move {
                supervise::<R>(sup, connect, &shutdown).await;
                done.finish();
            });
            if let Err(e) = R::spawn(task) {
                // The task was dropped: it never finishes by itself.
                running.finish();
                prepared
                    .shared
                    .fail_unstarted(idx, format!("no task for its supervisor: {e}"));
            }
        }
        let manager = Manager {
            inner: Arc::new(Inner {
                shared,
                shutdown,
                running,
            }),
        };
        // Wait for startup to be over.
        let mut changes = manager.changes();
        while let Err(timer) = prepared.startup_over() {
            let changed = async {
                let _ = changes.changed().await;
            };
            match timer {
                Some(t) => or(changed, R::sleep_until(t)).await,
                None => changed.await,
            }
        }
        manager
    }

    /// Every tool of every server that can be called now or after its
    /// (re)connection: connected servers, reconnecting ones, and servers
    /// still connecting that have cached tools. Failed, disabled and closed
    /// servers' tools are left out.
    pub fn tools(&self) -> Vec<AgentTool> {
        self.inner.shared.tools()
    }

    /// The status of every server, in definition order.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.inner.shared.status()
    }

    /// The live client of `server`, if it is connected (for resources,
    /// prompts and everything else beyond tools).
    pub fn client(&self, server: &str) -> Option<Client<R>> {
        self.inner.shared.client(server)
    }

    /// The changes of the servers' state and tools, from now on (re-read
    /// [`Manager::tools`] after each).
    pub fn changes(&self) -> Changes {
        self.inner.shared.changes()
    }

    /// The tool cache file, if one is used.
    pub fn cache_path(&self) -> Option<&Path> {
        self.inner.shared.cache.as_ref().map(|c| c.path())
    }

    /// Waits until no server is on its first connection attempt, at most
    /// `timeout`. Returns whether that happened.
    pub async fn wait_settled(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut changes = self.changes();
        loop {
            if self.inner.shared.settled() {
                return true;
            }
            let timed_out = or(async { changes.changed().await.is_err() }, async {
                R::sleep_until(deadline).await;
                true
            })
            .await;
            if timed_out {
                return self.inner.shared.settled();
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
        let target = shared.target(tool, options.timeout)?;
        let deadline = started + target.budget;
        let mut changes = shared.changes();
        let mut dead_generation = None;
        loop {
            let waiting = match shared.step(&target, dead_generation)? {
                Step::Call(client, generation) => {
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let result = client
                        .call_tool_with(
                            &target.tool,
                            arguments.clone(),
                            options.for_client(remaining),
                        )
                        .await;
                    match target.settle(result, generation) {
                        Ok(done) => return done,
                        // Never sent: wait for the next connection.
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
            enum Woke {
                Changed(bool),
                Deadline,
                Cancelled,
            }
            let cancelled = async {
                match &options.cancel {
                    Some(t) => t.cancelled().await,
                    None => std::future::pending().await,
                }
                Woke::Cancelled
            };
            let woke = or(
                async { Woke::Changed(changes.changed().await.is_ok()) },
                or(
                    async {
                        R::sleep_until(deadline).await;
                        Woke::Deadline
                    },
                    cancelled,
                ),
            )
            .await;
            match woke {
                Woke::Changed(true) => {}
                Woke::Changed(false) => return Err(Error::Closed),
                Woke::Deadline => {
                    return Err(shared.waited_in_vain(&target, &waiting, started.elapsed()))
                }
                Woke::Cancelled => return Err(cancelled_while_waiting(target.server.clone())),
            }
        }
    }

    /// Closes every connection gracefully and waits for the supervisors
    /// (and the tool cache's writes). Calls made afterwards fail with
    /// [`Error::Closed`].
    pub async fn close(&self) {
        self.inner.shutdown.close();
        self.inner.running.all_done().await;
        if let Some(cache) = &self.inner.shared.cache {
            cache.flush().await;
        }
        self.inner.shared.mark_closed();
    }
}

/// A connection with its notification stream.
struct Live<R: Runtime> {
    client: Client<R>,
    notes: Notifications,
}

/// A connection made, its tools and where they came from.
type Connected<R> = (Live<R>, Vec<Tool>, Listed);

type Attempt<R> =
    Pin<Box<dyn Future<Output = Result<Connected<R>, mcpwire_adapter::Error>> + Send>>;

/// Connects, subscribes to notifications (before listing, so no
/// `list_changed` is missed) and lists the tools, unless the server said
/// the last list (`fresh`) is still fresh.
async fn connect<R: Runtime>(
    config: mcpwire::config::ServerConfig,
    options: ConnectOptions,
    fresh: Option<Vec<Tool>>,
) -> Result<Connected<R>, mcpwire_adapter::Error> {
    let client = Client::<R>::connect_with(config, options).await?;
    let notes = client.notifications();
    let (tools, listed) = match fresh {
        _ if client.server().capabilities.tools.is_none() => (Vec::new(), Listed::Now(None)),
        Some(tools) => {
            client.remember_tools(&tools);
            (tools, Listed::Fresh)
        }
        None => {
            let (tools, ttl) = client.list_tools_fresh_for().await?;
            (tools, Listed::Now(ttl))
        }
    };
    Ok((Live { client, notes }, tools, listed))
}

enum Event<R: Runtime> {
    Shutdown,
    Attempt(Result<Connected<R>, mcpwire_adapter::Error>),
    Note(Option<ServerNotification>),
    Timer,
}

/// One server's task: waits on {shutdown, attempt, notifications, timer}
/// and tells its [`Supervisor`]. A lost connection is noticed when the
/// client's notification stream ends (process exit, stream failure,
/// session that could not be re-initialized);
/// `notifications/tools/list_changed` re-lists the tools.
async fn supervise<R: Runtime>(
    mut sup: Supervisor<Client<R>>,
    options: ConnectOptions,
    shutdown: &Signal,
) {
    let mut attempt: Option<Attempt<R>> = None;
    let mut live: Option<Live<R>> = None;
    loop {
        if sup.actions() {
            let fresh = sup.fresh_tools();
            attempt = Some(Box::pin(connect::<R>(
                sup.config.clone(),
                options.clone(),
                fresh,
            )));
        }
        sup.publish(live.as_ref().map(|l| &l.client));
        // Read before the check: a close in between bumps past `seen`.
        let seen = shutdown.version();
        if shutdown.is_closed() {
            break;
        }
        let timer = sup.timeout();
        let event = or(
            async {
                shutdown.changed_since(seen).await;
                Event::Shutdown
            },
            or(
                async {
                    match attempt.as_mut() {
                        Some(a) => Event::Attempt(a.await),
                        None => std::future::pending().await,
                    }
                },
                or(
                    async {
                        match live.as_mut() {
                            Some(l) => Event::Note(l.notes.recv().await),
                            None => std::future::pending().await,
                        }
                    },
                    async {
                        match timer {
                            Some(t) => {
                                R::sleep_until(t).await;
                                Event::Timer
                            }
                            None => std::future::pending().await,
                        }
                    },
                ),
            ),
        )
        .await;
        match event {
            Event::Shutdown => {}
            Event::Attempt(r) => {
                attempt = None;
                match r {
                    Ok((l, tools, listed)) => {
                        sup.connected(&l.client, tools, listed);
                        live = Some(l);
                    }
                    Err(e) => sup.connect_failed(e.to_string()),
                }
            }
            Event::Note(Some(ServerNotification::ToolsListChanged)) => {
                let client = live.as_ref().map(|l| l.client.clone());
                if let Some(client) = client {
                    sup.tools_listed(client.list_tools_fresh_for().await);
                }
            }
            Event::Note(Some(_)) => {}
            Event::Note(None) => {
                if let Some(gone) = live.take() {
                    sup.lost(gone.client.closed_reason());
                }
            }
            Event::Timer => sup.timer(),
        }
    }
    // Shutdown: no more attempts; close the live connection gracefully.
    drop(attempt);
    sup.closing();
    if let Some(l) = live {
        let _ = l.client.close_timeout(CLOSE_GRACE).await;
    }
}
