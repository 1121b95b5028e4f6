//! The 2026-07-28 era's sub-state of a connection, once the probe found
//! it: the per-request `_meta` envelope, multi-round-trip input
//! (`input_required` results answered through the same
//! [`Output::ServerRequest`] / `Connection::respond` as the old era's
//! server requests, then retried with `inputResponses` and the echoed
//! `requestState`), `subscriptions/listen` in place of the GET stream, and
//! the tools' `x-mcp-header` annotations.
//!
//! ```text
//!  call (tools/call, prompts/get, resources/read) ─► result
//!     resultType "input_required" ─► ServerRequest per input ─► respond … ─► retry (new id) ─► …
//!  any call ─► its response stream ends before the response (HTTP) ─► backoff ─► the same
//!     request again (new id), at most MAX_REISSUES times ─► … ─► the error
//!  resources/subscribe {uri} ─► uri joins the filter ─► subscriptions/listen opened again
//!     (the old one cancelled) ─► acknowledged with uri honoured ─► {} │ not honoured ─► error
//!  resources/unsubscribe {uri} ─► uri leaves the filter ─► listen opened again ─► {}
//! ```
//!
//! `resources/subscribe` and `resources/unsubscribe` do not exist in this
//! era: `subscriptions/listen` carries the resource URIs
//! (`resourceSubscriptions`) beside the list-change flags, so the
//! application's subscribe keeps working and `notifications/resources/updated`
//! reach the same notification stream as in the 2025-11-25 era.
//!
//! The application keeps one id per call: the first request's. Retries and
//! re-issues get new JSON-RPC ids (the spec requires it) that map back to
//! it ([`Modern::app_id`]): progress, cancellation and the completion keep
//! working across them. A re-issue keeps the call's deadline: it is sent
//! with the time that is left. Each method takes what it touches as an
//! [`Outbox`] and leaves the rest (pumping, phases) to the connection.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::inputs::Inputs;
use super::types::{CallError, Diagnostic, Output};
use super::wire::Wire;
use crate::mcp::methods::{notifications, MethodId};
use crate::mcp::types::ServerCapabilities;
use crate::mcp::ClientConfig;
use crate::modern::cache::ResultCache;
use crate::modern::{
    classify, param_headers, retry_params, with_meta, InputRequest, InputRequired, RequestMeta,
    ResultKind, ToolHeaders, DISCOVER_METHOD, SUBSCRIPTIONS_LISTEN_METHOD,
};
use crate::rpc::{
    Engine, ErrorObject, LocalError, RequestError, RequestId, RequestOptions, RespondStatus,
};

/// Rounds of `input_required` one call may go through before it fails.
const MAX_INPUT_ROUNDS: u32 = 16;
/// Times `subscriptions/listen` is opened again in a row after it ended
/// (1 s, 2 s, 4 s… apart) before the connection goes without it.
const MAX_LISTEN_REOPENS: u32 = 5;
/// Times one call is issued again after its response stream was lost
/// (2026-07-28 has no resumption: the spec says the client MUST issue it
/// again with a new id), [`REISSUE_BACKOFF`] · 2ⁿ apart.
pub(super) const MAX_REISSUES: u32 = 3;
/// The wait before the first re-issue.
pub(super) const REISSUE_BACKOFF: Duration = Duration::from_millis(100);
/// How long a subscribe waits for the server to acknowledge the stream
/// that carries it.
pub(super) const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a sub-state may touch while it handles one event: the engine (to
/// send and cancel), the wire (to note the era headers of what it builds)
/// and the outputs (to emit).
pub(super) struct Outbox<'a> {
    pub(super) engine: &'a mut Engine,
    pub(super) wire: &'a mut Wire,
    pub(super) out: &'a mut VecDeque<Output>,
}

type Outcome = Result<Box<RawValue>, RequestError>;

