//! `mcpwire bridge`: a host on stdio in front of any target. The host is
//! the TypeScript SDK's own client (from .deps/, installed by
//! `scripts/test`), or raw JSON-RPC lines where a case needs a host that
//! misbehaves or a clock; the targets are real processes and servers:
//! `mcpwire serve --demo`, the test server over stdio and over HTTP.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{test_server, BIN};
use mcpwire_tests::suite::support::{fresh_cache_home, http_server};
use serde_json::{json, Value};

fn node_modules() -> PathBuf {
    let modules = std::env::var_os("MCPWIRE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../.deps/node/node_modules")
        });
    assert!(
        modules.join("@modelcontextprotocol/sdk/package.json").is_file(),
        "the TypeScript SDK is not in {}: run `scripts/test` (it installs it) or set MCPWIRE_NODE_MODULES",
        modules.display()
    );
    modules
}

/// Runs a host script (`cmd`, its arguments so far) with `spec`; the JSON
/// line it printed last.
fn run_host(mut cmd: Command, spec: Value) -> Value {
    let out = cmd
        .arg(spec.to_string())
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .stdin(Stdio::null())
        .output()
        .expect("run the host");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "host failed: {stderr}\n{stdout}");
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// Runs the TypeScript SDK host with `spec`; what it printed.
fn ts_host(spec: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bridge/host.mjs");
    let node = std::env::var("MCPWIRE_NODE").unwrap_or_else(|_| "node".into());
    let mut cmd = Command::new(node);
    cmd.arg(script).arg(node_modules());
    run_host(cmd, spec)
}

/// `mcpwire bridge` with `bridge_args`, as the host's command.
fn bridged(bridge_args: &[&str]) -> Value {
    let mut args = vec!["bridge".to_string()];
    args.extend(bridge_args.iter().map(|s| s.to_string()));
    json!({"command": BIN, "args": args})
}

#[test]
fn the_typescript_client_calls_the_demo_server_through_the_bridge() {
    // The bridge speaks each era to the demo server (which speaks both).
    for era in ["legacy", "modern"] {
        typescript_client_through_the_bridge(era);
    }
}

fn typescript_client_through_the_bridge(era: &str) {
    let mut spec = bridged(&[
        "--era",
        era,
        "--deny-tool",
        "ad?",
        "--",
        BIN,
        "serve",
        "--demo",
    ]);
    spec["steps"] = json!([
        {"call": "echo", "args": {"message": "through the bridge"}},
        {"call": "add", "args": {"a": 1, "b": 2}},
        {"call": "countdown", "args": {"n": 3}, "progress": true},
    ]);
    let out = ts_host(spec);
    assert_eq!(out["server"]["name"], "mcpwire-demo", "{out}");
    let tools = out["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("echo")), "{out}");
    assert!(!tools.contains(&json!("add")), "denied, yet listed: {out}");
    let steps = &out["steps"];
    assert_eq!(
        steps[0]["result"]["content"][0]["text"], "through the bridge",
        "{out}"
    );
    // A 2026-07-28 target's result, in the handshake era's shape.
    assert!(steps[0]["result"].get("resultType").is_none(), "{out}");
    assert_eq!(
        steps[1]["error"]["code"], -32602,
        "denied, yet called: {out}"
    );
    assert!(
        steps[2]["progress"].as_u64().unwrap() >= 1,
        "progress not relayed: {out}"
    );
}

#[test]
fn the_typescript_client_reaches_an_http_server_through_a_stdio_bridge() {
    let server = http_server(&[]);
    let mut spec = bridged(&["--url", &server.url]);
    spec["steps"] = json!([
        {"call": "echo", "args": {"message": "over http"}},
        // The target asks the host (roots/list), through the bridge.
        {"call": "ask", "args": {"method": "roots/list"}},
        {"call": "slow", "args": {"ms": 200, "steps": 4}, "progress": true},
    ]);
    let out = ts_host(spec);
    let steps = &out["steps"];
    assert_eq!(
        steps[0]["result"]["content"][0]["text"], "Echo: over http",
        "{out}"
    );
    let asked = steps[1]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(asked.contains("file:///tmp/bridge-root"), "{out}");
    assert_eq!(out["rootsAsked"], 1, "{out}");
    assert!(steps[2]["progress"].as_u64().unwrap() >= 1, "{out}");
}

/// The bridge driven by raw lines: a host that can misbehave.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
}

impl Raw {
    fn start(args: &[&str], marker: &str) -> Raw {
        let mut child = Command::new(BIN)
            .arg("bridge")
            .args(args)
            .env("XDG_CACHE_HOME", fresh_cache_home())
            .env("MCPWIRE_BRIDGE_TEST", marker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn bridge");
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).expect("the bridge writes JSON lines");
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Raw {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// The answer to request `id` (notifications skipped), within `wait`.
    fn answer(&self, id: u64, wait: Duration) -> Value {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {id} within {wait:?}"));
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Every line up to the first that `done` accepts (included), within
    /// `wait`.
    fn until(&self, wait: Duration, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("nothing awaited within {wait:?}: {seen:?}"));
            let last = done(&v);
            seen.push(v);
            if last {
                return seen;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}));
        let v = self.answer(0, Duration::from_secs(30));
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        v
    }

