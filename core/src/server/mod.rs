//! The server side of MCP as a sans-IO value: one client's session over
//! JSONL (stdio), for anything of ours that serves MCP — `mcpwire bridge`
//! in front of a host, test and demo servers.
//!
//! ```text
//!   bytes ──► ServerSession ──► ServerEvent: Initialize, Request, Notification,
//!   (stdin)        │  ▲                      Cancelled, Response, Closed
//!                  │  └── the application: respond, request, notify, accept
//!                  ▼
//!   lines to write (stdout): responses, the application's requests and
//!   notifications, and the session's own answers (ping, errors)
//! ```
//!
//! The session answers by itself what needs no application: `ping`, lines
//! that are not JSON (-32700), messages that are not JSON-RPC (-32600),
//! requests before `initialize` (-32600), a
//! second `initialize`, an id already open, too many requests at once, and
//! an over-long line whose id can be read. Requests sent right behind
//! `initialize`, before its answer, are passed on after it (in order).
//! Every request the client sends
//! is answered exactly once: [`ServerSession::respond`] refuses an id that
//! is not open, and a request the client cancelled is answered by nobody
//! (the spec: the receiver SHOULD NOT respond to a cancelled request).
//!
//! Both eras are served, request by request, as a dual-era server does:
//! - the handshake era (2025-11-25 and earlier): the version is
//!   negotiated in `initialize` ([`ServerSession::negotiate`]);
//! - 2026-07-28 (with [`ServeConfig::modern`], the default): a request
//!   whose `_meta` declares `io.modelcontextprotocol/protocolVersion`
//!   needs no handshake. The session checks the envelope (no client
//!   capabilities: -32602; a version not served: -32022 with the ones
//!   that are), refuses the methods that era removed (`initialize`,
//!   `ping`, `logging/setLevel`, `resources/(un)subscribe`: -32601),
//!   hands `server/discover` to the application as
//!   [`ServerEvent::Discover`] (answered with [`ServerSession::discover`])
//!   and stamps `resultType: "complete"` on the results of that era that
//!   do not say what they are. `server/discover` without the envelope is
//!   -32602. Server-to-client requests do not exist in that era: a
//!   request needing the client's input is answered with an
//!   `input_required` result (multi round-trip requests), which the
//!   application builds.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::codec::glimpse::Kind;
use crate::codec::jsonl::{self, JsonlConfig, JsonlDecoder, JsonlError};
use crate::mcp::handshake::SUPPORTED_PROTOCOL_VERSIONS;
use crate::mcp::methods::{notifications, MethodId};
use crate::modern::Era;
use crate::rpc::{
    parse_message, ErrorObject, Message, ParseError, RequestId, INVALID_REQUEST, METHOD_NOT_FOUND,
    PARSE_ERROR,
};

mod param_headers;
mod stateless;

pub use param_headers::check_param_headers;
pub use stateless::{
    check_headers, declared_version, discover_result, error_status, modern_result, request_era,
    served_versions,
};

#[cfg(test)]
mod tests;

/// Whether a `Host` header or an `Origin` (`http://host:port`) names a
/// loopback server: `localhost`, `127.0.0.1` or `[::1]`, any port, any
/// case. A local HTTP server refuses anything else against DNS rebinding
/// (the spec's security warning for Streamable HTTP).
pub fn is_local_authority(value: &str) -> bool {
    local_host(value)
        .is_some_and(|h| matches!(h.as_str(), "localhost" | "127.0.0.1" | "[::1]" | "::1"))
}

/// The host of a `Host` or `Origin` value, lowercase, without scheme and
/// port (`None` when empty).
pub fn local_host(value: &str) -> Option<String> {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"))
        .unwrap_or(value);
    let host = match rest.rsplit_once(':') {
        Some((h, port)) if !h.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => rest,
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Limits of a [`ServerSession`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// Longest line read (16 MiB): a longer one is skipped without being
    /// buffered, and answered with an error when its id can be read.
    pub max_line_len: usize,
    /// The client's requests open at once (1,024): one more is answered
    /// with an error at once.
    pub max_open_requests: usize,
    /// Our requests to the client open at once (256).
    pub max_own_requests: usize,
    /// Whether 2026-07-28 requests are served too (`true`): see the
    /// [module docs](self). `false` serves the handshake era only, as a
    /// server of that era does: the envelope is ignored, and
    /// `server/discover` before `initialize` is -32601.
    pub modern: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            max_line_len: jsonl::DEFAULT_MAX_LINE_LEN,
            max_open_requests: 1024,
            max_own_requests: 256,
            modern: true,
        }
    }
}

