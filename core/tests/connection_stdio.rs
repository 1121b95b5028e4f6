//! Scripted conversations through the whole core over the stdio transport,
//! with simulated time: one test per rule, named after it.

use std::time::{Duration, Instant};

use mcpwire::connection::{
    CallError, CloseReason, Connection, ConnectionConfig, Diagnostic, EraPolicy, Input, Output,
    TransportSpec,
};
use mcpwire::mcp::methods::{
    CallTool, ListPrompts, ListTools, Paged, Ping, ReadResource, SetLoggingLevel, Subscribe,
    Unsubscribe,
};
use mcpwire::mcp::types::{CallToolResult, ListChanged, ListToolsResult};
use mcpwire::mcp::{parse_result, Paginator, ServerNotification};
use mcpwire::rpc::{EngineConfig, ErrorObject, RequestError, RequestOptions};
use mcpwire::transport::stdio::{ExitStatus, Signal};
use serde_json::{json, Value};

/// A connection plus what it wrote to the child and told the app.
struct Sim {
    conn: Connection,
    now: Instant,
    /// Messages written to stdin, parsed.
    written: Vec<Value>,
    /// Everything else, in order.
    events: Vec<Output>,
    /// Split stdout input this way (None: whole).
    chunk: Option<usize>,
    /// What the child has not read of its stdin, as `CheckStdin` is
    /// answered (the pipe: the test's to set).
    unread: Option<usize>,
}

const INIT_RESULT: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"sim","version":"1.0"},"instructions":"be kind"}"#;

impl Sim {
    /// These conversations are about the `initialize` era: `Auto` is
    /// pinned to `Legacy` (the probe has its own tests, `probing`).
    fn new(mut config: ConnectionConfig) -> Sim {
        if config.era == EraPolicy::Auto {
            config.era = EraPolicy::Legacy;
        }
        Sim::probing(config)
    }

    /// Keeps the configured era policy.
    fn probing(config: ConnectionConfig) -> Sim {
        let now = Instant::now();
        let conn = Connection::new(config, TransportSpec::Stdio, now);
        let mut sim = Sim {
            conn,
            now,
            written: Vec::new(),
            events: Vec::new(),
            chunk: None,
            unread: Some(0),
        };
        sim.drain();
        sim
    }

    /// A connection that finished its handshake.
    fn ready(config: ConnectionConfig) -> Sim {
        let mut sim = Sim::new(config);
        assert_eq!(sim.take_written()[0]["method"], "initialize");
        sim.reply(0, INIT_RESULT);
        assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
        assert_eq!(
            sim.take_written(),
            [json!({"jsonrpc":"2.0","method":"notifications/initialized"})]
        );
        sim
    }

    fn drain(&mut self) {
        while let Some(o) = self.conn.poll_output() {
            match o {
                Output::Write(bytes) => {
                    assert_eq!(bytes.last(), Some(&b'\n'));
                    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
                    self.written.push(serde_json::from_slice(&bytes).unwrap());
                }
                // A child that leaves nothing behind in its process group.
                Output::CheckGroup => self.conn.handle_input(self.now, Input::GroupEmpty),
                Output::CheckStdin => self
                    .conn
                    .handle_input(self.now, Input::StdinUnread(self.unread)),
                other => self.events.push(other),
            }
        }
    }

    fn stdout(&mut self, bytes: &[u8]) {
        match self.chunk {
            None => self.conn.handle_input(self.now, Input::Stdout(bytes)),
            Some(n) => {
                for c in bytes.chunks(n) {
                    self.conn.handle_input(self.now, Input::Stdout(c));
                }
            }
        }
        self.drain();
    }

    fn server_says(&mut self, msg: Value) {
        let mut line = serde_json::to_vec(&msg).unwrap();
        line.push(b'\n');
        self.stdout(&line);
    }

    fn reply(&mut self, id: u64, result: &str) {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        self.stdout(format!("{line}\n").as_bytes());
    }

    fn input(&mut self, input: Input<'_>) {
        self.conn.handle_input(self.now, input);
        self.drain();
    }

    /// The child exits: its pipes end (it held no grandchild), then its
    /// status is known.
    fn exit(&mut self, status: ExitStatus) {
        self.input(Input::StdoutEof);
        self.input(Input::StderrEof);
        self.input(Input::Exited(status));
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        if let Some(t) = self.conn.poll_timeout() {
            if t <= self.now {
                self.conn.handle_timeout(self.now);
            }
        }
        self.drain();
    }

    fn take_written(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.written)
    }

    fn take_events(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.events)
    }

    fn completion(&mut self, id: u64) -> Result<Box<serde_json::value::RawValue>, RequestError> {
        let events = self.take_events();
        let mut found = None;
        for e in events {
            match e {
                Output::Complete { id: i, outcome } if i == id => {
                    assert!(found.is_none(), "completed twice");
                    found = Some(outcome);
                }
                other => self.events.push(other),
            }
        }
        found.expect("request completed")
    }
}

fn opts() -> RequestOptions {
    RequestOptions::default()
}

/// Reading a list of outputs.
trait Outputs {
    /// Whether they stop the child to start it again: stdin closed and
    /// SIGTERM at once, nothing else but notes.
    fn contains_spawn_path(&self) -> bool;
}

impl Outputs for Vec<Output> {
    fn contains_spawn_path(&self) -> bool {
        let kinds: Vec<&str> = self
            .iter()
            .filter_map(|o| match o {
                Output::CloseStdin => Some("close"),
                Output::Signal(Signal::Terminate) => Some("term"),
                Output::Diagnostic(d) if d.is_note() => None,
                _ => Some("other"),
            })
            .collect();
        kinds == ["close", "term"]
    }
}

#[test]
fn initialize_is_sent_first_and_initialized_follows_the_result() {
    let mut sim = Sim::new(ConnectionConfig::default());
    let w = sim.take_written();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0]["method"], "initialize");
    assert_eq!(w[0]["id"], 0);
    assert_eq!(w[0]["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(w[0]["params"]["clientInfo"]["name"], "mcpwire");
    assert_eq!(w[0]["params"]["capabilities"], json!({}));
    assert!(!sim.conn.is_ready());
    sim.reply(0, INIT_RESULT);
    assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
    assert_eq!(
        sim.take_written(),
        [json!({"jsonrpc":"2.0","method":"notifications/initialized"})]
    );
    let server = sim.conn.server().unwrap();
    assert_eq!(server.server_info.name, "sim");
    assert_eq!(server.instructions.as_deref(), Some("be kind"));
    assert_eq!(sim.conn.protocol_version(), Some("2025-11-25"));
    assert_eq!(sim.conn.transport_name(), "stdio");
}

#[test]
fn nothing_but_ping_before_the_initialize_response() {
    let mut sim = Sim::new(ConnectionConfig::default());
    sim.take_written();
    assert_eq!(
        sim.conn.send(sim.now, &ListTools::default(), opts()),
        Err(CallError::NotReady)
    );
    let ping = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    assert_eq!(sim.take_written()[0]["method"], "ping");
    sim.reply(ping, "{}");
    assert!(sim.completion(ping).is_ok());
    // A ping from the server before the response is answered too.
    sim.server_says(json!({"jsonrpc":"2.0","id":"s1","method":"ping"}));
    assert_eq!(
        sim.take_written(),
        [json!({"jsonrpc":"2.0","id":"s1","result":{}})]
    );
}

#[test]
fn versions_negotiate_down_to_2024_11_05() {
    for v in ["2025-06-18", "2025-03-26", "2024-11-05"] {
        let mut sim = Sim::new(ConnectionConfig::default());
        sim.reply(
            0,
            &format!(r#"{{"protocolVersion":"{v}","capabilities":{{}},"serverInfo":{{"name":"old","version":"0"}}}}"#),
        );
        assert!(sim.conn.is_ready(), "{v}");
        assert_eq!(sim.conn.protocol_version(), Some(v));
    }
}

#[test]
fn unsupported_version_closes_the_session_naming_both_versions() {
    let mut sim = Sim::new(ConnectionConfig::default());
    sim.take_written();
    sim.reply(
        0,
        r#"{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"x","version":"0"}}"#,
    );
    // The child is asked to go: stdin closed; Closed comes with the exit.
    let events = sim.take_events();
    assert!(
        matches!(events.as_slice(), [Output::CloseStdin]),
        "{events:?}"
    );
    sim.exit(ExitStatus {
        code: Some(0),
        signal: None,
    });
    match sim.take_events().as_slice() {
        [Output::Closed(CloseReason::Handshake(m))] => {
            assert!(m.contains("1999-01-01"), "{m}");
            assert!(m.contains("2025-11-25"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert!(sim.conn.is_closed());
    assert!(matches!(
        sim.conn.send(sim.now, &Ping, opts()),
        Err(CallError::Closed(_))
    ));
}

#[test]
fn capabilities_are_declared_only_when_configured_and_unhandled_requests_get_32601() {
    let mut config = ConnectionConfig::default();
    config.client.capabilities.roots = Some(ListChanged {
        list_changed: Some(true),
        ..Default::default()
    });
    let mut sim = Sim::new(config);
    let init = sim.take_written().remove(0);
    assert_eq!(
        init["params"]["capabilities"],
        json!({"roots":{"listChanged":true}})
    );
    sim.reply(0, INIT_RESULT);
    sim.take_events();
    sim.take_written();

    // Declared: surfaced for the app to answer.
    sim.server_says(json!({"jsonrpc":"2.0","id":0,"method":"roots/list"}));
    let events = sim.take_events();
    let id = match events.as_slice() {
        [Output::ServerRequest { id, method, .. }] if method == "roots/list" => id.clone(),
        other => panic!("{other:?}"),
    };
    let roots = serde_json::value::to_raw_value(&json!({"roots":[{"uri":"file:///w"}]})).unwrap();
    assert_eq!(
        sim.conn.respond(sim.now, id, Ok(roots)).unwrap(),
        mcpwire::rpc::RespondStatus::Sent
    );
    sim.drain();
    assert_eq!(
        sim.take_written(),
        [json!({"jsonrpc":"2.0","id":0,"result":{"roots":[{"uri":"file:///w"}]}})]
    );

    // Not declared: answered -32601 by the core, never ignored.
    sim.server_says(json!({"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}));
    assert!(sim.take_events().is_empty());
    let w = sim.take_written();
    assert_eq!(w[0]["id"], 1);
    assert_eq!(w[0]["error"]["code"], -32601);
}

#[test]
fn a_method_the_server_did_not_declare_is_a_local_error() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    assert_eq!(
        sim.conn.send(sim.now, &ListPrompts::default(), opts()),
        Err(CallError::NotSupported {
            method: "prompts/list".into(),
            capability: "prompts"
        })
    );
    assert!(sim.take_written().is_empty());
    // Declared ones go out.
    sim.conn
        .send(sim.now, &ListTools::default(), opts())
        .unwrap();
    sim.drain();
    assert_eq!(sim.take_written()[0]["method"], "tools/list");
}

#[test]
fn tools_list_follows_next_cursor_to_the_end() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let mut pages = Paginator::new(100);
    let mut names = Vec::new();
    let replies = [
        r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"c1"}"#,
        r#"{"tools":[{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":"c2"}"#,
        r#"{"tools":[{"name":"c","inputSchema":{"type":"object"}}]}"#,
    ];
    for reply in replies {
        let id = sim
            .conn
            .send(
                sim.now,
                &ListTools::page(pages.cursor().map(str::to_owned)),
                opts(),
            )
            .unwrap();
        sim.drain();
        let sent = sim.take_written().remove(0);
        match pages.cursor() {
            None => assert!(sent.get("params").is_none()),
            Some(c) => assert_eq!(sent["params"]["cursor"], c),
        }
        sim.reply(id, reply);
        let page: ListToolsResult = parse_result(&sim.completion(id).unwrap()).unwrap();
        names.extend(page.tools.into_iter().map(|t| t.name));
        if !pages.advance(page.next_cursor).unwrap() {
            break;
        }
    }
    assert_eq!(names, ["a", "b", "c"]);
}

#[test]
fn tool_call_result_and_remote_error() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("echo", json!({"message":"hi"})),
            opts(),
        )
        .unwrap();
    sim.drain();
    assert_eq!(
        sim.take_written(),
        [
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}})
        ]
    );
    sim.reply(
        id,
        r#"{"content":[{"type":"text","text":"Echo: hi"}],"structuredContent":{"m":"hi"}}"#,
    );
    let r: CallToolResult = parse_result(&sim.completion(id).unwrap()).unwrap();
    assert_eq!(r.text(), "Echo: hi");
    assert_eq!(r.structured_content, Some(json!({"m":"hi"})));

    let id = sim
        .conn
        .send(sim.now, &CallTool::new("nope", Value::Null), opts())
        .unwrap();
    sim.drain();
    sim.server_says(
        json!({"jsonrpc":"2.0","id":id,"error":{"code":-32602,"message":"Unknown tool: nope"}}),
    );
    let e = sim.completion(id).unwrap_err();
    assert_eq!(e.to_string(), "MCP error -32602: Unknown tool: nope");
}

/// A `tools/call` answer in the usual shape is proven JSON by the tool
/// result's own check (not the general scan): a valid one completes as
/// before, raw text the check keeps whole; one with a raw control
/// character or a bad escape in its text is refused as malformed, as the
/// general path refuses it, and the call is not completed with it.
#[test]
fn a_tool_results_shape_check_accepts_only_json() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let call = CallTool::new("echo", json!({}));
    for text in [r#"plain"#, r#"q\" \\ \u00e9 \n"#, "caf\u{e9}"] {
        let id = sim.conn.send(sim.now, &call, opts()).unwrap();
        sim.drain();
        let result =
            format!(r#"{{"content":[{{"type":"text","text":"{text}"}}],"isError":false}}"#);
        sim.reply(id, &result);
        let raw = sim.completion(id).unwrap();
        assert_eq!(raw.get(), result);
        let want: Value = serde_json::from_str(&format!(r#""{text}""#)).unwrap();
        let r: CallToolResult = parse_result(&raw).unwrap();
        assert_eq!(r.text(), want.as_str().unwrap());
    }
    for text in ["tab\there", r#"\x"#, r#"\u12"#] {
        let id = sim.conn.send(sim.now, &call, opts()).unwrap();
        sim.drain();
        let before = sim.conn.stats().malformed;
        sim.reply(
            id,
            &format!(r#"{{"content":[{{"type":"text","text":"{text}"}}],"isError":false}}"#),
        );
        assert_eq!(sim.conn.stats().malformed, before + 1, "{text:?}");
        assert!(
            !sim.take_events()
                .iter()
                .any(|e| matches!(e, Output::Complete { id: i, .. } if *i == id)),
            "{text:?} completed the call"
        );
    }
}

/// Raw JSON with line breaks (pretty-printed params, a notification's
/// params) goes out as one line each: the engine strips what a raw value
/// brings (stdio then only ends the line, see `drain`'s check).
#[test]
fn pretty_raw_json_goes_out_on_one_line() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let pretty = "{\r\n  \"name\": \"echo\",\n  \"arguments\": {\"text\": \"a\\nb\"}\n}";
    let raw = serde_json::value::RawValue::from_string(pretty.to_owned()).unwrap();
    let id = sim
        .conn
        .request(sim.now, "tools/call", Some(&raw), opts())
        .unwrap();
    sim.conn
        .notify(sim.now, "notifications/roots/list_changed", Some(&raw))
        .unwrap();
    sim.drain();
    let want: Value = serde_json::from_str(pretty).unwrap();
    assert_eq!(
        sim.take_written(),
        [
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":want}),
            json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":want})
        ]
    );
}

/// The next line `conn` gives the driver to write.
fn next_write(conn: &mut Connection) -> Vec<u8> {
    std::iter::from_fn(|| conn.poll_output())
        .find_map(|o| match o {
            Output::Write(bytes) => Some(bytes),
            _ => None,
        })
        .expect("a line to write")
}

#[test]
fn a_written_lines_buffer_carries_the_next_message_and_a_large_one_is_freed() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let params = serde_json::value::RawValue::from_string(r#"{"name":"echo"}"#.into()).unwrap();
    let first = sim
        .conn
        .request(sim.now, "tools/call", Some(&params), opts())
        .unwrap();
    // Given back with a capacity no fresh line has (a freed buffer could
    // come back from the allocator at the same address).
    let mut line = next_write(&mut sim.conn);
    line.reserve_exact(5000);
    let (buffer, capacity) = (line.as_ptr(), line.capacity());
    sim.conn.recycle(line);
    let second = sim
        .conn
        .request(sim.now, "tools/call", Some(&params), opts())
        .unwrap();
    let line = next_write(&mut sim.conn);
    assert_eq!(
        (line.as_ptr(), line.capacity()),
        (buffer, capacity),
        "the given-back buffer carries the next line"
    );
    let sent: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        sent,
        json!({"jsonrpc":"2.0","id":second,"method":"tools/call","params":{"name":"echo"}})
    );
    assert_ne!(first, second);
    // Only a small buffer is kept: a large one is freed, not held for
    // every later message.
    sim.conn.recycle(Vec::with_capacity(1 << 20));
    sim.conn.request(sim.now, "ping", None, opts()).unwrap();
    let line = next_write(&mut sim.conn);
    assert!(line.capacity() < 1 << 20, "{}", line.capacity());
}

#[test]
fn notifications_are_typed_and_unknown_ones_pass_through() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}));
    sim.server_says(json!({"jsonrpc":"2.0","method":"vendor/thing","params":{"x":1}}));
    let events = sim.take_events();
    assert!(matches!(
        &events[0],
        Output::Notification(ServerNotification::ToolsListChanged)
    ));
    assert!(matches!(
        &events[1],
        Output::Notification(ServerNotification::LoggingMessage(m)) if m.data == "hello"
    ));
    assert!(matches!(
        &events[2],
        Output::Notification(ServerNotification::Other { method, .. }) if method == "vendor/thing"
    ));
}

