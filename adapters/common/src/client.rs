//! The async client: the shared surface ([`crate::client_surface!`]) over a
//! [`Session`] driven on runtime `R`.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire::config::ServerConfig;
use mcpwire::connection::{Connection, TransportSpec};
use mcpwire::rpc::Params;
use serde_json::value::RawValue;

use crate::drive::Shared;
use crate::http::{HttpClient, HttpOptions};
use crate::options::{CallOptions, CANCELLED_BY_TOKEN};
use crate::runtime::{timeout, Runtime};
use crate::session::Session;
use crate::setup::prepare;
use crate::Error;

/// An MCP client connected to one server, on runtime `R` (the adapters
/// name it: `mcpwire_tokio::Client` is `Client<Tokio>`). Cheap to clone;
/// every clone talks to the same connection. The connection closes
/// gracefully when [`Client::close`] is called or the last clone is
/// dropped.
pub struct Client<R: Runtime> {
    handle: Arc<Handle<R>>,
    runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> Clone for Client<R> {
    fn clone(&self) -> Self {
        Client {
            handle: Arc::clone(&self.handle),
            runtime: PhantomData,
        }
    }
}

/// What the clones share; its drop (the last clone's) closes.
struct Handle<R: Runtime> {
    shared: Arc<Shared<R>>,
}

impl<R: Runtime> Drop for Handle<R> {
    fn drop(&mut self) {
        // The driver task carries the close to its end.
        let mut state = self.shared.lock();
        state.session.close(Instant::now());
        drop(state);
        self.shared.poke();
    }
}

impl<R: Runtime> std::fmt::Debug for Client<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::surface::fmt_client(self.info(), f)
    }
}

impl<R: Runtime> Client<R> {
    /// Connects with default options: spawns the process (stdio) or opens
    /// the HTTP session, and completes the handshake.
    pub async fn connect(server: ServerConfig) -> Result<Self, Error> {
        Self::connect_with(server, crate::ConnectOptions::new()).await
    }

    /// Connects with `options` (handlers, timeouts, limits).
    pub async fn connect_with(
        server: ServerConfig,
        mut options: crate::ConnectOptions,
    ) -> Result<Self, Error> {
        options.default_client_info(R::NAME, R::VERSION);
        options.check()?;
        let spec = TransportSpec::from_server(&server)?;
        let child = match spec {
            TransportSpec::Stdio => {
                Some(R::spawn_child(&server).map_err(|source| Error::Spawn {
                    command: server.command.clone().unwrap_or_default(),
                    source,
                })?)
            }
            _ => None,
        };
        let prepared = prepare(&server, options)?;
        let conn = Connection::for_server(&server, prepared.config, Instant::now())?;
        let child = child.map(|c| (c, server.clone()));
        let http = HttpClient::with_network(HttpOptions::default(), prepared.network);
        let shared = Shared::<R>::new(Session::new(conn, prepared.setup), child, http);
        shared
            .spawn_driver()
            .map_err(|e| Error::Connect(e.to_string()))?;
        let client = Client {
            handle: Arc::new(Handle {
                shared: shared.clone(),
            }),
            runtime: PhantomData,
        };
        let limit = prepared.connect_timeout;
        match timeout::<R, _>(limit, shared.ready()).await {
            Some(Ok(())) => Ok(client),
            Some(Err(reason)) => Err(Error::Connect(reason.to_string())),
            // Dropping `client` closes the connection (and the child).
            None => Err(Error::Connect(format!(
                "no initialize result within {}ms",
                limit.as_millis()
            ))),
        }
    }

    fn shared(&self) -> &Arc<Shared<R>> {
        &self.handle.shared
    }

    /// Sends a request and returns its raw result. Dropping the future
    /// before it ends cancels the request (the server is told).
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        options: CallOptions,
    ) -> Result<Box<RawValue>, Error> {
        self.request_params(method, params.map(Params::from), options)
            .await
    }

    /// [`request_raw`](Self::request_raw) with [`Params`] (the typed
    /// calls' params, written by core's serializer).
    #[doc(hidden)]
    pub async fn request_params(
        &self,
        method: &str,
        params: Option<Params>,
        options: CallOptions,
    ) -> Result<Box<RawValue>, Error> {
        let shared = self.shared();
        let params = options.stamp_params(params)?;
        let (rpc, progress, cancel) = options.into_parts();
        let id = shared
            .with(|s| s.request(Instant::now(), method, params.as_ref(), rpc, progress))
            .map_err(Error::Call)?;
        // Written into the request: the buffer is the next call's.
        crate::surface::give_back_params(params);
        // From here on, dropping this future cancels the call.
        let call = shared.call(id);
        let hook = cancel.map(|token| {
            let weak = Arc::downgrade(shared);
            let key = token.on_cancel(move || {
                if let Some(shared) = weak.upgrade() {
                    shared.cancel(id, CANCELLED_BY_TOKEN);
                }
            });
            (token, key)
        });
        let outcome = call.await;
        if let Some((token, key)) = hook {
            token.forget(key);
        }
        Ok(outcome?)
    }

    /// Sends a notification.
    pub async fn notify_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<(), Error> {
        self.shared()
            .with(|s| s.notify(Instant::now(), method, params.as_deref()))
            .map_err(Error::Call)
    }

    crate::client_surface!(async);

    /// Closes gracefully: pending calls fail with "connection closed", the
    /// server is asked to stop (stdio: stdin closed, then SIGTERM, then
    /// SIGKILL after the grace periods; HTTP: session DELETE), and this
    /// returns once it is done.
    pub async fn close(self) -> Result<(), Error> {
        let shared = self.shared().clone();
        shared.with(|s| s.close(Instant::now()));
        shared.closed().await;
        Ok(())
    }

    /// Like [`Client::close`] with a bound on the wait.
    pub async fn close_timeout(self, limit: Duration) -> Result<(), Error> {
        let _ = timeout::<R, _>(limit, self.close()).await;
        Ok(())
    }
}
