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
//!
//! ```text
//!   mod.rs       the state, the application's calls, answers, cancels, the end
//!   listen.rs    subscriptions/listen: filter, acknowledgement, reopening
//!   complete.rs  completions: results, input rounds, re-issues
//! ```

use std::collections::{BTreeSet, VecDeque};
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
    classify, param_headers, retry_params, with_meta, with_meta_kept, InputRequest, InputRequired,
    RequestMeta, ResultKind, ToolHeaders, DISCOVER_METHOD, SUBSCRIPTIONS_LISTEN_METHOD,
};
use crate::rpc::{
    Engine, ErrorObject, IdMap, Json, LocalError, RequestError, RequestId, RequestOptions,
    RespondStatus,
};

mod complete;
mod listen;

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
    calls: IdMap<Call>,
    /// Retry request id → the application's id.
    alias: IdMap<u64>,
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
    /// Requests of methods this era removed (`ping`, `logging/setLevel`)
    /// carried by a `server/discover`: answered `{}`, as the method
    /// would have been, not with the discover result.
    stand_ins: BTreeSet<u64>,
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
            calls: IdMap::default(),
            alias: IdMap::default(),
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
            stand_ins: BTreeSet::new(),
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

    // ---- application calls --------------------------------------------------

    /// A request of the application: stamped with the envelope; `ping`
    /// (removed) becomes `server/discover`.
    pub(super) fn request(
        &mut self,
        now: Instant,
        ob: &mut Outbox<'_>,
        method: &str,
        id_of: Option<MethodId>,
        params: Option<Json<'_>>,
        options: RequestOptions,
    ) -> Result<u64, CallError> {
        if let Some(removed @ (MethodId::SetLoggingLevel | MethodId::Ping)) = id_of {
            // `logging/setLevel` is gone: the level rides on every later
            // request's `_meta` (without it a server sends no log
            // messages). Either call is carried by a discover, sent (not
            // answered from the cache: a ping must reach the server), and
            // answered `{}` as the method would have been.
            if removed == MethodId::SetLoggingLevel {
                #[derive(serde::Deserialize)]
                struct Level {
                    level: String,
                }
                let level = params
                    .and_then(|p| serde_json::from_str::<Level>(p.get()).ok())
                    .ok_or(LocalError::InvalidParams("logging/setLevel needs a level"))?;
                self.meta.log_level = Some(level.level);
            }
            let mut options = options;
            options.bypass_cache = true;
            let discover = Some(MethodId::Discover);
            let id = self.request(now, ob, DISCOVER_METHOD, discover, None, options)?;
            self.stand_ins.insert(id);
            return Ok(id);
        }
        let (method, id_of) = match id_of {
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
        let stamp = if options.relay {
            with_meta_kept
        } else {
            with_meta
        };
        let stamped = stamp(value.clone(), &self.meta).map_err(|_| {
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
                // A relayed call's input rounds are its caller's.
                mrtr: !options.relay && id_of.is_some_and(|m| m.spec().input_rounds),
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
