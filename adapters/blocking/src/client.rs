//! The public client: typed MCP methods over the owner thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire::config::ServerConfig;
use mcpwire::connection::{CallError, Connection, TransportSpec};
use mcpwire::mcp::types::{
    CallToolResult, CompleteResult, GetPromptResult, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel, Prompt,
    ReadResourceResult, Resource, ResourceTemplate, Tool,
};
use mcpwire::mcp::{Paginator, ServerNotification};
use mcpwire_adapter::setup::{setup, Setup};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::options::{CallOptions, ConnectOptions};
use crate::owner::{CallOrRequest, Event, Owner, Shared, Subscriber};
use crate::Error;

/// Most pages a list call follows before giving up.
const MAX_PAGES: usize = 10_000;

/// Call tickets, unique in the process (cancel tokens name calls by them).
static TICKETS: AtomicU64 = AtomicU64::new(0);

/// An MCP client connected to one server. Cheap to clone, `Send` and
/// `Sync`: every clone, on any thread, talks to the same connection, and
/// calls from several threads run concurrently. The connection closes
/// gracefully when [`Client::close`] is called or the last clone is dropped
/// (in the background, on the connection's own thread, which also reaps
/// the server process).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    tx: Sender<Event>,
    shared: Arc<Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Never blocks: the owner closes gracefully on its own thread.
        let _ = self.tx.send(Event::Dropped);
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field(
                "server",
                &self.inner.shared.server.get().map(|s| &s.server_info.name),
            )
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects with default options: spawns the process (stdio) or opens
    /// the HTTP session, and completes the `initialize` handshake.
    pub fn connect(server: ServerConfig) -> Result<Self, Error> {
        Self::connect_with(server, ConnectOptions::new())
    }

    /// Connects with `options` (handlers, timeouts, limits).
    pub fn connect_with(server: ServerConfig, mut options: ConnectOptions) -> Result<Self, Error> {
        options.default_client_info();
        let spec = TransportSpec::from_server(&server)?;
        let Setup {
            config,
            connect_timeout,
            remember,
        } = setup(
            &server,
            &options.config,
            options.auth.as_ref(),
            !options.forget_era,
            options.connect_timeout,
        );
        options.remember = remember;
        let conn = Connection::for_server(&server, config, Instant::now())?;
        let child = match spec {
            TransportSpec::Stdio => Some(crate::process::spawn_child(&server).map_err(
                |source| Error::Spawn {
                    command: server.command.clone().unwrap_or_default(),
                    source,
                },
            )?),
            _ => None,
        };
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let owner = Owner::new(
            conn,
            options,
            shared.clone(),
            tx.clone(),
            rx,
            child,
            ready_tx,
        );
        std::thread::Builder::new()
            .name("mcpwire-owner".into())
            .spawn(move || owner.run())
            .map_err(|e| Error::Connect(format!("cannot start the connection thread: {e}")))?;
        let client = Client {
            inner: Arc::new(Inner { tx, shared }),
        };
        match ready_rx.recv_timeout(connect_timeout) {
            Ok(Ok(())) => Ok(client),
            Ok(Err(reason)) => Err(Error::Connect(reason)),
            Err(RecvTimeoutError::Disconnected) => {
                Err(Error::Connect("connection thread stopped".into()))
            }
            // Dropping `client` closes the connection (and the child).
            Err(RecvTimeoutError::Timeout) => Err(Error::Connect(format!(
                "no initialize result within {}ms",
                connect_timeout.as_millis()
            ))),
        }
    }

    /// The error for a call made after the connection thread stopped: why
    /// the connection closed, when known.
    fn gone(&self) -> Error {
        match self.inner.shared.closed.get() {
            Some(reason) => Error::Call(CallError::Closed(reason.clone())),
            None => Error::ClientClosed,
        }
    }

    /// Why the connection closed, if it has (server exited, closed by
    /// [`Client::close`], transport failure).
    pub fn closed_reason(&self) -> Option<&str> {
        self.inner.shared.closed.get().map(String::as_str)
    }

    /// The server's `initialize` result.
    pub fn server(&self) -> &InitializeResult {
        self.inner
            .shared
            .server
            .get()
            .expect("set before connect returns")
    }

    /// The negotiated protocol version.
    pub fn protocol_version(&self) -> &str {
        &self.server().protocol_version
    }

    /// The transport in use: `stdio`, `streamable-http` or `sse`.
    pub fn transport(&self) -> &'static str {
        self.inner
            .shared
            .transport
            .get()
            .copied()
            .unwrap_or("stdio")
    }

    /// Server notifications (log messages, list changes, resource
    /// updates…) from now on, as a blocking iterator that ends when the
    /// connection closes. Each call gives an independent one; one that
    /// falls more than 1024 behind skips the oldest. (For a callback, see
    /// [`ConnectOptions::on_notification`].)
    pub fn notifications(&self) -> Notifications {
        Notifications {
            sub: self.inner.shared.notifications.subscribe(),
        }
    }

    // ----- generic --------------------------------------------------------

    /// Sends a request and returns its raw result. Blocks until it
    /// completes: result, error, timeout, cancellation or close.
    pub fn request_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        options: CallOptions,
    ) -> Result<Box<RawValue>, Error> {
        let ticket = TICKETS.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = mpsc::channel();
        self.inner
            .tx
            .send(Event::Request {
                ticket,
                method: method.to_string(),
                params,
                options: options.rpc,
                progress: options.progress.clone(),
                reply,
            })
            .map_err(|_| self.gone())?;
        if let Some(token) = &options.cancel {
            token.register(&self.inner.tx, ticket);
        }
        let outcome = rx.recv();
        if let Some(token) = &options.cancel {
            token.unregister(ticket);
        }
        match outcome.map_err(|_| self.gone())? {
            Ok(raw) => Ok(raw),
            Err(CallOrRequest::Call(e)) => Err(Error::Call(e)),
            Err(CallOrRequest::Request(e)) => Err(Error::Request(e)),
        }
    }

    /// Sends a request with serializable params and parses its result.
    pub fn request<P: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: &str,
        params: Option<&P>,
        options: CallOptions,
    ) -> Result<T, Error> {
        let params = match params {
            Some(p) => {
                Some(
                    serde_json::value::to_raw_value(p).map_err(|source| Error::Decode {
                        method: method.to_string(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let raw = self.request_raw(method, params, options)?;
        serde_json::from_str(raw.get()).map_err(|source| Error::Decode {
            method: method.to_string(),
            source,
        })
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        let params = match params {
            Some(p) => {
                Some(
                    serde_json::value::to_raw_value(&p).map_err(|source| Error::Decode {
                        method: method.to_string(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let (reply, rx) = mpsc::channel();
        self.inner
            .tx
            .send(Event::Notify {
                method: method.to_string(),
                params,
                reply,
            })
            .map_err(|_| self.gone())?;
        rx.recv().map_err(|_| self.gone())?.map_err(Error::Call)
    }

    // ----- typed methods -------------------------------------------------

    /// `ping`.
    pub fn ping(&self) -> Result<(), Error> {
        let _: Value = self.request::<(), _>("ping", None, CallOptions::new())?;
        Ok(())
    }

    fn list_all<T>(
        &self,
        method: &str,
        take: impl Fn(Value) -> Result<(Vec<T>, Option<String>), serde_json::Error>,
    ) -> Result<Vec<T>, Error> {
        let mut pages = Paginator::new(MAX_PAGES);
        let mut all = Vec::new();
        loop {
            let raw = self.request_raw(method, pages.params(), CallOptions::new())?;
            let decode = |source| Error::Decode {
                method: method.to_string(),
                source,
            };
            let value: Value = serde_json::from_str(raw.get()).map_err(decode)?;
            let (items, next) = take(value).map_err(decode)?;
            all.extend(items);
            if !pages.advance(next)? {
                return Ok(all);
            }
        }
    }

    /// Every tool (follows `nextCursor` to the end).
    pub fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        self.list_all("tools/list", |v| {
            let page: ListToolsResult = serde_json::from_value(v)?;
            Ok((page.tools, page.next_cursor))
        })
    }

    /// Every resource.
    pub fn list_resources(&self) -> Result<Vec<Resource>, Error> {
        self.list_all("resources/list", |v| {
            let page: ListResourcesResult = serde_json::from_value(v)?;
            Ok((page.resources, page.next_cursor))
        })
    }

    /// Every resource template.
    pub fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, Error> {
        self.list_all("resources/templates/list", |v| {
            let page: ListResourceTemplatesResult = serde_json::from_value(v)?;
            Ok((page.resource_templates, page.next_cursor))
        })
    }

    /// Every prompt.
    pub fn list_prompts(&self) -> Result<Vec<Prompt>, Error> {
        self.list_all("prompts/list", |v| {
            let page: ListPromptsResult = serde_json::from_value(v)?;
            Ok((page.prompts, page.next_cursor))
        })
    }

    /// `tools/call` with JSON arguments.
    pub fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call_tool_with(name, arguments, CallOptions::new())
    }

    /// `tools/call` with options (timeout, progress, cancellation).
    pub fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        let params = serde_json::json!({ "name": name, "arguments": arguments });
        self.request("tools/call", Some(&params), options)
    }

    /// `resources/read`.
    pub fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
        self.request(
            "resources/read",
            Some(&serde_json::json!({ "uri": uri })),
            CallOptions::new(),
        )
    }

    /// `resources/subscribe`.
    pub fn subscribe(&self, uri: &str) -> Result<(), Error> {
        let _: Value = self.request(
            "resources/subscribe",
            Some(&serde_json::json!({ "uri": uri })),
            CallOptions::new(),
        )?;
        Ok(())
    }

    /// `resources/unsubscribe`.
    pub fn unsubscribe(&self, uri: &str) -> Result<(), Error> {
        let _: Value = self.request(
            "resources/unsubscribe",
            Some(&serde_json::json!({ "uri": uri })),
            CallOptions::new(),
        )?;
        Ok(())
    }

    /// `prompts/get` with string arguments.
    pub fn get_prompt(&self, name: &str, arguments: Value) -> Result<GetPromptResult, Error> {
        let params = serde_json::json!({ "name": name, "arguments": arguments });
        self.request("prompts/get", Some(&params), CallOptions::new())
    }

    /// `completion/complete` (`reference` is `{"type":"ref/prompt","name":…}`
    /// or `{"type":"ref/resource","uri":…}`).
    pub fn complete(
        &self,
        reference: Value,
        argument: &str,
        value: &str,
    ) -> Result<CompleteResult, Error> {
        let params = serde_json::json!({
            "ref": reference,
            "argument": { "name": argument, "value": value },
        });
        self.request("completion/complete", Some(&params), CallOptions::new())
    }

    /// `logging/setLevel`.
    pub fn set_logging_level(&self, level: LoggingLevel) -> Result<(), Error> {
        let _: Value = self.request(
            "logging/setLevel",
            Some(&serde_json::json!({ "level": level })),
            CallOptions::new(),
        )?;
        Ok(())
    }

    /// Tells the server the roots changed (`notifications/roots/list_changed`).
    pub fn roots_changed(&self) -> Result<(), Error> {
        self.notify("notifications/roots/list_changed", None)
    }

    /// Closes gracefully: pending calls fail with "connection closed", the
    /// server is asked to stop (stdio: stdin closed, then SIGTERM, then
    /// SIGKILL after the grace periods; HTTP: session DELETE), and this
    /// returns once it is done (the process reaped). Later calls on any
    /// clone fail fast.
    pub fn close(&self) -> Result<(), Error> {
        self.close_within(None);
        Ok(())
    }

    /// Like [`Client::close`], waiting at most `limit` (the close goes on
    /// in the background).
    pub fn close_timeout(&self, limit: Duration) -> Result<(), Error> {
        self.close_within(Some(limit));
        Ok(())
    }

    fn close_within(&self, limit: Option<Duration>) {
        let (reply, rx) = mpsc::channel();
        if self.inner.tx.send(Event::Close { reply }).is_err() {
            return; // already closed
        }
        match limit {
            Some(limit) => {
                let _ = rx.recv_timeout(limit);
            }
            None => {
                let _ = rx.recv();
            }
        }
    }
}

/// Server notifications ([`Client::notifications`]): a blocking iterator
/// that ends when the connection closes.
pub struct Notifications {
    sub: Arc<Subscriber>,
}

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifications").finish_non_exhaustive()
    }
}

impl Notifications {
    /// The next notification, waiting at most `timeout`:
    /// `Err(Timeout)` if none came, `Err(Disconnected)` once the
    /// connection is closed and every notification was taken.
    pub fn recv_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<ServerNotification, RecvTimeoutError> {
        match self.sub.recv(Some(Instant::now() + timeout)) {
            Ok(Some(n)) => Ok(n),
            Ok(None) => Err(RecvTimeoutError::Disconnected),
            Err(()) => Err(RecvTimeoutError::Timeout),
        }
    }

    /// The next notification if one is waiting.
    pub fn try_recv(&mut self) -> Option<ServerNotification> {
        self.sub.recv(Some(Instant::now())).ok().flatten()
    }
}

impl Iterator for Notifications {
    type Item = ServerNotification;

    /// Blocks until the next notification; `None` once the connection is
    /// closed.
    fn next(&mut self) -> Option<ServerNotification> {
        self.sub.recv(None).ok().flatten()
    }
}
