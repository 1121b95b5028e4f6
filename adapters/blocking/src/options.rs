//! Options for connecting and for single calls, the server-request
//! handlers, and the cancellation token (all synchronous).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use mcpwire::connection::ConnectionConfig;
use mcpwire::mcp::types::{Implementation, ListChanged, Root};
use mcpwire::mcp::ServerNotification;
use mcpwire::rpc::{ErrorObject, Progress, RequestOptions};
use serde_json::{Map, Value};

use crate::owner::Event;

/// A handler for one kind of server request: params in, result or
/// JSON-RPC error out. It runs on a thread of its own.
pub type RequestHandler = Arc<dyn Fn(Value) -> Result<Value, ErrorObject> + Send + Sync + 'static>;

/// A progress observer (called on the connection's owner thread: keep it
/// short).
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync + 'static>;

/// A notification observer (called on the owner thread: keep it short).
pub type NotificationFn = Arc<dyn Fn(&ServerNotification) + Send + Sync + 'static>;

/// How to connect: who we are, which server requests we answer, limits.
///
/// Capabilities are declared only for the handlers that are set.
#[derive(Clone, Default)]
pub struct ConnectOptions {
    pub(crate) config: ConnectionConfig,
    pub(crate) roots: Option<RequestHandler>,
    pub(crate) sampling: Option<RequestHandler>,
    pub(crate) elicitation: Option<RequestHandler>,
    pub(crate) on_notification: Option<NotificationFn>,
    pub(crate) connect_timeout: Option<Duration>,
    client_info_set: bool,
    pub(crate) auth: Option<mcpwire_adapter::AuthOptions>,
    pub(crate) forget_era: bool,
    /// The server whose era the owner records once known.
    pub(crate) remember: Option<mcpwire::ServerConfig>,
}

impl ConnectOptions {
    /// Defaults: client info `mcpwire-blocking` and its version, no
    /// capabilities.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `clientInfo`.
    pub fn client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.config.client.client_info = Implementation::new(name, version);
        self.client_info_set = true;
        self
    }

    /// The full core configuration (engine limits, stdio grace periods,
    /// HTTP headers and retry policy).
    pub fn config(mut self, f: impl FnOnce(&mut ConnectionConfig)) -> Self {
        let before = self.config.client.client_info.clone();
        f(&mut self.config);
        if self.config.client.client_info != before {
            self.client_info_set = true;
        }
        self
    }

    pub(crate) fn default_client_info(&mut self) {
        if !self.client_info_set {
            self.config.client.client_info =
                Implementation::new("mcpwire-blocking", env!("CARGO_PKG_VERSION"));
        }
    }

    /// Default per-request timeout (30 s unless the server config says).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.engine = self.config.engine.clone().default_timeout(timeout);
        self
    }

    /// Whether to start from the protocol era this process last found the
    /// server to speak (default true: a legacy server is not probed again).
    /// The server's `protocolEra` always wins.
    pub fn remember_era(mut self, yes: bool) -> Self {
        self.forget_era = !yes;
        self
    }

    /// OAuth for HTTP servers: on 401 (or 403 `insufficient_scope`) the
    /// connection authorizes itself (the user in a browser, or stored and
    /// refreshed tokens) and carries on; tokens are saved to the store.
    pub fn auth(mut self, auth: mcpwire_adapter::AuthOptions) -> Self {
        self.auth = Some(auth);
        self
    }

    /// How long `connect` may take, handshake included (default: the
    /// request timeout, plus the login time when OAuth is interactive).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Calls `f` for every server notification (on the owner thread; use
    /// [`Client::notifications`](crate::Client::notifications) for an
    /// iterator instead).
    pub fn on_notification(
        mut self,
        f: impl Fn(&ServerNotification) + Send + Sync + 'static,
    ) -> Self {
        self.on_notification = Some(Arc::new(f));
        self
    }

    /// Answers `roots/list` with the roots `f` returns, and declares the
    /// `roots` capability (with `listChanged`: call
    /// [`Client::roots_changed`](crate::Client::roots_changed)).
    pub fn roots(mut self, f: impl Fn() -> Vec<Root> + Send + Sync + 'static) -> Self {
        self.roots = Some(Arc::new(move |_params| {
            Ok(serde_json::json!({ "roots": f() }))
        }));
        self.config.client.capabilities.roots = Some(ListChanged {
            list_changed: Some(true),
            ..Default::default()
        });
        self
    }

    /// Answers `sampling/createMessage` (params and result as JSON) and
    /// declares `sampling`. Return `Err(ErrorObject::new(-1, "…"))` when the
    /// user declines.
    pub fn sampling(
        mut self,
        f: impl Fn(Value) -> Result<Value, ErrorObject> + Send + Sync + 'static,
    ) -> Self {
        self.sampling = Some(Arc::new(f));
        self.config.client.capabilities.sampling = Some(Map::new());
        self
    }

    /// Answers `elicitation/create` and declares `elicitation` with the
    /// `form` mode.
    pub fn elicitation(
        mut self,
        f: impl Fn(Value) -> Result<Value, ErrorObject> + Send + Sync + 'static,
    ) -> Self {
        self.elicitation = Some(Arc::new(f));
        let mut modes = Map::new();
        modes.insert("form".into(), Value::Object(Map::new()));
        self.config.client.capabilities.elicitation = Some(modes);
        self
    }

    pub(crate) fn handler(&self, method: &str) -> Option<RequestHandler> {
        match method {
            "roots/list" => self.roots.clone(),
            "sampling/createMessage" => self.sampling.clone(),
            "elicitation/create" => self.elicitation.clone(),
            _ => None,
        }
    }
}

