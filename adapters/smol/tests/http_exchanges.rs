//! The shared HTTP exchange runner over smol's streams: keep-alive reuse,
//! the liveness probe of pooled connections, and TLS errors; against
//! hand-written servers on real loopback sockets (std threads).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcpwire::transport::{ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, HttpUrl};
use mcpwire::OwnedInput;
use mcpwire_smol::Smol;

type HttpClient = mcpwire_adapter::http::HttpClient<Smol>;

const OK: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";

/// A server answering `OK` to each request; with `close_after`, it closes
/// each connection after one answer. Returns its port and accept count.
fn server(close_after: bool) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepts = Arc::new(AtomicUsize::new(0));
    let counter = accepts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            counter.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    // Requests here are a head and a 2-byte body.
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        if seen.len() < end + 4 + 2 {
                            break;
                        }
                        seen.drain(..end + 4 + 2);
                        if stream.write_all(OK).is_err() || close_after {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, accepts)
}

fn post(id: u64, scheme: &str, port: u16) -> HttpRequest {
    HttpRequest {
        exchange: ExchangeId(id),
        method: HttpMethod::Post,
        url: HttpUrl::parse(&format!("{scheme}://127.0.0.1:{port}/mcp")).unwrap(),
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: b"{}".to_vec(),
        purpose: ExchangePurpose::Request,
        carries: None,
    }
}

/// Runs one exchange; its status, or its failure.
async fn exchange(client: &HttpClient, req: HttpRequest) -> Result<u16, String> {
    let (tx, rx) = async_channel::bounded(8);
    let _handle = client.start(req, tx);
    let mut status = None;
    let wait = Duration::from_secs(20);
    loop {
        let event = mcpwire_adapter::runtime::timeout::<Smol, _>(wait, rx.recv())
            .await
            .expect("an event within the wait")
            .expect("an event before the channel closed");
        match event {
            OwnedInput::HttpHead { head, .. } => status = Some(head.status),
            OwnedInput::HttpBody { .. } => {}
            OwnedInput::HttpEnd { .. } => return Ok(status.expect("head before end")),
            OwnedInput::HttpFailed { error, .. } => return Err(error),
            other => panic!("not an exchange's event: {other:?}"),
        }
    }
}

#[test]
fn keep_alive_reuses_one_connection() {
    smol::block_on(async {
        let (port, accepts) = server(false);
        let client = HttpClient::new();
        for id in 1..=3 {
            assert_eq!(exchange(&client, post(id, "http", port)).await, Ok(200));
        }
        assert_eq!(accepts.load(Ordering::SeqCst), 1);
        assert_eq!(client.idle_count(), 1);
    });
}

#[test]
fn pooled_connection_closed_by_server_is_replaced() {
    smol::block_on(async {
        let (port, accepts) = server(true);
        let client = HttpClient::new();
        assert_eq!(exchange(&client, post(1, "http", port)).await, Ok(200));
        // Let the server's close arrive: the probe sees the EOF.
        smol::Timer::after(Duration::from_millis(50)).await;
        assert_eq!(exchange(&client, post(2, "http", port)).await, Ok(200));
        assert_eq!(accepts.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn https_handshake_failure_is_reported() {
    smol::block_on(async {
        // A plain HTTP server answering at once: not a TLS handshake.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            }
        });
        let client = HttpClient::new();
        let error = exchange(&client, post(1, "https", port)).await.unwrap_err();
        assert!(
            error.starts_with("TLS handshake with 127.0.0.1: "),
            "{error}"
        );
    });
}

#[test]
fn connection_refused_is_reported() {
    smol::block_on(async {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = HttpClient::new();
        let error = exchange(&client, post(1, "http", port)).await.unwrap_err();
        assert!(
            error.starts_with(&format!("connect to 127.0.0.1:{port}: "))
                && error.contains("refused"),
            "{error}"
        );
    });
}
