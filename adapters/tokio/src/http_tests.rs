//! Exchanges against hand-written HTTP servers on real loopback sockets.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_channel::Receiver;
use mcpwire::exchange::{ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, HttpUrl};
use mcpwire::OwnedInput;
use mcpwire_adapter::http::HttpOptions as Options;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::time::{sleep, timeout};

/// The exchange runner on tokio.
type HttpClient = mcpwire_adapter::http::HttpClient<crate::Tokio>;

/// Longest wait for anything that should happen.
const WAIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------- server side

/// The server end of one accepted connection.
struct Peer {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Peer {
    async fn accept(listener: &TcpListener) -> Peer {
        let (stream, _) = timeout(WAIT, listener.accept())
            .await
            .expect("no connection within the wait")
            .expect("accept");
        Peer {
            stream,
            buf: Vec::new(),
        }
    }

    /// One whole request (head and Content-Length body); `None` on EOF or
    /// error before it is complete.
    async fn request(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(len) = request_len(&self.buf) {
                return Some(self.buf.drain(..len).collect());
            }
            let mut tmp = [0u8; 16 * 1024];
            match self.stream.read(&mut tmp).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
            }
        }
    }

    async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }
}

/// The length of the first complete request in `buf`, if there is one.
fn request_len(buf: &[u8]) -> Option<usize> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).expect("ASCII head");
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.trim().parse::<usize>().expect("length"));
    (buf.len() >= end + length).then_some(end + length)
}

/// Requests received: (connection number from 0, request bytes).
type Log = Arc<std::sync::Mutex<Vec<(usize, Vec<u8>)>>>;

/// A server answering every request on every connection with `respond`'s
/// bytes; closes each connection after one response if `close_after`.
struct Server {
    port: u16,
    accepts: Arc<AtomicUsize>,
    requests: Log,
    /// Connections the client closed (EOF seen between requests).
    closed_by_client: Arc<AtomicUsize>,
}

impl Server {
    async fn start(respond: fn(&[u8]) -> Vec<u8>, close_after: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepts = Arc::new(AtomicUsize::new(0));
        let requests: Log = Arc::default();
        let closed_by_client = Arc::new(AtomicUsize::new(0));
        let (a, r, c) = (accepts.clone(), requests.clone(), closed_by_client.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let conn = a.fetch_add(1, Ordering::SeqCst);
                let (r, c) = (r.clone(), c.clone());
                tokio::spawn(async move {
                    let mut peer = Peer {
                        stream,
                        buf: Vec::new(),
                    };
                    loop {
                        let Some(req) = peer.request().await else {
                            c.fetch_add(1, Ordering::SeqCst);
                            return;
                        };
                        let answer = respond(&req);
                        r.lock().unwrap().push((conn, req));
                        if peer.send(&answer).await.is_err() || close_after {
                            return;
                        }
                    }
                });
            }
        });
        Server {
            port,
            accepts,
            requests,
            closed_by_client,
        }
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<(usize, Vec<u8>)> {
        self.requests.lock().unwrap().clone()
    }
}

fn ok_json(_: &[u8]) -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".to_vec()
}

async fn bound() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

// ---------------------------------------------------------------- client side

fn url(scheme: &str, port: u16, path: &str) -> HttpUrl {
    HttpUrl::parse(&format!("{scheme}://127.0.0.1:{port}{path}")).unwrap()
}

fn post(id: u64, port: u16, body: &[u8]) -> HttpRequest {
    HttpRequest {
        exchange: ExchangeId(id),
        method: HttpMethod::Post,
        url: url("http", port, "/mcp"),
        headers: vec![
            (
                "Accept".into(),
                "application/json, text/event-stream".into(),
            ),
            ("Content-Type".into(), "application/json".into()),
        ],
        body: body.to_vec(),
        purpose: ExchangePurpose::Request,
        carries: None,
    }
}

