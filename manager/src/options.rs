//! How the manager starts and keeps its servers, and how one call is made:
//! the same options on every front end.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mcpwire_adapter::options::ConnectOptions;
use mcpwire_adapter::pins::PinStore;
use mcpwire_adapter::{Async, CancelToken, Progress, ProgressFn};

use crate::consent::ConsentPolicy;
use crate::discovery::{Input, ServerEntry};
use crate::paths::Env;
use crate::policy::cache::DEFAULT_TTL;
use crate::policy::RetryPolicy;

/// How the manager starts and keeps its servers.
///
/// Generic over the flavor of the connection's handlers, as
/// [`ConnectOptions`] is: `ManagerOptions` (= `ManagerOptions<Async>`) for
/// the async front ends, `blocking::ManagerOptions` for the
/// blocking one.
pub struct ManagerOptions<F = Async> {
    pub(crate) startup_deadline: Duration,
    pub(crate) connect: ConnectOptions<F>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) call_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) cache: CacheSetting,
    pub(crate) cache_ttl: Duration,
    pub(crate) env: Env,
    pub(crate) seed: Option<u64>,
    pub(crate) consent: Option<Arc<dyn ConsentPolicy>>,
    pub(crate) inputs: Option<Arc<InputFn>>,
    pub(crate) pins: Option<PinStore>,
}

/// Supplies the value of an entry's input ([`ManagerOptions::inputs`]).
pub type InputFn = dyn Fn(&ServerEntry, &Input) -> Option<String> + Send + Sync;

#[derive(Clone, Debug)]
pub(crate) enum CacheSetting {
    UserDir,
    Path(PathBuf),
    Off,
}

impl<F> Clone for ManagerOptions<F> {
    fn clone(&self) -> Self {
        ManagerOptions {
            startup_deadline: self.startup_deadline,
            connect: self.connect.clone(),
            connect_timeout: self.connect_timeout,
            call_timeout: self.call_timeout,
            retry: self.retry.clone(),
            cache: self.cache.clone(),
            cache_ttl: self.cache_ttl,
            env: self.env.clone(),
            seed: self.seed,
            consent: self.consent.clone(),
            inputs: self.inputs.clone(),
            pins: self.pins.clone(),
        }
    }
}

impl<F> Default for ManagerOptions<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F> ManagerOptions<F> {
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
            pins: None,
        }
    }

    /// Pins each server's tools in `store` ([`mcpwire_adapter::pins`]):
    /// the first listing of a server (per definition,
    /// [`consent::pin_key`](crate::consent::pin_key)) is pinned; a later
    /// listing whose tools changed, appeared or went is reported in
    /// [`ServerStatus::tool_changes`](crate::ServerStatus::tool_changes)
    /// (with a [`Changes`](crate::Changes) wake-up), and for a project's
    /// server the changed and new tools are withheld (not in `tools()`,
    /// calls refused as unknown) until the change is accepted
    /// ([`PinStore::accept`], `mcpwire approve NAME`). Default: off.
    pub fn tool_pins(mut self, store: PinStore) -> Self {
        self.pins = Some(store);
        self
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

    /// How long `Manager::start` waits before exposing servers that are
    /// still connecting from the tool cache (servers without a cache
    /// entry are always waited for).
    pub fn startup_deadline(mut self, deadline: Duration) -> Self {
        self.startup_deadline = deadline;
        self
    }

    /// The options every connection is made with (client info, handlers
    /// for roots/sampling/elicitation, limits).
    pub fn connect_options(mut self, options: ConnectOptions<F>) -> Self {
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

/// Options of one `Manager::call`.
#[derive(Clone)]
pub struct CallOptions {
    pub(crate) timeout: Option<Duration>,
    pub(crate) wait: bool,
    progress: Option<ProgressFn>,
    pub(crate) cancel: Option<CancelToken>,
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
    /// [`Error::Connecting`](crate::Error::Connecting) / [`Error::Reconnecting`](crate::Error::Reconnecting).
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

    pub(crate) fn for_client(&self, timeout: Duration) -> mcpwire_adapter::CallOptions {
        let mut o =
            mcpwire_adapter::CallOptions::new().timeout(timeout.max(Duration::from_millis(1)));
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
