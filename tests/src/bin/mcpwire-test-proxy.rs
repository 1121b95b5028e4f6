//! `mcpwire-test-proxy`: a scriptable HTTP forward proxy for the tests,
//! on 127.0.0.1 only, written with std and httparse.
//!
//! - `CONNECT host:port` opens a tunnel (`200 Connection established`,
//!   then bytes both ways); any other method must carry an absolute
//!   `http://` URL and is forwarded with `Connection: close` (one request
//!   per client connection).
//! - `--require-auth USER:PASS`: a request without that `Proxy-Authorization:
//!   Basic` gets `407` with `Proxy-Authenticate: Basic realm="mcpwire-test-proxy"`.
//! - `--map NAME=IP`: `NAME` resolves to `IP` here and nowhere else (a
//!   client that reaches it went through the proxy). Other names are
//!   refused (`502`), and so is any address that is not loopback: the
//!   tests never leave the machine.
//! - `--refuse STATUS`: every request gets that status instead.
//! - `--log-file PATH`: one JSON line per request: `{"method", "target",
//!   "auth": "none"|"ok"|"wrong", "status", "ms"}` (`status` is the
//!   proxy's own answer; a forwarded request logs `"forwarded": true`).
//!
//! The first stdout line is `listening on http://127.0.0.1:PORT`; it exits
//! when stdin reaches EOF (unless `--ignore-stdin-eof`), like the test
//! server.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

const USAGE: &str = "\
usage: mcpwire-test-proxy [--port N] [--require-auth USER:PASS] [--map NAME=IP]...
                          [--refuse STATUS] [--log-file PATH] [--ignore-stdin-eof]
                          [--max-lifetime SECS]
An HTTP forward proxy on 127.0.0.1 (CONNECT tunnels, absolute-form http).
";

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 * 1024 * 1024;

struct Options {
    port: u16,
    auth: Option<String>,
    map: HashMap<String, IpAddr>,
    refuse: Option<u16>,
    log_file: Option<PathBuf>,
    ignore_stdin_eof: bool,
    max_lifetime: Duration,
}

fn parse(args: Vec<String>) -> Result<Options, String> {
    let mut o = Options {
        port: 0,
        auth: None,
        map: HashMap::new(),
        refuse: None,
        log_file: None,
        ignore_stdin_eof: false,
        max_lifetime: Duration::from_secs(300),
    };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--port" => o.port = value("--port")?.parse().map_err(|_| "bad --port")?,
            "--require-auth" => {
                let v = value("--require-auth")?;
                if !v.contains(':') {
                    return Err("--require-auth needs USER:PASS".into());
                }
                o.auth = Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(v)
                ));
            }
            "--map" => {
                let v = value("--map")?;
                let (name, ip) = v.split_once('=').ok_or("--map needs NAME=IP")?;
                let ip: IpAddr = ip
                    .parse()
                    .map_err(|_| format!("bad address in --map {v}"))?;
                if !ip.is_loopback() {
                    return Err(format!("--map {v}: only loopback addresses"));
                }
                o.map.insert(name.to_ascii_lowercase(), ip);
            }
            "--refuse" => o.refuse = Some(value("--refuse")?.parse().map_err(|_| "bad --refuse")?),
            "--log-file" => o.log_file = Some(PathBuf::from(value("--log-file")?)),
            "--ignore-stdin-eof" => o.ignore_stdin_eof = true,
            "--max-lifetime" => {
                let secs: u64 = value("--max-lifetime")?
                    .parse()
                    .map_err(|_| "bad --max-lifetime")?;
                o.max_lifetime = Duration::from_secs(secs);
            }
            "--help" | "-h" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(o)
}

struct Proxy {
    options: Options,
    log: Option<Mutex<File>>,
    start: Instant,
}

impl Proxy {
    fn log(&self, mut line: Value) {
        let Some(file) = &self.log else { return };
        line["ms"] = json!(self.start.elapsed().as_millis() as u64);
        let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(f, "{line}").and_then(|()| f.flush());
    }

    /// Where `host` is, by this proxy's own rules: mapped names, loopback
    /// addresses and `localhost` only.
    fn resolve(&self, host: &str) -> Option<IpAddr> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.to_ascii_lowercase();
        if let Some(ip) = self.options.map.get(&host) {
            return Some(*ip);
        }
        if host == "localhost" {
            return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        host.parse::<IpAddr>().ok().filter(IpAddr::is_loopback)
    }
}

fn main() {
    let options = match parse(std::env::args().skip(1).collect()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mcpwire-test-proxy: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let log = match &options.log_file {
        Some(path) => match OpenOptions::new().create(true).append(true).open(path) {
            Ok(f) => Some(Mutex::new(f)),
            Err(e) => {
                eprintln!("mcpwire-test-proxy: cannot open {}: {e}", path.display());
                std::process::exit(2);
            }
        },
        None => None,
    };
    let listener = match TcpListener::bind(("127.0.0.1", options.port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mcpwire-test-proxy: cannot listen: {e}");
            std::process::exit(1);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    if !options.max_lifetime.is_zero() {
        let limit = options.max_lifetime;
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            std::process::exit(0);
        });
    }
    if !options.ignore_stdin_eof {
        std::thread::spawn(|| {
            let mut sink = [0u8; 256];
            while let Ok(n) = io::stdin().read(&mut sink) {
                if n == 0 {
                    break;
                }
            }
            std::process::exit(0);
        });
    }
    let proxy = Arc::new(Proxy {
        options,
        log,
        start: Instant::now(),
    });
    println!("listening on http://127.0.0.1:{port}");
    let _ = io::stdout().flush();
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let proxy = proxy.clone();
        std::thread::spawn(move || {
            if let Err(e) = serve(&proxy, conn) {
                eprintln!("mcpwire-test-proxy: {e}");
            }
        });
    }
}

