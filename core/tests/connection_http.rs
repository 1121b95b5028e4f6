//! Scripted conversations through the whole core over Streamable HTTP and
//! legacy HTTP+SSE, with simulated time and no sockets: the test plays the
//! server by answering each exchange the connection asks for (head, body
//! chunks, end or failure). One test per rule, named after it.

use std::time::{Duration, Instant};

use mcpwire::auth::{AuthConfig, AuthState, ClientCredentials, Tokens};
use mcpwire::codec::http1::ResponseHead;
use mcpwire::connection::{
    CloseReason, Connection, ConnectionConfig, Diagnostic, EraPolicy, Input, Output, TransportSpec,
};
use mcpwire::mcp::methods::{CallTool, ListTools, Ping};
use mcpwire::mcp::parse_result;
use mcpwire::mcp::types::CallToolResult;
use mcpwire::rpc::{RequestError, RequestId, RequestOptions, RespondStatus};
use mcpwire::transport::{ExchangeId, ExchangePurpose, HttpMethod, HttpRequest, HttpUrl};
use serde_json::value::RawValue;
use serde_json::{json, Value};

const URL: &str = "http://mcp.test/mcp";
const INIT_RESULT: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"sim","version":"1.0"}}"#;
const INIT_RESULT_2024: &str = r#"{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"0.1"}}"#;

/// How response bodies are cut before they are fed in.
#[derive(Debug, Clone, Copy)]
enum Chunking {
    Whole,
    Bytes,
    /// Random sizes 1..=17 from this seed.
    Random(u64),
}

/// A connection plus what it asked of the network and told the app.
struct Sim {
    conn: Connection,
    now: Instant,
    /// Exchanges asked for and not yet taken by the test, in order.
    requests: Vec<HttpRequest>,
    /// Exchanges the connection aborted.
    aborted: Vec<ExchangeId>,
    /// Everything else, in order.
    events: Vec<Output>,
    chunking: Chunking,
    rng: u64,
    closed: bool,
}

impl Sim {
    /// These conversations are about the `initialize` era: `Auto` is
    /// pinned to `Legacy` (the probe has its own tests, `probing`).
    fn new(mut config: ConnectionConfig, transport: TransportSpec) -> Sim {
        if config.era == EraPolicy::Auto {
            config.era = EraPolicy::Legacy;
        }
        Sim::probing(config, transport)
    }

    /// Keeps the configured era policy.
    fn probing(config: ConnectionConfig, transport: TransportSpec) -> Sim {
        let now = Instant::now();
        let conn = Connection::new(config, transport, now);
        let mut sim = Sim {
            conn,
            now,
            requests: Vec::new(),
            aborted: Vec::new(),
            events: Vec::new(),
            chunking: Chunking::Whole,
            rng: 0,
            closed: false,
        };
        sim.drain();
        sim
    }

    fn http(config: ConnectionConfig) -> Sim {
        Sim::new(config, TransportSpec::StreamableHttp(url(URL)))
    }

    /// A Streamable HTTP connection that finished its handshake (session
    /// `s-1`), with the `initialized` POST answered and the GET listener
    /// open; returns the listener's exchange.
    fn ready(config: ConnectionConfig) -> (Sim, ExchangeId) {
        let mut sim = Sim::http(config);
        let init = sim.next_request();
        assert_eq!(body(&init)["method"], "initialize");
        sim.json(
            init.exchange,
            &[("Mcp-Session-Id", "s-1")],
            &reply(0, INIT_RESULT),
        );
        // Ready waits for the GET listener's head.
        assert!(sim.take_events().is_empty(), "{:?}", sim.events);
        let initialized = sim.next_request();
        assert_eq!(body(&initialized)["method"], "notifications/initialized");
        sim.accepted(initialized.exchange);
        let listen = sim.next_request();
        assert_eq!(listen.purpose, ExchangePurpose::Listen);
        sim.sse_open(listen.exchange);
        assert!(
            matches!(sim.take_events().as_slice(), [Output::Ready]),
            "{:?}",
            sim.events
        );
        assert!(sim.requests.is_empty(), "{:?}", sim.requests);
        sim.aborted.clear();
        (sim, listen.exchange)
    }

    fn drain(&mut self) {
        while let Some(o) = self.conn.poll_output() {
            assert!(!self.closed, "output after Closed: {o:?}");
            match o {
                Output::Http(r) => self.requests.push(*r),
                Output::AbortHttp(x) => self.aborted.push(x),
                other => {
                    self.closed = matches!(other, Output::Closed(_));
                    self.events.push(other);
                }
            }
        }
    }

    fn input(&mut self, input: Input<'_>) {
        self.conn.handle_input(self.now, input);
        self.drain();
    }

    fn head(&mut self, exchange: ExchangeId, status: u16, headers: &[(&str, &str)]) {
        let head = ResponseHead {
            status,
            reason: reason(status).to_owned(),
            version: 1,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
        };
        self.input(Input::HttpHead {
            exchange,
            head: &head,
        });
    }

    /// Body bytes, cut as `chunking` says.
    fn body(&mut self, exchange: ExchangeId, data: &[u8]) {
        let mut rest = data;
        while !rest.is_empty() {
            let n = match self.chunking {
                Chunking::Whole => rest.len(),
                Chunking::Bytes => 1,
                Chunking::Random(_) => (self.next_random() % 17 + 1) as usize,
            }
            .min(rest.len());
            let (chunk, tail) = rest.split_at(n);
            self.input(Input::HttpBody {
                exchange,
                data: chunk,
            });
            rest = tail;
        }
    }

    fn end(&mut self, exchange: ExchangeId) {
        self.input(Input::HttpEnd { exchange });
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A whole `200 application/json` answer.
    fn json(&mut self, exchange: ExchangeId, headers: &[(&str, &str)], text: &str) {
        let mut h = vec![("Content-Type", "application/json")];
        h.extend_from_slice(headers);
        self.head(exchange, 200, &h);
        self.body(exchange, text.as_bytes());
        self.end(exchange);
    }

    /// `202 Accepted`, no body.
    fn accepted(&mut self, exchange: ExchangeId) {
        self.head(exchange, 202, &[]);
        self.end(exchange);
    }

    /// The head of a `200 text/event-stream` answer.
    fn sse_open(&mut self, exchange: ExchangeId) {
        self.head(exchange, 200, &[("Content-Type", "text/event-stream")]);
    }

    /// One SSE `message` event carrying `message`.
    fn sse_message(&mut self, exchange: ExchangeId, message: &Value) {
        let event = format!("event: message\ndata: {message}\n\n");
        self.body(exchange, event.as_bytes());
    }

    /// Moves the clock to `now + d`, firing every timer due on the way at
    /// its instant.
    fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        while let Some(t) = self.conn.poll_timeout() {
            if t > target {
                break;
            }
            self.now = self.now.max(t);
            self.conn.handle_timeout(self.now);
            self.drain();
            if let Some(next) = self.conn.poll_timeout() {
                assert!(next > self.now, "poll_timeout not after handle_timeout");
            }
        }
        self.now = target;
    }

    fn next_request(&mut self) -> HttpRequest {
        assert!(
            !self.requests.is_empty(),
            "no request; events {:?}",
            self.events
        );
        self.requests.remove(0)
    }

    fn take_requests(&mut self) -> Vec<HttpRequest> {
        std::mem::take(&mut self.requests)
    }

    fn take_events(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.events)
    }

    /// The only completion of request `id`; other events stay.
    fn completion(&mut self, id: u64) -> Result<Box<RawValue>, RequestError> {
        let mut found = None;
        for e in self.take_events() {
            match e {
                Output::Complete { id: i, outcome } if i == id => {
                    assert!(found.is_none(), "completed twice");
                    found = Some(outcome);
                }
                other => self.events.push(other),
            }
        }
        found.unwrap_or_else(|| panic!("request {id} did not complete: {:?}", self.events))
    }

    /// Drops diagnostics (they are log lines, not outcomes).
    fn drop_diagnostics(&mut self) {
        self.events
            .retain(|e| !matches!(e, Output::Diagnostic(Diagnostic::Transport(_))));
    }
}

fn url(s: &str) -> HttpUrl {
    HttpUrl::parse(s).unwrap()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        _ => "",
    }
}

