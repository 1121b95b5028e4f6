//! The raw baseline: no MCP library, no JSON parsing. The same request
//! bytes every time, written by hand to the same server; the reply is read
//! and only its text length is found by scanning.
//!
//! - stdio, sequential: write the line, read the reply line.
//! - stdio, N in flight: a writer thread and this reader, with a bounded
//!   channel of send times as the window (replies come back in order).
//! - HTTP: a keep-alive POST loop, one connection per thread in flight.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use mcpwire_bench::proto::{self, Call};

use crate::drive::{self, BlockingClient, Error, Recorder, Target};
use crate::scenario::{Job, Measured, Workload};

pub fn run(job: &Job, target: &Target) -> Result<Measured, Error> {
    match (target, job.variant.workload) {
        (Target::Stdio { .. }, Workload::Calls { inflight, .. }) if inflight > 1 => {
            pipelined(job, target)
        }
        (Target::Stdio { .. }, _) => drive::run_blocking::<RawStdio>(job, target),
        (Target::Http { .. }, _) => drive::run_blocking::<RawHttp>(job, target),
    }
}

// ----- stdio ---------------------------------------------------------------

struct RawStdio {
    child: Child,
    pipes: Mutex<Pipes>,
    request: OnceLock<Vec<u8>>,
}

struct Pipes {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl Pipes {
    fn read_line(&mut self) -> Result<&[u8], Error> {
        self.line.clear();
        if self.stdout.read_until(b'\n', &mut self.line)? == 0 {
            return Err("server closed stdout".into());
        }
        Ok(&self.line)
    }
}

/// The text length of a reply line (scan for `"text":"…"`).
fn text_len(reply: &[u8]) -> Result<usize, Error> {
    proto::find_text(reply)
        .map(<[u8]>::len)
        .ok_or_else(|| format!("no text in {:?}", String::from_utf8_lossy(reply)).into())
}

impl BlockingClient for RawStdio {
    fn connect(target: &Target) -> Result<Self, Error> {
        let Target::Stdio { command, args, .. } = target else {
            return Err("stdio only".into());
        };
        let mut child = Command::new(command)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut pipes = Pipes {
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::with_capacity(64 * 1024, child.stdout.take().expect("piped")),
            line: Vec::with_capacity(64 * 1024),
        };
        pipes.stdin.write_all(&proto::initialize_line(0))?;
        pipes.read_line()?;
        pipes.stdin.write_all(proto::INITIALIZED_LINE)?;
        Ok(RawStdio {
            child,
            pipes: Mutex::new(pipes),
            request: OnceLock::new(),
        })
    }

    fn call(&self, call: &Call) -> Result<usize, Error> {
        let request = self.request.get_or_init(|| call.request_line(1));
        let mut p = self.pipes.lock().expect("not poisoned");
        p.stdin.write_all(request)?;
        text_len(p.read_line()?)
    }