/// A request head as read: method, target, headers (names lower case),
/// and the bytes read after it.
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    rest: Vec<u8>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn read_head(stream: &mut TcpStream) -> io::Result<Option<Head>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(used)) => {
                return Ok(Some(Head {
                    method: req.method.unwrap_or("").to_owned(),
                    target: req.path.unwrap_or("").to_owned(),
                    headers: req
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_ascii_lowercase(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect(),
                    rest: buf[used..].to_vec(),
                }))
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            _ => return Err(io::Error::other("bad request head")),
        }
    }
}

fn answer(stream: &mut TcpStream, status: u16, reason: &str, extra: &str) {
    let body = format!("{status} {reason}\n");
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn serve(proxy: &Proxy, mut client: TcpStream) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let Some(head) = read_head(&mut client)? else {
        return Ok(());
    };
    let auth = match (&proxy.options.auth, head.header("proxy-authorization")) {
        (_, None) => "none",
        (Some(want), Some(got)) if got == want => "ok",
        (Some(_), Some(_)) => "wrong",
        (None, Some(_)) => "ok",
    };
    let mut entry = json!({"method": head.method, "target": head.target, "auth": auth});
    if proxy.options.auth.is_some() && auth != "ok" {
        entry["status"] = json!(407);
        proxy.log(entry);
        answer(
            &mut client,
            407,
            "Proxy Authentication Required",
            "Proxy-Authenticate: Basic realm=\"mcpwire-test-proxy\"\r\n",
        );
        return Ok(());
    }
    if let Some(status) = proxy.options.refuse {
        entry["status"] = json!(status);
        proxy.log(entry);
        answer(&mut client, status, "Refused By Test Proxy", "");
        return Ok(());
    }
    if head.method == "CONNECT" {
        tunnel(proxy, client, head, entry)
    } else {
        forward(proxy, client, head, entry)
    }
}

/// `host:port` (`[v6]:port`) split.
fn split_authority(authority: &str) -> Option<(&str, u16)> {
    let (host, port) = authority.rsplit_once(':')?;
    Some((host, port.parse().ok()?))
}

fn tunnel(proxy: &Proxy, mut client: TcpStream, head: Head, mut entry: Value) -> io::Result<()> {
    let target = split_authority(&head.target).and_then(|(h, p)| Some((proxy.resolve(h)?, p)));
    let Some((ip, port)) = target else {
        entry["status"] = json!(502);
        proxy.log(entry);
        answer(&mut client, 502, "Unknown Host", "");
        return Ok(());
    };
    let upstream =
        match TcpStream::connect_timeout(&SocketAddr::new(ip, port), Duration::from_secs(5)) {
            Ok(s) => s,
            Err(_) => {
                entry["status"] = json!(502);
                proxy.log(entry);
                answer(&mut client, 502, "Cannot Connect", "");
                return Ok(());
            }
        };
    entry["status"] = json!(200);
    proxy.log(entry);
    client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    let mut upstream_w = upstream.try_clone()?;
    if !head.rest.is_empty() {
        upstream_w.write_all(&head.rest)?;
    }
    pump_both(client, upstream)
}

/// Copies bytes both ways until each side ends.
fn pump_both(client: TcpStream, upstream: TcpStream) -> io::Result<()> {
    let _ = upstream.set_nodelay(true);
    let (mut c_r, mut c_w) = (client.try_clone()?, client);
    let (mut u_r, mut u_w) = (upstream.try_clone()?, upstream);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut c_r, &mut u_w);
        let _ = u_w.shutdown(Shutdown::Write);
    });
    let _ = io::copy(&mut u_r, &mut c_w);
    let _ = c_w.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

fn forward(proxy: &Proxy, mut client: TcpStream, head: Head, mut entry: Value) -> io::Result<()> {
    let Some(rest) = head.target.strip_prefix("http://") else {
        entry["status"] = json!(400);
        proxy.log(entry);
        answer(&mut client, 400, "Not An Absolute http URL", "");
        return Ok(());
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = split_authority(authority).unwrap_or((authority, 80));
    let Some(ip) = proxy.resolve(host) else {
        entry["status"] = json!(502);
        proxy.log(entry);
        answer(&mut client, 502, "Unknown Host", "");
        return Ok(());
    };
    let length: usize = head
        .header("content-length")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    if head.header("transfer-encoding").is_some() || length > MAX_BODY {
        entry["status"] = json!(411);
        proxy.log(entry);
        answer(&mut client, 411, "Length Required", "");
        return Ok(());
    }
    let mut body = head.rest.clone();
    while body.len() < length {
        let mut chunk = [0u8; 8192];
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let mut upstream =
        match TcpStream::connect_timeout(&SocketAddr::new(ip, port), Duration::from_secs(5)) {
            Ok(s) => s,
            Err(_) => {
                entry["status"] = json!(502);
                proxy.log(entry);
                answer(&mut client, 502, "Cannot Connect", "");
                return Ok(());
            }
        };
    entry["forwarded"] = json!(true);
    proxy.log(entry);
    let mut out = format!("{} {path} HTTP/1.1\r\n", head.method);
    for (name, value) in &head.headers {
        if !matches!(
            name.as_str(),
            "proxy-authorization" | "proxy-connection" | "connection" | "keep-alive"
        ) {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    out.push_str("connection: close\r\n\r\n");
    upstream.write_all(out.as_bytes())?;
    upstream.write_all(&body)?;
    upstream.flush()?;
    // The answer goes back as it comes, until the server closes. A client
    // that hangs up first ends the exchange too.
    pump_both(client, upstream)
}
