//! What the engine asks of its driver ([`Output`]), and what it counts
//! ([`Stats`]).

use serde_json::value::RawValue;

use super::error::RequestError;
use super::message::{InvalidReason, RequestId};

/// One action for the driver, from [`Engine::poll_output`](super::Engine::poll_output).
#[derive(Debug)]
pub enum Output {
    /// One outbound JSON-RPC message, serialized compactly: no framing, no
    /// trailing newline, never a raw `\n` inside.
    ///
    /// The driver MUST write `bytes` to the transport as one message (stdio:
    /// followed by `\n`; HTTP: as one POST body), in the order polled.
    /// `kind` tells what the peer will send back for it.
    Send {
        /// The message.
        bytes: Vec<u8>,
        /// What it is.
        kind: SendKind,
    },
    /// Request `id` has ended; this is its only completion.
    ///
    /// The driver MUST hand `outcome` to whoever waits for `id` and forget
    /// the id: it never appears in another `Complete`.
    Complete {
        /// The id returned by `request()`.
        id: u64,
        /// The raw `result` (which may be `null`), or how it failed.
        outcome: Result<Box<RawValue>, RequestError>,
    },
    /// Progress for request `id` (which asked for it), strictly increasing.
    ///
    /// The driver SHOULD hand it to that request's progress observer; it may
    /// drop it.
    Progress {
        /// The id returned by `request()`.
        id: u64,
        /// The progress values.
        progress: Progress,
    },
    /// A request from the server, for a method in
    /// [`EngineConfig::handled_requests`](super::EngineConfig::handled_requests).
    ///
    /// The driver MUST hand it to the application, which MUST answer with
    /// exactly one [`Engine::respond`](super::Engine::respond) for `id`
    /// (unless a [`Output::ServerRequestCancelled`] for `id` comes first,
    /// after which its answer is optional and dropped).
    ServerRequest {
        /// The server's id (its own id space, apart from ours).
        id: RequestId,
        /// The method.
        method: String,
        /// The raw params, if any.
        params: Option<Box<RawValue>>,
    },
    /// The server withdrew its request `id` (`notifications/cancelled`).
    ///
    /// The driver SHOULD tell the application to stop working on it; a later
    /// `respond` for it is accepted and dropped.
    ServerRequestCancelled {
        /// The server's id.
        id: RequestId,
        /// The server's reason, if given.
        reason: Option<String>,
    },
    /// A notification from the server (other than progress and cancellation,
    /// which the engine routes itself).
    ///
    /// The driver SHOULD hand it to the application; it may drop it.
    Notification {
        /// The method, e.g. `notifications/tools/list_changed`.
        method: String,
        /// The raw params, if any.
        params: Option<Box<RawValue>>,
    },
    /// Something the peer sent was dropped (it is also counted in
    /// [`Stats`]).
    ///
    /// The driver SHOULD log it; no action is required.
    Diagnostic(Diagnostic),
    /// The engine is closed: every pending request has completed with
    /// [`RequestError::Closed`] before this. It is the last output.
    ///
    /// The driver MUST stop driving this engine (it may drop it).
    Closed {
        /// The reason given to `close`.
        reason: String,
    },
}

/// What a [`Output::Send`] message is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendKind {
    /// Our request `id`: a response will come back (HTTP: as JSON or SSE).
    Request {
        /// The request id.
        id: u64,
    },
    /// A notification: nothing comes back (HTTP: 202).
    Notification,
    /// Our answer to the server's request `id`: nothing comes back (HTTP: 202).
    Response {
        /// The server's id.
        id: RequestId,
    },
}

/// The values of one `notifications/progress`.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Progress so far (strictly increasing per request).
    pub progress: f64,
    /// Total, if known.
    pub total: Option<f64>,
    /// A human-readable message, if any.
    pub message: Option<String>,
    /// Set when the call became a task on the server: the task's state as
    /// last seen, as JSON (a status change; `message` then describes it;
    /// `mcpwire::mcp::types::Task::from_value` reads it).
    pub task: Option<serde_json::Value>,
}

