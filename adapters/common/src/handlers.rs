//! The application's answers to server requests: one handler per
//! [`ServerRequestKind`], synchronous or `async`, and the notification
//! callback. Which capability a handler declares is the core's rule
//! ([`ServerRequestKind::declare`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use mcpwire::mcp::{ServerNotification, ServerRequestKind};
use mcpwire::rpc::ErrorObject;
use serde_json::Value;

/// A boxed future, as `async` handlers return.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// An `async` handler for one kind of server request: params in, result
/// or JSON-RPC error out.
pub type RequestHandler =
    Arc<dyn Fn(Value) -> BoxFuture<Result<Value, ErrorObject>> + Send + Sync + 'static>;

/// A synchronous handler for one kind of server request (run on a thread
/// of its own).
pub type BlockingHandler = Arc<dyn Fn(Value) -> Result<Value, ErrorObject> + Send + Sync + 'static>;

/// A notification observer (called where the notification is taken in,
/// under the session's lock: keep it short, and do not call the client
/// from it).
pub type NotificationFn = Arc<dyn Fn(&ServerNotification) + Send + Sync + 'static>;

/// A diagnostic observer (called under the session's lock, like
/// [`NotificationFn`]).
pub type DiagnosticFn = Arc<dyn Fn(&mcpwire::connection::Diagnostic) + Send + Sync + 'static>;

/// A handler of either kind: every executor runs both (an `async` one on
/// its runtime or, in the blocking adapter, with a local `block_on` on a
/// thread; a synchronous one on a thread).
#[derive(Clone)]
pub enum Handler {
    /// Returns a future.
    Async(RequestHandler),
    /// Blocks until it has the answer.
    Blocking(BlockingHandler),
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Handler::Async(_) => "Handler::Async",
            Handler::Blocking(_) => "Handler::Blocking",
        })
    }
}

impl Handler {
    /// Runs the handler to its answer on the calling thread (an `async`
    /// one with a local executor). For threads of the executor's own.
    pub fn run_blocking(&self, params: Value) -> Result<Value, ErrorObject> {
        let run = || match self {
            Handler::Blocking(f) => f(params),
            Handler::Async(f) => futures_lite::future::block_on(f(params)),
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
            .unwrap_or_else(|_| Err(ErrorObject::internal("handler panicked")))
    }

    /// Runs the handler on a thread of its own and gives the answer to
    /// `deliver` there. If no thread can be started, the error to answer
    /// the server with comes back here (and `deliver` is not called).
    pub fn run_on_thread(
        self,
        params: Value,
        deliver: impl FnOnce(Result<Value, ErrorObject>) + Send + 'static,
    ) -> Result<(), ErrorObject> {
        std::thread::Builder::new()
            .name("mcpwire-handler".into())
            .spawn(move || deliver(self.run_blocking(params)))
            .map(drop)
            .map_err(|e| ErrorObject::internal(format!("no handler thread: {e}")))
    }
}

/// The handlers set, by kind.
#[derive(Clone, Default)]
pub struct Handlers {
    by_kind: Vec<(ServerRequestKind, Handler)>,
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.by_kind.iter().map(|(k, _)| k))
            .finish()
    }
}

impl Handlers {
    /// Sets the handler of `kind` (replacing any).
    pub fn set(&mut self, kind: ServerRequestKind, handler: Handler) {
        self.by_kind.retain(|(k, _)| *k != kind);
        self.by_kind.push((kind, handler));
    }

    /// The handler of `kind`, if set.
    pub fn get(&self, kind: ServerRequestKind) -> Option<&Handler> {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, h)| h)
    }
}
