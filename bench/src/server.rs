//! The minimal echo MCP server every client talks to, so that the client is
//! what is measured: no MCP library, no JSON parser — a line in, a canned
//! line out, with the request's `id` and the echo argument copied in.
//!
//! ```text
//! bench-echo-server                 stdio: JSONL on stdin/stdout
//! bench-echo-server --http json     Streamable HTTP on 127.0.0.1:<port>, JSON responses
//! bench-echo-server --http sse      … answers as a one-event SSE stream (chunked)
//! ```
//!
//! In HTTP mode it prints `PORT <n>` on stdout once listening, serves each
//! keep-alive connection on its own thread, and exits when stdin closes.
//! Methods: `initialize` (echoes the requested protocol version),
//! `ping`, `tools/list`, `tools/call` of `echo` and `big`; notifications and
//! client responses get no answer (HTTP: 202); anything else gets -32601.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;

use crate::proto::{find, raw_value, string_value};

/// Protocol versions the server speaks, oldest first.
const VERSIONS: &[&[u8]] = &[b"2024-11-05", b"2025-03-26", b"2025-06-18", b"2025-11-25"];

/// Session id given on `initialize` over HTTP.
const SESSION_ID: &str = "bench-session";

const TOOLS: &str = r#"{"tools":[{"name":"echo","description":"Returns its text argument","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},{"name":"big","description":"Returns a text of the given number of bytes","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}}]}"#;

/// What a message asked for, as far as the transport needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A notification or a client response: nothing to send.
    None,
    /// A response was appended.
    Response,
    /// The `initialize` response was appended (HTTP adds the session id).
    Initialized,
}

/// What a request before `initialize` (other than `initialize` and
/// `ping`) gets from the stdio server: as servers of the handshake era
/// treat the era probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreInit {
    /// An error (-32601), as the TypeScript SDK answers.
    #[default]
    Error,
    /// The process exits (status 1), as the official Rust SDK before 3.x
    /// does.
    Exit,
    /// No answer at all.
    Silent,
}

/// Builds the canned responses; caches the `big` texts by size.
#[derive(Default)]
pub struct Responder {
    big: HashMap<usize, Vec<u8>>,
    pre_init: PreInit,
    initialized: bool,
}

impl Responder {
    /// A responder with an empty cache.
    pub fn new() -> Responder {
        Responder::default()
    }

    /// A responder that treats early requests as `pre_init` says.
    pub fn with_pre_init(pre_init: PreInit) -> Responder {
        Responder {
            pre_init,
            ..Responder::default()
        }
    }

    /// Appends the response to one JSON-RPC message (no newline) to `out`.
    pub fn respond(&mut self, message: &[u8], out: &mut Vec<u8>) -> Answer {
        let Some(method) = string_value(message, b"\"method\":") else {
            return Answer::None; // a response to a server request
        };
        let Some(id) = raw_value(message, b"\"id\":") else {
            return Answer::None; // a notification
        };
        if method == b"initialize" {
            self.initialized = true;
        } else if !self.initialized && method != b"ping" {
            match self.pre_init {
                PreInit::Error => {}
                PreInit::Exit => std::process::exit(1),
                PreInit::Silent => return Answer::None,
            }
        }
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        out.extend_from_slice(id);
        match method {
            b"tools/call" => {
                out.extend_from_slice(b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"");
                // Not "the first name": a client's `_meta` may carry a
                // clientInfo name before the tool's.
                if find(message, b"\"name\":\"echo\"").is_some() {
                    let text = string_value(message, b"\"text\":").unwrap_or_default();
                    out.extend_from_slice(text);
                } else if find(message, b"\"name\":\"big\"").is_some() {
                    {
                        let n = raw_value(message, b"\"bytes\":")
                            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
                            .unwrap_or(0usize);
                        let text = self.big.entry(n).or_insert_with(|| big_text(n));
                        out.extend_from_slice(text);
                    }
                } else {
                    out.extend_from_slice(b"unknown tool");
                }
                out.extend_from_slice(b"\"}],\"isError\":false}}");
                Answer::Response
            }
            b"initialize" => {
                // Negotiates as a 2025-11-25 server: the requested version
                // if it knows it, else its latest.
                let version = string_value(message, b"\"protocolVersion\":")
                    .filter(|v| VERSIONS.contains(v))
                    .unwrap_or(VERSIONS[VERSIONS.len() - 1]);
                out.extend_from_slice(b",\"result\":{\"protocolVersion\":\"");
                out.extend_from_slice(version);
                out.extend_from_slice(
                    b"\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"bench-echo-server\",\"version\":\"0.1.0\"}}}",
                );
                Answer::Initialized
            }
            b"ping" => {
                out.extend_from_slice(b",\"result\":{}}");
                Answer::Response
            }
            b"tools/list" => {
                out.extend_from_slice(b",\"result\":");
                out.extend_from_slice(TOOLS.as_bytes());
                out.push(b'}');
                Answer::Response
            }
            _ => {
                out.extend_from_slice(
                    b",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}",
                );
                Answer::Response
            }
        }
    }
}