#[test]
fn garbage_on_stdout_is_a_diagnostic_and_the_call_still_succeeds() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let id = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    sim.stdout(b"Server started on stdio\n[1,2]\n\"str\"\n");
    sim.reply(id, "{}");
    assert!(sim.completion(id).is_ok());
    let diags = sim
        .take_events()
        .into_iter()
        .filter(|e| matches!(e, Output::Diagnostic(Diagnostic::Rpc(_))))
        .count();
    assert_eq!(diags, 3);
    assert_eq!(sim.conn.stats().malformed, 1);
}

#[test]
fn a_line_over_the_limit_is_skipped_and_reported() {
    let mut config = ConnectionConfig::default();
    config.stdio.jsonl.max_line_len = 256;
    let mut sim = Sim::ready(config);
    let id = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    let long = format!("{{\"x\":\"{}\"}}\n", "y".repeat(400));
    sim.stdout(long.as_bytes());
    sim.reply(id, "{}");
    assert!(sim.completion(id).is_ok());
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Diagnostic(Diagnostic::Framing(_))]
    ));
}

#[test]
fn server_exit_fails_pending_requests_with_status_and_stderr_tail() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let a = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    let b = sim
        .conn
        .send(sim.now, &CallTool::new("x", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.input(Input::Stderr(b"starting\nfatal: missing API key\n"));
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Log(a), Output::Log(b)] if a == "starting" && b == "fatal: missing API key")
    );
    sim.input(Input::StdoutEof);
    assert!(sim.take_events().is_empty(), "waits for the exit status");
    sim.input(Input::StderrEof);
    assert!(sim.take_events().is_empty(), "waits for the exit status");
    sim.exit(ExitStatus {
        code: Some(7),
        signal: None,
    });
    let expected = "server exited with status 7: starting\nfatal: missing API key";
    for id in [a, b] {
        match sim.completion(id) {
            Err(RequestError::Closed { reason }) => assert_eq!(reason, expected),
            other => panic!("{other:?}"),
        }
    }
    // Stdin is closed for anything the child left in its group (here
    // nothing: the group is empty at once).
    match sim.take_events().as_slice() {
        [Output::CloseStdin, Output::Closed(CloseReason::ServerGone(m))] => {
            assert_eq!(m, expected)
        }
        other => panic!("{other:?}"),
    }
    // Later calls fail fast and say why.
    match sim.conn.send(sim.now, &Ping, opts()) {
        Err(CallError::Closed(m)) => assert_eq!(m, expected),
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.conn.poll_timeout(), None);
}

#[test]
fn stdout_eof_without_an_exit_fails_pending_after_the_wait_and_stops_the_child() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let a = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    sim.input(Input::StdoutEof);
    sim.advance(Duration::from_secs(1));
    match sim.completion(a) {
        Err(RequestError::Closed { reason }) => assert_eq!(reason, "server closed its stdout"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(sim.take_events().as_slice(), [Output::CloseStdin]));
    sim.advance(Duration::from_secs(2));
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Signal(Signal::Terminate)]
    ));
    sim.exit(ExitStatus {
        code: None,
        signal: Some(15),
    });
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Closed(CloseReason::ServerGone(_))]
    ));
}

#[test]
fn graceful_close_closes_stdin_then_terminates_then_kills() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let a = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    assert_eq!(sim.take_written()[0]["method"], "ping");
    sim.conn.close(sim.now);
    sim.drain();
    match sim.completion(a) {
        Err(RequestError::Closed { reason }) => {
            assert_eq!(reason, "connection closed by the client")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(sim.take_events().as_slice(), [Output::CloseStdin]));
    // The closed request's id is not cancelled (closing is not cancelling).
    assert!(sim.take_written().is_empty());
    sim.advance(Duration::from_millis(1999));
    assert!(sim.take_events().is_empty());
    sim.advance(Duration::from_millis(1));
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Signal(Signal::Terminate)]
    ));
    sim.advance(Duration::from_secs(2));
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Signal(Signal::Kill)]
    ));
    assert_eq!(sim.conn.poll_timeout(), None);
    sim.exit(ExitStatus {
        code: None,
        signal: Some(9),
    });
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Closed(CloseReason::Client)]
    ));
    // Nothing after Closed.
    sim.stdout(b"{\"jsonrpc\":\"2.0\",\"method\":\"late\"}\n");
    assert!(sim.take_events().is_empty());
}

#[test]
fn a_child_that_exits_on_stdin_eof_ends_the_close_at_once() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    sim.conn.close(sim.now);
    sim.drain();
    assert!(matches!(sim.take_events().as_slice(), [Output::CloseStdin]));
    sim.exit(ExitStatus {
        code: Some(0),
        signal: None,
    });
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Closed(CloseReason::Client)]
    ));
    assert_eq!(sim.conn.poll_timeout(), None);
}

#[test]
fn a_timeout_completes_the_request_and_tells_the_server() {
    let config = ConnectionConfig {
        engine: EngineConfig::default().default_timeout(Duration::from_millis(500)),
        ..Default::default()
    };
    let mut sim = Sim::ready(config);
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    assert_eq!(
        sim.conn.poll_timeout(),
        Some(sim.now + Duration::from_millis(500))
    );
    sim.advance(Duration::from_millis(500));
    assert_eq!(
        sim.completion(id).unwrap_err(),
        RequestError::Timeout { ms: 500 }
    );
    assert_eq!(
        sim.take_written(),
        [
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id,"reason":"Request timeout after 500ms"}})
        ]
    );
    // The late answer is dropped, not a second completion.
    sim.reply(id, "{}");
    assert!(sim.take_events().is_empty());
    assert_eq!(sim.conn.stats().late_responses, 1);
}

