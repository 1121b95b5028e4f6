//! What every adapter's `connect` derives from its options and the server
//! entry before it builds the [`Connection`](mcpwire::Connection): the era
//! remembered for the server, the OAuth configuration for its URL, and a
//! connect deadline that leaves a user time to log in.

use std::time::Duration;

use mcpwire::connection::{ConnectionConfig, EraPolicy};
use mcpwire::ServerConfig;

use crate::auth::AuthOptions;

/// The connection's configuration and what `connect` does around it.
#[derive(Debug)]
pub struct Setup {
    /// The configuration to build the connection with.
    pub config: ConnectionConfig,
    /// How long `connect` waits for the connection to be ready.
    pub connect_timeout: Duration,
    /// The server whose era to record once it is known (only an era found
    /// by probing, never a pinned one).
    pub remember: Option<ServerConfig>,
}

/// The [`Setup`] for `server` from the adapter's options.
pub fn setup(
    server: &ServerConfig,
    config: &ConnectionConfig,
    auth: Option<&AuthOptions>,
    remember_era: bool,
    connect_timeout: Option<Duration>,
) -> Setup {
    let mut config = config.clone();
    if remember_era && config.era_hint.is_none() {
        config.era_hint = crate::era::recall(server);
    }
    let probing = matches!(server.era_policy(), Ok(None | Some(EraPolicy::Auto)))
        && config.era == EraPolicy::Auto;
    if let (Some(auth), Some(url)) = (auth, &server.url) {
        config.auth = Some(auth.for_endpoint(url));
    }
    // A user may have to log in before the handshake completes.
    let login = config
        .auth
        .as_ref()
        .filter(|a| a.interactive)
        .map_or(Duration::ZERO, |a| a.authorize_timeout);
    let connect_timeout = connect_timeout.unwrap_or_else(|| {
        server
            .request_timeout()
            .unwrap_or(config.engine.default_timeout)
            + login
    });
    Setup {
        config,
        connect_timeout,
        remember: (remember_era && probing).then(|| server.clone()),
    }
}
