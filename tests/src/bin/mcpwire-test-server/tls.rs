//! `--tls CERT KEY [--client-ca CA]`: a rustls front on the public port
//! that relays each connection, decrypted, to the plain HTTP server on a
//! port of its own, so the HTTP code is the same with TLS and without.
//!
//! ```text
//!  client ══TLS══► front (this file) ──plain──► http.rs on 127.0.0.1:PLAIN
//! ```
//!
//! A handshake that fails (the client does not trust the certificate, or
//! has no client certificate when `--client-ca` demands one) is logged as
//! a `tls_refused` event with rustls' reason.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use serde_json::json;

use crate::log::Log;
use crate::protocol::Ctx;

/// The server configuration: the certificate chain and key, and with
/// `client_ca` a verifier that requires a client certificate it signed.
pub fn config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e:?}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e:?}", key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in
                CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e:?}", ca.display()))?
            {
                roots
                    .add(c.map_err(|e| format!("{}: {e:?}", ca.display()))?)
                    .map_err(|e| e.to_string())?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| e.to_string())?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TLS connections on `front` and relays each to the plain server
/// on `plain_port`, a thread per direction.
pub fn serve(front: &TcpListener, plain_port: u16, config: &Arc<ServerConfig>, ctx: &Arc<Ctx>) {
    for conn in front.incoming() {
        let Ok(tcp) = conn else { continue };
        let config = config.clone();
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            if let Err(e) = relay(tcp, plain_port, config, &ctx.log) {
                eprintln!("mcpwire-test-server: tls relay: {e}");
            }
        });
    }
}

/// Closes after an alert as servers do it well: the write side first,
/// then what the client still sends is read and dropped (for a moment),
/// so that the close is no reset that could discard the alert before the
/// client reads it.
fn linger(mut tcp: TcpStream) {
    let _ = tcp.shutdown(Shutdown::Write);
    let _ = tcp.set_read_timeout(Some(std::time::Duration::from_millis(500)));
    let mut sink = [0u8; 4096];
    while matches!(tcp.read(&mut sink), Ok(n) if n > 0) {}
}

fn relay(
    mut tcp: TcpStream,
    plain_port: u16,
    config: Arc<ServerConfig>,
    log: &Log,
) -> io::Result<()> {
    let _ = tcp.set_nodelay(true);
    let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut tcp) {
            log.event("tls_refused", json!({ "error": e.to_string() }));
            linger(tcp);
            return Ok(());
        }
    }
    while conn.wants_write() {
        conn.write_tls(&mut tcp)?;
    }
    let mut plain = TcpStream::connect(("127.0.0.1", plain_port))?;
    let _ = plain.set_nodelay(true);
    // What the client sent with the end of its handshake (its first
    // request, often) is decrypted already.
    let early = conn
        .process_new_packets()
        .map(|s| s.plaintext_bytes_to_read())
        .unwrap_or(0);
    if early > 0 {
        let mut first = vec![0u8; early];
        conn.reader().read_exact(&mut first)?;
        plain.write_all(&first)?;
    }
    let conn = Arc::new(Mutex::new(conn));

    // Server to client: plaintext from the HTTP server, encrypted out.
    let back = {
        let conn = conn.clone();
        let mut plain_r = plain.try_clone()?;
        let mut tcp_w = tcp.try_clone()?;
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = match plain_r.read(&mut buf) {
                    Ok(0) | Err(_) => 0,
                    Ok(n) => n,
                };
                let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
                if n == 0 {
                    c.send_close_notify();
                } else if c.writer().write_all(&buf[..n]).is_err() {
                    break;
                }
                let mut failed = false;
                while c.wants_write() {
                    if c.write_tls(&mut tcp_w).is_err() {
                        failed = true;
                        break;
                    }
                }
                drop(c);
                if n == 0 || failed {
                    let _ = tcp_w.shutdown(Shutdown::Write);
                    break;
                }
            }
        })
    };

    // Client to server: TLS records in, plaintext to the HTTP server.
    let mut plain_w = plain;
    let mut tcp_r = tcp.try_clone()?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut clear = Vec::new();
    'read: loop {
        let n = match tcp_r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
            let mut input = &buf[..n];
            while !input.is_empty() {
                if c.read_tls(&mut input).is_err() {
                    break 'read;
                }
                let state = match c.process_new_packets() {
                    Ok(state) => state,
                    Err(e) => {
                        // TLS 1.3: a missing client certificate shows
                        // after the client's handshake, here.
                        log.event("tls_refused", json!({ "error": e.to_string() }));
                        while c.wants_write() {
                            if c.write_tls(&mut tcp).is_err() {
                                break;
                            }
                        }
                        drop(c);
                        let _ = plain_w.shutdown(Shutdown::Both);
                        let _ = back.join();
                        linger(tcp);
                        return Ok(());
                    }
                };
                let want = state.plaintext_bytes_to_read();
                if want > 0 {
                    let start = clear.len();
                    clear.resize(start + want, 0);
                    c.reader().read_exact(&mut clear[start..])?;
                }
                if state.peer_has_closed() {
                    break;
                }
            }
            while c.wants_write() {
                if c.write_tls(&mut tcp).is_err() {
                    break;
                }
            }
        }
        if !clear.is_empty() {
            if plain_w.write_all(&clear).is_err() {
                break;
            }
            clear.clear();
        }
    }
    let _ = plain_w.shutdown(Shutdown::Write);
    let _ = back.join();
    let _ = tcp.shutdown(Shutdown::Both);
    Ok(())
}
