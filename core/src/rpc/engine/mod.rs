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
//!
//! This file holds the engine's state and the application's calls; what
//! the peer sends is handled in `receive`, deadlines (the heap, timeouts,
//! suspension) in `timers`.

mod receive;
mod timers;

use std::cmp::Reverse;
use std::collections::hash_map::HashMap;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::config::{EngineConfig, RequestOptions};
use super::encode;
use super::error::{LocalError, RequestError};
use super::message::{ErrorObject, RequestId, INVALID_REQUEST};
use super::output::{Diagnostic, Output, SendKind, Stats};
use super::slots::IdSlots;
use crate::codec::glimpse::Glimpse;
use crate::codec::json::{Json, Params};
use crate::mcp::methods::MethodId;

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
    /// Its method, when the connection resolved it: the method table
    /// gives the check of its result's usual shape (see `rpc::response`).
    method: Option<MethodId>,
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

/// A map keyed by this side's own ids (request ids, task steps), hashed
/// with [`IdHasher`].
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// The JSON-RPC engine of one connection. See the [module docs](super) for
/// the polling order.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    next_id: u64,
    pending: IdSlots<Pending>,
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
    /// A written message's buffer, given back to write the next one into
    /// ([`recycle`](Self::recycle)); empty (no capacity) when none is.
    spare: Vec<u8>,
}

/// Progress tokens kept alive at once, at most.
const MAX_LINGERING: usize = 1024;

/// The largest buffer kept for the next message (a larger one is freed).
const MAX_SPARE: usize = 16 * 1024;

impl Engine {
    /// A new engine; nothing is sent until the first call.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            config,
            next_id: 0,
            pending: IdSlots::default(),
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
            spare: Vec::new(),
        }
    }

    /// Gives back the buffer of a message the driver has written, to
    /// write the next message into: one allocation and one free less a
    /// call. One buffer of at most 16 KiB is kept; any other is freed.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.capacity() == 0 && buf.capacity() <= MAX_SPARE {
            buf.clear();
            self.spare = buf;
        }
    }

    /// A buffer for a message of about `need` bytes: the given-back one
    /// if there is one.
    fn line_buffer(&mut self, need: usize) -> Vec<u8> {
        let mut bytes = std::mem::take(&mut self.spare);
        bytes.reserve(need);
        bytes
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
        self.request_named(now, method, params.map(Json::from), opts)
    }

    /// A request by the method's name alone (resolved here, once).
    fn request_named(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<Json<'_>>,
        opts: RequestOptions,
    ) -> Result<u64, LocalError> {
        self.request_json(now, method, params, opts, MethodId::of(method))
    }

    /// [`request`](Self::request) with params as [`Params`].
    pub fn request_params(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<&Params>,
        opts: RequestOptions,
    ) -> Result<u64, LocalError> {
        self.request_named(now, method, params.map(Json::from), opts)
    }

    /// The request of [`request`](Self::request) and its kin; `method_id`
    /// is `method` resolved, when the caller did (its result's usual
    /// shape is then proven JSON by that shape's check: see
    /// `rpc::response`).
    pub(crate) fn request_json(
        &mut self,
        now: Instant,
        method: &str,
        params: Option<Json<'_>>,
        opts: RequestOptions,
        method_id: Option<MethodId>,
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
        let mut bytes = self.line_buffer(64 + method.len() + params.map_or(0, |p| p.get().len()));
        let quoted = method_id.map(MethodId::quoted);
        encode::request(&mut bytes, id, method, quoted, params, progress)?;
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
        if opts.quiet || method_id == Some(MethodId::Initialize) {
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
            method: method_id,
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
        encode::check_params(params.map(Json::from), false)?;
        let mut bytes = self.line_buffer(48 + method.len() + params.map_or(0, |p| p.get().len()));
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
        let Some(pending) = self.pending.remove(id) else {
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
        if self.pending.remove(id).is_none() {
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
            if self.pending.contains(key) {
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
        let mut ids: Vec<u64> = self.pending.iter().map(|(id, _)| id).collect();
        ids.sort_unstable();
        for id in ids {
            self.pending.remove(id);
            self.stats.closed += 1;
            self.complete(
                id,
                Err(RequestError::Closed {
                    reason: reason.clone(),
                }),
            );
        }
        self.pending = IdSlots::default();
        self.deadlines = BinaryHeap::new();
        self.server_open = HashSet::new();
        self.withdrawn = VecDeque::new();
        self.out.push_back(Output::Closed { reason });
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

    // ---- internals ---------------------------------------------------

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
        let mut bytes = self.line_buffer(96 + reason.len());
        encode::cancelled(&mut bytes, id, reason);
        self.queue_send(bytes, SendKind::Notification);
    }

    fn send_response(&mut self, id: RequestId, outcome: Result<&RawValue, &ErrorObject>) {
        let mut bytes = self.line_buffer(64);
        encode::response(&mut bytes, &id, outcome);
        self.queue_send(bytes, SendKind::Response { id });
    }
}

/// The pending-map key of a response's id (`u64::MAX`, never used, for
/// ids that cannot be ours).
fn our_key(id: &RequestId) -> u64 {
    match *id {
        RequestId::Number(n) if n >= 0 => n as u64,
        _ => u64::MAX,
    }
}
