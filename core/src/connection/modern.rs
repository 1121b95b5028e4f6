//! The 2026-07-28 era inside a [`Connection`]: the `server/discover` probe
//! and its verdict, the per-request `_meta` envelope, multi-round-trip
//! input (`input_required` results answered through the same
//! [`Output::ServerRequest`] / [`Connection::respond`] as the old era's
//! server requests, then retried with `inputResponses` and the echoed
//! `requestState`), and `subscriptions/listen` in place of the GET stream.
//!
//! ```text
//!  new ─► server/discover (probe) ─ DiscoverResult ─────────────► Ready (modern)
//!              │ -32022 naming a version we speak ─► probe again (once)
//!              └ any other error, a 4xx, a timeout ─► initialize (legacy) ─┐
//!                                     initialize answered -32022 ─► probe again (once)
//!
//!  call (tools/call, prompts/get, resources/read) ─► result
//!     resultType "input_required" ─► ServerRequest per input ─► respond … ─► retry (new id) ─► …
//! ```
//!
//! The application keeps one id per call: the first request's. Retries get
//! new JSON-RPC ids (the spec requires it) that map back to it.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{CallError, CloseReason, Connection, Diagnostic, Output, Phase, Wire};
use crate::mcp::handshake::SUPPORTED_PROTOCOL_VERSIONS;
use crate::mcp::types::{Implementation, InitializeResult};
use crate::modern::headers::name_source;
use crate::modern::probe::{stdio_probe_verdict, Era, EraPolicy, ProbeVerdict, StdioProbeOutcome};
use crate::modern::{
    classify, message_headers, retry_params, with_meta, InputRequest, InputRequired, RequestMeta,
    ResultKind, ToolHeaders, DISCOVER_METHOD, MODERN_PROTOCOL_VERSION,
    SUBSCRIPTIONS_ACKNOWLEDGED_NOTIFICATION, SUBSCRIPTIONS_LISTEN_METHOD,
    SUPPORTED_MODERN_VERSIONS,
};
use crate::rpc::{
    ErrorObject, LocalError, RequestError, RequestId, RequestOptions, RespondStatus, SendKind,
};

/// The params of a message as a value, when its era headers read them
/// (`Mcp-Name` and `Mcp-Param-*`).
pub(super) fn header_params(method: &str, params: Option<&RawValue>) -> Option<Value> {
    name_source(method)?;
    serde_json::from_str(params?.get()).ok()
}

/// Rounds of `input_required` one call may go through before it fails.
const MAX_INPUT_ROUNDS: u32 = 16;
/// Times `subscriptions/listen` is opened again in a row after it ended
/// (1 s, 2 s, 4 s… apart) before the connection goes without it.
const MAX_LISTEN_REOPENS: u32 = 5;

/// The probe in flight.
#[derive(Debug, Clone)]
pub(super) struct Probe {
    pub(super) id: u64,
    retried: bool,
}

/// A call that may meet `input_required`.
#[derive(Debug)]
struct Call {
    method: String,
    /// The params as the application gave them (no envelope).
    params: Value,
    options: RequestOptions,
    rounds: u32,
    /// The JSON-RPC request in flight, if any (none while inputs are
    /// being answered).
    engine_id: Option<u64>,
    asked: Option<InputRequired>,
    responses: Map<String, Value>,
    awaiting: BTreeSet<String>,
}

/// The connection's 2026-07-28 state.
#[derive(Debug)]
pub(super) struct Modern {
    version: String,
    meta: RequestMeta,
    /// By the application's id (the first request's).
    calls: HashMap<u64, Call>,
    /// Retry request id → the application's id.
    alias: HashMap<u64, u64>,
    /// Input requests surfaced as server requests → (call, key).
    inputs: HashMap<RequestId, (u64, String)>,
    pub(super) listen_id: Option<u64>,
    /// `tools/list` requests in flight (HTTP: their tools' `x-mcp-header`
    /// annotations are read, invalid tools left out).
    tool_lists: BTreeSet<u64>,
    /// When to open `subscriptions/listen` again, and the reopens so far.
    pub(super) listen_retry: Option<Instant>,
    listen_reopens: u32,
    /// Each tool's `x-mcp-header` annotations (HTTP), from `tools/list`.
    tools: ToolHeaders,
}

