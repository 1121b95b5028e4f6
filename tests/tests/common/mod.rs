//! Raw JSONL / raw HTTP helpers for driving `mcpwire-test-server` in tests.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_mcpwire-test-server");
pub const T: Duration = Duration::from_secs(5);

/// A fresh path for a server log (`--log-file`).
#[allow(unused_imports)]
pub use mcpwire_tests::suite::support::temp_log as temp_path;

/// Reads the `--log-file` lines as JSON values.
pub fn read_log(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line is JSON"))
        .collect()
}

/// Polls the log until `pred` holds for some line.
pub fn wait_log(path: &PathBuf, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + T;
    loop {
        if let Some(v) = read_log(path).into_iter().find(|v| pred(v)) {
            return v;
        }
        assert!(Instant::now() < deadline, "log line never appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------- stdio

pub struct StdioServer {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: mpsc::Receiver<String>,
    pub stderr: mpsc::Receiver<String>,
}

impl StdioServer {
    pub fn spawn(args: &[&str]) -> StdioServer {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn test server");
        let stdin = child.stdin.take();
        let lines = pump(child.stdout.take().unwrap());
        let stderr = pump(child.stderr.take().unwrap());
        StdioServer {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    pub fn send(&mut self, msg: &Value) {
        self.send_raw(&msg.to_string());
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn line(&self) -> String {
        self.lines.recv_timeout(T).expect("a stdout line in time")
    }

    pub fn next(&self) -> Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:.200}"))
    }

    /// Sends a request and returns the messages received up to and including
    /// its response.
    pub fn call(&mut self, id: i64, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut before = Vec::new();
        loop {
            let msg = self.next();
            if msg["id"] == json!(id) && msg.get("method").is_none() {
                return (before, msg);
            }
            before.push(msg);
        }
    }

    pub fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.call(id, method, params).1
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw-test", "version": "0"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn stderr_text(&self) -> String {
        let mut s = String::new();
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            s.push_str(&l);
            s.push('\n');
        }
        s
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pump(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if line.ends_with('\n') {
                        line.pop();
                    }
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

pub fn tool_text(resp: &Value) -> &str {
    resp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {resp}"))
}

// ---------------------------------------------------------------- HTTP

pub struct HttpServer {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub port: u16,
}

impl HttpServer {
    pub fn spawn(args: &[&str]) -> HttpServer {
        let mut child = Command::new(BIN)
            .arg("--http")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn test server");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on http://127.0.0.1:")
            .and_then(|r| r.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        HttpServer {
            stdin: child.stdin.take(),
            child,
            port,
        }
    }

    pub fn conn(&self) -> Conn {
        Conn::open(self.port)
    }

    /// Initializes a session on a fresh connection; returns the session id.
    pub fn initialize(&self) -> String {
        let mut c = self.conn();
        let r = c.post(None, &init_msg(1));
        assert_eq!(r.status, 200, "initialize: {r:?}");
        let sid = r
            .header("mcp-session-id")
            .expect("session header")
            .to_string();
        let reply = r.messages();
        assert_eq!(reply.last().unwrap()["id"], 1);
        let r = c.post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(r.status, 202);
        sid
    }

    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn init_msg(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "raw-test", "version": "0"}}})
}

pub fn call_msg(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
}

#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub id: Option<String>,
    pub retry: Option<u64>,
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {:?}", self.data))
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Sizes of the body's chunks when chunked.
    pub chunks: Vec<usize>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn events(&self) -> Vec<SseEvent> {
        parse_sse(&self.text())
    }

    /// JSON-RPC messages of the body, whether JSON or SSE.
    pub fn messages(&self) -> Vec<Value> {
        let ct = self.header("content-type").unwrap_or("");
        if ct.starts_with("application/json") {
            vec![serde_json::from_slice(&self.body).unwrap()]
        } else {
            assert!(ct.starts_with("text/event-stream"), "content-type {ct:?}");
            self.events()
                .iter()
                .filter(|e| !e.data.is_empty())
                .map(SseEvent::json)
                .collect()
        }
    }
}

pub fn parse_sse(text: &str) -> Vec<SseEvent> {
    let mut events = Vec::new();
    let mut cur = SseEvent::default();
    let mut has = false;
    let mut data_lines: Vec<String> = Vec::new();
    for line in text.split('\n') {
        if line.is_empty() {
            if has {
                cur.data = data_lines.join("\n");
                events.push(std::mem::take(&mut cur));
                data_lines.clear();
                has = false;
            }
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        has = true;
        match field {
            "id" => cur.id = Some(value.to_string()),
            "retry" => cur.retry = value.parse().ok(),
            "event" => cur.event = Some(value.to_string()),
            "data" => data_lines.push(value.to_string()),
            _ => {}
        }
    }
    events
}

/// A raw HTTP/1.1 connection.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
    port: u16,
    pub extra_headers: Vec<(String, String)>,
}

/// Where an incrementally read body stands.
struct BodyState {
    chunked: bool,
    remaining: Option<usize>,
    done: bool,
}

impl Conn {
    pub fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(T)).unwrap();
        Conn {
            stream,
            buf: Vec::new(),
            port,
            extra_headers: Vec::new(),
        }
    }

    pub fn send_head(&mut self, method: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut req = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n",
            self.port
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        for (k, v) in &self.extra_headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if method == "POST" {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.stream.write_all(&bytes).unwrap();
    }

    /// POST one message; reads the whole response.
    pub fn post(&mut self, session: Option<&str>, msg: &Value) -> Response {
        self.start_post(session, msg);
        self.read_response()
    }

    pub fn start_post(&mut self, session: Option<&str>, msg: &Value) {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
            headers.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        self.send_head("POST", &headers, msg.to_string().as_bytes());
    }

    pub fn start_get(&mut self, session: &str, last_event_id: Option<&str>) {
        let mut headers = vec![("Accept", "text/event-stream"), ("Mcp-Session-Id", session)];
        if let Some(l) = last_event_id {
            headers.push(("Last-Event-ID", l));
        }
        self.send_head("GET", &headers, b"");
    }

    fn fill(&mut self) -> usize {
        let mut tmp = [0u8; 65536];
        let n = self.stream.read(&mut tmp).expect("read from server");
        self.buf.extend_from_slice(&tmp[..n]);
        n
    }

    /// Reads a response head.
    pub fn read_head(&mut self) -> (u16, Vec<(String, String)>) {
        loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            if let httparse::Status::Complete(n) = r.parse(&self.buf).expect("valid response head")
            {
                let status = r.code.unwrap();
                let headers = r
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                self.buf.drain(..n);
                return (status, headers);
            }
            assert!(self.fill() > 0, "connection closed before a response head");
        }
    }

    pub fn read_response(&mut self) -> Response {
        let (status, headers) = self.read_head();
        let mut resp = Response {
            status,
            headers,
            body: Vec::new(),
            chunks: Vec::new(),
        };
        let mut state = self.body_state(&resp);
        while let Some(piece) = self.read_body_piece(&mut state) {
            resp.chunks.push(piece.len());
            resp.body.extend_from_slice(&piece);
        }
        resp
    }

    fn body_state(&self, resp: &Response) -> BodyState {
        let chunked = resp
            .header("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"));
        let remaining = if chunked {
            None
        } else {
            Some(
                resp.header("content-length")
                    .map(|l| l.parse().unwrap())
                    .unwrap_or(0),
            )
        };
        BodyState {
            chunked,
            remaining,
            done: false,
        }
    }

    /// The next chunk (or the whole Content-Length body); `None` at its end.
    fn read_body_piece(&mut self, st: &mut BodyState) -> Option<Vec<u8>> {
        if st.done {
            return None;
        }
        if !st.chunked {
            let len = st.remaining.unwrap();
            while self.buf.len() < len {
                assert!(self.fill() > 0, "EOF in body");
            }
            st.done = true;
            return if len == 0 {
                None
            } else {
                Some(self.buf.drain(..len).collect())
            };
        }
        let (consumed, size) = loop {
            match httparse::parse_chunk_size(&self.buf).expect("valid chunk size") {
                httparse::Status::Complete(v) => break v,
                httparse::Status::Partial => assert!(self.fill() > 0, "EOF before chunk size"),
            }
        };
        let size = size as usize;
        while self.buf.len() < consumed + size + 2 {
            assert!(self.fill() > 0, "EOF in chunk");
        }
        let data: Vec<u8> = self.buf[consumed..consumed + size].to_vec();
        assert_eq!(&self.buf[consumed + size..consumed + size + 2], b"\r\n");
        self.buf.drain(..consumed + size + 2);
        if size == 0 {
            st.done = true;
            return None;
        }
        Some(data)
    }

    /// Starts reading a streamed (SSE) response: returns the head and an
    /// event reader.
    pub fn sse(&mut self) -> SseReader<'_> {
        let (status, headers) = self.read_head();
        let resp = Response {
            status,
            headers,
            body: Vec::new(),
            chunks: Vec::new(),
        };
        let state = self.body_state(&resp);
        SseReader {
            conn: self,
            head: resp,
            state,
            text: String::new(),
        }
    }

    /// True once the server has closed the connection (EOF).
    pub fn is_closed(&mut self) -> bool {
        let mut tmp = [0u8; 64];
        matches!(self.stream.read(&mut tmp), Ok(0))
            || matches!(self.stream.read(&mut tmp), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }
}

pub struct SseReader<'a> {
    conn: &'a mut Conn,
    pub head: Response,
    state: BodyState,
    text: String,
}

impl SseReader<'_> {
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// The next event; `None` when the stream ends.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                if let Some(ev) = parse_sse(&block).into_iter().next() {
                    return Some(ev);
                }
                continue;
            }
            let piece = self.conn.read_body_piece(&mut self.state)?;
            self.text.push_str(std::str::from_utf8(&piece).unwrap());
        }
    }

    /// Next event carrying a JSON message (skips priming events).
    pub fn next_message(&mut self) -> Option<Value> {
        loop {
            let ev = self.next_event()?;
            if !ev.data.is_empty() {
                return Some(ev.json());
            }
        }
    }
}