/// A call of the application: issued again when its stream is lost, and
/// (`tools/call`, `prompts/get`, `resources/read`) through its rounds of
/// `input_required`.
#[derive(Debug)]
struct Call {
    method: String,
    /// Its row of the method table, if the method is known.
    id: Option<MethodId>,
    /// Whether `input_required` applies to it.
    mrtr: bool,
    /// The params as the application gave them (no envelope).
    params: Value,
    /// The params of the request last sent (envelope included), for a
    /// re-issue.
    sent: Value,
    options: RequestOptions,
    /// When its time is up, if its options bound it.
    deadline: Option<Instant>,
    /// Re-issues after a lost stream so far.
    reissues: u32,
    rounds: u32,
    /// The JSON-RPC request in flight, if any (none while inputs are
    /// being answered).
    engine_id: Option<u64>,
    asked: Option<InputRequired>,
    responses: Map<String, Value>,
    awaiting: BTreeSet<String>,
}

/// The connection's 2026-07-28 state (see the [module docs](self)).
#[derive(Debug)]
pub(super) struct Modern {
    version: String,
    meta: RequestMeta,
    /// By the application's id (the first request's).
    calls: HashMap<u64, Call>,
    /// Retry request id → the application's id.
    alias: HashMap<u64, u64>,
    /// Input requests surfaced as server requests → (call, key).
    inputs: Inputs,
    listen_id: Option<u64>,
    /// `tools/list` requests in flight (HTTP: their tools' `x-mcp-header`
    /// annotations are read, invalid tools left out).
    tool_lists: BTreeSet<u64>,
    /// When to open `subscriptions/listen` again, and the reopens so far.
    listen_retry: Option<Instant>,
    listen_reopens: u32,
    /// Requests whose response stream was lost (engine ids): their
    /// failure is a reason to issue them again.
    lost: BTreeSet<u64>,
    /// Calls to issue again, and when.
    reissue_at: Vec<(Instant, u64)>,
    /// Results the server said may be cached.
    cache: ResultCache,
    /// The list-change flags of the listen filter (from the server's
    /// capabilities; empty when the connection's listening is off).
    listen_flags: Map<String, Value>,
    /// The resource URIs subscribed to (the filter's
    /// `resourceSubscriptions`).
    resource_subs: BTreeSet<String>,
    /// The tasks followed (the filter's `taskIds`: the tasks extension's
    /// status pushes).
    task_ids: BTreeSet<String>,
    /// A listen that asked for `taskIds` failed: ask no more (polling
    /// carries the tasks alone).
    no_task_push: bool,
    /// Listen requests replaced by a newer filter: their end is ours.
    replaced: BTreeSet<u64>,
    /// Subscribes waiting for the acknowledgement: (app id, uri, deadline).
    awaiting_ack: Vec<(u64, String, Instant)>,
    /// Each tool's `x-mcp-header` annotations (HTTP), from `tools/list`.
    tools: ToolHeaders,
    /// Calls ended here (not by an engine completion), for the connection
    /// to route like one ([`Modern::take_ended`]).
    ended: Vec<(u64, Outcome)>,
    /// The connection is closing: nothing is issued again or retried.
    closed: bool,
}

impl Modern {
    /// The era at `version`, every request stamped with `meta`.
    pub(super) fn new(version: String, meta: RequestMeta) -> Modern {
        Modern {
            version,
            meta,
            calls: HashMap::new(),
            alias: HashMap::new(),
            inputs: Inputs::default(),
            listen_id: None,
            tool_lists: BTreeSet::new(),
            listen_retry: None,
            listen_reopens: 0,
            lost: BTreeSet::new(),
            reissue_at: Vec::new(),
            cache: ResultCache::new(),
            listen_flags: Map::new(),
            resource_subs: BTreeSet::new(),
            task_ids: BTreeSet::new(),
            no_task_push: false,
            replaced: BTreeSet::new(),
            awaiting_ack: Vec::new(),
            tools: ToolHeaders::default(),
            ended: Vec::new(),
            closed: false,
        }
    }

    /// The version spoken.
    pub(super) fn version(&self) -> &str {
        &self.version
    }

    /// The tools' `x-mcp-header` annotations, for the era headers of what
    /// the connection builds.
    pub(super) fn tools(&self) -> &ToolHeaders {
        &self.tools
    }

    /// The application's id of engine request `id`.
    pub(super) fn app_id(&self, id: u64) -> u64 {
        self.alias.get(&id).copied().unwrap_or(id)
    }

