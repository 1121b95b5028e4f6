//! `mcpwire bridge --listen ADDR TARGET`: Streamable HTTP at
//! `http://ADDR/mcp` in front of TARGET, each client session with a target
//! session of its own (a stdio target: its own process).
//!
//! ```text
//!  POST /mcp  initialize (no session) ─► connect the target ─► JSON + Mcp-Session-Id
//!             request ─► relayed ─► JSON, or an SSE stream (progress, then the answer)
//!             notification, response ─► 202
//!  GET  /mcp  the session's stream: the target's notifications and requests;
//!             with Last-Event-ID, any stream resumed after that event (a
//!             POST's answer too: each is primed with an event id and a retry)
//!  DELETE /mcp  ends the session (the target's closed)
//!  POST /mcp  a 2026-07-28 request (its `_meta` envelope, no session):
//!             judged by core (`server::request_era`, `check_headers`),
//!             relayed to the one target session all such requests share
//!             (started by the first), answered in that era's shape;
//!             `server/discover` answered from the target's identity;
//!             cancelled when its client closes the POST's response (a
//!             2026-07-28 `notifications/cancelled` is ignored)
//!  GET /healthz  ok
//! ```
//!
//! Every `/mcp` request is checked first: `Host` and `Origin` must name
//! this loopback server when it listens on loopback (DNS rebinding), the
//! bearer token must match when one is set, `MCP-Protocol-Version` must be
//! one served, the session must exist (404: the client starts over).
//! Sessions are bounded (`--max-sessions`) and closed when idle
//! (`--idle-timeout`); bodies are bounded (16 MiB).
//!
//! A session's request whose client goes away before its JSON answer is
//! cancelled at the target and forgotten (the session may then be idle);
//! one answered on an SSE stream runs on, as that era's client may resume
//! the stream (a disconnection is no cancellation there).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use hyper::{Method, Request, Response, StatusCode};
use mcpwire::mcp::methods::{notifications, MethodId, ServerRequestKind};
use mcpwire::modern::{Era, MODERN_PROTOCOL_VERSION};
use mcpwire::rpc::{parse_message, Message, ParseError, RequestId, INVALID_PARAMS};
use mcpwire::server::{
    check_headers, check_param_headers, declared_version, discover_result, error_status,
    is_local_authority, modern_result, request_era, served_versions, ServerSession,
};
use mcpwire_tokio::{CancelToken, Client, ErrorObject, Handler};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use super::listens::{ack, through_listens, Filter, Listens};
use super::rounds::Rounds;
use super::{
    accepts, connect, init_result, modern_host_of, refuse, relay_call, timeout, Relay, Tools,
};
use crate::args::{Cli, Fail};
use crate::target::Target;

mod stateless;

use self::stateless::stateless;

type Body = BoxBody<Bytes, Infallible>;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_HEADER: &str = "last-event-id";
/// Largest request body read.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Events of a session's stream kept for a client that reconnects.
const REPLAY: usize = 256;
/// Events waiting in one open stream, at most.
const STREAM_QUEUE: usize = 256;
/// The reconnection delay an SSE answer suggests (`retry:`).
const RETRY_MS: u64 = 1000;

/// What the server shares between its connections.
struct Server {
    cli: Cli,
    target: Target,
    tools: Arc<Tools>,
    bearer: Option<String>,
    loopback: bool,
    max_sessions: usize,
    idle: Duration,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The target session 2026-07-28 requests share (that era has no
    /// sessions), connected by the first.
    stateless: tokio::sync::Mutex<Option<Arc<Session>>>,
}

impl Server {
    /// How a request of a `host`-era client of `session` is relayed to
    /// its target session.
    fn relay(&self, session: &Session, token: CancelToken, host: Era) -> Relay {
        Relay {
            client: session.client.clone(),
            tools: self.tools.clone(),
            token,
            timeout: timeout(&self.cli),
            host,
        }
    }
}

/// One client session and its target session.
struct Session {
    client: Client,
    state: Mutex<State>,
}

/// Which stream of a session an event belongs to: the GET stream, or
/// the SSE answer of one POST (numbered in the session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum StreamKey {
    Get,
    Post(u64),
}

/// One event kept for a client that reconnects.
struct Kept {
    id: u64,
    stream: StreamKey,
    bytes: Bytes,
    /// The stream's last event (a POST's answer): nothing follows.
    last: bool,
}