#[test]
fn the_same_conversation_byte_by_byte_gives_the_same_outcome() {
    fn run(chunk: Option<usize>) -> (Vec<Value>, Vec<String>) {
        let mut sim = Sim::new(ConnectionConfig::default());
        sim.chunk = chunk;
        sim.reply(0, INIT_RESULT);
        let id = sim
            .conn
            .send(
                sim.now,
                &CallTool::new("echo", json!({"message":"héllo\nworld"})),
                opts(),
            )
            .unwrap();
        sim.drain();
        sim.stdout(b"noise line\r\n");
        sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"d"}}));
        sim.server_says(json!({"jsonrpc":"2.0","id":9,"method":"ping"}));
        sim.server_says(json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"héllo\nworld"}]}}));
        let events = sim
            .take_events()
            .into_iter()
            .map(|e| match e {
                Output::Complete { id, outcome } => {
                    format!("complete {id} {}", outcome.unwrap().get())
                }
                other => format!("{other:?}"),
            })
            .collect();
        (sim.take_written(), events)
    }
    let whole = run(None);
    assert_eq!(whole.1.len(), 4, "{:?}", whole.1);
    for n in [1, 2, 3, 7, 64] {
        assert_eq!(run(Some(n)), whole, "chunks of {n}");
    }
}

#[test]
fn server_cancel_withdraws_its_request() {
    let mut config = ConnectionConfig::default();
    config.client.capabilities.sampling = Some(Default::default());
    let mut sim = Sim::ready(config);
    sim.server_says(
        json!({"jsonrpc":"2.0","id":"q","method":"sampling/createMessage","params":{}}),
    );
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"q","reason":"user"}}));
    let events = sim.take_events();
    assert!(matches!(&events[0], Output::ServerRequest { .. }));
    assert!(
        matches!(&events[1], Output::ServerRequestCancelled { reason: Some(r), .. } if r == "user")
    );
    let id = mcpwire::rpc::RequestId::String("q".into());
    assert_eq!(
        sim.conn
            .respond(sim.now, id, Err(ErrorObject::new(-1, "too late")))
            .unwrap(),
        mcpwire::rpc::RespondStatus::Withdrawn
    );
    sim.drain();
    assert!(
        sim.take_written().is_empty(),
        "a withdrawn request gets no answer"
    );
}

// ---- 2026-07-28: the probe, the envelope, input_required rounds --------

const DISCOVER: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"instructions":"hi","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"modern","version":"2.0"}}}"#;

fn meta_of(v: &Value) -> &Value {
    &v["params"]["_meta"]
}

fn elicit_config() -> ConnectionConfig {
    let mut config = ConnectionConfig::default();
    let mut modes = serde_json::Map::new();
    modes.insert("form".into(), json!({}));
    config.client.capabilities.elicitation = Some(modes);
    config
}

/// A connection that probed and found a 2026-07-28 server; returns the
/// id of its subscriptions/listen request.
fn modern_ready(config: ConnectionConfig) -> (Sim, u64) {
    modern_ready_with(config, DISCOVER)
}

fn modern_ready_with(config: ConnectionConfig, discover: &str) -> (Sim, u64) {
    let mut sim = Sim::probing(config);
    let probe = sim.take_written();
    assert_eq!(probe.len(), 1, "the probe goes alone: {probe:?}");
    assert_eq!(probe[0]["method"], "server/discover");
    assert_eq!(probe[0]["id"], 0);
    assert_eq!(
        meta_of(&probe[0])["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(meta_of(&probe[0])["io.modelcontextprotocol/clientCapabilities"].is_object());
    assert!(meta_of(&probe[0])["io.modelcontextprotocol/clientInfo"]["name"].is_string());
    sim.reply(0, discover);
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Ready]),
        "{:?}",
        sim.events
    );
    assert_eq!(sim.conn.era(), Some(mcpwire::connection::Era::Modern));
    let server = sim.conn.server().unwrap();
    assert_eq!(server.protocol_version, "2026-07-28");
    assert_eq!(server.server_info.name, "modern");
    assert_eq!(server.instructions.as_deref(), Some("hi"));
    // No initialize, no initialized: the list changes come through a
    // subscription instead.
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["method"], "subscriptions/listen");
    assert_eq!(
        w[0]["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    let listen = w[0]["id"].as_u64().unwrap();
    (sim, listen)
}

#[test]
fn modern_a_relayed_calls_input_round_is_not_cached() {
    let discover = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{}},"instructions":"hi","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"modern","version":"2.0"}}}"#;
    let (mut sim, _) = modern_ready_with(ConnectionConfig::default(), discover);
    let relay = RequestOptions::default().relay(true);
    let read = |sim: &mut Sim| {
        let id = sim
            .conn
            .send(sim.now, &ReadResource::new("file:///a"), relay)
            .unwrap();
        sim.drain();
        id
    };
    let a = read(&mut sim);
    assert_eq!(sim.take_written().len(), 1);
    sim.reply(a, r#"{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s","ttlMs":60000,"cacheScope":"private"}"#);
    assert!(sim.completion(a).is_ok());
    // The same read again goes to the server: the round was not kept.
    let b = read(&mut sim);
    assert_eq!(sim.take_written().len(), 1, "asked again");
    // A complete answer is kept, as for any call.
    sim.reply(
        b,
        r#"{"resultType":"complete","contents":[],"ttlMs":60000,"cacheScope":"private"}"#,
    );
    assert!(sim.completion(b).is_ok());
    let c = read(&mut sim);
    assert!(sim.take_written().is_empty(), "answered from the cache");
    assert!(sim.completion(c).is_ok());
}

#[test]
fn modern_subscribe_rides_on_subscriptions_listen() {
    let discover = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"instructions":"hi","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"modern","version":"2.0"}}}"#;
    let (mut sim, listen) = modern_ready_with(ConnectionConfig::default(), discover);
    let subscribe = |sim: &mut Sim, uri: &str| {
        let id = sim
            .conn
            .send(sim.now, &Subscribe::new(uri), RequestOptions::default())
            .unwrap();
        sim.drain();
        id
    };
    let a = subscribe(&mut sim, "file:///a");
    let w = sim.take_written();
    // The old stream is cancelled; a new one carries the URI too.
    let methods: Vec<&str> = w.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        ["notifications/cancelled", "subscriptions/listen"],
        "{w:?}"
    );
    assert_eq!(w[0]["params"]["requestId"], listen);
    assert_eq!(
        w[1]["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
    );
    assert!(
        !w.iter().any(|m| m["method"] == "resources/subscribe"),
        "no removed method goes out"
    );
    let listen2 = w[1]["id"].as_u64().unwrap();
    // The old stream's end is not the application's business.
    sim.server_says(json!({"jsonrpc":"2.0","id": listen,"result":{"resultType":"complete"}}));
    assert!(sim.take_events().is_empty(), "{:?}", sim.events);
    // Not complete until the server acknowledges it.
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///a"]}}}));
    sim.completion(a).unwrap();
    // Updates reach the notification stream as in 2025-11-25.
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a"}}));
    let events = sim.take_events();
    assert!(
        matches!(events.as_slice(), [Output::Notification(ServerNotification::ResourceUpdated(u))] if u.uri == "file:///a"),
        "{events:?}"
    );
    // A URI the server leaves out of the honoured filter fails its subscribe.
    let b = subscribe(&mut sim, "file:///b");
    let w = sim.take_written();
    assert_eq!(w[0]["params"]["requestId"], listen2);
    assert_eq!(
        w[1]["params"]["notifications"]["resourceSubscriptions"],
        json!(["file:///a", "file:///b"])
    );
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"resourceSubscriptions":["file:///a"]}}}));
    assert!(matches!(
        sim.completion(b),
        Err(RequestError::Transport { message }) if message.contains("did not accept the subscription to file:///b")
    ));
    // Unsubscribe: done at once, the stream opened again without it.
    let id = sim
        .conn
        .send(
            sim.now,
            &Unsubscribe::new("file:///a"),
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    sim.completion(id).unwrap();
    let w = sim.take_written();
    assert_eq!(
        w.last().unwrap()["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "{w:?}"
    );
    // A subscribe the server never acknowledges times out.
    let c = subscribe(&mut sim, "file:///c");
    sim.take_written();
    sim.advance(Duration::from_secs(31));
    assert!(matches!(
        sim.completion(c),
        Err(RequestError::Timeout { .. })
    ));
}

#[test]
fn probe_finds_a_modern_server_and_every_request_carries_the_envelope() {
    let (mut sim, listen) = modern_ready(ConnectionConfig::default());
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("add", json!({"a": 1})),
            RequestOptions::default().progress(true),
        )
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["params"]["name"], "add");
    assert_eq!(w[0]["params"]["arguments"], json!({"a": 1}));
    let m = meta_of(&w[0]);
    assert_eq!(m["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert!(
        m["progressToken"].is_number(),
        "the engine's progress token stays: {m}"
    );
    // Notifications of the subscription reach the app; its acknowledgement does not.
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId": listen},"notifications":{"toolsListChanged":true}}}));
    sim.server_says(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId": listen}}}));
    sim.reply(
        id,
        r#"{"content":[{"type":"text","text":"2"}],"resultType":"complete"}"#,
    );
    let events = sim.take_events();
    assert!(
        matches!(events.as_slice(), [Output::Notification(n), Output::Complete { .. }] if n.method() == "notifications/tools/list_changed"),
        "{events:?}"
    );
    // ping is gone in 2026-07-28: it becomes a discover.
    let p = sim
        .conn
        .send(sim.now, &Ping, RequestOptions::default())
        .unwrap();
    sim.drain();
    assert_eq!(sim.take_written()[0]["method"], "server/discover");
    sim.reply(p, DISCOVER);
    assert!(sim.completion(p).is_ok());
}

#[test]
fn probe_falls_back_to_initialize_on_any_error_or_a_timeout() {
    // -32601, -32602, -32600, a custom code: all mean "legacy".
    for code in [-32601, -32602, -32600, -32000] {
        let mut sim = Sim::probing(ConnectionConfig::default());
        assert_eq!(sim.take_written()[0]["method"], "server/discover");
        sim.server_says(json!({"jsonrpc":"2.0","id":0,"error":{"code":code,"message":"no"}}));
        let w = sim.take_written();
        assert_eq!(w[0]["method"], "initialize", "code {code}");
        assert_eq!(w[0]["id"], 1);
        sim.reply(1, INIT_RESULT);
        assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
        assert_eq!(sim.conn.era(), Some(mcpwire::connection::Era::Legacy));
    }
    // Silence: the probe timeout (1 s over stdio), then initialize to a
    // new process (`a_silent_server_is_started_again_for_initialize`).
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.advance(Duration::from_millis(900));
    assert!(sim.take_events().is_empty());
    sim.advance(Duration::from_millis(200));
    assert!(sim.take_events().contains_spawn_path());
    // A discover result without a version we speak: legacy too.
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.reply(
        0,
        r#"{"supportedVersions":["2099-01-01","2025-11-25"],"capabilities":{}}"#,
    );
    assert_eq!(sim.take_written()[0]["method"], "initialize");
}

#[test]
fn probe_retries_once_with_the_version_the_server_names() {
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    let refuse = |id: u64| json!({"jsonrpc":"2.0","id":id,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}});
    sim.server_says(refuse(0));
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "server/discover");
    assert_eq!(w[0]["id"], 1, "a new id");
    // The second refusal is final: neither modern nor legacy works.
    sim.server_says(refuse(1));
    assert!(
        matches!(sim.conn.close_reason(), Some(CloseReason::Handshake(m)) if m.contains("2026-07-28")),
        "{:?}",
        sim.conn.close_reason()
    );
}