/// Options of one call.
#[derive(Clone, Default)]
pub struct CallOptions {
    pub(crate) rpc: RequestOptions,
    pub(crate) progress: Option<ProgressFn>,
    pub(crate) cancel: Option<CancelToken>,
}

impl CallOptions {
    /// Defaults: the connection's timeout, no progress, no token.
    pub fn new() -> Self {
        Self::default()
    }

    /// This call's timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.rpc = self.rpc.timeout(timeout);
        self
    }

    /// Asks for progress (`_meta.progressToken`) and calls `f` for each
    /// `notifications/progress` (on the owner thread: keep it short).
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.rpc = self.rpc.progress(true);
        self.progress = Some(Arc::new(f));
        self
    }

    /// Restarts the timeout at each progress notification, up to `max`
    /// in total.
    pub fn reset_timeout_on_progress(mut self, max: Duration) -> Self {
        self.rpc = self
            .rpc
            .progress(true)
            .reset_timeout_on_progress(true)
            .max_total_timeout(max);
        self
    }

    /// Cancels the call when `token` is cancelled (from any thread; the
    /// server is told).
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// A cancellation signal usable from any thread: [`CancelToken::cancel`]
/// ends every call holding it with [`Error::is_cancelled`](crate::Error::is_cancelled).
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<CancelInner>,
}

#[derive(Default)]
struct CancelInner {
    cancelled: AtomicBool,
    /// Calls in flight holding this token: (their owner's inbox, ticket).
    calls: Mutex<Vec<(mpsc::Sender<Event>, u64)>>,
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

const CANCEL_REASON: &str = "cancelled by the client";

impl CancelToken {
    /// A fresh token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every call holding this token (now and later).
    pub fn cancel(&self) {
        let calls = {
            let mut calls = self
                .inner
                .calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.inner.cancelled.store(true, Ordering::SeqCst);
            std::mem::take(&mut *calls)
        };
        for (tx, ticket) in calls {
            let _ = tx.send(Event::Cancel {
                ticket,
                reason: CANCEL_REASON.into(),
            });
        }
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Registers a call in flight (cancels it at once if already cancelled).
    pub(crate) fn register(&self, tx: &mpsc::Sender<Event>, ticket: u64) {
        let mut calls = self
            .inner
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.is_cancelled() {
            let _ = tx.send(Event::Cancel {
                ticket,
                reason: CANCEL_REASON.into(),
            });
        } else {
            calls.push((tx.clone(), ticket));
        }
    }

    /// Forgets a call that has ended.
    /// (Tickets are unique in the process.)
    pub(crate) fn unregister(&self, ticket: u64) {
        let mut calls = self
            .inner
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        calls.retain(|(_, k)| *k != ticket);
    }
}