fn get(id: u64, port: u16) -> HttpRequest {
    HttpRequest {
        exchange: ExchangeId(id),
        method: HttpMethod::Get,
        url: url("http", port, "/mcp"),
        headers: vec![("Accept".into(), "text/event-stream".into())],
        body: Vec::new(),
        purpose: ExchangePurpose::Listen,
        carries: None,
    }
}

/// What one exchange reported, checked for order.
#[derive(Debug, Default)]
struct Outcome {
    status: Option<u16>,
    bodies: Vec<Vec<u8>>,
    ended: bool,
    failed: Option<String>,
}

impl Outcome {
    fn body(&self) -> Vec<u8> {
        self.bodies.concat()
    }
}

/// Receives one event of exchange `id` (panics after the wait).
async fn next(rx: &mut Receiver<OwnedInput>) -> OwnedInput {
    timeout(WAIT, rx.recv())
        .await
        .expect("no event within the wait")
        .expect("channel closed")
}

/// Applies one event to `out`, checking the order; true when final.
fn apply(out: &mut Outcome, id: ExchangeId, event: OwnedInput) -> bool {
    assert!(
        !out.ended && out.failed.is_none(),
        "event after the end: {event:?}"
    );
    match event {
        OwnedInput::HttpHead { exchange: x, head } => {
            assert_eq!(x, id);
            assert!(out.status.is_none(), "two heads");
            out.status = Some(head.status);
            false
        }
        OwnedInput::HttpBody {
            exchange: x,
            data: bytes,
        } => {
            assert_eq!(x, id);
            assert!(out.status.is_some(), "body before head");
            assert!(!bytes.is_empty(), "empty body event");
            out.bodies.push(bytes);
            false
        }
        OwnedInput::HttpEnd { exchange: x } => {
            assert_eq!(x, id);
            assert!(out.status.is_some(), "end before head");
            out.ended = true;
            true
        }
        OwnedInput::HttpFailed { exchange: x, error } => {
            assert_eq!(x, id);
            out.failed = Some(error);
            true
        }
        other => panic!("not an exchange's event: {other:?}"),
    }
}

/// Collects exchange `id` to its `End` or `Failed`.
async fn collect(rx: &mut Receiver<OwnedInput>, id: u64) -> Outcome {
    let mut out = Outcome::default();
    while !apply(&mut out, ExchangeId(id), next(rx).await) {}
    out
}

/// Runs one exchange to completion on its own channel, and checks that
/// nothing follows its end.
async fn exchange(client: &HttpClient, req: HttpRequest) -> Outcome {
    let id = req.exchange.0;
    let (tx, mut rx) = async_channel::bounded(8);
    let _handle = client.start(req, tx);
    let out = collect(&mut rx, id).await;
    assert_closed(&mut rx).await;
    out
}

/// The exchange's task has ended without sending anything more.
async fn assert_closed(rx: &mut Receiver<OwnedInput>) {
    match timeout(WAIT, rx.recv()).await {
        Ok(Err(_)) => {}
        Ok(Ok(event)) => panic!("unexpected event {event:?}"),
        Err(_) => panic!("exchange task still running"),
    }
}