/// The era headers (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) of the
/// messages built while the HTTP transport speaks the 2026-07-28 era, from
/// the moment each is built until the engine's `Send` of it reaches the
/// transport (within the same call).
#[derive(Debug, Default)]
pub(super) struct EraHeaders {
    /// By request id.
    requests: HashMap<u64, Vec<(String, String)>>,
    /// The notification being sent.
    notification: Option<Vec<(String, String)>>,
}

impl EraHeaders {
    /// The headers of the message the engine queued as `kind`, for a
    /// transport that speaks the era (`in_era`) or not. The engine builds
    /// one notification itself, `notifications/cancelled`: in the era, a
    /// notification the connection did not note is that one.
    pub(super) fn take(&mut self, kind: &SendKind, in_era: bool) -> Vec<(String, String)> {
        let noted = match kind {
            SendKind::Request { id } => self.requests.remove(id),
            SendKind::Notification => self.notification.take(),
            SendKind::Response { .. } => None,
        };
        match noted {
            Some(headers) => headers,
            None if in_era && *kind == SendKind::Notification => {
                message_headers(CANCELLED_NOTIFICATION, None, &ToolHeaders::default())
            }
            None => Vec::new(),
        }
    }
}

/// The notification the engine builds when a request is cancelled or
/// times out.
const CANCELLED_NOTIFICATION: &str = "notifications/cancelled";

impl Connection {
    /// The era spoken, once known.
    pub fn era(&self) -> Option<Era> {
        if self.modern.is_some() {
            Some(Era::Modern)
        } else if self.server.is_some() {
            Some(Era::Legacy)
        } else {
            None
        }
    }

    pub(super) fn start(&mut self, now: Instant) {
        let legacy_first = matches!(self.wire, Wire::Legacy(_))
            || self.era_policy == EraPolicy::Legacy
            || (self.era_policy == EraPolicy::Auto && self.era_hint == Some(Era::Legacy));
        if legacy_first {
            self.start_handshake(now, false);
        } else {
            self.start_probe(now, MODERN_PROTOCOL_VERSION, false);
        }
    }

    /// In the era over HTTP, notes the era headers of request `id` just built from
    /// `method` and `params`.
    pub(super) fn built_request(&mut self, id: u64, method: &str, params: Option<&Value>) {
        if let Some(h) = self.era_headers_of(method, params) {
            self.era_headers.requests.insert(id, h);
        }
    }

    /// Has the engine build notification `method`, noting its era headers
    /// in the era over HTTP.
    pub(super) fn notify_engine(
        &mut self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), LocalError> {
        let value = header_params(method, params);
        self.era_headers.notification = self.era_headers_of(method, value.as_ref());
        let sent = self.engine.notify(method, params);
        if sent.is_err() {
            self.era_headers.notification = None;
        }
        sent
    }

