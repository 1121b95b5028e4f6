//! The real `mcpwire` binary against its demo server and the test server:
//! every command, `--json` shapes, each exit code, SIGINT, `--timeout`.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mcpwire_tests::suite::support::{
    fresh_cache_home, http_server, process_alive, server_bin as test_server, session_order,
    stdio_behind_a_wrapper, Era,
};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run mcpwire")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

fn temp_log(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("mcpwire-cli-{}-{tag}.log", std::process::id()))
}

/// The demo server is dual-era: `mcpwire demo` speaks 2026-07-28 to it by
/// default, and says so; `--era legacy` walks through the handshake era.
#[test]
fn demo_walks_through_a_session() {
    for (args, era) in [
        (&["demo"][..], "protocol 2026-07-28 (the stateless era"),
        (
            &["--era", "legacy", "demo"][..],
            "protocol 2025-11-25 (the handshake era",
        ),
        (
            &["demo", "--era", "modern"][..],
            "protocol 2026-07-28 (the stateless era",
        ),
    ] {
        demo_walk(args, era);
    }
}

fn demo_walk(args: &[&str], era: &str) {
    let o = run(args);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    for expected in [
        era,
        "connected to mcpwire-demo",
        "hello from mcpwire",
        "structuredContent: {\"sum\":42}",
        "Liftoff after 5 steps",
        "Request timeout after 300ms",
        "demo://readme",
        "Please greet Ada warmly",
        "closed.",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    assert!(stderr(&o).contains("progress 5/5"), "{}", stderr(&o));
}

#[test]
fn every_command_against_the_demo_server() {
    let o = run(&["tools", "--", BIN, "serve", "--demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("countdown"));

    let o = run(&["tools", "--json", "--", BIN, "serve", "--demo"]);
    let v = json(&o);
    assert_eq!(v["tools"].as_array().unwrap().len(), 4);
    assert_eq!(v["tools"][0]["name"], "echo");

    // Options after the command and its arguments, before the target.
    let o = run(&[
        "call",
        "echo",
        "--args",
        r#"{"message":"hi"}"#,
        "--timeout",
        "5000",
        "--json",
        "--",
        BIN,
        "serve",
        "--demo",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["content"][0]["text"], "hi");
    assert_eq!(v["structuredContent"]["message"], "hi");

    // Options before the command; key=value arguments.
    let o = run(&[
        "--json", "call", "add", "a=2", "b=40", "--", BIN, "serve", "--demo",
    ]);
    assert_eq!(json(&o)["structuredContent"]["sum"], 42);

    let o = run(&[
        "call",
        "countdown",
        "steps=3",
        "ms=10",
        "--",
        BIN,
        "serve",
        "--demo",
    ]);
    assert!(stdout(&o).contains("Liftoff after 3 steps"));
    assert!(stderr(&o).contains("progress 3/3"), "{}", stderr(&o));

    let o = run(&["resources", "--", BIN, "serve", "--demo"]);
    assert!(stdout(&o).contains("demo://readme"));
    let o = run(&["read", "demo://readme", "--", BIN, "serve", "--demo"]);
    assert!(stdout(&o).contains("mcpwire demo server"));
    let o = run(&[
        "read",
        "demo://readme",
        "--json",
        "--",
        BIN,
        "serve",
        "--demo",
    ]);
    assert_eq!(json(&o)["contents"][0]["uri"], "demo://readme");

    let o = run(&["prompts", "--", BIN, "serve", "--demo"]);
    assert!(stdout(&o).contains("greet"));
    let o = run(&["prompt", "greet", "name=Ada", "--", BIN, "serve", "--demo"]);
    assert!(
        stdout(&o).contains("user: Please greet Ada"),
        "{}",
        stdout(&o)
    );

    let o = run(&["ping", "--", BIN, "serve", "--demo"]);
    assert!(stdout(&o).starts_with("pong"));
    let o = run(&["ping", "--json", "--", BIN, "serve", "--demo"]);
    assert_eq!(json(&o)["ok"], true);

    let o = run(&["info", "--", BIN, "serve", "--demo"]);
    let out = stdout(&o);
    assert!(out.contains("server:       mcpwire-demo"), "{out}");
    assert!(out.contains("protocol:     2026-07-28"), "{out}");
    let o = run(&["info", "--era", "legacy", "--", BIN, "serve", "--demo"]);
    assert!(
        stdout(&o).contains("protocol:     2025-11-25"),
        "{}",
        stdout(&o)
    );
    assert!(out.contains("transport:    stdio"));
    assert!(out.contains("capabilities: "));
    let o = run(&["info", "--json", "--", BIN, "serve", "--demo"]);
    let v = json(&o);
    assert_eq!(v["serverInfo"]["name"], "mcpwire-demo");
    assert_eq!(v["transport"], "stdio");
}

#[test]
fn exit_code_1_when_the_tool_reports_an_error() {
    let ts = test_server();
    let o = run(&["call", "tool_error", "--", &ts]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn exit_code_2_for_usage_errors() {
    for args in [
        &["tools"][..],
        &["frobnicate"][..],
        &["call"][..],
        &["call", "echo", "--args", "[1]", "--", "x"][..],
        &["call", "echo", "--args", "{nope", "--", "x"][..],
        &["tools", "--url", "http://127.0.0.1:1/mcp", "--", "x"][..],
        &[
            "tools",
            "--server",
            "nope",
            "--config",
            "/nonexistent/mcp.json",
        ][..],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn exit_code_3_names_the_cause() {
    let ts = test_server();
    let o = run(&[
        "call",
        "error",
        "code=-32602",
        "message=bad args",
        "--",
        &ts,
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("MCP error -32602: bad args"),
        "{}",
        stderr(&o)
    );

    let o = run(&[
        "call",
        "crash",
        "code=7",
        "message=fatal: no key",
        "--",
        &ts,
    ]);
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert!(err.contains("server exited with status 7"), "{err}");
    assert!(err.contains("fatal: no key"), "{err}");

    let o = run(&["tools", "--", "/nonexistent/server"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("cannot start"), "{}", stderr(&o));

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let o = run(&["tools", "--url", &url]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("refused"), "{}", stderr(&o));
}

#[test]
fn exit_code_4_on_timeout() {
    let ts = test_server();
    let t = Instant::now();
    let o = run(&[
        "call",
        "slow",
        "ms=60000",
        "steps=60",
        "--timeout",
        "300",
        "--",
        &ts,
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("Request timeout after 300ms"));
    // Not the server's 60 s (margins that hold on a loaded machine).
    assert!(t.elapsed() < Duration::from_secs(20));
}

/// A task the server keeps saying is `working` does not poll for ever:
/// past its ttl, or past `--max-task-wait`, it is cancelled on the server
/// and the command exits 4.
#[test]
fn a_task_that_never_ends_is_given_up_and_exits_4() {
    let ts = test_server();
    for (args, says) in [
        (vec!["ms=60000", "ttl_ms=500"], "ttl of 500 ms"),
        (vec!["ms=60000", "--max-task-wait", "1"], "at most 1 s"),
    ] {
        let log = temp_log("task-expired");
        let _ = std::fs::remove_file(&log);
        let t = Instant::now();
        let mut argv = vec!["call", "task_required"];
        argv.extend(args);
        argv.extend(["--", &ts, "--log-file", log.to_str().unwrap()]);
        let o = run(&argv);
        assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
        assert!(t.elapsed() < Duration::from_secs(30));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.lines().any(|l| l.contains("tasks/cancel")),
            "cancelled on the server: {text}"
        );
    }
}

#[test]
fn sigint_cancels_the_call_and_exits_130() {
    let ts = test_server();
    let log = temp_log("sigint");
    let _ = std::fs::remove_file(&log);
    let child = Command::new(BIN)
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .args([
            "call",
            "slow",
            "ms=10000",
            "steps=10",
            "--",
            &ts,
            "--log-file",
        ])
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the call reached the server.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("\"tools/call\"")
    {
        assert!(Instant::now() < deadline, "call never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("notifications/cancelled") && l.contains("\"requestId\":2")),
        "the server was told:\n{text}"
    );
}

/// A server behind `sh -c '…; true'` that ignores stdin EOF and SIGTERM
/// (and so does the shell): when `mcpwire` exits, nothing of it is left.
#[test]
fn the_whole_process_tree_is_stopped_on_exit() {
    let wrapper = stdio_behind_a_wrapper(Era::Legacy);
    let mut args = vec!["call", "pid", "--", "sh"];
    args.extend(wrapper.args.iter().map(String::as_str));
    let t = Instant::now();
    let o = run(&args);
    let took = t.elapsed();
    assert!(o.status.success(), "{}", stderr(&o));
    let pid: u32 = stdout(&o).trim().parse().expect("the server's pid");
    assert!(!process_alive(pid), "server {pid} outlived mcpwire");
    // stdin closed, 2 s, SIGTERM to the group, 2 s, SIGKILL to the group.
    assert!(took >= Duration::from_secs(4), "{took:?}");
}

/// A server that stops reading stdin and floods the client with pings:
/// `mcpwire` still ends it (stdin cannot drain, so the close goes on to
/// SIGTERM) and exits 0.
#[test]
fn a_server_that_stops_reading_does_not_hang_the_cli() {
    let ts = test_server();
    let t = Instant::now();
    let o = run(&["call", "stop_reading", "every_ms=1", "--", &ts]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("not reading stdin any more"));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

#[test]
fn http_target_and_headers() {
    let server = http_server(&["--require-auth", "tok"]);
    let url = server.url.clone();
    let o = run(&["tools", "--url", &url]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("HTTP 401"), "{}", stderr(&o));
    let o = run(&[
        "info",
        "--url",
        &url,
        "--header",
        "Authorization: Bearer tok",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("transport:    streamable-http"));
    let o = run(&[
        "call",
        "http_500",
        "--url",
        &url,
        "--header",
        "Authorization: Bearer tok",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("HTTP 500: boom"), "{}", stderr(&o));
    drop(server);
}

/// `tools` lists two pages; the server ends each session at the request
/// after its first (`--expire-after 1`), so page 2 meets a 404 and the CLI
/// re-initializes.
/// Run after run, the re-sent request never reaches the (strict) server
/// before the new session's `notifications/initialized`.
#[test]
fn tools_across_an_expired_session_waits_for_initialized() {
    const RUNS: usize = 20;
    let log = temp_log("reinit");
    let _ = std::fs::remove_file(&log);
    let server = http_server(&["--expire-after", "1", "--log-file", log.to_str().unwrap()]);
    for run_no in 0..RUNS {
        let o = run(&["tools", "--json", "--url", &server.url]);
        assert!(o.status.success(), "run {run_no}: {}", stderr(&o));
        assert_eq!(json(&o)["tools"].as_array().map(Vec::len), Some(20));
    }
    drop(server);
    let order = session_order(&log);
    // Two sessions per run: the first, and the one page 2 re-initialized.
    assert_eq!(order.created, 2 * RUNS, "{order:?}");
    assert_eq!(order.initialized, order.created, "{order:?}");
    assert!(order.violations.is_empty(), "{:#?}", order.violations);
}

#[test]
fn server_from_a_config_file() {
    let dir = std::env::temp_dir().join(format!("mcpwire-cli-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("servers.json");
    std::fs::write(
        &cfg,
        serde_json::json!({"mcpServers": {"demo": {"command": BIN, "args": ["serve", "--demo"]}}})
            .to_string(),
    )
    .unwrap();
    let o = run(&[
        "ping",
        "--server",
        "demo",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "ping",
        "--server",
        "other",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("it has: demo"), "{}", stderr(&o));
}

/// `--login --no-browser` against a server that wants OAuth: the URL is
/// printed, the "browser" (this test) follows it to the CLI's loopback
/// listener, the tokens land in the store (0600); the next run uses them
/// without --login; a run without stored tokens says to log in.
#[test]
fn login_once_then_the_stored_token() {
    use std::io::{BufRead, BufReader};
    let server = http_server(&["--oauth"]);
    let url = server.url.clone();
    let dir = std::env::temp_dir().join(format!("mcpwire-cli-login-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = dir.join("tokens.json");
    let store_s = store.to_str().unwrap();

    // Without a stored token and without --login: a hint, exit 3.
    let o = run(&["tools", "--url", &url, "--token-store", store_s]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("--login"), "{}", stderr(&o));
    assert!(!store.exists());

    // --login: read the URL from stderr and play the browser.
    let mut cli = Command::new(BIN)
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .args([
            "tools",
            "--url",
            &url,
            "--login",
            "--no-browser",
            "--token-store",
            store_s,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(cli.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let authorize = loop {
        assert!(Instant::now() < deadline, "no authorization URL printed");
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            panic!("stderr ended before the authorization URL");
        }
        if let Some(u) = l.trim().strip_prefix("http://") {
            break format!("http://{u}");
        }
    };
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "{authorize}"
    );
    let callback = mcpwire_tests::oauth::fetch_redirect(&authorize).unwrap();
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    let (status, _) = mcpwire_tests::oauth::get_head(&callback).unwrap();
    assert!(status.contains("200"), "{status}");
    let o = cli.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("echo"), "{}", stdout(&o));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // Later runs: the stored token, no --login.
    let o = run(&[
        "call",
        "echo",
        "message=again",
        "--url",
        &url,
        "--token-store",
        store_s,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("again"), "{}", stdout(&o));

    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A JavaScript server's half emoji (a lone `\ud83d` escape, as
/// `JSON.stringify` writes it) is shown as U+FFFD, not a lost result.
#[test]
fn call_reads_the_json_a_javascript_server_writes() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/node/sliced_emoji.mjs"
    );
    let o = run(&["call", "sliced", "--", "node", script]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("emoji: \u{fffd}!"), "{}", stdout(&o));
}

/// A reply over the 16 MiB line limit fails the call with exit code 3 and
/// a message naming the limit, as soon as the line has gone by: the
/// per-request timeout (10 minutes here) is not what ends it.
#[test]
fn an_oversize_reply_exits_3_naming_the_limit() {
    let ts = test_server();
    let started = std::time::Instant::now();
    let o = run(&[
        "call",
        "--timeout",
        "600000",
        "big",
        "bytes=17000000",
        "--",
        &ts,
    ]);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("max_line_len"), "{err}");
    assert!(err.contains("16777216"), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(300),
        "ended by the limit, not by the timeout"
    );
}

/// Without a terminal, no escape codes reach stderr (here a pipe), even for
/// warnings; a GET stream answered 405 (allowed by the spec) is no warning.
#[test]
fn no_colour_in_pipes_and_no_warning_for_a_405_listener() {
    // A warning: the server writes a line that is not JSON-RPC.
    let ts = test_server();
    let o = run(&["call", "garbage", "--", &ts]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(!stderr(&o).is_empty(), "expected a warning");
    assert!(!stderr(&o).contains('\u{1b}'), "{:?}", stderr(&o));
    // A server without a GET stream.
    let server = http_server(&["--no-listener"]);
    let o = run(&["--url", &server.url, "ping"]);
    drop(server);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(!stderr(&o).contains("405"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("WARN"), "{}", stderr(&o));
}

/// A malformed `--header` is a usage error, found before connecting.
#[test]
fn an_invalid_header_is_a_usage_error_before_connecting() {
    for bad in ["Bad Name: x", "no-colon", ": empty", "X-Ok: bad\u{7}value"] {
        let started = Instant::now();
        // Port 9 on loopback: nothing listens; a connect would fail with 3.
        let o = run(&["--url", "http://127.0.0.1:9/mcp", "--header", bad, "ping"]);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("invalid --header"), "{}", stderr(&o));
        assert!(started.elapsed() < Duration::from_secs(20));
    }
    let o = run(&[
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "X-Ok: fine",
        "ping",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

/// A server behind redirects: 307 is followed; 302 on the POST exits 3
/// naming the Location; another origin needs --allow-cross-origin-redirect.
#[test]
fn redirects_are_followed_or_refused_clearly() {
    let server = http_server(&["--redirect-status", "307"]);
    let o = run(&["tools", "--url", &server.url]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("echo"), "{}", stdout(&o));
    drop(server);

    let server = http_server(&["--redirect-status", "302"]);
    let o = run(&["tools", "--url", &server.url]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("HTTP 302"), "{e}");
    assert!(
        e.contains(&format!("redirects the POST to {}/", server.url)),
        "{e}"
    );
    drop(server);

    let server = http_server(&["--redirect-cross-origin"]);
    let o = run(&["ping", "--url", &server.url]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("another origin") && e.contains(&server.url),
        "{e}"
    );
    let o = run(&[
        "ping",
        "--url",
        &server.url,
        "--allow-cross-origin-redirect",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `TRACEPARENT` (and `TRACESTATE`) from the environment, as OpenTelemetry
/// passes a trace to a child process, reach the server in the call's
/// `_meta`; a malformed one is left out with a warning, and the call goes
/// on.
#[test]
fn traceparent_from_the_environment_reaches_the_server() {
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let ts = test_server();
    let log = temp_log("traceparent");
    let _ = std::fs::remove_file(&log);
    let run_with = |tp: &str, message: &str| {
        Command::new(BIN)
            .env("XDG_CACHE_HOME", fresh_cache_home())
            .env("TRACEPARENT", tp)
            .env("TRACESTATE", "rojo=00f067aa0ba902b7")
            .args(["call", "echo", &format!("message={message}"), "--", &ts])
            .arg("--log-file")
            .arg(&log)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = run_with(TP, "traced");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_with("not-a-traceparent", "untraced");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("TRACEPARENT ignored"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"]["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2, "{text}");
    let meta = &calls[0]["message"]["params"]["_meta"];
    assert_eq!(meta["traceparent"], TP, "{meta}");
    assert_eq!(meta["tracestate"], "rojo=00f067aa0ba902b7");
    assert!(calls[1]["message"]["params"]["_meta"]["traceparent"].is_null());
    let _ = std::fs::remove_file(&log);
}

/// `mcpwire call` checks structuredContent against the tool's
/// outputSchema without a listing of its own (the client lists the tools
/// when it needs the schema): a mismatch exits 3 naming the JSON pointer;
/// `--no-validate` prints the result as the server sent it.
#[test]
fn call_checks_structured_output_and_no_validate_turns_it_off() {
    let ts = test_server();
    let o = run(&[
        "call",
        "add",
        "--args",
        r#"{"a":1,"b":2,"broken":"type"}"#,
        "--",
        &ts,
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("at /sum"), "{}", stderr(&o));
    let o = run(&[
        "--no-validate",
        "call",
        "add",
        "--args",
        r#"{"a":1,"b":2,"broken":"type"}"#,
        "--",
        &ts,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["call", "add", "a=1", "b=2", "--", &ts]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A call that times out over Streamable HTTP tells the server
/// (`notifications/cancelled`) before the session is deleted, as over
/// stdio; in both eras.
#[test]
fn a_timeout_over_http_tells_the_server_before_the_close() {
    for era in ["legacy", "modern"] {
        let log = temp_log(&format!("http-timeout-{era}"));
        let _ = std::fs::remove_file(&log);
        let server = mcpwire_tests::suite::support::http_server_in(
            Some(if era == "legacy" {
                Era::Legacy
            } else {
                Era::Modern
            }),
            &["--log-file", log.to_str().unwrap()],
        );
        let o = run(&[
            "--url",
            &server.url,
            "--timeout",
            "300",
            "call",
            "slow",
            "ms=60000",
            "steps=60",
        ]);
        assert_eq!(o.status.code(), Some(4), "{era}: {}", stderr(&o));
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let call = lines
            .iter()
            .position(|v| v["message"]["params"]["name"] == "slow")
            .unwrap_or_else(|| panic!("{era}: {text}"));
        let id = lines[call]["message"]["id"].clone();
        let cancel = lines
            .iter()
            .position(|v| {
                v["message"]["method"] == "notifications/cancelled"
                    && v["message"]["params"]["requestId"] == id
            })
            .unwrap_or_else(|| panic!("{era}: no cancellation in {text}"));
        if let Some(delete) = lines.iter().position(|v| v["http"]["method"] == "DELETE") {
            assert!(cancel < delete, "{era}: cancelled after the DELETE: {text}");
        }
        drop(server);
        let _ = std::fs::remove_file(&log);
    }
}
