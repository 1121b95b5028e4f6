//! Streamable HTTP transport on 127.0.0.1, endpoint `/mcp`.
//!
//! One thread per TCP connection, HTTP/1.1 keep-alive, request bodies with
//! Content-Length or chunked. A request POST is handled on its connection's
//! thread, so concurrent calls need concurrent connections (as any HTTP/1.1
//! client does). SSE bodies are always chunked, JSON bodies use
//! Content-Length (both chunked in 1-3 byte pieces under `--tiny-chunks`).
//!
//! 2026-07-28 requests (the `_meta` envelope, or `server/discover`) need
//! no session and get no `Mcp-Session-Id`; their era headers
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) must match the body
//! (else 400 with `-32020`), and a version not served is 400 with
//! `-32022`.

use crate::oauth::{Guard, OAuth};
use crate::protocol::{
    classify, declared_version, error_response, handle_notification, handle_request, lock,
    log_notification, request_era, Ctx, Era, Incoming, Outbound, Outcome, Peer, SUPPORTED_VERSIONS,
};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;
const MAX_HEADERS: usize = 64;

pub fn run(ctx: Arc<Ctx>) -> ! {
    // `--tls`: the plain server listens on an ephemeral port of its own,
    // behind the TLS front on the port asked for.
    let tls = ctx.opts.tls.as_ref().map(|(cert, key)| {
        crate::tls::config(cert, key, ctx.opts.client_ca.as_deref()).unwrap_or_else(|e| {
            eprintln!("mcpwire-test-server: --tls: {e}");
            std::process::exit(2);
        })
    });
    let plain_port = if tls.is_some() { 0 } else { ctx.opts.port };
    let listener = match TcpListener::bind(("127.0.0.1", plain_port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "mcpwire-test-server: cannot listen on 127.0.0.1:{}: {e}",
                ctx.opts.port
            );
            std::process::exit(1);
        }
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            eprintln!("mcpwire-test-server: local_addr: {e}");
            std::process::exit(1);
        }
    };
    {
        // Exit when the parent goes away (or drops our stdin), so that a test
        // which spawns the server and forgets it never leaks a process
        // (with --ignore-stdin-eof, a while later).
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 4096];
            let mut stdin = io::stdin();
            loop {
                match stdin.read(&mut sink) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            ctx.log.event("stdin_eof", json!({}));
            if ctx.opts.ignore_stdin_eof {
                crate::stdio::linger();
            }
            crate::note("stdin closed, exiting");
            std::process::exit(0);
        });
    }
    // `--redirect-cross-origin`: the same server on another port.
    let second = if ctx.opts.redirect_cross_origin {
        match TcpListener::bind(("127.0.0.1", 0)).and_then(|l| Ok((l.local_addr()?.port(), l))) {
            Ok(pair) => Some(pair),
            Err(e) => {
                eprintln!("mcpwire-test-server: cannot open the second listener: {e}");
                std::process::exit(1);
            }
        }
    } else {
        None
    };
    let oauth = ctx.opts.oauth.then(|| OAuth::new(port, &ctx.opts));
    let server = Arc::new(Server {
        ctx,
        port,
        second_port: second.as_ref().map(|(p, _)| *p),
        oauth,
        sessions: Mutex::new(HashMap::new()),
        modern: Peer::default(),
        modern_events: AtomicU64::new(0),
    });
    if let Some((second_port, second)) = second {
        eprintln!("mcpwire-test-server: also listening on http://127.0.0.1:{second_port}/mcp/");
        let server = server.clone();
        std::thread::spawn(move || accept(&server, &second));
    }
    let (scheme, public) = match tls {
        Some(config) => {
            let asked = server.ctx.opts.port;
            let front = match TcpListener::bind(("127.0.0.1", asked)) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("mcpwire-test-server: cannot listen on 127.0.0.1:{asked}: {e}");
                    std::process::exit(1);
                }
            };
            let public = front.local_addr().map_or(0, |a| a.port());
            let ctx = server.ctx.clone();
            std::thread::spawn(move || crate::tls::serve(&front, port, &config, &ctx));
            ("https", public)
        }
        None => ("http", port),
    };
    {
        let mut out = io::stdout();
        let _ = writeln!(out, "listening on {scheme}://127.0.0.1:{public}/mcp");
        let _ = out.flush();
    }
    eprintln!("mcpwire-test-server: listening on {scheme}://127.0.0.1:{public}/mcp");
    accept(&server, &listener);
    std::process::exit(1)
}

/// Serves each connection of `listener` on a thread of its own.
fn accept(server: &Arc<Server>, listener: &TcpListener) {
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                let server = server.clone();
                std::thread::spawn(move || server.serve(stream));
            }
            Err(e) => eprintln!("mcpwire-test-server: accept failed: {e}"),
        }
    }
}

// ---------------------------------------------------------------- sessions

struct Session {
    id: String,
    peer: Peer,
    alive: AtomicBool,
    /// Its `notifications/initialized` has arrived: until then only
    /// `initialize`'s answer and `ping` are served.
    initialized: AtomicBool,
    /// Requests answered (for `--expire-after`).
    answered: AtomicU64,
    next_event: AtomicU64,
    /// Senders of the open listener (GET) streams.
    listeners: Mutex<Vec<mpsc::Sender<Value>>>,
    /// Messages of dropped streams, by the last event id sent on them.
    resumable: Mutex<HashMap<String, Vec<Value>>>,
}