#[test]
fn initialize_refused_with_32022_probes_again() {
    // A server that refused the probe and then locks itself to
    // 2026-07-28 on initialize.
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.server_says(json!({"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"not yet"}}));
    assert_eq!(sim.take_written().last().unwrap()["method"], "initialize");
    sim.server_says(json!({"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"connection is serving the 2026-07-28 protocol","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}));
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "server/discover");
    sim.reply(2, DISCOVER);
    assert!(sim.take_events().iter().any(|e| matches!(e, Output::Ready)));
    assert_eq!(sim.conn.era(), Some(mcpwire::connection::Era::Modern));
}

#[test]
fn pinned_eras() {
    // Legacy: no probe at all.
    let config = ConnectionConfig {
        era: EraPolicy::Legacy,
        ..ConnectionConfig::default()
    };
    let mut sim = Sim::probing(config);
    assert_eq!(sim.take_written()[0]["method"], "initialize");
    // Remembered as legacy: the handshake first.
    let config = ConnectionConfig {
        era_hint: Some(mcpwire::connection::Era::Legacy),
        ..ConnectionConfig::default()
    };
    let mut sim = Sim::probing(config);
    assert_eq!(sim.take_written()[0]["method"], "initialize");
    // Modern only: a legacy answer is an error, not a fallback.
    let config = ConnectionConfig {
        era: EraPolicy::Modern,
        ..ConnectionConfig::default()
    };
    let mut sim = Sim::probing(config);
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}),
    );
    assert!(sim.take_written().is_empty());
    match sim.conn.close_reason() {
        Some(CloseReason::Handshake(m)) => assert!(m.contains("2026-07-28"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn input_required_rounds_use_the_handlers_and_echo_the_state() {
    let (mut sim, _listen) = modern_ready(elicit_config());
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("ask", json!({"x": 1})),
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    assert_eq!(sim.take_written()[0]["id"], id);
    // An unrelated call in parallel.
    let other = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("plain", json!({})),
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.reply(id, r#"{"resultType":"input_required","inputRequests":{"who":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}},"requestState":"opaque-1"}"#);
    // The app sees an ordinary server request…
    let events = sim.take_events();
    let rid = match events.as_slice() {
        [Output::ServerRequest { id, method, params }] => {
            assert_eq!(method, "elicitation/create");
            assert!(params.as_ref().unwrap().get().contains("Name?"));
            id.clone()
        }
        other => panic!("{other:?}"),
    };
    assert!(
        sim.take_written().is_empty(),
        "nothing is sent before the answer"
    );
    let answer =
        serde_json::value::to_raw_value(&json!({"action":"accept","content":{"name":"Ada"}}))
            .unwrap();
    let _ = sim.conn.respond(sim.now, rid, Ok(answer)).unwrap();
    sim.drain();
    // …and the call goes again with a new id, the inputs and the state.
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    let retry = &w[0];
    assert_ne!(retry["id"], id);
    assert_eq!(retry["params"]["name"], "ask");
    assert_eq!(retry["params"]["arguments"], json!({"x": 1}));
    assert_eq!(
        retry["params"]["inputResponses"]["who"]["content"]["name"],
        "Ada"
    );
    assert_eq!(retry["params"]["requestState"], "opaque-1");
    assert_eq!(
        meta_of(retry)["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    // A second round without state: the retry carries none.
    let retry_id = retry["id"].as_u64().unwrap();
    sim.reply(retry_id, r#"{"resultType":"input_required","inputRequests":{"again":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object","properties":{}}}}}}"#);
    let rid = match sim.take_events().as_slice() {
        [Output::ServerRequest { id, .. }] => id.clone(),
        other => panic!("{other:?}"),
    };
    let answer = serde_json::value::to_raw_value(&json!({"action":"accept","content":{}})).unwrap();
    let _ = sim.conn.respond(sim.now, rid, Ok(answer)).unwrap();
    sim.drain();
    let w = sim.take_written();
    assert!(w[0]["params"].get("requestState").is_none(), "{}", w[0]);
    assert!(
        w[0]["params"]["inputResponses"].get("who").is_none(),
        "old answers are not sent again"
    );
    let final_id = w[0]["id"].as_u64().unwrap();
    sim.reply(
        final_id,
        r#"{"content":[{"type":"text","text":"hello Ada"}]}"#,
    );
    // Completed under the app's id; the parallel call never saw any of it.
    assert!(sim.completion(id).is_ok());
    sim.reply(other, r#"{"content":[],"resultType":"complete"}"#);
    assert!(sim.completion(other).is_ok());
}

#[test]
fn a_relayed_call_completes_with_its_input_round_and_keeps_its_envelope() {
    let (mut sim, _listen) = modern_ready(elicit_config());
    let relay = RequestOptions::default().relay(true);
    // The relayed client's envelope: its capabilities (sampling only) and
    // info are kept, the protocol version is the connection's.
    let params = json!({"name": "ask", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "1999-01-01",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "9"},
        "progressToken": "p"
    }});
    let raw = serde_json::value::to_raw_value(&params).unwrap();
    let id = sim
        .conn
        .request(sim.now, "tools/call", Some(&raw), relay)
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    let meta = meta_of(&w[0]);
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"sampling": {}})
    );
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "host");
    assert_eq!(meta["progressToken"], "p");
    // The input round is the call's result, as the server wrote it: no
    // server request for the application, no retry.
    let round = r#"{"resultType":"input_required","inputRequests":{"who":{"method":"elicitation/create","params":{"message":"Name?"}}},"requestState":"s-1"}"#;
    sim.reply(id, round);
    let got = sim.completion(id).expect("the round is the result");
    let got: Value = serde_json::from_str(got.get()).unwrap();
    assert_eq!(got["resultType"], "input_required");
    assert_eq!(got["requestState"], "s-1");
    assert!(sim.take_written().is_empty(), "no retry of our own");
    // The caller's retry goes as it is, with the server's state.
    let retry = json!({"name": "ask", "arguments": {},
        "inputResponses": {"who": {"action": "decline"}}, "requestState": "s-1"});
    let raw = serde_json::value::to_raw_value(&retry).unwrap();
    let id = sim
        .conn
        .request(sim.now, "tools/call", Some(&raw), relay)
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["params"]["requestState"], "s-1");
    assert_eq!(w[0]["params"]["inputResponses"]["who"]["action"], "decline");
    // The connection's own capabilities fill an envelope that has none.
    assert!(
        meta_of(&w[0])["io.modelcontextprotocol/clientCapabilities"]["elicitation"].is_object()
    );
    sim.reply(id, r#"{"content":[],"resultType":"complete"}"#);
    assert!(sim.completion(id).is_ok());
}

#[test]
fn input_required_failures_are_typed_and_bounded() {
    // An input the client did not declare.
    let (mut sim, _) = modern_ready(ConnectionConfig::default());
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("ask", json!({})),
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    sim.reply(id, r#"{"resultType":"input_required","inputRequests":{"k":{"method":"sampling/createMessage","params":{}}}}"#);
    match sim.completion(id) {
        Err(RequestError::Transport { message }) => {
            assert!(message.contains("did not declare"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // input_required on a method that may not carry it.
    let id = sim
        .conn
        .request(sim.now, "tools/list", None, RequestOptions::default())
        .unwrap();
    sim.drain();
    sim.reply(id, r#"{"resultType":"input_required","requestState":"s"}"#);
    assert!(
        sim.completion(id).is_ok(),
        "not a tracked method: passed through as is"
    );
    // A server that keeps asking (state only, no inputs): bounded.
    let (mut sim, _) = modern_ready(elicit_config());
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("loop", json!({})),
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    let mut current = id;
    let mut rounds = 0;
    loop {
        sim.take_written();
        sim.reply(
            current,
            r#"{"resultType":"input_required","requestState":"again"}"#,
        );
        let w = sim.take_written();
        if w.is_empty() {
            break;
        }
        rounds += 1;
        current = w[0]["id"].as_u64().unwrap();
    }
    assert_eq!(rounds, 16);
    match sim.completion(id) {
        Err(RequestError::Transport { message }) => {
            assert!(message.contains("16 times"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // Cancelling while the app answers withdraws the input request.
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("ask", json!({})),
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.reply(id, r#"{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"message":"?"}}}}"#);
    let rid = match sim.take_events().as_slice() {
        [Output::ServerRequest { id, .. }] => id.clone(),
        other => panic!("{other:?}"),
    };
    assert!(sim.conn.cancel(sim.now, id, "user"));
    sim.drain();
    let events = sim.take_events();
    assert!(
        matches!(&events[0], Output::ServerRequestCancelled { id, .. } if *id == rid),
        "{events:?}"
    );
    assert!(
        matches!(&events[1], Output::Complete { id: i, outcome: Err(RequestError::Cancelled { .. }) } if *i == id)
    );
    // A late answer is ignored.
    let answer = serde_json::value::to_raw_value(&json!({"action":"accept"})).unwrap();
    assert_eq!(
        sim.conn.respond(sim.now, rid, Ok(answer)),
        Ok(mcpwire::rpc::RespondStatus::Withdrawn)
    );
    sim.drain();
    assert!(sim.take_written().is_empty());
}

#[test]
fn modern_logging_level_rides_on_the_envelope_and_the_subscription_reopens() {
    let with_logging = DISCOVER.replace(
        r#""tools":{"listChanged":true}"#,
        r#""tools":{"listChanged":true},"logging":{}"#,
    );
    let (mut sim, listen) = modern_ready_with(ConnectionConfig::default(), &with_logging);
    // setLevel does not exist in 2026-07-28: the level goes in `_meta`.
    let id = sim
        .conn
        .send(
            sim.now,
            &SetLoggingLevel {
                level: mcpwire::mcp::types::LoggingLevel::Debug,
            },
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "server/discover");
    sim.reply(id, DISCOVER);
    // Answered as logging/setLevel is, not with the discover result that
    // carried it (a raw caller, such as the bridge, relays it).
    assert_eq!(sim.completion(id).unwrap().get(), "{}");
    let call = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("t", json!({})),
            RequestOptions::default(),
        )
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(meta_of(&w[0])["io.modelcontextprotocol/logLevel"], "debug");
    sim.reply(call, r#"{"content":[]}"#);
    // The server ends the subscription: it is opened again after 1 s.
    sim.reply(listen, r#"{"resultType":"complete"}"#);
    assert!(sim.take_written().is_empty());
    sim.advance(Duration::from_millis(900));
    assert!(sim.take_written().is_empty());
    sim.advance(Duration::from_millis(200));
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["method"], "subscriptions/listen");
    // Bounded: after 5 failures in a row, no more.
    let mut current = w[0]["id"].as_u64().unwrap();
    let mut reopened = 1;
    for _ in 0..10 {
        sim.server_says(
            json!({"jsonrpc":"2.0","id":current,"error":{"code":-32603,"message":"down"}}),
        );
        sim.advance(Duration::from_secs(60));
        let w = sim.take_written();
        if w.is_empty() {
            break;
        }
        reopened += 1;
        current = w[0]["id"].as_u64().unwrap();
    }
    assert_eq!(reopened, 5);
}

#[test]
fn an_over_long_reply_fails_its_call_at_the_end_of_its_line_and_a_server_request_is_answered() {
    let mut config = ConnectionConfig::default();
    config.stdio.jsonl.max_line_len = 1024;
    let mut sim = Sim::ready(config);
    sim.chunk = Some(300);
    let a = sim
        .conn
        .send(sim.now, &CallTool::new("big", json!({})), opts())
        .unwrap();
    let b = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    sim.take_written();
    // TypeScript's member order: the id is in the line's last bytes.
    let text = "x".repeat(5000);
    let line = format!(
        r#"{{"result":{{"content":[{{"type":"text","text":"{text}"}}]}},"jsonrpc":"2.0","id":{a}}}"#
    );
    let (start, end) = line.as_bytes().split_at(line.len() - 10);
    sim.stdout(start);
    assert!(sim.take_events().is_empty(), "nothing before the line ends");
    sim.stdout(end);
    sim.stdout(b"\n");
    match sim.completion(a) {
        Err(RequestError::TooLarge { what, limit, size }) => {
            assert_eq!((what, limit, size), ("max_line_len", 1024, line.len()));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(
            sim.take_events().as_slice(),
            [Output::Diagnostic(Diagnostic::Framing(_))]
        ),
        "the skipped line is reported too"
    );
    // The other call is untouched and the stream goes on.
    sim.reply(b, "{}");
    assert!(sim.completion(b).is_ok());

    // A server request too large to read gets an error, not silence.
    sim.server_says(
        json!({"jsonrpc":"2.0","id":"s9","method":"sampling/createMessage",
        "params":{"messages":[{"role":"user","content":{"type":"text","text":text}}]}}),
    );
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["id"], "s9");
    assert_eq!(w[0]["error"]["code"], -32600);
    assert!(
        w[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_line_len"),
        "{w:?}"
    );
    // A line whose ends say nothing is only counted.
    sim.stdout(format!("{text}\n").as_bytes());
    assert!(sim.take_written().is_empty());
    assert_eq!(sim.conn.stats().oversize, 3);
    assert_eq!(sim.conn.stats().failed, 1);
}

// ---- tasks: followed to their end in both eras ---------------------------

const TASKS_INIT: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"sim","version":"1.0"}}"#;

const TASKS_DISCOVER: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"modern","version":"2.0"}}}"#;

/// A 2025-11-25 connection to a tasks server that listed `required`
/// (taskSupport required) and `optional` (optional).
fn legacy_tasks() -> Sim {
    legacy_tasks_with(TASKS_INIT)
}

fn legacy_tasks_with(init: &str) -> Sim {
    legacy_tasks_config(ConnectionConfig::default(), init)
}

fn legacy_tasks_config(config: ConnectionConfig, init: &str) -> Sim {
    let mut sim = Sim::new(config);
    assert_eq!(sim.take_written()[0]["method"], "initialize");
    sim.reply(0, init);
    sim.take_events();
    sim.take_written();
    let id = sim
        .conn
        .send(sim.now, &ListTools::page(None), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.reply(
        id,
        r#"{"tools":[{"name":"required","inputSchema":{},"execution":{"taskSupport":"required"}},{"name":"optional","inputSchema":{},"execution":{"taskSupport":"optional"}},{"name":"plain","inputSchema":{}}]}"#,
    );
    sim.completion(id).unwrap();
    sim
}

fn task_json(id: &str, status: &str, extra: Value) -> Value {
    let mut t = json!({"taskId": id, "status": status, "createdAt": "2026-12-03T10:00:00Z",
        "lastUpdatedAt": "2026-12-03T10:00:00Z", "ttl": 60000, "pollInterval": 200});
    t.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    t
}

fn progress_messages(events: &[Output]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Output::Progress { progress, .. } if progress.task.is_some() => {
                progress.message.clone()
            }
            _ => None,
        })
        .collect()
}

#[test]
fn legacy_a_required_task_tool_is_called_as_a_task_and_followed_to_its_result() {
    let mut sim = legacy_tasks();
    let options = opts().progress(true).timeout(Duration::from_secs(30));
    let app = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("required", json!({"x": 1})),
            options,
        )
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["params"]["task"], json!({}), "asked for a task: {w:?}");
    sim.server_says(json!({"jsonrpc": "2.0", "id": app, "result": {"task": task_json("t1", "working", json!({}))}}));
    let events = sim.take_events();
    assert!(
        !events.iter().any(|e| matches!(e, Output::Complete { .. })),
        "not done yet: {events:?}"
    );
    assert_eq!(progress_messages(&events), ["task t1: working"]);
    // Polled at the server's interval.
    sim.advance(Duration::from_millis(100));
    assert!(sim.take_written().is_empty());
    sim.advance(Duration::from_millis(100));
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "tasks/get");
    assert_eq!(w[0]["params"], json!({"taskId": "t1"}));
    let get = w[0]["id"].as_u64().unwrap();
    sim.server_says(json!({"jsonrpc": "2.0", "id": get,
        "result": task_json("t1", "working", json!({"statusMessage": "step 1/2"}))}));
    assert_eq!(
        progress_messages(&sim.take_events()),
        ["task t1: working: step 1/2"]
    );
    // The task reports progress with the call's token, after the call's
    // own answer (the token lives as long as the task).
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": app, "progress": 3, "total": 4, "message": "stage 3"}}));
    let events = sim.take_events();
    assert!(
        events.iter().any(|e| matches!(e, Output::Progress { id, progress }
            if *id == app && progress.task.is_none() && progress.message.as_deref() == Some("stage 3"))),
        "{events:?}"
    );
    // A status notification that it completed: tasks/result at once.
    sim.server_says(
        json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
        "params": task_json("t1", "completed", json!({}))}),
    );
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["method"], "tasks/result");
    let result = w[0]["id"].as_u64().unwrap();
    sim.server_says(json!({"jsonrpc": "2.0", "id": result, "result": {"content": [{"type": "text", "text": "done"}],
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}}}));
    let raw = sim.completion(app).unwrap();
    let r: CallToolResult = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(r.text(), "done");
    // The task is over: its token is let go.
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": app, "progress": 4}}));
    assert!(!sim
        .take_events()
        .iter()
        .any(|e| matches!(e, Output::Progress { progress, .. } if progress.task.is_none())));
    // Nothing more is polled.
    sim.advance(Duration::from_secs(5));
    assert!(sim.take_written().is_empty());
}

#[test]
fn legacy_optional_tools_are_tasks_only_when_detached() {
    let mut sim = legacy_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("optional", json!({})), opts())
        .unwrap();
    sim.drain();
    assert!(sim.take_written()[0]["params"].get("task").is_none());
    sim.reply(app, r#"{"content":[]}"#);
    sim.completion(app).unwrap();
    let detached = opts().detach_task(true).task_ttl(Duration::from_secs(90));
    for tool in ["optional", "plain"] {
        let app = sim
            .conn
            .send(sim.now, &CallTool::new(tool, json!({})), detached)
            .unwrap();
        sim.drain();
        let w = sim.take_written();
        if tool == "plain" {
            assert!(w[0]["params"].get("task").is_none(), "forbidden: {w:?}");
            continue;
        }
        assert_eq!(w[0]["params"]["task"], json!({"ttl": 90000}));
        sim.server_says(json!({"jsonrpc": "2.0", "id": app, "result": {"task": task_json("t2", "working", json!({}))}}));
        // Detached: the created task is the answer, nothing is polled.
        let raw = sim.completion(app).unwrap();
        assert!(raw.get().contains("\"t2\""));
        sim.advance(Duration::from_secs(5));
        assert!(sim.take_written().is_empty());
    }
}

#[test]
fn legacy_input_required_and_failure_come_through_tasks_result() {
    let mut sim = legacy_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("required", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "id": app,
        "result": {"task": task_json("t3", "input_required", json!({}))}}));
    // input_required: the questions come while tasks/result is open.
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "tasks/result");
    let result = w[0]["id"].as_u64().unwrap();
    sim.server_says(json!({"jsonrpc": "2.0", "id": result,
        "error": {"code": -32603, "message": "it broke"}}));
    match sim.completion(app) {
        Err(RequestError::Remote(e)) => assert_eq!(e.message, "it broke"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn legacy_a_cancelled_or_late_task_is_cancelled_on_the_server() {
    let mut sim = legacy_tasks();
    let options = opts().timeout(Duration::from_secs(2));
    for cancel in [true, false] {
        let app = sim
            .conn
            .send(sim.now, &CallTool::new("required", json!({})), options)
            .unwrap();
        sim.drain();
        sim.take_written();
        sim.server_says(json!({"jsonrpc": "2.0", "id": app,
            "result": {"task": task_json("t4", "working", json!({}))}}));
        if cancel {
            assert!(sim.conn.cancel(sim.now, app, "user"));
            sim.drain();
        } else {
            for _ in 0..20 {
                sim.advance(Duration::from_millis(200));
            }
        }
        let w = sim.take_written();
        let cancels: Vec<&Value> = w.iter().filter(|m| m["method"] == "tasks/cancel").collect();
        assert_eq!(cancels.len(), 1, "{w:?}");
        assert_eq!(cancels[0]["params"], json!({"taskId": "t4"}));
        assert!(
            !w.iter().any(
                |m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == app
            ),
            "a task is never cancelled with notifications/cancelled: {w:?}"
        );
        match sim.completion(app) {
            Err(RequestError::Cancelled { .. }) if cancel => {}
            Err(RequestError::Timeout { ms: 2000 }) if !cancel => {}
            other => panic!("{other:?}"),
        }
    }
}

/// Steps `secs` of a task that the server says is `working` at every
/// poll; whatever was written.
fn keep_working(sim: &mut Sim, id: &str, secs: u64) -> Vec<Value> {
    let mut written = Vec::new();
    for _ in 0..secs * 5 {
        sim.advance(Duration::from_millis(200));
        for m in sim.take_written() {
            if m["method"] == "tasks/get" {
                let get = m["id"].as_u64().unwrap();
                sim.server_says(json!({"jsonrpc": "2.0", "id": get,
                    "result": task_json(id, "working", json!({"ttl": null}))}));
            }
            written.push(m);
        }
    }
    written
}

#[test]
fn a_task_that_outlives_its_ttl_or_the_longest_wait_is_given_up_and_cancelled() {
    // Its ttl (3 s): the server keeps it no longer, nothing will end it.
    let mut sim = legacy_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("required", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "id": app,
        "result": {"task": task_json("t9", "working", json!({"ttl": 3000}))}}));
    let w = keep_working(&mut sim, "t9", 3);
    assert!(!w.iter().any(|m| m["method"] == "tasks/cancel"), "{w:?}");
    assert!(sim
        .take_events()
        .iter()
        .all(|e| !matches!(e, Output::Complete { .. })));
    // A second of grace for clocks that differ.
    let w = keep_working(&mut sim, "t9", 2);
    let cancels: Vec<&Value> = w.iter().filter(|m| m["method"] == "tasks/cancel").collect();
    assert_eq!(cancels.len(), 1, "{w:?}");
    assert_eq!(cancels[0]["params"], json!({"taskId": "t9"}));
    match sim.completion(app) {
        Err(RequestError::TaskExpired { task_id, message }) => {
            assert_eq!(task_id, "t9");
            assert!(message.contains("ttl of 3 s"), "{message}");
            assert!(message.contains("working"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Nothing more is polled.
    assert!(keep_working(&mut sim, "t9", 2).is_empty());

    // No ttl (unlimited): the client's longest wait ends it.
    let mut config = ConnectionConfig::default();
    config.client.max_task_wait = Some(Duration::from_secs(4));
    let mut sim = legacy_tasks_config(config, TASKS_INIT);
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("required", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "id": app,
        "result": {"task": task_json("t10", "working", json!({"ttl": null}))}}));
    let w = keep_working(&mut sim, "t10", 3);
    assert!(!w.iter().any(|m| m["method"] == "tasks/cancel"), "{w:?}");
    let w = keep_working(&mut sim, "t10", 2);
    assert_eq!(
        w.iter().filter(|m| m["method"] == "tasks/cancel").count(),
        1,
        "{w:?}"
    );
    match sim.completion(app) {
        Err(RequestError::TaskExpired { task_id, message }) => {
            assert_eq!(task_id, "t10");
            assert!(message.contains("at most 4 s"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn legacy_awaiting_a_task_by_id_follows_it() {
    let mut sim = legacy_tasks();
    let app = sim
        .conn
        .send(
            sim.now,
            &mcpwire::mcp::methods::TaskResult::new("t9"),
            opts(),
        )
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "tasks/get", "{w:?}");
    let get = w[0]["id"].as_u64().unwrap();
    sim.server_says(json!({"jsonrpc": "2.0", "id": get, "result": task_json("t9", "cancelled", json!({"statusMessage": "by someone"}))}));
    match sim.completion(app) {
        Err(RequestError::Cancelled { reason }) => {
            assert!(reason.contains("by someone"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

fn modern_tasks() -> Sim {
    let (mut sim, _) = {
        let mut sim = Sim::probing(elicit_config());
        let probe = sim.take_written();
        assert_eq!(
            meta_of(&probe[0])["io.modelcontextprotocol/clientCapabilities"]["extensions"],
            json!({"io.modelcontextprotocol/tasks": {}}),
            "the extension is declared"
        );
        sim.reply(0, TASKS_DISCOVER);
        sim.take_events();
        (sim, ())
    };
    sim.take_written();
    sim
}

#[test]
fn modern_a_relayed_calls_task_is_its_result_for_the_relayed_client_to_follow() {
    let mut sim = modern_tasks();
    let relay = opts().relay(true);
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), relay)
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "r1", "status": "working", "ttlMs": null, "pollIntervalMs": 50}}),
    );
    let raw = sim.completion(app).expect("the task is the result");
    let v: Value = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(v["taskId"], "r1");
    // Nobody here follows it: no listen, no poll.
    sim.advance(Duration::from_millis(200));
    assert!(sim.take_written().is_empty());
}

#[test]
fn modern_a_task_is_polled_asks_through_tasks_update_and_ends_with_its_inline_result() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("slow", json!({})),
            opts().progress(true),
        )
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(
        meta_of(&w[0])["io.modelcontextprotocol/clientCapabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}})
    );
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "m1", "status": "working", "ttlMs": null, "pollIntervalMs": 50}}),
    );
    // Following it, the connection asks for its status pushes too.
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "subscriptions/listen", "{w:?}");
    assert_eq!(w[0]["params"]["notifications"]["taskIds"], json!(["m1"]));
    sim.advance(Duration::from_millis(50));
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "tasks/get");
    assert_eq!(w[0]["params"]["taskId"], "m1");
    assert!(meta_of(&w[0])["io.modelcontextprotocol/protocolVersion"].is_string());
    let get = w[0]["id"].as_u64().unwrap();
    let ask = json!({"method": "elicitation/create", "params": {"mode": "form", "message": "name?",
        "requestedSchema": {"type": "object"}}});
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m1", "status": "input_required", "pollIntervalMs": 50,
        "inputRequests": {"k1": ask}}}),
    );
    let events = sim.take_events();
    let rid = events
        .iter()
        .find_map(|e| match e {
            Output::ServerRequest { id, method, .. } if method == "elicitation/create" => {
                Some(id.clone())
            }
            _ => None,
        })
        .expect("the question reaches the application");
    // Asked again before the answer: not surfaced twice.
    sim.advance(Duration::from_millis(50));
    let get = sim.take_written()[0]["id"].as_u64().unwrap();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m1", "status": "input_required", "pollIntervalMs": 50,
        "inputRequests": {"k1": ask}}}),
    );
    assert!(!sim
        .take_events()
        .iter()
        .any(|e| matches!(e, Output::ServerRequest { .. })));
    let answer =
        serde_json::value::to_raw_value(&json!({"action": "accept", "content": {"name": "Ada"}}))
            .unwrap();
    let status = sim.conn.respond(sim.now, rid, Ok(answer)).unwrap();
    assert_eq!(status, mcpwire::rpc::RespondStatus::Sent);
    sim.drain();
    let w = sim.take_written();
    let update = w
        .iter()
        .find(|m| m["method"] == "tasks/update")
        .expect("tasks/update");
    assert_eq!(update["params"]["taskId"], "m1");
    assert_eq!(
        update["params"]["inputResponses"],
        json!({"k1": {"action": "accept", "content": {"name": "Ada"}}})
    );
    let up = update["id"].as_u64().unwrap();
    sim.reply(up, r#"{"resultType":"complete"}"#);
    sim.advance(Duration::from_millis(50));
    let get = sim.take_written()[0]["id"].as_u64().unwrap();
    sim.server_says(json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m1", "status": "completed", "result": {"content": [{"type": "text", "text": "hello Ada"}], "isError": false}}}));
    let raw = sim.completion(app).unwrap();
    let r: CallToolResult = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(r.text(), "hello Ada");
}

#[test]
fn modern_a_failed_task_is_its_error_and_a_refused_push_leaves_polling() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "m2", "status": "working", "pollIntervalMs": 100}}),
    );
    let listen = sim.take_written()[0]["id"].as_u64().unwrap();
    // A server without subscriptions/listen: polling carries the task.
    sim.server_says(json!({"jsonrpc": "2.0", "id": listen, "error": {"code": -32601, "message": "Method not found"}}));
    sim.advance(Duration::from_millis(100));
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    let get = w[0]["id"].as_u64().unwrap();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m2", "status": "failed", "error": {"code": -32000, "message": "no luck"}}}),
    );
    match sim.completion(app) {
        Err(RequestError::Remote(e)) => {
            assert_eq!((e.code, e.message.as_str()), (-32000, "no luck"))
        }
        other => panic!("{other:?}"),
    }
    // The listen is not asked for again with the tasks.
    sim.advance(Duration::from_secs(2));
    assert!(!sim
        .take_written()
        .iter()
        .any(|m| m["params"]["notifications"].get("taskIds").is_some()));
}

