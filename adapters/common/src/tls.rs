//! The rustls client configuration both adapters use for `https`.

use std::sync::{Arc, OnceLock};

use rustls::{ClientConfig, RootCertStore};

pub use rustls;

/// The process-wide client configuration, built on first use: ring
/// provider, safe default protocol versions, web PKI roots, ALPN
/// `http/1.1` (the only protocol the codec speaks).
pub fn config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG.get_or_init(build).clone()
}

fn build() -> Result<Arc<ClientConfig>, String> {
    let roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server name to verify for `host` (a DNS name or an IP address).
pub fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, String> {
    rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| "invalid server name".to_owned())
}
