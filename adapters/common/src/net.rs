//! The network one client's exchanges take, defined once for every
//! adapter: the proxy each URL goes through and the TLS it is verified
//! with. tokio and smol hand it to the HTTP exchange runner
//! ([`crate::http::HttpClient`]); the blocking adapter configures ureq
//! from the same [`Network`].
//!
//! ```text
//!  ConnectOptions (code, CLI flags) ─┐  first that says something wins:
//!  server entry: proxy, tls ─────────┼─► Network { proxies, tls }
//!  environment, read once ───────────┘     route(url) -> Direct | Via(proxy)
//!                                          tls        -> ClientTls
//! ```
//!
//! Which proxy a URL takes is the core's decision
//! ([`mcpwire::exchange::proxy`]); this module only reads the environment
//! (once per process, [`environment`]) and puts the settings together.

use std::sync::{Arc, OnceLock};

use mcpwire::config::TlsSettings;
use mcpwire::exchange::proxy::{NoProxy, Proxies, ProxyEnv, ProxyError, Route};
use mcpwire::exchange::HttpUrl;
use mcpwire::ServerConfig;

use crate::tls::{ClientTls, TlsSettingsError};

/// The proxy variables of this process's environment, read on the first
/// call (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY` and their
/// lower-case forms). The trust store's `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` are read with the store ([`crate::tls`]).
pub fn environment() -> &'static ProxyEnv {
    static ENV: OnceLock<ProxyEnv> = OnceLock::new();
    ENV.get_or_init(|| ProxyEnv::from_lookup(|name| std::env::var(name).ok()))
}

/// Which proxy a client's exchanges take, as given in code (the CLI's
/// `--proxy` and `--no-proxy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyChoice {
    /// No proxy at all, whatever the server entry and the environment say.
    Direct,
    /// This proxy for every URL but those `NO_PROXY` lists:
    /// `http://[user:password@]host[:port]`.
    Url(String),
    /// These variables instead of the process's environment (an embedder's
    /// own settings, or a test's).
    Env(ProxyEnv),
}

/// The network settings of [`ConnectOptions`](crate::options::ConnectOptions):
/// what is set here wins over the server entry, which wins over the
/// environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkOptions {
    /// The proxy (`None`: the server entry's `proxy`, else the
    /// environment).
    pub proxy: Option<ProxyChoice>,
    /// TLS settings: each field set here replaces the server entry's
    /// (`insecure` if either says so).
    pub tls: TlsSettings,
}

/// How one client reaches its server (and the authorization server):
/// the proxies and the TLS configuration. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Network {
    proxies: Arc<Proxies>,
    tls: ClientTls,
}

impl Network {
    /// The network of a connection to `server` with `options` (see
    /// [`NetworkOptions`] for which wins). Fails on an explicit proxy URL
    /// that cannot be used, or TLS files that cannot be read; a broken
    /// proxy variable in the environment fails the exchanges that would use
    /// it instead ([`Network::route`]). With verification off, logs a
    /// warning naming the server.
    pub fn resolve(
        server: &ServerConfig,
        options: &NetworkOptions,
    ) -> Result<Network, NetworkError> {
        let env_no_proxy = || {
            environment()
                .no_proxy
                .as_ref()
                .map(|(_, list)| NoProxy::parse(list))
                .unwrap_or_default()
        };
        let proxies = match (&options.proxy, server.proxy.as_deref()) {
            (Some(ProxyChoice::Direct), _) => Proxies::direct(),
            (Some(ProxyChoice::Url(url)), _) => Proxies::explicit(url, "proxy", env_no_proxy())?,
            (Some(ProxyChoice::Env(env)), _) => Proxies::from_env(env),
            (None, Some(url)) if url.trim().is_empty() => Proxies::direct(),
            (None, Some(url)) => {
                Proxies::explicit(url, "the server entry's `proxy`", env_no_proxy())?
            }
            (None, None) => Proxies::from_env(environment()),
        };
        let entry = server.tls.clone().unwrap_or_default();
        let given = &options.tls;
        let settings = TlsSettings {
            ca: given.ca.clone().or(entry.ca),
            cert: given.cert.clone().or(entry.cert),
            key: given.key.clone().or(entry.key),
            insecure: given.insecure || entry.insecure,
        };
        let tls = ClientTls::new(&settings)?;
        if tls.is_insecure() {
            tracing::warn!(
                server = server.url.as_deref().unwrap_or_default(),
                "TLS certificate verification is OFF (--insecure / tls.insecure): anyone \
                 between this client and the server can read and change the traffic"
            );
        }
        Ok(Network {
            proxies: Arc::new(proxies),
            tls,
        })
    }

