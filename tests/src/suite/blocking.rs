//! [`Adapter`] for `mcpwire_blocking::Client`: each blocking call runs on
//! a thread of its own and the case awaits its answer over a channel, so
//! the async case bodies drive it unchanged; a task is a thread with a
//! local `block_on` (no async runtime: `futures-lite` only).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::RecvTimeoutError;
use std::thread;
use std::time::Duration;

use mcpwire_adapter::options::{Blocking, ConnectOptions};
use mcpwire_adapter::types::{
    CallToolResult, GetPromptResult, InitializeResult, ReadResourceResult, Task, TaskStarted, Tool,
};
use mcpwire_adapter::{CallOptions, Error, Notifications, ServerConfig, ServerNotification};
use mcpwire_blocking::Client;
use serde_json::Value;

use super::adapter::{finished, Adapter};

/// Runs the cases of one test: `futures_lite`'s `block_on` on the test's
/// thread.
pub use futures_lite::future::block_on;

/// Starts `f` on a new thread at once; the future gives its result (or
/// goes on with its panic).
fn start<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = T> + Send + 'static {
    let (tx, rx) = async_channel::bounded(1);
    thread::Builder::new()
        .name("suite-blocking".into())
        .spawn(move || {
            let _ = tx.send_blocking(std::panic::catch_unwind(AssertUnwindSafe(f)));
        })
        .expect("spawn a thread");
    finished(rx)
}

/// Runs `f` on a thread of its own once the future is first polled, as
/// an async call would start.
async fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    start(f).await
}

/// Runs a blocking call of the client on a thread; the thread's clone of
/// the client is dropped before the answer is given, so that the case's
/// clones are the only ones left when it has it.
fn call<T: Send + 'static>(
    client: &Client,
    f: impl FnOnce(&Client) -> T + Send + 'static,
) -> impl Future<Output = T> + Send + 'static {
    let client = client.clone();
    on_thread(move || {
        let out = f(&client);
        drop(client);
        out
    })
}

impl Adapter for Client {
    type Flavor = Blocking;

    const CANCELS_ON_DROP: bool = false;

    const TUNNELS_PLAIN_HTTP: bool = true;

    fn connect(server: ServerConfig) -> impl Future<Output = Result<Self, Error>> + Send {
        on_thread(move || Client::connect(server))
    }

    fn connect_with(
        server: ServerConfig,
        options: ConnectOptions<Blocking>,
    ) -> impl Future<Output = Result<Self, Error>> + Send {
        on_thread(move || Client::connect_with(server, options))
    }

    fn ping(&self) -> impl Future<Output = Result<(), Error>> + Send {
        call(self, Client::ping)
    }

    fn list_tools(&self) -> impl Future<Output = Result<Vec<Tool>, Error>> + Send {
        call(self, Client::list_tools)
    }

    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send {
        let name = name.to_owned();
        call(self, move |c| c.call_tool(&name, arguments))
    }

    fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send {
        let name = name.to_owned();
        call(self, move |c| c.call_tool_with(&name, arguments, options))
    }

    fn start_tool_task(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> impl Future<Output = Result<TaskStarted, Error>> + Send {
        let name = name.to_owned();
        call(self, move |c| c.start_tool_task(&name, arguments, options))
    }

    fn get_task(&self, task_id: &str) -> impl Future<Output = Result<Task, Error>> + Send {
        let id = task_id.to_owned();
        call(self, move |c| c.get_task(&id))
    }

    fn task_result(
        &self,
        task_id: &str,
        options: CallOptions,
    ) -> impl Future<Output = Result<CallToolResult, Error>> + Send {
        let id = task_id.to_owned();
        call(self, move |c| c.task_result(&id, options))
    }

    fn cancel_task(&self, task_id: &str) -> impl Future<Output = Result<(), Error>> + Send {
        let id = task_id.to_owned();
        call(self, move |c| c.cancel_task(&id))
    }

    fn list_tasks(&self) -> impl Future<Output = Result<Vec<Task>, Error>> + Send {
        call(self, move |c| c.list_tasks())
    }

    fn read_resource(
        &self,
        uri: &str,
    ) -> impl Future<Output = Result<ReadResourceResult, Error>> + Send {
        let uri = uri.to_owned();
        call(self, move |c| c.read_resource(&uri))
    }

    fn get_prompt(
        &self,
        name: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<GetPromptResult, Error>> + Send {
        let name = name.to_owned();
        call(self, move |c| c.get_prompt(&name, arguments))
    }

    fn close(&self) -> impl Future<Output = Result<(), Error>> + Send {
        call(self, Client::close)
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

    /// The blocking API of [`Notifications`]: the case's thread runs
    /// nothing else (calls and tasks have threads of their own), so it
    /// may block there.
    async fn recv_timeout(
        notes: &mut Notifications,
        within: Duration,
    ) -> Result<ServerNotification, RecvTimeoutError> {
        notes.recv_timeout(within)
    }

    fn sleep(duration: Duration) -> impl Future<Output = ()> + Send {
        on_thread(move || thread::sleep(duration))
    }

    fn timeout<F>(duration: Duration, fut: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
        F::Output: Send,
    {
        futures_lite::future::or(async { Some(fut.await) }, async move {
            Self::sleep(duration).await;
            None
        })
    }

    fn spawn<T: Send + 'static>(
        fut: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static {
        start(move || block_on(fut))
    }
}