#[test]
fn without_tasks_nothing_is_declared_or_augmented() {
    let mut config = ConnectionConfig::default();
    config.client.tasks = false;
    let mut sim = Sim::probing(config);
    let probe = sim.take_written();
    assert!(
        meta_of(&probe[0])["io.modelcontextprotocol/clientCapabilities"]
            .get("extensions")
            .is_none()
    );
}

#[test]
fn a_task_followed_when_the_connection_closes_completes_once_and_its_poll_never() {
    let mut sim = legacy_tasks();
    let app = sim
        .conn
        .send(
            sim.now,
            &mcpwire::mcp::methods::TaskResult::new("t5"),
            opts(),
        )
        .unwrap();
    sim.drain();
    let get = sim.take_written()[0]["id"].as_u64().unwrap();
    sim.conn.close(sim.now);
    sim.drain();
    let completions: Vec<u64> = sim
        .take_events()
        .iter()
        .filter_map(|e| match e {
            Output::Complete { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(
        completions,
        [app],
        "tasks/get {get} is ours, never the app's"
    );
}

#[test]
fn modern_a_status_push_on_the_listen_stream_ends_a_task_without_a_poll() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "m3", "status": "working", "pollIntervalMs": 5000}}),
    );
    let listen = sim.take_written();
    assert_eq!(
        listen[0]["params"]["notifications"]["taskIds"],
        json!(["m3"])
    );
    let listen_id = listen[0]["id"].clone();
    sim.server_says(
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": listen_id},
                   "notifications": {"taskIds": ["m3"]}}}),
    );
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/tasks",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": listen_id},
                   "taskId": "m3", "status": "completed",
                   "result": {"content": [{"type": "text", "text": "pushed"}]}}}));
    let raw = sim.completion(app).unwrap();
    let r: CallToolResult = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(r.text(), "pushed");
    // Before its first poll was due: no tasks/get at all.
    assert!(!sim
        .take_written()
        .iter()
        .any(|m| m["method"] == "tasks/get"));
    sim.advance(Duration::from_secs(6));
    assert!(!sim
        .take_written()
        .iter()
        .any(|m| m["method"] == "tasks/get"));
}