    fn call(&mut self, id: u64, tool: &str, args: Value) {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}));
    }

    /// Closes stdin; the bridge's exit status within `wait`.
    fn hang_up(&mut self, wait: Duration) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + wait;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the bridge did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes whose environment carries `marker` (the bridge's children
/// inherit it).
fn processes_with(marker: &str) -> Vec<u32> {
    let needle = format!("MCPWIRE_BRIDGE_TEST={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .collect()
}

fn marker(tag: &str) -> String {
    format!("{tag}-{}-{:?}", std::process::id(), Instant::now())
}

#[test]
fn a_host_that_hangs_up_stops_the_target() {
    let mark = marker("hangup");
    let server = test_server();
    let mut b = Raw::start(&["--", &server], &mark);
    let init = b.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(processes_with(&mark).len(), 2, "the bridge and its target");
    // A call in flight when the host goes.
    b.call(1, "slow", json!({"ms": 60000}));
    std::thread::sleep(Duration::from_millis(200));
    assert!(b.hang_up(Duration::from_secs(20)).success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_with(&mark).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            processes_with(&mark)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_target_that_crashes_or_never_answers_is_an_error_not_a_hang() {
    let server = test_server();
    let mut b = Raw::start(&["--timeout", "1500", "--", &server], &marker("faults"));
    b.initialize();
    // Never answers within the limit: -32001, and the target is told.
    b.call(1, "slow", json!({"ms": 60000}));
    let v = b.answer(1, Duration::from_secs(20));
    assert_eq!(v["error"]["code"], -32001, "{v}");
    // Cancelled by the host: no answer at all, and the bridge goes on.
    b.call(2, "slow", json!({"ms": 60000}));
    std::thread::sleep(Duration::from_millis(100));
    b.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}));
    b.call(3, "echo", json!({"message": "still here"}));
    let v = b.answer(3, Duration::from_secs(20));
    assert_eq!(v["result"]["content"][0]["text"], "Echo: still here", "{v}");
    // The target dies mid-call: an error for it and for what follows.
    b.call(4, "crash", json!({"code": 3, "message": "bye"}));
    let v = b.answer(4, Duration::from_secs(20));
    assert!(v["error"]["code"].is_i64(), "{v}");
    b.call(5, "echo", json!({"message": "anyone?"}));
    let v = b.answer(5, Duration::from_secs(20));
    assert!(
        v["error"]["message"].as_str().unwrap().contains("target"),
        "{v}"
    );
    assert!(b.hang_up(Duration::from_secs(20)).success());
}

#[test]
fn a_target_that_cannot_start_fails_initialize() {
    let mut b = Raw::start(&["--", "/nonexistent/mcp-server"], &marker("nostart"));
    b.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}));
    let v = b.answer(0, Duration::from_secs(30));
    assert_eq!(v["error"]["code"], -32603, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot connect"),
        "{v}"
    );
    assert!(b.hang_up(Duration::from_secs(20)).success());
}

/// `mcpwire bridge --listen 127.0.0.1:0 …`, running; its URL.
struct Listener {
    child: Child,
    url: String,
}

