//! Options for connecting and for single calls, and the cancellation
//! token: one set of types for every adapter. [`ConnectOptions`] is
//! generic over the flavor of its handlers: `ConnectOptions<Async>` (the
//! tokio and smol adapters) takes `async` closures, `ConnectOptions<Blocking>`
//! (the blocking adapter) synchronous ones; everything else is shared.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use event_listener::Event;
use mcpwire::connection::ConnectionConfig;
use mcpwire::mcp::methods::ListRootsResult;
use mcpwire::mcp::trace::{TraceContext, TraceError};
use mcpwire::mcp::types::{
    CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult, Implementation, Root,
};
use mcpwire::mcp::{ServerNotification, ServerRequestKind};
use mcpwire::rpc::{ErrorObject, Params, Progress, RequestOptions};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::handlers::{DiagnosticFn, Handler, Handlers, NotificationFn};
use crate::sync::lock;

/// A progress observer (called where the progress is taken in, under the
/// session's lock: keep it short, and do not call the client from it).
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync + 'static>;

/// The handler flavor of the async adapters: handlers are `async`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Async;

/// The handler flavor of the blocking adapter: handlers are synchronous.
#[derive(Debug, Clone, Copy, Default)]
pub struct Blocking;

/// How to connect: who we are, which server requests we answer, limits.
///
/// Capabilities are declared only for the handlers that are set: a server
/// that sees `sampling` will ask for it and wait for the answer.
pub struct ConnectOptions<F> {
    pub(crate) config: ConnectionConfig,
    pub(crate) handlers: Handlers,
    pub(crate) on_notification: Option<NotificationFn>,
    pub(crate) on_diagnostic: Option<DiagnosticFn>,
    pub(crate) connect_timeout: Option<Duration>,
    /// Whether `clientInfo` was chosen by the caller (else the adapter
    /// names itself).
    pub(crate) client_info_set: bool,
    /// OAuth for HTTP servers.
    pub(crate) auth: Option<crate::auth::AuthOptions>,
    /// Don't reuse (or record) the era this process found the server to
    /// speak.
    pub(crate) forget_era: bool,
    /// The file of eras shared with other processes, if any.
    pub(crate) era_cache: Option<crate::era::EraCache>,
    /// An option found invalid when set (connect fails with it).
    pub(crate) invalid: Option<(&'static str, String)>,
    /// Don't check `structuredContent` against `outputSchema`.
    pub(crate) skip_output_validation: bool,
    /// Proxy and TLS settings given in code.
    pub(crate) network: crate::net::NetworkOptions,
    /// Tool pinning ([`crate::pins`]).
    pub(crate) pins: Option<crate::pins::ToolPins>,
    flavor: PhantomData<fn() -> F>,
}

impl<F> Clone for ConnectOptions<F> {
    fn clone(&self) -> Self {
        ConnectOptions {
            config: self.config.clone(),
            handlers: self.handlers.clone(),
            on_notification: self.on_notification.clone(),
            on_diagnostic: self.on_diagnostic.clone(),
            connect_timeout: self.connect_timeout,
            client_info_set: self.client_info_set,
            auth: self.auth.clone(),
            forget_era: self.forget_era,
            era_cache: self.era_cache.clone(),
            invalid: self.invalid.clone(),
            skip_output_validation: self.skip_output_validation,
            network: self.network.clone(),
            pins: self.pins.clone(),
            flavor: PhantomData,
        }
    }
}

impl<F> Default for ConnectOptions<F> {
    fn default() -> Self {
        ConnectOptions {
            config: ConnectionConfig::default(),
            handlers: Handlers::default(),
            on_notification: None,
            on_diagnostic: None,
            connect_timeout: None,
            client_info_set: false,
            auth: None,
            forget_era: false,
            era_cache: None,
            invalid: None,
            skip_output_validation: false,
            network: crate::net::NetworkOptions::default(),
            pins: None,
            flavor: PhantomData,
        }
    }
}

impl<F> std::fmt::Debug for ConnectOptions<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("handlers", &self.handlers)
            .field("connect_timeout", &self.connect_timeout)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl<F> ConnectOptions<F> {
    /// Defaults: client info named after the adapter (`mcpwire-tokio`,
    /// `mcpwire-smol`, `mcpwire-blocking`) and its version, no
    /// capabilities.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a tool's `structuredContent` is checked against the
    /// `outputSchema` it declared in the last `list_tools` (default: yes,
    /// with the adapters' default `validate` feature). A mismatch fails the
    /// call with [`Error::StructuredOutput`](crate::Error::StructuredOutput).
    pub fn validate_output(mut self, validate: bool) -> Self {
        self.skip_output_validation = !validate;
        self
    }

    /// Sends every exchange (OAuth's too) through HTTP proxy `url`,
    /// `http://[user:password@]host[:port]`, but to the hosts `NO_PROXY`
    /// lists; over the server entry's `proxy` and the environment. `https`
    /// goes through a `CONNECT` tunnel, `http` in absolute form.
    pub fn proxy(mut self, url: impl Into<String>) -> Self {
        self.network.proxy = Some(crate::net::ProxyChoice::Url(url.into()));
        self
    }

    /// Connects directly, whatever the server entry and the environment
    /// say about proxies.
    pub fn no_proxy(mut self) -> Self {
        self.network.proxy = Some(crate::net::ProxyChoice::Direct);
        self
    }

    /// Chooses proxies by these variables (`HTTPS_PROXY`, `NO_PROXY`, ...)
    /// instead of the process's environment: `ProxyEnv::from_lookup(|k|
    /// my_settings.get(k))`.
    pub fn proxy_env(mut self, env: mcpwire::exchange::proxy::ProxyEnv) -> Self {
        self.network.proxy = Some(crate::net::ProxyChoice::Env(env));
        self
    }

    /// TLS settings for `https`: a CA to trust besides the system's, a
    /// client certificate, or verification off. Each field set here
    /// replaces the server entry's `tls` field.
    pub fn tls(mut self, tls: mcpwire::config::TlsSettings) -> Self {
        self.network.tls = tls;
        self
    }

    /// Pins the server's tools ([`crate::pins`]): every `list_tools`
    /// compares what the server says about its tools (name, title,
    /// description, input and output schemas, annotations) with what was
    /// pinned under `pins`' key, pins them the first time, reports a
    /// change to [`ToolPins::on_change`](crate::pins::ToolPins::on_change),
    /// and with [`ToolPins::withhold`](crate::pins::ToolPins::withhold)
    /// leaves changed and new tools out of the list and refuses calls to
    /// them with [`Error::ToolWithheld`](crate::Error::ToolWithheld) until
    /// the change is accepted ([`PinStore::accept`](crate::pins::PinStore::accept)).
    ///
    /// ```no_run
    /// use mcpwire_adapter::pins::{PinStore, ToolPins};
    /// use mcpwire_adapter::ConnectOptions;
    /// let store = PinStore::user().expect("a home directory");
    /// let options = ConnectOptions::new().pin_tools(
    ///     ToolPins::new(store, "my-server")
    ///         .withhold(true)
    ///         .on_change(|changes| for c in changes { eprintln!("{}", c.summary()) }),
    /// );
    /// ```
    pub fn pin_tools(mut self, pins: crate::pins::ToolPins) -> Self {
        self.pins = Some(pins);
        self
    }

    /// The tool pinning set with [`pin_tools`](Self::pin_tools).
    pub fn tool_pins(&self) -> Option<&crate::pins::ToolPins> {
        self.pins.as_ref()
    }

    /// Whether tool calls may become tasks on the server (default: yes).
    /// With tasks on, the client declares the `io.modelcontextprotocol/tasks`
    /// extension (2026-07-28) and calls a 2025-11-25 tool whose
    /// `execution.taskSupport` is `required` as a task; either way
    /// `call_tool` follows the task to its end. Off, a server that needs
    /// tasks refuses those calls.
    pub fn tasks(mut self, enabled: bool) -> Self {
        self.config.client.tasks = enabled;
        self
    }

    /// The longest a call waits for the task it became (default 24 h;
    /// `None`: as long as the task's `ttl` says the server keeps it).
    /// Past it, or a second past the task's `ttl`, the task is cancelled
    /// on the server and the call fails with `RequestError::TaskExpired`;
    /// the call's own timeout, if shorter, still comes first.
    pub fn max_task_wait(mut self, wait: Option<Duration>) -> Self {
        self.config.client.max_task_wait = wait;
        self
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
    #[doc(hidden)]
    pub fn default_client_info(&mut self, name: &str, version: &str) {
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

    /// Remembers eras in `cache` too, a file other processes share
    /// ([`EraCache::user`](crate::era::EraCache::user): the user's cache
    /// folder, as the `mcpwire` command does), so that a server of the
    /// handshake era is probed once per user, not once per process.
    /// Default: this process only.
    pub fn era_cache(mut self, cache: crate::era::EraCache) -> Self {
        self.era_cache = Some(cache);
        self
    }

    /// Declares extension `id` (`capabilities.extensions`, in both eras)
    /// with `settings` (a JSON object; `{}` for none): servers that gate
    /// tools or resources on it offer them. `id` must have a prefix
    /// (`com.example/name`); an invalid one, or settings that are not an
    /// object, make `connect` fail with
    /// [`Error::InvalidOption`](crate::Error::InvalidOption).
    pub fn extension(mut self, id: &str, settings: Value) -> Self {
        let declared = match settings {
            Value::Object(map) => {
                mcpwire::mcp::ext::declare(&mut self.config.client.capabilities, id, map)
                    .map_err(|e| e.to_string())
            }
            other => Err(format!(
                "the settings of {id} must be a JSON object, not {other}"
            )),
        };
        if let Err(problem) = declared {
            self.invalid.get_or_insert(("extension", problem));
        }
        self
    }

    /// Declares MCP Apps (`io.modelcontextprotocol/ui`, with the HTML app
    /// MIME type `text/html;profile=mcp-app`): the host renders the apps
    /// tools link to (`Tool::ui`), and capability-gated servers list them
    /// and their `ui://` resources, read with `read_resource` like any
    /// other.
    pub fn mcp_apps(self) -> Self {
        self.extension(
            mcpwire::mcp::ext::MCP_APPS,
            Value::Object(mcpwire::mcp::ext::mcp_apps_settings()),
        )
    }

    /// The first option found invalid, if any (for executors).
    #[doc(hidden)]
    pub fn check(&self) -> Result<(), crate::Error> {
        match &self.invalid {
            Some((option, problem)) => Err(crate::Error::InvalidOption {
                option,
                problem: problem.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The file of eras set with [`ConnectOptions::era_cache`], if any.
    pub fn era_cache_file(&self) -> Option<&crate::era::EraCache> {
        self.era_cache.as_ref()
    }

    /// Whether an HTTP redirect may lead to another origin (scheme, host
    /// or port). Default false: it fails with an error naming both URLs.
    /// When allowed, `Authorization`, `Cookie`, `Proxy-Authorization` and
    /// `Mcp-Session-Id` are not sent to the other origin (see
    /// `HttpConfig::allow_cross_origin_redirects`). Redirects within the
    /// origin are always followed as fetch does.
    pub fn allow_cross_origin_redirects(mut self, yes: bool) -> Self {
        self.config.http.allow_cross_origin_redirects = yes;
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

    /// Calls `f` for every server notification, as it is taken in (keep it
    /// short, and do not call the client from it; the client's
    /// `notifications()` stream is the other way to receive them).
    pub fn on_notification(
        mut self,
        f: impl Fn(&ServerNotification) + Send + Sync + 'static,
    ) -> Self {
        self.on_notification = Some(Arc::new(f));
        self
    }

    /// Calls `f` for every diagnostic: what the connection dropped or
    /// noted without failing (malformed lines, unknown response ids, skipped
    /// frames, a server without a GET stream…). They are logged with
    /// `tracing` too (notes at debug level, the rest at warn); the counters
    /// are the client's `stats()`.
    pub fn on_diagnostic(
        mut self,
        f: impl Fn(&mcpwire::connection::Diagnostic) + Send + Sync + 'static,
    ) -> Self {
        self.on_diagnostic = Some(Arc::new(f));
        self
    }

    /// Answers server requests of `kind` with `handler` and declares the
    /// capability that promises it (the other setters are this with a
    /// closure of the adapter's flavor).
    pub fn handler(mut self, kind: ServerRequestKind, handler: Handler) -> Self {
        kind.declare(&mut self.config.client.capabilities);
        self.handlers.set(kind, handler);
        self
    }
}

/// Declares what a typed handler of `kind` answers (core's
/// [`ServerRequestKind::declare_typed`]).
fn declare_typed<F>(
    mut o: ConnectOptions<F>,
    kind: ServerRequestKind,
    sampling_tools: bool,
) -> ConnectOptions<F> {
    kind.declare_typed(&mut o.config.client.capabilities, sampling_tools);
    o
}

fn to_value<T: serde::Serialize>(what: &str, v: &T) -> Result<Value, ErrorObject> {
    serde_json::to_value(v).map_err(|e| ErrorObject::internal(format!("{what}: {e}")))
}

/// `roots/list` answered from a function returning the roots.
fn roots_answer(roots: Vec<Root>) -> Result<Value, ErrorObject> {
    serde_json::to_value(ListRootsResult::new(roots))
        .map_err(|e| ErrorObject::internal(format!("roots: {e}")))
}

impl ConnectOptions<Async> {
    /// Answers `roots/list` with the roots `f` returns, and declares the
    /// `roots` capability (with `listChanged`: call the client's
    /// `roots_changed`).
    pub fn roots<Fun, Fut>(self, f: Fun) -> Self
    where
        Fun: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<Root>> + Send + 'static,
    {
        let f = Arc::new(f);
        let handler = Handler::Async(Arc::new(move |_params| {
            let f = f.clone();
            Box::pin(async move { roots_answer(f().await) })
        }));
        self.handler(ServerRequestKind::ListRoots, handler)
    }

    /// Answers `sampling/createMessage` (params and result as JSON) and
    /// declares `sampling`. Return `Err(ErrorObject::new(-1, "…"))` when the
    /// user declines.
    pub fn sampling<Fun, Fut>(self, f: Fun) -> Self
    where
        Fun: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        let handler = Handler::Async(Arc::new(move |p| Box::pin(f(p))));
        self.handler(ServerRequestKind::CreateMessage, handler)
    }

    /// Answers `elicitation/create` and declares `elicitation` with the
    /// `form` mode (declare `url` too with [`ConnectOptions::config`] if
    /// the handler supports it).
    pub fn elicitation<Fun, Fut>(self, f: Fun) -> Self
    where
        Fun: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        let handler = Handler::Async(Arc::new(move |p| Box::pin(f(p))));
        self.handler(ServerRequestKind::Elicit, handler)
    }
}

impl ConnectOptions<Async> {
    /// Answers `elicitation/create` with a typed handler (form and URL
    /// modes: [`ElicitRequest`]) and declares `elicitation` with both
    /// modes. A URL elicitation's `notifications/elicitation/complete`
    /// reaches the notification stream
    /// ([`ServerNotification::ElicitationComplete`](mcpwire::mcp::ServerNotification)).
    pub fn on_elicit<Fun, Fut>(self, f: Fun) -> Self
    where
        Fun: Fn(ElicitRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ElicitResult> + Send + 'static,
    {
        let f = Arc::new(f);
        let handler = Handler::Async(Arc::new(move |p| {
            let f = f.clone();
            Box::pin(async move {
                let request = ElicitRequest::from_params(p)?;
                to_value("elicitation result", &f(request).await)
            })
        }));
        declare_typed(
            self.handler(ServerRequestKind::Elicit, handler),
            ServerRequestKind::Elicit,
            false,
        )
    }

    /// Answers `sampling/createMessage` with a typed handler and declares
    /// `sampling`. Return `Err(ErrorObject::new(-1, "…"))` when the user
    /// declines.
    pub fn on_sampling<Fun, Fut>(self, f: Fun) -> Self
    where
        Fun: Fn(CreateMessageRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CreateMessageResult, ErrorObject>> + Send + 'static,
    {
        let f = Arc::new(f);
        let handler = Handler::Async(Arc::new(move |p| {
            let f = f.clone();
            Box::pin(async move {
                let request = CreateMessageRequest::from_params(p)?;
                to_value("sampling result", &f(request).await?)
            })
        }));
        self.handler(ServerRequestKind::CreateMessage, handler)
    }

    /// [`on_sampling`](Self::on_sampling) for a model that can call tools:
    /// also declares `sampling.tools`, so that the server may send `tools`
    /// and `toolChoice` and expect `tool_use` content back.
    pub fn on_sampling_with_tools<Fun, Fut>(self, f: Fun) -> Self
    where
        Fun: Fn(CreateMessageRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CreateMessageResult, ErrorObject>> + Send + 'static,
    {
        declare_typed(self.on_sampling(f), ServerRequestKind::CreateMessage, true)
    }
}

impl ConnectOptions<Blocking> {
    /// Answers `elicitation/create` with a typed handler (on a thread of
    /// its own) and declares `elicitation` with both modes.
    pub fn on_elicit(
        self,
        f: impl Fn(ElicitRequest) -> ElicitResult + Send + Sync + 'static,
    ) -> Self {
        let handler = Handler::Blocking(Arc::new(move |p| {
            to_value("elicitation result", &f(ElicitRequest::from_params(p)?))
        }));
        declare_typed(
            self.handler(ServerRequestKind::Elicit, handler),
            ServerRequestKind::Elicit,
            false,
        )
    }

    /// Answers `sampling/createMessage` with a typed handler (on a thread
    /// of its own) and declares `sampling`.
    pub fn on_sampling(
        self,
        f: impl Fn(CreateMessageRequest) -> Result<CreateMessageResult, ErrorObject>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        let handler = Handler::Blocking(Arc::new(move |p| {
            to_value(
                "sampling result",
                &f(CreateMessageRequest::from_params(p)?)?,
            )
        }));
        self.handler(ServerRequestKind::CreateMessage, handler)
    }

    /// [`on_sampling`](Self::on_sampling) that also declares
    /// `sampling.tools`.
    pub fn on_sampling_with_tools(
        self,
        f: impl Fn(CreateMessageRequest) -> Result<CreateMessageResult, ErrorObject>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        declare_typed(self.on_sampling(f), ServerRequestKind::CreateMessage, true)
    }
}

impl ConnectOptions<Blocking> {
    /// Answers `roots/list` with the roots `f` returns, and declares the
    /// `roots` capability (with `listChanged`: call the client's
    /// `roots_changed`).
    pub fn roots(self, f: impl Fn() -> Vec<Root> + Send + Sync + 'static) -> Self {
        let handler = Handler::Blocking(Arc::new(move |_params| roots_answer(f())));
        self.handler(ServerRequestKind::ListRoots, handler)
    }

    /// Answers `sampling/createMessage` (params and result as JSON, on a
    /// thread of its own) and declares `sampling`. Return
    /// `Err(ErrorObject::new(-1, "…"))` when the user declines.
    pub fn sampling(
        self,
        f: impl Fn(Value) -> Result<Value, ErrorObject> + Send + Sync + 'static,
    ) -> Self {
        self.handler(
            ServerRequestKind::CreateMessage,
            Handler::Blocking(Arc::new(f)),
        )
    }

    /// Answers `elicitation/create` (on a thread of its own) and declares
    /// `elicitation` with the `form` mode.
    pub fn elicitation(
        self,
        f: impl Fn(Value) -> Result<Value, ErrorObject> + Send + Sync + 'static,
    ) -> Self {
        self.handler(ServerRequestKind::Elicit, Handler::Blocking(Arc::new(f)))
    }
}

/// Options of one call.
#[derive(Clone, Default)]
pub struct CallOptions {
    pub(crate) rpc: RequestOptions,
    pub(crate) progress: Option<ProgressFn>,
    pub(crate) cancel: Option<CancelToken>,
    /// W3C trace context for the request's `_meta` (an invalid one fails
    /// the call before anything is sent). Boxed: most calls have none, and
    /// the options are moved down every call's path (small, they move in
    /// registers instead of a `memcpy` call).
    pub(crate) trace: Option<Box<Result<TraceContext, TraceError>>>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("rpc", &self.rpc)
            .field("progress", &self.progress.is_some())
            .field("cancel", &self.cancel)
            .field("trace", &self.trace)
            .finish()
    }
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
    /// `notifications/progress` (keep it short; see [`ProgressFn`]).
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

    /// Asks the server even when the client holds a fresh result for the
    /// same request (a list or `resources/read` the server said may be
    /// cached, 2026-07-28 `ttlMs`); the answer refreshes the cache.
    pub fn bypass_cache(mut self) -> Self {
        self.rpc = self.rpc.bypass_cache(true);
        self
    }

    /// The time a task created by this call is kept on the server
    /// (2025-11-25 `task.ttl`; a 2026-07-28 server chooses its own).
    pub fn task_ttl(mut self, ttl: Duration) -> Self {
        self.rpc = self.rpc.task_ttl(ttl);
        self
    }

    /// A `tools/call` that becomes a task completes with the task instead
    /// of following it (for `start_tool_task`).
    #[doc(hidden)]
    pub fn detach_task(mut self) -> Self {
        self.rpc = self.rpc.detach_task(true);
        self
    }

    /// Relays a 2026-07-28 request of a client of the caller's own (a
    /// bridge): an `input_required` result is the call's result, for the
    /// caller's client to answer with a retry (`inputResponses`,
    /// `requestState`) relayed in turn, and the client capabilities, info
    /// and log level in the params' `_meta` are the relayed client's (the
    /// connection's fill what is missing), and a task the call becomes is
    /// its result (the relayed client follows it). No effect on a 2025
    /// server.
    pub fn relay(mut self) -> Self {
        self.rpc = self.rpc.relay(true);
        self
    }

    /// Cancels the call when `token` is cancelled, from any thread or task
    /// (the server is told).
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Continues the caller's trace: `traceparent` (and `tracestate`,
    /// `baggage` if set on the context) go into the request's `_meta`
    /// (SEP-414), so that a server that traces joins the caller's trace.
    pub fn trace(mut self, context: TraceContext) -> Self {
        self.trace = Some(Box::new(Ok(context)));
        self
    }

    /// [`CallOptions::trace`] from a `traceparent` value (W3C Trace
    /// Context) and an optional `tracestate`: a malformed one fails the
    /// call with [`Error::InvalidOption`](crate::Error::InvalidOption)
    /// before anything is sent.
    pub fn traceparent(mut self, traceparent: &str, tracestate: Option<&str>) -> Self {
        let context = TraceContext::new(traceparent).and_then(|t| match tracestate {
            Some(s) => t.with_state(s),
            None => Ok(t),
        });
        self.trace = Some(Box::new(context));
        self
    }

    /// `params` as this call sends them: with the trace context in
    /// `_meta` when one is set (for executors).
    #[doc(hidden)]
    pub fn stamp(
        &self,
        params: Option<Box<RawValue>>,
    ) -> Result<Option<Box<RawValue>>, crate::Error> {
        match self.trace.as_deref() {
            None => Ok(params),
            Some(Err(e)) => Err(crate::Error::InvalidOption {
                option: "traceparent",
                problem: e.to_string(),
            }),
            Some(Ok(t)) => match t.stamp(params.as_deref()) {
                Ok(p) => Ok(Some(p)),
                Err(e) => Err(crate::Error::InvalidOption {
                    option: "traceparent",
                    problem: e.to_string(),
                }),
            },
        }
    }

    /// [`stamp`](Self::stamp) for [`Params`] (untouched without a trace).
    #[doc(hidden)]
    pub fn stamp_params(&self, params: Option<Params>) -> Result<Option<Params>, crate::Error> {
        if self.trace.is_none() {
            return Ok(params);
        }
        let raw =
            params
                .map(|p| p.to_raw())
                .transpose()
                .map_err(|e| crate::Error::InvalidOption {
                    option: "traceparent",
                    problem: format!("the params are not valid JSON: {e}"),
                })?;
        let raw = self.stamp(raw)?;
        Ok(raw.map(Params::from))
    }

    /// The request options, the progress observer and the token (for
    /// executors).
    #[doc(hidden)]
    pub fn into_parts(self) -> (RequestOptions, Option<ProgressFn>, Option<CancelToken>) {
        (self.rpc, self.progress, self.cancel)
    }
}

/// The reason a call cancelled by its token gives.
#[doc(hidden)]
pub const CANCELLED_BY_TOKEN: &str = "cancelled by the client";

/// A cancellation signal shared between threads and tasks:
/// [`CancelToken::cancel`] ends every call holding it as cancelled, and the
/// server is told.
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<CancelInner>,
}

type Hook = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct CancelInner {
    cancelled: AtomicBool,
    event: Event,
    /// The calls in flight holding this token, by registration key.
    hooks: Mutex<Vec<(u64, Hook)>>,
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    /// A fresh token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every call holding this token, now and later.
    pub fn cancel(&self) {
        let hooks = {
            let mut hooks = lock(&self.inner.hooks);
            self.inner.cancelled.store(true, Ordering::SeqCst);
            std::mem::take(&mut *hooks)
        };
        for (_, hook) in hooks {
            hook();
        }
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

    /// Runs `hook` when the token is cancelled (at once if it is); the key
    /// returned forgets it ([`CancelToken::forget`]).
    #[doc(hidden)]
    pub fn on_cancel(&self, hook: impl FnOnce() + Send + 'static) -> u64 {
        static KEYS: AtomicU64 = AtomicU64::new(0);
        let key = KEYS.fetch_add(1, Ordering::Relaxed);
        let mut hooks = lock(&self.inner.hooks);
        if self.is_cancelled() {
            drop(hooks);
            hook();
        } else {
            hooks.push((key, Box::new(hook)));
        }
        key
    }

    /// Forgets the hook registered under `key` (its call ended).
    #[doc(hidden)]
    pub fn forget(&self, key: u64) {
        lock(&self.inner.hooks).retain(|(k, _)| *k != key);
    }
}