fn reply(id: u64, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

fn body(r: &HttpRequest) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

fn opts() -> RequestOptions {
    RequestOptions::default()
}

fn tool_text(raw: &RawValue) -> String {
    parse_result::<CallToolResult>(raw).unwrap().text()
}

fn assert_post(r: &HttpRequest, session: Option<&str>, version: Option<&str>) {
    assert_eq!(r.method, HttpMethod::Post);
    assert_eq!(r.url.to_string(), URL);
    assert_eq!(
        r.header("Accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.header("Mcp-Session-Id"), session);
    assert_eq!(r.header("MCP-Protocol-Version"), version);
}

#[test]
fn http_initialize_over_sse_sets_the_session_and_sends_initialized() {
    let mut sim = Sim::http(ConnectionConfig::default());
    let init = sim.next_request();
    assert!(sim.requests.is_empty(), "only initialize before its answer");
    assert_eq!(init.purpose, ExchangePurpose::Request);
    assert_post(&init, None, None);
    let msg = body(&init);
    assert_eq!(msg["method"], "initialize");
    assert_eq!(msg["id"], 0);
    assert_eq!(msg["params"]["protocolVersion"], "2025-11-25");

    sim.head(
        init.exchange,
        200,
        &[
            ("Content-Type", "text/event-stream"),
            ("mcp-session-id", "abc-123"),
        ],
    );
    // The priming event (an id, empty data) is skipped.
    sim.body(init.exchange, b"id: 1\ndata: \n\n");
    assert!(sim.events.is_empty() && sim.requests.is_empty());
    sim.body(
        init.exchange,
        format!("id: 2\nevent: message\ndata: {}\n\n", reply(0, INIT_RESULT)).as_bytes(),
    );
    // Not Ready yet: it waits (up to listen_settle) for the GET listener.
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert!(sim.conn.is_ready());
    assert_eq!(sim.conn.protocol_version(), Some("2025-11-25"));
    assert_eq!(sim.conn.transport_name(), "streamable-http");
    // The initialize stream is done with: closed.
    assert_eq!(sim.aborted, [init.exchange]);

    let initialized = sim.next_request();
    assert_eq!(initialized.purpose, ExchangePurpose::Notify);
    assert_post(&initialized, Some("abc-123"), Some("2025-11-25"));
    assert_eq!(
        body(&initialized),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"})
    );
    // Nothing else (not even the GET listener, nor a request made now)
    // until the server has accepted it.
    let ping = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    sim.accepted(initialized.exchange);
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    let ping_post = sim.next_request();
    assert_eq!(body(&ping_post)["method"], "ping");
    sim.json(ping_post.exchange, &[], &reply(ping, "{}"));
    assert!(sim.completion(ping).is_ok());
    let listen = sim.next_request();
    assert_eq!(listen.method, HttpMethod::Get);
    assert_eq!(listen.purpose, ExchangePurpose::Listen);
    assert_eq!(listen.header("Accept"), Some("text/event-stream"));
    assert_eq!(listen.header("Mcp-Session-Id"), Some("abc-123"));
    assert_eq!(listen.header("MCP-Protocol-Version"), Some("2025-11-25"));
    assert!(listen.body.is_empty());
    assert!(sim.requests.is_empty());

    sim.sse_open(listen.exchange);
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Ready]),
        "{:?}",
        sim.events
    );
    // A late end of the aborted initialize stream is ignored.
    sim.end(init.exchange);
    assert!(
        sim.events.is_empty() && sim.requests.is_empty(),
        "{:?}",
        sim.events
    );
    // The listener carries server-initiated messages.
    sim.sse_message(
        listen.exchange,
        &json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}),
    );
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::Notification(_)]
    ));
}

#[test]
fn http_json_tool_call_completes() {
    let (mut sim, _) = Sim::ready(ConnectionConfig::default());
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("echo", json!({"message":"hi"})),
            opts(),
        )
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    assert_eq!(post.purpose, ExchangePurpose::Request);
    assert_post(&post, Some("s-1"), Some("2025-11-25"));
    assert_eq!(
        body(&post),
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}})
    );
    sim.json(
        post.exchange,
        &[],
        &reply(id, r#"{"content":[{"type":"text","text":"Echo: hi"}]}"#),
    );
    assert_eq!(tool_text(&sim.completion(id).unwrap()), "Echo: hi");
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert!(sim.requests.is_empty() && sim.aborted.is_empty());
    assert_eq!(sim.conn.pending(), 0);
}

/// A JSON answer is read once, by the engine, which tells the transport
/// which request it answered: a body that is not a response (malformed,
/// or another request's) fails its call when the body ends, not at its
/// timeout; a response in any layout completes it.
#[test]
fn http_json_answer_that_is_not_the_response_fails_at_once() {
    let (mut sim, _) = Sim::ready(ConnectionConfig::default());
    let call = |sim: &mut Sim| {
        let id = sim.conn.send(sim.now, &Ping, opts()).unwrap();
        sim.drain();
        (id, sim.next_request().exchange)
    };
    for bad in [
        r#"{"jsonrpc":"2.0","id":ID,"result":"#.to_owned(),
        "not json".to_owned(),
        r#"{"jsonrpc":"2.0","id":999,"result":{}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#
            .to_owned(),
    ] {
        let (id, ex) = call(&mut sim);
        sim.json(ex, &[], &bad.replace("ID", &id.to_string()));
        let failed = sim.completion(id);
        assert!(
            matches!(&failed, Err(RequestError::Transport { message }) if message.contains("is not its response")),
            "{bad}: {failed:?}"
        );
        sim.drop_diagnostics();
        sim.take_events();
    }
    for good in [
        r#"{"jsonrpc":"2.0","id":ID,"result":{}}"#,
        r#" { "result" : {} , "id" : ID , "jsonrpc" : "2.0" } "#,
        r#"{"jsonrpc":"2.0","id":ID,"error":{"code":-32603,"message":"no"}}"#,
    ] {
        let (id, ex) = call(&mut sim);
        sim.json(ex, &[], &good.replace("ID", &id.to_string()));
        let outcome = sim.completion(id);
        assert!(
            outcome.is_ok()
                || matches!(&outcome, Err(RequestError::Remote(e)) if e.message == "no"),
            "{good}: {outcome:?}"
        );
    }
    assert_eq!(sim.conn.pending(), 0);
}