/// Polls `cond` until it holds (panics after the wait).
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn content_length_response() {
    let server = Server::start(
        |_| b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"result\":42}".to_vec(),
        false,
    )
    .await;
    let client = HttpClient::new();
    let mut req = post(1, server.port, br#"{"x":1}"#);
    req.headers.push(("Mcp-Session-Id".into(), "abc".into()));
    let out = exchange(&client, req).await;
    assert_eq!(out.status, Some(200));
    assert_eq!(out.body(), br#"{"result":42}"#);
    assert!(out.ended);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = String::from_utf8(requests[0].1.clone()).unwrap();
    let expected = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\
         Accept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nMcp-Session-Id: abc\r\n\
         Content-Length: 7\r\n\r\n{{\"x\":1}}",
        server.port
    );
    assert_eq!(sent, expected);
}

#[tokio::test]
async fn chunked_body_streams_before_the_end() {
    let (listener, port) = bound().await;
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let last_sent = Arc::new(AtomicBool::new(false));
    let flag = last_sent.clone();
    let server = tokio::spawn(async move {
        let mut peer = Peer::accept(&listener).await;
        peer.request().await.unwrap();
        peer.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
              Transfer-Encoding: chunked\r\n\r\nb\r\ndata: one\n\n\r\n",
        )
        .await
        .unwrap();
        // The test only says go once it has the first chunk: a client that
        // waited for the whole body would stall here.
        let _ = timeout(WAIT, go_rx).await;
        sleep(Duration::from_millis(50)).await;
        peer.send(b"b\r\ndata: two\n\n\r\n").await.unwrap();
        sleep(Duration::from_millis(50)).await;
        flag.store(true, Ordering::SeqCst);
        peer.send(b"d\r\ndata: three\n\n\r\n0\r\n\r\n")
            .await
            .unwrap();
        peer
    });
    let client = HttpClient::new();
    let (tx, mut rx) = async_channel::bounded(8);
    let _h = client.start(get(7, port), tx);
    let mut out = Outcome::default();
    assert!(!apply(&mut out, ExchangeId(7), next(&mut rx).await));
    assert_eq!(out.status, Some(200));
    assert!(!apply(&mut out, ExchangeId(7), next(&mut rx).await));
    assert_eq!(out.bodies, [b"data: one\n\n".to_vec()]);
    assert!(!last_sent.load(Ordering::SeqCst), "first body came late");
    go_tx.send(()).unwrap();
    while !apply(&mut out, ExchangeId(7), next(&mut rx).await) {}
    assert!(out.ended, "{out:?}");
    assert_eq!(out.body(), b"data: one\n\ndata: two\n\ndata: three\n\n");
    assert!(out.bodies.len() >= 3, "{:?}", out.bodies);
    assert_closed(&mut rx).await;
    let _peer = server.await.unwrap();
    assert_eq!(client.idle_count(), 1, "chunked keep-alive response pooled");
}

#[tokio::test]
async fn keep_alive_reuses_one_connection() {
    let server = Server::start(ok_json, false).await;
    let client = HttpClient::new();
    // The second exchange starts the moment the first reports End: the
    // connection must already be back in the pool.
    let (tx, mut rx) = async_channel::bounded(8);
    let _a = client.start(post(1, server.port, b"{}"), tx.clone());
    let first = collect(&mut rx, 1).await;
    let _b = client.start(post(2, server.port, b"{}"), tx.clone());
    let second = collect(&mut rx, 2).await;
    let _c = client.start(get(3, server.port), tx);
    let third = collect(&mut rx, 3).await;
    for out in [&first, &second, &third] {
        assert_eq!((out.status, out.ended), (Some(200), true));
        assert_eq!(out.body(), b"{}");
    }
    assert_eq!(server.accepts(), 1);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(client.idle_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_exchanges_use_separate_connections() {
    let (listener, port) = bound().await;
    // Answers only once both requests are in, on two connections: a client
    // that serialized them on one connection would never get an answer.
    let server = tokio::spawn(async move {
        let mut a = Peer::accept(&listener).await;
        let ra = a.request().await.unwrap();
        let mut b = Peer::accept(&listener).await;
        let rb = b.request().await.unwrap();
        for (peer, req) in [(&mut a, ra), (&mut b, rb)] {
            let id = if req.ends_with(b"\"a\"") { "a" } else { "b" };
            let resp = format!("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{id}");
            peer.send(resp.as_bytes()).await.unwrap();
        }
        (a, b)
    });
    let client = HttpClient::new();
    let (tx, mut rx) = async_channel::bounded(8);
    let _a = client.start(post(1, port, br#""a""#), tx.clone());
    let _b = client.start(post(2, port, br#""b""#), tx);
    let mut outs = [Outcome::default(), Outcome::default()];
    let mut done = 0;
    while done < 2 {
        let event = next(&mut rx).await;
        let id = event.exchange().expect("an exchange's event");
        let i = usize::try_from(id.0 - 1).unwrap();
        if apply(&mut outs[i], id, event) {
            done += 1;
        }
    }
    assert_eq!(outs[0].body(), b"a");
    assert_eq!(outs[1].body(), b"b");
    assert!(outs[0].ended && outs[1].ended);
    let _peers = server.await.unwrap();
    assert_eq!(client.idle_count(), 2);
}

#[tokio::test]
async fn dead_pooled_connection_is_retried_on_a_new_one() {
    let (listener, port) = bound().await;
    let server = tokio::spawn(async move {
        let mut first = Peer::accept(&listener).await;
        first.request().await.unwrap();
        first
            .send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
            .await
            .unwrap();
        // The race with a keep-alive timeout: the request arrives, the
        // server closes without answering.
        let lost = first.request().await.unwrap();
        drop(first);
        let mut second = Peer::accept(&listener).await;
        let retried = second.request().await.unwrap();
        second
            .send(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
            .await
            .unwrap();
        (lost, retried, second)
    });
    let client = HttpClient::new();
    let out = exchange(&client, post(1, port, b"1")).await;
    assert_eq!(out.body(), b"first");
    let out = exchange(&client, post(2, port, b"2")).await;
    assert_eq!(
        (out.status, out.ended, &out.failed),
        (Some(200), true, &None)
    );
    assert_eq!(out.body(), b"second");
    let (lost, retried, _second) = server.await.unwrap();
    assert_eq!(lost, retried);
    assert!(lost.ends_with(b"\r\n\r\n2"));
}

#[tokio::test]
async fn pooled_connection_closed_by_server_is_replaced() {
    // Keep-alive per the headers, but the server closes after each answer.
    let server = Server::start(ok_json, true).await;
    let client = HttpClient::new();
    for id in 1..=3 {
        let out = exchange(&client, post(id, server.port, b"{}")).await;
        assert_eq!(
            (out.status, out.ended, &out.failed),
            (Some(200), true, &None)
        );
        // Let the FIN arrive (or not: the retry covers it either way).
        if id == 2 {
            sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(server.accepts(), 3);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_fresh_connection_is_not_retried() {
    let (listener, port) = bound().await;
    let server = tokio::spawn(async move {
        let mut peer = Peer::accept(&listener).await;
        peer.request().await.unwrap();
        drop(peer);
        // A retry would connect again.
        timeout(Duration::from_millis(300), listener.accept())
            .await
            .is_ok()
    });
    let client = HttpClient::new();
    let out = exchange(&client, post(1, port, b"{}")).await;
    assert_eq!(
        out.failed.as_deref(),
        Some("connection closed before any response")
    );
    assert!(!server.await.unwrap(), "retried a fresh connection");
}

#[tokio::test]
async fn connection_refused_is_reported() {
    let (listener, port) = bound().await;
    drop(listener);
    let client = HttpClient::new();
    let out = exchange(&client, post(1, port, b"{}")).await;
    let error = out.failed.expect("failed");
    assert!(out.status.is_none());
    assert_eq!(
        error,
        format!("connect to 127.0.0.1:{port}: Connection refused")
    );
}

#[tokio::test]
async fn abort_stops_a_long_stream() {
    let (listener, port) = bound().await;
    let server = tokio::spawn(async move {
        let mut peer = Peer::accept(&listener).await;
        peer.request().await.unwrap();
        peer.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
              Transfer-Encoding: chunked\r\n\r\n6\r\n: tick\r\n",
        )
        .await
        .unwrap();
        // A quiet, endless stream: the client must close the connection
        // itself, not wait for more bytes.
        let mut rest = [0u8; 64];
        timeout(WAIT, peer.stream.read(&mut rest)).await
    });
    let client = HttpClient::new();
    let (tx, mut rx) = async_channel::bounded(8);
    let handle = client.start(get(1, port), tx);
    let mut out = Outcome::default();
    apply(&mut out, ExchangeId(1), next(&mut rx).await);
    apply(&mut out, ExchangeId(1), next(&mut rx).await);
    assert_eq!(out.status, Some(200));
    assert_eq!(out.body(), b": tick");
    handle.abort();
    let closed = server.await.unwrap();
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "connection not closed: {closed:?}"
    );
    assert_closed(&mut rx).await;
    assert_eq!(client.idle_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_event_after_abort_on_a_busy_stream() {
    let (listener, port) = bound().await;
    let server = tokio::spawn(async move {
        let mut peer = Peer::accept(&listener).await;
        peer.request().await.unwrap();
        peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        // Ticks as fast as the client takes them, until it goes away.
        let mut sent = 0u32;
        while sent < 100_000 && peer.send(b"6\r\n: tick\r\n").await.is_ok() {
            sent += 1;
            tokio::task::yield_now().await;
        }
        sent
    });
    let client = HttpClient::new();
    let (tx, mut rx) = async_channel::bounded(2);
    let handle = client.start(get(1, port), tx);
    let mut out = Outcome::default();
    apply(&mut out, ExchangeId(1), next(&mut rx).await);
    apply(&mut out, ExchangeId(1), next(&mut rx).await);
    handle.abort();
    // What was queued before abort() may remain; nothing comes after.
    while rx.try_recv().is_ok() {}
    assert_closed(&mut rx).await;
    let sent = timeout(WAIT, server)
        .await
        .expect("stream kept going")
        .unwrap();
    assert!(sent < 100_000, "the server never saw the connection close");
}

#[tokio::test]
async fn dropping_the_receiver_stops_the_exchange() {
    let (listener, port) = bound().await;
    let server = tokio::spawn(async move {
        let mut peer = Peer::accept(&listener).await;
        peer.request().await.unwrap();
        peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        let mut sent = 0u32;
        while peer.send(b"1\r\nx\r\n").await.is_ok() && sent < 1000 {
            sent += 1;
            sleep(Duration::from_millis(10)).await;
        }
        sent
    });
    let client = HttpClient::new();
    let (tx, mut rx) = async_channel::bounded(1);
    let _handle = client.start(get(1, port), tx);
    next(&mut rx).await;
    drop(rx);
    let sent = timeout(WAIT, server)
        .await
        .expect("stream kept going")
        .unwrap();
    assert!(sent < 1000);
    assert_eq!(client.idle_count(), 0);
}

#[tokio::test]
async fn connection_close_response_is_not_pooled() {
    // The server says close but leaves the socket open.
    let server = Server::start(
        |_| b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        false,
    )
    .await;
    let client = HttpClient::new();
    for id in 1..=2 {
        let out = exchange(&client, post(id, server.port, b"{}")).await;
        assert_eq!((out.status, out.ended), (Some(200), true));
        assert_eq!(client.idle_count(), 0);
    }
    assert_eq!(server.accepts(), 2);
    let conns: Vec<usize> = server.requests().iter().map(|(c, _)| *c).collect();
    assert_eq!(conns, [0, 1]);
    // And the client closed both.
    eventually("both connections closed", || {
        server.closed_by_client.load(Ordering::SeqCst) == 2
    })
    .await;
}

#[tokio::test]
async fn accepted_202_without_body() {
    let server = Server::start(
        |_| b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_vec(),
        false,
    )
    .await;
    let client = HttpClient::new();
    for id in 1..=2 {
        let mut req = post(
            id,
            server.port,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        req.purpose = ExchangePurpose::Notify;
        let out = exchange(&client, req).await;
        assert_eq!(out.status, Some(202));
        assert!(out.bodies.is_empty(), "{:?}", out.bodies);
        assert!(out.ended);
    }
    assert_eq!(server.accepts(), 1, "kept alive");
}

#[tokio::test]
async fn delete_without_body() {
    let server = Server::start(|_| b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(), false).await;
    let client = HttpClient::new();
    let req = HttpRequest {
        exchange: ExchangeId(9),
        method: HttpMethod::Delete,
        url: url("http", server.port, "/mcp?x=1"),
        headers: vec![("Mcp-Session-Id".into(), "s1".into())],
        body: Vec::new(),
        purpose: ExchangePurpose::Close,
        carries: None,
    };
    let out = exchange(&client, req).await;
    assert_eq!((out.status, out.ended), (Some(204), true));
    assert!(out.bodies.is_empty());
    let requests = server.requests();
    assert_eq!(
        String::from_utf8(requests[0].1.clone()).unwrap(),
        format!(
            "DELETE /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nMcp-Session-Id: s1\r\n\r\n",
            server.port
        )
    );
}

#[tokio::test]
async fn malformed_response_fails() {
    let server = Server::start(|_| b"HTTP/1.1 2x0 Nope\r\n\r\n".to_vec(), false).await;
    let client = HttpClient::new();
    let out = exchange(&client, post(1, server.port, b"{}")).await;
    assert!(out.status.is_none());
    let error = out.failed.expect("failed");
    assert!(error.starts_with("malformed response: "), "{error}");
    assert_eq!(client.idle_count(), 0);
}

#[tokio::test]
async fn eof_in_the_middle_of_a_body_fails() {
    let server = Server::start(
        |_| b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec(),
        true,
    )
    .await;
    let client = HttpClient::new();
    let out = exchange(&client, post(1, server.port, b"{}")).await;
    assert_eq!(out.status, Some(200));
    assert_eq!(out.body(), b"abc");
    assert!(!out.ended);
    assert_eq!(
        out.failed.as_deref(),
        Some("connection closed in the middle of the body (Content-Length)")
    );
    assert_eq!(server.accepts(), 1, "not retried after a response began");
}

#[tokio::test]
async fn close_delimited_body_ends_at_eof() {
    let server = Server::start(
        |_| b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n".to_vec(),
        true,
    )
    .await;
    let client = HttpClient::new();
    let out = exchange(&client, get(1, server.port)).await;
    assert_eq!((out.status, out.ended), (Some(200), true));
    assert_eq!(out.body(), b"data: x\n\n");
    assert_eq!(client.idle_count(), 0);
}

#[tokio::test]
async fn bytes_after_the_response_prevent_pooling() {
    let server = Server::start(
        |_| b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\n".to_vec(),
        false,
    )
    .await;
    let client = HttpClient::new();
    let out = exchange(&client, post(1, server.port, b"{}")).await;
    assert_eq!((out.status, out.ended), (Some(200), true));
    assert_eq!(out.body(), b"{}");
    assert_eq!(client.idle_count(), 0);
}

#[tokio::test]
async fn large_body_is_written_in_full() {
    let server = Server::start(ok_json, false).await;
    let client = HttpClient::new();
    let body: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let out = exchange(&client, post(1, server.port, &body)).await;
    assert_eq!((out.status, out.ended), (Some(200), true));
    let requests = server.requests();
    let sent = &requests[0].1;
    assert!(sent.ends_with(&body));
    let head = String::from_utf8_lossy(&sent[..sent.len() - body.len()]).into_owned();
    assert!(head.ends_with("Content-Length: 300000\r\n\r\n"), "{head}");
}

#[tokio::test]
async fn idle_connections_expire() {
    let server = Server::start(ok_json, false).await;
    let client = HttpClient::with_options(Options {
        idle_timeout: Duration::from_millis(100),
        ..Options::default()
    });
    exchange(&client, post(1, server.port, b"{}")).await;
    assert_eq!(client.idle_count(), 1);
    sleep(Duration::from_millis(250)).await;
    exchange(&client, post(2, server.port, b"{}")).await;
    assert_eq!(server.accepts(), 2);
    eventually("expired connection closed", || {
        server.closed_by_client.load(Ordering::SeqCst) == 1
    })
    .await;
}

#[tokio::test]
async fn idle_pool_is_bounded_per_origin() {
    let server = Server::start(ok_json, false).await;
    let client = HttpClient::with_options(Options {
        max_idle_per_origin: 2,
        ..Options::default()
    });
    let (tx, mut rx) = async_channel::bounded(16);
    let _handles: Vec<_> = (1..=3)
        .map(|id| client.start(post(id, server.port, b"{}"), tx.clone()))
        .collect();
    let mut ended = 0;
    while ended < 3 {
        if matches!(next(&mut rx).await, OwnedInput::HttpEnd { .. }) {
            ended += 1;
        }
    }
    // Three connections if the exchanges overlapped, fewer if not; never
    // more than two idle.
    assert!(client.idle_count() <= 2);
    assert!(client.idle_count() >= 1);
}

#[tokio::test]
async fn shutdown_closes_idle_connections() {
    let server = Server::start(ok_json, false).await;
    let client = HttpClient::new();
    exchange(&client, post(1, server.port, b"{}")).await;
    assert_eq!(client.idle_count(), 1);
    client.shutdown();
    assert_eq!(client.idle_count(), 0);
    eventually("idle connection closed", || {
        server.closed_by_client.load(Ordering::SeqCst) == 1
    })
    .await;
    // Still usable, but nothing is pooled any more.
    let out = exchange(&client, post(2, server.port, b"{}")).await;
    assert!(out.ended);
    assert_eq!(client.idle_count(), 0);
}

#[tokio::test]
async fn invalid_request_fails_without_connecting() {
    let (listener, port) = bound().await;
    let client = HttpClient::new();
    let mut req = post(1, port, b"{}");
    req.headers
        .push(("X-Bad".into(), "a\r\nInjected: yes".into()));
    let out = exchange(&client, req).await;
    let error = out.failed.expect("failed");
    assert!(error.starts_with("invalid request: "), "{error}");
    assert!(timeout(Duration::from_millis(100), listener.accept())
        .await
        .is_err());
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn https_handshake_failure_is_reported() {
    let (listener, port) = bound().await;
    tokio::spawn(async move {
        let mut peer = Peer::accept(&listener).await;
        let mut hello = [0u8; 512];
        let _ = peer.stream.read(&mut hello).await;
        let _ = peer.send(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    });
    let client = HttpClient::new();
    let mut req = post(1, port, b"{}");
    req.url = url("https", port, "/mcp");
    let out = exchange(&client, req).await;
    let error = out.failed.expect("failed");
    assert!(
        error.starts_with("TLS handshake with 127.0.0.1: "),
        "{error}"
    );
}

#[cfg(not(feature = "tls"))]
#[tokio::test]
async fn https_without_tls_feature_fails_clearly() {
    let (_listener, port) = bound().await;
    let client = HttpClient::new();
    let mut req = post(1, port, b"{}");
    req.url = url("https", port, "/mcp");
    let out = exchange(&client, req).await;
    let error = out.failed.expect("failed");
    assert!(error.contains("without its `tls` feature"), "{error}");
}

#[test]
fn start_outside_a_runtime_fails_instead_of_panicking() {
    let client = HttpClient::new();
    let (tx, rx) = async_channel::bounded(1);
    let handle = client.start(post(1, 9, b"{}"), tx);
    handle.abort();
    assert!(
        matches!(rx.try_recv(), Ok(OwnedInput::HttpFailed { exchange: ExchangeId(1), error: e }) if e == "no tokio runtime")
    );
}