/// What the client did, for the application.
#[derive(Debug, Clone)]
pub enum ServerEvent {
    /// `initialize`: answer it with [`ServerSession::accept`] (or
    /// [`ServerSession::respond`] with an error).
    Initialize {
        /// The request's id.
        id: RequestId,
        /// Its params (`protocolVersion`, `capabilities`, `clientInfo`).
        params: Value,
    },
    /// `notifications/initialized`.
    Initialized,
    /// A request to answer with [`ServerSession::respond`].
    Request {
        /// The client's id.
        id: RequestId,
        /// The method.
        method: String,
        /// The params, if any (a 2026-07-28 request's with its `_meta`
        /// envelope).
        params: Option<Box<RawValue>>,
        /// Its era: [`Era::Modern`] for a request whose envelope declares
        /// 2026-07-28, else [`Era::Legacy`] (of the handshake).
        era: Era,
    },
    /// `server/discover` (2026-07-28): answer it with
    /// [`ServerSession::discover`].
    Discover {
        /// The request's id.
        id: RequestId,
        /// The capabilities the client declared in its envelope.
        client_capabilities: Value,
    },
    /// A notification (not `initialized`, not the cancellation of an open
    /// request: those are events of their own).
    Notification {
        /// The method.
        method: String,
        /// The params, if any.
        params: Option<Box<RawValue>>,
    },
    /// The client cancelled its request `id`: it is no longer open, and
    /// its answer would be dropped; stop the work.
    Cancelled {
        /// The cancelled request.
        id: RequestId,
        /// The client's reason, if it gave one.
        reason: Option<String>,
    },
    /// The client answered our request `id` ([`ServerSession::request`]).
    Response {
        /// Our id.
        id: u64,
        /// Its result, or its error.
        outcome: Result<Box<RawValue>, ErrorObject>,
    },
    /// The input ended ([`ServerSession::finish`]): the client is gone. Our
    /// requests still open are listed: nobody will answer them.
    Closed {
        /// Our requests left unanswered.
        unanswered: Vec<u64>,
    },
    /// Something the session answered or dropped by itself, for the logs.
    Diagnostic(String),
}

/// Why a call of the application was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The id is not a request of the client's that is open (never sent,
    /// answered already, or cancelled).
    #[error("request {0} is not open (answered, cancelled, or never sent)")]
    NotOpen(RequestId),
    /// As many of our requests are open as [`ServeConfig::max_own_requests`].
    #[error("{0} requests to the client are open already")]
    TooManyRequests(usize),
    /// The params or the result do not serialize.
    #[error("does not serialize: {0}")]
    Serialize(String),
    /// The input ended: nothing more is sent.
    #[error("the client is gone")]
    Closed,
}

/// Where the handshake is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Waiting for `initialize`.
    New,
    /// `initialize` is open (`id`), asking for `requested`.
    Initializing { id: RequestId, requested: String },
    /// Answered: the version spoken.
    Ready { version: String },
}

/// One client's session. See the [module docs](self).
#[derive(Debug)]
pub struct ServerSession {
    config: ServeConfig,
    decoder: JsonlDecoder,
    phase: Phase,
    /// The client's requests not answered yet, with their era (and a
    /// 2026-07-28 one's method, whose result is stamped).
    open: HashMap<RequestId, (Era, Option<MethodId>)>,
    /// Ours, not answered yet.
    own: HashSet<u64>,
    next_id: u64,
    events: VecDeque<ServerEvent>,
    /// Lines to write, each ending in `\n`.
    lines: VecDeque<Vec<u8>>,
    closed: bool,
}

impl Default for ServerSession {
    fn default() -> Self {
        ServerSession::new(ServeConfig::default())
    }
}

impl ServerSession {
    /// A session waiting for the client's `initialize`.
    pub fn new(config: ServeConfig) -> Self {
        ServerSession {
            decoder: JsonlDecoder::with_config(JsonlConfig {
                max_line_len: config.max_line_len,
            }),
            config,
            phase: Phase::New,
            open: HashMap::new(),
            own: HashSet::new(),
            next_id: 1,
            events: VecDeque::new(),
            lines: VecDeque::new(),
            closed: false,
        }
    }

