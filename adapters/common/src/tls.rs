//! TLS for `https`, one definition for every adapter: which certificates
//! are trusted, which client certificate is presented, and what a failed
//! handshake is called.
//!
//! ```text
//!  trust  = the system's store (rustls-native-certs; SSL_CERT_FILE /
//!           SSL_CERT_DIR instead of it when set, as OpenSSL reads them)
//!           or, where that yields nothing, Mozilla's roots (webpki-root-certs)
//!         + tls.ca / --cacert (added, never instead)
//!  client = tls.cert + tls.key (PEM; PKCS#8, RSA or EC key), if set
//!  off    = tls.insecure / --insecure: no verification, a warning per connect
//! ```
//!
//! The tokio and smol adapters hand [`ClientTls`]'s rustls configuration
//! to their TLS streams; the blocking adapter gives ureq the same
//! [`TlsMaterial`] (roots, client certificate, verification on or off).
//! The system store is read once per process, when the first connection
//! needs it ([`system_roots`]); ALPN is `http/1.1`, the only protocol the
//! codec speaks.

use std::fmt;
#[cfg(feature = "tls")]
use std::sync::Arc;

use mcpwire::config::TlsSettings;

#[cfg(feature = "tls")]
pub use rustls;

/// What an `https` connection of one client is verified with and
/// presents: built from the [`TlsSettings`] of its server entry and
/// options by [`ClientTls::new`]. Cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    /// `None`: the process's default, built on first use (a client that
    /// never speaks `https`, or a stdio one, never reads the trust store).
    #[cfg(feature = "tls")]
    built: Option<Arc<Built>>,
    insecure: bool,
    client_cert: bool,
}

#[cfg(feature = "tls")]
struct Built {
    config: Arc<rustls::ClientConfig>,
    material: Arc<TlsMaterial>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("insecure", &self.insecure)
            .field("client_cert", &self.client_cert)
            .finish_non_exhaustive()
    }
}

/// The pieces of a client's TLS configuration, for a TLS stack other than
/// the rustls streams the async adapters drive (ureq, in the blocking
/// adapter).
#[cfg(feature = "tls")]
#[derive(Debug)]
pub struct TlsMaterial {
    /// The trust anchors, as certificates: the system's (or the fallback)
    /// and the extra CAs.
    pub roots: Arc<Vec<rustls::pki_types::CertificateDer<'static>>>,
    /// The client certificate, if set.
    pub client: Option<ClientIdentity>,
    /// Verification is off.
    pub insecure: bool,
}

/// A client certificate chain and its key.
#[cfg(feature = "tls")]
pub struct ClientIdentity {
    /// The chain, leaf first.
    pub chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The private key.
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
    /// The key file's PEM text (for a TLS stack that takes PEM).
    pub key_pem: Vec<u8>,
}

#[cfg(feature = "tls")]
impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("chain", &self.chain.len())
            .finish_non_exhaustive()
    }
}

/// Why TLS settings cannot be used: the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} `{path}`: {problem}")]
pub struct TlsSettingsError {
    /// `tls.ca`, `tls.cert` or `tls.key`.
    pub field: &'static str,
    /// The file.
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

impl ClientTls {
    /// The configuration for `settings`. The process's default one (no
    /// extra CA, no client certificate, verification on) is built once
    /// and shared; others are built here, reading their files.
    pub fn new(settings: &TlsSettings) -> Result<ClientTls, TlsSettingsError> {
        if settings.cert.is_some() != settings.key.is_some() {
            let (field, path) = match (&settings.cert, &settings.key) {
                (Some(c), None) => ("tls.cert", c),
                (None, Some(k)) => ("tls.key", k),
                _ => unreachable!("one of them is set"),
            };
            return Err(TlsSettingsError {
                field,
                path: path.clone(),
                problem: "a client certificate needs both `cert` and `key` (--cert and --key)"
                    .into(),
            });
        }
        #[cfg(feature = "tls")]
        {
            if settings.is_default() {
                return Ok(ClientTls {
                    built: None,
                    insecure: false,
                    client_cert: false,
                });
            }
            imp::build(settings)
        }
        #[cfg(not(feature = "tls"))]
        Ok(ClientTls {
            insecure: settings.insecure,
            client_cert: settings.cert.is_some(),
        })
    }

