//! Transport-independent MCP behaviour: message classification, methods, tools.
//!
//! A transport (stdio or HTTP) classifies each received message, hands
//! notifications and responses to [`handle_notification`] / [`Peer::deliver`]
//! and requests to [`handle_request`], which returns an [`Outcome`]: usually a
//! response to write, sometimes a deliberate misbehaviour for the transport to
//! perform (crash, HTTP 500, dropped SSE stream, expired session).
//!
//! Two protocol eras (`--era`): the 2025-11-25 handshake, and 2026-07-28,
//! where every request carries the `_meta` envelope
//! (`io.modelcontextprotocol/protocolVersion`, …), `server/discover`
//! replaces `initialize`, results say `resultType`, the server's questions
//! to the client become `input_required` results (MRTR) answered by a
//! retry with `inputResponses` and the echoed `requestState`, and list
//! changes go out on `subscriptions/listen`. [`request_era`] tells which
//! era a request is of.

// `--conformance` (a submodule of this one, in its own file).
#[path = "conformance.rs"]
pub(crate) mod conformance;

use crate::log::Log;
use crate::opts::{EraMode, Options};
use crate::tasks::{Notifier, Tasks};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
pub const LATEST_VERSION: &str = "2025-11-25";
pub const SERVER_NAME: &str = "mcpwire-test-server";
/// The stateless era's version.
pub const MODERN_VERSION: &str = "2026-07-28";
/// `_meta` keys of the 2026-07-28 envelope.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";
/// `-32022`: unsupported protocol version (2026-07-28).
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// MCP Apps: a client that declares it gets the `dashboard` tool and its
/// `ui://` resource.
const MCP_APPS: &str = "io.modelcontextprotocol/ui";
const MCP_APP_MIME: &str = "text/html;profile=mcp-app";
const DASHBOARD_URI: &str = "ui://test/dashboard";
const CLIENT_CAPS_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `-32021`: a client capability the request needs was not declared.
pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;

/// The era one request is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and before: after `initialize`, in a session (HTTP).
    Legacy,
    /// 2026-07-28: self-describing, stateless.
    Modern,
}

/// How long `ask` waits for the client's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(60);

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Global state shared by every connection / session.
pub struct Ctx {
    pub opts: Options,
    pub log: Log,
    /// Every `requestId` seen in `notifications/cancelled`, in arrival order.
    cancelled: Mutex<Vec<Value>>,
    pub(crate) log_level: Mutex<String>,
    /// Open `subscriptions/listen` streams (2026-07-28).
    subscriptions: Mutex<Vec<Subscription>>,
    next_subscription: AtomicI64,
    /// `sse_drop` attempts so far, by `key` (2026-07-28: each re-issue of
    /// the call is a new request; the arguments name the call).
    drops: Mutex<HashMap<String, u64>>,
    /// Every task, of either era (`tasks.rs`).
    pub tasks: Tasks,
    /// This context itself (task threads need an owned handle).
    me: Weak<Ctx>,
}

/// One open `subscriptions/listen` stream: the notifications it asked
/// for, and where its stream's writer waits.
struct Subscription {
    key: i64,
    id: Value,
    wanted: Value,
    tx: mpsc::Sender<Value>,
}

impl Ctx {
    /// Built inside `Arc::new_cyclic`, whose handle is `me`.
    pub fn new(opts: Options, log: Log, me: Weak<Ctx>) -> Ctx {
        Ctx {
            opts,
            log,
            cancelled: Mutex::new(Vec::new()),
            log_level: Mutex::new("info".into()),
            subscriptions: Mutex::new(Vec::new()),
            next_subscription: AtomicI64::new(0),
            drops: Mutex::new(HashMap::new()),
            tasks: Tasks::default(),
            me,
        }
    }

    /// An owned handle on this context.
    pub fn arc(&self) -> Arc<Ctx> {
        self.me.upgrade().expect("the context outlives its users")
    }

    /// Sends `notifications/tasks` (the detailed task) to every
    /// subscription whose `taskIds` name `task_id`.
    pub fn broadcast_task(&self, task_id: &str, detail: &Value) {
        let mut subs = lock(&self.subscriptions);
        subs.retain(|s| {
            let wanted = s.wanted["taskIds"]
                .as_array()
                .is_some_and(|ids| ids.iter().any(|i| i == task_id));
            if !wanted {
                return true;
            }
            let mut params = detail.clone();
            params["_meta"] = json!({SUBSCRIPTION_ID_KEY: s.id});
            s.tx.send(notification("notifications/tasks", params))
                .is_ok()
        });
    }

    /// The versions this server serves, newest first.
    pub fn served_versions(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.opts.era.modern() {
            v.push(MODERN_VERSION);
        }
        if self.opts.era.legacy() {
            v.extend_from_slice(SUPPORTED_VERSIONS);
        }
        v
    }

    /// Sends `method` to every subscription that asked for `wanted`
    /// (e.g. `toolsListChanged`), stamped with its subscription id;
    /// forgets the ones whose stream is gone. The number it reached.
    pub fn broadcast(&self, wanted: &str, method: &str) -> usize {
        let mut subs = lock(&self.subscriptions);
        let mut reached = 0;
        subs.retain(|s| {
            if s.wanted[wanted] != true {
                return true;
            }
            let msg = notification(method, json!({"_meta": {SUBSCRIPTION_ID_KEY: s.id}}));
            let ok = s.tx.send(msg).is_ok();
            reached += usize::from(ok);
            ok
        });
        reached
    }
}

/// The protocol version a request's `_meta` envelope declares.
pub fn declared_version(params: &Value) -> Option<&str> {
    params.get("_meta")?.get(VERSION_KEY)?.as_str()
}

