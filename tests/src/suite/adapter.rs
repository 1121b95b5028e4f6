//! What a case of the suite needs from an adapter: [`Adapter`], and its
//! implementation for the async clients (`mcpwire_adapter::Client<R>`, on
//! any [`Runtime`]).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use futures_lite::FutureExt;
use mcpwire_adapter::options::{Async, ConnectOptions};
use mcpwire_adapter::types::{
    CallToolResult, GetPromptResult, InitializeResult, ReadResourceResult, Task, TaskStarted, Tool,
};
use mcpwire_adapter::{
    CallOptions, Client, Error, Notifications, Runtime, ServerConfig, ServerNotification,
};
use serde_json::Value;

/// A client of one adapter, as the cases drive it: connecting, the client
/// methods the cases call (as futures), the adapter's notion of a task
/// and a timer, and the behaviours that differ by nature between
/// adapters.
///
/// The async clients are it directly; `mcpwire_blocking::Client` runs
/// each blocking call on a thread of its own and awaits its answer (with
/// the `blocking` feature), so that one async case body drives every
/// adapter.
pub trait Adapter: Clone + std::fmt::Debug + Send + Sync + Sized + 'static {
    /// The flavor of the adapter's [`ConnectOptions`] (`Async` or
    /// `Blocking`); the cases set handlers with the flavor-neutral
    /// [`ConnectOptions::handler`].
    type Flavor: 'static;

    /// Whether dropping a call's future cancels the call (the server is
    /// told): the async clients. The blocking client's calls end early
    /// only by their timeout or a [`CancelToken`](mcpwire_adapter::CancelToken)
    /// cancelled from another thread.
    const CANCELS_ON_DROP: bool;

    /// Whether a plain `http` URL through a proxy goes in a `CONNECT`
    /// tunnel (the blocking client: ureq tunnels every proxied URL)
    /// rather than to the proxy in absolute form (the exchange runner of
    /// the async clients).
    const TUNNELS_PLAIN_HTTP: bool;

    /// `connect`.
    fn connect(server: ServerConfig) -> impl Future<Output = Result<Self, Error>> + Send;

    /// `connect_with`.
    fn connect_with(
        server: ServerConfig,
        options: ConnectOptions<Self::Flavor>,
    ) -> impl Future<Output = Result<Self, Error>> + Send;

    /// `ping`.
    fn ping(&self) -> impl Future<Output = Result<(), Error>> + Send;

    /// `list_tools` (every page).
    fn list_tools(&self) -> impl Future<Output = Result<Vec<Tool>, Error>> + Send;

    /// `call_tool`.
    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send;

    /// `call_tool_with`.
    fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send;

    /// `read_resource`.
    fn read_resource(
        &self,
        uri: &str,
    ) -> impl Future<Output = Result<ReadResourceResult, Error>> + Send;

    /// `start_tool_task`.
    fn start_tool_task(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> impl Future<Output = Result<TaskStarted, Error>> + Send;

    /// `get_task`.
    fn get_task(&self, task_id: &str) -> impl Future<Output = Result<Task, Error>> + Send;

    /// `task_result`.
    fn task_result(
        &self,
        task_id: &str,
        options: CallOptions,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send;

    /// `cancel_task`.
    fn cancel_task(&self, task_id: &str) -> impl Future<Output = Result<(), Error>> + Send;

    /// `list_tasks`.
    fn list_tasks(&self) -> impl Future<Output = Result<Vec<Task>, Error>> + Send;

    /// `get_prompt`.
    fn get_prompt(
        &self,
        name: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<GetPromptResult, Error>> + Send;

    /// `close`, through a clone for the async clients (theirs takes the
    /// client), so that the case can look at the closed client.
    fn close(&self) -> impl Future<Output = Result<(), Error>> + Send;

    /// `server`.
    fn server(&self) -> &InitializeResult;

    /// `protocol_version`.
    fn protocol_version(&self) -> &str;

    /// `transport`.
    fn transport(&self) -> &'static str;

    /// `closed_reason`.
    fn closed_reason(&self) -> Option<&str>;

    /// `stats`.
    fn stats(&self) -> mcpwire_adapter::Stats;

    /// `notifications`.
    fn notifications(&self) -> Notifications;

    /// The next notification of `notes` within `within`, the adapter's way:
    /// `recv().await` under a timer for the async clients,
    /// `recv_timeout` (blocking the case's own thread) for the blocking one.
    fn recv_timeout(
        notes: &mut Notifications,
        within: Duration,
    ) -> impl Future<Output = Result<ServerNotification, RecvTimeoutError>> + Send + '_;

    /// Waits `duration`.
    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send;

    /// Runs `fut` for at most `duration`: `None` if the time ran out first
    /// (`fut` is dropped then).
    fn timeout<F>(duration: Duration, fut: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
        F::Output: Send;

    /// Starts `fut` at once as a task of its own (a thread, for the
    /// blocking client); the returned future gives its output, or goes
    /// on with its panic.
    fn spawn<T: Send + 'static>(
        fut: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static;
}

/// The outcome a task sends back: its output, or its panic.
pub(crate) type Outcome<T> = std::thread::Result<T>;

/// Gives a task's outcome to whoever awaits it (its panic goes on there).
pub(crate) async fn finished<T>(rx: async_channel::Receiver<Outcome<T>>) -> T {
    match rx.recv().await.expect("the task sent its outcome") {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

impl<R: Runtime> Adapter for Client<R> {
    type Flavor = Async;

    const CANCELS_ON_DROP: bool = true;

    const TUNNELS_PLAIN_HTTP: bool = false;

    fn connect(server: ServerConfig) -> impl Future<Output = Result<Self, Error>> + Send {
        Client::<R>::connect(server)
    }

    fn connect_with(
        server: ServerConfig,
        options: ConnectOptions<Async>,
    ) -> impl Future<Output = Result<Self, Error>> + Send {
        Client::<R>::connect_with(server, options)
    }

    fn ping(&self) -> impl Future<Output = Result<(), Error>> + Send {
        Client::ping(self)
    }

    fn list_tools(&self) -> impl Future<Output = Result<Vec<Tool>, Error>> + Send {
        Client::list_tools(self)
    }

    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send {
        Client::call_tool(self, name, arguments)
    }

    fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send {
        Client::call_tool_with(self, name, arguments, options)
    }

    fn start_tool_task(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> impl Future<Output = Result<TaskStarted, Error>> + Send {
        Client::start_tool_task(self, name, arguments, options)
    }

    fn get_task(&self, task_id: &str) -> impl Future<Output = Result<Task, Error>> + Send {
        Client::get_task(self, task_id)
    }

    fn task_result(
        &self,
        task_id: &str,
        options: CallOptions,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send {
        Client::task_result(self, task_id, options)
    }

    fn cancel_task(&self, task_id: &str) -> impl Future<Output = Result<(), Error>> + Send {
        Client::cancel_task(self, task_id)
    }

    fn list_tasks(&self) -> impl Future<Output = Result<Vec<Task>, Error>> + Send {
        Client::list_tasks(self)
    }

    fn read_resource(
        &self,
        uri: &str,
    ) -> impl Future<Output = Result<ReadResourceResult, Error>> + Send {
        Client::read_resource(self, uri)
    }

    fn get_prompt(
        &self,
        name: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<GetPromptResult, Error>> + Send {
        Client::get_prompt(self, name, arguments)
    }

    fn close(&self) -> impl Future<Output = Result<(), Error>> + Send {
        Client::close(self.clone())
    }

    fn server(&self) -> &InitializeResult {
        Client::server(self)
    }

    fn protocol_version(&self) -> &str {
        Client::protocol_version(self)
    }

    fn transport(&self) -> &'static str {
        Client::transport(self)
    }

    fn closed_reason(&self) -> Option<&str> {
        Client::closed_reason(self)
    }

    fn stats(&self) -> mcpwire_adapter::Stats {
        Client::stats(self)
    }

    fn notifications(&self) -> Notifications {
        Client::notifications(self)
    }

    async fn recv_timeout(
        notes: &mut Notifications,
        within: Duration,
    ) -> Result<ServerNotification, RecvTimeoutError> {
        match mcpwire_adapter::runtime::timeout::<R, _>(within, notes.recv()).await {
            Some(Some(n)) => Ok(n),
            Some(None) => Err(RecvTimeoutError::Disconnected),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send {
        mcpwire_adapter::runtime::sleep::<R>(duration)
    }

    fn timeout<F>(duration: Duration, fut: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
        F::Output: Send,
    {
        mcpwire_adapter::runtime::timeout::<R, F>(duration, fut)
    }

    fn spawn<T: Send + 'static>(
        fut: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static {
        let (tx, rx) = async_channel::bounded(1);
        R::spawn(Box::pin(async move {
            let _ = tx.send(AssertUnwindSafe(fut).catch_unwind().await).await;
        }))
        .expect("spawn a task");
        finished(rx)
    }
}