/// A 2025-11-25 tasks server that lists no tools yet.
fn legacy_unlisted(init: &str, config: ConnectionConfig) -> Sim {
    let mut sim = Sim::new(config);
    assert_eq!(sim.take_written()[0]["method"], "initialize");
    sim.reply(0, init);
    sim.take_events();
    sim.take_written();
    sim
}

#[test]
fn legacy_a_refused_plain_call_of_an_unlisted_tool_is_sent_again_as_a_task() {
    let mut sim = legacy_unlisted(TASKS_INIT, ConnectionConfig::default());
    let options = opts().progress(true).timeout(Duration::from_secs(30));
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("mystery", json!({"x": 1})), options)
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "tools/call");
    assert!(
        w[0]["params"].get("task").is_none(),
        "not listed: a plain call"
    );
    sim.server_says(json!({"jsonrpc": "2.0", "id": app,
        "error": {"code": -32601, "message": "mystery must be called as a task"}}));
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["method"], "tools/call");
    assert_eq!(w[0]["params"]["task"], json!({}));
    assert_eq!(w[0]["params"]["arguments"], json!({"x": 1}));
    let again = w[0]["id"].as_u64().unwrap();
    assert_ne!(again, app, "a new id");
    assert_eq!(w[0]["params"]["_meta"]["progressToken"], again);
    assert!(
        !sim.take_events()
            .iter()
            .any(|e| matches!(e, Output::Complete { .. })),
        "the application's call goes on"
    );
    sim.server_says(json!({"jsonrpc": "2.0", "id": again,
        "result": {"task": task_json("t9", "working", json!({}))}}));
    // The task reports progress with the token of the call that made it:
    // under the application's id.
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": again, "progress": 1, "total": 2}}));
    let events = sim.take_events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Output::Progress { id, progress }
            if *id == app && progress.progress == 1.0)),
        "{events:?}"
    );
    sim.advance(Duration::from_millis(200));
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "tasks/get", "{w:?}");
    let get = w[0]["id"].as_u64().unwrap();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": task_json("t9", "completed", json!({}))}),
    );
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "tasks/result");
    let result = w[0]["id"].as_u64().unwrap();
    sim.reply(result, r#"{"content":[{"type":"text","text":"found"}]}"#);
    let raw = sim.completion(app).unwrap();
    let r: CallToolResult = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(r.text(), "found");
    // Now known: the next call asks for a task at once.
    let next = sim
        .conn
        .send(sim.now, &CallTool::new("mystery", json!({})), opts())
        .unwrap();
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["id"], next);
    assert_eq!(w[0]["params"]["task"], json!({}));
}

#[test]
fn legacy_a_call_sent_again_as_a_task_can_be_cancelled_and_other_errors_pass() {
    let mut sim = legacy_unlisted(TASKS_INIT, ConnectionConfig::default());
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("mystery", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "id": app,
        "error": {"code": -32600, "message": "tasks only"}}));
    let again = sim.take_written()[0]["id"].as_u64().unwrap();
    assert!(sim.conn.cancel(sim.now, app, "user"));
    sim.drain();
    let w = sim.take_written();
    assert!(
        w.iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == again),
        "{w:?}"
    );
    assert!(matches!(
        sim.completion(app),
        Err(RequestError::Cancelled { .. })
    ));
    // A late answer to the cancelled request reaches nobody.
    sim.server_says(json!({"jsonrpc": "2.0", "id": again,
        "result": {"task": task_json("t1", "working", json!({}))}}));
    assert!(
        !sim.take_events()
            .iter()
            .any(|e| matches!(e, Output::Complete { .. })),
        "completed once"
    );
    // Any other error of an unlisted tool is the call's.
    let other = sim
        .conn
        .send(sim.now, &CallTool::new("broken", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "id": other,
        "error": {"code": -32602, "message": "bad arguments"}}));
    assert!(sim.take_written().is_empty());
    match sim.completion(other) {
        Err(RequestError::Remote(e)) => assert_eq!(e.code, -32602),
        o => panic!("{o:?}"),
    }
    // A server that takes no tasks: -32601 is the call's answer.
    let mut plain = Sim::ready(ConnectionConfig::default());
    let id = plain
        .conn
        .send(plain.now, &CallTool::new("nope", json!({})), opts())
        .unwrap();
    plain.drain();
    plain.take_written();
    plain.server_says(json!({"jsonrpc": "2.0", "id": id,
        "error": {"code": -32601, "message": "unknown tool"}}));
    assert!(plain.take_written().is_empty());
    assert!(matches!(plain.completion(id), Err(RequestError::Remote(_))));
}

#[test]
fn legacy_a_server_without_tasks_cancel_is_not_sent_one() {
    const NO_CANCEL: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"sim","version":"1.0"}}"#;
    let mut sim = legacy_tasks_with(NO_CANCEL);
    let app = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("required", json!({})),
            opts().timeout(Duration::from_secs(1)),
        )
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "id": app,
        "result": {"task": task_json("t5", "working", json!({}))}}));
    for _ in 0..10 {
        sim.advance(Duration::from_millis(200));
    }
    let w = sim.take_written();
    assert!(!w.iter().any(|m| m["method"] == "tasks/cancel"), "{w:?}");
    assert!(matches!(
        sim.completion(app),
        Err(RequestError::Timeout { ms: 1000 })
    ));
    let refused = sim.conn.send(
        sim.now,
        &mcpwire::mcp::methods::CancelTask::new("t5"),
        opts(),
    );
    assert!(
        matches!(
            refused,
            Err(CallError::NotSupported {
                capability: "tasks.cancel",
                ..
            })
        ),
        "{refused:?}"
    );
}