/// The era of request `method` with `params`, or the error answer that
/// refuses it (`-32022`: a version this server does not serve). A
/// legacy-only server ignores the envelope (and does not know
/// `server/discover`); a modern-only one refuses a request without it.
pub fn request_era(ctx: &Ctx, id: &Value, method: &str, params: &Value) -> Result<Era, Value> {
    let mode = ctx.opts.era;
    if mode == EraMode::Legacy {
        return Ok(Era::Legacy);
    }
    let meta = params.get("_meta");
    match declared_version(params) {
        // The envelope must say what the client handles (SEP-2575).
        Some(MODERN_VERSION) if meta.and_then(|m| m.get(CAPABILITIES_KEY)).is_none() => {
            Err(error_response(
                id,
                -32602,
                &format!("Invalid params: _meta lacks {CAPABILITIES_KEY}"),
            ))
        }
        Some(MODERN_VERSION) => Ok(Era::Modern),
        Some(other) => Err(unsupported_version(ctx, id, json!(other))),
        // server/discover is of the 2026-07-28 era: without its envelope
        // (or without the version in it) it is invalid.
        None if method == "server/discover" => Err(error_response(
            id,
            -32602,
            &format!("Invalid params: server/discover needs _meta with {VERSION_KEY}"),
        )),
        None if mode.legacy() => Ok(Era::Legacy),
        None => {
            let requested = match method {
                "initialize" => params["protocolVersion"].clone(),
                _ => Value::Null,
            };
            Err(unsupported_version(ctx, id, requested))
        }
    }
}

fn unsupported_version(ctx: &Ctx, id: &Value, requested: Value) -> Value {
    let mut e = RpcError::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Unsupported protocol version {requested}: this server speaks {}",
            ctx.served_versions().join(", ")
        ),
    );
    e.data = Some(json!({"supported": ctx.served_versions(), "requested": requested}));
    rpc_error_response(id, e)
}

/// State of one client: the stdio peer, or one HTTP session.
#[derive(Default)]
pub struct Peer {
    /// Ids of server-to-client requests; starts at 0 like many real servers.
    next_server_id: AtomicI64,
    /// Server-to-client requests awaiting the client's answer, by id JSON text.
    pending: Mutex<HashMap<String, mpsc::Sender<Value>>>,
    /// Client requests in flight, by id JSON text, with their cancel flag.
    inflight: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Where this client's unsolicited notifications go (legacy tasks'
    /// `notifications/tasks/status`), if anywhere.
    notifier: Mutex<Option<Notifier>>,
    /// The client declared MCP Apps in `initialize` (2025-11-25).
    apps: AtomicBool,
}

impl Peer {
    /// Registers a client request as in flight; the flag is set by a
    /// `notifications/cancelled` naming it.
    pub fn begin(&self, id: &Value) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        lock(&self.inflight).insert(id.to_string(), flag.clone());
        flag
    }

    pub fn finish(&self, id: &Value) {
        lock(&self.inflight).remove(&id.to_string());
    }

    fn cancel(&self, id: &Value) -> bool {
        match lock(&self.inflight).get(&id.to_string()) {
            Some(flag) => {
                flag.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Routes a client's response to the server request waiting for it.
    /// Returns `false` for an unknown id.
    pub fn deliver(&self, id: &Value, message: Value) -> bool {
        match lock(&self.pending).remove(&id.to_string()) {
            Some(tx) => {
                let _ = tx.send(message);
                true
            }
            None => false,
        }
    }

    pub fn set_notifier(&self, notifier: Notifier) {
        *lock(&self.notifier) = Some(notifier);
    }

    pub fn notifier(&self) -> Option<Notifier> {
        lock(&self.notifier).clone()
    }

    /// Sends request `method` to the client on `out` and waits for its
    /// answer (the whole response message). `Err`: cancelled (`cancel`),
    /// nowhere to send it, no answer in time, or the client is gone.
    pub fn request_client(
        &self,
        out: &dyn Outbound,
        method: &str,
        params: Value,
        cancel: &AtomicBool,
    ) -> Result<Value, String> {
        let sid = self.next_server_id.fetch_add(1, Ordering::SeqCst);
        let key = json!(sid).to_string();
        let request = json!({"jsonrpc": "2.0", "id": sid, "method": method, "params": params});
        let (tx, rx) = mpsc::channel();
        lock(&self.pending).insert(key.clone(), tx);
        if !out.send(&request) {
            lock(&self.pending).remove(&key);
            return Err(format!("no stream to send {method} on"));
        }
        let deadline = Instant::now() + ASK_TIMEOUT;
        loop {
            if cancel.load(Ordering::SeqCst) || !out.alive() {
                lock(&self.pending).remove(&key);
                return Err("cancelled".into());
            }
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(answer) => return Ok(answer),
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    lock(&self.pending).remove(&key);
                    return Err(format!("no answer to {method} (id {sid})"));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err("session ended".into()),
            }
        }
    }

    /// Forgets every pending server request (their waiters see a disconnect).
    pub fn clear_pending(&self) {
        lock(&self.pending).clear();
    }
}

/// Where messages that precede the final response go (progress, log lines,
/// server-to-client requests, garbage).
pub trait Outbound {
    /// Sends one JSON-RPC message; `false` if there is nowhere to send it.
    fn send(&self, msg: &Value) -> bool;
    /// Sends raw text as one "message" (a stdout line, an SSE event's data).
    fn send_raw(&self, text: &str) -> bool;
    /// Sends on the HTTP listener (GET) stream; elsewhere same as `send`.
    fn send_on_listener(&self, msg: &Value) -> bool {
        self.send(msg)
    }
    /// Whether the client is still there (HTTP: its connection is open).
    fn alive(&self) -> bool {
        true
    }
}

/// What the transport must do once a request has been handled.
pub enum Outcome {
    /// Write this response message.
    Reply(Value),
    /// Write nothing (the request was cancelled).
    Silent,
    /// stdio: print `message` to stderr and exit with `code`.
    /// HTTP: close the connection without answering.
    Crash { code: i32, message: String },
    /// HTTP: answer the POST with status 500 and a text body.
    Http500,
    /// HTTP: send a priming event (id, `retry: retry_ms`, empty data), wait
    /// `after_ms`, end the stream; `reply` is delivered on a GET that resumes
    /// with `Last-Event-ID` (`Some`), or never (`None`: 2026-07-28 has no
    /// resumption; the client issues the request again).
    SseDrop {
        after_ms: u64,
        retry_ms: u64,
        reply: Option<Value>,
    },
    /// Forget the HTTP session, then write `reply` (its last answer).
    ExpireSession(Value),
}

pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Value,
        message: Value,
    },
    Invalid {
        id: Value,
        reason: String,
    },
}