    /// Whether verification is off.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// Whether a client certificate is set.
    pub fn has_client_cert(&self) -> bool {
        self.client_cert
    }

    /// The rustls configuration (ring provider, safe protocol versions,
    /// ALPN `http/1.1`).
    #[cfg(feature = "tls")]
    pub fn rustls_config(&self) -> Arc<rustls::ClientConfig> {
        self.built().config.clone()
    }

    /// The same configuration in pieces, for another TLS stack.
    #[cfg(feature = "tls")]
    pub fn material(&self) -> &Arc<TlsMaterial> {
        &self.built().material
    }

    #[cfg(feature = "tls")]
    fn built(&self) -> &Built {
        match &self.built {
            Some(b) => b,
            None => imp::default_built(),
        }
    }

    /// What a failed handshake or read with `host` means, when TLS says
    /// why in terms of certificates: which certificate and what is wrong
    /// with it, and how to fix it (`None` for any other error, which the
    /// caller words with its own context).
    pub fn explain(&self, host: &str, error: &(dyn std::error::Error + 'static)) -> Option<String> {
        #[cfg(feature = "tls")]
        {
            let mut source = Some(error);
            while let Some(e) = source {
                if let Some(tls) = e.downcast_ref::<rustls::Error>() {
                    return imp::explain(host, tls, self.client_cert);
                }
                // An `io::Error`'s `source()` skips the error it wraps.
                source = match e.downcast_ref::<std::io::Error>() {
                    Some(io) => io.get_ref().map(|inner| inner as _),
                    None => e.source(),
                };
            }
            None
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = (host, error);
            None
        }
    }
}

/// The system's trust store as this process loaded it: how many
/// certificates, from where, and the problems met (a file of
/// `SSL_CERT_FILE` that cannot be read, say). Loaded on first use.
#[cfg(feature = "tls")]
#[derive(Debug)]
pub struct SystemRoots {
    /// The certificates.
    pub certs: Arc<Vec<rustls::pki_types::CertificateDer<'static>>>,
    /// `SSL_CERT_FILE / SSL_CERT_DIR`, `the system store`, or `Mozilla's
    /// roots (webpki-root-certs)` when neither gave any certificate.
    pub source: &'static str,
    /// What went wrong while loading, if anything.
    pub problems: Vec<String>,
    store: Arc<rustls::RootCertStore>,
}

/// The system's trust store, loaded on the first call.
#[cfg(feature = "tls")]
pub fn system_roots() -> &'static SystemRoots {
    imp::system_roots()
}

/// A host that is neither a DNS name nor an IP address: no server name
/// to verify ([`server_name`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid server name `{host}`")]
pub struct InvalidServerName {
    /// The host.
    pub host: String,
}

/// The server name to verify for `host` (a DNS name or an IP address).
#[cfg(feature = "tls")]
pub fn server_name(
    host: &str,
) -> Result<rustls::pki_types::ServerName<'static>, InvalidServerName> {
    rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|_| InvalidServerName {
        host: host.to_owned(),
    })
}

#[cfg(feature = "tls")]
mod imp {
    use std::sync::{Arc, OnceLock};

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::{AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct};
    use rustls::{Error, RootCertStore, SignatureScheme};

    use super::{Built, ClientIdentity, ClientTls, SystemRoots, TlsMaterial, TlsSettingsError};
    use mcpwire::config::TlsSettings;

    fn provider() -> Arc<CryptoProvider> {
        static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
        PROVIDER
            .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
            .clone()
    }