    // ---- subscriptions/listen ---------------------------------------------

    /// When `subscriptions/listen` is to be opened again or a call is to
    /// be issued again, whichever is first.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        let reissue = self.reissue_at.iter().map(|(t, _)| *t).min();
        let ack = self.awaiting_ack.iter().map(|(_, _, t)| *t).min();
        [self.listen_retry, reissue, ack]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the reopening of `subscriptions/listen` is due at `now`
    /// (then it is no longer pending: open it).
    pub(super) fn take_listen_due(&mut self, now: Instant) -> bool {
        let due = self.listen_retry.is_some_and(|t| t <= now);
        if due {
            self.listen_retry = None;
        }
        due
    }

    /// Opens `subscriptions/listen` for the list changes the server
    /// announces in `caps` (if `enabled`).
    pub(super) fn open_listen(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        caps: &ServerCapabilities,
        enabled: bool,
    ) {
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
        self.listen_flags = if enabled { wanted } else { Map::new() };
        self.send_listen(now, ob);
    }

    /// Opens `subscriptions/listen` with the current filter (list-change
    /// flags and resource URIs), replacing the one open; none when the
    /// filter is empty.
    fn relisten(&mut self, now: Instant, ob: &mut Outbox<'_>) {
        if let Some(old) = self.listen_id.take() {
            self.replaced.insert(old);
            ob.engine.cancel(now, old, "subscription filter changed");
        }
        self.listen_retry = None;
        self.listen_reopens = 0;
        self.send_listen(now, ob);
    }