impl Listener {
    fn start(args: &[&str], marker: &str) -> Listener {
        let mut child = Command::new(BIN)
            .args(["bridge", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("XDG_CACHE_HOME", fresh_cache_home())
            .env("MCPWIRE_BRIDGE_TEST", marker)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn bridge --listen");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .expect("the listening line");
        let url = first
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("not a listening line: {first:?}"))
            .to_owned();
        Listener { child, url }
    }

    fn port(&self) -> u16 {
        self.url
            .trim_end_matches("/mcp")
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// One HTTP/1.1 exchange on a fresh connection: status, headers
    /// (lowercase names), body.
    fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        use std::io::Read;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n",
            body.len()
        );
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("host: 127.0.0.1:{}\r\n", self.port()));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .unwrap_or_default()
            .split(' ')
            .nth(1)
            .unwrap_or("0")
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        (status, headers, body.to_owned())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[test]
fn the_typescript_client_calls_the_demo_server_through_bridge_listen() {
    for era in ["legacy", "modern"] {
        typescript_client_through_bridge_listen(era);
    }
}

fn typescript_client_through_bridge_listen(era: &str) {
    let l = Listener::start(
        &[
            "--era",
            era,
            "--deny-tool",
            "add",
            "--",
            BIN,
            "serve",
            "--demo",
        ],
        &marker("listen-demo"),
    );
    let out = ts_host(json!({"url": l.url, "steps": [
        {"call": "echo", "args": {"message": "over the listener"}},
        {"call": "add", "args": {"a": 1, "b": 2}},
        {"call": "countdown", "args": {}, "progress": true},
    ]}));
    let tools = out["tools"].as_array().unwrap();
    assert!(
        tools.contains(&json!("echo")) && !tools.contains(&json!("add")),
        "{out}"
    );
    let steps = &out["steps"];
    assert_eq!(
        steps[0]["result"]["content"][0]["text"], "over the listener",
        "{out}"
    );
    assert_eq!(steps[1]["error"]["code"], -32602, "{out}");
    assert!(steps[2]["progress"].as_u64().unwrap() >= 1, "{out}");
}

#[test]
fn bridge_listen_relays_the_targets_requests_on_the_session_stream() {
    let server = test_server();
    let l = Listener::start(&["--", &server], &marker("listen-ask"));
    let out = ts_host(json!({"url": l.url, "steps": [
        {"call": "ask", "args": {"method": "roots/list"}},
    ]}));
    let asked = out["steps"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(asked.contains("file:///tmp/bridge-root"), "{out}");
    assert_eq!(out["rootsAsked"], 1, "{out}");
}

#[test]
fn bridge_listen_checks_origin_host_sessions_and_ends_a_session_with_its_target() {
    let mark = marker("listen-http");
    let server = test_server();
    let l = Listener::start(&["--", &server], &mark);
    let json_post = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let (status, _, body) = l.http("GET", "/healthz", &[], "");
    assert_eq!((status, body.trim()), (200, "ok"));
    // DNS rebinding: another Host or Origin is refused before anything.
    let evil_host = [
        ("host", "evil.example:80"),
        ("content-type", "application/json"),
    ];
    assert_eq!(l.http("POST", "/mcp", &evil_host, INIT).0, 403);
    let evil_origin = [
        ("origin", "http://evil.example"),
        ("content-type", "application/json"),
    ];
    assert_eq!(l.http("POST", "/mcp", &evil_origin, INIT).0, 403);
    assert_eq!(
        processes_with(&mark).len(),
        1,
        "no target started for refused requests"
    );
    // Sessions: none yet, an unknown one, then a real one.
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(l.http("POST", "/mcp", &json_post, list).0, 400);
    let unknown = [json_post[0], json_post[1], ("mcp-session-id", "nope")];
    assert_eq!(l.http("POST", "/mcp", &unknown, list).0, 404);
    let (status, headers, body) = l.http("POST", "/mcp", &json_post, INIT);
    assert_eq!(status, 200, "{body}");
    let init: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{body}");
    let sid = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .expect("a session id");
    assert_eq!(
        processes_with(&mark).len(),
        2,
        "the bridge and the session's target"
    );
    let with = [
        json_post[0],
        ("accept", "application/json"),
        ("mcp-session-id", &sid),
    ];
    let (status, _, body) = l.http("POST", "/mcp", &with, list);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"echo\""), "{body}");
    let bad_version = [
        json_post[0],
        ("mcp-session-id", &sid),
        ("mcp-protocol-version", "1999-01-01"),
    ];
    assert_eq!(l.http("POST", "/mcp", &bad_version, list).0, 400);
    // DELETE ends the session and stops its target.
    assert_eq!(
        l.http("DELETE", "/mcp", &[("mcp-session-id", &sid)], "").0,
        200
    );
    assert_eq!(l.http("POST", "/mcp", &with, list).0, 404);
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with(&mark).len() > 1 {
        assert!(
            Instant::now() < deadline,
            "the session's target left running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bridge_listen_needs_a_bearer_off_loopback_and_checks_it() {
    let o = Command::new(BIN)
        .args([
            "bridge",
            "--listen",
            "0.0.0.0:0",
            "--",
            BIN,
            "serve",
            "--demo",
        ])
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let l = Listener::start(
        &["--bearer", "s3cret", "--", BIN, "serve", "--demo"],
        &marker("bearer"),
    );
    let post = [
        ("content-type", "application/json"),
        ("accept", "application/json"),
    ];
    assert_eq!(l.http("POST", "/mcp", &post, INIT).0, 401);
    let wrong = [post[0], post[1], ("authorization", "Bearer nope")];
    assert_eq!(l.http("POST", "/mcp", &wrong, INIT).0, 401);
    let right = [post[0], post[1], ("authorization", "Bearer s3cret")];
    assert_eq!(l.http("POST", "/mcp", &right, INIT).0, 200);
}

fn python() -> PathBuf {
    let python = std::env::var_os("MCPWIRE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.deps/venv/bin/python"));
    assert!(
        python.is_file(),
        "the Python venv with `mcp` is not at {}: run `scripts/test` (it installs it) or set MCPWIRE_PYTHON",
        python.display()
    );
    python
}

/// Runs the Python SDK host with `spec`; what it printed.
fn py_host(spec: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bridge/host.py");
    let mut cmd = Command::new(python());
    cmd.arg(script);
    run_host(cmd, spec)
}

fn python_steps() -> Value {
    json!([
        {"call": "echo", "args": {"message": "python host"}},
        {"call": "add", "args": {"a": 1, "b": 2}},
        {"call": "ask", "args": {"method": "roots/list"}},
        {"call": "slow", "args": {"ms": 200, "steps": 4}, "progress": true},
    ])
}

fn check_python(out: &Value) {
    let steps = &out["steps"];
    assert!(
        !out["tools"].as_array().unwrap().contains(&json!("add")),
        "{out}"
    );
    assert_eq!(
        steps[0]["result"]["content"][0]["text"], "Echo: python host",
        "{out}"
    );
    assert_eq!(steps[1]["error"]["code"], -32602, "{out}");
    let asked = steps[2]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(asked.contains("file:///tmp/bridge-root"), "{out}");
    assert!(steps[3]["progress"].as_u64().unwrap() >= 1, "{out}");
}

#[test]
fn the_python_client_through_the_bridge_over_stdio_and_http() {
    let server = test_server();
    let mut spec = bridged(&["--deny-tool", "add", "--", &server]);
    spec["steps"] = python_steps();
    check_python(&py_host(spec));
    let l = Listener::start(&["--deny-tool", "add", "--", &server], &marker("py-listen"));
    check_python(&py_host(json!({"url": l.url, "steps": python_steps()})));
}

#[test]
fn server_everything_behind_the_bridge() {
    let modules = node_modules();
    let entry = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    let node = std::env::var("MCPWIRE_NODE").unwrap_or_else(|_| "node".into());
    let entry = entry.to_string_lossy();
    let mut spec = bridged(&["--", &node, &entry, "stdio"]);
    spec["steps"] = json!([{"call": "echo", "args": {"message": "everything"}}]);
    let out = ts_host(spec);
    assert!(
        out["tools"].as_array().unwrap().contains(&json!("get-sum")),
        "{out}"
    );
    let text = out["steps"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("everything"), "{out}");
}

#[test]
fn a_lost_session_and_a_64_mib_line_reach_the_host_as_answers() {
    // The HTTP target ends its session after 2 requests: the bridge's
    // client starts a new one, and the host sees nothing of it.
    let server = http_server(&["--expire-after", "2"]);
    let mut b = Raw::start(&["--url", &server.url], &marker("expire"));
    b.initialize();
    for id in 1..=5 {
        b.call(id, "echo", json!({"message": format!("call {id}")}));
        let v = b.answer(id, Duration::from_secs(30));
        assert_eq!(
            v["result"]["content"][0]["text"],
            format!("Echo: call {id}"),
            "{v}"
        );
    }
    assert!(b.hang_up(Duration::from_secs(20)).success());
    // A stdio target writes a 64 MiB line (over the client's limit): an
    // error for that call, and the bridge goes on.
    let server = test_server();
    let mut b = Raw::start(&["--", &server], &marker("bigline"));
    b.initialize();
    b.call(1, "big", json!({"bytes": 64 << 20}));
    let v = b.answer(1, Duration::from_secs(60));
    assert!(
        v["error"]["code"].is_i64(),
        "{}",
        &v.to_string()[..200.min(v.to_string().len())]
    );
    b.call(2, "echo", json!({"message": "after"}));
    let v = b.answer(2, Duration::from_secs(30));
    assert_eq!(v["result"]["content"][0]["text"], "Echo: after", "{v}");
    assert!(b.hang_up(Duration::from_secs(20)).success());
}

#[test]
fn a_host_config_entry_running_the_bridge_is_listed_by_servers() {
    let server = http_server(&[]);
    let dir = std::env::temp_dir().join(format!("mcpwire-bridge-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("mcp.json");
    let entry = json!({"mcpServers": {"remote": {"command": BIN, "args": ["bridge", "--url", server.url]}}});
    std::fs::write(&cfg, entry.to_string()).unwrap();
    let o = Command::new(BIN)
        .args(["servers", "--config", cfg.to_str().unwrap(), "--json"])
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("HOME", &dir)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{}{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    let listing: Value = serde_json::from_str(&stdout).unwrap();
    let remote = listing
        .as_array()
        .or_else(|| listing["servers"].as_array())
        .and_then(|a| a.iter().find(|s| s["name"] == "remote"))
        .unwrap_or_else(|| panic!("{listing}"));
    assert_eq!(remote["status"], "connected", "{remote}");
    assert!(remote["tools"].as_u64().unwrap() >= 5, "{remote}");
    // And a call through it.
    let o = Command::new(BIN)
        .args([
            "call",
            "echo",
            "message=via the config",
            "--server",
            "remote",
            "--config",
            cfg.to_str().unwrap(),
        ])
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .env("HOME", &dir)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("via the config"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends one HTTP request on a fresh connection and reads the response
/// until `until` shows in it (or the connection ends); what was read.
fn read_until(port: u16, request: &str, until: &str) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(until) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    // Dropped here: the client loses the stream.
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn bridge_listen_answers_are_resumable_after_a_lost_stream() {
    let server = test_server();
    let l = Listener::start(&["--", &server], &marker("resume"));
    let post = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let (_, headers, _) = l.http("POST", "/mcp", &post, INIT);
    let sid = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .unwrap();
    let port = l.port();
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1500,"steps":3}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-session-id: {sid}\r\ncontent-length: {}\r\n\r\n{call}",
        call.len()
    );
    // The answer's stream starts with a priming event: an id, a retry,
    // no data. The connection is then dropped, long before the answer.
    let primed = read_until(port, &request, "\n\n");
    assert!(primed.contains("retry: 1000"), "{primed}");
    let id: u64 = primed
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no event id: {primed}"));
    // Resumed with GET and Last-Event-ID: the answer comes there.
    let get = format!(
        "GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: text/event-stream\r\nmcp-session-id: {sid}\r\nlast-event-id: {id}\r\n\r\n"
    );
    let resumed = read_until(port, &get, "\"id\":7");
    assert!(resumed.contains("slow done: 3 steps"), "{resumed}");
    // An event no longer kept (or never sent): 404.
    let gone = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", sid.as_str()),
        ("last-event-id", "999999"),
    ];
    assert_eq!(l.http("GET", "/mcp", &gone, "").0, 404);
}

/// `mcpwire ARGS` (a client of ours); its stdout, which must be a success.
fn mcpwire(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .stdin(Stdio::null())
        .output()
        .expect("run mcpwire");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "mcpwire {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A 2026-07-28 request's `_meta` envelope.
fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}

#[test]
fn a_2026_host_reaches_targets_of_either_era_through_the_stdio_bridge() {
    let server = test_server();
    for era in ["legacy", "modern"] {
        let target = ["--", BIN, "bridge", "--", &server, "--era", era];
        // Our own client, speaking 2026-07-28 only, as the host.
        let info = mcpwire(&[&["info", "--era", "modern"][..], &target[..]].concat());
        assert!(info.contains("2026-07-28"), "{era}: {info}");
        let args = [
            &["call", "echo", "message=hi", "--json", "--era", "modern"][..],
            &target[..],
        ];
        let out: Value = serde_json::from_str(&mcpwire(&args.concat())).unwrap();
        assert_eq!(out["content"][0]["text"], "Echo: hi", "{era}: {out}");

        // Raw lines: what the host is answered, exactly.
        let mut b = Raw::start(&["--", &server, "--era", era], &marker("modern-host"));
        b.send(json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":envelope()}}));
        let d = b.answer(1, Duration::from_secs(30));
        let r = &d["result"];
        assert_eq!(r["supportedVersions"][0], "2026-07-28", "{era}: {d}");
        assert_eq!(r["resultType"], "complete", "{era}: {d}");
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpwire-test-server",
            "{era}: {d}"
        );
        b.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":envelope()}}));
        let l = b.answer(2, Duration::from_secs(30));
        assert_eq!(l["result"]["resultType"], "complete", "{era}: {l}");
        assert!(l["result"]["ttlMs"].is_u64(), "{era}: {l}");
        b.send(json!({"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":envelope()}}));
        assert_eq!(
            b.answer(3, Duration::from_secs(30))["error"]["code"],
            -32601
        );
        let mut no_caps = envelope();
        no_caps
            .as_object_mut()
            .unwrap()
            .remove("io.modelcontextprotocol/clientCapabilities");
        b.send(json!({"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":no_caps}}));
        assert_eq!(
            b.answer(4, Duration::from_secs(30))["error"]["code"],
            -32602
        );
        assert!(b.hang_up(Duration::from_secs(20)).success());
    }
}

#[test]
fn bridge_listen_serves_2026_requests_without_a_session() {
    let server = test_server();
    let l = Listener::start(
        &["--", &server, "--era", "legacy"],
        &marker("listen-modern"),
    );
    let out: Value = serde_json::from_str(&mcpwire(&[
        "call",
        "echo",
        "message=stateless",
        "--json",
        "--era",
        "modern",
        "--url",
        &l.url,
    ]))
    .unwrap();
    assert_eq!(out["content"][0]["text"], "Echo: stateless", "{out}");

    let post = |method: &str, params: Value, headers: &[(&str, &str)]| {
        let body = json!({"jsonrpc":"2.0","id":9,"method":method,"params":params}).to_string();
        let mut h = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        h.extend_from_slice(headers);
        let (status, _, body) = l.http("POST", "/mcp", &h, &body);
        // JSON, or an SSE answer: its last event's data.
        let json = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .rfind(|d| !d.is_empty())
            .unwrap_or(&body);
        (
            status,
            serde_json::from_str::<Value>(json).unwrap_or(Value::Null),
        )
    };
    let era = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "server/discover"),
    ];
    let (status, d) = post("server/discover", json!({"_meta": envelope()}), &era);
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["result"]["supportedVersions"][0], "2026-07-28", "{d}");
    let call = json!({"name": "echo", "arguments": {"message": "raw"}, "_meta": envelope()});
    let good = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];
    let (status, r) = post("tools/call", call.clone(), &good);
    assert_eq!(
        (status, &r["result"]["resultType"]),
        (200, &json!("complete")),
        "{r}"
    );
    assert_eq!(r["result"]["content"][0]["text"], "Echo: raw", "{r}");
    // The headers must say what the body says.
    let wrong_name = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "add"),
    ];
    let (status, r) = post("tools/call", call.clone(), &wrong_name);
    assert_eq!((status, &r["error"]["code"]), (400, &json!(-32020)), "{r}");
    let wrong_version = [("mcp-protocol-version", "2025-11-25")];
    let (status, r) = post("tools/call", call, &wrong_version);
    assert_eq!((status, &r["error"]["code"]), (400, &json!(-32020)), "{r}");
    // A version not served, in header and body alike: -32022.
    let mut future = envelope();
    future["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let (status, r) = post(
        "tools/list",
        json!({"_meta": future}),
        &[
            ("mcp-protocol-version", "2099-01-01"),
            ("mcp-method", "tools/list"),
        ],
    );
    assert_eq!((status, &r["error"]["code"]), (400, &json!(-32022)), "{r}");
    // Removed in 2026-07-28: not found, with a 404.
    let ping = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "ping"),
    ];
    let (status, r) = post("ping", json!({"_meta": envelope()}), &ping);
    assert_eq!((status, &r["error"]["code"]), (404, &json!(-32601)), "{r}");
    // A method nobody knows: 404, though the client takes SSE.
    let unknown = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "no/such"),
    ];
    let (status, r) = post("no/such", json!({"_meta": envelope()}), &unknown);
    assert_eq!((status, &r["error"]["code"]), (404, &json!(-32601)), "{r}");
    // The target's request comes back as an input round; the retry
    // carries the answer to it.
    let mut meta = envelope();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"roots": {}});
    let ask = json!({"name": "ask", "arguments": {"method": "roots/list"}, "_meta": meta});
    let ask_headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "ask"),
    ];
    let (status, round) = post("tools/call", ask.clone(), &ask_headers);
    assert_eq!(status, 200, "{round}");
    let r = &round["result"];
    assert_eq!(r["resultType"], "input_required", "{round}");
    let (key, request) = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["method"], "roots/list", "{round}");
    let mut retry = ask;
    retry["inputResponses"] =
        json!({ key.as_str(): {"roots": [{"uri": "file:///tmp/http-round"}]} });
    retry["requestState"] = r["requestState"].clone();
    let (status, done) = post("tools/call", retry, &ask_headers);
    assert_eq!(
        (status, &done["result"]["resultType"]),
        (200, &json!("complete")),
        "{done}"
    );
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("file:///tmp/http-round"), "{done}");
    // Without the envelope but with the era's header: invalid params.
    let list = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    let (status, r) = post("tools/list", json!({}), &list);
    assert_eq!((status, &r["error"]["code"]), (400, &json!(-32602)), "{r}");
}