pub fn classify(msg: &Value) -> Incoming {
    let invalid = |id: Option<&Value>, reason: &str| Incoming::Invalid {
        id: id
            .filter(|id| id.is_string() || id.is_number())
            .cloned()
            .unwrap_or(Value::Null),
        reason: reason.to_string(),
    };
    let Some(obj) = msg.as_object() else {
        return invalid(None, "message is not a JSON object");
    };
    let id = obj.get("id");
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    match (obj.get("method"), id) {
        (Some(Value::String(method)), Some(id)) => {
            if id.is_string() || id.is_i64() || id.is_u64() {
                Incoming::Request {
                    id: id.clone(),
                    method: method.clone(),
                    params,
                }
            } else {
                invalid(None, "request id must be a string or an integer")
            }
        }
        (Some(Value::String(method)), None) => Incoming::Notification {
            method: method.clone(),
            params,
        },
        (Some(_), _) => invalid(id, "method must be a string"),
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Incoming::Response {
                id: id.clone(),
                message: msg.clone(),
            }
        }
        (None, _) => invalid(id, "neither a request, a notification nor a response"),
    }
}

pub struct RpcError {
    code: i64,
    message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(-32602, message)
    }
}

pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

pub fn rpc_error_response(id: &Value, e: RpcError) -> Value {
    let mut v = error_response(id, e.code, &e.message);
    if let Some(data) = e.data {
        v["error"]["data"] = data;
    }
    v
}

fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

pub fn log_notification(logger: &str, data: impl Into<Value>) -> Value {
    notification(
        "notifications/message",
        json!({"level": "info", "logger": logger, "data": data.into()}),
    )
}

pub fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

fn tool_error_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": true})
}

pub fn handle_notification(ctx: &Ctx, peer: &Peer, method: &str, params: &Value) {
    if method == "notifications/cancelled" {
        let id = params.get("requestId").cloned().unwrap_or(Value::Null);
        let found = peer.cancel(&id);
        eprintln!(
            "mcpwire-test-server: cancelled request {id} ({})",
            if found {
                "was in flight"
            } else {
                "not in flight"
            }
        );
        lock(&ctx.cancelled).push(id);
    }
    // initialized, roots/list_changed, progress, ...: nothing to do.
}

/// Handles request `method` of `era` (see [`request_era`]).
#[allow(clippy::too_many_arguments)]
pub fn handle_request(
    ctx: &Ctx,
    peer: &Peer,
    era: Era,
    id: &Value,
    method: &str,
    params: &Value,
    cancel: &AtomicBool,
    out: &dyn Outbound,
) -> Outcome {
    if era == Era::Modern {
        match method {
            // Gone in 2026-07-28.
            "initialize"
            | "ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe" => {
                let e = RpcError::new(
                    -32601,
                    format!("Method not found: {method} (not in {MODERN_VERSION})"),
                );
                return Outcome::Reply(rpc_error_response(id, e));
            }
            "server/discover" => return reply_for(era, id, Ok(discover(ctx))),
            "subscriptions/listen" => {
                return match subscribe(ctx, id, params) {
                    Ok(sub) => serve_subscription(ctx, id, sub, cancel, out),
                    Err(e) => Outcome::Reply(rpc_error_response(id, e)),
                }
            }
            _ => {}
        }
    }
    if ctx.opts.conformance {
        if let Some(outcome) = conformance::handle(ctx, peer, era, id, method, params, cancel, out)
        {
            return outcome;
        }
    }
    if method.starts_with("tasks/") {
        return crate::tasks::handle(ctx, peer, era, id, method, params, cancel, out);
    }
    // MCP Apps, declared in `initialize` (kept for the session) or on
    // this 2026-07-28 request.
    let declares_apps = |caps: &Value| caps["extensions"].get(MCP_APPS).is_some();
    if method == "initialize" {
        peer.apps
            .store(declares_apps(&params["capabilities"]), Ordering::SeqCst);
    }
    let apps = match era {
        Era::Modern => declares_apps(&params["_meta"][CLIENT_CAPS_KEY]),
        Era::Legacy => peer.apps.load(Ordering::SeqCst),
    };
    let result = match method {
        "initialize" if !ctx.opts.era.legacy() => unreachable!("refused by request_era"),
        "initialize" => Ok(initialize(ctx, params)),
        "ping" => Ok(json!({})),
        "tools/list" => tools_list(ctx, era, params, apps),
        "tools/call" => return call_tool(ctx, peer, era, id, params, cancel, out),
        "resources/list" => Ok(resources_list(apps)),
        "resources/read" => resources_read(params),
        "resources/templates/list" => Ok(json!({"resourceTemplates": [{
            "uriTemplate": "test://items/{id}",
            "name": "item",
            "description": "An item by number; read test://items/42 for \"item 42\"",
            "mimeType": "text/plain",
        }]})),
        "resources/subscribe" | "resources/unsubscribe" => match params["uri"].as_str() {
            Some(_) => Ok(json!({})),
            None => Err(RpcError::invalid_params("missing uri")),
        },
        "prompts/list" => Ok(json!({"prompts": [{
            "name": "greet",
            "description": "Greets someone by name",
            "arguments": [{"name": "name", "description": "Who to greet", "required": true}],
        }]})),
        "prompts/get" => prompts_get(params),
        "completion/complete" => Ok(complete(params)),
        "logging/setLevel" => set_level(ctx, params),
        _ => Err(RpcError::new(-32601, format!("Method not found: {method}"))),
    };
    reply_for(era, id, result)
}

