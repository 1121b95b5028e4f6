//! What every adapter's `connect` derives from its options and the server
//! entry before it builds the [`Connection`](mcpwire::Connection): the era
//! remembered for the server, the OAuth configuration for its URL, a
//! connect deadline that leaves a user time to log in, and the session's
//! handlers and hooks.

use std::time::Duration;

use mcpwire::connection::{ConnectionConfig, EraPolicy};
use mcpwire::ServerConfig;

use crate::options::ConnectOptions;
use crate::session::Setup;

/// The connection's configuration and what `connect` does around it.
#[derive(Debug)]
pub struct Prepared {
    /// The configuration to build the connection with.
    pub config: ConnectionConfig,
    /// How long `connect` waits for the connection to be ready.
    pub connect_timeout: Duration,
    /// The session's handlers, notification hook, era memory and token
    /// store.
    pub setup: Setup,
    /// The proxies and TLS its exchanges use.
    pub network: crate::net::Network,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("handlers", &self.handlers)
            .field("remember", &self.remember)
            .finish_non_exhaustive()
    }
}

/// The [`Prepared`] connection to `server` with `options`; fails on
/// network settings that cannot be used (an explicit proxy URL, TLS files).
pub fn prepare<F>(
    server: &ServerConfig,
    options: ConnectOptions<F>,
) -> Result<Prepared, crate::Error> {
    let network = match server.url {
        Some(_) => crate::net::Network::resolve(server, &options.network)?,
        None => crate::net::Network::direct(),
    };
    let remember_era = !options.forget_era;
    let memory = remember_era.then(|| crate::era::Memory::of(server, options.era_cache.clone()));
    let mut config = options.config;
    if config.era_hint.is_none() {
        config.era_hint = memory.as_ref().and_then(crate::era::Memory::recall);
    }
    let probing = matches!(server.era_policy(), Ok(None | Some(EraPolicy::Auto)))
        && config.era == EraPolicy::Auto;
    if let (Some(auth), Some(url)) = (&options.auth, &server.url) {
        config.auth = Some(auth.for_endpoint(url));
    }
    // A user may have to log in before the handshake completes.
    let login = config
        .auth
        .as_ref()
        .filter(|a| a.interactive)
        .map_or(Duration::ZERO, |a| a.authorize_timeout);
    let connect_timeout = options.connect_timeout.unwrap_or_else(|| {
        server
            .request_timeout()
            .unwrap_or(config.engine.default_timeout)
            + login
    });
    Ok(Prepared {
        network,
        config,
        connect_timeout,
        setup: Setup {
            handlers: options.handlers,
            on_notification: options.on_notification,
            on_diagnostic: options.on_diagnostic,
            remember: memory.filter(|_| probing),
            auth: options
                .auth
                .map(|a| (a.redirect_handler(), a.token_store())),
            skip_output_validation: options.skip_output_validation,
            pins: options.pins,
        },
    })
}