#[test]
fn http_sse_tool_call_with_server_request_first() {
    let mut config = ConnectionConfig::default();
    config.client.capabilities.elicitation = Some(serde_json::from_str(r#"{"form":{}}"#).unwrap());
    let (mut sim, _) = Sim::ready(config);
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("book", json!({})), opts())
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.sse_open(post.exchange);
    sim.body(post.exchange, b"id: e-0\ndata: \n\n");
    // A declared server request arrives on the call's stream first.
    let elicit = json!({"jsonrpc":"2.0","id":"el-1","method":"elicitation/create","params":{"message":"Which date?","requestedSchema":{"type":"object","properties":{"date":{"type":"string"}}}}});
    sim.body(
        post.exchange,
        format!("id: e-1\nevent: message\ndata: {elicit}\n\n").as_bytes(),
    );
    let server_id = match sim.take_events().as_slice() {
        [Output::ServerRequest { id, method, params }] if method == "elicitation/create" => {
            let params: Value = serde_json::from_str(params.as_ref().unwrap().get()).unwrap();
            assert_eq!(params["message"], "Which date?");
            id.clone()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(server_id, RequestId::String("el-1".into()));
    // An undeclared one is answered -32601 by the core, in its own POST.
    sim.sse_message(
        post.exchange,
        &json!({"jsonrpc":"2.0","id":7,"method":"roots/list"}),
    );
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    let refusal = sim.next_request();
    assert_eq!(refusal.purpose, ExchangePurpose::Notify);
    assert_eq!(body(&refusal)["id"], 7);
    assert_eq!(body(&refusal)["error"]["code"], -32601);
    sim.accepted(refusal.exchange);

    let answer = serde_json::value::to_raw_value(
        &json!({"action":"accept","content":{"date":"2025-12-01"}}),
    )
    .unwrap();
    assert_eq!(
        sim.conn.respond(sim.now, server_id, Ok(answer)).unwrap(),
        RespondStatus::Sent
    );
    sim.drain();
    let response = sim.next_request();
    assert_eq!(response.purpose, ExchangePurpose::Notify);
    assert_post(&response, Some("s-1"), Some("2025-11-25"));
    assert_eq!(
        body(&response),
        json!({"jsonrpc":"2.0","id":"el-1","result":{"action":"accept","content":{"date":"2025-12-01"}}})
    );
    sim.accepted(response.exchange);
    assert!(sim.events.is_empty() && sim.requests.is_empty());

    // Then the result completes the call, and its stream is closed.
    sim.body(
        post.exchange,
        format!(
            "id: e-2\nevent: message\ndata: {}\n\n",
            reply(id, r#"{"content":[{"type":"text","text":"booked"}]}"#)
        )
        .as_bytes(),
    );
    assert_eq!(tool_text(&sim.completion(id).unwrap()), "booked");
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert_eq!(sim.aborted, [post.exchange]);
    sim.end(post.exchange);
    assert!(sim.events.is_empty() && sim.requests.is_empty());
}

#[test]
fn http_404_with_session_reinitializes_and_resends_once() {
    let (mut sim, listen) = Sim::ready(ConnectionConfig::default());
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("echo", json!({"message":"again"})),
            opts(),
        )
        .unwrap();
    sim.drain();
    let first = sim.next_request();
    assert_eq!(first.header("Mcp-Session-Id"), Some("s-1"));

    sim.head(first.exchange, 404, &[]);
    // The session is gone: its exchanges are closed, a fresh initialize
    // goes out without the old id or version.
    assert!(sim.aborted.contains(&first.exchange));
    assert!(sim.aborted.contains(&listen));
    let reinit = sim.next_request();
    assert!(sim.requests.is_empty(), "everything else waits");
    assert_post(&reinit, None, None);
    assert_eq!(body(&reinit)["method"], "initialize");
    let init_id = body(&reinit)["id"].as_u64().unwrap();
    assert_ne!(init_id, id);
    assert!(sim.conn.is_ready(), "the app may go on calling meanwhile");

    sim.json(
        reinit.exchange,
        &[("Mcp-Session-Id", "s-2")],
        &reply(init_id, INIT_RESULT),
    );
    sim.drop_diagnostics();
    assert!(sim.events.is_empty(), "no second Ready: {:?}", sim.events);
    // notifications/initialized goes out alone: the resent call, a call
    // made now and the listener wait until the server has accepted it,
    // however long that takes (they travel on other connections and
    // could overtake it).
    let initialized = sim.next_request();
    assert_eq!(body_method(&initialized), "notifications/initialized");
    assert_post(&initialized, Some("s-2"), Some("2025-11-25"));
    let id3 = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    sim.advance(Duration::from_secs(2));
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    // The head of its 202 releases them (the body need not have ended).
    sim.head(initialized.exchange, 202, &[]);
    let requests = sim.take_requests();
    let methods: Vec<_> = requests
        .iter()
        .map(|r| (r.method, body_method(r)))
        .collect();
    assert_eq!(
        methods,
        [
            (HttpMethod::Post, "tools/call".to_owned()),
            (HttpMethod::Post, "ping".to_owned()),
            (HttpMethod::Get, String::new()),
        ]
    );
    sim.end(initialized.exchange);
    // Sent again as it was, in the new session.
    let resent = &requests[0];
    assert_eq!(resent.body, first.body);
    assert_post(resent, Some("s-2"), Some("2025-11-25"));
    assert_post(&requests[1], Some("s-2"), Some("2025-11-25"));
    assert_eq!(requests[2].header("Mcp-Session-Id"), Some("s-2"));
    sim.json(requests[1].exchange, &[], &reply(id3, "{}"));
    assert!(sim.completion(id3).is_ok());
    sim.json(
        resent.exchange,
        &[],
        &reply(id, r#"{"content":[{"type":"text","text":"again"}]}"#),
    );
    assert_eq!(tool_text(&sim.completion(id).unwrap()), "again");
    assert!(sim.events.is_empty(), "{:?}", sim.events);

    // Only once: a request resent after a 404 that meets another 404 fails.
    let id2 = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    let ping = sim.next_request();
    sim.head(ping.exchange, 404, &[]);
    let reinit = sim.next_request();
    let init_id = body(&reinit)["id"].as_u64().unwrap();
    sim.json(
        reinit.exchange,
        &[("Mcp-Session-Id", "s-3")],
        &reply(init_id, INIT_RESULT),
    );
    let initialized = sim.next_request();
    assert_eq!(body_method(&initialized), "notifications/initialized");
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    sim.accepted(initialized.exchange);
    let requests = sim.take_requests();
    let resent = requests
        .iter()
        .find(|r| body_method(r) == "ping")
        .expect("ping resent");
    sim.head(resent.exchange, 404, &[]);
    match sim.completion(id2) {
        Err(RequestError::Transport { message }) => assert_eq!(message, "session expired"),
        other => panic!("{other:?}"),
    }
}

fn body_method(r: &HttpRequest) -> String {
    if r.body.is_empty() {
        return String::new();
    }
    body(r)["method"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn http_error_status_fails_the_call_with_http_text() {
    let (mut sim, _) = Sim::ready(ConnectionConfig::default());
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("explode", json!({})), opts())
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.head(
        post.exchange,
        500,
        &[
            ("Content-Type", "text/plain"),
            ("WWW-Authenticate", r#"Bearer realm="mcp""#),
        ],
    );
    sim.body(post.exchange, b"boom\n");
    assert!(sim.events.is_empty());
    sim.end(post.exchange);
    match sim.completion(id) {
        Err(RequestError::Http { status, message }) => {
            assert_eq!(status, 500);
            assert_eq!(
                message,
                r#"HTTP 500: boom (WWW-Authenticate: Bearer realm="mcp")"#
            );
        }
        other => panic!("{other:?}"),
    }
    // Only that call failed: the connection goes on.
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert!(sim.conn.is_ready());
    let id = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.json(post.exchange, &[], &reply(id, "{}"));
    assert!(sim.completion(id).is_ok());
}

#[test]
fn http_401_on_initialize_fails_connect() {
    let mut sim = Sim::http(ConnectionConfig::default());
    let init = sim.next_request();
    sim.head(
        init.exchange,
        401,
        &[(
            "WWW-Authenticate",
            r#"Bearer resource_metadata="http://mcp.test/.well-known/oauth-protected-resource""#,
        )],
    );
    sim.body(init.exchange, b"unauthorized");
    sim.end(init.exchange);
    let expected = "initialize failed: HTTP 401: unauthorized (WWW-Authenticate: Bearer resource_metadata=\"http://mcp.test/.well-known/oauth-protected-resource\")";
    match sim.take_events().as_slice() {
        [Output::Closed(CloseReason::Handshake(m))] => assert_eq!(m, expected),
        other => panic!("{other:?}"),
    }
    // Nothing to DELETE: no session was ever set up.
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    assert!(sim.conn.is_closed());
    assert_eq!(sim.conn.close_reason().unwrap().message(), expected);
    assert_eq!(sim.conn.poll_timeout(), None);
    match sim.conn.send(sim.now, &Ping, opts()) {
        Err(mcpwire::connection::CallError::Closed(m)) => assert_eq!(m, expected),
        other => panic!("{other:?}"),
    }
}

#[test]
fn sse_resume_waits_retry_then_sends_last_event_id() {
    let (mut sim, _) = Sim::ready(ConnectionConfig::default());
    let start = sim.now;
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.sse_open(post.exchange);
    sim.body(post.exchange, b"id: event-1\nretry: 500\ndata: \n\n");
    // The server closes the stream before the response: not a failure.
    sim.end(post.exchange);
    sim.drop_diagnostics();
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert_eq!(
        sim.conn.poll_timeout(),
        Some(start + Duration::from_millis(500))
    );
    sim.advance(Duration::from_millis(499));
    assert!(sim.requests.is_empty(), "no GET before the retry delay");
    sim.advance(Duration::from_millis(1));
    let get = sim.next_request();
    assert_eq!(get.method, HttpMethod::Get);
    assert_eq!(get.purpose, ExchangePurpose::Resume);
    assert_eq!(get.url.to_string(), URL);
    assert_eq!(get.header("Last-Event-ID"), Some("event-1"));
    assert_eq!(get.header("Accept"), Some("text/event-stream"));
    assert_eq!(get.header("Mcp-Session-Id"), Some("s-1"));
    assert_eq!(get.header("MCP-Protocol-Version"), Some("2025-11-25"));
    sim.sse_open(get.exchange);
    sim.body(
        get.exchange,
        format!(
            "id: event-2\ndata: {}\n\n",
            reply(id, r#"{"content":[{"type":"text","text":"done"}]}"#)
        )
        .as_bytes(),
    );
    assert_eq!(tool_text(&sim.completion(id).unwrap()), "done");
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert_eq!(sim.aborted, [get.exchange]);
    // The call's deadline was the only one left; now there is none.
    assert_eq!(sim.conn.poll_timeout(), None);
}

#[test]
fn http_timeout_aborts_the_exchange_and_posts_cancelled() {
    let (mut sim, _) = Sim::ready(ConnectionConfig::default());
    let start = sim.now;
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("slow", json!({})),
            opts().timeout(Duration::from_secs(2)),
        )
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.sse_open(post.exchange);
    sim.body(post.exchange, b"id: 1\ndata: \n\n");
    // One deadline, the request's: the open stream adds none.
    assert_eq!(
        sim.conn.poll_timeout(),
        Some(start + Duration::from_secs(2))
    );
    sim.advance(Duration::from_millis(1999));
    assert!(sim.events.is_empty() && sim.requests.is_empty());
    sim.advance(Duration::from_millis(1));
    assert_eq!(
        sim.completion(id).unwrap_err(),
        RequestError::Timeout { ms: 2000 }
    );
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert_eq!(sim.aborted, [post.exchange]);
    let cancel = sim.next_request();
    assert_eq!(cancel.purpose, ExchangePurpose::Notify);
    assert_post(&cancel, Some("s-1"), Some("2025-11-25"));
    assert_eq!(
        body(&cancel),
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id,"reason":"Request timeout after 2000ms"}})
    );
    sim.accepted(cancel.exchange);
    // A late answer on the aborted stream is ignored.
    sim.sse_message(post.exchange, &json!({"jsonrpc":"2.0","id":id,"result":{}}));
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert_eq!(sim.conn.poll_timeout(), None);
}

#[test]
fn http_first_initialize_refused_with_405_falls_back_to_legacy() {
    let mut sim = Sim::http(ConnectionConfig::default());
    let init = sim.next_request();
    sim.head(init.exchange, 405, &[("Allow", "GET")]);
    assert_eq!(sim.aborted, [init.exchange]);
    assert!(sim.events.is_empty() || matches!(sim.events.as_slice(), [Output::Diagnostic(_)]));
    sim.events.clear();
    assert_eq!(sim.conn.transport_name(), "sse");
    // The legacy stream: GET the same URL.
    let get = sim.next_request();
    assert!(
        sim.requests.is_empty(),
        "the initialize waits for the endpoint"
    );
    assert_eq!(get.method, HttpMethod::Get);
    assert_eq!(get.url.to_string(), URL);
    assert_eq!(get.header("Accept"), Some("text/event-stream"));
    assert_ne!(get.exchange, init.exchange, "exchange ids are not reused");
    sim.sse_open(get.exchange);
    sim.body(
        get.exchange,
        b"event: endpoint\ndata: /messages?sessionId=abc\n\n",
    );
    let post = sim.next_request();
    assert_eq!(post.method, HttpMethod::Post);
    assert_eq!(
        post.url.to_string(),
        "http://mcp.test/messages?sessionId=abc"
    );
    assert_eq!(post.body, init.body, "the same initialize, sent again");
    sim.accepted(post.exchange);
    sim.sse_message(
        get.exchange,
        &serde_json::from_str(&reply(0, INIT_RESULT_2024)).unwrap(),
    );
    // Ready once the server has accepted notifications/initialized.
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    assert_eq!(sim.conn.protocol_version(), Some("2024-11-05"));
    let initialized = sim.next_request();
    assert_eq!(
        initialized.url.to_string(),
        "http://mcp.test/messages?sessionId=abc"
    );
    assert_eq!(body(&initialized)["method"], "notifications/initialized");
    assert_eq!(initialized.header("MCP-Protocol-Version"), None);
    assert!(sim.requests.is_empty());
    sim.accepted(initialized.exchange);
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Ready]),
        "{:?}",
        sim.events
    );
    assert_eq!(sim.conn.transport_name(), "sse");
}