#[test]
fn a_2026_host_hears_list_changes_on_its_listen_whatever_the_targets_era() {
    let server = test_server();
    for era in ["legacy", "modern"] {
        let mut b = Raw::start(&["--", &server, "--era", era], &marker("modern-listen"));
        let listen = json!({"notifications": {"toolsListChanged": true}, "_meta": envelope()});
        b.send(json!({"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":listen}));
        let ack = b.until(Duration::from_secs(30), |v| v["method"].is_string());
        let ack = ack.last().unwrap();
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{era}: {ack}"
        );
        assert_eq!(
            ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            1
        );
        let call = json!({"name": "notify_first", "arguments": {"count": 1}, "_meta": envelope()});
        b.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":call}));
        let seen = b.until(Duration::from_secs(30), |v| {
            v["method"] == "notifications/tools/list_changed"
        });
        let change = seen.last().unwrap();
        assert_eq!(
            change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
            "{era}: {seen:?}"
        );
        // The host ends its listen; later changes reach nobody.
        b.send(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}),
        );
        b.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":call}));
        b.send(json!({"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":envelope()}}));
        // (One more round trip: a change relayed late would be seen.)
        let after = b.until(Duration::from_secs(30), |v| v["id"] == 4);
        assert!(
            !after
                .iter()
                .any(|v| v["method"] == "notifications/tools/list_changed"),
            "{era}: {after:?}"
        );
        assert!(b.hang_up(Duration::from_secs(20)).success());
    }
}

