//! The blocking client: the shared surface (`client_surface!`) over a
//! [`Session`] driven by the threads that wait ([`crate::exec`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire::config::ServerConfig;
use mcpwire::connection::{Connection, TransportSpec};
use mcpwire::rpc::Params;
use mcpwire_adapter::options::CANCELLED_BY_TOKEN;
use mcpwire_adapter::session::Session;
use mcpwire_adapter::setup::prepare;
use mcpwire_adapter::CallOptions;
use serde_json::value::RawValue;

use crate::exec::{Shared, Wait, WaitOutcome};
use crate::{ConnectOptions, Error};

/// An MCP client connected to one server. Cheap to clone, `Send` and
/// `Sync`: every clone, on any thread, talks to the same connection, and
/// calls from several threads run concurrently. The connection closes
/// gracefully when [`Client::close`] is called or the last clone is
/// dropped (in the background, which also reaps the server process).
#[derive(Clone)]
pub struct Client {
    handle: Arc<Handle>,
}

/// What the clones share; its drop (the last clone's) closes.
struct Handle {
    shared: Arc<Shared>,
    /// A call's timeout unless it sets its own.
    default_timeout: Duration,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Never blocks: the background thread carries the close to its end.
        self.shared.with(|s| s.close(Instant::now()));
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        mcpwire_adapter::surface::fmt_client(self.info(), f)
    }
}

impl Client {
    /// Connects with default options: spawns the process (stdio) or opens
    /// the HTTP session, and completes the handshake.
    pub fn connect(server: ServerConfig) -> Result<Self, Error> {
        Self::connect_with(server, ConnectOptions::new())
    }

    /// Connects with `options` (handlers, timeouts, limits).
    pub fn connect_with(server: ServerConfig, mut options: ConnectOptions) -> Result<Self, Error> {
        options.default_client_info("mcpwire-blocking", env!("CARGO_PKG_VERSION"));
        options.check()?;
        let spec = TransportSpec::from_server(&server)?;
        let child =
            match spec {
                TransportSpec::Stdio => Some(crate::pipes::spawn_child(&server).map_err(
                    |source| Error::Spawn {
                        command: server.command.clone().unwrap_or_default(),
                        source,
                    },
                )?),
                _ => None,
            };
        let prepared = prepare(&server, options)?;
        let default_timeout = server
            .request_timeout()
            .unwrap_or(prepared.config.engine.default_timeout);
        let connect_timeout = prepared.connect_timeout;
        let conn = Connection::for_server(&server, prepared.config, Instant::now())?;
        let session = Session::new(conn, prepared.setup);
        let started =
            |e: std::io::Error| Error::Connect(format!("cannot start the connection: {e}"));
        let child = child.map(|c| (c, server.clone()));
        let shared = Shared::new(session, child, prepared.network).map_err(started)?;
        shared.start_background().map_err(started)?;
        let client = Client {
            handle: Arc::new(Handle {
                shared: shared.clone(),
                default_timeout,
            }),
        };
        let deadline = Instant::now() + connect_timeout;
        match shared.wait(Wait::Ready, Vec::new(), None, Some(deadline)) {
            Some(WaitOutcome::Ready(Ok(()))) => Ok(client),
            Some(WaitOutcome::Ready(Err(reason))) => Err(Error::Connect(reason.to_string())),
            // Dropping `client` closes the connection (and the child).
            _ => Err(Error::Connect(format!(
                "no initialize result within {}ms",
                connect_timeout.as_millis()
            ))),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// Sends a request and returns its raw result. Blocks until it
    /// completes: result, error, timeout, cancellation or close.
    pub fn request_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        options: CallOptions,
    ) -> Result<Box<RawValue>, Error> {
        self.request_params(method, params.map(Params::from), options)
    }

    /// [`request_raw`](Self::request_raw) with [`Params`] (the typed
    /// calls' params, written by core's serializer).
    #[doc(hidden)]
    pub fn request_params(
        &self,
        method: &str,
        params: Option<Params>,
        options: CallOptions,
    ) -> Result<Box<RawValue>, Error> {
        let params = options.stamp_params(params)?;
        let (rpc, progress, cancel) = options.into_parts();
        let shared = self.shared();
        // Only a call that nothing else can end early runs its own
        // exchange: a blocked read cannot be interrupted.
        let inline = cancel.is_none() && !rpc.reset_timeout_on_progress;
        let call_timeout = rpc.timeout.unwrap_or(self.handle.default_timeout);
        let (id, exchanges) = shared
            .start_call(method, params.as_ref(), rpc, progress, inline)
            .map_err(Error::Call)?;
        // Written into the request: the buffer is the next call's.
        mcpwire_adapter::surface::give_back_params(params);
        let hook = cancel.map(|token| {
            let weak = Arc::downgrade(shared);
            let key = token.on_cancel(move || {
                if let Some(shared) = weak.upgrade() {
                    shared.with(|s| s.cancel(Instant::now(), id, CANCELLED_BY_TOKEN));
                }
            });
            (token, key)
        });
        let outcome = shared.wait(Wait::Call(id), exchanges, Some(call_timeout), None);
        if let Some((token, key)) = hook {
            token.forget(key);
        }
        match outcome {
            Some(WaitOutcome::Call(outcome)) => Ok(outcome?),
            _ => unreachable!("a call's wait ends with its outcome"),
        }
    }

    /// Sends a notification.
    pub fn notify_raw(&self, method: &str, params: Option<Box<RawValue>>) -> Result<(), Error> {
        self.shared()
            .with(|s| s.notify(Instant::now(), method, params.as_deref()))
            .map_err(Error::Call)
    }

    mcpwire_adapter::client_surface!(blocking);

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
        let shared = self.shared();
        shared.with(|s| s.close(Instant::now()));
        let deadline = limit.map(|l| Instant::now() + l);
        let _ = shared.wait(Wait::Closed, Vec::new(), None, deadline);
    }
}