/// The answer to request `id`: in 2026-07-28 a result says it is
/// complete (an `input_required` one says so already).
pub fn reply_for(era: Era, id: &Value, result: Result<Value, RpcError>) -> Outcome {
    Outcome::Reply(match result {
        Ok(mut r) => {
            if era == Era::Modern {
                if let Some(obj) = r.as_object_mut() {
                    obj.entry("resultType").or_insert(json!("complete"));
                }
            }
            response(id, r)
        }
        Err(e) => rpc_error_response(id, e),
    })
}

fn capabilities(ctx: &Ctx) -> Value {
    let mut caps = json!({
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {},
        "logging": {},
        "completions": {},
    });
    if !ctx.opts.no_tools_cap {
        caps["tools"] = json!({"listChanged": true});
    }
    if ctx.opts.conformance {
        caps["prompts"] = json!({"listChanged": true});
    }
    caps
}

fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")})
}

const INSTRUCTIONS: &str = "Test server for mcpwire: every tool misbehaves on demand.";

/// `server/discover` (2026-07-28): the versions served (both eras' unless
/// pinned), capabilities, identity (in `_meta` as the schema says, and in
/// the body as the draft page does).
fn discover(ctx: &Ctx) -> Value {
    let mut caps = capabilities(ctx);
    caps["extensions"] = json!({crate::tasks::TASKS_EXTENSION: {}});
    json!({
        "supportedVersions": ctx.served_versions(),
        "capabilities": caps,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {SERVER_INFO_KEY: server_info()},
    })
}

/// Opens a `subscriptions/listen` (2026-07-28): registered at once (so a
/// notification sent right after it was read reaches it), served by
/// [`serve_subscription`]. Logged as a `subscribed` event.
pub fn subscribe(ctx: &Ctx, id: &Value, params: &Value) -> Result<Listening, RpcError> {
    let mut wanted = match params.get("notifications") {
        Some(w @ Value::Object(_)) => w.clone(),
        None | Some(Value::Null) => json!({}),
        Some(_) => return Err(RpcError::invalid_params("notifications must be an object")),
    };
    crate::tasks::listen_task_ids(ctx, params, &mut wanted)?;
    // The acknowledgement echoes a filter that names tasks (narrowed to
    // the tasks that exist).
    let echo = wanted.get("taskIds").is_some().then(|| wanted.clone());
    let (tx, rx) = mpsc::channel();
    let key = ctx.next_subscription.fetch_add(1, Ordering::SeqCst);
    lock(&ctx.subscriptions).push(Subscription {
        key,
        id: id.clone(),
        wanted: wanted.clone(),
        tx,
    });
    ctx.log
        .event("subscribed", json!({"id": id, "notifications": wanted}));
    Ok(Listening { key, rx, echo })
}

/// A registered subscription, to serve.
pub struct Listening {
    key: i64,
    rx: mpsc::Receiver<Value>,
    /// The filter the acknowledgement echoes, if any.
    echo: Option<Value>,
}