#[test]
fn bridge_listen_serves_a_2026_clients_listen_stream() {
    use std::io::Read;
    let server = test_server();
    for era in ["legacy", "modern"] {
        let l = Listener::start(&["--", &server, "--era", era], &marker("listen-sub"));
        let body = json!({"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{
            "notifications": {"toolsListChanged": true}, "_meta": envelope()}})
        .to_string();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", l.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
             mcp-method: subscriptions/listen\r\ncontent-length: {}\r\n\r\n{body}",
            l.port(),
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut got = String::new();
        let read_until = |s: &mut std::net::TcpStream, got: &mut String, until: &str| {
            let mut buf = [0u8; 4096];
            while !got.contains(until) {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => panic!("{era}: the stream ended before {until:?}: {got}"),
                    Ok(n) => got.push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        };
        read_until(&mut s, &mut got, "notifications/subscriptions/acknowledged");
        assert!(
            got.contains(r#""io.modelcontextprotocol/subscriptionId":"sub""#),
            "{got}"
        );
        let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
            "name": "notify_first", "arguments": {"count": 1}, "_meta": envelope()}})
        .to_string();
        let headers = [
            ("content-type", "application/json"),
            ("accept", "application/json"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "notify_first"),
        ];
        let (status, _, answer) = l.http("POST", "/mcp", &headers, &call);
        assert_eq!(status, 200, "{era}: {answer}");
        read_until(&mut s, &mut got, "notifications/tools/list_changed");
        let change = got
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .find(|d| d.contains("tools/list_changed"))
            .unwrap();
        let change: Value = serde_json::from_str(change).unwrap();
        assert_eq!(
            change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "sub",
            "{era}: {change}"
        );
    }
}