impl Session {
    fn next_event_id(&self) -> String {
        format!("ev-{}", self.next_event.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Sends to the most recent live listener stream.
    fn push_listener(&self, msg: &Value) -> bool {
        let mut listeners = lock(&self.listeners);
        while let Some(tx) = listeners.last() {
            if tx.send(msg.clone()).is_ok() {
                return true;
            }
            listeners.pop();
        }
        eprintln!("mcpwire-test-server: no listener stream, dropped {msg}");
        false
    }

    fn end(&self) {
        self.alive.store(false, Ordering::SeqCst);
        lock(&self.listeners).clear();
        lock(&self.resumable).clear();
        self.peer.clear_pending();
    }
}

pub fn random_token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut s = String::new();
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::SeqCst));
        h.write_u32(std::process::id());
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(t.as_nanos());
        }
        s.push_str(&format!("{:016x}", h.finish()));
    }
    s
}

// ---------------------------------------------------------------- requests

struct Request {
    method: String,
    path: String,
    http10: bool,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn wants_close(&self) -> bool {
        let conn = self.header("connection").unwrap_or("").to_ascii_lowercase();
        if self.http10 {
            !conn.contains("keep-alive")
        } else {
            conn.split(',').any(|t| t.trim() == "close")
        }
    }
}

enum ReadError {
    Io,
    /// Status to answer before closing.
    Bad(u16, &'static str),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    /// Reads more bytes; `Ok(0)` at EOF.
    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn fill_or_eof(&mut self) -> Result<(), ReadError> {
        match self.fill()? {
            0 => Err(ReadError::Io),
            _ => Ok(()),
        }
    }

    /// The next request; `Ok(None)` when the client closed between requests.
    fn next(&mut self) -> Result<Option<Request>, ReadError> {
        let mut req = loop {
            if !self.buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut parsed = httparse::Request::new(&mut headers);
                match parsed.parse(&self.buf) {
                    Ok(httparse::Status::Complete(n)) => {
                        let req = Request {
                            method: parsed.method.unwrap_or("").to_string(),
                            path: parsed.path.unwrap_or("").to_string(),
                            http10: parsed.version == Some(0),
                            headers: parsed
                                .headers
                                .iter()
                                .map(|h| {
                                    (
                                        h.name.to_ascii_lowercase(),
                                        String::from_utf8_lossy(h.value).into_owned(),
                                    )
                                })
                                .collect(),
                            body: Vec::new(),
                        };
                        self.buf.drain(..n);
                        break req;
                    }
                    Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                        return Err(ReadError::Bad(431, "request head too large"));
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(httparse::Error::TooManyHeaders) => {
                        return Err(ReadError::Bad(431, "too many headers"));
                    }
                    Err(_) => return Err(ReadError::Bad(400, "malformed request head")),
                }
            }
            if self.fill()? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ReadError::Io)
                };
            }
        };

        let chunked = req
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        let length = match req.header("content-length") {
            Some(v) if !chunked => Some(
                v.trim()
                    .parse::<usize>()
                    .map_err(|_| ReadError::Bad(400, "bad Content-Length"))?,
            ),
            _ => None,
        };
        let expects_body = chunked || length.unwrap_or(0) > 0;
        if expects_body
            && req
                .header("expect")
                .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
        {
            self.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        if chunked {
            req.body = self.read_chunked()?;
        } else if let Some(len) = length {
            if len > MAX_BODY {
                return Err(ReadError::Bad(413, "body too large"));
            }
            while self.buf.len() < len {
                self.fill_or_eof()?;
            }
            req.body = self.buf.drain(..len).collect();
        }
        Ok(Some(req))
    }

    fn read_chunked(&mut self) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        loop {
            let (consumed, size) = loop {
                match httparse::parse_chunk_size(&self.buf) {
                    Ok(httparse::Status::Complete(v)) => break v,
                    Ok(httparse::Status::Partial) => self.fill_or_eof()?,
                    Err(_) => return Err(ReadError::Bad(400, "bad chunk size")),
                }
            };
            self.buf.drain(..consumed);
            if size == 0 {
                // Trailers, up to and including the empty line.
                loop {
                    match self.buf.windows(2).position(|w| w == b"\r\n") {
                        Some(0) => {
                            self.buf.drain(..2);
                            return Ok(body);
                        }
                        Some(pos) => {
                            self.buf.drain(..pos + 2);
                        }
                        None => self.fill_or_eof()?,
                    }
                }
            }
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            if size > MAX_BODY || body.len() + size > MAX_BODY {
                return Err(ReadError::Bad(413, "body too large"));
            }
            while self.buf.len() < size + 2 {
                self.fill_or_eof()?;
            }
            if &self.buf[size..size + 2] != b"\r\n" {
                return Err(ReadError::Bad(400, "bad chunk terminator"));
            }
            body.extend_from_slice(&self.buf[..size]);
            self.buf.drain(..size + 2);
        }
    }
}

// ---------------------------------------------------------------- writing

struct Wire {
    stream: TcpStream,
    tiny: bool,
    rng: u64,
    broken: bool,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "Unknown",
    }
}

impl Wire {
    /// Whether the client closed its end (or vanished): a read would see
    /// the end of the stream or an error at once.
    fn peer_gone(&self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut b = [0u8; 1];
        let gone = match self.stream.peek(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        };
        let _ = self.stream.set_nonblocking(false);
        gone
    }

