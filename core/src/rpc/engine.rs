//! The engine: one connection's JSON-RPC state machine (ids, correlation,
//! deadlines, progress, cancellation, server requests, limits).
//!
//! ```text
//!  request() ──► pending{id} ──┬─ response ────────────► Complete(result | Remote)
//!                              ├─ deadline (timeout) ──► Send(cancelled) + Complete(Timeout)
//!                              ├─ cancel() ────────────► Send(cancelled) + Complete(Cancelled)
//!                              └─ close() ─────────────► Complete(Closed) … then Closed
//! ```
//! A request leaves `pending` in exactly one of these transitions, and only
//! that transition emits its `Complete`: completion is exactly-once by
//! construction. Deadlines sit in a min-heap with lazy deletion: an entry
//! counts only while its request is pending with that very deadline.

use std::cmp::Reverse;
use std::collections::hash_map::{Entry, HashMap};
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::config::{EngineConfig, RequestOptions};
use super::encode;
use super::error::{LocalError, RequestError};
use super::message::{
    self, ErrorObject, Frame, InvalidReason, Message, ParseError, RequestId, INVALID_REQUEST,
};
use super::output::{Diagnostic, Output, Progress, SendKind, Stats};
use crate::codec::glimpse::Glimpse;
use crate::mcp::methods::{notifications, MethodId};

/// Bytes of the received text quoted in a diagnostic.
const PREVIEW_BYTES: usize = 200;

/// Never `notifications/cancelled` for it: `initialize`, or a request
/// made [`RequestOptions::quiet`].
const F_QUIET: u8 = 1;
const F_PROGRESS: u8 = 2;
const F_RESET: u8 = 4;
/// Capacity (entries) above which a mostly empty table or queue is shrunk.
const SHRINK_ABOVE: usize = 1024;
/// `max_total_ns` value meaning "no hard maximum".
const NO_MAX: u64 = u64::MAX;

/// What `respond` did with an answer it accepted.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RespondStatus {
    /// The response was queued as an `Output::Send`.
    Sent,
    /// The server had withdrawn the request (`notifications/cancelled`): the
    /// answer was dropped and counted in [`Stats::responds_dropped`].
    Withdrawn,
}

/// One of our requests waiting for its response. Kept small: it is the
/// per-request memory cost.
#[derive(Debug)]
struct Pending {
    /// The live deadline (`None`: the timeout overflows `Instant`).
    deadline: Option<Instant>,
    start: Instant,
    timeout_ns: u64,
    max_total_ns: u64,
    last_progress: f64,
    flags: u8,
}

impl Pending {
    fn deadline_from(&self, now: Instant) -> Option<Instant> {
        let soft = now.checked_add(Duration::from_nanos(self.timeout_ns));
        match (soft, self.hard_deadline()) {
            (Some(soft), Some(hard)) => Some(soft.min(hard)),
            (soft, None) => soft,
            (None, hard) => hard,
        }
    }

    fn hard_deadline(&self) -> Option<Instant> {
        if self.max_total_ns == NO_MAX {
            None
        } else {
            self.start
                .checked_add(Duration::from_nanos(self.max_total_ns))
        }
    }

    /// The timeout (in ms) that expired when deadline `fired` was reached.
    fn expired_ms(&self, fired: Instant) -> u64 {
        if self.hard_deadline() == Some(fired) {
            self.max_total_ns / 1_000_000
        } else {
            self.timeout_ns / 1_000_000
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).map_or(NO_MAX - 1, |n| n.min(NO_MAX - 1))
}

/// Hasher for our own sequential ids (keys are never chosen by the peer,
/// so no defence against collisions is needed): one multiply, where the
/// default hasher spends a few hundred instructions per lookup.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The JSON-RPC engine of one connection. See the [module docs](super) for
/// the polling order.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    next_id: u64,
    pending: HashMap<u64, Pending, BuildHasherDefault<IdHasher>>,
    deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Server requests surfaced and not yet answered.
    server_open: HashSet<RequestId>,
    /// Server requests withdrawn but not yet answered (bounded, oldest out).
    withdrawn: VecDeque<RequestId>,
    out: VecDeque<Output>,
    queued_bytes: usize,
    /// Bytes the driver took and has not written yet.
    unwritten: usize,
    /// Own messages are being dropped (the peer stopped reading).
    dropping: bool,
    stats: Stats,
    closed: bool,
    /// Progress tokens kept after their request completed (a 2025-11-25
    /// task's token lives as long as the task), with the last progress.
    lingering: HashMap<u64, f64, BuildHasherDefault<IdHasher>>,
}