#[test]
fn tasks_pass_through_the_bridge_within_an_era_and_run_inline_across_eras() {
    // Both sides of the handshake era: the host's task is the target's.
    let mut b = Raw::start(
        &["--era", "legacy", "--", BIN, "serve", "--demo"],
        &marker("tasks-same"),
    );
    let init = b.initialize();
    assert!(
        init["result"]["capabilities"]["tasks"]["requests"].is_object(),
        "{init}"
    );
    let task = json!({"name": "slow_job", "arguments": {"seconds": 0.3}, "task": {"ttl": 60000}});
    b.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":task}));
    let created = b.answer(1, Duration::from_secs(30));
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    b.send(json!({"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":id}}));
    let result = b.answer(2, Duration::from_secs(30));
    assert_eq!(
        result["result"]["content"][0]["text"], "done after 0.3 s",
        "{result}"
    );
    b.send(json!({"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":id}}));
    let got = b.answer(3, Duration::from_secs(30));
    assert_eq!(
        (&got["result"]["status"], got["result"]["ttl"].is_u64()),
        (&json!("completed"), true),
        "{got}"
    );
    b.send(json!({"jsonrpc":"2.0","id":4,"method":"tasks/list","params":{}}));
    assert_eq!(
        b.answer(4, Duration::from_secs(30))["result"]["tasks"][0]["taskId"],
        json!(id)
    );
    assert!(b.hang_up(Duration::from_secs(20)).success());

    // A host of the handshake era before a 2026-07-28 target: no tasks
    // offered, and a call made a task anyway is answered when done.
    let mut b = Raw::start(
        &["--era", "modern", "--", BIN, "serve", "--demo"],
        &marker("tasks-across"),
    );
    let init = b.initialize();
    let caps = &init["result"]["capabilities"];
    assert!(
        caps.get("tasks").is_none() && caps.get("extensions").is_none(),
        "{init}"
    );
    b.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":task}));
    let done = b.answer(1, Duration::from_secs(30));
    assert_eq!(
        done["result"]["content"][0]["text"], "done after 0.3 s",
        "{done}"
    );
    assert!(b.hang_up(Duration::from_secs(20)).success());
}

#[test]
fn a_2026_host_answers_the_targets_requests_as_input_rounds() {
    let server = test_server();
    for era in ["legacy", "modern"] {
        let mut b = Raw::start(&["--", &server, "--era", era], &marker("rounds"));
        let mut meta = envelope();
        meta["io.modelcontextprotocol/clientCapabilities"] = json!({"roots": {}});
        let call = json!({"name": "ask", "arguments": {"method": "roots/list"}, "_meta": meta});
        b.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":call}));
        let round = b.answer(1, Duration::from_secs(30));
        let r = &round["result"];
        assert_eq!(r["resultType"], "input_required", "{era}: {round}");
        let (key, request) = r["inputRequests"]
            .as_object()
            .and_then(|m| m.iter().next())
            .unwrap_or_else(|| panic!("{era}: {round}"));
        assert_eq!(request["method"], "roots/list", "{era}: {round}");
        // The retry: the same request, with the answer and the state.
        let mut retry = call.clone();
        retry["inputResponses"] =
            json!({ key.as_str(): {"roots": [{"uri": "file:///tmp/rounds", "name": "r"}]} });
        retry["requestState"] = r["requestState"].clone();
        b.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":retry}));
        let done = b.answer(2, Duration::from_secs(30));
        assert_eq!(done["result"]["resultType"], "complete", "{era}: {done}");
        let text = done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("file:///tmp/rounds"), "{era}: {done}");
        let ours = r["requestState"]
            .as_str()
            .is_some_and(|s| s.starts_with("mcpwire-bridge-"));
        if era == "legacy" {
            // The bridge's own round: a state that names nothing any
            // more is refused.
            assert!(ours, "{round}");
            b.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":retry}));
            assert_eq!(
                b.answer(3, Duration::from_secs(30))["error"]["code"],
                -32602
            );
        } else {
            // A 2026-07-28 target's round reaches the host as it is: its
            // own state, its own keys; the retry went to it unchanged.
            assert!(!ours, "{round}");
        }
        assert!(b.hang_up(Duration::from_secs(20)).success());
    }
}