    fn write(&mut self, data: &[u8]) {
        if self.broken {
            return;
        }
        if let Err(e) = self.stream.write_all(data) {
            eprintln!("mcpwire-test-server: write failed: {e}");
            self.broken = true;
        }
    }

    fn head(&mut self, status: u16, headers: &[(&str, String)], close: bool) {
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        self.write(head.as_bytes());
    }

    /// A complete response. `headers` must not contain framing headers.
    fn respond(
        &mut self,
        status: u16,
        headers: &[(&str, String)],
        content_type: Option<&str>,
        body: &[u8],
        close: bool,
    ) {
        let mut all: Vec<(&str, String)> = headers.to_vec();
        if let Some(ct) = content_type {
            all.push(("Content-Type", ct.to_string()));
        }
        if self.tiny && !body.is_empty() {
            all.push(("Transfer-Encoding", "chunked".into()));
            self.head(status, &all, close);
            self.chunk(body);
            self.end_chunks();
        } else {
            all.push(("Content-Length", body.len().to_string()));
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (k, v) in &all {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            if close {
                head.push_str("Connection: close\r\n");
            }
            head.push_str("\r\n");
            let mut bytes = head.into_bytes();
            bytes.extend_from_slice(body);
            self.write(&bytes);
        }
    }

    fn json_error(&mut self, status: u16, message: &str, close: bool) {
        let body = error_response(&Value::Null, -32000, message).to_string();
        self.respond(
            status,
            &[],
            Some("application/json"),
            body.as_bytes(),
            close,
        );
    }

    fn next_chunk_len(&mut self) -> usize {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        1 + (self.rng % 3) as usize
    }

    /// One chunk of a chunked body (1-3 byte chunks, each written by its own
    /// write call, under `--tiny-chunks`).
    fn chunk(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.tiny {
            let mut rest = data;
            while !rest.is_empty() && !self.broken {
                let n = self.next_chunk_len().min(rest.len());
                let mut piece = format!("{n:x}\r\n").into_bytes();
                piece.extend_from_slice(&rest[..n]);
                piece.extend_from_slice(b"\r\n");
                self.write(&piece);
                rest = &rest[n..];
            }
        } else {
            let mut piece = format!("{:x}\r\n", data.len()).into_bytes();
            piece.extend_from_slice(data);
            piece.extend_from_slice(b"\r\n");
            self.write(&piece);
        }
    }

    fn end_chunks(&mut self) {
        self.write(b"0\r\n\r\n");
    }

    /// Has the client closed its side? (Used by idle listener streams.)
    fn client_gone(&self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut b = [0u8; 1];
        let gone = match self.stream.peek(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        };
        let _ = self.stream.set_nonblocking(false);
        gone
    }
}

fn sse_event(id: Option<&str>, retry: Option<u64>, data: &str) -> Vec<u8> {
    let mut ev = String::new();
    if let Some(id) = id {
        ev.push_str(&format!("id: {id}\n"));
    }
    if let Some(retry) = retry {
        ev.push_str(&format!("retry: {retry}\n"));
    }
    if data.is_empty() {
        ev.push_str("data:\n");
    } else {
        ev.push_str("event: message\n");
        for line in data.split('\n') {
            ev.push_str("data: ");
            ev.push_str(line);
            ev.push('\n');
        }
    }
    ev.push('\n');
    ev.into_bytes()
}

/// The SSE response of one request POST; the head is written on first use.
struct SseSink<'a> {
    wire: RefCell<&'a mut Wire>,
    /// The session of a 2025 request (`None`: 2026-07-28).
    session: Option<&'a Session>,
    /// Where its event ids come from.
    events: &'a AtomicU64,
    started: Cell<bool>,
    close: bool,
}

impl SseSink<'_> {
    fn start(&self) {
        if !self.started.replace(true) {
            let mut head = vec![
                ("Content-Type", "text/event-stream".to_string()),
                ("Cache-Control", "no-cache".into()),
                ("Transfer-Encoding", "chunked".into()),
            ];
            if let Some(session) = self.session {
                head.push(("Mcp-Session-Id", session.id.clone()));
            }
            self.wire.borrow_mut().head(200, &head, self.close);
        }
    }

    fn next_event_id(&self) -> String {
        format!("ev-{}", self.events.fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn event(&self, id: Option<&str>, retry: Option<u64>, data: &str) -> bool {
        self.start();
        let mut wire = self.wire.borrow_mut();
        wire.chunk(&sse_event(id, retry, data));
        !wire.broken
    }

    fn end(&self) {
        self.start();
        self.wire.borrow_mut().end_chunks();
    }
}

impl Outbound for SseSink<'_> {
    fn send(&self, msg: &Value) -> bool {
        let id = self.next_event_id();
        self.event(Some(&id), None, &msg.to_string())
    }
    fn send_raw(&self, text: &str) -> bool {
        let id = self.next_event_id();
        self.event(Some(&id), None, text)
    }
    fn send_on_listener(&self, msg: &Value) -> bool {
        match self.session {
            Some(session) => session.push_listener(msg),
            // 2026-07-28 has no listener stream.
            None => false,
        }
    }
    fn alive(&self) -> bool {
        let wire = self.wire.borrow();
        !wire.broken && !wire.client_gone()
    }
}