    /// The version the handshake settled on, once [`ServerSession::accept`]
    /// answered `initialize`.
    pub fn protocol_version(&self) -> Option<&str> {
        match &self.phase {
            Phase::Ready { version } => Some(version),
            _ => None,
        }
    }

    /// The version to answer a client asking for `requested` with: the
    /// same if it is served, else the newest served (the client then
    /// decides whether it speaks it).
    pub fn negotiate(requested: &str) -> &'static str {
        SUPPORTED_PROTOCOL_VERSIONS
            .iter()
            .find(|v| **v == requested)
            .unwrap_or(&SUPPORTED_PROTOCOL_VERSIONS[0])
    }

    // ----- input ------------------------------------------------------------

    /// Bytes read from the client (any split).
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.closed {
            return;
        }
        let mut decoder = std::mem::take(&mut self.decoder);
        decoder.feed(bytes, |line| match line {
            Ok(line) => self.line(line),
            Err(e) => self.framing(e),
        });
        self.decoder = decoder;
    }

    /// The input ended. A last line without its `\n` is dropped (said in a
    /// diagnostic); [`ServerEvent::Closed`] follows.
    pub fn finish(&mut self) {
        if self.closed {
            return;
        }
        if let Some(e) = self.decoder.finish() {
            self.framing(e);
        }
        self.closed = true;
        self.open.clear();
        let mut unanswered: Vec<u64> = self.own.drain().collect();
        unanswered.sort_unstable();
        self.events.push_back(ServerEvent::Closed { unanswered });
    }

    fn framing(&mut self, e: JsonlError) {
        if let JsonlError::LineTooLong { glimpse, .. } = &e {
            let id = glimpse
                .id
                .as_deref()
                .filter(|_| glimpse.kind == Some(Kind::Request))
                .and_then(|id| serde_json::from_str::<RequestId>(id).ok());
            if let Some(id) = id {
                // The request cannot be read, but its client must not wait.
                let error = ErrorObject::new(INVALID_REQUEST, e.to_string());
                self.write_error(Some(&id), &error);
            }
        }
        self.events
            .push_back(ServerEvent::Diagnostic(e.to_string()));
    }

    fn line(&mut self, line: &[u8]) {
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            Err(e) => {
                let why = format!("invalid UTF-8 at byte {}", e.valid_up_to());
                return self.parse_error(why);
            }
        };
        let message = match parse_message(text) {
            Ok(m) => m,
            Err(ParseError::Malformed(why)) => return self.parse_error(why),
            Err(ParseError::Invalid(invalid)) => {
                let error = ErrorObject::new(INVALID_REQUEST, invalid.reason.as_str());
                self.write_error(invalid.reply_to.as_ref(), &error);
                let why = format!("invalid message: {}", invalid.reason);
                return self.events.push_back(ServerEvent::Diagnostic(why));
            }
        };
        match message {
            Message::Request { id, method, params } => self.request_in(id, &method, params),
            Message::Notification { method, params } => self.notification_in(&method, params),
            Message::Response { id, outcome } => self.response_in(id, outcome),
        }
    }

    fn parse_error(&mut self, why: String) {
        let error = ErrorObject::new(PARSE_ERROR, format!("parse error: {why}"));
        self.write_error(None, &error);
        self.events
            .push_back(ServerEvent::Diagnostic(format!("unreadable line: {why}")));
    }

    fn request_in(&mut self, id: RequestId, method: &str, params: Option<&RawValue>) {
        let refuse = |code: i64, message: String| Some(ErrorObject::new(code, message));
        let is = |m: MethodId| method == m.name();
        // A duplicate first: whatever else is wrong with it, its answer
        // carries an id that is open, and says so.
        if self.open.contains_key(&id) {
            let error = ErrorObject::new(
                INVALID_REQUEST,
                format!("request id {id} is already in use"),
            );
            return self.write_error(Some(&id), &error);
        }
        let modern = match request_era(method, params, self.config.modern) {
            Ok(modern) => modern,
            Err(error) => return self.write_error(Some(&id), &error),
        };
        let refusal = if self.open.len() >= self.config.max_open_requests {
            let n = self.config.max_open_requests;
            refuse(-32000, format!("too many requests in flight (at most {n})"))
        } else if let Some(client_capabilities) = modern {
            self.open
                .insert(id.clone(), (Era::Modern, MethodId::of(method)));
            let event = if is(MethodId::Discover) {
                ServerEvent::Discover {
                    id,
                    client_capabilities,
                }
            } else {
                ServerEvent::Request {
                    id,
                    method: method.to_owned(),
                    params: params.map(RawValue::to_owned),
                    era: Era::Modern,
                }
            };
            return self.events.push_back(event);
        } else if is(MethodId::Ping) {
            // Any time, answered here.
            return self.write_result(&id, &serde_json::json!({}));
        } else if is(MethodId::Initialize) {
            match &self.phase {
                Phase::New => None,
                _ => refuse(INVALID_REQUEST, "initialize was sent already".into()),
            }
        } else if self.phase == Phase::New {
            if is(MethodId::Discover) {
                // The 2026-07-28 probe: this session speaks the handshake.
                refuse(METHOD_NOT_FOUND, format!("method not found: {method}"))
            } else {
                refuse(
                    INVALID_REQUEST,
                    format!("{method} before the initialize handshake"),
                )
            }
        } else {
            None
        };
        if let Some(error) = refusal {
            return self.write_error(Some(&id), &error);
        }
        self.open.insert(id.clone(), (Era::Legacy, None));
        if is(MethodId::Initialize) {
            let params: Value = params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or(Value::Null);
            let requested = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            self.phase = Phase::Initializing {
                id: id.clone(),
                requested,
            };
            return self
                .events
                .push_back(ServerEvent::Initialize { id, params });
        }
        self.events.push_back(ServerEvent::Request {
            id,
            method: method.to_owned(),
            params: params.map(RawValue::to_owned),
            era: Era::Legacy,
        });
    }

    fn notification_in(&mut self, method: &str, params: Option<&RawValue>) {
        if method == notifications::INITIALIZED {
            return self.events.push_back(ServerEvent::Initialized);
        }
        if method == notifications::CANCELLED {
            #[derive(serde::Deserialize)]
            struct Cancel {
                #[serde(rename = "requestId")]
                id: RequestId,
                #[serde(default)]
                reason: Option<String>,
            }
            let cancel = params.and_then(|p| serde_json::from_str::<Cancel>(p.get()).ok());
            if let Some(Cancel { id, reason }) = cancel {
                if self.open.remove(&id).is_some() {
                    return self.events.push_back(ServerEvent::Cancelled { id, reason });
                }
            }
            // Of a request answered already (the race the spec allows),
            // or malformed: nothing to stop.
            return;
        }
        self.events.push_back(ServerEvent::Notification {
            method: method.to_owned(),
            params: params.map(RawValue::to_owned),
        });
    }

    fn response_in(&mut self, id: RequestId, outcome: Result<&RawValue, ErrorObject>) {
        let ours = match id {
            RequestId::Number(n) => u64::try_from(n).ok().filter(|n| self.own.contains(n)),
            RequestId::String(_) => None,
        };
        let Some(id) = ours else {
            let why = format!("a response to {id}, which is no open request of ours; dropped");
            return self.events.push_back(ServerEvent::Diagnostic(why));
        };
        self.own.remove(&id);
        let outcome = outcome.map(RawValue::to_owned);
        self.events.push_back(ServerEvent::Response { id, outcome });
    }

    // ----- the application's calls ------------------------------------------

    /// Answers `initialize` with the server's `result` object
    /// (`capabilities`, `serverInfo`, `instructions`…); its
    /// `protocolVersion` is set to the negotiated one (see
    /// [`ServerSession::negotiate`]), which is returned.
    pub fn accept(&mut self, id: &RequestId, mut result: Value) -> Result<String, ServeError> {
        let requested = match &self.phase {
            Phase::Initializing {
                id: open,
                requested,
            } if open == id => requested.clone(),
            _ => return Err(ServeError::NotOpen(id.clone())),
        };
        let version = Self::negotiate(&requested).to_owned();
        if let Value::Object(map) = &mut result {
            map.insert("protocolVersion".into(), Value::String(version.clone()));
        }
        let raw = serde_json::value::to_raw_value(&result)
            .map_err(|e| ServeError::Serialize(e.to_string()))?;
        self.respond(id.clone(), Ok(raw))?;
        Ok(version)
    }

    /// Answers the client's request `id` (once: a second answer, or one to
    /// a cancelled request, is refused and nothing is sent).
    pub fn respond(
        &mut self,
        id: RequestId,
        outcome: Result<Box<RawValue>, ErrorObject>,
    ) -> Result<(), ServeError> {
        if self.closed {
            return Err(ServeError::Closed);
        }
        let Some((era, method)) = self.open.remove(&id) else {
            return Err(ServeError::NotOpen(id));
        };
        if let Phase::Initializing { id: init, .. } = &self.phase {
            if *init == id {
                self.phase = match &outcome {
                    Ok(raw) => Phase::Ready {
                        version: serde_json::from_str::<Value>(raw.get())
                            .ok()
                            .and_then(|v| Some(v.get("protocolVersion")?.as_str()?.to_owned()))
                            .unwrap_or_default(),
                    },
                    // Refused: the client may try again.
                    Err(_) => Phase::New,
                };
            }
        }
        match outcome {
            Ok(raw) if era == Era::Modern => self.write_result(&id, &modern_result(raw, method)),
            Ok(raw) => self.write_result(&id, &raw),
            Err(error) => self.write_error(Some(&id), &error),
        }
        Ok(())
    }

    /// Sends a request to the client (`roots/list`, `sampling/…`,
    /// `elicitation/create`, `ping`); its answer comes as
    /// [`ServerEvent::Response`] with the id returned.
    pub fn request(&mut self, method: &str, params: Option<&RawValue>) -> Result<u64, ServeError> {
        if self.closed {
            return Err(ServeError::Closed);
        }
        if self.own.len() >= self.config.max_own_requests {
            return Err(ServeError::TooManyRequests(self.own.len()));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.own.insert(id);
        #[derive(Serialize)]
        struct Request<'a> {
            jsonrpc: &'static str,
            id: u64,
            method: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            params: Option<&'a RawValue>,
        }
        self.write(&Request {
            jsonrpc: "2.0",
            id,
            method,
            params,
        });
        Ok(id)
    }

    /// Withdraws our request `id` ([`ServerSession::request`]): the client
    /// is told with `notifications/cancelled` (and `reason`), and a late
    /// answer is dropped.
    pub fn withdraw(&mut self, id: u64, reason: Option<&str>) -> Result<(), ServeError> {
        if self.closed {
            return Err(ServeError::Closed);
        }
        if !self.own.remove(&id) {
            let id = i64::try_from(id)
                .map_or_else(|_| RequestId::String(id.to_string()), RequestId::Number);
            return Err(ServeError::NotOpen(id));
        }
        let mut params = serde_json::json!({ "requestId": id });
        if let Some(reason) = reason {
            params["reason"] = Value::from(reason);
        }
        let params = serde_json::value::to_raw_value(&params)
            .map_err(|e| ServeError::Serialize(e.to_string()))?;
        self.notify(notifications::CANCELLED, Some(&params))
    }

    /// Sends a notification to the client.
    pub fn notify(&mut self, method: &str, params: Option<&RawValue>) -> Result<(), ServeError> {
        if self.closed {
            return Err(ServeError::Closed);
        }
        #[derive(Serialize)]
        struct Notification<'a> {
            jsonrpc: &'static str,
            method: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            params: Option<&'a RawValue>,
        }
        self.write(&Notification {
            jsonrpc: "2.0",
            method,
            params,
        });
        Ok(())
    }

    // ----- output -----------------------------------------------------------

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// The next line to write to the client (with its `\n`), if any.
    pub fn poll_write(&mut self) -> Option<Vec<u8>> {
        self.lines.pop_front()
    }

    /// The client's requests not answered yet.
    pub fn open_requests(&self) -> usize {
        self.open.len()
    }

    fn write_result(&mut self, id: &RequestId, result: &(impl Serialize + ?Sized)) {
        #[derive(Serialize)]
        struct Response<'a, R: ?Sized> {
            jsonrpc: &'static str,
            id: &'a RequestId,
            result: &'a R,
        }
        self.write(&Response {
            jsonrpc: "2.0",
            id,
            result,
        });
    }

    /// An error response; `id` `None` is JSON-RPC's `null` (the id could
    /// not be read).
    fn write_error(&mut self, id: Option<&RequestId>, error: &ErrorObject) {
        #[derive(Serialize)]
        struct Response<'a> {
            jsonrpc: &'static str,
            id: Option<&'a RequestId>,
            error: &'a ErrorObject,
        }
        self.write(&Response {
            jsonrpc: "2.0",
            id,
            error,
        });
    }

    fn write(&mut self, message: &impl Serialize) {
        let mut line = Vec::new();
        match jsonl::encode(message, &mut line) {
            Ok(()) => self.lines.push_back(line),
            Err(e) => self
                .events
                .push_back(ServerEvent::Diagnostic(format!("not sent: {e}"))),
        }
    }
}