#[derive(Default)]
struct State {
    /// Where each open stream's events go now (a POST stream resumed by a
    /// GET goes to that GET's body).
    sinks: HashMap<StreamKey, mpsc::Sender<Bytes>>,
    /// The last events of every stream, for `Last-Event-ID`.
    replay: VecDeque<Kept>,
    next_event: u64,
    next_post: u64,
    /// The target's requests sent to the client, by our id.
    asks: HashMap<u64, oneshot::Sender<Result<Value, ErrorObject>>>,
    next_ask: u64,
    /// The client's requests relayed and not answered.
    calls: HashMap<RequestId, CancelToken>,
    /// The 2026-07-28 clients' open `subscriptions/listen`, by the stream
    /// answering each (the shared stateless session only).
    listens: Listens<StreamKey>,
    /// The 2026-07-28 clients' requests relayed (the shared stateless
    /// session only), each under an id of ours: their ids may collide.
    rounds: Rounds,
    /// Where the answer of each of those requests goes (its POST).
    waiters: HashMap<RequestId, mpsc::Sender<stateless::Ev>>,
    next_internal: u64,
    last_used: Option<Instant>,
}

impl Session {
    /// Sends `message` on the session's stream (kept for a replay; a
    /// client without a stream gets it when it opens one).
    fn push(&self, message: &Value) {
        self.push_to(StreamKey::Get, &format!("data: {message}\n\n"), false);
    }

    /// Sends an event (`data` and what follows the id: `data: …` lines,
    /// `retry: …`) on `stream`, with the next event id; keeps it for a
    /// replay; `last`: the stream ends after it.
    fn push_to(&self, stream: StreamKey, data: &str, last: bool) {
        let mut state = self.state.lock().expect("session lock");
        state.next_event += 1;
        let id = state.next_event;
        let bytes = Bytes::from(format!("id: {id}\nevent: message\n{data}"));
        if state.replay.len() == REPLAY {
            state.replay.pop_front();
        }
        state.replay.push_back(Kept {
            id,
            stream,
            bytes: bytes.clone(),
            last,
        });
        if let Some(tx) = state.sinks.get(&stream) {
            if tx.try_send(bytes).is_err() {
                // Full or gone: the client reconnects with Last-Event-ID.
                state.sinks.remove(&stream);
            }
        }
        if last {
            // Its body ends once the relay's sender is gone too.
            state.sinks.remove(&stream);
        }
    }
}

/// Runs the HTTP bridge until Ctrl-C.
pub(crate) async fn listen(
    cli: Cli,
    target: Target,
    tools: Tools,
    addr: &str,
    bearer: Option<String>,
    max_sessions: usize,
    idle: Duration,
) -> Result<u8, Fail> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| Fail::usage(format!("--listen {addr}: {e} (e.g. 127.0.0.1:8080)")))?;
    let loopback = addr.ip().is_loopback();
    if !loopback && bearer.is_none() {
        return Err(Fail::usage(
            "--listen on an address that is not loopback needs --bearer TOKEN",
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Fail {
            code: 3,
            message: format!("cannot listen on {addr}: {e}"),
        })?;
    let local = listener.local_addr().map_err(|e| Fail {
        code: 3,
        message: e.to_string(),
    })?;
    // The one line a script waits for (stdout carries nothing else).
    println!("listening on http://{local}/mcp");
    let server = Arc::new(Server {
        cli,
        target,
        tools: Arc::new(tools),
        bearer,
        loopback,
        max_sessions,
        idle,
        sessions: Mutex::new(HashMap::new()),
        stateless: tokio::sync::Mutex::new(None),
    });
    tokio::spawn(reap(server.clone()));
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
        };
        // Small answers go out at once (Nagle and delayed ACKs cost 40 ms
        // a request otherwise).
        let _ = stream.set_nodelay(true);
        let server = server.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(handle(&server, req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                tracing::debug!("connection: {e}");
            }
        });
    }
    let mut sessions: Vec<_> = server.sessions.lock().expect("lock").drain().collect();
    if let Some(s) = server.stateless.lock().await.take() {
        sessions.push((String::new(), s));
    }
    for (_, s) in sessions {
        let _ = s.client.clone().close_timeout(Duration::from_secs(5)).await;
    }
    Err(Fail {
        code: 130,
        message: "interrupted".into(),
    })
}