    fn era_headers_of(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Vec<(String, String)>> {
        // The era begins with the probe, before any other message is
        // built; a message posted after it ended goes without them.
        if !matches!(&self.wire, Wire::Http(h) if h.modern_version().is_some()) {
            return None;
        }
        let none = ToolHeaders::default();
        let tools = self.modern.as_ref().map_or(&none, |m| &m.tools);
        Some(message_headers(method, params, tools))
    }

    fn envelope(&self, version: &str) -> RequestMeta {
        RequestMeta::new(
            version,
            self.client.capabilities.clone(),
            Some(self.client.client_info.clone()),
        )
    }

    pub(super) fn start_probe(&mut self, now: Instant, version: &str, retried: bool) {
        self.probes += 1;
        let params = with_meta(None, &self.envelope(version)).unwrap_or_default();
        let raw = serde_json::value::to_raw_value(&params).expect("JSON serializes");
        if let Wire::Http(h) = &mut self.wire {
            h.begin_modern(version);
        }
        let default = self.engine.config().default_timeout;
        let timeout = match self.era_policy {
            EraPolicy::Modern => default,
            _ => self.probe_timeout.min(default),
        };
        let options = RequestOptions::default().timeout(timeout);
        match self
            .engine
            .request(now, DISCOVER_METHOD, Some(&raw), options)
        {
            Ok(id) => {
                self.built_request(id, DISCOVER_METHOD, Some(&params));
                self.phase = Phase::Probing { id };
                self.probe = Some(Probe { id, retried });
            }
            Err(e) => self.shut_down(now, CloseReason::Handshake(format!("server/discover: {e}"))),
        }
    }

    /// The probe's answer decides the era.
    pub(super) fn on_probe(&mut self, now: Instant, outcome: Result<Box<RawValue>, RequestError>) {
        let Some(probe) = self.probe.take() else {
            return;
        };
        let legacy_versions = SUPPORTED_PROTOCOL_VERSIONS;
        let verdict = match &outcome {
            Ok(raw) => stdio_probe_verdict(
                StdioProbeOutcome::Result(raw.get()),
                SUPPORTED_MODERN_VERSIONS,
                legacy_versions,
                !probe.retried,
            ),
            Err(RequestError::Remote(e)) => stdio_probe_verdict(
                StdioProbeOutcome::Error {
                    code: e.code,
                    message: &e.message,
                    data: e.data.as_deref().map(RawValue::get),
                },
                SUPPORTED_MODERN_VERSIONS,
                legacy_versions,
                !probe.retried,
            ),
            Err(RequestError::Timeout { .. }) => ProbeVerdict::Legacy,
            // An HTTP error status whose body is not a modern JSON-RPC
            // error (those arrive as `Remote`): a legacy server.
            Err(RequestError::Http { .. }) => ProbeVerdict::Legacy,
            Err(e) => {
                let reason = e.to_string();
                return self.shut_down(now, CloseReason::Transport(reason));
            }
        };
        match verdict {
            ProbeVerdict::Modern {
                version,
                discovered,
            } => {
                let d = discovered.map(|d| *d);
                let server_info = d
                    .as_ref()
                    .and_then(|d| d.server_info())
                    .unwrap_or_else(|| Implementation::new("unknown", ""));
                let meta = self.envelope(&version);
                self.server = Some(InitializeResult {
                    protocol_version: version.clone(),
                    capabilities: d
                        .as_ref()
                        .map(|d| d.capabilities.clone())
                        .unwrap_or_default(),
                    server_info,
                    instructions: d.and_then(|d| d.instructions),
                    extra: Default::default(),
                });
                self.modern = Some(Modern {
                    version,
                    meta,
                    calls: HashMap::new(),
                    alias: HashMap::new(),
                    inputs: HashMap::new(),
                    listen_id: None,
                    tool_lists: BTreeSet::new(),
                    listen_retry: None,
                    listen_reopens: 0,
                    tools: ToolHeaders::default(),
                });
                self.phase = Phase::Ready;
                self.ready_pending = true;
                self.open_listen(now);
            }
            ProbeVerdict::RetryModern { version } => self.start_probe(now, &version, true),
            ProbeVerdict::Legacy if self.era_policy == EraPolicy::Modern => {
                let why = match outcome {
                    Err(e) => e.to_string(),
                    Ok(_) => "no 2026-07-28 in its supported versions".into(),
                };
                self.shut_down(
                    now,
                    CloseReason::Handshake(format!(
                        "the server does not speak the 2026-07-28 protocol (server/discover: {why})"
                    )),
                );
            }
            ProbeVerdict::Legacy => {
                if let Wire::Http(h) = &mut self.wire {
                    h.end_modern();
                }
                self.start_handshake(now, false);
            }
            ProbeVerdict::Incompatible(m) => self.shut_down(now, CloseReason::Handshake(m)),
        }
    }

    /// `initialize` failed: a server that locked itself to 2026-07-28 (its
    /// -32022), or one remembered as legacy that no longer is, gets one
    /// probe.
    pub(super) fn reprobe_after(&mut self, now: Instant, error: &RequestError) -> bool {
        if self.era_policy != EraPolicy::Auto || self.probes >= 2 {
            return false;
        }
        let modern_evidence = matches!(error, RequestError::Remote(e)
            if e.code == crate::modern::UNSUPPORTED_PROTOCOL_VERSION);
        let hinted = self.era_hint == Some(Era::Legacy)
            && matches!(error, RequestError::Remote(_) | RequestError::Http { .. });
        if !(modern_evidence || hinted) || matches!(self.wire, Wire::Legacy(_)) {
            return false;
        }
        self.start_probe(now, MODERN_PROTOCOL_VERSION, false);
        true
    }

    /// Opens `subscriptions/listen` again when its retry is due.
    pub(super) fn modern_timeout(&mut self, now: Instant) {
        let due = self
            .modern
            .as_ref()
            .and_then(|m| m.listen_retry)
            .is_some_and(|t| t <= now);
        if due && self.phase == Phase::Ready {
            if let Some(m) = self.modern.as_mut() {
                m.listen_retry = None;
            }
            self.open_listen(now);
        }
    }

    /// `subscriptions/listen` for the list changes the server announces.
    fn open_listen(&mut self, now: Instant) {
        let Some(server) = &self.server else { return };
        let caps = &server.capabilities;
        let mut wanted = Map::new();
        if caps.tools.as_ref().and_then(|c| c.list_changed) == Some(true) {
            wanted.insert("toolsListChanged".into(), Value::Bool(true));
        }
        if caps.prompts.as_ref().and_then(|c| c.list_changed) == Some(true) {
            wanted.insert("promptsListChanged".into(), Value::Bool(true));
        }
        if caps.resources.as_ref().and_then(|c| c.list_changed) == Some(true) {
            wanted.insert("resourcesListChanged".into(), Value::Bool(true));
        }
        if wanted.is_empty() || !self.listen_enabled {
            return;
        }
        let Some(m) = &self.modern else { return };
        let params = serde_json::json!({ "notifications": wanted });
        let Ok(params) = with_meta(Some(params), &m.meta) else {
            return;
        };
        let raw = serde_json::value::to_raw_value(&params).expect("JSON serializes");
        // A subscription lasts as long as the connection: no deadline.
        let options = RequestOptions::default().timeout(Duration::MAX);
        match self
            .engine
            .request(now, SUBSCRIPTIONS_LISTEN_METHOD, Some(&raw), options)
        {
            Ok(id) => {
                self.built_request(id, SUBSCRIPTIONS_LISTEN_METHOD, Some(&params));
                if let Some(m) = self.modern.as_mut() {
                    m.listen_id = Some(id);
                }
            }
            Err(e) => self
                .out
                .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "subscriptions/listen not sent: {e}"
                )))),
        }
    }

    /// Whether `method` is the subscription's acknowledgement (not for the
    /// application).
    pub(super) fn is_internal_notification(&self, method: &str) -> bool {
        self.modern.is_some() && method == SUBSCRIPTIONS_ACKNOWLEDGED_NOTIFICATION
    }

    /// The subscription is (again) in place: its reopens start over.
    pub(super) fn subscription_acknowledged(&mut self) {
        if let Some(m) = self.modern.as_mut() {
            m.listen_reopens = 0;
        }
    }

    /// A request of the application in the 2026-07-28 era: stamped with
    /// the envelope; `ping` (removed) becomes `server/discover`.
    pub(super) fn modern_request(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        if self.modern.is_none() {
            return Err(CallError::NotReady);
        }
        // `logging/setLevel` is gone too: the level rides on every later
        // request's `_meta` (without it a server sends no log messages);
        // the call itself is carried by a discover.
        if method == "logging/setLevel" {
            let level = params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                .and_then(|v| v.get("level").and_then(Value::as_str).map(str::to_owned))
                .ok_or(LocalError::InvalidParams("logging/setLevel needs a level"))?;
            if let Some(m) = self.modern.as_mut() {
                m.meta.log_level = Some(level);
            }
            return self.modern_request(now, DISCOVER_METHOD, None, options);
        }
        let m = self.modern.as_ref().expect("checked");
        let method = if method == "ping" {
            DISCOVER_METHOD
        } else {
            method
        };
        let value = match params {
            None => None,
            Some(p) => Some(
                serde_json::from_str::<Value>(p.get())
                    .map_err(|_| LocalError::InvalidParams("params are not JSON"))?,
            ),
        };
        let stamped = with_meta(value.clone(), &m.meta).map_err(|_| {
            LocalError::InvalidParams("params must be a JSON object in the 2026-07-28 protocol")
        })?;
        let raw = serde_json::value::to_raw_value(&stamped)
            .map_err(|_| LocalError::InvalidParams("params do not serialize"))?;
        let id = self.engine.request(now, method, Some(&raw), options)?;
        self.built_request(id, method, Some(&stamped));
        if method == "tools/list" && matches!(self.wire, Wire::Http(_)) {
            if let Some(m) = self.modern.as_mut() {
                m.tool_lists.insert(id);
            }
        }
        if crate::modern::mrtr::INPUT_REQUIRED_METHODS.contains(&method) {
            let m = self.modern.as_mut().expect("checked");
            m.calls.insert(
                id,
                Call {
                    method: method.to_owned(),
                    params: value.unwrap_or(Value::Null),
                    options,
                    rounds: 0,
                    engine_id: Some(id),
                    asked: None,
                    responses: Map::new(),
                    awaiting: BTreeSet::new(),
                },
            );
        }
        self.pump(now);
        Ok(id)
    }

    /// The application's id of engine request `id`.
    pub(super) fn app_id(&self, id: u64) -> u64 {
        self.modern
            .as_ref()
            .and_then(|m| m.alias.get(&id).copied())
            .unwrap_or(id)
    }

    /// An engine completion in the 2026-07-28 era: the listen request's
    /// end, an `input_required` round, or a result for the application
    /// (returned, under the application's id).
    pub(super) fn modern_complete(
        &mut self,
        now: Instant,
        id: u64,
        outcome: Result<Box<RawValue>, RequestError>,
    ) -> Option<(u64, Result<Box<RawValue>, RequestError>)> {
        if self.modern.as_mut()?.tool_lists.remove(&id) {
            let outcome = match outcome {
                Ok(raw) => Ok(self.tool_list_headers(raw)),
                e => e,
            };
            return Some((id, outcome));
        }
        let m = self.modern.as_mut()?;
        if m.listen_id == Some(id) {
            m.listen_id = None;
            if matches!(outcome, Err(RequestError::Closed { .. })) {
                return None;
            }
            // The server ended the subscription (or it broke): open it
            // again after a backoff, a bounded number of times in a row.
            let why = match &outcome {
                Ok(_) => "the server ended it".to_owned(),
                Err(e) => e.to_string(),
            };
            let note = if m.listen_reopens < MAX_LISTEN_REOPENS {
                let delay = Duration::from_secs(1 << m.listen_reopens);
                m.listen_reopens += 1;
                m.listen_retry = now.checked_add(delay);
                format!("subscriptions/listen ended ({why}); opening it again in {delay:?}")
            } else {
                format!(
                    "subscriptions/listen ended ({why}) {MAX_LISTEN_REOPENS} times in a row; \
                     going on without list-change notifications"
                )
            };
            self.out
                .push_back(Output::Diagnostic(Diagnostic::Transport(note)));
            return None;
        }
        let app = m.alias.remove(&id).unwrap_or(id);
        let Some(call) = m.calls.get_mut(&app) else {
            return Some((app, outcome));
        };
        call.engine_id = None;
        let raw = match outcome {
            Ok(raw) => raw,
            Err(e) => {
                m.calls.remove(&app);
                return Some((app, Err(e)));
            }
        };
        let Ok(value) = serde_json::from_str::<Value>(raw.get()) else {
            m.calls.remove(&app);
            return Some((app, Ok(raw)));
        };
        let fail = |message: String| Some((app, Err(RequestError::Transport { message })));
        match classify(&call.method, &value) {
            Ok(ResultKind::Complete) => {
                m.calls.remove(&app);
                Some((app, Ok(raw)))
            }
            Ok(ResultKind::Unknown(t)) => {
                m.calls.remove(&app);
                fail(format!(
                    "the server answered with an unknown resultType {t:?}"
                ))
            }
            Err(e) => {
                m.calls.remove(&app);
                fail(format!("invalid input_required result: {e}"))
            }
            Ok(ResultKind::InputRequired(asked)) => {
                call.rounds += 1;
                if call.rounds > MAX_INPUT_ROUNDS {
                    m.calls.remove(&app);
                    return fail(format!(
                        "the server asked for input {MAX_INPUT_ROUNDS} times in a row; giving up"
                    ));
                }
                let handled = self.client.handled_requests();
                if let Some((key, r)) = asked
                    .input_requests
                    .iter()
                    .find(|(_, r)| !handled.contains(&r.method()))
                {
                    let message = format!(
                        "the server asked for {} (input {key:?}), which this client did not declare",
                        r.method()
                    );
                    m.calls.remove(&app);
                    return fail(message);
                }
                let round = call.rounds;
                call.responses = Map::new();
                call.awaiting = asked.input_requests.keys().cloned().collect();
                let requests: Vec<(String, InputRequest)> = asked
                    .input_requests
                    .iter()
                    .map(|(k, r)| (k.clone(), r.clone()))
                    .collect();
                call.asked = Some(asked);
                if requests.is_empty() {
                    self.retry(now, app);
                    return None;
                }
                for (key, r) in requests {
                    let rid = RequestId::String(format!("input-{app}-{round}-{key}"));
                    let params = match &r {
                        InputRequest::Elicitation { params }
                        | InputRequest::Sampling { params } => {
                            serde_json::value::to_raw_value(params).ok()
                        }
                        InputRequest::Other {
                            params: Some(params),
                            ..
                        } => serde_json::value::to_raw_value(params).ok(),
                        _ => None,
                    };
                    m.inputs.insert(rid.clone(), (app, key));
                    self.out.push_back(Output::ServerRequest {
                        id: rid,
                        method: r.method().to_owned(),
                        params,
                    });
                }
                None
            }
        }
    }

    /// A `tools/list` page over HTTP: records each tool's `x-mcp-header`
    /// annotations in the transport and leaves out the tools whose
    /// annotations are invalid (the spec says they MUST be excluded).
    fn tool_list_headers(&mut self, raw: Box<RawValue>) -> Box<RawValue> {
        let (Wire::Http(_), Some(m)) = (&self.wire, self.modern.as_mut()) else {
            return raw;
        };
        let Ok(mut page) = serde_json::from_str::<Value>(raw.get()) else {
            return raw;
        };
        let Some(tools) = page.get_mut("tools").and_then(Value::as_array_mut) else {
            return raw;
        };
        let before = tools.len();
        let mut dropped = Vec::new();
        tools.retain(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            let schema = t.get("inputSchema").unwrap_or(&Value::Null);
            match crate::modern::param_headers(schema) {
                Ok(specs) => {
                    m.tools.record(name, specs);
                    true
                }
                Err(e) => {
                    dropped.push(format!("{name:?}: {e}"));
                    false
                }
            }
        });
        if tools.len() == before {
            return raw;
        }
        for d in dropped {
            self.out
                .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "tool {d} (invalid x-mcp-header annotation): left out of tools/list"
                ))));
        }
        serde_json::value::to_raw_value(&page).unwrap_or(raw)
    }

    /// An answer to an input request, if `id` is one; `None` otherwise.
    pub(super) fn modern_respond(
        &mut self,
        now: Instant,
        id: &RequestId,
        response: &Result<Box<RawValue>, ErrorObject>,
    ) -> Option<RespondStatus> {
        let m = self.modern.as_mut()?;
        let Some((app, key)) = m.inputs.remove(id) else {
            // One of ours, withdrawn (its call was cancelled or ended).
            return matches!(id, RequestId::String(s) if s.starts_with("input-"))
                .then_some(RespondStatus::Withdrawn);
        };
        let Some(call) = m.calls.get_mut(&app) else {
            return Some(RespondStatus::Withdrawn);
        };
        match response {
            Ok(raw) => {
                let v = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                call.responses.insert(key.clone(), v);
                call.awaiting.remove(&key);
                if call.awaiting.is_empty() {
                    self.retry(now, app);
                }
            }
            Err(e) => {
                let message = format!(
                    "the application could not answer the server's input {key:?}: {}",
                    e.message
                );
                self.end_call(
                    app,
                    Err(RequestError::Transport { message }),
                    "answer failed",
                );
            }
        }
        self.pump(now);
        Some(RespondStatus::Sent)
    }

    /// Sends call `app` again with the inputs and the echoed state.
    fn retry(&mut self, now: Instant, app: u64) {
        let Some(m) = self.modern.as_mut() else {
            return;
        };
        let Some(call) = m.calls.get_mut(&app) else {
            return;
        };
        let asked = call.asked.take().unwrap_or(InputRequired {
            input_requests: Default::default(),
            request_state: None,
        });
        let responses = std::mem::take(&mut call.responses);
        let params = retry_params(&call.params, &asked, responses)
            .map_err(|e| e.to_string())
            .and_then(|p| with_meta(Some(p), &m.meta).map_err(|e| e.to_string()));
        let method = call.method.clone();
        let options = call.options;
        let sent = params.and_then(|params| {
            let raw = serde_json::value::to_raw_value(&params).map_err(|e| e.to_string())?;
            let id = self
                .engine
                .request(now, &method, Some(&raw), options)
                .map_err(|e| e.to_string())?;
            Ok((id, params))
        });
        if let Ok((id, params)) = &sent {
            self.built_request(*id, &method, Some(params));
        }
        let m = self.modern.as_mut().expect("checked");
        match sent.map(|(id, _)| id) {
            Ok(id) => {
                m.alias.insert(id, app);
                if let Some(call) = m.calls.get_mut(&app) {
                    call.engine_id = Some(id);
                }
            }
            Err(e) => {
                let message = format!("could not send the call again with its inputs: {e}");
                self.end_call(app, Err(RequestError::Transport { message }), "failed");
            }
        }
    }

    /// Ends call `app` that has no request in flight: withdraws its open
    /// input requests and completes it.
    fn end_call(&mut self, app: u64, outcome: Result<Box<RawValue>, RequestError>, why: &str) {
        let Some(m) = self.modern.as_mut() else {
            return;
        };
        m.calls.remove(&app);
        let open: Vec<RequestId> = m
            .inputs
            .iter()
            .filter(|(_, (a, _))| *a == app)
            .map(|(id, _)| id.clone())
            .collect();
        for id in open {
            m.inputs.remove(&id);
            self.out.push_back(Output::ServerRequestCancelled {
                id,
                reason: Some(why.to_owned()),
            });
        }
        self.out.push_back(Output::Complete { id: app, outcome });
    }

    /// Cancels call `app` in the 2026-07-28 era; `None` when it is not a
    /// tracked call (the engine handles it).
    pub(super) fn modern_cancel(&mut self, now: Instant, app: u64, reason: &str) -> Option<bool> {
        let m = self.modern.as_mut()?;
        let call = m.calls.get(&app)?;
        match call.engine_id {
            Some(e) => Some(self.engine.cancel(now, e, reason)),
            None => {
                let error = RequestError::Cancelled {
                    reason: reason.to_owned(),
                };
                self.end_call(app, Err(error), reason);
                Some(true)
            }
        }
    }

    /// The connection is closing: calls waiting for inputs complete too.
    pub(super) fn modern_close(&mut self, reason: &str) {
        let Some(m) = self.modern.as_mut() else {
            return;
        };
        let waiting: Vec<u64> = m
            .calls
            .iter()
            .filter(|(_, c)| c.engine_id.is_none())
            .map(|(id, _)| *id)
            .collect();
        for app in waiting {
            let error = RequestError::Closed {
                reason: reason.to_owned(),
            };
            self.end_call(app, Err(error), reason);
        }
    }

    /// The version spoken in the 2026-07-28 era.
    pub fn modern_version(&self) -> Option<&str> {
        self.modern.as_ref().map(|m| m.version.as_str())
    }
}