#[test]
fn a_request_the_target_withdraws_is_withdrawn_from_the_host() {
    let server = test_server();
    let mut b = Raw::start(&["--", &server, "--era", "legacy"], &marker("withdraw"));
    b.send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{"roots":{}},
        "clientInfo":{"name":"raw","version":"1"}}}),
    );
    b.answer(0, Duration::from_secs(30));
    b.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    b.call(1, "ask", json!({"method": "roots/list"}));
    let seen = b.until(Duration::from_secs(30), |v| v["method"] == "roots/list");
    let asked = seen.last().unwrap()["id"].clone();
    // The host gives up its call: the target withdraws its question, and
    // the bridge tells the host, which need not answer it any more.
    b.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}));
    let seen = b.until(Duration::from_secs(30), |v| {
        v["method"] == "notifications/cancelled"
    });
    let cancelled = seen.last().unwrap();
    assert_eq!(cancelled["params"]["requestId"], asked, "{seen:?}");
    assert!(b.hang_up(Duration::from_secs(20)).success());
}

/// A fresh path for the test server's `--log-file`.
fn log_path(tag: &str) -> PathBuf {
    let name: String = marker(tag)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = std::env::temp_dir().join(format!("mcpwire-{name}.jsonl"));
    let _ = std::fs::remove_file(&path);
    path
}

/// The messages the test server received (its `--log-file`).
fn received(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("message").cloned())
        .collect()
}

/// Waits until the test server received a message `what` accepts.
fn wait_received(log: &Path, wait: Duration, what: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(m) = received(log).into_iter().find(&what) {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "not received within {wait:?}: {:?}",
            received(log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A POST of `body` to `port`'s /mcp with `headers`, on a connection of
/// its own that is left open, nothing read: drop it to go away.
fn post_and_hold(port: u16, headers: &[(&str, &str)], body: &str) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    s
}

#[test]
fn bridge_listen_forgets_and_cancels_a_json_post_whose_client_went_away() {
    let server = test_server();
    // A session of the handshake era: the call is forgotten, so the
    // session is idle again and closed (its target stopped).
    let mark = marker("post-gone");
    let log = log_path("post-gone");
    let l = Listener::start(
        &[
            "--idle-timeout",
            "1",
            "--",
            &server,
            "--era",
            "legacy",
            "--log-file",
            log.to_str().unwrap(),
        ],
        &mark,
    );
    let (_, headers, _) = l.http(
        "POST",
        "/mcp",
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ],
        INIT,
    );
    let sid = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .unwrap();
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}"#;
    let held = post_and_hold(
        l.port(),
        &[("accept", "application/json"), ("mcp-session-id", &sid)],
        call,
    );
    wait_received(&log, Duration::from_secs(30), |m| {
        m["params"]["name"] == "slow"
    });
    drop(held);
    // The target is told, and the session, idle, is closed with it.
    wait_received(&log, Duration::from_secs(30), |m| {
        m["method"] == "notifications/cancelled"
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with(&mark).len() > 1 {
        assert!(
            Instant::now() < deadline,
            "the session was kept: {:?}",
            processes_with(&mark)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(l);
    let _ = std::fs::remove_file(&log);

    // A 2026-07-28 request (no session): its relay is cancelled.
    let log = log_path("post-gone-2026");
    let l = Listener::start(
        &[
            "--",
            &server,
            "--era",
            "legacy",
            "--log-file",
            log.to_str().unwrap(),
        ],
        &marker("post-gone-2026"),
    );
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{
        "name": "slow", "arguments": {"ms": 60000}, "_meta": envelope()}})
    .to_string();
    let held = post_and_hold(
        l.port(),
        &[
            ("accept", "application/json"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "slow"),
        ],
        &call,
    );
    wait_received(&log, Duration::from_secs(30), |m| {
        m["params"]["name"] == "slow"
    });
    drop(held);
    wait_received(&log, Duration::from_secs(30), |m| {
        m["method"] == "notifications/cancelled"
    });
    let _ = std::fs::remove_file(&log);
}

#[test]
fn bridge_listen_2026_requests_are_cancelled_by_their_own_stream_only() {
    let server = test_server();
    let log = log_path("stateless-cancel");
    let l = Listener::start(
        &[
            "--",
            &server,
            "--era",
            "legacy",
            "--log-file",
            log.to_str().unwrap(),
        ],
        &marker("stateless-cancel"),
    );
    let call = |id: u64, args: Value, meta: Value| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
            "name": "slow", "arguments": args, "_meta": meta}})
        .to_string()
    };
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "slow"),
    ];
    // Client A's request 5 is under way…
    let a = {
        let (port, body) = (l.port(), call(5, json!({"ms": 1500}), envelope()));
        std::thread::spawn(move || {
            let close = [
                ("connection", "close"),
                headers[1],
                headers[2],
                headers[3],
                headers[4],
            ];
            let mut s = post_and_hold(port, &close, &body);
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut answer = String::new();
            use std::io::Read;
            let _ = s.read_to_string(&mut answer);
            answer
        })
    };
    wait_received(&log, Duration::from_secs(30), |m| {
        m["params"]["name"] == "slow"
    });
    // …when client B posts a cancellation naming 5 (its own request 5,
    // say): that era cancels by closing the request's stream, and a bare
    // id names nobody in particular. A's call goes on.
    let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":5, "_meta": envelope()}})
    .to_string();
    let notify = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "notifications/cancelled"),
    ];
    let (status, _, _) = l.http("POST", "/mcp", &notify, &cancel);
    assert_eq!(status, 202);
    let answer = a.join().unwrap();
    assert!(answer.contains("slow done"), "{answer}");
    assert!(
        !received(&log)
            .iter()
            .any(|m| m["method"] == "notifications/cancelled"),
        "{:?}",
        received(&log)
    );

    // An SSE answer (progress came first) whose client closes the stream:
    // its call is cancelled at once, not at its next progress.
    let mut meta = envelope();
    meta["progressToken"] = json!("p");
    let body = call(6, json!({"ms": 12000, "steps": 2}), meta);
    let mut s = post_and_hold(l.port(), &headers[1..], &body);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("notifications/progress") {
        use std::io::Read;
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("no progress: {}", String::from_utf8_lossy(&got)),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    drop(s);
    // (The next progress would come 6 s later.)
    wait_received(&log, Duration::from_secs(4), |m| {
        m["method"] == "notifications/cancelled"
    });
    let _ = std::fs::remove_file(&log);
}