/// `--json-responses`: messages before the response go to the listener
/// stream (2026-07-28, which has none: nowhere).
struct ListenerSink<'a>(Option<&'a Session>);

impl Outbound for ListenerSink<'_> {
    fn send(&self, msg: &Value) -> bool {
        match self.0 {
            Some(session) => session.push_listener(msg),
            None => {
                eprintln!("mcpwire-test-server: --json-responses: no stream for {msg}");
                false
            }
        }
    }
    fn send_raw(&self, text: &str) -> bool {
        eprintln!("mcpwire-test-server: --json-responses: dropped raw {text:.80}");
        false
    }
}

/// Whether a `Host` or `Origin` value names this local server: loopback,
/// `localhost`, or a name of the reserved `.test` domain.
fn local_name(value: &str) -> bool {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"))
        .unwrap_or(value);
    let host = match rest.rsplit_once(':') {
        Some((h, port)) if !h.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => rest,
    }
    .to_ascii_lowercase();
    matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]" | "::1")
        || host.ends_with(".test")
        || host.ends_with(".localhost")
}

/// The 2026-07-28 era headers of a request POST, checked against its
/// body: `MCP-Protocol-Version` (the envelope's version), `Mcp-Method`,
/// and `Mcp-Name` (the name or URI of `tools/call`, `prompts/get`,
/// `resources/read`, and with `task_names` (`--conformance`) the
/// `taskId` of `tasks/get`, `tasks/update`, `tasks/cancel`; plain or
/// `=?base64?…?=`).
fn check_era_headers(
    req: &Request,
    method: &str,
    params: &Value,
    task_names: bool,
) -> Result<(), String> {
    let expect = |header: &str, want: &str| -> Result<(), String> {
        match req.header(header) {
            Some(v) if v == want => Ok(()),
            Some(v) if decode_header(v).as_deref() == Some(want) => Ok(()),
            Some(v) => Err(format!(
                "Header mismatch: {header} is {v:?}, the body says {want:?}"
            )),
            None => Err(format!("Header mismatch: {header} missing (want {want:?})")),
        }
    };
    let version = declared_version(params).unwrap_or(crate::protocol::MODERN_VERSION);
    expect("mcp-protocol-version", version)?;
    expect("mcp-method", method)?;
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" if task_names => "taskId",
        _ => return Ok(()),
    };
    match params[field].as_str() {
        Some(name) => expect("mcp-name", name)?,
        None => return Ok(()), // the method itself refuses it
    }
    if method == "tools/call" && task_names {
        check_param_headers(req, params)?;
    }
    Ok(())
}