/// Serves an open subscription on its request's stream: the
/// acknowledgement, then every notification for it, until the client
/// cancels it or goes away. Never answered (the client ends it).
pub fn serve_subscription(
    ctx: &Ctx,
    id: &Value,
    sub: Listening,
    cancel: &AtomicBool,
    out: &dyn Outbound,
) -> Outcome {
    let Listening { key, rx, echo } = sub;
    let forget = || lock(&ctx.subscriptions).retain(|s| s.key != key);
    let mut ack_params = json!({"_meta": {SUBSCRIPTION_ID_KEY: id}});
    if let Some(echo) = echo {
        ack_params["notifications"] = echo;
    }
    let ack = notification("notifications/subscriptions/acknowledged", ack_params);
    if !out.send(&ack) {
        forget();
        return Outcome::Silent;
    }
    loop {
        if cancel.load(Ordering::SeqCst) {
            forget();
            return Outcome::Silent;
        }
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(msg) => {
                if !out.send(&msg) {
                    forget();
                    return Outcome::Silent;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !out.alive() {
                    forget();
                    return Outcome::Silent;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Outcome::Silent,
        }
    }
}

fn initialize(ctx: &Ctx, params: &Value) -> Value {
    let requested = params["protocolVersion"].as_str();
    let version = requested
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .unwrap_or(LATEST_VERSION);
    let mut caps = capabilities(ctx);
    caps["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    json!({
        "protocolVersion": version,
        "capabilities": caps,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
}

const LOG_LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn set_level(ctx: &Ctx, params: &Value) -> Result<Value, RpcError> {
    match params["level"].as_str() {
        Some(level) if LOG_LEVELS.contains(&level) => {
            *lock(&ctx.log_level) = level.to_string();
            Ok(json!({}))
        }
        _ => Err(RpcError::invalid_params("invalid or missing level")),
    }
}

fn resources_list(apps: bool) -> Value {
    let mut list = json!({"resources": [
        {"uri": "test://hello", "name": "hello", "mimeType": "text/plain",
         "description": "The text \"Hello, world!\""},
        {"uri": "test://blob", "name": "blob", "mimeType": "application/octet-stream",
         "description": "The 16 bytes 0x00..0x0f"},
    ]});
    if apps {
        list["resources"]
            .as_array_mut()
            .expect("an array")
            .push(json!({
                "uri": DASHBOARD_URI, "name": "dashboard", "mimeType": MCP_APP_MIME,
                "description": "The MCP App of the dashboard tool",
            }));
    }
    list
}

fn resources_read(params: &Value) -> Result<Value, RpcError> {
    let Some(uri) = params["uri"].as_str() else {
        return Err(RpcError::invalid_params("missing uri"));
    };
    let content = if uri == "test://hello" {
        json!({"uri": uri, "mimeType": "text/plain", "text": "Hello, world!"})
    } else if uri == "test://blob" {
        let bytes: Vec<u8> = (0u8..16).collect();
        json!({"uri": uri, "mimeType": "application/octet-stream", "blob": base64(&bytes)})
    } else if uri == DASHBOARD_URI {
        json!({"uri": uri, "mimeType": MCP_APP_MIME,
               "text": "<!doctype html><html><body><h1>Dashboard</h1></body></html>",
               "_meta": {"ui": {"prefersBorder": true}}})
    } else if let Some(item) = uri.strip_prefix("test://items/") {
        json!({"uri": uri, "mimeType": "text/plain", "text": format!("item {item}")})
    } else {
        let mut e = RpcError::new(-32002, "Resource not found");
        e.data = Some(json!({"uri": uri}));
        return Err(e);
    };
    Ok(json!({ "contents": [content] }))
}

fn prompts_get(params: &Value) -> Result<Value, RpcError> {
    if params["name"].as_str() != Some("greet") {
        return Err(RpcError::invalid_params(format!(
            "unknown prompt {}",
            params["name"]
        )));
    }
    let Some(name) = params["arguments"]["name"].as_str() else {
        return Err(RpcError::invalid_params("missing required argument: name"));
    };
    Ok(json!({
        "description": "Greets someone by name",
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello, {name}!")}}],
    }))
}

fn complete(params: &Value) -> Value {
    let prefix = params["argument"]["value"]
        .as_str()
        .unwrap_or("")
        .to_lowercase();
    let candidates: &[&str] = match (
        params["ref"]["type"].as_str(),
        params["argument"]["name"].as_str(),
    ) {
        (Some("ref/prompt"), Some("name")) => &["Alice", "Bob", "Carol", "Dave", "Eve"],
        (Some("ref/resource"), Some("id")) => &["1", "2", "3", "42"],
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.to_lowercase().starts_with(&prefix))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}

// ---------------------------------------------------------------- tools

/// Tools in the order `tools/list` shows them; page 1 is the first
/// `PAGE_SIZE`, page 2 the rest.
const PAGE_SIZE: usize = 8;
const PAGE_2_CURSOR: &str = "page-2";

fn schema(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn tool_definitions() -> Vec<Value> {
    let int = |d: &str| json!({"type": "integer", "description": d});
    let tool = |name: &str, description: &str, input: Value| json!({"name": name, "description": description, "inputSchema": input});
    vec![
        tool(
            "echo",
            "Returns \"Echo: <message>\" and structuredContent {message}",
            schema(json!({"message": {"type": "string"}}), &["message"]),
        ),
        {
            let mut add = tool(
                "add",
                "Adds two numbers; structuredContent {sum}, as its outputSchema says unless \
                 `broken` is \"type\" (sum as a string) or \"missing\" (no structuredContent)",
                schema(
                    json!({"a": {"type": "number"}, "b": {"type": "number"},
                           "broken": {"type": "string", "enum": ["type", "missing"]}}),
                    &["a", "b"],
                ),
            );
            add["outputSchema"] = schema(json!({"sum": {"type": "number"}}), &["sum"]);
            add
        },
        tool(
            "slow",
            "Sleeps ms milliseconds in `steps` steps, sending notifications/progress per step when \
             a progressToken is given; cancellable",
            schema(
                json!({"ms": int("total duration (default 1000)"),
                       "steps": int("number of steps (default 5)")}),
                &[],
            ),
        ),
        tool(
            "crash",
            "stdio: prints message on stderr and exits with code; HTTP: closes the connection",
            schema(
                json!({"code": int("exit code (default 1)"), "message": {"type": "string"}}),
                &[],
            ),
        ),
        tool(
            "garbage",
            "Writes a non-JSON line, [1,2,3], \"str\" and a response with an unknown id before the \
             answer",
            schema(json!({}), &[]),
        ),
        tool(
            "long_line",
            "Writes one notification line of exactly `bytes` bytes (excluding the newline) before \
             the answer",
            schema(json!({"bytes": int("line length (default 1048576)")}), &[]),
        ),
        tool(
            "big",
            "Returns a text result of exactly `bytes` bytes (a..z repeated)",
            schema(json!({"bytes": int("text length (default 1048576)")}), &[]),
        ),
        tool(
            "ask",
            "Sends a request (roots/list, sampling/createMessage, elicitation/create, ping, ...) \
             to the client and returns its answer as text JSON (2026-07-28: asks through an \
             input_required result; -32021 if the client lacks the capability)",
            schema(
                json!({"method": {"type": "string"}, "params": {"type": "object"},
                       "on_listener": {"type": "boolean",
                                       "description": "HTTP: send on the GET listener stream"}}),
                &["method"],
            ),
        ),
        tool(
            "notify_first",
            "Sends `count` notifications (log lines, the last one tools/list_changed) before the \
             answer (2026-07-28: log lines only with a logLevel, the list change on \
             subscriptions/listen)",
            schema(json!({"count": int("default 3")}), &[]),
        ),
        tool(
            "error",
            "Answers with a JSON-RPC error",
            schema(
                json!({"code": int("default -32000"), "message": {"type": "string"}}),
                &[],
            ),
        ),
        tool(
            "tool_error",
            "Returns a result with isError: true",
            schema(json!({}), &[]),
        ),
        tool(
            "cancelled_log",
            "Returns the requestIds seen in notifications/cancelled so far (text JSON array)",
            schema(json!({}), &[]),
        ),
        tool(
            "expire_session",
            "HTTP: forgets the session, then answers (the next request gets 404)",
            schema(json!({}), &[]),
        ),
        tool(
            "sse_drop",
            "HTTP: sends a priming event then closes the SSE stream; the answer comes on a GET \
             with Last-Event-ID (2026-07-28: the first `drops` attempts of the call named `key` \
             lose their stream and get no answer; the next one is answered)",
            schema(
                json!({"after_ms": int("delay before closing (default 0)"),
                       "retry_ms": int("SSE retry field (default 300)"),
                       "drops": int("2026-07-28: attempts to drop (default 1)"),
                       "key": {"type": "string",
                               "description": "2026-07-28: names the call (default sse_drop)"}}),
                &[],
            ),
        ),
        tool(
            "http_500",
            "HTTP: answers the POST with status 500",
            schema(json!({}), &[]),
        ),
        tool(
            "pid",
            "Returns this server's process id (text)",
            schema(json!({}), &[]),
        ),
        tool(
            "stop_reading",
            "stdio: answers, then never reads stdin again, and sends the request `method` \
             (default ping) to the client every `every_ms` (0: never) until it exits",
            schema(
                json!({"every_ms": int("interval of the requests (default 0)"),
                       "method": {"type": "string"}}),
                &[],
            ),
        ),
    ]
}

fn tools_list(ctx: &Ctx, era: Era, params: &Value, apps: bool) -> Result<Value, RpcError> {
    let mut tools = tool_definitions();
    // The task tools, in either era (without a task they run inline or
    // say they need one).
    tools.extend(crate::tasks::tool_definitions(era));
    if let Some(text) = &ctx.opts.describe_echo {
        // What a server that changes its tools after approval does.
        tools[0]["description"] = json!(text);
    }
    if let Some(name) = &ctx.opts.extra_tool {
        tools.push(json!({"name": name, "description": "A tool added later", "inputSchema": {"type": "object"}}));
    }
    if apps {
        tools.push(json!({
            "name": "dashboard",
            "description": "Shows the dashboard (an MCP App)",
            "inputSchema": {"type": "object"},
            "_meta": {"ui": {"resourceUri": DASHBOARD_URI, "visibility": ["model", "app"]}},
        }));
    }
    let mut page = match params.get("cursor") {
        None | Some(Value::Null) => json!({
            "tools": tools[..PAGE_SIZE],
            "nextCursor": PAGE_2_CURSOR,
        }),
        Some(Value::String(c)) if c == PAGE_2_CURSOR => {
            let mut page = json!({ "tools": tools[PAGE_SIZE..] });
            if ctx.opts.repeat_cursor {
                page["nextCursor"] = json!(PAGE_2_CURSOR);
            }
            page
        }
        Some(other) => return Err(RpcError::invalid_params(format!("invalid cursor {other}"))),
    };
    if let (Some(ms), Era::Modern) = (ctx.opts.list_ttl_ms, era) {
        page["ttlMs"] = json!(ms);
        page["cacheScope"] = json!("private");
    }
    Ok(page)
}

fn arg_u64(args: &Value, name: &str, default: u64) -> u64 {
    args.get(name).and_then(Value::as_u64).unwrap_or(default)
}

fn call_tool(
    ctx: &Ctx,
    peer: &Peer,
    era: Era,
    id: &Value,
    params: &Value,
    cancel: &AtomicBool,
    out: &dyn Outbound,
) -> Outcome {
    let reply = |r: Result<Value, RpcError>| reply_for(era, id, r);
    let reply_value = |v: Value| match reply(Ok(v)) {
        Outcome::Reply(v) => v,
        _ => unreachable!("reply_for replies"),
    };
    let Some(name) = params["name"].as_str() else {
        return reply(Err(RpcError::invalid_params("missing tool name")));
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return reply(Err(RpcError::invalid_params("arguments must be an object"))),
    };
    if let Some(outcome) = crate::tasks::call_tool(ctx, peer, era, id, name, &args, params, cancel)
    {
        return outcome;
    }
    let progress_token = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .cloned();

    match name {
        "dashboard" => reply(Ok(
            json!({"content": [{"type": "text", "text": "dashboard shown"}]}),
        )),
        "echo" => reply(match args["message"].as_str() {
            Some(m) => Ok(json!({
                "content": [{"type": "text", "text": format!("Echo: {m}")}],
                "structuredContent": {"message": m},
            })),
            None => Err(RpcError::invalid_params(
                "echo: missing string argument message",
            )),
        }),
        "add" => reply(match (args["a"].as_f64(), args["b"].as_f64()) {
            (Some(a), Some(b)) => {
                // Keep integers integral: 2 + 3 = "5", not "5.0".
                let sum = match (args["a"].as_i64(), args["b"].as_i64()) {
                    (Some(a), Some(b)) => json!(a.wrapping_add(b)),
                    _ => json!(a + b),
                };
                let text = json!([{"type": "text", "text": sum.to_string()}]);
                Ok(match args["broken"].as_str() {
                    Some("type") => json!({
                        "content": text,
                        "structuredContent": {"sum": sum.to_string()},
                    }),
                    Some("missing") => json!({ "content": text }),
                    _ => json!({ "content": text, "structuredContent": {"sum": sum} }),
                })
            }
            _ => Err(RpcError::invalid_params("add: a and b must be numbers")),
        }),
        "slow" => {
            let ms = arg_u64(&args, "ms", 1000);
            let steps = arg_u64(&args, "steps", 5).min(100_000);
            match ms.saturating_mul(1000).checked_div(steps) {
                None => {
                    if crate::sleep_cancellable(Duration::from_millis(ms), cancel) {
                        return Outcome::Silent;
                    }
                }
                Some(per_step_us) => {
                    for i in 1..=steps {
                        if crate::sleep_cancellable(Duration::from_micros(per_step_us), cancel) {
                            return Outcome::Silent;
                        }
                        if let Some(token) = &progress_token {
                            out.send(&notification(
                                "notifications/progress",
                                json!({"progressToken": token, "progress": i, "total": steps,
                                       "message": format!("step {i} of {steps}")}),
                            ));
                        }
                    }
                }
            }
            reply(Ok(json!({
                "content": [{"type": "text", "text": format!("slow done: {steps} steps in {ms} ms")}],
                "structuredContent": {"ms": ms, "steps": steps},
            })))
        }
        "crash" => Outcome::Crash {
            code: args["code"]
                .as_i64()
                .map(|c| c.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
                .unwrap_or(1),
            message: args["message"]
                .as_str()
                .unwrap_or("crashing on purpose")
                .to_string(),
        },
        "garbage" => {
            out.send_raw("this line is not JSON {");
            out.send_raw("[1,2,3]");
            out.send_raw("\"str\"");
            out.send(&json!({"jsonrpc": "2.0", "id": 987654321, "result": {"unexpected": true}}));
            reply(Ok(text_result("garbage sent")))
        }
        "long_line" => {
            let bytes = arg_u64(&args, "bytes", 1 << 20).min(1 << 28) as usize;
            let mut msg = notification(
                "notifications/message",
                json!({"level": "debug", "logger": "long_line", "data": ""}),
            );
            let overhead = msg.to_string().len();
            msg["params"]["data"] = json!("x".repeat(bytes.saturating_sub(overhead)));
            let line = msg.to_string();
            out.send_raw(&line);
            reply(Ok(text_result(format!(
                "long line sent: {} bytes",
                line.len()
            ))))
        }
        "big" => {
            let bytes = arg_u64(&args, "bytes", 1 << 20).min(1 << 28) as usize;
            let text: String = (0..bytes)
                .map(|i| (b'a' + (i % 26) as u8) as char)
                .collect();
            reply(Ok(text_result(text)))
        }
        "ask" if era == Era::Modern => reply(ask_modern(params, &args)),
        "ask" => ask(peer, &args, cancel, out).map_or(Outcome::Silent, |r| reply(Ok(r))),
        "notify_first" if era == Era::Modern => {
            // Log lines only when the request asked for a level; the list
            // change goes to the subscriptions that want it.
            let count = arg_u64(&args, "count", 3).min(100_000);
            let logs = params["_meta"][LOG_LEVEL_KEY].is_string();
            for i in 1..count {
                if logs {
                    out.send(&log_notification(
                        "notify_first",
                        format!("notification {i} of {count}"),
                    ));
                }
            }
            let reached = if count > 0 {
                ctx.broadcast("toolsListChanged", "notifications/tools/list_changed")
            } else {
                0
            };
            reply(Ok(text_result(format!(
                "sent {count} notifications ({reached} subscriptions reached)"
            ))))
        }
        "notify_first" => {
            let count = arg_u64(&args, "count", 3).min(100_000);
            for i in 1..=count {
                let msg = if i == count {
                    notification("notifications/tools/list_changed", json!({}))
                } else {
                    log_notification("notify_first", format!("notification {i} of {count}"))
                };
                out.send(&msg);
            }
            reply(Ok(text_result(format!("sent {count} notifications"))))
        }
        "error" => {
            let mut e = RpcError::new(
                args["code"].as_i64().unwrap_or(-32000),
                args["message"].as_str().unwrap_or("requested error"),
            );
            e.data = Some(json!({"requested": true}));
            reply(Err(e))
        }
        "tool_error" => reply(Ok(tool_error_result("tool failed on purpose"))),
        "cancelled_log" => {
            let ids = Value::Array(lock(&ctx.cancelled).clone());
            reply(Ok(json!({
                "content": [{"type": "text", "text": ids.to_string()}],
                "structuredContent": {"requestIds": ids},
            })))
        }
        "expire_session" if era == Era::Modern => reply(Ok(tool_error_result(format!(
            "expire_session: there are no sessions in {MODERN_VERSION}"
        )))),
        "expire_session" => Outcome::ExpireSession(response(id, text_result("session expired"))),
        "sse_drop" if era == Era::Modern => {
            // No resumption: the stream of the first `drops` attempts of
            // the call named `key` breaks before the response; the client
            // issues it again with a new id.
            let drops = arg_u64(&args, "drops", 1);
            let key = args["key"].as_str().unwrap_or("sse_drop").to_owned();
            let attempt = {
                let mut seen = lock(&ctx.drops);
                let n = seen.entry(key.clone()).or_insert(0);
                *n += 1;
                *n
            };
            ctx.log.event(
                "sse_drop",
                json!({"key": key, "attempt": attempt, "id": id, "dropped": attempt <= drops}),
            );
            if attempt <= drops {
                Outcome::SseDrop {
                    after_ms: arg_u64(&args, "after_ms", 0),
                    retry_ms: arg_u64(&args, "retry_ms", 300),
                    reply: None,
                }
            } else {
                reply(Ok(text_result(format!(
                    "answered attempt {attempt} after {drops} dropped streams"
                ))))
            }
        }
        "sse_drop" => Outcome::SseDrop {
            after_ms: arg_u64(&args, "after_ms", 0),
            retry_ms: arg_u64(&args, "retry_ms", 300),
            reply: Some(reply_value(text_result("resumed after sse_drop"))),
        },
        "http_500" => Outcome::Http500,
        "pid" => reply(Ok(text_result(std::process::id().to_string()))),
        // Handled by the stdio loop; over HTTP there is no stdin to stop.
        "stop_reading" => reply(Ok(tool_error_result(
            "stop_reading only has an effect over stdio",
        ))),
        _ => reply(Err(RpcError::invalid_params(format!(
            "Unknown tool: {name}"
        )))),
    }
}

/// The capability a client must declare to be asked `method`.
fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "roots/list" => Some("roots"),
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        _ => None,
    }
}

/// `ask` in 2026-07-28 (MRTR): the first request gets an `input_required`
/// result with one input request (`ask`) and a `requestState` naming the
/// method; the retry carrying `inputResponses.ask` and that state gets
/// the answer as text JSON (as over the 2025 era). Stateless: everything
/// is in the request. A method the client did not declare the capability
/// of is refused with `-32021`; one that cannot be an input request (e.g.
/// `ping`, gone in 2026) is a tool error.
fn ask_modern(params: &Value, args: &Value) -> Result<Value, RpcError> {
    let Some(method) = args["method"].as_str() else {
        return Ok(tool_error_result("ask: missing method"));
    };
    let Some(capability) = capability_for(method) else {
        return Ok(tool_error_result(format!(
            "ask: {method} cannot be asked of a client in {MODERN_VERSION}"
        )));
    };
    let declared = &params["_meta"][CAPABILITIES_KEY];
    if declared.get(capability).is_none_or(Value::is_null) {
        let mut e = RpcError::new(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!("ask: {method} needs the client capability {capability}"),
        );
        e.data = Some(json!({"requiredCapabilities": {capability: {}}}));
        return Err(e);
    }
    let state = format!("ask-v1:{method}");
    if let Some(answer) = params.get("inputResponses").and_then(|r| r.get("ask")) {
        if params["requestState"].as_str() != Some(&state) {
            return Err(RpcError::invalid_params(format!(
                "ask: requestState {} does not match the input asked for",
                params["requestState"]
            )));
        }
        return Ok(text_result(answer.to_string()));
    }
    let mut request = json!({"method": method});
    if let Some(p) = ask_params(method, args) {
        request["params"] = p;
    }
    Ok(json!({
        "resultType": "input_required",
        "inputRequests": {"ask": request},
        "requestState": state,
    }))
}

/// The params of the request `ask` sends: the tool's `params`, or a
/// default for the well-known methods.
fn ask_params(method: &str, args: &Value) -> Option<Value> {
    match args.get("params") {
        Some(p) if !p.is_null() => Some(p.clone()),
        _ => match method {
            "sampling/createMessage" => Some(json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello"}}],
                "maxTokens": 32,
            })),
            "elicitation/create" => Some(json!({
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": {"type": "object",
                                    "properties": {"name": {"type": "string"}},
                                    "required": ["name"]},
            })),
            _ => None,
        },
    }
}