/// Something the peer sent that the engine dropped.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diagnostic {
    /// The text was not UTF-8 or not JSON.
    Malformed {
        /// The parser's message.
        error: String,
        /// The start of the text, printable.
        preview: String,
    },
    /// Valid JSON, but not a valid JSON-RPC message. (When it was meant as a
    /// request with a usable id, it was answered with -32600 as well.)
    Invalid {
        /// What is wrong.
        reason: InvalidReason,
        /// The start of the text, printable.
        preview: String,
    },
    /// A response whose id we never used.
    UnknownResponse {
        /// The id it carries.
        id: RequestId,
    },
    /// A server request beyond
    /// [`max_server_requests`](super::EngineConfig::max_server_requests),
    /// answered with "Too many concurrent requests".
    ServerRequestRejected {
        /// The server's id.
        id: RequestId,
        /// Its method.
        method: String,
    },
    /// The peer stopped reading: twice
    /// [`max_queued_bytes`](super::EngineConfig::max_queued_bytes) wait to be
    /// written, and the engine's own replies, answers and cancellations are
    /// dropped until it reads again (once per run of drops).
    SendsDropped {
        /// Bytes waiting.
        unwritten: usize,
        /// The limit they exceed (twice `max_queued_bytes`).
        limit: usize,
    },
}

/// Counters since the engine was created (a snapshot: `Copy`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests queued by `request()`.
    pub requests_sent: u64,
    /// Notifications queued by `notify()`.
    pub notifications_sent: u64,
    /// Requests completed with a result.
    pub completed_ok: u64,
    /// Requests completed with a remote error.
    pub completed_error: u64,
    /// Requests completed by timeout.
    pub timed_out: u64,
    /// Requests completed by `cancel()`.
    pub cancelled: u64,
    /// Requests failed by the transport (`fail()`).
    pub failed: u64,
    /// Requests completed by `close()`.
    pub closed: u64,
    /// Responses to our ids that had already completed (late after a
    /// timeout or cancel, or duplicates): dropped silently.
    pub late_responses: u64,
    /// Responses with an id we never used (also a diagnostic).
    pub unknown_responses: u64,
    /// Texts that were not UTF-8 or not JSON (also a diagnostic).
    pub malformed: u64,
    /// Messages skipped unread for exceeding a size limit (a stdio line,
    /// an SSE event, an HTTP body); the request each answered, when known,
    /// failed with `RequestError::TooLarge`.
    pub oversize: u64,
    /// Messages in which a lone UTF-16 surrogate escape (half an emoji,
    /// as JavaScript writes it) was replaced by U+FFFD.
    pub surrogates_repaired: u64,
    /// JSON values that were not valid JSON-RPC messages (also a diagnostic).
    pub invalid: u64,
    /// Batches received (when accepted).
    pub batches: u64,
    /// Progress notifications delivered as `Output::Progress`.
    pub progress_delivered: u64,
    /// Progress notifications ignored: unknown token, request without
    /// progress, not strictly increasing, or malformed params.
    pub progress_ignored: u64,
    /// Other notifications surfaced.
    pub notifications_received: u64,
    /// Server requests surfaced as `Output::ServerRequest`.
    pub server_requests: u64,
    /// `ping` requests answered by the engine.
    pub pings_answered: u64,
    /// Server requests answered with -32601 "Method not found".
    pub methods_not_found: u64,
    /// Server requests answered with "Too many concurrent requests".
    pub server_requests_rejected: u64,
    /// Server requests withdrawn by the server's `notifications/cancelled`.
    pub server_requests_withdrawn: u64,
    /// `notifications/cancelled` from the server naming no open request.
    pub cancellations_ignored: u64,
    /// `respond()` calls for withdrawn server requests, dropped.
    pub responds_dropped: u64,
    /// Replies, answers and cancellations dropped because twice
    /// [`max_queued_bytes`](super::EngineConfig::max_queued_bytes) were
    /// waiting to be written (the peer stopped reading); also a
    /// [`Diagnostic::SendsDropped`] at the first of a run.
    pub sends_dropped: u64,
    /// Requests answered from the connection's cache of results the
    /// server said may be cached (2026-07-28 `ttlMs`), without a round
    /// trip (filled in by the connection).
    pub cache_hits: u64,
    /// Not a counter but the level at the snapshot: bytes not yet written
    /// to the peer (queued, and held by the driver). While the peer does
    /// not read it stays under twice
    /// [`max_queued_bytes`](super::EngineConfig::max_queued_bytes).
    pub waiting_bytes: usize,
}