    /// What the environment says, with the default TLS (the network of
    /// an [`HttpClient`](crate::http::HttpClient) made without one).
    pub fn from_environment() -> Network {
        Network {
            proxies: Arc::new(Proxies::from_env(environment())),
            tls: ClientTls::new(&TlsSettings::default())
                .expect("the default TLS settings name no file"),
        }
    }

    /// No proxy, default TLS.
    pub fn direct() -> Network {
        Network {
            proxies: Arc::new(Proxies::direct()),
            tls: ClientTls::new(&TlsSettings::default())
                .expect("the default TLS settings name no file"),
        }
    }

    /// These proxies and this TLS configuration.
    pub fn new(proxies: Proxies, tls: ClientTls) -> Network {
        Network {
            proxies: Arc::new(proxies),
            tls,
        }
    }

    /// How to reach `url`, or the error of the broken proxy setting it
    /// would use.
    pub fn route(&self, url: &HttpUrl) -> Result<Route<'_>, ProxyError> {
        self.proxies.route(url)
    }

    /// The proxies.
    pub fn proxies(&self) -> &Proxies {
        &self.proxies
    }

    /// The TLS configuration.
    pub fn tls(&self) -> &ClientTls {
        &self.tls
    }
}

/// Why a client's network settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkError {
    /// A proxy URL given explicitly is malformed or of an unsupported kind.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// A TLS file cannot be read or used.
    #[error(transparent)]
    Tls(#[from] TlsSettingsError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> ProxyEnv {
        ProxyEnv::from_lookup(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    fn route(n: &Network, url: &str) -> Option<String> {
        match n.route(&HttpUrl::parse(url).unwrap()).unwrap() {
            Route::Direct => None,
            Route::Via(p) => Some(p.to_string()),
        }
    }

    #[test]
    fn options_win_over_the_entry_which_wins_over_the_environment() {
        let entry = ServerConfig::http("https://m.test/mcp").proxy("http://entry:1");
        let n = Network::resolve(&entry, &NetworkOptions::default()).unwrap();
        assert_eq!(
            route(&n, "https://m.test/mcp").as_deref(),
            Some("http://entry:1")
        );

        let options = NetworkOptions {
            proxy: Some(ProxyChoice::Url("http://option:2".into())),
            ..NetworkOptions::default()
        };
        let n = Network::resolve(&entry, &options).unwrap();
        assert_eq!(
            route(&n, "http://m.test/mcp").as_deref(),
            Some("http://option:2")
        );

        let direct = NetworkOptions {
            proxy: Some(ProxyChoice::Direct),
            ..NetworkOptions::default()
        };
        let n = Network::resolve(&entry, &direct).unwrap();
        assert_eq!(route(&n, "https://m.test/mcp"), None);

        let none = ServerConfig::http("https://m.test/mcp").proxy("");
        let n = Network::resolve(&none, &NetworkOptions::default()).unwrap();
        assert!(n.proxies().is_direct());

        let rules = NetworkOptions {
            proxy: Some(ProxyChoice::Env(env(&[
                ("HTTPS_PROXY", "http://rules:3"),
                ("NO_PROXY", "skip.test"),
            ]))),
            ..NetworkOptions::default()
        };
        let n = Network::resolve(&entry, &rules).unwrap();
        assert_eq!(
            route(&n, "https://m.test/").as_deref(),
            Some("http://rules:3")
        );
        assert_eq!(route(&n, "https://skip.test/"), None);
        assert_eq!(route(&n, "http://m.test/"), None);
    }

    #[test]
    fn a_bad_explicit_proxy_is_refused_at_once() {
        let entry = ServerConfig::http("https://m.test/mcp").proxy("socks5://s:1080");
        let e = Network::resolve(&entry, &NetworkOptions::default()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the server entry's `proxy`: socks5:// proxies are not supported"),
            "{e}"
        );
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_options_replace_the_entry_field_by_field() {
        let entry =
            ServerConfig::http("https://m.test/mcp").tls(TlsSettings::new().ca("/nope/a.pem"));
        let options = NetworkOptions {
            tls: TlsSettings::new().ca("/nope/b.pem"),
            ..NetworkOptions::default()
        };
        let e = Network::resolve(&entry, &options).unwrap_err();
        assert!(e.to_string().contains("/nope/b.pem"), "{e}");
    }
}