/// A legacy connection past its handshake; returns the stream's exchange
/// and the endpoint.
fn legacy_ready() -> (Sim, ExchangeId) {
    let mut sim = Sim::new(
        ConnectionConfig::default(),
        TransportSpec::LegacySse(url("http://mcp.test/sse")),
    );
    let get = sim.next_request();
    assert_eq!(get.method, HttpMethod::Get);
    assert_eq!(get.url.to_string(), "http://mcp.test/sse");
    assert_eq!(get.purpose, ExchangePurpose::Listen);
    assert!(sim.requests.is_empty());
    sim.sse_open(get.exchange);
    sim.body(
        get.exchange,
        b": hello\n\nevent: endpoint\ndata: messages?s=1\n\n",
    );
    let init = sim.next_request();
    assert_eq!(init.url.to_string(), "http://mcp.test/messages?s=1");
    assert_eq!(body(&init)["method"], "initialize");
    sim.accepted(init.exchange);
    sim.sse_message(
        get.exchange,
        &serde_json::from_str(&reply(0, INIT_RESULT_2024)).unwrap(),
    );
    // Ready once the server has accepted notifications/initialized;
    // nothing else is POSTed before.
    assert!(sim.events.is_empty(), "{:?}", sim.events);
    let initialized = sim.next_request();
    assert_eq!(body(&initialized)["method"], "notifications/initialized");
    let ping = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    sim.accepted(initialized.exchange);
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Ready]),
        "{:?}",
        sim.events
    );
    let post = sim.next_request();
    assert_eq!(body(&post)["method"], "ping");
    sim.accepted(post.exchange);
    sim.sse_message(
        get.exchange,
        &serde_json::from_str(&reply(ping, "{}")).unwrap(),
    );
    assert!(sim.completion(ping).is_ok());
    assert_eq!(sim.conn.transport_name(), "sse");
    (sim, get.exchange)
}

#[test]
fn legacy_sse_handshake_and_call() {
    let (mut sim, stream) = legacy_ready();
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("echo", json!({"message":"old"})),
            opts(),
        )
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    assert_eq!(post.purpose, ExchangePurpose::Request);
    assert_eq!(post.url.to_string(), "http://mcp.test/messages?s=1");
    assert_eq!(post.header("Content-Type"), Some("application/json"));
    assert_eq!(body(&post)["method"], "tools/call");
    sim.accepted(post.exchange);
    assert!(sim.events.is_empty());
    sim.sse_message(
        stream,
        &json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"Echo: old"}]}}),
    );
    assert_eq!(tool_text(&sim.completion(id).unwrap()), "Echo: old");
    assert!(sim.events.is_empty(), "{:?}", sim.events);
}

#[test]
fn legacy_stream_end_closes_the_connection_and_fails_pending() {
    let (mut sim, stream) = legacy_ready();
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.accepted(post.exchange);
    sim.end(stream);
    let expected = "SSE stream closed by the server";
    match sim.completion(id) {
        Err(RequestError::Closed { reason }) => assert_eq!(reason, expected),
        other => panic!("{other:?}"),
    }
    match sim.take_events().as_slice() {
        [Output::Closed(CloseReason::Transport(m))] => assert_eq!(m, expected),
        other => panic!("{other:?}"),
    }
    assert!(sim.conn.is_closed());
    assert_eq!(sim.conn.poll_timeout(), None);
    // Nothing after Closed.
    sim.sse_message(stream, &json!({"jsonrpc":"2.0","method":"late"}));
    assert!(sim.events.is_empty() && sim.requests.is_empty());
}

#[test]
fn http_close_sends_delete_and_ends_with_closed() {
    let (mut sim, listen) = Sim::ready(ConnectionConfig::default());
    let id = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.conn.close(sim.now);
    sim.drain();
    match sim.completion(id) {
        Err(RequestError::Closed { reason }) => {
            assert_eq!(reason, "connection closed by the client")
        }
        other => panic!("{other:?}"),
    }
    assert!(sim.events.is_empty(), "Closed waits for the DELETE");
    let mut aborted = sim.aborted.clone();
    aborted.sort();
    assert_eq!(aborted, [listen, post.exchange]);
    let delete = sim.next_request();
    assert!(sim.requests.is_empty(), "closing is not cancelling");
    assert_eq!(delete.method, HttpMethod::Delete);
    assert_eq!(delete.purpose, ExchangePurpose::Close);
    assert_eq!(delete.url.to_string(), URL);
    assert_eq!(delete.header("Mcp-Session-Id"), Some("s-1"));
    assert!(delete.body.is_empty());
    assert!(sim.conn.poll_timeout().is_some());
    // 405 is allowed: the server does not let clients end sessions.
    sim.head(delete.exchange, 405, &[]);
    match sim.take_events().as_slice() {
        [Output::Closed(CloseReason::Client)] => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.conn.poll_timeout(), None);
    sim.end(delete.exchange);
    sim.end(post.exchange);
    assert!(sim.events.is_empty() && sim.requests.is_empty());
}

#[test]
fn http_close_without_an_answer_to_delete_ends_after_close_timeout() {
    let (mut sim, _) = Sim::ready(ConnectionConfig::default());
    sim.conn.close(sim.now);
    sim.drain();
    let delete = sim.next_request();
    assert_eq!(delete.method, HttpMethod::Delete);
    sim.advance(Duration::from_millis(1999));
    assert!(sim.events.is_empty());
    sim.advance(Duration::from_millis(1));
    assert!(sim.aborted.contains(&delete.exchange));
    sim.drop_diagnostics();
    assert!(
        matches!(
            sim.take_events().as_slice(),
            [Output::Closed(CloseReason::Client)]
        ),
        "{:?}",
        sim.events
    );
}

#[test]
fn http_same_conversation_byte_by_byte_and_in_random_chunks_gives_the_same_outcome() {
    fn run(chunking: Chunking) -> Vec<String> {
        let mut config = ConnectionConfig::default();
        config.client.capabilities.roots = Some(Default::default());
        let mut sim = Sim::http(config);
        sim.chunking = chunking;
        if let Chunking::Random(seed) = chunking {
            sim.rng = seed;
        }
        let init = sim.next_request();
        sim.head(
            init.exchange,
            200,
            &[
                ("Content-Type", "text/event-stream; charset=utf-8"),
                ("Mcp-Session-Id", "sess"),
            ],
        );
        sim.body(
            init.exchange,
            format!(
                "id: 0\r\ndata:\r\n\r\nid: 1\r\ndata: {}\r\n\r\n",
                reply(0, INIT_RESULT)
            )
            .as_bytes(),
        );
        let initialized = sim.next_request();
        sim.accepted(initialized.exchange);
        let listen = sim.next_request();
        sim.sse_open(listen.exchange);
        sim.body(
            listen.exchange,
            ": keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\n\
             data: \"params\":{\"level\":\"info\",\"data\":\"h\u{e9}llo \u{1F600}\"}}\n\n"
                .as_bytes(),
        );

        // A JSON answer.
        let a = sim
            .conn
            .send(
                sim.now,
                &CallTool::new("echo", json!({"m":"\u{e9}"})),
                opts(),
            )
            .unwrap();
        sim.drain();
        let post = sim.next_request();
        sim.json(
            post.exchange,
            &[],
            &reply(
                a,
                r#"{"content":[{"type":"text","text":"\u00e9 \u2014 ☃"}]}"#,
            ),
        );

        // An SSE answer with a server request, progress and a broken stream.
        let b = sim
            .conn
            .send(
                sim.now,
                &CallTool::new("walk", json!({})),
                opts().progress(true),
            )
            .unwrap();
        sim.drain();
        let post = sim.next_request();
        sim.sse_open(post.exchange);
        let token = body(&post)["params"]["_meta"]["progressToken"].clone();
        sim.body(
            post.exchange,
            format!(
                "retry: 100\nid: p1\ndata: {}\n\n\
                 id: p2\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"roots/list\"}}\n\n\
                 id: p3\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"r2\",",
                json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1,"total":2}}),
            )
            .as_bytes(),
        );
        sim.end(post.exchange);
        sim.advance(Duration::from_millis(100));
        let get = sim.next_request();
        sim.sse_open(get.exchange);
        sim.body(
            get.exchange,
            format!("id: p4\ndata: {}\n\n", reply(b, r#"{"content":[]}"#)).as_bytes(),
        );

        let mut seen: Vec<String> = sim
            .take_events()
            .into_iter()
            .map(|e| match e {
                Output::Complete { id, outcome } => {
                    format!("complete {id} {}", outcome.unwrap().get())
                }
                other => format!("{other:?}"),
            })
            .collect();
        seen.extend(sim.take_requests().iter().map(|r| format!("{r:?}")));
        seen.extend(sim.aborted.iter().map(|x| format!("aborted {x}")));
        seen
    }
    let whole = run(Chunking::Whole);
    assert!(
        whole.iter().any(|e| e.starts_with("complete 2 ")),
        "{whole:#?}"
    );
    assert!(
        whole.iter().any(|e| e.contains("ServerRequest")),
        "{whole:#?}"
    );
    assert!(whole.iter().any(|e| e.contains("Progress")), "{whole:#?}");
    assert!(
        whole.iter().any(|e| e.contains("h\u{e9}llo \u{1F600}")),
        "{whole:#?}"
    );
    assert_eq!(run(Chunking::Bytes), whole, "byte by byte");
    for seed in 1..=20 {
        assert_eq!(
            run(Chunking::Random(seed)),
            whole,
            "random chunks, seed {seed}"
        );
    }
}