/// `n` bytes of printable text.
fn big_text(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Serves JSONL on stdin/stdout until stdin closes. Every complete line of
/// a read is answered, and the answers of one read go out in one write.
pub fn serve_stdio(pre_init: PreInit) -> io::Result<()> {
    let mut input = std::fs::File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let mut output = std::fs::File::from(io::stdout().as_fd().try_clone_to_owned()?);
    let mut responder = Responder::with_pre_init(pre_init);
    let mut buf = vec![0u8; 64 * 1024];
    let (mut start, mut end) = (0, 0);
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        if end == buf.len() {
            if start > 0 {
                buf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            } else {
                buf.resize(buf.len() * 2, 0);
            }
        }
        let n = match input.read(&mut buf[end..]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        end += n;
        while let Some(nl) = memchr::memchr(b'\n', &buf[start..end]) {
            let line = &buf[start..start + nl];
            if responder.respond(line, &mut out) != Answer::None {
                out.push(b'\n');
            }
            start += nl + 1;
        }
        if start == end {
            (start, end) = (0, 0);
        }
        if !out.is_empty() {
            output.write_all(&out)?;
            out.clear();
        }
    }
}

/// Serves Streamable HTTP on 127.0.0.1 (any port, printed as `PORT <n>`)
/// until stdin closes. `sse` answers requests with an SSE stream instead
/// of a JSON body.
pub fn serve_http(sse: bool) -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    {
        let mut stdout = io::stdout().lock();
        writeln!(stdout, "PORT {port}")?;
        stdout.flush()?;
    }
    std::thread::spawn(|| {
        let mut sink = [0u8; 256];
        let mut stdin = io::stdin().lock();
        while !matches!(stdin.read(&mut sink), Ok(0) | Err(_)) {}
        std::process::exit(0);
    });
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::spawn(move || {
            let _ = serve_connection(stream, sse);
        });
    }
    Ok(())
}