/// `ask`: one server-to-client request. `None` if the call was cancelled.
fn ask(peer: &Peer, args: &Value, cancel: &AtomicBool, out: &dyn Outbound) -> Option<Value> {
    let Some(method) = args["method"].as_str() else {
        return Some(tool_error_result("ask: missing method"));
    };
    let params = ask_params(method, args);
    let sid = peer.next_server_id.fetch_add(1, Ordering::SeqCst);
    let mut request = json!({"jsonrpc": "2.0", "id": sid, "method": method});
    if let Some(p) = params {
        request["params"] = p;
    }
    let (tx, rx) = mpsc::channel();
    lock(&peer.pending).insert(json!(sid).to_string(), tx);
    let sent = if args["on_listener"].as_bool() == Some(true) {
        out.send_on_listener(&request)
    } else {
        out.send(&request)
    };
    if !sent {
        lock(&peer.pending).remove(&json!(sid).to_string());
        return Some(tool_error_result(format!(
            "ask: no stream to send {method} on"
        )));
    }
    let deadline = Instant::now() + ASK_TIMEOUT;
    let answer = loop {
        if cancel.load(Ordering::SeqCst) {
            lock(&peer.pending).remove(&json!(sid).to_string());
            // Its question is withdrawn with it, as real servers do.
            out.send(&notification(
                "notifications/cancelled",
                json!({"requestId": sid, "reason": "the tool call was cancelled"}),
            ));
            return None;
        }
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok(answer) => break answer,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                lock(&peer.pending).remove(&json!(sid).to_string());
                return Some(tool_error_result(format!(
                    "ask: no answer to {method} (id {sid}) within {}s",
                    ASK_TIMEOUT.as_secs()
                )));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Some(tool_error_result("ask: session ended"));
            }
        }
    };
    Some(match answer.get("result") {
        Some(result) => text_result(result.to_string()),
        None => tool_error_result(
            answer
                .get("error")
                .cloned()
                .unwrap_or(Value::Null)
                .to_string(),
        ),
    })
}

pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        s.push(ALPHABET[(n >> 18) as usize & 63] as char);
        s.push(ALPHABET[(n >> 12) as usize & 63] as char);
        s.push(if chunk.len() > 1 {
            ALPHABET[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        s.push(if chunk.len() > 2 {
            ALPHABET[n as usize & 63] as char
        } else {
            '='
        });
    }
    s
}