#[test]
fn bridge_listen_collects_a_2026_listen_whose_client_went_away() {
    let server = test_server();
    let log = log_path("listen-gone");
    let l = Listener::start(
        &[
            "--",
            &server,
            "--era",
            "legacy",
            "--log-file",
            log.to_str().unwrap(),
        ],
        &marker("listen-gone"),
    );
    let headers = [
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    // Two listens of resource updates only (no list change ever routed to
    // them), both of test://a.
    let open = |id: &str| {
        let body = json!({"jsonrpc":"2.0","id":id,"method":"subscriptions/listen","params":{
            "notifications": {"resourceSubscriptions": ["test://a"]}, "_meta": envelope()}})
        .to_string();
        let mut s = post_and_hold(l.port(), &headers, &body);
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains("subscriptions/acknowledged") {
            use std::io::Read;
            match s.read(&mut buf) {
                Ok(0) | Err(_) => panic!("no ack: {}", String::from_utf8_lossy(&got)),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        s
    };
    let first = open("first");
    let second = open("second");
    wait_received(&log, Duration::from_secs(30), |m| {
        m["method"] == "resources/subscribe" && m["params"]["uri"] == "test://a"
    });
    let unsubscribed = || {
        received(&log)
            .iter()
            .filter(|m| m["method"] == "resources/unsubscribe")
            .count()
    };
    // The first goes: test://a is still wanted by the second.
    drop(first);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(unsubscribed(), 0, "{:?}", received(&log));
    // The second goes: nobody wants it, the target is told.
    drop(second);
    wait_received(&log, Duration::from_secs(10), |m| {
        m["method"] == "resources/unsubscribe" && m["params"]["uri"] == "test://a"
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(unsubscribed(), 1, "{:?}", received(&log));
    let _ = std::fs::remove_file(&log);
}

#[test]
fn the_stdio_bridge_serves_the_host_while_the_target_connects() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    // A target that takes connections and never answers: the connect
    // lasts until the test lets it fail.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let taken = Arc::new(AtomicUsize::new(0));
    let holder = {
        let (stop, taken) = (stop.clone(), taken.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((s, _)) => {
                        held.push(s);
                        taken.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            // The listener and what it took are closed here.
        })
    };
    let mut b = Raw::start(&["--url", &url], &marker("slow-connect"));
    let call = json!({"name": "echo", "arguments": {"message": "hi"}, "_meta": envelope()});
    b.send(
        json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":envelope()}}),
    );
    b.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":call}));
    b.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":call}));
    let deadline = Instant::now() + Duration::from_secs(30);
    while taken.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the bridge never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The host is served meanwhile: its pings are answered…
    b.send(json!({"jsonrpc":"2.0","id":4,"method":"ping"}));
    let mut seen = b.until(Duration::from_secs(30), |v| v["id"] == 4);
    assert_eq!(
        seen.last().unwrap(),
        &json!({"jsonrpc":"2.0","id":4,"result":{}})
    );
    // …and its cancellation of a waiting request is heard.
    b.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}));
    b.send(json!({"jsonrpc":"2.0","id":5,"method":"ping"}));
    seen.extend(b.until(Duration::from_secs(30), |v| v["id"] == 5));
    assert_eq!(seen.len(), 2, "answered before the connect ended: {seen:?}");
    // The connect fails: what waited is answered with -32603 naming the
    // target, but the cancelled request.
    stop.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    let seen = b.until(Duration::from_secs(60), |v| v["id"] == 3);
    for id in [1, 3] {
        let v = seen
            .iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("{id} not answered: {seen:?}"));
        assert_eq!(v["error"]["code"], -32603, "{v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("cannot connect the target"), "{v}");
    }
    b.send(json!({"jsonrpc":"2.0","id":6,"method":"ping"}));
    let seen = [seen, b.until(Duration::from_secs(30), |v| v["id"] == 6)].concat();
    assert!(!seen.iter().any(|v| v["id"] == 2), "{seen:?}");
    assert!(b.hang_up(Duration::from_secs(20)).success());

    // A target that starts once the test lets it: what waited goes on,
    // but the request cancelled meanwhile, which never reaches it.
    let log = log_path("slow-start");
    let gate = log.with_extension("gate");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; exec '{}' --log-file '{}'",
        gate.display(),
        test_server(),
        log.display()
    );
    let mut b = Raw::start(&["--", "sh", "-c", &script], &marker("slow-start"));
    b.send(
        json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":envelope()}}),
    );
    b.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":call}));
    b.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":call}));
    b.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}));
    b.send(json!({"jsonrpc":"2.0","id":4,"method":"ping"}));
    b.answer(4, Duration::from_secs(30));
    std::fs::write(&gate, "").unwrap();
    let seen = b.until(Duration::from_secs(30), |v| v["id"] == 3);
    let discover = seen
        .iter()
        .find(|v| v["id"] == 1)
        .expect("discover answered");
    assert_eq!(discover["result"]["resultType"], "complete", "{discover}");
    assert_eq!(
        seen.last().unwrap()["result"]["content"][0]["text"],
        "Echo: hi",
        "{seen:?}"
    );
    assert!(b.hang_up(Duration::from_secs(20)).success());
    let calls = received(&log)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(calls, 1, "{:?}", received(&log));
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&gate);
}