    fn close(mut self) -> Result<(), Error> {
        drop(self.pipes); // closes stdin: the server exits
        self.child.wait()?;
        Ok(())
    }
}

/// stdio with `inflight` requests outstanding: a writer thread sends, this
/// thread reads; the bounded channel of send times is the window.
fn pipelined(job: &Job, target: &Target) -> Result<Measured, Error> {
    let v = &job.variant;
    let Workload::Calls {
        call,
        calls,
        inflight,
    } = v.workload
    else {
        return Err("calls only".into());
    };
    let call = call.call();
    let request = call.request_line(1);
    let client = RawStdio::connect(target)?;
    let mut rec = Recorder::new(calls * v.runs);
    let window = |n: usize, rec: Option<(&Recorder, usize)>| -> Result<(), Error> {
        let mut p = client.pipes.lock().expect("not poisoned");
        let Pipes {
            stdin,
            stdout,
            line,
        } = &mut *p;
        let (sent_tx, sent_rx) = std::sync::mpsc::sync_channel::<Instant>(inflight - 1);
        std::thread::scope(|s| {
            let writer = s.spawn(|| -> Result<(), Error> {
                for _ in 0..n {
                    sent_tx.send(Instant::now())?;
                    stdin.write_all(&request)?;
                }
                Ok(())
            });
            for i in 0..n {
                line.clear();
                if stdout.read_until(b'\n', line)? == 0 {
                    return Err("server closed stdout".into());
                }
                let sent = sent_rx.recv()?;
                drive::check(&call, text_len(line)?)?;
                if let Some((rec, base)) = rec {
                    rec.record(base + i, sent.elapsed());
                }
            }
            writer.join().expect("writer panicked")
        })
    };
    window(v.warmup, None)?;
    for run in 0..v.runs {
        let start = Instant::now();
        window(calls, Some((&rec, run * calls)))?;
        rec.run(calls, start.elapsed());
    }
    let m = rec.finish();
    client.close()?;
    Ok(m)
}

// ----- HTTP ----------------------------------------------------------------

struct RawHttp {
    addr: SocketAddr,
    host: String,
    path: String,
    idle: Mutex<Vec<Conn>>,
    request: OnceLock<Vec<u8>>,
}

/// A keep-alive connection and its read buffer.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Conn {
    fn open(addr: SocketAddr) -> Result<Conn, Error> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        })
    }

    /// Reads more; compacts or grows the buffer first when it is full.
    fn fill(&mut self) -> Result<(), Error> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        match self.stream.read(&mut self.buf[self.end..])? {
            0 => Err("server closed the connection".into()),
            n => {
                self.end += n;
                Ok(())
            }
        }
    }

    /// Reads one response; its body (chunked framing removed) goes to
    /// `body`. Returns the status.
    fn response(&mut self, body: &mut Vec<u8>) -> Result<u16, Error> {
        body.clear();
        let (head, status, length, chunked) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut resp = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(n) = resp.parse(&self.buf[self.start..self.end])? {
                let mut length = 0;
                let mut chunked = false;
                for h in resp.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        length = std::str::from_utf8(h.value)?.trim().parse()?;
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                        chunked = h.value.eq_ignore_ascii_case(b"chunked");
                    }
                }
                break (n, resp.code.unwrap_or(0), length, chunked);
            }
            self.fill()?;
        };
        self.start += head;
        if !chunked {
            while self.end - self.start < length {
                self.fill()?;
            }
            body.extend_from_slice(&self.buf[self.start..self.start + length]);
            self.start += length;
        } else {
            loop {
                let line_end = loop {
                    if let Some(at) = proto::find(&self.buf[self.start..self.end], b"\r\n") {
                        break at;
                    }
                    self.fill()?;
                };
                let size_line = std::str::from_utf8(&self.buf[self.start..self.start + line_end])?;
                let size =
                    usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)?;
                self.start += line_end + 2;
                while self.end - self.start < size + 2 {
                    self.fill()?;
                }
                body.extend_from_slice(&self.buf[self.start..self.start + size]);
                self.start += size + 2; // data, CRLF (after the last chunk: no trailers)
                if size == 0 {
                    break;
                }
            }
        }
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        Ok(status)
    }
}

impl RawHttp {
    fn post(&self, body: &[u8]) -> Vec<u8> {
        let mut req = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
            self.path,
            self.host,
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        req
    }

    /// One exchange on an idle connection (or a new one), which goes back
    /// to the pool afterwards.
    fn exchange(&self, request: &[u8], body: &mut Vec<u8>) -> Result<u16, Error> {
        let conn = self.idle.lock().expect("not poisoned").pop();
        let mut conn = match conn {
            Some(c) => c,
            None => Conn::open(self.addr)?,
        };
        conn.stream.write_all(request)?;
        let status = conn.response(body)?;
        self.idle.lock().expect("not poisoned").push(conn);
        Ok(status)
    }
}

impl BlockingClient for RawHttp {
    fn connect(target: &Target) -> Result<Self, Error> {
        let Target::Http { url } = target else {
            return Err("http only".into());
        };
        let rest = url.strip_prefix("http://").ok_or("http:// URLs only")?;
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let client = RawHttp {
            addr: host.parse()?,
            host: host.to_string(),
            path: if path.is_empty() { "/" } else { path }.to_string(),
            idle: Mutex::new(Vec::new()),
            request: OnceLock::new(),
        };
        let mut body = Vec::new();
        let init = client.post(proto::initialize_line(0).trim_ascii_end());
        if client.exchange(&init, &mut body)? != 200 {
            return Err("initialize refused".into());
        }
        let initialized = client.post(proto::INITIALIZED_LINE.trim_ascii_end());
        client.exchange(&initialized, &mut body)?;
        Ok(client)
    }

    fn call(&self, call: &Call) -> Result<usize, Error> {
        let request = self
            .request
            .get_or_init(|| self.post(call.request_line(1).trim_ascii_end()));
        let mut body = Vec::with_capacity(1024);
        match self.exchange(request, &mut body)? {
            200 => text_len(&body),
            status => Err(format!("HTTP {status}").into()),
        }
    }

    fn close(self) -> Result<(), Error> {
        Ok(())
    }
}