/// `--conformance`: a `tools/call`'s `Mcp-Param-*` headers (SEP-2243)
/// against the arguments its tool marks `x-mcp-header`: an argument in
/// the body needs its header, whose value (plain, or strict
/// `=?base64?…?=`) is the argument's; a header without its argument is a
/// mismatch too.
fn check_param_headers(req: &Request, params: &Value) -> Result<(), String> {
    let name = params["name"].as_str().unwrap_or("");
    for (suffix, arg) in crate::protocol::conformance::header_params(name) {
        let header = format!("mcp-param-{}", suffix.to_ascii_lowercase());
        let body = match &params["arguments"][&arg] {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        match (req.header(&header), body) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(format!(
                "Header mismatch: Mcp-Param-{suffix} missing (its argument {arg} is in the body)"
            ))
            }
            (Some(_), None) => {
                return Err(format!(
                    "Header mismatch: Mcp-Param-{suffix} sent without its argument {arg}"
                ))
            }
            (Some(v), Some(want)) => {
                let got = if v.starts_with("=?base64?") && v.ends_with("?=") {
                    decode_header(v).ok_or_else(|| {
                        format!("Header mismatch: Mcp-Param-{suffix} is not valid base64")
                    })?
                } else {
                    v.to_owned()
                };
                if got != want {
                    return Err(format!(
                        "Header mismatch: Mcp-Param-{suffix} is {got:?}, the body says {want:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The value of an `=?base64?…?=` header (`None` if it is not one).
fn decode_header(v: &str) -> Option<String> {
    let b64 = v.strip_prefix("=?base64?")?.strip_suffix("?=")?;
    // Padded to a multiple of four, `=` only at the end (at most two).
    let body = b64.trim_end_matches('=');
    if b64.len() % 4 != 0 || b64.len() - body.len() > 2 {
        return None;
    }
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in b64.bytes().filter(|&c| c != b'=') {
        let d = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(d);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    String::from_utf8(out).ok()
}

// ---------------------------------------------------------------- server

struct Server {
    ctx: Arc<Ctx>,
    port: u16,
    /// `--redirect-cross-origin`: the port of the second listener.
    second_port: Option<u16>,
    /// `--oauth`: the authorization server and the guard of `/mcp`.
    oauth: Option<OAuth>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The 2026-07-28 requests in flight (no sessions: one peer for all).
    modern: Peer,
    /// Event ids of 2026-07-28 streams.
    modern_events: AtomicU64,
}

/// Keep the connection open after this response?
type KeepAlive = bool;

impl Server {
    fn serve(&self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let (read_half, write_half) = match (stream.try_clone(), stream.try_clone()) {
            (Ok(r), Ok(w)) => (r, w),
            _ => return,
        };
        let mut reader = Reader {
            stream: read_half,
            buf: Vec::new(),
        };
        let mut wire = Wire {
            stream: write_half,
            tiny: self.ctx.opts.tiny_chunks,
            rng: {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u8(0);
                h.finish() | 1
            },
            broken: false,
        };
        loop {
            let req = match reader.next() {
                Ok(Some(req)) => req,
                Ok(None) | Err(ReadError::Io) => break,
                Err(ReadError::Bad(status, msg)) => {
                    wire.respond(status, &[], Some("text/plain"), msg.as_bytes(), true);
                    break;
                }
            };
            let close = req.wants_close();
            let keep = self.handle(&req, &mut wire, close);
            if !keep || close || wire.broken {
                break;
            }
        }
        let _ = stream.shutdown(Shutdown::Both);
    }

    fn handle(&self, req: &Request, wire: &mut Wire, close: bool) -> KeepAlive {
        let ctx = &self.ctx;
        let path = req.path.split('?').next().unwrap_or("");
        ctx.log.http(&req.method, &req.path, &req.headers);
        if let Some(location) = self.redirect(path) {
            let status = ctx.opts.redirect_status;
            let body = format!("redirecting to {location}");
            let headers = [("Location", location)];
            wire.respond(status, &headers, Some("text/plain"), body.as_bytes(), close);
            return true;
        }
        // Behind the redirects, MCP is served at /mcp/.
        let path = match path {
            "/mcp/" if ctx.opts.redirect_hops > 0 => "/mcp",
            path => path,
        };

        if let Some(oauth) = &self.oauth {
            if let Some(delay) = oauth.hold(&req.method, &req.path, &req.body) {
                ctx.log.event("refresh_held", serde_json::json!({}));
                std::thread::sleep(delay);
                if wire.peer_gone() {
                    ctx.log.event("refresh_abandoned", serde_json::json!({}));
                    return false;
                }
            }
            if let Some(reply) = oauth.serve(&req.method, &req.path, &req.body, &ctx.log) {
                wire.respond(reply.status, &reply.headers, None, &reply.body, close);
                return true;
            }
            if path == crate::oauth::MCP_PATH {
                let auth = req.header("authorization");
                if let Guard::Deny(reply) = oauth.guard(auth, &req.method, &ctx.log) {
                    wire.respond(reply.status, &reply.headers, None, &reply.body, close);
                    return true;
                }
            }
        }
        if let Some(token) = &ctx.opts.require_auth {
            if path == "/.well-known/oauth-protected-resource"
                || path == "/.well-known/oauth-protected-resource/mcp"
            {
                let body = json!({
                    "resource": format!("http://127.0.0.1:{}/mcp", self.port),
                    "bearer_methods_supported": ["header"],
                });
                wire.respond(
                    200,
                    &[],
                    Some("application/json"),
                    body.to_string().as_bytes(),
                    close,
                );
                return true;
            }
            if path == "/mcp" && req.header("authorization") != Some(&format!("Bearer {token}")) {
                let challenge = format!(
                    "Bearer resource_metadata=\"http://127.0.0.1:{}/.well-known/oauth-protected-resource\"",
                    self.port
                );
                let body = json!({"error": "invalid_token",
                                  "error_description": "missing or wrong bearer token"});
                wire.respond(
                    401,
                    &[("WWW-Authenticate", challenge)],
                    Some("application/json"),
                    body.to_string().as_bytes(),
                    close,
                );
                return true;
            }
        }
        if path != "/mcp" {
            wire.respond(404, &[], Some("text/plain"), b"not found", close);
            return true;
        }
        // DNS rebinding (the spec's security warning for local servers): a
        // Host or Origin naming another site is refused. Names of the
        // reserved `.test` domain are the tests' own (through a proxy).
        let foreign = |v: &str| !local_name(v);
        if req.header("host").is_some_and(foreign) || req.header("origin").is_some_and(foreign) {
            ctx.log.event(
                "rebinding_refused",
                json!({"host": req.header("host"), "origin": req.header("origin")}),
            );
            let body = json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32600, "message": "Forbidden: Host or Origin is not this local server"}});
            wire.respond(
                403,
                &[],
                Some("application/json"),
                body.to_string().as_bytes(),
                close,
            );
            return true;
        }
        match req.method.as_str() {
            "POST" => self.post(req, wire, close),
            "GET" => self.get(req, wire, close),
            "DELETE" => self.delete(req, wire, close),
            _ => {
                wire.respond(
                    405,
                    &[("Allow", "GET, POST, DELETE".into())],
                    Some("text/plain"),
                    b"method not allowed",
                    close,
                );
                true
            }
        }
    }

    /// Where a request to `path` is redirected (`--redirect-*`), if it is.
    fn redirect(&self, path: &str) -> Option<String> {
        let o = &self.ctx.opts;
        if o.redirect_loop {
            return match path {
                "/mcp" => Some("/mcp/loop".into()),
                "/mcp/loop" => Some("/mcp".into()),
                _ => None,
            };
        }
        let step = match path {
            "/mcp" if o.redirect_hops > 0 => 0,
            _ => path
                .strip_prefix("/mcp/hop/")?
                .parse::<u32>()
                .ok()
                .filter(|k| (1..o.redirect_hops).contains(k))?,
        };
        let next = step + 1;
        Some(if next < o.redirect_hops {
            format!("/mcp/hop/{next}")
        } else if let Some(port) = self.second_port {
            format!("http://127.0.0.1:{port}/mcp/")
        } else {
            "/mcp/".into()
        })
    }

    /// The session named by the request's `Mcp-Session-Id` (400 if absent,
    /// 404 if unknown or ended).
    fn session_for(&self, req: &Request) -> Result<Arc<Session>, (u16, &'static str)> {
        let Some(id) = req.header("mcp-session-id") else {
            return Err((400, "Bad Request: missing Mcp-Session-Id header"));
        };
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or((404, "Session not found"))
    }

    fn end_session(&self, id: &str) {
        if let Some(session) = lock(&self.sessions).remove(id) {
            session.end();
            self.ctx.log.event("session_ended", json!({"session": id}));
        }
    }

    fn post(&self, req: &Request, wire: &mut Wire, close: bool) -> KeepAlive {
        let ct = req
            .header("content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        if !ct.starts_with("application/json") {
            wire.json_error(415, "Content-Type must be application/json", close);
            return true;
        }
        let accept = req.header("accept").unwrap_or("").to_ascii_lowercase();
        if !(accept.contains("*/*")
            || (accept.contains("application/json") && accept.contains("text/event-stream")))
        {
            wire.json_error(
                406,
                "Not Acceptable: Accept must list application/json and text/event-stream",
                close,
            );
            return true;
        }
        let msg: Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(_) => {
                self.ctx.log.invalid("http", &req.body);
                let body = error_response(&Value::Null, -32700, "Parse error").to_string();
                wire.respond(400, &[], Some("application/json"), body.as_bytes(), close);
                return true;
            }
        };
        self.ctx
            .log
            .message_in("http", &msg, req.header("mcp-session-id"));
        let incoming = classify(&msg);

        if let Some(keep) = self.post_modern(req, &incoming, wire, close) {
            return keep;
        }

        let session = match &incoming {
            Incoming::Request { method, .. } if method == "initialize" => {
                let session = Arc::new(Session {
                    id: random_token(),
                    peer: Peer::default(),
                    alive: AtomicBool::new(true),
                    initialized: AtomicBool::new(false),
                    answered: AtomicU64::new(0),
                    next_event: AtomicU64::new(0),
                    listeners: Mutex::new(Vec::new()),
                    resumable: Mutex::new(HashMap::new()),
                });
                // Legacy tasks' status notifications: on the listener stream.
                let weak = Arc::downgrade(&session);
                session.peer.set_notifier(Arc::new(move |msg: &Value| {
                    weak.upgrade().is_some_and(|s| s.push_listener(msg))
                }));
                lock(&self.sessions).insert(session.id.clone(), session.clone());
                self.ctx
                    .log
                    .event("session_created", json!({"session": session.id}));
                session
            }
            _ => match self.session_for(req) {
                Ok(s) => s,
                Err((status, message)) => {
                    wire.json_error(status, message, close);
                    return true;
                }
            },
        };
        if let Some(v) = req.header("mcp-protocol-version") {
            if !SUPPORTED_VERSIONS.contains(&v) {
                wire.json_error(400, "Bad Request: unsupported MCP-Protocol-Version", close);
                return true;
            }
        }

        if let Some(refused) = self.before_initialized(&session, &incoming) {
            wire.respond(
                400,
                &[],
                Some("application/json"),
                refused.to_string().as_bytes(),
                close,
            );
            return true;
        }

        if let Incoming::Request { method, .. } = &incoming {
            let spent = self
                .ctx
                .opts
                .expire_after
                .is_some_and(|n| session.answered.load(Ordering::SeqCst) >= n);
            if spent && method != "initialize" {
                // `--expire-after`: the request after the last one is the
                // first to find the session gone.
                self.end_session(&session.id);
                wire.json_error(404, "Session not found", close);
                return true;
            }
        }

        match incoming {
            Incoming::Notification { method, params } => {
                if method == "notifications/initialized" {
                    session.initialized.store(true, Ordering::SeqCst);
                }
                handle_notification(&self.ctx, &session.peer, &method, &params);
                wire.respond(202, &[], None, b"", close);
                true
            }
            Incoming::Response { id, message } => {
                if !session.peer.deliver(&id, message) {
                    eprintln!("mcpwire-test-server: response with unknown id {id}");
                }
                wire.respond(202, &[], None, b"", close);
                true
            }
            Incoming::Invalid { id, reason } => {
                let body = error_response(&id, -32600, &format!("Invalid Request: {reason}"));
                wire.respond(
                    400,
                    &[],
                    Some("application/json"),
                    body.to_string().as_bytes(),
                    close,
                );
                true
            }
            Incoming::Request { id, method, params } => self.request(
                Some(&session),
                Era::Legacy,
                &id,
                &method,
                &params,
                wire,
                close,
            ),
        }
    }

    /// A message of the 2026-07-28 era, served without a session: a
    /// request carrying the envelope (or `server/discover`), or a
    /// notification without `Mcp-Session-Id` to a server that speaks the
    /// era. `None`: not one (a 2025 message).
    fn post_modern(
        &self,
        req: &Request,
        incoming: &Incoming,
        wire: &mut Wire,
        close: bool,
    ) -> Option<KeepAlive> {
        if !self.ctx.opts.era.modern() {
            return None;
        }
        let refuse = |wire: &mut Wire, body: Value| {
            let body = body.to_string();
            wire.respond(400, &[], Some("application/json"), body.as_bytes(), close);
            Some(true)
        };
        match incoming {
            Incoming::Request { id, method, params } => {
                // The version header against the body's, before the
                // version itself is judged (SEP-2575: values that differ
                // are a mismatch, -32020; the same version not served is
                // -32022, below).
                if let (Some(header), Some(body)) =
                    (req.header("mcp-protocol-version"), declared_version(params))
                {
                    if header != body {
                        let why = format!(
                            "Header mismatch: mcp-protocol-version is {header:?}, the body says {body:?}"
                        );
                        return refuse(wire, error_response(id, -32020, &why));
                    }
                }
                match request_era(&self.ctx, id, method, params) {
                    Ok(Era::Legacy) => None,
                    Err(refusal) => refuse(wire, refusal),
                    Ok(Era::Modern) => {
                        let task_names = self.ctx.opts.conformance;
                        if let Err(why) = check_era_headers(req, method, params, task_names) {
                            self.ctx.log.event(
                                "header_mismatch",
                                json!({"id": id, "method": method, "why": why}),
                            );
                            return refuse(wire, error_response(id, -32020, &why));
                        }
                        Some(self.request(None, Era::Modern, id, method, params, wire, close))
                    }
                }
            }
            _ if req.header("mcp-session-id").is_some() => None,
            Incoming::Notification { method, params } => {
                // Of the era by its envelope or its era header (a
                // client's `notifications/cancelled` carries no envelope).
                let era_header =
                    req.header("mcp-protocol-version") == Some(crate::protocol::MODERN_VERSION);
                if !self.ctx.opts.era.legacy() || declared_version(params).is_some() || era_header {
                    handle_notification(&self.ctx, &self.modern, method, params);
                    wire.respond(202, &[], None, b"", close);
                    Some(true)
                } else {
                    None
                }
            }
            Incoming::Response { id, .. } if !self.ctx.opts.era.legacy() => refuse(
                wire,
                error_response(
                    id,
                    -32600,
                    "Bad Request: a 2026-07-28 server sends no requests to answer",
                ),
            ),
            _ => None,
        }
    }

    /// The error answer to a message that came before its session's
    /// `notifications/initialized` (a strict server's 400), if it must be
    /// refused: anything but `initialize`, `ping` and that notification.
    fn before_initialized(&self, session: &Session, incoming: &Incoming) -> Option<Value> {
        if session.initialized.load(Ordering::SeqCst) {
            return None;
        }
        let (id, what) = match incoming {
            Incoming::Request { method, .. } if method == "initialize" || method == "ping" => {
                return None
            }
            Incoming::Notification { method, .. } if method == "notifications/initialized" => {
                return None
            }
            Incoming::Request { id, method, .. } => (id.clone(), method.clone()),
            Incoming::Notification { method, .. } => (Value::Null, method.clone()),
            Incoming::Response { id, .. } => (id.clone(), "a response".into()),
            // Refused for what it is.
            Incoming::Invalid { .. } => return None,
        };
        self.ctx.log.event(
            "rejected_before_initialized",
            json!({"session": session.id, "what": what}),
        );
        Some(error_response(
            &id,
            -32600,
            &format!("Bad Request: {what} before notifications/initialized"),
        ))
    }

    /// Serves request `method` of `era`, in `session` (2025) or without
    /// one (2026-07-28).
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        session: Option<&Session>,
        era: Era,
        id: &Value,
        method: &str,
        params: &Value,
        wire: &mut Wire,
        close: bool,
    ) -> KeepAlive {
        let peer = session.map_or(&self.modern, |s| &s.peer);
        // A subscription is a stream whatever the flag says.
        let json_mode = self.ctx.opts.json_responses && method != "subscriptions/listen";
        let cancel = peer.begin(id);
        let sink = SseSink {
            wire: RefCell::new(wire),
            session,
            events: session.map_or(&self.modern_events, |s| &s.next_event),
            started: Cell::new(false),
            close,
        };
        // Tool calls get their SSE head at once (as real servers do), so that a
        // client sees 200 before a slow call ends; the tools that need another
        // status or no answer at all keep it back.
        let tool = params["name"].as_str().unwrap_or("");
        // Not in 2026-07-28, where some errors of a call must be a 400
        // (a missing client capability): its stream opens with its first
        // message instead.
        let streams_early = era != Era::Modern
            && ((method == "tools/call" && !matches!(tool, "http_500" | "crash"))
                || method == "tasks/result");
        if !json_mode && streams_early {
            sink.start();
        }
        let ctx = &self.ctx;
        let outcome = if json_mode {
            let listener = ListenerSink(session);
            handle_request(ctx, peer, era, id, method, params, &cancel, &listener)
        } else {
            handle_request(ctx, peer, era, id, method, params, &cancel, &sink)
        };
        peer.finish(id);
        let outcome = if cancel.load(Ordering::SeqCst) {
            Outcome::Silent
        } else {
            outcome
        };
        if let Some(session) = session.filter(|_| method != "initialize") {
            session.answered.fetch_add(1, Ordering::SeqCst);
        }
        let session_header: Vec<(&str, String)> = session
            .map(|s| ("Mcp-Session-Id", s.id.clone()))
            .into_iter()
            .collect();

        let reply = |v: &Value| {
            // 2026-07-28 over HTTP: a method not found is a 404 too (the
            // methods removed in that era included). Header mismatch,
            // missing capability, version not served: 400.
            let status = match v["error"]["code"].as_i64() {
                _ if era != Era::Modern => 200,
                Some(-32601) => 404,
                Some(-32022..=-32020) => 400,
                _ => 200,
            };
            if status != 200 && !sink.started.get() {
                sink.wire.borrow_mut().respond(
                    status,
                    &session_header,
                    Some("application/json"),
                    v.to_string().as_bytes(),
                    close,
                );
            } else if json_mode {
                sink.wire.borrow_mut().respond(
                    200,
                    &session_header,
                    Some("application/json"),
                    v.to_string().as_bytes(),
                    close,
                );
            } else {
                sink.send(v);
                sink.end();
            }
        };
        match outcome {
            Outcome::Reply(v) => reply(&v),
            Outcome::ExpireSession(v) => {
                // Gone before the answer leaves: whatever the client sends
                // once it has the answer meets the 404 (ending it after
                // the answer left a window, wide under load, in which
                // the next requests were still served).
                if let Some(session) = session {
                    self.end_session(&session.id);
                }
                reply(&v);
            }
            Outcome::Silent => {
                if json_mode && !sink.started.get() {
                    return false; // nothing to say: close without a response
                }
                sink.end();
            }
            Outcome::Crash { message, .. } => {
                eprintln!("{message}");
                let _ = sink.wire.borrow().stream.shutdown(Shutdown::Both);
                return false;
            }
            Outcome::Http500 => {
                if sink.started.get() {
                    sink.end();
                    return false;
                }
                sink.wire.borrow_mut().respond(
                    500,
                    &[],
                    Some("text/plain"),
                    b"boom: internal failure",
                    close,
                );
            }
            Outcome::SseDrop {
                after_ms,
                retry_ms,
                reply,
            } => {
                let event_id = sink.next_event_id();
                // 2025: the answer waits for a GET with Last-Event-ID;
                // 2026-07-28: there is none (the client asks again).
                if let (Some(session), Some(reply)) = (session, reply) {
                    lock(&session.resumable).insert(event_id.clone(), vec![reply]);
                }
                sink.event(Some(&event_id), Some(retry_ms), "");
                std::thread::sleep(Duration::from_millis(after_ms));
                sink.end();
            }
        }
        true
    }

    fn get(&self, req: &Request, wire: &mut Wire, close: bool) -> KeepAlive {
        let last_event_id = req.header("last-event-id");
        if last_event_id.is_none() && self.ctx.opts.no_listener {
            wire.respond(
                405,
                &[("Allow", "POST, DELETE".into())],
                Some("text/plain"),
                b"no listener stream here",
                close,
            );
            return true;
        }
        let accept = req.header("accept").unwrap_or("").to_ascii_lowercase();
        if !(accept.contains("text/event-stream") || accept.contains("*/*")) {
            wire.json_error(
                406,
                "Not Acceptable: Accept must list text/event-stream",
                close,
            );
            return true;
        }
        let session = match self.session_for(req) {
            Ok(s) => s,
            Err((status, message)) => {
                wire.json_error(status, message, close);
                return true;
            }
        };
        if !session.initialized.load(Ordering::SeqCst) {
            self.ctx.log.event(
                "rejected_before_initialized",
                json!({"session": session.id, "what": "GET"}),
            );
            wire.json_error(
                400,
                "Bad Request: GET before notifications/initialized",
                close,
            );
            return true;
        }
        let sse_head = [
            ("Content-Type", "text/event-stream".to_string()),
            ("Cache-Control", "no-cache".to_string()),
            ("Transfer-Encoding", "chunked".to_string()),
            ("Mcp-Session-Id", session.id.clone()),
        ];

        if let Some(last) = last_event_id {
            let Some(messages) = lock(&session.resumable).remove(last) else {
                wire.json_error(400, "Bad Request: unknown Last-Event-ID", close);
                return true;
            };
            wire.head(200, &sse_head, close);
            for m in messages {
                let id = session.next_event_id();
                wire.chunk(&sse_event(Some(&id), None, &m.to_string()));
            }
            wire.end_chunks();
            return true;
        }

        // The listener stream: open until the session ends or the client leaves.
        let (tx, rx) = mpsc::channel();
        {
            let mut listeners = lock(&session.listeners);
            if !session.alive.load(Ordering::SeqCst) {
                drop(listeners);
                wire.json_error(404, "Session not found", close);
                return true;
            }
            listeners.push(tx);
        }
        wire.head(200, &sse_head, close);
        let open = log_notification("mcpwire-test-server", "listener open");
        wire.chunk(&sse_event(
            Some(&session.next_event_id()),
            None,
            &open.to_string(),
        ));
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(msg) => {
                    let id = session.next_event_id();
                    wire.chunk(&sse_event(Some(&id), None, &msg.to_string()));
                    if wire.broken {
                        return false;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if wire.broken || wire.client_gone() {
                        return false;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    wire.end_chunks();
                    return true;
                }
            }
        }
    }

    fn delete(&self, req: &Request, wire: &mut Wire, close: bool) -> KeepAlive {
        match self.session_for(req) {
            Ok(session) => {
                self.end_session(&session.id);
                wire.respond(200, &[], None, b"", close);
            }
            Err((status, message)) => wire.json_error(status, message, close),
        }
        true
    }
}