    fn send_listen(&mut self, now: Instant, ob: &mut Outbox<'_>) {
        let mut wanted = self.listen_flags.clone();
        if !self.resource_subs.is_empty() {
            let uris = self.resource_subs.iter().cloned().map(Value::String);
            wanted.insert("resourceSubscriptions".into(), Value::Array(uris.collect()));
        }
        if !self.task_ids.is_empty() && !self.no_task_push {
            let ids = self.task_ids.iter().cloned().map(Value::String);
            wanted.insert("taskIds".into(), Value::Array(ids.collect()));
        }
        if wanted.is_empty() {
            return;
        }
        let params = serde_json::json!({ "notifications": wanted });
        let Ok(params) = with_meta(Some(params), &self.meta) else {
            return;
        };
        let raw = serde_json::value::to_raw_value(&params).expect("JSON serializes");
        // A subscription lasts as long as the connection: no deadline.
        let options = RequestOptions::default().timeout(Duration::MAX);
        match ob
            .engine
            .request(now, SUBSCRIPTIONS_LISTEN_METHOD, Some(&raw), options)
        {
            Ok(id) => {
                let method = SUBSCRIPTIONS_LISTEN_METHOD;
                ob.wire.note_request(id, method, Some(&params), &self.tools);
                self.listen_id = Some(id);
            }
            Err(e) => {
                ob.out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                        "subscriptions/listen not sent: {e}"
                    ))));
                let message = format!("subscriptions/listen not sent: {e}");
                self.fail_acks(ob.out, &message);
            }
        }
    }

    /// `resources/subscribe` or `resources/unsubscribe` of the application
    /// (`params` its params): the URI joins or leaves the listen filter.
    fn resource_subscription(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        subscribe: bool,
        params: Option<&Value>,
    ) -> Result<u64, CallError> {
        let uri = params
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
            .ok_or(LocalError::InvalidParams("a subscription needs a uri"))?
            .to_owned();
        let id = ob.engine.reserve_id()?;
        let changed = if subscribe {
            self.resource_subs.insert(uri.clone())
        } else {
            self.resource_subs.remove(&uri)
        };
        if subscribe {
            let deadline = now.checked_add(SUBSCRIBE_TIMEOUT).unwrap_or(now);
            self.awaiting_ack.push((id, uri, deadline));
        } else {
            let ok =
                serde_json::value::to_raw_value(&serde_json::json!({})).expect("JSON serializes");
            ob.out.push_back(Output::Complete {
                id,
                outcome: Ok(ok),
            });
        }
        if changed || (subscribe && self.listen_id.is_none()) {
            self.relisten(now, ob);
        }
        Ok(id)
    }

    /// The tasks followed changed: the listen filter asks for their status
    /// pushes (the stream is opened again with the new filter).
    pub(super) fn watch_tasks(&mut self, now: Instant, ob: &mut Outbox<'_>, ids: BTreeSet<String>) {
        if ids == self.task_ids {
            return;
        }
        // A task that ended needs no new stream: it leaves with the next change.
        let added = ids.iter().any(|id| !self.task_ids.contains(id));
        self.task_ids = ids;
        if added && !self.no_task_push {
            self.relisten(now, ob);
        }
    }

    /// Subscribes still waiting fail with `message`.
    fn fail_acks(&mut self, out: &mut VecDeque<Output>, message: &str) {
        for (id, uri, _) in std::mem::take(&mut self.awaiting_ack) {
            self.resource_subs.remove(&uri);
            let message = format!("subscribing to {uri}: {message}");
            out.push_back(Output::Complete {
                id,
                outcome: Err(RequestError::Transport { message }),
            });
        }
    }

    /// A server notification: drops the cached results it says changed.
    pub(super) fn notified(&mut self, method: &str, params: Option<&RawValue>) {
        self.cache.invalidate(method, params);
    }

    /// Results answered from the cache so far.
    pub(super) fn cache_hits(&self) -> u64 {
        self.cache.hits()
    }

    /// Whether `method` is the subscription's acknowledgement (not for the
    /// application).
    pub(super) fn is_internal_notification(&self, method: &str) -> bool {
        method == notifications::SUBSCRIPTIONS_ACKNOWLEDGED
    }

    /// The subscription is (again) in place: its reopens start over, and
    /// the subscribes waiting for it complete (an error for a URI the
    /// server left out of the honoured filter).
    pub(super) fn subscription_acknowledged(
        &mut self,
        out: &mut VecDeque<Output>,
        params: Option<&RawValue>,
    ) {
        self.listen_reopens = 0;
        let honoured: Option<BTreeSet<String>> = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|v| {
                let uris = v.get("notifications")?.get("resourceSubscriptions")?;
                let uris = uris.as_array()?.iter().filter_map(Value::as_str);
                Some(uris.map(str::to_owned).collect())
            });
        for (id, uri, _) in std::mem::take(&mut self.awaiting_ack) {
            // No honoured list at all: the server did not narrow the filter.
            let kept = honoured.as_ref().is_none_or(|h| h.contains(&uri));
            let outcome = if kept {
                Ok(serde_json::value::to_raw_value(&serde_json::json!({}))
                    .expect("JSON serializes"))
            } else {
                self.resource_subs.remove(&uri);
                Err(RequestError::Transport {
                    message: format!("the server did not accept the subscription to {uri}"),
                })
            };
            out.push_back(Output::Complete { id, outcome });
        }
    }

    /// Timers: calls to issue again, subscribes not acknowledged in time.
    pub(super) fn handle_timeout(&mut self, now: Instant, ob: &mut Outbox<'_>) {
        self.reissue_due(now, ob);
        if self.awaiting_ack.iter().any(|(_, _, t)| *t <= now) {
            let (late, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.awaiting_ack)
                .into_iter()
                .partition(|(_, _, t)| *t <= now);
            self.awaiting_ack = waiting;
            for (id, uri, _) in late {
                // The stream carries it all the same; the caller was told
                // it failed, so it is no longer asked for.
                self.resource_subs.remove(&uri);
                let ms = SUBSCRIBE_TIMEOUT.as_millis() as u64;
                ob.out.push_back(Output::Complete {
                    id,
                    outcome: Err(RequestError::Timeout { ms }),
                });
            }
        }
    }

    // ---- application calls --------------------------------------------------

    /// A request of the application: stamped with the envelope; `ping`
    /// (removed) becomes `server/discover`.
    pub(super) fn request(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        method: &str,
        id_of: Option<MethodId>,
        params: Option<&RawValue>,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        let (method, id_of) = match id_of {
            // `logging/setLevel` is gone too: the level rides on every
            // later request's `_meta` (without it a server sends no log
            // messages); the call itself is carried by a discover.
            Some(MethodId::SetLoggingLevel) => {
                #[derive(serde::Deserialize)]
                struct Level {
                    level: String,
                }
                let level = params
                    .and_then(|p| serde_json::from_str::<Level>(p.get()).ok())
                    .ok_or(LocalError::InvalidParams("logging/setLevel needs a level"))?;
                self.meta.log_level = Some(level.level);
                return self.request(
                    now,
                    ob,
                    DISCOVER_METHOD,
                    Some(MethodId::Discover),
                    None,
                    options,
                );
            }
            Some(MethodId::Ping) => (DISCOVER_METHOD, Some(MethodId::Discover)),
            Some(MethodId::Subscribe | MethodId::Unsubscribe) => {
                let value = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
                let subscribe = id_of == Some(MethodId::Subscribe);
                return self.resource_subscription(now, ob, subscribe, value.as_ref());
            }
            _ => (method, id_of),
        };
        let value = match params {
            None => None,
            Some(p) => Some(
                serde_json::from_str::<Value>(p.get())
                    .map_err(|_| LocalError::InvalidParams("params are not JSON"))?,
            ),
        };
        // A fresh cached result answers at once, without a round trip.
        if !options.bypass_cache {
            let hit = ResultCache::key(id_of, value.as_ref().unwrap_or(&Value::Null))
                .and_then(|key| self.cache.get(&key, now));
            if let Some(raw) = hit {
                let id = ob.engine.reserve_id()?;
                ob.out.push_back(Output::Complete {
                    id,
                    outcome: Ok(raw),
                });
                return Ok(id);
            }
        }
        let stamped = with_meta(value.clone(), &self.meta).map_err(|_| {
            LocalError::InvalidParams("params must be a JSON object in the 2026-07-28 protocol")
        })?;
        let raw = serde_json::value::to_raw_value(&stamped)
            .map_err(|_| LocalError::InvalidParams("params do not serialize"))?;
        let id = ob.engine.request(now, method, Some(&raw), options)?;
        ob.wire
            .note_request(id, method, Some(&stamped), &self.tools);
        if id_of == Some(MethodId::ListTools) && ob.wire.is_http() {
            self.tool_lists.insert(id);
        }
        self.calls.insert(
            id,
            Call {
                method: method.to_owned(),
                id: id_of,
                mrtr: id_of.is_some_and(|m| m.spec().input_rounds),
                params: value.unwrap_or(Value::Null),
                sent: stamped,
                options,
                deadline: options.timeout.and_then(|t| now.checked_add(t)),
                reissues: 0,
                rounds: 0,
                engine_id: Some(id),
                asked: None,
                responses: Map::new(),
                awaiting: BTreeSet::new(),
            },
        );
        Ok(id)
    }

    // ---- lost streams ---------------------------------------------------------

    /// Request `id`'s response stream was lost; its failure follows.
    pub(super) fn stream_lost(&mut self, id: u64) {
        self.lost.insert(id);
    }

    /// Issues again the calls whose backoff is over at `now`.
    fn reissue_due(&mut self, now: Instant, ob: &mut Outbox<'_>) {
        let due: Vec<u64> = self
            .reissue_at
            .iter()
            .filter(|(t, _)| *t <= now)
            .map(|(_, app)| *app)
            .collect();
        if due.is_empty() {
            return;
        }
        self.reissue_at.retain(|(t, _)| *t > now);
        for app in due {
            self.reissue(now, ob, app);
        }
    }

    /// Sends call `app`'s last request again under a new id, with the time
    /// left of its deadline.
    fn reissue(&mut self, now: Instant, ob: &mut Outbox<'_>, app: u64) {
        let Some(call) = self.calls.get_mut(&app) else {
            return;
        };
        let mut options = call.options;
        if let Some(deadline) = call.deadline {
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                let ms = call.options.timeout.map_or(0, |t| t.as_millis() as u64);
                let error = Err(RequestError::Timeout { ms });
                return self.end_call(ob.out, app, error, "timed out");
            }
            options.timeout = Some(left);
        }
        let method = call.method.clone();
        let sent = serde_json::value::to_raw_value(&call.sent)
            .map_err(|e| e.to_string())
            .and_then(|raw| {
                ob.engine
                    .request(now, &method, Some(&raw), options)
                    .map_err(|e| e.to_string())
            });
        match sent {
            Ok(id) => {
                ob.wire
                    .note_request(id, &method, Some(&call.sent), &self.tools);
                call.engine_id = Some(id);
                self.alias.insert(id, app);
                if call.id == Some(MethodId::ListTools) && ob.wire.is_http() {
                    self.tool_lists.insert(id);
                }
            }
            Err(e) => {
                let message =
                    format!("could not issue the request again after its stream was lost: {e}");
                let error = Err(RequestError::Transport { message });
                self.end_call(ob.out, app, error, "failed");
            }
        }
    }

    /// An answer to an input request, if `id` is one; `None` otherwise.
    pub(super) fn respond(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        id: &RequestId,
        response: &Result<Box<RawValue>, ErrorObject>,
    ) -> Option<RespondStatus> {
        let (app, key) = match self.inputs.answer(id) {
            Ok(open) => open,
            // One of ours, withdrawn (its call was cancelled or ended).
            Err(withdrawn) => return withdrawn.then_some(RespondStatus::Withdrawn),
        };
        let Some(call) = self.calls.get_mut(&app) else {
            return Some(RespondStatus::Withdrawn);
        };
        match response {
            Ok(raw) => {
                let v = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                call.responses.insert(key.clone(), v);
                call.awaiting.remove(&key);
                if call.awaiting.is_empty() {
                    self.retry(now, ob, app);
                }
            }
            Err(e) => {
                let message = format!(
                    "the application could not answer the server's input {key:?}: {}",
                    e.message
                );
                let error = Err(RequestError::Transport { message });
                self.end_call(ob.out, app, error, "answer failed");
            }
        }
        Some(RespondStatus::Sent)
    }

    /// Cancels call `app`; `None` when it is not a tracked call (the engine
    /// handles it).
    pub(super) fn cancel(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        app: u64,
        reason: &str,
    ) -> Option<bool> {
        let call = self.calls.get(&app)?;
        match call.engine_id {
            Some(e) => Some(ob.engine.cancel(now, e, reason)),
            None => {
                let error = RequestError::Cancelled {
                    reason: reason.to_owned(),
                };
                self.end_call(ob.out, app, Err(error), reason);
                Some(true)
            }
        }
    }

    /// The connection is closing: calls waiting for inputs complete too.
    pub(super) fn close(&mut self, out: &mut VecDeque<Output>, reason: &str) {
        self.closed = true;
        self.listen_retry = None;
        for (id, _, _) in std::mem::take(&mut self.awaiting_ack) {
            let error = RequestError::Closed {
                reason: reason.to_owned(),
            };
            out.push_back(Output::Complete {
                id,
                outcome: Err(error),
            });
        }
        let waiting: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| c.engine_id.is_none())
            .map(|(id, _)| *id)
            .collect();
        for app in waiting {
            let error = RequestError::Closed {
                reason: reason.to_owned(),
            };
            self.end_call(out, app, Err(error), reason);
        }
    }

    // ---- completions --------------------------------------------------------

    /// An engine completion: the listen request's end, an
    /// `input_required` round, or a result for the application (returned,
    /// under the application's id).
    pub(super) fn complete(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        client: &ClientConfig,
        id: u64,
        outcome: Outcome,
    ) -> Option<(u64, Outcome)> {
        if self.listen_id == Some(id) {
            self.listen_ended(now, ob.out, outcome);
            return None;
        }
        if self.replaced.remove(&id) {
            return None;
        }
        let tool_list = self.tool_lists.remove(&id);
        let lost = self.lost.remove(&id);
        let app = self.alias.remove(&id).unwrap_or(id);
        let outcome = match outcome {
            Ok(raw) if tool_list => Ok(self.tool_list_headers(ob, raw)),
            o => o,
        };
        let Some(call) = self.calls.get_mut(&app) else {
            return Some((app, outcome));
        };
        if call.engine_id != Some(id) {
            // Not its request in flight (cannot happen: one at a time).
            return Some((app, outcome));
        }
        call.engine_id = None;
        let raw = match outcome {
            Ok(raw) => raw,
            Err(e) if lost && call.reissues < MAX_REISSUES && !self.closed => {
                call.reissues += 1;
                let n = call.reissues;
                let delay = REISSUE_BACKOFF.saturating_mul(1 << (n - 1));
                // Never past the call's deadline: it fails then.
                let at = now.checked_add(delay).unwrap_or(now);
                let at = call.deadline.map_or(at, |d| at.min(d));
                self.reissue_at.push((at, app));
                ob.out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "{e}; issuing it again with a new id in {} ms (attempt {n} of {MAX_REISSUES})",
                    delay.as_millis()
                ))));
                return None;
            }
            Err(RequestError::Transport { .. }) if lost => {
                // Every attempt lost its stream: say so, under the id the
                // application knows (the transport named the last
                // attempt's).
                let reissues = call.reissues;
                let attempts = reissues + 1;
                self.calls.remove(&app);
                let message = format!(
                    "the response stream of request {app} ended before its response \
                     {attempts} times (issued again {reissues} times with new ids); giving up"
                );
                return Some((app, Err(RequestError::Transport { message })));
            }
            Err(e) => {
                self.calls.remove(&app);
                return Some((app, Err(e)));
            }
        };
        if !call.mrtr {
            self.cache.store(call.id, &call.params, &raw, now);
            self.calls.remove(&app);
            return Some((app, Ok(raw)));
        }
        let Ok(value) = serde_json::from_str::<Value>(raw.get()) else {
            self.calls.remove(&app);
            return Some((app, Ok(raw)));
        };
        let fail = |message: String| Some((app, Err(RequestError::Transport { message })));
        match classify(&call.method, &value) {
            Ok(ResultKind::Complete) => {
                if call.rounds == 0 {
                    self.cache.store(call.id, &call.params, &raw, now);
                }
                self.calls.remove(&app);
                Some((app, Ok(raw)))
            }
            Ok(ResultKind::Unknown(t)) if t == "task" && call.id == Some(MethodId::CallTool) => {
                self.calls.remove(&app);
                if client.tasks {
                    // The tasks extension: the connection's tasks follow it.
                    Some((app, Ok(raw)))
                } else {
                    fail(
                        "the server answered with a task, but this client does not declare \
                         the tasks extension (ConnectOptions::tasks(false))"
                            .to_owned(),
                    )
                }
            }
            Ok(ResultKind::Unknown(t)) => {
                self.calls.remove(&app);
                fail(format!(
                    "the server answered with an unknown resultType {t:?}"
                ))
            }
            Err(e) => {
                self.calls.remove(&app);
                fail(format!("invalid input_required result: {e}"))
            }
            Ok(ResultKind::InputRequired(_)) if self.closed => {
                self.calls.remove(&app);
                let reason = "the connection closed during the server's input round".to_owned();
                Some((app, Err(RequestError::Closed { reason })))
            }
            Ok(ResultKind::InputRequired(asked)) => {
                call.rounds += 1;
                if call.rounds > MAX_INPUT_ROUNDS {
                    self.calls.remove(&app);
                    return fail(format!(
                        "the server asked for input {MAX_INPUT_ROUNDS} times in a row; giving up"
                    ));
                }
                let handled = client.handled_requests();
                if let Some((key, r)) = asked
                    .input_requests
                    .iter()
                    .find(|(_, r)| !handled.contains(&r.method()))
                {
                    let message = format!(
                        "the server asked for {} (input {key:?}), which this client did not declare",
                        r.method()
                    );
                    self.calls.remove(&app);
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
                    self.retry(now, ob, app);
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
                    self.inputs.open(rid.clone(), app, key);
                    ob.out.push_back(Output::ServerRequest {
                        id: rid,
                        method: r.method().to_owned(),
                        params,
                    });
                }
                None
            }
        }
    }

    /// The listen request ended: unless the connection closed it, open it
    /// again after a backoff, a bounded number of times in a row.
    fn listen_ended(&mut self, now: Instant, out: &mut VecDeque<Output>, outcome: Outcome) {
        self.listen_id = None;
        let why = match &outcome {
            Ok(_) => "the server ended it".to_owned(),
            Err(e) => e.to_string(),
        };
        self.fail_acks(out, &format!("subscriptions/listen ended ({why})"));
        if matches!(outcome, Err(RequestError::Closed { .. })) {
            return;
        }
        let refused = matches!(
            outcome,
            Err(RequestError::Remote(_) | RequestError::Http { .. })
        );
        if refused && !self.task_ids.is_empty() && !self.no_task_push {
            // Perhaps the server refuses `taskIds` (or has no listen at
            // all): the tasks are polled anyway. Whatever else the filter
            // asked for is asked again at once without them; nothing else
            // asked, nothing to say.
            self.no_task_push = true;
            self.listen_reopens = 0;
            if !self.listen_flags.is_empty() || !self.resource_subs.is_empty() {
                self.listen_retry = Some(now);
            }
            return;
        }
        let note = if self.listen_reopens < MAX_LISTEN_REOPENS {
            let delay = Duration::from_secs(1 << self.listen_reopens);
            self.listen_reopens += 1;
            self.listen_retry = now.checked_add(delay);
            format!("subscriptions/listen ended ({why}); opening it again in {delay:?}")
        } else {
            format!(
                "subscriptions/listen ended ({why}) {MAX_LISTEN_REOPENS} times in a row; \
                 going on without list-change notifications"
            )
        };
        out.push_back(Output::Diagnostic(Diagnostic::Transport(note)));
    }

    /// A `tools/list` page over HTTP: records each tool's `x-mcp-header`
    /// annotations and leaves out the tools whose annotations are invalid
    /// (the spec says they MUST be excluded).
    fn tool_list_headers(&mut self, ob: &mut Outbox<'_>, raw: Box<RawValue>) -> Box<RawValue> {
        if !ob.wire.is_http() {
            return raw;
        }
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
            match param_headers(schema) {
                Ok(specs) => {
                    self.tools.record(name, specs);
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
            ob.out
                .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                    "tool {d} (invalid x-mcp-header annotation): left out of tools/list"
                ))));
        }
        serde_json::value::to_raw_value(&page).unwrap_or(raw)
    }

    /// Sends call `app` again with the inputs and the echoed state.
    fn retry(&mut self, now: Instant, ob: &mut Outbox<'_>, app: u64) {
        let Some(call) = self.calls.get_mut(&app) else {
            return;
        };
        let asked = call.asked.take().unwrap_or(InputRequired {
            input_requests: Default::default(),
            request_state: None,
        });
        let responses = std::mem::take(&mut call.responses);
        let params = retry_params(&call.params, &asked, responses)
            .map_err(|e| e.to_string())
            .and_then(|p| with_meta(Some(p), &self.meta).map_err(|e| e.to_string()));
        let method = call.method.clone();
        let options = call.options;
        let sent = params.and_then(|params| {
            let raw = serde_json::value::to_raw_value(&params).map_err(|e| e.to_string())?;
            let id = ob
                .engine
                .request(now, &method, Some(&raw), options)
                .map_err(|e| e.to_string())?;
            ob.wire
                .note_request(id, &method, Some(&params), &self.tools);
            Ok((id, params))
        });
        match sent {
            Ok((id, params)) => {
                self.alias.insert(id, app);
                if let Some(call) = self.calls.get_mut(&app) {
                    call.engine_id = Some(id);
                    call.sent = params;
                }
            }
            Err(e) => {
                let message = format!("could not send the call again with its inputs: {e}");
                let error = Err(RequestError::Transport { message });
                self.end_call(ob.out, app, error, "failed");
            }
        }
    }

    /// The calls ended here since the last look: the connection routes
    /// them as completions (a request of its tasks sub-state among them).
    pub(super) fn take_ended(&mut self) -> Vec<(u64, Outcome)> {
        std::mem::take(&mut self.ended)
    }

    /// Ends call `app` that has no request in flight: withdraws its open
    /// input requests; its completion waits in [`Modern::take_ended`].
    fn end_call(&mut self, out: &mut VecDeque<Output>, app: u64, outcome: Outcome, why: &str) {
        self.calls.remove(&app);
        self.reissue_at.retain(|(_, a)| *a != app);
        self.inputs.withdraw(out, app, |_| true, why);
        self.ended.push((app, outcome));
    }
}
