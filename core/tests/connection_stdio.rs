//! Scripted conversations through the whole core over the stdio transport,
//! with simulated time: one test per rule, named after it.

use std::time::{Duration, Instant};

use mcpwire::connection::{
    CallError, CloseReason, Connection, ConnectionConfig, Diagnostic, Input, Output, TransportSpec,
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
}

const INIT_RESULT: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"sim","version":"1.0"},"instructions":"be kind"}"#;

impl Sim {
    fn new(config: ConnectionConfig) -> Sim {
        let now = Instant::now();
        let conn = Connection::new(config, TransportSpec::Stdio, now);
        let mut sim = Sim {
            conn,
            now,
            written: Vec::new(),
            events: Vec::new(),
            chunk: None,
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
        sim.conn.list_tools(sim.now, None, opts()),
        Err(CallError::NotReady)
    );
    let ping = sim.conn.ping(sim.now, opts()).unwrap();
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
    sim.input(Input::Exited(ExitStatus {
        code: Some(0),
        signal: None,
    }));
    match sim.take_events().as_slice() {
        [Output::Closed(CloseReason::Handshake(m))] => {
            assert!(m.contains("1999-01-01"), "{m}");
            assert!(m.contains("2025-11-25"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert!(sim.conn.is_closed());
    assert!(matches!(
        sim.conn.ping(sim.now, opts()),
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
        sim.conn.list_prompts(sim.now, None, opts()),
        Err(CallError::NotSupported {
            method: "prompts/list".into(),
            capability: "prompts"
        })
    );
    assert!(sim.take_written().is_empty());
    // Declared ones go out.
    sim.conn.list_tools(sim.now, None, opts()).unwrap();
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
            .list_tools(sim.now, pages.cursor(), opts())
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
        .call_tool(sim.now, "echo", Some(&json!({"message":"hi"})), opts())
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
        .call_tool::<Value>(sim.now, "nope", None, opts())
        .unwrap();
    sim.drain();
    sim.server_says(
        json!({"jsonrpc":"2.0","id":id,"error":{"code":-32602,"message":"Unknown tool: nope"}}),
    );
    let e = sim.completion(id).unwrap_err();
    assert_eq!(e.to_string(), "MCP error -32602: Unknown tool: nope");
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
    let id = sim.conn.ping(sim.now, opts()).unwrap();
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
    let id = sim.conn.ping(sim.now, opts()).unwrap();
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
    let a = sim.conn.ping(sim.now, opts()).unwrap();
    let b = sim
        .conn
        .call_tool(sim.now, "x", Some(&json!({})), opts())
        .unwrap();
    sim.drain();
    sim.input(Input::Stderr(b"starting\nfatal: missing API key\n"));
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Log(a), Output::Log(b)] if a == "starting" && b == "fatal: missing API key")
    );
    sim.input(Input::StdoutEof);
    assert!(sim.take_events().is_empty(), "waits for the exit status");
    sim.input(Input::Exited(ExitStatus {
        code: Some(7),
        signal: None,
    }));
    let expected = "server exited with status 7: starting\nfatal: missing API key";
    for id in [a, b] {
        match sim.completion(id) {
            Err(RequestError::Closed { reason }) => assert_eq!(reason, expected),
            other => panic!("{other:?}"),
        }
    }
    match sim.take_events().as_slice() {
        [Output::Closed(CloseReason::ServerGone(m))] => assert_eq!(m, expected),
        other => panic!("{other:?}"),
    }
    // Later calls fail fast and say why.
    match sim.conn.ping(sim.now, opts()) {
        Err(CallError::Closed(m)) => assert_eq!(m, expected),
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.conn.poll_timeout(), None);
}

#[test]
fn stdout_eof_without_an_exit_fails_pending_after_the_wait_and_stops_the_child() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let a = sim.conn.ping(sim.now, opts()).unwrap();
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
    sim.input(Input::Exited(ExitStatus {
        code: None,
        signal: Some(15),
    }));
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Closed(CloseReason::ServerGone(_))]
    ));
}

#[test]
fn graceful_close_closes_stdin_then_terminates_then_kills() {
    let mut sim = Sim::ready(ConnectionConfig::default());
    let a = sim.conn.ping(sim.now, opts()).unwrap();
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
    sim.input(Input::Exited(ExitStatus {
        code: None,
        signal: Some(9),
    }));
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
    sim.input(Input::Exited(ExitStatus {
        code: Some(0),
        signal: None,
    }));
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
        .call_tool(sim.now, "slow", Some(&json!({})), opts())
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
            .call_tool(
                sim.now,
                "echo",
                Some(&json!({"message":"héllo\nworld"})),
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