/// Progress tokens kept alive at once, at most.
const MAX_LINGERING: usize = 1024;

#[derive(Deserialize)]
struct ProgressParams<'a> {
    #[serde(rename = "progressToken", borrow)]
    token: &'a RawValue,
    progress: f64,
    #[serde(default)]
    total: Option<f64>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct CancelledParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a RawValue,
    #[serde(default, borrow)]
    reason: Option<&'a RawValue>,
}

impl Engine {
    /// A new engine; nothing is sent until the first call.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            config,
            next_id: 0,
            pending: HashMap::default(),
            deadlines: BinaryHeap::new(),
            server_open: HashSet::new(),
            withdrawn: VecDeque::new(),
            out: VecDeque::new(),
            queued_bytes: 0,
            unwritten: 0,
            dropping: false,
            stats: Stats::default(),
            closed: false,
            lingering: HashMap::default(),
        }
    }

    /// Keeps delivering `notifications/progress` for request `id`'s token
    /// after it completed (as [`Output::Progress`] for `id`), until
    /// [`end_progress`](Self::end_progress): a 2025-11-25 task reports
    /// progress with the token of the call that created it.
    pub fn linger_progress(&mut self, id: u64) {
        if self.lingering.len() < MAX_LINGERING {
            self.lingering.entry(id).or_insert(f64::NEG_INFINITY);
        }
    }

    /// Stops [`linger_progress`](Self::linger_progress) for `id`.
    pub fn end_progress(&mut self, id: u64) {
        self.lingering.remove(&id);
    }

    // ---- application calls -------------------------------------------

    /// An id for a request answered without the wire (a cached result the
    /// caller completes itself): never sent, never pending.
    pub fn reserve_id(&mut self) -> Result<u64, LocalError> {
        if self.closed {
            return Err(LocalError::Closed);
        }
        let id = self.next_id;
        if id > i64::MAX as u64 {
            return Err(LocalError::IdsExhausted);
        }
        self.next_id += 1;
        Ok(id)
    }

    /// Queues request `method` and returns its id (0, 1, 2, … per engine).
    ///
    /// The request's `Output::Send` is queued now and its one
    /// `Output::Complete` comes later. With `opts.progress`, the id is also
    /// the progress token (`params._meta.progressToken`, merged into an
    /// existing `_meta`). Errors leave no trace (no id is used).
    pub fn request(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&RawValue>,
        opts: RequestOptions,
    ) -> Result<u64, LocalError> {
        if self.closed {
            return Err(LocalError::Closed);
        }
        if self.pending.len() >= self.config.max_pending {
            return Err(LocalError::TooManyPending {
                limit: self.config.max_pending,
            });
        }
        let id = self.next_id;
        if id > i64::MAX as u64 {
            return Err(LocalError::IdsExhausted);
        }
        let progress = opts.progress || opts.reset_timeout_on_progress;
        encode::check_params(params, progress)?;
        let mut bytes = Vec::with_capacity(64 + method.len() + params.map_or(0, |p| p.get().len()));
        encode::request(&mut bytes, id, method, params, progress)?;
        self.admit(bytes.len())?;

        self.next_id += 1;
        let max_total = opts
            .max_total_timeout
            .or(if opts.reset_timeout_on_progress {
                self.config.default_max_total_timeout
            } else {
                None
            });
        let mut flags = 0;
        if opts.quiet || method == MethodId::Initialize.name() {
            flags |= F_QUIET;
        }
        if progress {
            flags |= F_PROGRESS;
        }
        if opts.reset_timeout_on_progress {
            flags |= F_RESET;
        }
        let mut pending = Pending {
            deadline: None,
            start: now,
            timeout_ns: nanos(opts.timeout.unwrap_or(self.config.default_timeout)),
            max_total_ns: max_total.map_or(NO_MAX, nanos),
            last_progress: f64::NEG_INFINITY,
            flags,
        };
        pending.deadline = pending.deadline_from(now);
        let deadline = pending.deadline;
        self.pending.insert(id, pending);
        if let Some(deadline) = deadline {
            self.push_deadline(deadline, id);
        }
        self.queue_send(bytes, SendKind::Request { id });
        self.stats.requests_sent += 1;
        Ok(id)
    }

    /// Queues notification `method` (params must be an object or array).
    pub fn notify(&mut self, method: &str, params: Option<&RawValue>) -> Result<(), LocalError> {
        if self.closed {
            return Err(LocalError::Closed);
        }
        encode::check_params(params, false)?;
        let mut bytes = Vec::with_capacity(48 + method.len() + params.map_or(0, |p| p.get().len()));
        encode::notification(&mut bytes, method, params);
        self.admit(bytes.len())?;
        self.queue_send(bytes, SendKind::Notification);
        self.stats.notifications_sent += 1;
        Ok(())
    }

    /// Answers the server's request `id` (from an `Output::ServerRequest`).
    ///
    /// Queued whatever the queue size (the server waits for it), up to
    /// twice [`EngineConfig::max_queued_bytes`] (then it is dropped and
    /// counted: the server has stopped reading).
    /// A request the server has withdrawn meanwhile gives
    /// `Ok(RespondStatus::Withdrawn)`; an id that is not open gives
    /// [`LocalError::UnknownServerRequest`].
    pub fn respond(
        &mut self,
        id: RequestId,
        response: Result<Box<RawValue>, ErrorObject>,
    ) -> Result<RespondStatus, LocalError> {
        if self.closed {
            return Err(LocalError::Closed);
        }
        if self.server_open.remove(&id) {
            self.send_response(id, response.as_deref());
            return Ok(RespondStatus::Sent);
        }
        if let Some(pos) = self.withdrawn.iter().position(|w| *w == id) {
            self.withdrawn.remove(pos);
            self.stats.responds_dropped += 1;
            return Ok(RespondStatus::Withdrawn);
        }
        Err(LocalError::UnknownServerRequest(id))
    }

    /// Whether `id` is a request of the server's still waiting for the
    /// application's answer.
    pub fn has_server_request(&self, id: &RequestId) -> bool {
        self.server_open.contains(id)
    }

    /// Cancels pending request `id`: it completes now with
    /// `RequestError::Cancelled { reason }` and the server is sent
    /// `notifications/cancelled` (never for `initialize`). Returns false
    /// (doing nothing) if `id` is not pending.
    pub fn cancel(&mut self, now: Instant, id: u64, reason: &str) -> bool {
        let _ = now; // part of the shape: a future policy may need the time
        if self.closed {
            return false;
        }
        let Some(pending) = self.pending.remove(&id) else {
            return false;
        };
        if pending.flags & F_QUIET == 0 {
            self.send_cancelled(id, reason);
        }
        self.stats.cancelled += 1;
        self.complete(
            id,
            Err(RequestError::Cancelled {
                reason: reason.to_owned(),
            }),
        );
        true
    }

    /// Fails pending request `id` with an error found by the transport
    /// (HTTP status, lost session, stream gone). No `notifications/cancelled`
    /// is sent: the server refused or never saw the request. Returns false
    /// (doing nothing) if `id` is not pending.
    pub fn fail(&mut self, now: Instant, id: u64, error: RequestError) -> bool {
        let _ = now;
        if let RequestError::TooLarge { .. } = error {
            self.stats.oversize += 1;
        }
        if self.closed {
            return false;
        }
        if self.pending.remove(&id).is_none() {
            return false;
        }
        self.stats.failed += 1;
        self.complete(id, Err(error));
        true
    }

    /// A message was skipped unread for its size (`error`, a
    /// [`RequestError::TooLarge`]); `glimpse` is what its ends showed.
    ///
    /// A response to a pending request fails it now with `error`. A server
    /// request is answered with an error (-32600 and the same text) so the
    /// server does not wait for an answer that cannot come. Anything else
    /// is only counted. Returns whether a request of ours failed.
    pub fn handle_oversize(
        &mut self,
        now: Instant,
        glimpse: &Glimpse,
        error: RequestError,
    ) -> bool {
        let id = |text: Option<&str>| serde_json::from_str::<RequestId>(text?).ok();
        if let Some(id) = id(glimpse.response_id()) {
            let key = our_key(&id);
            if self.pending.contains_key(&key) {
                return self.fail(now, key, error);
            }
        }
        self.stats.oversize += 1;
        if self.closed {
            return false;
        }
        if let Some(id) = id(glimpse.request_id()) {
            if !self.server_open.contains(&id) {
                let answer = ErrorObject::new(INVALID_REQUEST, error.to_string());
                self.send_response(id, Err(&answer));
            }
        }
        false
    }

    /// Stops request `id`'s clock: its deadline no longer fires until
    /// [`resume_timeout`](Self::resume_timeout) (used while it waits for an
    /// authorization, which has timeouts of its own). False if it is not
    /// pending.
    pub fn suspend_timeout(&mut self, id: u64) -> bool {
        match self.pending.get_mut(&id) {
            Some(p) => {
                p.deadline = None;
                true
            }
            None => false,
        }
    }

    /// Restarts request `id`'s clock from `now` (its timeout and hard
    /// maximum both count from here). False if it is not pending.
    pub fn resume_timeout(&mut self, now: Instant, id: u64) -> bool {
        let Some(p) = self.pending.get_mut(&id) else {
            return false;
        };
        p.start = now;
        p.deadline = p.deadline_from(now);
        if let Some(d) = p.deadline {
            self.push_deadline(d, id);
        }
        true
    }

    /// Accepts or refuses incoming JSON-RPC batches from now on (the
    /// 2025-03-26 protocol has them; the others do not).
    pub fn set_accept_batches(&mut self, yes: bool) {
        self.config.accept_batches = yes;
    }

    /// Closes the engine: every pending request completes with
    /// `RequestError::Closed` in ascending id order, then `Output::Closed`
    /// is queued, the last output. Later calls are no-ops or
    /// `Err(LocalError::Closed)`. Closing twice does nothing.
    pub fn close(&mut self, reason: impl Into<String>) {
        if self.closed {
            return;
        }
        self.closed = true;
        let reason = reason.into();
        let mut ids: Vec<u64> = self.pending.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            self.pending.remove(&id);
            self.stats.closed += 1;
            self.complete(
                id,
                Err(RequestError::Closed {
                    reason: reason.clone(),
                }),
            );
        }
        self.pending = HashMap::default();
        self.deadlines = BinaryHeap::new();
        self.server_open = HashSet::new();
        self.withdrawn = VecDeque::new();
        self.out.push_back(Output::Closed { reason });
    }

    // ---- inputs ------------------------------------------------------

    /// Handles ONE received JSON text (a JSONL line, an SSE `data`, an HTTP
    /// JSON body). Whatever it holds, nothing panics: every fault becomes a
    /// `Diagnostic` output and a counter.
    ///
    /// Timeouts are not checked here: a response handled before
    /// `handle_timeout` saw its deadline completes the request.
    pub fn handle_message(&mut self, now: Instant, json: &[u8]) {
        if self.closed {
            return;
        }
        // A lone UTF-16 surrogate escape (JavaScript's JSON.stringify of a
        // sliced emoji) is mended here, once, for every reader after.
        let repaired = std::str::from_utf8(json)
            .ok()
            .and_then(message::repair_lone_surrogates);
        let json = match &repaired {
            Some(text) => {
                self.stats.surrogates_repaired += 1;
                text.as_bytes()
            }
            None => json,
        };
        match message::frame(json, self.config.accept_batches) {
            Ok(Frame::Single(text)) => self.handle_one(now, text),
            Ok(Frame::Batch(items)) => {
                self.stats.batches += 1;
                for item in items {
                    self.handle_one(now, item.get());
                }
            }
            Err(err) => self.parse_failed(err, json),
        }
    }

    /// Fires every deadline at or before `now`: each such request completes
    /// with `RequestError::Timeout` and `notifications/cancelled` is sent
    /// (never for `initialize`). Idempotent; a spurious call is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        while let Some(&Reverse((deadline, id))) = self.deadlines.peek() {
            if deadline > now {
                break;
            }
            self.deadlines.pop();
            let Entry::Occupied(entry) = self.pending.entry(id) else {
                continue;
            };
            if entry.get().deadline != Some(deadline) {
                continue;
            }
            let pending = entry.remove();
            let error = RequestError::Timeout {
                ms: pending.expired_ms(deadline),
            };
            if pending.flags & F_QUIET == 0 {
                self.send_cancelled(id, &error.to_string());
            }
            self.stats.timed_out += 1;
            self.complete(id, Err(error));
        }
    }

    // ---- outputs -----------------------------------------------------

    /// The next action for the driver, in order; `None` when there is none.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        let Some(out) = self.out.pop_front() else {
            // Give back the memory of a burst once it has been drained.
            if self.out.capacity() > SHRINK_ABOVE {
                self.out.shrink_to(SHRINK_ABOVE / 16);
            }
            return None;
        };
        if let Output::Send { bytes, .. } = &out {
            self.queued_bytes -= bytes.len();
        }
        Some(out)
    }

    /// The earliest live deadline: call `handle_timeout` when it is reached.
    /// `None` when no request has one (or the engine is closed). Takes
    /// `&mut self` to drop stale deadline entries on the way.
    #[must_use]
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.shrink_if_sparse();
        while let Some(&Reverse((deadline, id))) = self.deadlines.peek() {
            if self.is_live(deadline, id) {
                return Some(deadline);
            }
            self.deadlines.pop();
        }
        None
    }

    // ---- getters -----------------------------------------------------

    /// Counters since creation.
    pub fn stats(&self) -> Stats {
        Stats {
            waiting_bytes: self.waiting_bytes(),
            ..self.stats
        }
    }

    /// Requests waiting for their completion.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Server requests surfaced and not yet answered (nor withdrawn).
    pub fn server_requests_len(&self) -> usize {
        self.server_open.len()
    }

    /// Bytes of `Output::Send` queued and not yet polled.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// The driver reports how many bytes it took with `Send` outputs and
    /// has not written yet (a child's stdin that is not being read): they
    /// count against [`EngineConfig::max_queued_bytes`] with the queue.
    pub fn set_unwritten(&mut self, bytes: usize) {
        self.unwritten = bytes;
    }

    /// Bytes not yet written to the peer: queued, and held by the driver.
    fn waiting_bytes(&self) -> usize {
        self.queued_bytes.saturating_add(self.unwritten)
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Heap entries, stale ones included (tests check they stay bounded).
    #[cfg(test)]
    pub(crate) fn deadlines_len(&self) -> usize {
        self.deadlines.len()
    }

    // ---- internals ---------------------------------------------------

    fn is_live(&self, deadline: Instant, id: u64) -> bool {
        self.pending
            .get(&id)
            .is_some_and(|p| p.deadline == Some(deadline))
    }

    /// Drops stale deadlines; keeps them at most about as many as the live
    /// ones.
    fn compact_deadlines(&mut self) {
        let pending = &self.pending;
        self.deadlines
            .retain(|Reverse((d, id))| pending.get(id).is_some_and(|p| p.deadline == Some(*d)));
    }

    /// After a burst (e.g. many requests that all timed out), gives the
    /// memory of the pending table and the deadline heap back.
    fn shrink_if_sparse(&mut self) {
        let cap = self.pending.capacity();
        if cap > SHRINK_ABOVE && self.pending.len() * 8 < cap {
            self.pending.shrink_to(self.pending.len() * 2);
            self.compact_deadlines();
            self.deadlines.shrink_to(self.deadlines.len() * 2);
        }
    }

    fn push_deadline(&mut self, deadline: Instant, id: u64) {
        self.deadlines.push(Reverse((deadline, id)));
        // Lazy deletion leaves entries of completed requests behind; keep
        // them at most about as many as the live ones (amortized O(1)).
        if self.deadlines.len() > 2 * self.pending.len() + 64 {
            self.compact_deadlines();
        }
    }

    fn admit(&self, len: usize) -> Result<(), LocalError> {
        let waiting = self.waiting_bytes();
        if waiting > 0 && waiting.saturating_add(len) > self.config.max_queued_bytes {
            return Err(LocalError::QueueFull {
                queued: waiting,
                limit: self.config.max_queued_bytes,
            });
        }
        Ok(())
    }

    fn queue_send(&mut self, bytes: Vec<u8>, kind: SendKind) {
        if !matches!(kind, SendKind::Request { .. }) {
            // Our own replies are not refused like requests, but bounded:
            // a peer that left twice the limit unread will not read them.
            // (Only once the driver holds bytes the peer did not take: a
            // queue not yet polled says nothing about the peer.)
            let waiting = self.waiting_bytes();
            let limit = self.config.max_queued_bytes.saturating_mul(2);
            if self.unwritten > 0 && waiting.saturating_add(bytes.len()) > limit {
                self.stats.sends_dropped += 1;
                if !self.dropping {
                    self.dropping = true;
                    self.diagnostic(Diagnostic::SendsDropped {
                        unwritten: waiting,
                        limit,
                    });
                }
                return;
            }
            self.dropping = false;
        }
        self.queued_bytes += bytes.len();
        self.out.push_back(Output::Send { bytes, kind });
    }

    fn complete(&mut self, id: u64, outcome: Result<Box<RawValue>, RequestError>) {
        self.out.push_back(Output::Complete { id, outcome });
    }

    fn diagnostic(&mut self, diagnostic: Diagnostic) {
        self.out.push_back(Output::Diagnostic(diagnostic));
    }

    fn send_cancelled(&mut self, id: u64, reason: &str) {
        let mut bytes = Vec::with_capacity(96 + reason.len());
        encode::cancelled(&mut bytes, id, reason);
        self.queue_send(bytes, SendKind::Notification);
    }

    fn send_response(&mut self, id: RequestId, outcome: Result<&RawValue, &ErrorObject>) {
        let mut bytes = Vec::with_capacity(64);
        encode::response(&mut bytes, &id, outcome);
        self.queue_send(bytes, SendKind::Response { id });
    }

    fn parse_failed(&mut self, err: ParseError, text: &[u8]) {
        let preview = crate::codec::preview(text, PREVIEW_BYTES);
        match err {
            ParseError::Malformed(error) => {
                self.stats.malformed += 1;
                self.diagnostic(Diagnostic::Malformed { error, preview });
            }
            ParseError::Invalid(invalid) => {
                self.stats.invalid += 1;
                if let Some(id) = invalid.reply_to {
                    let error = ErrorObject::new(INVALID_REQUEST, "Invalid Request");
                    self.send_response(id, Err(&error));
                }
                self.diagnostic(Diagnostic::Invalid {
                    reason: invalid.reason,
                    preview,
                });
            }
        }
    }

    fn handle_one(&mut self, now: Instant, text: &str) {
        match message::parse_message(text) {
            Ok(Message::Response { id, outcome }) => self.on_response(id, outcome),
            Ok(Message::Request { id, method, params }) => {
                self.on_request(text, id, &method, params)
            }
            Ok(Message::Notification { method, params }) => {
                self.on_notification(now, &method, params)
            }
            Err(err) => self.parse_failed(err, text.as_bytes()),
        }
    }

    fn on_response(&mut self, id: RequestId, outcome: Result<&RawValue, ErrorObject>) {
        let key = our_key(&id);
        if self.pending.remove(&key).is_some() {
            let outcome = match outcome {
                Ok(result) => {
                    self.stats.completed_ok += 1;
                    Ok(result.to_owned())
                }
                Err(error) => {
                    self.stats.completed_error += 1;
                    Err(RequestError::Remote(error))
                }
            };
            self.complete(key, outcome);
        } else if key < self.next_id {
            self.stats.late_responses += 1;
        } else {
            self.stats.unknown_responses += 1;
            self.diagnostic(Diagnostic::UnknownResponse { id });
        }
    }

    fn on_request(&mut self, text: &str, id: RequestId, method: &str, params: Option<&RawValue>) {
        if self.server_open.contains(&id) {
            // Answering would give the server two responses for one id.
            self.stats.invalid += 1;
            let preview = crate::codec::preview(text.as_bytes(), PREVIEW_BYTES);
            self.diagnostic(Diagnostic::Invalid {
                reason: InvalidReason::DuplicateRequestId,
                preview,
            });
            return;
        }
        if method == MethodId::Ping.name() {
            self.stats.pings_answered += 1;
            self.send_response(id, Ok(empty_object()));
            return;
        }
        if !self.config.handles(method) {
            self.stats.methods_not_found += 1;
            let error = ErrorObject::method_not_found();
            self.send_response(id, Err(&error));
            return;
        }
        if self.server_open.len() >= self.config.max_server_requests {
            self.stats.server_requests_rejected += 1;
            let error = ErrorObject::internal("Too many concurrent requests");
            self.send_response(id.clone(), Err(&error));
            self.diagnostic(Diagnostic::ServerRequestRejected {
                id,
                method: method.to_owned(),
            });
            return;
        }
        if !self.withdrawn.is_empty() {
            // The server reuses an id it withdrew: the new request is live.
            self.withdrawn.retain(|w| *w != id);
        }
        self.stats.server_requests += 1;
        self.server_open.insert(id.clone());
        self.out.push_back(Output::ServerRequest {
            id,
            method: method.to_owned(),
            params: params.map(ToOwned::to_owned),
        });
    }

    fn on_notification(&mut self, now: Instant, method: &str, params: Option<&RawValue>) {
        match method {
            notifications::PROGRESS => self.on_progress(now, params),
            notifications::CANCELLED => self.on_server_cancelled(params),
            _ => {
                self.stats.notifications_received += 1;
                self.out.push_back(Output::Notification {
                    method: method.to_owned(),
                    params: params.map(ToOwned::to_owned),
                });
            }
        }
    }

    fn on_progress(&mut self, now: Instant, params: Option<&RawValue>) {
        let parsed = params.and_then(|p| serde_json::from_str::<ProgressParams<'_>>(p.get()).ok());
        let key = match parsed.as_ref().map(|p| message::parse_id(p.token)) {
            Some(Ok(RequestId::Number(n))) if n >= 0 => n as u64,
            _ => u64::MAX,
        };
        let Some(parsed) = parsed else {
            self.stats.progress_ignored += 1;
            return;
        };
        let Some(pending) = self.pending.get_mut(&key) else {
            return self.lingering_progress(key, parsed);
        };
        // `!(a > b)` also rejects a NaN, should one ever get through.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let not_increasing = !(parsed.progress > pending.last_progress);
        if pending.flags & F_PROGRESS == 0 || not_increasing {
            self.stats.progress_ignored += 1;
            return;
        }
        pending.last_progress = parsed.progress;
        let mut new_deadline = None;
        if pending.flags & F_RESET != 0 {
            let deadline = pending.deadline_from(now);
            if deadline != pending.deadline {
                pending.deadline = deadline;
                new_deadline = deadline;
            }
        }
        if let Some(deadline) = new_deadline {
            self.push_deadline(deadline, key);
        }
        self.stats.progress_delivered += 1;
        self.out.push_back(Output::Progress {
            id: key,
            progress: Progress {
                progress: parsed.progress,
                total: parsed.total,
                message: parsed.message,
                task: None,
            },
        });
    }

    /// Progress for a token kept after its request completed.
    fn lingering_progress(&mut self, key: u64, parsed: ProgressParams<'_>) {
        let Some(last) = self.lingering.get_mut(&key) else {
            self.stats.progress_ignored += 1;
            return;
        };
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(parsed.progress > *last) {
            self.stats.progress_ignored += 1;
            return;
        }
        *last = parsed.progress;
        self.stats.progress_delivered += 1;
        self.out.push_back(Output::Progress {
            id: key,
            progress: Progress {
                progress: parsed.progress,
                total: parsed.total,
                message: parsed.message,
                task: None,
            },
        });
    }

    fn on_server_cancelled(&mut self, params: Option<&RawValue>) {
        let parsed = params.and_then(|p| serde_json::from_str::<CancelledParams<'_>>(p.get()).ok());
        let Some(parsed) = parsed else {
            self.stats.cancellations_ignored += 1;
            return;
        };
        let Ok(id) = message::parse_id(parsed.request_id) else {
            self.stats.cancellations_ignored += 1;
            return;
        };
        if !self.server_open.remove(&id) {
            self.stats.cancellations_ignored += 1;
            return;
        }
        if self.withdrawn.len() >= self.config.max_server_requests.max(16) {
            self.withdrawn.pop_front();
        }
        self.withdrawn.push_back(id.clone());
        self.stats.server_requests_withdrawn += 1;
        let reason = parsed
            .reason
            .and_then(message::parse_str)
            .map(|r| r.into_owned());
        self.out
            .push_back(Output::ServerRequestCancelled { id, reason });
    }
}

fn empty_object() -> &'static RawValue {
    // A valid JSON text, so this never fails; `{}` is the ping result.
    const EMPTY: &str = "{}";
    serde_json::from_str::<&RawValue>(EMPTY).unwrap_or(RawValue::NULL)
}

/// The pending-map key of a response's id (`u64::MAX`, never used, for
/// ids that cannot be ours).
fn our_key(id: &RequestId) -> u64 {
    match *id {
        RequestId::Number(n) if n >= 0 => n as u64,
        _ => u64::MAX,
    }
}
