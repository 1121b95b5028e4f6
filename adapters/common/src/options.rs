//! Options for connecting and for single calls, the server-request
//! handlers, and the cancellation token.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use event_listener::Event;
use mcpwire::connection::ConnectionConfig;
use mcpwire::mcp::types::{Implementation, ListChanged, Root};
use mcpwire::rpc::{ErrorObject, Progress, RequestOptions};
use serde_json::{Map, Value};

/// A boxed future, as handlers return.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A handler for one kind of server request: params in, result or
/// JSON-RPC error out.
pub type RequestHandler =
    Arc<dyn Fn(Value) -> BoxFuture<Result<Value, ErrorObject>> + Send + Sync + 'static>;

/// A progress observer.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync + 'static>;

/// How to connect: who we are, which server requests we answer, limits.
///
/// Capabilities are declared only for the handlers that are set: a server
/// that sees `sampling` will ask for it and wait for the answer.
#[derive(Clone, Default)]
pub struct ConnectOptions {
    pub(crate) config: ConnectionConfig,
    pub(crate) roots: Option<RequestHandler>,
    pub(crate) sampling: Option<RequestHandler>,
    pub(crate) elicitation: Option<RequestHandler>,
    pub(crate) connect_timeout: Option<Duration>,
    /// Whether `clientInfo` was chosen by the caller (else the adapter
    /// names itself).
    pub(crate) client_info_set: bool,
    /// OAuth for HTTP servers.
    pub(crate) auth: Option<crate::auth::AuthOptions>,
    /// Don't reuse (or record) the era this process found the server to
    /// speak.
    pub(crate) forget_era: bool,
}

impl ConnectOptions {
    /// Defaults: client info named after the adapter (`mcpwire-tokio`,
    /// `mcpwire-smol`) and its version, no capabilities.
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

    /// Names the client after the adapter unless the caller chose a name.
    pub(crate) fn default_client_info(&mut self, name: &str, version: &str) {
        if !self.client_info_set {
            self.config.client.client_info = Implementation::new(name, version);
        }
    }

    /// Default per-request timeout (30 s unless the server config says).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.engine = self.config.engine.clone().default_timeout(timeout);
        self
    }

    /// Whether to start from the protocol era this process last found the
    /// server to speak (default true: a legacy server is not probed again;
    /// see [`crate::era`]). The server's `protocolEra` always wins.
    pub fn remember_era(mut self, yes: bool) -> Self {
        self.forget_era = !yes;
        self
    }

    /// OAuth for HTTP servers: on 401 (or 403 `insufficient_scope`) the
    /// connection authorizes itself (the user in a browser, or stored and
    /// refreshed tokens) and carries on; tokens are saved to the store.
    /// Without it, a 401 fails the request with the server's hints.
    pub fn auth(mut self, auth: crate::auth::AuthOptions) -> Self {
        self.auth = Some(auth);
        self
    }

    /// How long `connect` may take, handshake included (default: the
    /// request timeout, plus the time a user has to log in when OAuth is
    /// interactive).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Answers `roots/list` with the roots `f` returns, and declares the
    /// `roots` capability (with `listChanged`: call
    /// [`Client::roots_changed`](crate::Client::roots_changed)).
    pub fn roots<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<Root>> + Send + 'static,
    {
        let f = Arc::new(f);
        self.roots = Some(Arc::new(move |_params| {
            let f = f.clone();
            Box::pin(async move {
                let roots = f().await;
                Ok(serde_json::json!({ "roots": roots }))
            })
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
    pub fn sampling<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        self.sampling = Some(Arc::new(move |p| Box::pin(f(p))));
        self.config.client.capabilities.sampling = Some(Map::new());
        self
    }

    /// Answers `elicitation/create` and declares `elicitation` with the
    /// `form` mode (add `url` with [`ConnectOptions::config`] if the handler
    /// supports it).
    pub fn elicitation<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        self.elicitation = Some(Arc::new(move |p| Box::pin(f(p))));
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
    /// `notifications/progress` (on the driver task: keep it short).
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

    /// Cancels the call when `token` is cancelled (the server is told).
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// A cancellation signal shared between threads and tasks.
#[derive(Clone, Default, Debug)]
pub struct CancelToken {
    inner: Arc<CancelInner>,
}

#[derive(Default, Debug)]
struct CancelInner {
    cancelled: AtomicBool,
    event: Event,
}

impl CancelToken {
    /// A fresh token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every call holding this token.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.event.notify(usize::MAX);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Resolves once cancelled.
    pub async fn cancelled(&self) {
        loop {
            if self.is_cancelled() {
                return;
            }
            let listener = self.inner.event.listen();
            if self.is_cancelled() {
                return;
            }
            listener.await;
        }
    }
}