#[test]
fn legacy_a_server_request_whose_id_looks_like_ours_is_answered() {
    let mut sim = legacy_unlisted(TASKS_INIT, elicit_config());
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": "task-input-1-k", "method": "elicitation/create",
        "params": {"message": "name?", "requestedSchema": {"type": "object"}}}),
    );
    let id = sim
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Output::ServerRequest { id, .. } => Some(id),
            _ => None,
        })
        .expect("surfaced");
    let answer = serde_json::value::to_raw_value(&json!({"action": "decline"})).unwrap();
    let status = sim.conn.respond(sim.now, id, Ok(answer)).unwrap();
    assert_eq!(status, mcpwire::rpc::RespondStatus::Sent);
    sim.drain();
    let w = sim.take_written();
    assert_eq!(w[0]["id"], "task-input-1-k", "{w:?}");
    assert_eq!(w[0]["result"]["action"], "decline");
}

#[test]
fn modern_a_task_created_already_done_is_read_with_tasks_get() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("quick", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    // A creation carries no result, whatever its status.
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "q1", "status": "completed", "pollIntervalMs": 5000}}),
    );
    let w = sim.take_written();
    let get = w
        .iter()
        .find(|m| m["method"] == "tasks/get")
        .expect("tasks/get at once, not after the poll interval");
    let get = get["id"].as_u64().unwrap();
    assert!(sim
        .take_events()
        .iter()
        .all(|e| !matches!(e, Output::Complete { id, .. } if *id == app)));
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "q1", "status": "completed",
        "result": {"content": [{"type": "text", "text": "quick"}]}}}),
    );
    let raw = sim.completion(app).unwrap();
    let r: CallToolResult = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(r.text(), "quick");
}

#[test]
fn modern_a_question_the_server_stops_asking_is_withdrawn_and_never_answered() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    let ask = |m: &str| {
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": m,
        "requestedSchema": {"type": "object"}}})
    };
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "m7", "status": "working", "pollIntervalMs": 50}}),
    );
    sim.advance(Duration::from_millis(50));
    let get = sim
        .take_written()
        .iter()
        .find(|m| m["method"] == "tasks/get")
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m7", "status": "input_required", "pollIntervalMs": 50,
        "inputRequests": {"a": ask("first?"), "b": ask("second?")}}}),
    );
    let asked: Vec<mcpwire::rpc::RequestId> = sim
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Output::ServerRequest { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 2);
    // The next state asks only for b: a is withdrawn.
    sim.advance(Duration::from_millis(50));
    let get = sim.take_written()[0]["id"].as_u64().unwrap();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m7", "status": "input_required", "pollIntervalMs": 50,
        "inputRequests": {"b": ask("second?")}}}),
    );
    let withdrawn: Vec<mcpwire::rpc::RequestId> = sim
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Output::ServerRequestCancelled { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(withdrawn.len(), 1);
    let (a, b) = if withdrawn[0] == asked[0] {
        (asked[0].clone(), asked[1].clone())
    } else {
        (asked[1].clone(), asked[0].clone())
    };
    assert_eq!(withdrawn[0], a);
    let answer = |v: Value| serde_json::value::to_raw_value(&v).unwrap();
    let late = sim
        .conn
        .respond(sim.now, a, Ok(answer(json!({"action": "cancel"}))))
        .unwrap();
    assert_eq!(late, mcpwire::rpc::RespondStatus::Withdrawn);
    sim.drain();
    assert!(sim.take_written().is_empty());
    let status = sim
        .conn
        .respond(
            sim.now,
            b,
            Ok(answer(json!({"action": "accept", "content": {}}))),
        )
        .unwrap();
    assert_eq!(status, mcpwire::rpc::RespondStatus::Sent);
    sim.drain();
    let w = sim.take_written();
    let update = w.iter().find(|m| m["method"] == "tasks/update").unwrap();
    assert_eq!(
        update["params"]["inputResponses"],
        json!({"b": {"action": "accept", "content": {}}}),
        "only what is still asked for"
    );
    // The task goes back to work: nothing is left open.
    sim.reply(
        update["id"].as_u64().unwrap(),
        r#"{"resultType":"complete"}"#,
    );
    sim.advance(Duration::from_millis(50));
    let get = sim.take_written()[0]["id"].as_u64().unwrap();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m7", "status": "completed", "result": {"content": []}}}),
    );
    sim.completion(app).unwrap();
}

#[test]
fn modern_the_servers_poll_interval_is_kept_even_when_long() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "m8", "status": "working", "pollIntervalMs": 90000}}),
    );
    sim.take_written();
    for _ in 0..8 {
        sim.advance(Duration::from_secs(10));
    }
    assert!(!sim
        .take_written()
        .iter()
        .any(|m| m["method"] == "tasks/get"));
    sim.advance(Duration::from_secs(10));
    assert!(sim
        .take_written()
        .iter()
        .any(|m| m["method"] == "tasks/get"));
}

#[test]
fn modern_two_awaits_of_one_task_both_take_its_push() {
    let mut sim = modern_tasks();
    let (one, two) = (await_task(&mut sim, "m9"), await_task(&mut sim, "m9"));
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/tasks",
        "params": {"taskId": "m9", "status": "completed",
                   "result": {"content": [{"type": "text", "text": "both"}]}}}));
    for id in [one, two] {
        let raw = sim.completion(id).unwrap();
        let r: CallToolResult = serde_json::from_str(raw.get()).unwrap();
        assert_eq!(r.text(), "both");
    }
}

#[test]
fn modern_with_tasks_off_a_task_result_is_an_error_and_tasks_methods_are_refused() {
    let mut config = elicit_config();
    config.client.tasks = false;
    let mut sim = Sim::probing(config);
    let probe = sim.take_written();
    assert!(
        meta_of(&probe[0])["io.modelcontextprotocol/clientCapabilities"]
            .get("extensions")
            .and_then(|e| e.get("io.modelcontextprotocol/tasks"))
            .is_none()
    );
    sim.reply(0, TASKS_DISCOVER);
    sim.take_events();
    sim.take_written();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "x", "status": "working"}}),
    );
    match sim.completion(app) {
        Err(RequestError::Transport { message }) => {
            assert!(message.contains("tasks extension"), "{message}")
        }
        o => panic!("an unasked-for task is never an empty result: {o:?}"),
    }
    let refused = sim
        .conn
        .send(sim.now, &mcpwire::mcp::methods::GetTask::new("x"), opts());
    assert!(
        matches!(refused, Err(CallError::TurnedOff { .. })),
        "{refused:?}"
    );
}

#[test]
fn legacy_a_call_that_cannot_be_sent_again_completes_once() {
    let mut sim = legacy_unlisted(TASKS_INIT, ConnectionConfig::default());
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("mystery", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    // The child stops reading: the new request cannot be queued.
    sim.conn.set_unwritten(64 << 20);
    sim.server_says(json!({"jsonrpc": "2.0", "id": app,
        "error": {"code": -32601, "message": "tasks only"}}));
    assert!(sim.completion(app).is_err());
    assert!(!sim.conn.cancel(sim.now, app, "late"), "already complete");
    sim.conn.close(sim.now);
    sim.drain();
    let again: Vec<&Output> = sim
        .events
        .iter()
        .filter(|e| matches!(e, Output::Complete { id, .. } if *id == app))
        .collect();
    assert!(again.is_empty(), "completed twice: {again:?}");
}

#[test]
fn legacy_a_call_that_asks_for_a_task_itself_or_is_refused_twice_is_not_remembered() {
    let mut sim = legacy_unlisted(TASKS_INIT, ConnectionConfig::default());
    // The caller's own task param: refused, nothing to retry.
    let params = json!({"name": "odd", "arguments": {}, "task": {"ttl": 1000}});
    let raw = serde_json::value::to_raw_value(&params).unwrap();
    let own = sim
        .conn
        .request(sim.now, "tools/call", Some(&raw), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(json!({"jsonrpc": "2.0", "id": own,
        "error": {"code": -32601, "message": "odd takes no tasks"}}));
    assert!(sim.take_written().is_empty(), "not sent again");
    assert!(matches!(sim.completion(own), Err(RequestError::Remote(_))));
    // Refused plain, then refused as a task: the first refusal is the
    // answer, and the tool is not taken for a task tool.
    for round in 0..2 {
        let app = sim
            .conn
            .send(sim.now, &CallTool::new("plain", json!({})), opts())
            .unwrap();
        sim.drain();
        let w = sim.take_written();
        assert!(w[0]["params"].get("task").is_none(), "round {round}: plain");
        sim.server_says(json!({"jsonrpc": "2.0", "id": app,
            "error": {"code": -32600, "message": "first refusal"}}));
        let w = sim.take_written();
        assert_eq!(w[0]["params"]["task"], json!({}));
        let again = w[0]["id"].as_u64().unwrap();
        sim.server_says(json!({"jsonrpc": "2.0", "id": again,
            "error": {"code": -32601, "message": "plain takes no tasks"}}));
        match sim.completion(app) {
            Err(RequestError::Remote(e)) => assert_eq!(e.message, "first refusal"),
            o => panic!("{o:?}"),
        }
    }
}

#[test]
fn modern_a_question_withdrawn_by_a_stale_state_is_asked_again() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "m10", "status": "working", "pollIntervalMs": 50}}),
    );
    sim.advance(Duration::from_millis(50));
    let get = sim
        .take_written()
        .iter()
        .find(|m| m["method"] == "tasks/get")
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    let ask = json!({"method": "elicitation/create", "params": {"mode": "form", "message": "?",
        "requestedSchema": {"type": "object"}}});
    // A push says input_required before the poll's (older) answer says
    // working.
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/tasks",
        "params": {"taskId": "m10", "status": "input_required", "inputRequests": {"k": ask}}}));
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m10", "status": "working", "pollIntervalMs": 50}}),
    );
    let events = sim.take_events();
    let first = events
        .iter()
        .find_map(|e| match e {
            Output::ServerRequest { id, .. } => Some(id.clone()),
            _ => None,
        })
        .unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, Output::ServerRequestCancelled { id, .. } if *id == first)));
    // The next state asks it again: a new question, answered, sent.
    sim.advance(Duration::from_millis(50));
    let get = sim.take_written()[0]["id"].as_u64().unwrap();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": get, "result": {"resultType": "complete",
        "taskId": "m10", "status": "input_required", "pollIntervalMs": 50,
        "inputRequests": {"k": ask}}}),
    );
    let second = sim
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Output::ServerRequest { id, .. } => Some(id),
            _ => None,
        })
        .expect("asked again");
    assert_ne!(second, first, "a fresh id");
    let answer = serde_json::value::to_raw_value(&json!({"action": "decline"})).unwrap();
    let status = sim.conn.respond(sim.now, second, Ok(answer)).unwrap();
    assert_eq!(status, mcpwire::rpc::RespondStatus::Sent);
    sim.drain();
    let w = sim.take_written();
    let update = w.iter().find(|m| m["method"] == "tasks/update").unwrap();
    assert_eq!(
        update["params"]["inputResponses"],
        json!({"k": {"action": "decline"}})
    );
}