#[test]
fn http_invalid_session_id_closes_after_failing_everything_pending() {
    let mut sim = Sim::http(ConnectionConfig::default());
    let init = sim.next_request();
    // Only ping may cross before the answer; it waits for the session.
    let ping = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    assert!(sim.requests.is_empty());
    sim.head(
        init.exchange,
        200,
        &[
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", "bad id"),
        ],
    );
    assert_eq!(sim.aborted, [init.exchange]);
    // Every pending request completes before `Closed`, the last output.
    let events = sim.take_events();
    match events.as_slice() {
        [Output::Complete {
            id,
            outcome: Err(RequestError::Closed { reason }),
        }, Output::Closed(CloseReason::Transport(m))] => {
            assert_eq!(*id, ping);
            assert_eq!(reason, m);
            assert!(m.contains("invalid Mcp-Session-Id"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert!(sim.requests.is_empty(), "no session to DELETE");
}

// ---- OAuth: 401/403 hold the messages, a flow runs, they go again ------

const PRM_URL: &str = "http://mcp.test/.well-known/oauth-protected-resource/mcp";

fn auth_config() -> ConnectionConfig {
    ConnectionConfig {
        auth: Some(AuthConfig {
            redirect_uri: "http://127.0.0.1:7777/callback".into(),
            ..AuthConfig::default()
        }),
        ..ConnectionConfig::default()
    }
}

impl Sim {
    /// A `401` (or `403`) with this `WWW-Authenticate`.
    fn refuse(&mut self, exchange: ExchangeId, status: u16, www: &str) {
        self.head(
            exchange,
            status,
            &[
                ("WWW-Authenticate", www),
                ("Content-Type", "application/json"),
            ],
        );
        self.body(exchange, br#"{"error":"invalid_token"}"#);
        self.end(exchange);
    }

    /// Plays the authorization server for every pending authorization
    /// exchange (discovery, registration, token `tok-<n>`), and the user
    /// for each `Authorize`; returns the authorization URLs seen.
    fn serve_auth(&mut self, token: &str) -> Vec<String> {
        let mut authorize = Vec::new();
        loop {
            let auth: Vec<HttpRequest> = self
                .requests
                .iter()
                .filter(|r| r.purpose == ExchangePurpose::Auth)
                .cloned()
                .collect();
            self.requests.retain(|r| r.purpose != ExchangePurpose::Auth);
            let mut urls = Vec::new();
            for e in self.take_events() {
                match e {
                    Output::Authorize { url } => urls.push(url),
                    other => self.events.push(other),
                }
            }
            if auth.is_empty() && urls.is_empty() {
                return authorize;
            }
            for r in auth {
                assert!(r.exchange.0 >= 1 << 62, "auth exchanges have their own ids");
                assert!(r
                    .header("authorization")
                    .is_none_or(|a| a.starts_with("Basic ")));
                let text = auth_reply(&r.url.to_string(), Some(token));
                self.json(r.exchange, &[], &text.to_string());
            }
            for u in urls {
                let state = u.split("state=").nth(1).unwrap().split('&').next().unwrap();
                let cb = format!("http://127.0.0.1:7777/callback?code=k&state={state}");
                authorize.push(u);
                self.conn.authorization_response(self.now, &cb);
                self.drain();
            }
        }
    }
}

#[test]
fn auth_401_on_initialize_runs_the_flow_and_resends_with_the_token() {
    let mut sim = Sim::http(auth_config());
    let init = sim.next_request();
    assert!(init.header("authorization").is_none());
    sim.refuse(
        init.exchange,
        401,
        &format!(r#"Bearer resource_metadata="{PRM_URL}""#),
    );
    assert!(sim.aborted.contains(&init.exchange));
    // Discovery first; the user takes longer than the request timeout
    // (30 s): the held initialize must not time out meanwhile.
    let prm = sim.next_request();
    assert_eq!(prm.url.to_string(), PRM_URL);
    sim.requests.insert(0, prm);
    sim.advance(Duration::from_secs(5));
    // Answer discovery and registration, then wait before consenting.
    let seen = sim.serve_auth_until_authorize();
    assert!(seen.starts_with("https://as.test/authorize?"));
    sim.advance(Duration::from_secs(60));
    assert!(sim
        .take_events()
        .iter()
        .all(|e| !matches!(e, Output::Closed(_))));
    let state = seen
        .split("state=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .to_owned();
    sim.conn.authorization_response(
        sim.now,
        &format!("http://127.0.0.1:7777/callback?code=k&state={state}"),
    );
    sim.drain();
    sim.serve_auth("tok-1");
    let events = sim.take_events();
    assert!(
        matches!(events.as_slice(), [Output::Authorized(s)] if s.tokens.access_token == "tok-1"),
        "{events:?}"
    );
    // The same initialize again, now with the token; then everything else.
    let init2 = sim.next_request();
    assert_eq!(body(&init2)["method"], "initialize");
    assert_eq!(body(&init2)["id"], 0);
    assert_eq!(init2.header("authorization"), Some("Bearer tok-1"));
    sim.json(
        init2.exchange,
        &[("Mcp-Session-Id", "s-1")],
        &reply(0, INIT_RESULT),
    );
    let initialized = sim.next_request();
    assert_eq!(initialized.header("authorization"), Some("Bearer tok-1"));
    sim.accepted(initialized.exchange);
    let listen = sim.next_request();
    assert_eq!(listen.header("authorization"), Some("Bearer tok-1"));
    sim.sse_open(listen.exchange);
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Ready]),
        "{:?}",
        sim.events
    );
}

impl Sim {
    /// Serves authorization exchanges until an `Authorize` comes; returns
    /// its URL (not answered).
    fn serve_auth_until_authorize(&mut self) -> String {
        for _ in 0..10 {
            if let Some(i) = self
                .events
                .iter()
                .position(|e| matches!(e, Output::Authorize { .. }))
            {
                if let Output::Authorize { url } = self.events.remove(i) {
                    return url;
                }
            }
            let r = self.next_request();
            assert_eq!(r.purpose, ExchangePurpose::Auth);
            self.requests.insert(0, r);
            // One round of answers (no Authorize is pending yet).
            let auth: Vec<HttpRequest> = self.take_requests();
            for r in auth {
                let text = auth_reply(&r.url.to_string(), None);
                self.json(r.exchange, &[], &text.to_string());
            }
        }
        panic!("no Authorize: {:?}", self.events);
    }
}

/// The authorization server's answer to `url` (a token only when `token`
/// is given: before the user consents there must be no token request).
fn auth_reply(url: &str, token: Option<&str>) -> Value {
    match (url, token) {
        (PRM_URL, _) => json!({"resource": URL, "authorization_servers": ["https://as.test"]}),
        ("https://as.test/.well-known/oauth-authorization-server", _) => json!({
            "issuer": "https://as.test",
            "authorization_endpoint": "https://as.test/authorize",
            "token_endpoint": "https://as.test/token",
            "registration_endpoint": "https://as.test/register",
            "code_challenge_methods_supported": ["S256"],
        }),
        ("https://as.test/register", _) => json!({"client_id": "c1"}),
        ("https://as.test/token", Some(t)) => json!({"access_token": t, "token_type": "Bearer"}),
        (other, _) => panic!("unexpected authorization request to {other}"),
    }
}

fn stored_state(scope: &str) -> AuthState {
    AuthState {
        resource: URL.into(),
        issuer: Some("https://as.test".into()),
        token_endpoint: "https://as.test/token".into(),
        client: ClientCredentials::public("c0"),
        tokens: Tokens {
            access_token: "tok-0".into(),
            refresh_token: None,
            scope: None,
            expires_in: None,
            expires_at: None,
        },
        scope: Some(scope.into()),
        dpop_key: None,
    }
}

/// A 401 with a refresh token: the store is locked and read first; a
/// newer state there (another process refreshed) is used as it is, with
/// no token request and nothing to save, and the lock is released.
#[test]
fn auth_refresh_reads_the_store_under_its_lock_first() {
    let mut config = auth_config();
    let mut state = stored_state("read");
    state.tokens.refresh_token = Some("rt-0".into());
    config.auth.as_mut().unwrap().state = Some(state.clone());
    let (mut sim, _listen) = Sim::ready(config);
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("t", json!({})), opts())
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.refuse(post.exchange, 401, r#"Bearer error="invalid_token""#);
    sim.drop_diagnostics();
    let events = sim.take_events();
    assert!(
        matches!(events.as_slice(), [Output::LockTokens { endpoint }] if endpoint == URL),
        "{events:?}"
    );
    assert!(
        sim.take_requests().is_empty(),
        "nothing sent before the store is read"
    );
    let mut newer = state.clone();
    newer.tokens.access_token = "tok-theirs".into();
    newer.tokens.refresh_token = Some("rt-theirs".into());
    sim.conn.stored_state(sim.now, Some(newer));
    sim.drain();
    sim.drop_diagnostics();
    assert!(
        matches!(sim.take_events().as_slice(), [Output::UnlockTokens]),
        "released, and no Authorized: nothing to save"
    );
    let again = sim.take_requests();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(body(&again[0])["id"], id);
    assert_eq!(again[0].header("authorization"), Some("Bearer tok-theirs"));
    assert_eq!(
        sim.conn.auth_state().unwrap().tokens.access_token,
        "tok-theirs"
    );
    // A late answer from the store (no flow waits): released at once.
    sim.conn.stored_state(sim.now, None);
    sim.drain();
    sim.drop_diagnostics();
    assert!(matches!(
        sim.take_events().as_slice(),
        [Output::UnlockTokens]
    ));
}

#[test]
fn auth_step_up_then_the_retry_limit() {
    let mut config = auth_config();
    config.auth.as_mut().unwrap().state = Some(stored_state("read"));
    let (mut sim, _listen) = Sim::ready(config);
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("t", json!({})), opts())
        .unwrap();
    sim.drain();
    let mut post = sim.next_request();
    assert_eq!(
        post.header("authorization"),
        Some("Bearer tok-0"),
        "the stored token is used"
    );
    let www = r#"Bearer error="insufficient_scope", scope="read write""#;
    for attempt in 1..=3 {
        sim.refuse(post.exchange, 403, www);
        // Requests made meanwhile wait too.
        let ping = sim.conn.send(sim.now, &Ping, opts()).unwrap();
        sim.drain();
        let urls = sim.serve_auth(&format!("tok-{attempt}"));
        assert_eq!(urls.len(), 1, "one authorization per 403");
        assert!(urls[0].contains("scope=read%20write"), "{}", urls[0]);
        sim.drop_diagnostics();
        assert!(matches!(
            sim.take_events().as_slice(),
            [Output::Authorized(_)]
        ));
        let mut again = sim.take_requests();
        assert_eq!(again.len(), 2, "{again:?}");
        assert_eq!(body(&again[0])["id"], id);
        assert_eq!(body(&again[1])["id"], ping);
        for r in &again {
            assert_eq!(
                r.header("authorization"),
                Some(format!("Bearer tok-{attempt}").as_str())
            );
        }
        sim.json(again[1].exchange, &[], &reply(ping, "{}"));
        // The ping succeeded: that resets the count of flows in a row.
        post = again.remove(0);
        assert!(sim.completion(ping).is_ok());
    }
    // Pings kept succeeding: attempts reset each time; now refuse without
    // any success until the limit.
    let mut n = 0;
    loop {
        sim.refuse(post.exchange, 403, www);
        let urls = sim.serve_auth("tok-x");
        sim.drop_diagnostics();
        if urls.is_empty() {
            break;
        }
        n += 1;
        sim.take_events();
        post = sim.next_request();
    }
    assert_eq!(n, 3, "max_attempts flows in a row, then the limit");
    match sim.completion(id) {
        Err(RequestError::Auth { message }) => {
            assert!(message.contains("3 authorization attempts"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The connection is still usable.
    let p = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    let r = sim.next_request();
    sim.json(r.exchange, &[], &reply(p, "{}"));
    assert!(sim.completion(p).is_ok());
}

#[test]
fn auth_failure_fails_the_held_requests_with_a_typed_error() {
    let mut config = auth_config();
    config.auth.as_mut().unwrap().interactive = false;
    let (mut sim, _listen) = Sim::ready(config);
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("t", json!({})), opts())
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    sim.refuse(post.exchange, 401, "Bearer");
    let urls = sim.serve_auth("never");
    assert!(urls.is_empty());
    match sim.completion(id) {
        Err(RequestError::Auth { message }) => {
            assert!(message.contains("--login"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(!sim.conn.is_closed());
}

// ---- 2026-07-28 over Streamable HTTP ------------------------------------

const DISCOVER: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"modern","version":"2"}}"#;

#[test]
fn modern_http_is_sessionless_with_the_era_headers() {
    let mut sim = Sim::probing(
        ConnectionConfig::default(),
        TransportSpec::StreamableHttp(url(URL)),
    );
    let probe = sim.next_request();
    assert!(sim.requests.is_empty());
    assert_eq!(body(&probe)["method"], "server/discover");
    assert_eq!(probe.header("MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(probe.header("Mcp-Method"), Some("server/discover"));
    assert!(probe.header("Mcp-Session-Id").is_none());
    // A session id sent anyway is ignored.
    sim.json(
        probe.exchange,
        &[("Mcp-Session-Id", "ignored")],
        &reply(0, DISCOVER),
    );
    assert!(
        matches!(sim.take_events().as_slice(), [Output::Ready]),
        "{:?}",
        sim.events
    );
    assert!(
        sim.requests.is_empty(),
        "no initialized, no GET listener, no subscription (no listChanged)"
    );
    let id = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("get weather", json!({"city": "Oslo"})),
            opts(),
        )
        .unwrap();
    sim.drain();
    let call = sim.next_request();
    assert_eq!(call.header("Mcp-Method"), Some("tools/call"));
    assert_eq!(call.header("Mcp-Name"), Some("get weather"));
    assert_eq!(call.header("MCP-Protocol-Version"), Some("2026-07-28"));
    assert!(call.header("Mcp-Session-Id").is_none());
    assert_eq!(
        body(&call)["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    // 404 with a JSON-RPC error is "method not found", not a lost session.
    sim.head(call.exchange, 404, &[("Content-Type", "application/json")]);
    sim.body(call.exchange, format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"Method not found"}}}}"#).as_bytes());
    sim.end(call.exchange);
    assert!(matches!(sim.completion(id), Err(RequestError::Remote(e)) if e.code == -32601));
    assert!(sim.requests.is_empty(), "no re-initialize");
    // A stream that ends without the response is not resumed (no GET with
    // Last-Event-ID): the request is issued again with a new id, up to
    // three times, then the call fails.
    let id = sim
        .conn
        .send(sim.now, &CallTool::new("t", json!({})), opts())
        .unwrap();
    sim.drain();
    let mut call = sim.next_request();
    for attempt in 1..=4u64 {
        sim.sse_open(call.exchange);
        sim.body(call.exchange, b"id: 1\nretry: 10\ndata: \n\n");
        sim.end(call.exchange);
        if attempt == 4 {
            break;
        }
        assert!(sim.requests.is_empty(), "no GET with Last-Event-ID");
        sim.advance(Duration::from_millis(100 << (attempt - 1)));
        let again = sim.next_request();
        assert_eq!(again.method, HttpMethod::Post);
        assert_eq!(body(&again)["method"], "tools/call");
        assert_eq!(body(&again)["params"]["name"], "t");
        assert_ne!(body(&again)["id"], body(&call)["id"], "a new id");
        assert_eq!(again.header("Mcp-Name"), Some("t"));
        call = again;
    }
    // The error says so, under the caller's id (not the last attempt's).
    match sim.completion(id) {
        Err(RequestError::Transport { message }) => assert_eq!(
            message,
            format!(
                "the response stream of request {id} ended before its response 4 times \
                 (issued again 3 times with new ids); giving up"
            )
        ),
        other => panic!("{other:?}"),
    }
    sim.advance(Duration::from_secs(1));
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    // Close: no DELETE.
    sim.conn.close(sim.now);
    sim.drain();
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    assert!(matches!(sim.take_events().last(), Some(Output::Closed(_))));
}

/// A modern connection over HTTP, ready (discovered, no listener).
fn modern_ready() -> Sim {
    let mut sim = Sim::probing(
        ConnectionConfig::default(),
        TransportSpec::StreamableHttp(url(URL)),
    );
    let probe = sim.next_request();
    sim.json(probe.exchange, &[], &reply(0, DISCOVER));
    assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
    sim
}

#[test]
fn modern_http_a_lost_stream_is_issued_again_and_keeps_the_callers_id_progress_and_cancel() {
    let mut sim = modern_ready();
    let options = RequestOptions {
        progress: true,
        ..RequestOptions::default()
    }
    .timeout(Duration::from_secs(10));
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({"n": 1})), options)
        .unwrap();
    sim.drain();
    let first = sim.next_request();
    let first_id = body(&first)["id"].as_u64().unwrap();
    assert_eq!(first_id, app);
    sim.sse_open(first.exchange);
    sim.body(first.exchange, b"id: a\ndata: \n\n");
    sim.end(first.exchange);
    assert!(
        !sim.events
            .iter()
            .any(|e| matches!(e, Output::Complete { .. })),
        "not failed: it is issued again"
    );
    sim.advance(Duration::from_millis(100));
    let second = sim.next_request();
    let second_id = body(&second)["id"].as_u64().unwrap();
    assert_ne!(second_id, app);
    assert_eq!(body(&second)["params"]["arguments"], json!({"n": 1}));
    assert_eq!(
        body(&second)["params"]["_meta"]["progressToken"],
        json!(second_id),
        "its own progress token"
    );
    assert_eq!(
        body(&second)["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28",
        "the envelope too"
    );
    // Progress and the result of the new request reach the caller's id.
    sim.sse_open(second.exchange);
    sim.sse_message(
        second.exchange,
        &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": second_id, "progress": 1, "total": 2}}),
    );
    sim.sse_message(
        second.exchange,
        &json!({"jsonrpc": "2.0", "id": second_id,
                "result": {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}}),
    );
    sim.end(second.exchange);
    let progress: Vec<u64> = sim
        .events
        .iter()
        .filter_map(|e| match e {
            Output::Progress { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(progress, vec![app]);
    assert_eq!(tool_text(&sim.completion(app).unwrap()), "done");

    // Cancelled while it waits to be issued again: completes once,
    // cancelled, and nothing more is sent.
    let app = sim
        .conn
        .send(sim.now, &CallTool::new("slow", json!({})), opts())
        .unwrap();
    sim.drain();
    let r = sim.next_request();
    sim.sse_open(r.exchange);
    sim.end(r.exchange);
    assert!(sim.conn.cancel(sim.now, app, "user"));
    sim.drain();
    assert!(matches!(
        sim.completion(app),
        Err(RequestError::Cancelled { .. })
    ));
    sim.advance(Duration::from_secs(2));
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);

    // The deadline is the call's, not each request's: a re-issue gets the
    // time that is left, and none is sent when it is up.
    let app = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("slow", json!({})),
            opts().timeout(Duration::from_millis(150)),
        )
        .unwrap();
    sim.drain();
    let r = sim.next_request();
    sim.advance(Duration::from_millis(120));
    sim.sse_open(r.exchange);
    sim.end(r.exchange);
    sim.advance(Duration::from_millis(29));
    assert!(!sim
        .events
        .iter()
        .any(|e| matches!(e, Output::Complete { .. })));
    sim.advance(Duration::from_millis(1));
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    assert!(matches!(
        sim.completion(app),
        Err(RequestError::Timeout { ms: 150 })
    ));
}

#[test]
fn modern_http_cached_lists_are_served_until_ttl_or_change() {
    let mut sim = modern_ready();
    let list = |sim: &mut Sim, options: RequestOptions| {
        let id = sim
            .conn
            .send(sim.now, &ListTools::default(), options)
            .unwrap();
        sim.drain();
        id
    };
    let tools = r#"{"resultType":"complete","tools":[{"name":"a","inputSchema":{"type":"object"}}],"ttlMs":1000,"cacheScope":"private"}"#;
    let id = list(&mut sim, opts());
    let r = sim.next_request();
    sim.json(r.exchange, &[], &reply(id, tools));
    assert!(sim.completion(id).unwrap().get().contains(r#""name":"a""#));
    // Fresh: answered at once, same result, nothing sent.
    sim.advance(Duration::from_millis(500));
    let id2 = list(&mut sim, opts());
    assert_ne!(id2, id);
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    assert!(sim.completion(id2).unwrap().get().contains(r#""name":"a""#));
    assert_eq!(sim.conn.stats().cache_hits, 1);
    // Bypassed: asked again (and the answer refreshes the cache).
    let id3 = list(&mut sim, opts().bypass_cache(true));
    let r = sim.next_request();
    sim.json(r.exchange, &[], &reply(id3, tools));
    sim.completion(id3).unwrap();
    // A list_changed (here on a call's stream) drops it.
    let call = sim
        .conn
        .send(sim.now, &CallTool::new("a", json!({})), opts())
        .unwrap();
    sim.drain();
    let r = sim.next_request();
    sim.sse_open(r.exchange);
    sim.sse_message(
        r.exchange,
        &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    );
    sim.sse_message(
        r.exchange,
        &json!({"jsonrpc": "2.0", "id": call, "result": {"resultType": "complete", "content": []}}),
    );
    sim.end(r.exchange);
    sim.completion(call).unwrap();
    let id4 = list(&mut sim, opts());
    let r = sim.next_request();
    assert_eq!(body(&r)["method"], "tools/list");
    sim.json(r.exchange, &[], &reply(id4, tools));
    sim.completion(id4).unwrap();
    // Stale after ttlMs.
    sim.advance(Duration::from_millis(1000));
    let id5 = list(&mut sim, opts());
    let r = sim.next_request();
    assert_eq!(body(&r)["method"], "tools/list");
    // No ttlMs: never served from the cache.
    sim.json(
        r.exchange,
        &[],
        &reply(id5, r#"{"resultType":"complete","tools":[]}"#),
    );
    sim.completion(id5).unwrap();
    let id6 = list(&mut sim, opts());
    assert_eq!(sim.take_requests().len(), 1, "asked again");
    assert_eq!(sim.conn.stats().cache_hits, 1);
    let _ = id6;
}

#[test]
fn modern_http_probe_falls_back_on_a_legacy_4xx_and_retries_on_32022() {
    // A legacy server's 400 (no session): initialize, with the legacy
    // rules intact (its 404 still means HTTP+SSE).
    let mut sim = Sim::probing(
        ConnectionConfig::default(),
        TransportSpec::StreamableHttp(url(URL)),
    );
    let probe = sim.next_request();
    sim.head(probe.exchange, 400, &[("Content-Type", "application/json")]);
    sim.body(probe.exchange, br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: Missing session ID"}}"#);
    sim.end(probe.exchange);
    let init = sim.next_request();
    assert_eq!(body(&init)["method"], "initialize");
    assert!(
        init.header("Mcp-Method").is_none(),
        "legacy requests carry no era headers"
    );
    assert!(init.header("MCP-Protocol-Version").is_none());
    sim.head(init.exchange, 404, &[]);
    sim.end(init.exchange);
    let get = sim.next_request();
    assert_eq!(get.method, HttpMethod::Get, "fell back to legacy HTTP+SSE");

    // A modern server that refuses our version but names it: probe again.
    let mut sim = Sim::probing(
        ConnectionConfig::default(),
        TransportSpec::StreamableHttp(url(URL)),
    );
    let probe = sim.next_request();
    sim.head(probe.exchange, 400, &[("Content-Type", "application/json")]);
    sim.body(probe.exchange, br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}"#);
    sim.end(probe.exchange);
    let again = sim.next_request();
    assert_eq!(body(&again)["method"], "server/discover");
    assert_eq!(body(&again)["id"], 1);
    assert_eq!(again.header("MCP-Protocol-Version"), Some("2026-07-28"));
    sim.json(again.exchange, &[], &reply(1, DISCOVER));
    assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
}

/// A server remembered as legacy that now speaks only 2026-07-28: the
/// `initialize` the memory sends first meets 400 with `-32022`. That is a
/// modern server's refusal, not a reason to fall back to HTTP+SSE (a GET):
/// the client probes with `server/discover`, in the era, and is ready.
#[test]
fn modern_http_a_remembered_legacy_era_refused_with_32022_is_probed_again() {
    let config = ConnectionConfig {
        era_hint: Some(mcpwire::connection::Era::Legacy),
        ..ConnectionConfig::default()
    };
    let mut sim = Sim::probing(config, TransportSpec::StreamableHttp(url(URL)));
    let init = sim.next_request();
    assert_eq!(body(&init)["method"], "initialize");
    sim.head(init.exchange, 400, &[("Content-Type", "application/json")]);
    sim.body(init.exchange, br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}"#);
    sim.end(init.exchange);
    let probe = sim.next_request();
    assert_eq!(probe.method, HttpMethod::Post, "no fallback to HTTP+SSE");
    assert_eq!(body(&probe)["method"], "server/discover");
    assert_eq!(probe.header("MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(probe.header("Mcp-Method"), Some("server/discover"));
    let id = body(&probe)["id"].as_u64().unwrap();
    sim.json(probe.exchange, &[], &reply(id, DISCOVER));
    assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);

    // Any other 400 to that first initialize still means HTTP+SSE.
    let config = ConnectionConfig {
        era_hint: Some(mcpwire::connection::Era::Legacy),
        ..ConnectionConfig::default()
    };
    let mut sim = Sim::probing(config, TransportSpec::StreamableHttp(url(URL)));
    let init = sim.next_request();
    sim.head(init.exchange, 400, &[("Content-Type", "application/json")]);
    sim.body(init.exchange, br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: missing session"}}"#);
    sim.end(init.exchange);
    let get = sim.next_request();
    assert_eq!(get.method, HttpMethod::Get, "fell back to legacy HTTP+SSE");
}

#[test]
fn modern_http_era_headers_follow_each_message() {
    let mut sim = Sim::probing(
        ConnectionConfig::default(),
        TransportSpec::StreamableHttp(url(URL)),
    );
    let probe = sim.next_request();
    // A ping while the probe is out goes with the era's headers too.
    let ping = sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    let ping_post = sim.next_request();
    assert_eq!(ping_post.header("Mcp-Method"), Some("ping"));
    sim.json(probe.exchange, &[], &reply(0, DISCOVER));
    assert!(matches!(sim.take_events().as_slice(), [Output::Ready]));
    sim.json(ping_post.exchange, &[], &reply(ping, "{}"));
    assert!(sim.completion(ping).is_ok());

    // tools/list: one annotated tool, one whose annotation is invalid.
    let list = sim
        .conn
        .send(sim.now, &ListTools::default(), opts())
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    assert_eq!(post.header("Mcp-Method"), Some("tools/list"));
    assert!(post.header("Mcp-Name").is_none());
    let tools = json!({"tools": [
        {"name": "weather", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "days": {"type": "integer", "x-mcp-header": "Days"}}}},
        {"name": "bad", "inputSchema": {"type": "object", "properties": {
            "v": {"type": "object", "x-mcp-header": "V"}}}}]});
    sim.json(post.exchange, &[], &reply(list, &tools.to_string()));
    let page: Value = serde_json::from_str(sim.completion(list).unwrap().get()).unwrap();
    assert_eq!(page["tools"].as_array().unwrap().len(), 1, "{page}");
    sim.drop_diagnostics();

    // Its calls mirror the annotated arguments.
    let call = sim
        .conn
        .send(
            sim.now,
            &CallTool::new("weather", json!({"region": "Zürich", "days": 3})),
            opts(),
        )
        .unwrap();
    sim.drain();
    let post = sim.next_request();
    assert_eq!(post.header("Mcp-Method"), Some("tools/call"));
    assert_eq!(post.header("Mcp-Name"), Some("weather"));
    assert_eq!(
        post.header("Mcp-Param-Region"),
        Some("=?base64?WsO8cmljaA==?=")
    );
    assert_eq!(post.header("Mcp-Param-Days"), Some("3"));
    // The cancellation the engine builds says what it is.
    assert!(sim.conn.cancel(sim.now, call, "enough"));
    sim.drain();
    let cancelled = sim.next_request();
    assert_eq!(body(&cancelled)["method"], "notifications/cancelled");
    assert_eq!(
        cancelled.header("Mcp-Method"),
        Some("notifications/cancelled")
    );
    assert!(cancelled.header("Mcp-Name").is_none());
    // An application notification too.
    sim.conn
        .notify(sim.now, "notifications/roots/list_changed", None)
        .unwrap();
    sim.drain();
    let note = sim
        .take_requests()
        .into_iter()
        .find(|r| body(r)["method"] == "notifications/roots/list_changed")
        .expect("the notification's POST");
    assert_eq!(
        note.header("Mcp-Method"),
        Some("notifications/roots/list_changed")
    );
}

/// The claims of a request's DPoP proof.
fn dpop_claims(r: &HttpRequest) -> Value {
    use base64::Engine as _;
    let proof = r.header("dpop").expect("a DPoP proof");
    let claims = proof.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn auth_stored_dpop_bound_token_proves_its_key_and_follows_the_nonce() {
    let key = mcpwire::auth::DpopKey::generate().unwrap();
    let mut state = stored_state("read");
    state.dpop_key = Some(key.clone());
    let mut config = auth_config();
    let auth = config.auth.as_mut().unwrap();
    auth.state = Some(state);
    auth.wall_clock = Some(mcpwire::auth::WallClock::anchor(
        Instant::now(),
        std::time::SystemTime::now(),
    ));
    let mut sim = Sim::http(config);
    let init = sim.next_request();
    assert_eq!(init.header("authorization"), Some("DPoP tok-0"));
    let c = dpop_claims(&init);
    assert_eq!(c["htm"], "POST");
    assert_eq!(c["htu"], URL);
    assert_eq!(c["ath"], mcpwire::auth::pkce_challenge("tok-0"));
    assert!(c.get("nonce").is_none());
    // The server wants a nonce: the same initialize again, with it, and no
    // authorization flow.
    sim.head(
        init.exchange,
        401,
        &[
            ("WWW-Authenticate", r#"DPoP error="use_dpop_nonce""#),
            ("DPoP-Nonce", "rs-nonce"),
        ],
    );
    sim.end(init.exchange);
    let again = sim.next_request();
    assert_eq!(again.purpose, ExchangePurpose::Request);
    assert_eq!(body(&again)["method"], "initialize");
    let c2 = dpop_claims(&again);
    assert_eq!(c2["nonce"], "rs-nonce");
    assert_ne!(c["jti"], c2["jti"]);
    sim.json(
        again.exchange,
        &[("Mcp-Session-Id", "s-1")],
        &reply(0, INIT_RESULT),
    );
    let initialized = sim.next_request();
    assert_eq!(dpop_claims(&initialized)["nonce"], "rs-nonce");
    assert_eq!(initialized.header("authorization"), Some("DPoP tok-0"));
}

#[test]
fn modern_http_a_tasks_own_request_ended_between_attempts_never_reaches_the_application() {
    let mut sim = modern_ready();
    for way in ["cancel", "deadline"] {
        // The deadline case: 50 ms, inside the first re-issue's backoff.
        let ms = if way == "cancel" { 1000 } else { 50 };
        let options = opts().timeout(Duration::from_millis(ms));
        let app = sim
            .conn
            .send(sim.now, &CallTool::new("slow", json!({})), options)
            .unwrap();
        sim.drain();
        let call = sim.next_request();
        sim.json(
            call.exchange,
            &[],
            &reply(
                app,
                r#"{"resultType":"task","taskId":"h1","status":"working","pollIntervalMs":10}"#,
            ),
        );
        sim.advance(Duration::from_millis(10));
        // (The listen for its status pushes stays open, unanswered.)
        let at = sim
            .requests
            .iter()
            .position(|r| body(r)["method"] == "tasks/get")
            .expect("tasks/get");
        let get = sim.requests.remove(at);
        // Its stream ends before the answer: it waits to be issued again.
        sim.sse_open(get.exchange);
        sim.end(get.exchange);
        match way {
            "cancel" => {
                assert!(sim.conn.cancel(sim.now, app, "user"));
                sim.drain();
            }
            _ => {
                // The call's deadline falls in the backoff (the re-issue
                // would be at +110 ms): the sub-state ends the tasks/get
                // itself.
                sim.advance(Duration::from_millis(100));
            }
        }
        let completions: Vec<u64> = sim
            .events
            .iter()
            .filter_map(|e| match e {
                Output::Complete { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        assert_eq!(completions, [app], "{way}: only the application's call");
        match (way, sim.completion(app)) {
            ("cancel", Err(RequestError::Cancelled { .. })) => {}
            ("deadline", Err(RequestError::Timeout { ms: 50 })) => {}
            (_, other) => panic!("{way}: {other:?}"),
        }
        // The task is cancelled on the server; answer it.
        let mut cancelled = false;
        while !sim.requests.is_empty() {
            let r = sim.next_request();
            if r.method == HttpMethod::Post && body(&r)["method"] == "tasks/cancel" {
                cancelled = true;
                let id = body(&r)["id"].as_u64().unwrap();
                sim.json(r.exchange, &[], &reply(id, r#"{"resultType":"complete"}"#));
            }
        }
        assert!(cancelled, "{way}");
        sim.advance(Duration::from_secs(2));
        let sent: Vec<Value> = std::mem::take(&mut sim.requests).iter().map(body).collect();
        assert!(
            sent.iter().all(|b| b["method"] == "subscriptions/listen"),
            "{way}: {sent:?}"
        );
        assert!(
            !sim.take_events()
                .iter()
                .any(|e| matches!(e, Output::Complete { .. })),
            "{way}"
        );
    }
}

const TASKS_INIT: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"sim","version":"1.0"}}"#;

/// A 2025-11-25 session (`s-1`) with a tasks server, listener open.
fn tasks_session() -> Sim {
    let mut sim = Sim::http(ConnectionConfig::default());
    let init = sim.next_request();
    sim.json(
        init.exchange,
        &[("Mcp-Session-Id", "s-1")],
        &reply(0, TASKS_INIT),
    );
    let initialized = sim.next_request();
    sim.accepted(initialized.exchange);
    let listen = sim.next_request();
    sim.sse_open(listen.exchange);
    sim.take_events();
    sim
}

#[test]
fn http_a_task_followed_while_the_session_starts_over_waits_without_spinning() {
    let mut sim = tasks_session();
    let app = sim
        .conn
        .send(
            sim.now,
            &mcpwire::mcp::methods::TaskResult::new("t1"),
            opts().timeout(Duration::from_secs(5)),
        )
        .unwrap();
    sim.drain();
    let get = sim.next_request();
    assert_eq!(body(&get)["method"], "tasks/get");
    let get_id = body(&get)["id"].as_u64().unwrap();
    sim.json(
        get.exchange,
        &[],
        &reply(
            get_id,
            r#"{"taskId":"t1","status":"working","pollInterval":10}"#,
        ),
    );
    // The session is lost; the re-initialize is not answered for a while.
    sim.conn.send(sim.now, &Ping, opts()).unwrap();
    sim.drain();
    let p = sim.next_request();
    sim.head(p.exchange, 404, &[]);
    let reinit = sim.next_request();
    assert_eq!(body(&reinit)["method"], "initialize");
    // Polls fall due meanwhile: they wait (advance checks that every
    // handle_timeout moves poll_timeout past now).
    sim.advance(Duration::from_millis(500));
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
    // The call's deadline still holds.
    sim.advance(Duration::from_secs(5));
    assert!(matches!(
        sim.completion(app),
        Err(RequestError::Timeout { ms: 5000 })
    ));
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

/// The next poll of task `task_id` says it completed; returns the
/// `tasks/result` that follows (`round` names the attempt).
fn completed_then_result(sim: &mut Sim, task_id: &str, round: usize) -> HttpRequest {
    let get = sim.next_request();
    assert_eq!(body(&get)["method"], "tasks/get", "round {round}");
    let id = body(&get)["id"].as_u64().unwrap();
    let task = json!({"taskId": task_id, "status": "completed", "pollInterval": 50});
    sim.json(get.exchange, &[], &reply(id, &task.to_string()));
    let result = sim.next_request();
    assert_eq!(body(&result)["method"], "tasks/result");
    result
}

#[test]
fn http_a_failed_tasks_result_goes_back_to_polling() {
    let mut sim = tasks_session();
    let app = await_task(&mut sim, "t2");
    for round in 0..2 {
        let result = completed_then_result(&mut sim, "t2", round);
        let id = body(&result)["id"].as_u64().unwrap();
        if round == 0 {
            // The stream ends with no event id: nothing to resume.
            sim.sse_open(result.exchange);
            sim.end(result.exchange);
            assert!(
                !sim.events
                    .iter()
                    .any(|e| matches!(e, Output::Complete { .. })),
                "the task goes on: {:?}",
                sim.events
            );
            sim.advance(Duration::from_millis(50));
        } else {
            sim.json(
                result.exchange,
                &[],
                &reply(id, r#"{"content":[{"type":"text","text":"kept"}]}"#),
            );
        }
    }
    assert_eq!(tool_text(&sim.completion(app).unwrap()), "kept");
    // The third failure in a row is the call's.
    let app = await_task(&mut sim, "t3");
    for round in 0..3 {
        let result = completed_then_result(&mut sim, "t3", round);
        sim.sse_open(result.exchange);
        sim.end(result.exchange);
        sim.advance(Duration::from_millis(50));
    }
    assert!(matches!(
        sim.completion(app),
        Err(RequestError::Transport { .. })
    ));
    assert!(sim.requests.is_empty(), "{:?}", sim.requests);
}