/// One keep-alive connection: request after request until the peer closes.
fn serve_connection(mut stream: TcpStream, sse: bool) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut responder = Responder::new();
    let mut buf = vec![0u8; 16 * 1024];
    let (mut start, mut end) = (0usize, 0usize);
    let mut body = Vec::with_capacity(16 * 1024);
    let mut out = Vec::with_capacity(16 * 1024);
    loop {
        // Parse a head from what we have, reading more as needed.
        let (head_len, method, content_length, close) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[start..end]) {
                Ok(httparse::Status::Complete(n)) => {
                    let mut length = 0usize;
                    let mut close = false;
                    for h in req.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            length = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse().ok())
                                .unwrap_or(0);
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            close = h.value.eq_ignore_ascii_case(b"close");
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            // Not needed by any client measured here.
                            stream.write_all(
                                b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                            )?;
                            return Ok(());
                        }
                    }
                    let method = match req.method {
                        Some("POST") => Method::Post,
                        Some("GET") => Method::Get,
                        Some("DELETE") => Method::Delete,
                        _ => Method::Other,
                    };
                    break (n, method, length, close);
                }
                Ok(httparse::Status::Partial) => {
                    if !fill(&mut stream, &mut buf, &mut start, &mut end)? {
                        return Ok(());
                    }
                }
                Err(_) => {
                    stream.write_all(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )?;
                    return Ok(());
                }
            }
        };
        while end - start < head_len + content_length {
            if !fill(&mut stream, &mut buf, &mut start, &mut end)? {
                return Ok(());
            }
        }
        let message = &buf[start + head_len..start + head_len + content_length];
        out.clear();
        match method {
            Method::Post => {
                body.clear();
                match responder.respond(message, &mut body) {
                    Answer::None => {
                        out.extend_from_slice(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                    }
                    answer => {
                        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
                        if answer == Answer::Initialized {
                            out.extend_from_slice(b"mcp-session-id: ");
                            out.extend_from_slice(SESSION_ID.as_bytes());
                            out.extend_from_slice(b"\r\n");
                        }
                        if sse {
                            const PRE: &[u8] = b"event: message\ndata: ";
                            let len = PRE.len() + body.len() + 2;
                            let _ = write!(
                                out,
                                "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n{len:x}\r\n"
                            );
                            out.extend_from_slice(PRE);
                            out.extend_from_slice(&body);
                            out.extend_from_slice(b"\n\n\r\n0\r\n\r\n");
                        } else {
                            let _ = write!(
                                out,
                                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                                body.len()
                            );
                            out.extend_from_slice(&body);
                        }
                    }
                }
            }
            Method::Get => out.extend_from_slice(
                b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST, DELETE\r\nContent-Length: 0\r\n\r\n",
            ),
            Method::Delete => out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            Method::Other => {
                out.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            }
        }
        stream.write_all(&out)?;
        start += head_len + content_length;
        if start == end {
            (start, end) = (0, 0);
        }
        if close {
            return Ok(());
        }
    }
}

enum Method {
    Post,
    Get,
    Delete,
    Other,
}

/// Reads more into `buf[end..]`, compacting or growing first when full.
/// False at end of stream.
fn fill(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    start: &mut usize,
    end: &mut usize,
) -> io::Result<bool> {
    if *end == buf.len() {
        if *start > 0 {
            buf.copy_within(*start..*end, 0);
            *end -= *start;
            *start = 0;
        } else {
            buf.resize(buf.len() * 2, 0);
        }
    }
    loop {
        match stream.read(&mut buf[*end..]) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                *end += n;
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn answer(msg: &str) -> (Answer, Option<Value>) {
        let mut out = Vec::new();
        let a = Responder::new().respond(msg.as_bytes(), &mut out);
        let v = (!out.is_empty()).then(|| serde_json::from_slice(&out).expect("valid JSON"));
        (a, v)
    }

    #[test]
    fn echo_copies_id_and_text() {
        let (a, v) = answer(
            r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi there"}}}"#,
        );
        assert_eq!(a, Answer::Response);
        let v = v.unwrap();
        assert_eq!(v["id"], 42);
        assert_eq!(v["result"]["content"][0]["text"], "hi there");
    }

    #[test]
    fn big_returns_n_bytes_and_string_ids_survive() {
        let (_, v) = answer(
            r#"{"method":"tools/call","params":{"_meta":{"clientInfo":{"name":"x"}},"name":"big","arguments":{"bytes":1000}},"id":"r-1","jsonrpc":"2.0"}"#,
        );
        let v = v.unwrap();
        assert_eq!(v["id"], "r-1");
        assert_eq!(
            v["result"]["content"][0]["text"].as_str().unwrap().len(),
            1000
        );
    }

    #[test]
    fn initialize_echoes_version_and_notifications_are_silent() {
        let (a, v) = answer(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
        );
        assert_eq!(a, Answer::Initialized);
        assert_eq!(v.unwrap()["result"]["protocolVersion"], "2025-06-18");
        let (_, v) = answer(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2099-01-01"}}"#,
        );
        assert_eq!(v.unwrap()["result"]["protocolVersion"], "2025-11-25");
        let (a, v) = answer(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!((a, v), (Answer::None, None));
        let (_, v) = answer(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        assert_eq!(v.unwrap()["result"]["tools"][1]["name"], "big");
        let (_, v) = answer(r#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#);
        assert_eq!(v.unwrap()["error"]["code"], -32601);
    }
}
