//! The public client: typed MCP methods over a driver task.

use std::future::poll_fn;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_channel::Sender;
use mcpwire::config::ServerConfig;
use mcpwire::connection::{Connection, SpecError, TransportSpec};

use crate::setup::{setup, Setup};
use mcpwire::mcp::types::{
    CallToolResult, CompleteResult, GetPromptResult, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel, Prompt,
    ReadResourceResult, Resource, ResourceTemplate, Tool,
};
use mcpwire::mcp::{Paginator, ServerNotification};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::driver::{oneshot, CallOrRequest, Command, Driver, Outcome, Shared, Urgent};
use crate::options::{CallOptions, ConnectOptions};
use crate::runtime::{timeout, Runtime};
use crate::sync::{Broadcast, Subscriber};
use crate::Error;

/// Most pages a list call follows before giving up.
const MAX_PAGES: usize = 10_000;

/// An MCP client connected to one server, on runtime `R` (the adapters
/// name it: `mcpwire_tokio::Client` is `Client<Tokio>`). Cheap to clone;
/// every clone talks to the same connection. The connection closes
/// gracefully when [`Client::close`] is called or the last clone is
/// dropped.
pub struct Client<R: Runtime> {
    inner: Arc<Inner>,
    runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> Clone for Client<R> {
    fn clone(&self) -> Self {
        Client {
            inner: Arc::clone(&self.inner),
            runtime: PhantomData,
        }
    }
}

struct Inner {
    commands: Sender<Command>,
    urgent: Sender<Urgent>,
    shared: Arc<Shared>,
    tickets: AtomicU64,
}

impl<R: Runtime> std::fmt::Debug for Client<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field(
                "server",
                &self.inner.shared.server.get().map(|s| &s.server_info.name),
            )
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Client<R> {
    /// Connects with default options: spawns the process (stdio) or opens
    /// the HTTP session, and completes the `initialize` handshake.
    pub async fn connect(server: ServerConfig) -> Result<Self, Error> {
        Self::connect_with(server, ConnectOptions::new()).await
    }

    /// Connects with `options` (handlers, timeouts, limits).
    pub async fn connect_with(
        server: ServerConfig,
        mut options: ConnectOptions,
    ) -> Result<Self, Error> {
        options.default_client_info(R::NAME, R::VERSION);
        let spec = TransportSpec::from_server(&server)?;
        let child = match spec {
            TransportSpec::Stdio => {
                let child = R::spawn_child(&server).map_err(|source| Error::Spawn {
                    command: server.command.clone().unwrap_or_default(),
                    source,
                })?;
                Some(child)
            }
            _ => None,
        };
        let now = Instant::now();
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
        let conn = Connection::for_server(&server, config, now)
            .map_err(|e: SpecError| Error::Config(e))?;
        let (cmd_tx, cmd_rx) = async_channel::bounded(256);
        let (urgent_tx, urgent_rx) = async_channel::unbounded();
        let (ready_tx, ready_rx) = oneshot();
        let shared = Arc::new(Shared {
            server: Default::default(),
            transport: Default::default(),
            closed: Default::default(),
            notifications: Broadcast::new(),
        });
        let driver = Driver::<R>::new(
            conn,
            options,
            remember,
            shared.clone(),
            cmd_rx,
            urgent_tx.clone(),
            urgent_rx,
            child,
            ready_tx,
        );
        R::spawn(Box::pin(driver.run())).map_err(Error::Connect)?;
        let client = Client {
            inner: Arc::new(Inner {
                commands: cmd_tx,
                urgent: urgent_tx,
                shared,
                tickets: AtomicU64::new(0),
            }),
            runtime: PhantomData,
        };
        match timeout::<R, _>(connect_timeout, ready_rx.recv()).await {
            Some(Ok(Ok(()))) => Ok(client),
            Some(Ok(Err(reason))) => Err(Error::Connect(reason)),
            Some(Err(_)) => Err(Error::Connect("driver stopped".into())),
            None => {
                // Dropping `client` closes the connection (and the child).
                Err(Error::Connect(format!(
                    "no initialize result within {}ms",
                    connect_timeout.as_millis()
                )))
            }
        }
    }

    /// The error for a call made after the driver stopped: why the
    /// connection closed, when known.
    fn gone(&self) -> Error {
        match self.inner.shared.closed.get() {
            Some(reason) => Error::Call(mcpwire::connection::CallError::Closed(reason.clone())),
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
    /// updates…) from now on. Each call gives an independent stream; a
    /// stream that falls more than 1024 behind skips the oldest.
    pub fn notifications(&self) -> Notifications {
        Notifications {
            rx: self.inner.shared.notifications.subscribe(),
        }
    }

    // ----- generic --------------------------------------------------------

    /// Sends a request and returns its raw result.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        options: CallOptions,
    ) -> Result<Box<RawValue>, Error> {
        let ticket = self.inner.tickets.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot();
        let cmd = Command::Request {
            ticket,
            method: method.to_string(),
            params,
            options: options.rpc,
            progress: options.progress.clone(),
            reply,
        };
        self.inner
            .commands
            .send(cmd)
            .await
            .map_err(|_| self.gone())?;
        // From here on, dropping this future cancels the request.
        let mut guard = CancelOnDrop {
            urgent: &self.inner.urgent,
            ticket,
            armed: true,
        };
        let outcome: Outcome = match &options.cancel {
            Some(token) => {
                let answer = futures_lite::future::or(async { Some(rx.recv().await) }, async {
                    token.cancelled().await;
                    None
                });
                match answer.await {
                    Some(r) => r.map_err(|_| self.gone())?,
                    None => {
                        let reason = "cancelled by the client";
                        let _ = self.inner.urgent.try_send(Urgent::Cancel {
                            ticket,
                            reason: reason.into(),
                        });
                        guard.armed = false;
                        // The driver completes it as cancelled.
                        return Err(Error::Request(mcpwire::rpc::RequestError::Cancelled {
                            reason: reason.into(),
                        }));
                    }
                }
            }
            None => rx.recv().await.map_err(|_| self.gone())?,
        };
        guard.armed = false;
        outcome.map_err(|e| match e {
            CallOrRequest::Call(e) => Error::Call(e),
            CallOrRequest::Request(e) => Error::Request(e),
        })
    }

    /// Sends a request with serializable params and parses its result.
    pub async fn request<P: Serialize + ?Sized, T: DeserializeOwned>(
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
        let raw = self.request_raw(method, params, options).await?;
        serde_json::from_str(raw.get()).map_err(|source| Error::Decode {
            method: method.to_string(),
            source,
        })
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        let params = params.map(|p| serde_json::value::to_raw_value(&p).expect("JSON value"));
        let (reply, rx) = oneshot();
        self.inner
            .commands
            .send(Command::Notify {
                method: method.to_string(),
                params,
                reply,
            })
            .await
            .map_err(|_| self.gone())?;
        rx.recv()
            .await
            .map_err(|_| self.gone())?
            .map_err(Error::Call)
    }

    // ----- typed methods -------------------------------------------------

    /// `ping`.
    pub async fn ping(&self) -> Result<(), Error> {
        let _: Value = self
            .request::<(), _>("ping", None, CallOptions::new())
            .await?;
        Ok(())
    }

    async fn list_all<T, F>(&self, method: &str, mut take: F) -> Result<Vec<T>, Error>
    where
        F: FnMut(Value) -> Result<(Vec<T>, Option<String>), serde_json::Error>,
    {
        let mut pages = Paginator::new(MAX_PAGES);
        let mut all = Vec::new();
        loop {
            let raw = self
                .request_raw(method, pages.params(), CallOptions::new())
                .await?;
            let value: Value = serde_json::from_str(raw.get()).map_err(|source| Error::Decode {
                method: method.to_string(),
                source,
            })?;
            let (items, next) = take(value).map_err(|source| Error::Decode {
                method: method.to_string(),
                source,
            })?;
            all.extend(items);
            if !pages.advance(next)? {
                return Ok(all);
            }
        }
    }

    /// Every tool (follows `nextCursor` to the end).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        self.list_all("tools/list", |v| {
            let page: ListToolsResult = serde_json::from_value(v)?;
            Ok((page.tools, page.next_cursor))
        })
        .await
    }

    /// Every resource.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, Error> {
        self.list_all("resources/list", |v| {
            let page: ListResourcesResult = serde_json::from_value(v)?;
            Ok((page.resources, page.next_cursor))
        })
        .await
    }

    /// Every resource template.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, Error> {
        self.list_all("resources/templates/list", |v| {
            let page: ListResourceTemplatesResult = serde_json::from_value(v)?;
            Ok((page.resource_templates, page.next_cursor))
        })
        .await
    }

    /// Every prompt.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, Error> {
        self.list_all("prompts/list", |v| {
            let page: ListPromptsResult = serde_json::from_value(v)?;
            Ok((page.prompts, page.next_cursor))
        })
        .await
    }

    /// `tools/call` with JSON arguments.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call_tool_with(name, arguments, CallOptions::new())
            .await
    }

    /// `tools/call` with options (timeout, progress, cancellation).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        #[derive(Serialize)]
        struct Params<'a> {
            name: &'a str,
            arguments: &'a Value,
        }
        let params = Params {
            name,
            arguments: &arguments,
        };
        self.request("tools/call", Some(&params), options).await
    }

    /// `resources/read`.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
        self.request(
            "resources/read",
            Some(&serde_json::json!({ "uri": uri })),
            CallOptions::new(),
        )
        .await
    }

    /// `resources/subscribe`.
    pub async fn subscribe(&self, uri: &str) -> Result<(), Error> {
        let _: Value = self
            .request(
                "resources/subscribe",
                Some(&serde_json::json!({ "uri": uri })),
                CallOptions::new(),
            )
            .await?;
        Ok(())
    }

    /// `resources/unsubscribe`.
    pub async fn unsubscribe(&self, uri: &str) -> Result<(), Error> {
        let _: Value = self
            .request(
                "resources/unsubscribe",
                Some(&serde_json::json!({ "uri": uri })),
                CallOptions::new(),
            )
            .await?;
        Ok(())
    }

    /// `prompts/get` with string arguments.
    pub async fn get_prompt(&self, name: &str, arguments: Value) -> Result<GetPromptResult, Error> {
        let params = serde_json::json!({ "name": name, "arguments": arguments });
        self.request("prompts/get", Some(&params), CallOptions::new())
            .await
    }

    /// `completion/complete` (`reference` is `{"type":"ref/prompt","name":…}`
    /// or `{"type":"ref/resource","uri":…}`).
    pub async fn complete(
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
            .await
    }

    /// `logging/setLevel`.
    pub async fn set_logging_level(&self, level: LoggingLevel) -> Result<(), Error> {
        let _: Value = self
            .request(
                "logging/setLevel",
                Some(&serde_json::json!({ "level": level })),
                CallOptions::new(),
            )
            .await?;
        Ok(())
    }

    /// Tells the server the roots changed (`notifications/roots/list_changed`).
    pub async fn roots_changed(&self) -> Result<(), Error> {
        self.notify("notifications/roots/list_changed", None).await
    }

    /// Closes gracefully: pending calls fail with "connection closed", the
    /// server is asked to stop (stdio: stdin closed, then SIGTERM, then
    /// SIGKILL after the grace periods; HTTP: session DELETE), and this
    /// returns once it is done.
    pub async fn close(self) -> Result<(), Error> {
        let (reply, rx) = oneshot();
        if self
            .inner
            .commands
            .send(Command::Close { reply })
            .await
            .is_err()
        {
            return Ok(()); // already closed
        }
        let _ = rx.recv().await;
        Ok(())
    }

    /// Like [`Client::close`] with a bound on the wait.
    pub async fn close_timeout(self, limit: Duration) -> Result<(), Error> {
        let _ = timeout::<R, _>(limit, self.close()).await;
        Ok(())
    }
}

/// Cancels the request when the call's future is dropped before it ended.
struct CancelOnDrop<'a> {
    urgent: &'a Sender<Urgent>,
    ticket: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.urgent.try_send(Urgent::Cancel {
                ticket: self.ticket,
                reason: "request dropped by the client".into(),
            });
        }
    }
}

/// A stream of server notifications ([`Client::notifications`]).
pub struct Notifications {
    rx: Arc<Subscriber<ServerNotification>>,
}

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifications").finish_non_exhaustive()
    }
}

impl Notifications {
    /// The next notification; `None` once the connection is closed.
    pub async fn recv(&mut self) -> Option<ServerNotification> {
        poll_fn(|cx| self.rx.poll_recv(cx)).await
    }
}

impl futures_core::Stream for Notifications {
    type Item = ServerNotification;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}