/// Closes the sessions idle for longer than the limit.
async fn reap(server: Arc<Server>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1).min(server.idle)).await;
        let now = Instant::now();
        let idle: Vec<(String, Arc<Session>)> = {
            let mut sessions = server.sessions.lock().expect("lock");
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| {
                    let st = s.state.lock().expect("lock");
                    st.calls.is_empty()
                        && st.sinks.values().all(mpsc::Sender::is_closed)
                        && st
                            .last_used
                            .is_some_and(|t| now.duration_since(t) >= server.idle)
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| sessions.remove_entry(&id))
                .collect()
        };
        for (id, s) in idle {
            tracing::debug!("session {id} idle: closed");
            let _ = s.client.clone().close_timeout(Duration::from_secs(5)).await;
        }
    }
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_str(content_type).expect("a header value"),
    );
    r
}

/// An HTTP error with a JSON-RPC error body (`id` null), as the spec's
/// examples answer refused requests.
fn refused(status: StatusCode, message: &str) -> Response<Body> {
    let body = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":message}});
    full(status, "application/json", body.to_string())
}

fn json_response(message: &Value) -> Response<Body> {
    full(StatusCode::OK, "application/json", message.to_string())
}

fn header(req: &Request<Incoming>, name: impl hyper::header::AsHeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn handle(server: &Arc<Server>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    if path == "/healthz" && req.method() == Method::GET {
        return full(StatusCode::OK, "text/plain", "ok\n");
    }
    if path != "/mcp" && path != "/mcp/" {
        return full(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    }
    // DNS rebinding: a page elsewhere must not reach a loopback server.
    if server.loopback {
        if header(&req, HOST).is_some_and(|h| !is_local_authority(h)) {
            return refused(StatusCode::FORBIDDEN, "Host is not this loopback server");
        }
        if header(&req, ORIGIN).is_some_and(|o| !is_local_authority(o)) {
            return refused(StatusCode::FORBIDDEN, "Origin is not allowed");
        }
    }
    if let Some(token) = &server.bearer {
        let given = header(&req, AUTHORIZATION).and_then(|a| a.strip_prefix("Bearer "));
        if given != Some(token.as_str()) {
            let mut r = refused(StatusCode::UNAUTHORIZED, "a bearer token is needed");
            r.headers_mut()
                .insert("www-authenticate", HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    if let Some(v) = header(&req, VERSION_HEADER) {
        // A 2026-07-28 POST's version is judged with its body (-32020,
        // -32022 as JSON-RPC errors): see post.
        let stateless_post = req.method() == Method::POST && header(&req, SESSION_HEADER).is_none();
        if !stateless_post && !served_versions(true).contains(&v) {
            return refused(
                StatusCode::BAD_REQUEST,
                &format!("unsupported MCP-Protocol-Version: {v}"),
            );
        }
    }
    let session = match header(&req, SESSION_HEADER) {
        None => None,
        Some(id) => match server.sessions.lock().expect("lock").get(id) {
            Some(s) => Some(s.clone()),
            None => return refused(StatusCode::NOT_FOUND, "no such session (start over)"),
        },
    };
    if let Some(s) = &session {
        s.state.lock().expect("lock").last_used = Some(Instant::now());
    }
    match *req.method() {
        Method::POST => post(server, session, req).await,
        Method::GET => match session {
            Some(s) => get(&s, &req),
            None => refused(StatusCode::BAD_REQUEST, "Mcp-Session-Id is required"),
        },
        Method::DELETE => match session {
            Some(s) => {
                let id = header(&req, SESSION_HEADER).unwrap_or_default().to_owned();
                server.sessions.lock().expect("lock").remove(&id);
                let _ = s.client.clone().close_timeout(Duration::from_secs(5)).await;
                full(StatusCode::OK, "text/plain", "")
            }
            None => refused(StatusCode::BAD_REQUEST, "Mcp-Session-Id is required"),
        },
        _ => {
            let mut r = full(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "");
            r.headers_mut()
                .insert("allow", HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

/// The session's stream: what the target sends unasked. With
/// `Last-Event-ID`, the stream that event was on, from the event after it
/// (a POST's answer that the client lost its connection to included).
fn get(session: &Arc<Session>, req: &Request<Incoming>) -> Response<Body> {
    if !header(req, ACCEPT).is_some_and(|a| a.contains("text/event-stream")) {
        return refused(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must include text/event-stream",
        );
    }
    let last: Option<u64> = header(req, LAST_EVENT_HEADER).and_then(|v| v.parse().ok());
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    let mut state = session.state.lock().expect("lock");
    let stream = match last {
        None => {
            if state
                .sinks
                .get(&StreamKey::Get)
                .is_some_and(|s| !s.is_closed())
            {
                return refused(StatusCode::CONFLICT, "a stream is open for this session");
            }
            StreamKey::Get
        }
        Some(l) => match state.replay.iter().find(|k| k.id == l) {
            Some(k) => k.stream,
            None => {
                return refused(
                    StatusCode::NOT_FOUND,
                    "that event is no longer kept (start the request again)",
                )
            }
        },
    };
    // Replayed: what came after the client's last event (a first GET
    // stream: everything kept of it).
    let mut ended = false;
    for k in state.replay.iter().filter(|k| k.stream == stream) {
        if last.is_none_or(|l| k.id > l) {
            let _ = tx.try_send(k.bytes.clone());
        }
        ended |= k.last;
    }
    if !ended {
        state.sinks.insert(stream, tx);
    }
    drop(state);
    sse(rx)
}

fn sse(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    sse_body(SseBody { rx, _gone: None })
}

/// [`sse`], and what resolves once the body is dropped: its client went
/// away (or it ended, and hyper is done with it).
fn sse_watched(rx: mpsc::Receiver<Bytes>) -> (Response<Body>, oneshot::Receiver<()>) {
    let (gone, dropped) = oneshot::channel();
    let body = SseBody {
        rx,
        _gone: Some(gone),
    };
    (sse_body(body), dropped)
}

fn sse_body(body: SseBody) -> Response<Body> {
    let mut r = Response::new(body.boxed());
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    r.headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-cache"));
    r
}

/// An SSE body fed by a channel; it ends when every sender is gone.
struct SseBody {
    rx: mpsc::Receiver<Bytes>,
    /// Dropped with the body (never sent): tells a watcher.
    _gone: Option<oneshot::Sender<()>>,
}

impl http_body::Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|event| event.map(|bytes| Ok(Frame::data(bytes))))
    }
}

async fn post(
    server: &Arc<Server>,
    session: Option<Arc<Session>>,
    req: Request<Incoming>,
) -> Response<Body> {
    let wants_sse = header(&req, ACCEPT).is_some_and(|a| a.contains("text/event-stream"));
    let headers = req.headers().clone();
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return refused(StatusCode::PAYLOAD_TOO_LARGE, &format!("body: {e}")),
    };
    let Ok(text) = std::str::from_utf8(&body) else {
        return parse_error("the body is not UTF-8");
    };
    let message = match parse_message(text) {
        Ok(m) => m,
        Err(ParseError::Malformed(why)) => return parse_error(&why),
        Err(ParseError::Invalid(invalid)) => {
            let error = json!({"jsonrpc":"2.0","id":invalid.reply_to,"error":{"code":-32600,"message":invalid.reason.as_str()}});
            return full(
                StatusCode::BAD_REQUEST,
                "application/json",
                error.to_string(),
            );
        }
    };
    let era_header = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok());
    match (message, session) {
        (Message::Request { id, method, params }, None) => {
            // The header against the body's version first (SEP-2575).
            if let (Some(h), Some(body)) = (era_header, declared_version(params)) {
                if h != body {
                    let why = format!(
                        "header mismatch: {VERSION_HEADER} is {h:?}, the body says {body:?}"
                    );
                    let error = ErrorObject::new(mcpwire::modern::HEADER_MISMATCH, why);
                    return era_refusal(&id, error);
                }
            }
            match request_era(&method, params, true) {
                Err(error) => era_refusal(&id, error),
                Ok(Some(_)) => {
                    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
                    if let Err(error) = check_headers(&method, params, header) {
                        return era_refusal(&id, error);
                    }
                    if let Err(error) = check_tool_headers(&server.tools, &method, params, header) {
                        return era_refusal(&id, error);
                    }
                    stateless(server, id, &method, params, wants_sse).await
                }
                Ok(None) if era_header == Some(MODERN_PROTOCOL_VERSION) => {
                    let why = "invalid params: a 2026-07-28 request needs its _meta envelope";
                    era_refusal(&id, ErrorObject::new(INVALID_PARAMS, why))
                }
                Ok(None) if method == MethodId::Initialize.name() => {
                    let params: Value = params
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or(Value::Null);
                    initialize(server, id, params).await
                }
                Ok(None) => refused(StatusCode::BAD_REQUEST, "Mcp-Session-Id is required"),
            }
        }
        (Message::Request { id, method, params }, Some(s)) => {
            let params = params.map(RawValue::to_owned);
            request(server, &s, id, &method, params, wants_sse).await
        }
        (Message::Notification { method, params }, None)
            if era_header == Some(MODERN_PROTOCOL_VERSION)
                || declared_version(params).is_some() =>
        {
            // A cancellation is ignored: over HTTP that era cancels a
            // request by closing its stream, and a bare id could name
            // another client's request (see `stateless`).
            if method != notifications::CANCELLED {
                if let Some(s) = server.stateless.lock().await.clone() {
                    notification(&s, &method, params.map(RawValue::to_owned));
                }
            }
            full(StatusCode::ACCEPTED, "text/plain", "")
        }
        (Message::Notification { method, params }, Some(s)) => {
            notification(&s, &method, params.map(RawValue::to_owned));
            full(StatusCode::ACCEPTED, "text/plain", "")
        }
        (Message::Response { id, outcome }, Some(s)) => {
            let reply = match id {
                RequestId::Number(n) => u64::try_from(n)
                    .ok()
                    .and_then(|n| s.state.lock().expect("lock").asks.remove(&n)),
                RequestId::String(_) => None,
            };
            if let Some(reply) = reply {
                let answer = outcome.and_then(|raw| {
                    serde_json::from_str(raw.get())
                        .map_err(|e| ErrorObject::internal(format!("not JSON: {e}")))
                });
                let _ = reply.send(answer);
            }
            full(StatusCode::ACCEPTED, "text/plain", "")
        }
        (_, None) => refused(StatusCode::BAD_REQUEST, "Mcp-Session-Id is required"),
    }
}

/// The JSON-RPC response to request `id`.
fn response(id: &RequestId, outcome: Result<Box<RawValue>, ErrorObject>) -> Value {
    match outcome {
        Ok(raw) => {
            let result = serde_json::from_str::<Value>(raw.get()).unwrap_or(Value::Null);
            json!({"jsonrpc":"2.0","id":id,"result":result})
        }
        Err(e) => json!({"jsonrpc":"2.0","id":id,"error":e}),
    }
}

/// A 2026-07-28 `tools/call`'s `Mcp-Param-*` headers against its
/// arguments, for the annotations the target's `tools/list` gave its tool
/// (a tool not listed yet is not checked: its host cannot know them
/// either).
fn check_tool_headers<'h>(
    tools: &Tools,
    method: &str,
    params: Option<&RawValue>,
    header: impl Fn(&str) -> Option<&'h str>,
) -> Result<(), ErrorObject> {
    if method != MethodId::CallTool.name() {
        return Ok(());
    }
    let Some(params) = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok()) else {
        return Ok(());
    };
    // A tool the host may not call is refused as unknown later, whatever
    // its headers.
    let Some(marks) = params["name"]
        .as_str()
        .filter(|n| tools.allows(n))
        .and_then(|n| tools.marks(n))
    else {
        return Ok(());
    };
    check_param_headers(&marks, params["arguments"].as_object(), header)
}

/// A 2026-07-28 request refused before it is relayed: its JSON-RPC error
/// with HTTP 404 for a method not found (that era's removed methods
/// included), else 400.
fn era_refusal(id: &RequestId, error: ErrorObject) -> Response<Body> {
    let status = if error.code == mcpwire::rpc::METHOD_NOT_FOUND {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::BAD_REQUEST
    };
    let body = json!({"jsonrpc":"2.0","id":id,"error":error});
    full(status, "application/json", body.to_string())
}

/// The JSON-RPC notification `method` with `params` (unreadable params as
/// `null`), to send on a stream.
fn notification_message(method: &str, params: Option<&RawValue>) -> Value {
    let mut message = json!({"jsonrpc":"2.0","method":method});
    if let Some(p) = params {
        message["params"] = serde_json::from_str(p.get()).unwrap_or(Value::Null);
    }
    message
}

fn parse_error(why: &str) -> Response<Body> {
    let error = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":format!("parse error: {why}")}});
    full(
        StatusCode::BAD_REQUEST,
        "application/json",
        error.to_string(),
    )
}

/// A new session: the target connected for it, declaring the client's
/// capabilities.
async fn initialize(server: &Arc<Server>, id: RequestId, params: Value) -> Response<Body> {
    if server.sessions.lock().expect("lock").len() >= server.max_sessions {
        return refused(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("{} sessions are open (--max-sessions)", server.max_sessions),
        );
    }
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = ServerSession::negotiate(requested).to_owned();
    // The session exists before the target is connected: the target's
    // first requests (roots/list after initialized) find it.
    let slot: Arc<Mutex<Option<Arc<Session>>>> = Arc::new(Mutex::new(None));
    let asker = {
        let slot = slot.clone();
        move |kind: ServerRequestKind| ask_client(kind, slot.clone())
    };
    let client = match connect(&server.cli, &server.target, &params, asker).await {
        Ok(c) => c,
        Err(message) => {
            tracing::error!("{message}");
            let error = ErrorObject::internal(message);
            return json_response(&json!({"jsonrpc":"2.0","id":id,"error":error}));
        }
    };
    let session_id = new_session_id();
    let session = Arc::new(Session {
        client: client.clone(),
        state: Mutex::new(State {
            last_used: Some(Instant::now()),
            ..State::default()
        }),
    });
    *slot.lock().expect("lock") = Some(session.clone());
    forward_notifications(&client, &session, false);
    server
        .sessions
        .lock()
        .expect("lock")
        .insert(session_id.clone(), session);
    let mut result = init_result(&client, Era::Legacy);
    result["protocolVersion"] = Value::String(version);
    let mut r = json_response(&json!({"jsonrpc":"2.0","id":id,"result":result}));
    r.headers_mut().insert(
        SESSION_HEADER,
        HeaderValue::from_str(&session_id).expect("hex is a header value"),
    );
    r
}

fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    // The std hasher's random keys: unguessable enough for a local
    // session id; with --bearer the token guards the server.
    // (Each `RandomState` has keys of its own: hashing nothing gives
    // 8 bytes that depend on them alone.)
    use std::hash::{BuildHasher, Hasher};
    for chunk in bytes.chunks_mut(8) {
        let h = std::collections::hash_map::RandomState::new().build_hasher();
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A handler that asks the HTTP client on its session's stream.
fn ask_client(kind: ServerRequestKind, slot: Arc<Mutex<Option<Arc<Session>>>>) -> Handler {
    Handler::Async(Arc::new(move |params: Value| {
        let session = slot.lock().expect("lock").clone();
        Box::pin(async move {
            let Some(session) = session else {
                return Err(ErrorObject::internal(
                    "the client's session is not open yet",
                ));
            };
            let (reply, answer) = oneshot::channel();
            let id = {
                let mut state = session.state.lock().expect("lock");
                state.next_ask += 1;
                let id = state.next_ask;
                state.asks.insert(id, reply);
                id
            };
            let mut message = json!({"jsonrpc":"2.0","id":id,"method":kind.method()});
            if !params.is_null() {
                message["params"] = params;
            }
            session.push(&message);
            answer
                .await
                .map_err(|_| ErrorObject::internal("the client is gone"))?
        })
    }))
}

/// The target's notifications, on the session's stream (`stateless`: the
/// list changes and resource updates on the 2026-07-28 clients' listens
/// that want them, nowhere else).
fn forward_notifications(client: &Client, session: &Arc<Session>, stateless: bool) {
    let mut notes = client.notifications();
    let weak = Arc::downgrade(session);
    tokio::spawn(async move {
        while let Some(n) = notes.recv().await {
            let Some(session) = weak.upgrade() else { break };
            let params = n.params();
            if stateless && through_listens(n.method()) {
                // (A listen whose client went away was closed when its
                // stream was dropped: see `stateless::listen_stream`.)
                let routed = {
                    let state = session.state.lock().expect("lock");
                    state.listens.route(n.method(), params.as_deref())
                };
                for (stream, params) in routed {
                    let note = notification_message(n.method(), Some(&params));
                    session.push_to(stream, &format!("data: {note}\n\n"), false);
                }
                continue;
            }
            let message = notification_message(n.method(), params.as_deref());
            session.push(&message);
        }
    });
}

fn notification(session: &Arc<Session>, method: &str, params: Option<Box<RawValue>>) {
    if method == notifications::CANCELLED {
        let id = params
            .as_deref()
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|v| serde_json::from_value::<RequestId>(v.get("requestId")?.clone()).ok());
        let Some(id) = id else { return };
        let mut state = session.state.lock().expect("lock");
        if let Some(token) = state.calls.remove(&id) {
            token.cancel();
        }
        return;
    }
    if method == notifications::INITIALIZED || method == notifications::PROGRESS {
        return;
    }
    let client = session.client.clone();
    let method = method.to_owned();
    tokio::spawn(async move {
        if let Err(e) = client.notify_raw(&method, params).await {
            tracing::debug!("{method} not relayed: {e}");
        }
    });
}

/// A request of a session's client (the handshake era): relayed, answered
/// JSON or on an SSE stream of its own.
async fn request(
    server: &Arc<Server>,
    session: &Arc<Session>,
    id: RequestId,
    method: &str,
    params: Option<Box<RawValue>>,
    wants_sse: bool,
) -> Response<Body> {
    let answer = |outcome| response(&id, outcome);
    if method == MethodId::Ping.name() {
        return json_response(&answer(Ok(
            RawValue::from_string("{}".into()).expect("JSON")
        )));
    }
    if method == MethodId::Initialize.name() {
        let error = ErrorObject::new(-32600, "this session is initialized already");
        return json_response(&answer(Err(error)));
    }
    if let Some(refusal) = refuse(&server.tools, method, params.as_deref()) {
        return json_response(&answer(Err(refusal)));
    }
    let token = CancelToken::new();
    let open = Open::new(session, &id, &token);
    let call = server.relay(session, token, Era::Legacy);
    let relayed = method.to_owned();
    if !wants_sse {
        // Dropped here if the client goes away first (`open`'s drop).
        let outcome = relay_call(call, &relayed, params, |_| {}).await;
        open.answered();
        return json_response(&answer(outcome));
    }
    // The answer's own stream: primed with an event id at once (SEP-1699),
    // so a client that loses it resumes with GET and Last-Event-ID.
    let (tx, rx) = mpsc::channel::<Bytes>(STREAM_QUEUE);
    let stream = {
        let mut state = session.state.lock().expect("lock");
        state.next_post += 1;
        let stream = StreamKey::Post(state.next_post);
        state.sinks.insert(stream, tx.clone());
        stream
    };
    session.push_to(stream, &format!("retry: {RETRY_MS}\ndata: \n\n"), false);
    let progress = {
        let session = Arc::downgrade(session);
        move |params: Box<RawValue>| {
            let note = notification_message(notifications::PROGRESS, Some(&params));
            if let Some(s) = session.upgrade() {
                s.push_to(stream, &format!("data: {note}\n\n"), false);
            }
        }
    };
    let session = session.clone();
    tokio::spawn(async move {
        // A stream of the handshake era outlives its connection (the
        // client resumes it): the call runs on when the client goes.
        let outcome = relay_call(call, &relayed, params, progress).await;
        open.answered();
        let message = response(&id, outcome);
        session.push_to(stream, &format!("data: {message}\n\n"), true);
        // The stream ends once this last sender goes.
        drop(tx);
    });
    sse(rx)
}

/// A relayed request of a session's client, in `calls` until it is
/// answered; dropped before (its POST's client went away, and the POST's
/// future with it), it is forgotten and cancelled at the target, and the
/// session may be closed as idle.
struct Open {
    session: Arc<Session>,
    id: RequestId,
    token: CancelToken,
    answered: bool,
}

impl Open {
    fn new(session: &Arc<Session>, id: &RequestId, token: &CancelToken) -> Open {
        let mut state = session.state.lock().expect("lock");
        state.calls.insert(id.clone(), token.clone());
        Open {
            session: session.clone(),
            id: id.clone(),
            token: token.clone(),
            answered: false,
        }
    }

    /// The relayed call ended: forgotten, not cancelled.
    fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.session
            .state
            .lock()
            .expect("lock")
            .calls
            .remove(&self.id);
        if !self.answered {
            self.token.cancel();
        }
    }
}