    pub(super) fn system_roots() -> &'static SystemRoots {
        static ROOTS: OnceLock<SystemRoots> = OnceLock::new();
        ROOTS.get_or_init(load_system_roots)
    }

    fn load_system_roots() -> SystemRoots {
        let from_env = ["SSL_CERT_FILE", "SSL_CERT_DIR"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|p| !p.is_empty()));
        let found = rustls_native_certs::load_native_certs();
        let mut problems: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
        let mut store = RootCertStore::empty();
        let (_, ignored) = store.add_parsable_certificates(found.certs.iter().cloned());
        if ignored > 0 {
            problems.push(format!("{ignored} certificates could not be used"));
        }
        let (certs, source) = if store.is_empty() {
            let certs: Vec<CertificateDer<'static>> =
                webpki_root_certs::TLS_SERVER_ROOT_CERTS.to_vec();
            store = RootCertStore::empty();
            store.add_parsable_certificates(certs.iter().cloned());
            (certs, "Mozilla's roots (webpki-root-certs)")
        } else if from_env {
            (found.certs, "SSL_CERT_FILE / SSL_CERT_DIR")
        } else {
            (found.certs, "the system store")
        };
        for problem in &problems {
            tracing::warn!("loading trusted certificates: {problem}");
        }
        tracing::debug!(
            certificates = store.len(),
            source,
            "trusted certificates loaded"
        );
        SystemRoots {
            certs: Arc::new(certs),
            source,
            problems,
            store: Arc::new(store),
        }
    }

    pub(super) fn default_built() -> &'static Built {
        static DEFAULT: OnceLock<Built> = OnceLock::new();
        DEFAULT.get_or_init(|| {
            let roots = system_roots();
            let material = TlsMaterial {
                roots: roots.certs.clone(),
                client: None,
                insecure: false,
            };
            let config = finish(base().with_root_certificates(roots.store.clone()), None)
                .expect("the default TLS configuration has no client certificate to refuse");
            Built {
                config,
                material: Arc::new(material),
            }
        })
    }

    fn base() -> rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier> {
        ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports the safe default protocol versions")
    }

    fn finish(
        builder: rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>,
        client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<Arc<ClientConfig>, Error> {
        let mut config = match client {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    pub(super) fn build(settings: &TlsSettings) -> Result<ClientTls, TlsSettingsError> {
        let system = system_roots();
        let (roots, store) = match &settings.ca {
            None => (system.certs.clone(), system.store.clone()),
            Some(path) => {
                let extra = read_certs("tls.ca", path)?;
                let mut store = (*system.store).clone();
                let (added, _) = store.add_parsable_certificates(extra.iter().cloned());
                if added == 0 {
                    return Err(TlsSettingsError {
                        field: "tls.ca",
                        path: path.clone(),
                        problem: "no usable CA certificate in it".into(),
                    });
                }
                let mut all = (*system.certs).clone();
                all.extend(extra);
                (Arc::new(all), Arc::new(store))
            }
        };
        let client = match (&settings.cert, &settings.key) {
            (Some(cert), Some(key)) => {
                let chain = read_certs("tls.cert", cert)?;
                let bad = |problem| TlsSettingsError {
                    field: "tls.key",
                    path: key.clone(),
                    problem,
                };
                let key_pem = std::fs::read(key)
                    .map_err(|e| bad(format!("cannot read it: {}", crate::http::io_message(&e))))?;
                let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
                    .map_err(|e| bad(pem_problem(&e, "private key (PKCS#8, RSA or EC)")))?;
                Some(ClientIdentity {
                    chain,
                    key: key_der,
                    key_pem,
                })
            }
            _ => None,
        };
        let builder = if settings.insecure {
            base()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
        } else {
            base().with_root_certificates(store)
        };
        let copy = client
            .as_ref()
            .map(|c| (c.chain.clone(), c.key.clone_key()));
        let config = finish(builder, copy).map_err(|e| {
            let (cert, key) = (
                settings.cert.clone().unwrap_or_default(),
                settings.key.clone().unwrap_or_default(),
            );
            TlsSettingsError {
                field: "tls.key",
                path: key,
                problem: format!("cannot be used with the certificate of `{cert}`: {e}"),
            }
        })?;
        Ok(ClientTls {
            built: Some(Arc::new(Built {
                config,
                material: Arc::new(TlsMaterial {
                    roots,
                    client,
                    insecure: settings.insecure,
                }),
            })),
            insecure: settings.insecure,
            client_cert: settings.cert.is_some(),
        })
    }

    fn read_certs(
        field: &'static str,
        path: &str,
    ) -> Result<Vec<CertificateDer<'static>>, TlsSettingsError> {
        let bad = |problem: String| TlsSettingsError {
            field,
            path: path.to_owned(),
            problem,
        };
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(pem_problem(&e, "certificate")))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(pem_problem(&e, "certificate")))?;
        if certs.is_empty() {
            return Err(bad(
                "no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into(),
            ));
        }
        Ok(certs)
    }

    fn pem_problem(e: &rustls::pki_types::pem::Error, what: &str) -> String {
        use rustls::pki_types::pem::Error as E;
        match e {
            E::Io(io) => format!("cannot read it: {}", crate::http::io_message(io)),
            E::NoItemsFound => format!("no PEM {what} in it"),
            other => format!("not a valid PEM {what}: {other:?}"),
        }
    }

    /// `--insecure`: every certificate is accepted; the handshake's
    /// signatures are still checked (the peer holds the key of the
    /// certificate it sent, whatever that certificate is worth).
    #[derive(Debug)]
    struct NoVerification(Arc<CryptoProvider>);

    impl ServerCertVerifier for NoVerification {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    const ADD_CA: &str = "if it uses a private or corporate CA (a TLS-inspecting \
                          gateway such as Zscaler or Netskope has one), trust it with \
                          --cacert FILE, `tls.ca` in the server's entry, or SSL_CERT_FILE";

    const GIVE_CERT: &str = "give one with --cert FILE --key FILE, or `tls.cert` and \
                             `tls.key` in the server's entry";

    pub(super) fn explain(host: &str, e: &Error, client_cert: bool) -> Option<String> {
        let cert = format!("the certificate of {host}");
        Some(match e {
            Error::InvalidCertificate(c) => match c {
                CertificateError::UnknownIssuer => format!(
                    "{cert} is not signed by a CA this client trusts (unknown issuer): {ADD_CA}"
                ),
                CertificateError::NotValidForName => {
                    format!("{cert} is not valid for the name {host} (name mismatch)")
                }
                CertificateError::NotValidForNameContext { presented, .. } => format!(
                    "{cert} is not valid for the name {host} (name mismatch): it is for {}",
                    if presented.is_empty() {
                        "no name at all".to_owned()
                    } else {
                        presented
                            .iter()
                            .map(|n| plain_name(n))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
                CertificateError::Expired => format!("{cert} has expired"),
                CertificateError::ExpiredContext { not_after, .. } => {
                    format!("{cert} has expired (on {})", date(*not_after))
                }
                CertificateError::NotValidYet => format!("{cert} is not valid yet"),
                CertificateError::NotValidYetContext { not_before, .. } => {
                    format!("{cert} is not valid yet (not before {})", date(*not_before))
                }
                CertificateError::Revoked => format!("{cert} has been revoked"),
                CertificateError::InvalidPurpose
                | CertificateError::InvalidPurposeContext { .. } => {
                    format!("{cert} is not for TLS servers (invalid purpose)")
                }
                CertificateError::BadSignature => {
                    format!("{cert} has a bad signature: {ADD_CA}")
                }
                other => format!("{cert} was refused: {other:?}"),
            },
            Error::AlertReceived(AlertDescription::CertificateRequired) => {
                format!("{host} demands a client certificate and none was given: {GIVE_CERT}")
            }
            Error::AlertReceived(
                alert @ (AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateRevoked
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::AccessDenied),
            ) if client_cert => {
                format!("{host} refused the client certificate (TLS alert {alert:?})")
            }
            Error::AlertReceived(alert @ AlertDescription::HandshakeFailure) if !client_cert => {
                format!(
                    "{host} ended the handshake (TLS alert {alert:?}); if it demands a client \
                     certificate, {GIVE_CERT}"
                )
            }
            _ => return None,
        })
    }

    /// A name as rustls presents it (`DnsName("a.example")`,
    /// `IpAddress(10.0.0.1)`), as a person writes it.
    fn plain_name(presented: &str) -> &str {
        presented
            .strip_prefix("DnsName(\"")
            .and_then(|n| n.strip_suffix("\")"))
            .or_else(|| {
                presented
                    .strip_prefix("IpAddress(")
                    .and_then(|n| n.strip_suffix(')'))
            })
            .unwrap_or(presented)
    }

    /// `YYYY-MM-DD` (UTC) of a UNIX time.
    fn date(t: UnixTime) -> String {
        let days = (t.as_secs() / 86_400) as i64;
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        format!("{y:04}-{m:02}-{d:02}")
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn dates() {
            assert_eq!(
                date(UnixTime::since_unix_epoch(std::time::Duration::ZERO)),
                "1970-01-01"
            );
            assert_eq!(
                date(UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                    1_709_164_800
                ))),
                "2024-02-29"
            );
        }

        #[test]
        fn explanations_name_the_certificate_and_the_way_out() {
            let unknown = explain(
                "mcp.corp",
                &Error::InvalidCertificate(CertificateError::UnknownIssuer),
                false,
            )
            .unwrap();
            assert!(unknown.contains("the certificate of mcp.corp"), "{unknown}");
            assert!(unknown.contains("unknown issuer"), "{unknown}");
            assert!(unknown.contains("--cacert"), "{unknown}");
            let name = explain(
                "a.test",
                &Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                    expected: ServerName::try_from("a.test").unwrap(),
                    presented: vec!["DnsName(\"b.test\")".into()],
                }),
                false,
            )
            .unwrap();
            assert!(
                name.contains("name mismatch") && name.contains("b.test"),
                "{name}"
            );
            let required = explain(
                "m.test",
                &Error::AlertReceived(AlertDescription::CertificateRequired),
                false,
            )
            .unwrap();
            assert!(
                required.contains("demands a client certificate"),
                "{required}"
            );
            assert!(required.contains("--cert"), "{required}");
            let refused = explain(
                "m.test",
                &Error::AlertReceived(AlertDescription::UnknownCA),
                true,
            )
            .unwrap();
            assert!(
                refused.contains("refused the client certificate"),
                "{refused}"
            );
            assert_eq!(explain("m.test", &Error::DecryptError, false), None);
        }
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::*;

    #[test]
    fn settings_errors_name_the_field_and_file() {
        let e = ClientTls::new(&TlsSettings::new().ca("/nonexistent/ca.pem")).unwrap_err();
        assert_eq!(
            (e.field, e.path.as_str()),
            ("tls.ca", "/nonexistent/ca.pem")
        );
        assert!(e.to_string().contains("cannot read it"), "{e}");
        let e = ClientTls::new(&TlsSettings {
            cert: Some("c.pem".into()),
            ..TlsSettings::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("needs both"), "{e}");
        let dir = std::env::temp_dir().join(format!("mcpwire-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not pem at all\n").unwrap();
        let e = ClientTls::new(&TlsSettings::new().ca(empty.to_str().unwrap())).unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_default_is_shared_and_insecure_is_its_own() {
        let a = ClientTls::new(&TlsSettings::new()).unwrap();
        let b = ClientTls::new(&TlsSettings::new()).unwrap();
        assert!(Arc::ptr_eq(&a.rustls_config(), &b.rustls_config()));
        assert!(!a.is_insecure());
        assert!(!a.material().roots.is_empty());
        let off = ClientTls::new(&TlsSettings::new().insecure(true)).unwrap();
        assert!(off.is_insecure() && off.material().insecure);
        assert_eq!(
            off.rustls_config().alpn_protocols,
            vec![b"http/1.1".to_vec()]
        );
    }
}