#[test]
fn modern_a_pushed_end_without_its_result_waits_for_the_poll_that_has_it() {
    let mut sim = modern_tasks();
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("quick", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "q2", "status": "completed", "pollIntervalMs": 60000}}),
    );
    let gets: Vec<Value> = sim
        .take_written()
        .into_iter()
        .filter(|m| m["method"] == "tasks/get")
        .collect();
    assert_eq!(gets.len(), 1);
    // A push without the result while that tasks/get is out: not a
    // failure, no second get.
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/tasks",
        "params": {"taskId": "q2", "status": "completed"}}));
    assert!(sim
        .take_events()
        .iter()
        .all(|e| !matches!(e, Output::Complete { .. })));
    sim.server_says(json!({"jsonrpc": "2.0", "id": gets[0]["id"], "result": {
        "resultType": "complete", "taskId": "q2", "status": "completed",
        "result": {"content": [{"type": "text", "text": "q2"}]}}}));
    let raw = sim.completion(app).unwrap();
    let r: CallToolResult = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(r.text(), "q2");
    // A poll that answers an end without its result twice fails.
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("quick", json!({})), opts())
        .unwrap();
    sim.drain();
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc": "2.0", "id": app, "result": {"resultType": "task",
        "taskId": "q3", "status": "working", "pollIntervalMs": 10}}),
    );
    sim.take_written();
    for _ in 0..2 {
        sim.advance(Duration::from_millis(10));
        let get = sim
            .take_written()
            .into_iter()
            .find(|m| m["method"] == "tasks/get")
            .expect("tasks/get");
        sim.server_says(json!({"jsonrpc": "2.0", "id": get["id"], "result": {
            "resultType": "complete", "taskId": "q3", "status": "completed"}}));
    }
    match sim.completion(app) {
        Err(RequestError::Transport { message }) => {
            assert!(message.contains("carries no result"), "{message}")
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn modern_a_task_followed_twice_asks_once_and_one_cancel_spares_the_other() {
    let mut sim = modern_tasks();
    let (one, two) = (await_task(&mut sim, "m11"), await_task(&mut sim, "m11"));
    sim.take_written();
    let ask = json!({"method": "elicitation/create", "params": {"mode": "form", "message": "?",
        "requestedSchema": {"type": "object"}}});
    sim.server_says(json!({"jsonrpc": "2.0", "method": "notifications/tasks",
        "params": {"taskId": "m11", "status": "input_required", "inputRequests": {"k": ask}}}));
    let asked: Vec<mcpwire::rpc::RequestId> = sim
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Output::ServerRequest { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 1, "asked once");
    let answer = serde_json::value::to_raw_value(&json!({"action": "decline"})).unwrap();
    let status = sim
        .conn
        .respond(sim.now, asked[0].clone(), Ok(answer))
        .unwrap();
    assert_eq!(status, mcpwire::rpc::RespondStatus::Sent);
    sim.drain();
    let updates = sim
        .take_written()
        .into_iter()
        .filter(|m| m["method"] == "tasks/update")
        .count();
    assert_eq!(updates, 1);
    // Cancelling one await leaves the task to the other.
    assert!(sim.conn.cancel(sim.now, one, "not me"));
    sim.drain();
    assert!(!sim
        .take_written()
        .iter()
        .any(|m| m["method"] == "tasks/cancel"));
    assert!(sim.conn.cancel(sim.now, two, "nobody"));
    sim.drain();
    assert!(sim
        .take_written()
        .iter()
        .any(|m| m["method"] == "tasks/cancel"));
}

/// The application awaits task `task_id` (`tasks/result`, followed).
fn await_task(sim: &mut Sim, task_id: &str) -> u64 {
    let app = sim
        .conn
        .send(
            sim.now,
            &mcpwire::mcp::methods::TaskResult::new(task_id),
            opts(),
        )
        .unwrap();
    sim.drain();
    app
}

// ---- the era probe and handshake-era servers: restart -------------------

/// The test server's last words, as the official Rust SDK before 3.x
/// says them.
const RMCP_DEATH: &[u8] = b"Error: ConnectionClosed(\"initialized request\")\n";

#[test]
fn a_server_that_dies_when_probed_is_started_again_for_initialize() {
    let mut sim = Sim::probing(ConnectionConfig::default());
    assert_eq!(sim.take_written()[0]["method"], "server/discover");
    sim.input(Input::Stderr(RMCP_DEATH));
    sim.exit(ExitStatus {
        code: Some(1),
        signal: None,
    });
    let events = sim.take_events();
    assert!(
        events.iter().any(|e| matches!(e, Output::Spawn)),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, Output::Closed(_))));
    assert!(!sim.conn.is_closed());
    // Whatever the old process's pipes still bring is not read.
    sim.reply(0, DISCOVER);
    sim.input(Input::Exited(ExitStatus {
        code: Some(1),
        signal: None,
    }));
    assert!(sim.take_events().is_empty());
    assert!(
        sim.take_written().is_empty(),
        "nothing before the new process"
    );
    // The new process: initialize, with an id of its own.
    sim.input(Input::Spawned);
    let w = sim.take_written();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["method"], "initialize");
    assert_eq!(w[0]["id"], 1);
    sim.reply(1, INIT_RESULT);
    assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
    assert_eq!(sim.conn.era(), Some(mcpwire::connection::Era::Legacy));
    // A crash of the new process later is a crash: no second restart.
    let id = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.exit(ExitStatus {
        code: Some(3),
        signal: None,
    });
    let e = sim.completion(id).unwrap_err();
    assert!(e.to_string().contains("status 3"), "{e}");
}

#[test]
fn a_silent_server_is_started_again_for_initialize() {
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.advance(Duration::from_millis(999));
    assert!(sim.take_events().is_empty());
    sim.advance(Duration::from_millis(1));
    // No notifications/cancelled for the probe: its process is replaced.
    assert!(sim.take_written().is_empty());
    let events = sim.take_events();
    assert!(events.contains_spawn_path(), "{events:?}");
    // It ignores SIGTERM: SIGKILL after the restart grace (300 ms).
    sim.advance(Duration::from_millis(299));
    assert!(sim.take_events().is_empty());
    sim.advance(Duration::from_millis(1));
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Signal(Signal::Kill)]
    ));
    sim.exit(ExitStatus {
        code: None,
        signal: Some(9),
    });
    assert!(matches!(sim.take_events().as_slice(), [Output::Spawn]));
    sim.input(Input::Spawned);
    assert_eq!(sim.take_written()[0]["method"], "initialize");
    sim.reply(1, INIT_RESULT);
    assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
}

#[test]
fn a_server_still_starting_is_given_the_time_to_read_the_probe() {
    // It has not read the probe for 3 s (an interpreter loading), then
    // answers it: the 2026-07-28 era, no restart.
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.unread = Some(180);
    for _ in 0..30 {
        sim.advance(Duration::from_millis(100));
    }
    assert!(sim.take_events().is_empty(), "no restart while it starts");
    sim.unread = Some(0);
    sim.advance(Duration::from_millis(100));
    sim.reply(0, DISCOVER);
    assert!(sim.take_events().iter().any(|e| matches!(e, Output::Ready)));
    assert_eq!(sim.conn.era(), Some(mcpwire::connection::Era::Modern));
    // Read at 2.5 s and silent since: restarted a second after.
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.unread = Some(180);
    for _ in 0..25 {
        sim.advance(Duration::from_millis(100));
    }
    sim.unread = Some(0);
    for _ in 0..9 {
        sim.advance(Duration::from_millis(100));
    }
    assert!(sim.take_events().is_empty());
    for _ in 0..3 {
        sim.advance(Duration::from_millis(100));
    }
    let events = sim.take_events();
    assert!(events.contains_spawn_path(), "{events:?}");
    assert!(matches!(
        sim.conn.era_finding(),
        Some(mcpwire::connection::EraFinding::Restarted(why)) if why.contains("read server/discover")
    ));
    // A driver that cannot tell: the second from the probe.
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.unread = None;
    for _ in 0..10 {
        sim.advance(Duration::from_millis(100));
    }
    assert!(sim.take_events().contains_spawn_path());
}

#[test]
fn a_server_that_closes_stdout_when_probed_is_started_again() {
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.input(Input::StdoutEof);
    // It did not exit: after the wait for its exit (1 s), stopped.
    sim.advance(Duration::from_secs(1));
    let events = sim.take_events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Output::Signal(Signal::Terminate))),
        "{events:?}"
    );
    sim.input(Input::StderrEof);
    sim.input(Input::Exited(ExitStatus {
        code: None,
        signal: Some(15),
    }));
    assert!(sim.take_events().iter().any(|e| matches!(e, Output::Spawn)));
    sim.input(Input::Spawned);
    assert_eq!(sim.take_written()[0]["method"], "initialize");
}

#[test]
fn a_restarted_server_that_dies_again_fails_naming_both_starts() {
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.input(Input::Stderr(RMCP_DEATH));
    sim.exit(ExitStatus {
        code: Some(1),
        signal: None,
    });
    sim.take_events();
    sim.input(Input::Spawned);
    assert_eq!(sim.take_written()[0]["method"], "initialize");
    sim.input(Input::Stderr(b"panic: no config file\n"));
    sim.exit(ExitStatus {
        code: Some(2),
        signal: None,
    });
    let Some(CloseReason::ServerGone(m)) = sim.conn.close_reason() else {
        panic!("{:?}", sim.conn.close_reason());
    };
    assert!(
        m.contains("status 2") && m.contains("no config file"),
        "{m}"
    );
    assert!(
        m.contains("earlier start") && m.contains("ConnectionClosed"),
        "{m}"
    );
    assert!(sim
        .take_events()
        .iter()
        .any(|e| matches!(e, Output::Closed(_))));
}

#[test]
fn a_server_that_cannot_be_started_again_closes_the_connection() {
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.exit(ExitStatus {
        code: Some(1),
        signal: None,
    });
    sim.take_events();
    sim.input(Input::SpawnFailed("No such file or directory"));
    let Some(CloseReason::ServerGone(m)) = sim.conn.close_reason() else {
        panic!("{:?}", sim.conn.close_reason());
    };
    assert!(m.contains("could not start the server again"), "{m}");
    assert!(sim
        .take_events()
        .iter()
        .any(|e| matches!(e, Output::Closed(_))));
}

/// A start the connection never asked for, reported by an executor,
/// changes nothing: the process still runs and a close still ends
/// (found by the connection fuzz target).
#[test]
fn a_stray_spawn_report_changes_nothing() {
    for stray in [Input::SpawnFailed("no such file"), Input::Spawned] {
        let mut sim = Sim::probing(ConnectionConfig::default());
        sim.input(stray);
        assert!(!sim.conn.is_closed());
        sim.conn.close(sim.now);
        sim.drain();
        sim.exit(ExitStatus {
            code: Some(0),
            signal: None,
        });
        assert!(sim.conn.is_closed(), "{:?}", sim.take_events());
    }
}

#[test]
fn a_close_during_the_restart_stops_the_new_process_too() {
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.exit(ExitStatus {
        code: Some(1),
        signal: None,
    });
    assert!(sim.take_events().iter().any(|e| matches!(e, Output::Spawn)));
    sim.conn.close(sim.now);
    sim.drain();
    assert!(!sim.conn.is_closed(), "the new process is still to come");
    sim.input(Input::Spawned);
    assert!(sim.take_written().is_empty(), "no initialize to it");
    assert!(sim
        .take_events()
        .iter()
        .any(|e| matches!(e, Output::CloseStdin)));
    sim.exit(ExitStatus {
        code: Some(0),
        signal: None,
    });
    assert!(sim.conn.is_closed());
    // Closed before the old one was gone: no new process at all.
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.advance(Duration::from_secs(1));
    sim.take_events();
    sim.conn.close(sim.now);
    sim.exit(ExitStatus {
        code: None,
        signal: Some(15),
    });
    let events = sim.take_events();
    assert!(
        !events.iter().any(|e| matches!(e, Output::Spawn)),
        "{events:?}"
    );
    assert!(sim.conn.is_closed());
}

#[test]
fn a_server_pinned_modern_or_answering_the_probe_is_never_restarted() {
    // Pinned to 2026-07-28: a death is the connection's end.
    let config = ConnectionConfig {
        era: EraPolicy::Modern,
        ..ConnectionConfig::default()
    };
    let mut sim = Sim::probing(config);
    sim.take_written();
    sim.exit(ExitStatus {
        code: Some(1),
        signal: None,
    });
    assert!(!sim.take_events().iter().any(|e| matches!(e, Output::Spawn)));
    assert!(sim.conn.is_closed());
    // An error answer: the same process gets initialize.
    let mut sim = Sim::probing(ConnectionConfig::default());
    sim.take_written();
    sim.server_says(
        json!({"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}),
    );
    assert_eq!(sim.take_written()[0]["method"], "initialize");
    assert!(!sim.take_events().iter().any(|e| matches!(e, Output::Spawn)));
    // Dying during that initialize (the probe may have caused it): one
    // restart still.
    sim.exit(ExitStatus {
        code: Some(1),
        signal: None,
    });
    assert!(sim.take_events().iter().any(|e| matches!(e, Output::Spawn)));
    sim.input(Input::Spawned);
    let w = sim.take_written();
    assert_eq!(w[0]["method"], "initialize");
    assert_eq!(w[0]["id"], 2);
}
