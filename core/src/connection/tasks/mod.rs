//! Tool calls that become tasks on the server, followed to their end for
//! the application, in both eras (see [`crate::mcp::types::Task`]).
//!
//! ```text
//!  tools/call ─► result is a task ─► (detached: the task is the result)
//!     └─► follow: tasks/get every pollInterval (status change ─► Progress)
//!           working ─► poll again
//!           2026 input_required ─► ServerRequest per new input key ─► respond … ─► tasks/update ─► poll
//!           2025 input_required, completed, failed ─► tasks/result (the server asks on it) ─► its answer
//!           2026 completed ─► the inline result │ failed ─► the inline error
//!           cancelled ─► Cancelled
//!           2026 completed or failed without the inline result (a creation) ─► tasks/get at once
//!     status notifications (2025 notifications/tasks/status, 2026 notifications/tasks) count as polls
//!     the call's deadline, the application's cancel ─► tasks/cancel ─► Timeout / Cancelled
//!  tasks/result {taskId} of the application ─► the same follow, from a task started earlier
//!  2025 tools/call of a tool not listed yet, refused (-32601 / -32600) by a server that
//!     takes tasks ─► the same call again as a task (new id; progress and cancel carry over)
//! ```
//!
//! A 2026-07-28 task's questions are kept in step with the server's
//! snapshots: a key the server no longer asks for is withdrawn from the
//! application (its [`Output::ServerRequestCancelled`]) and never sent in
//! `tasks/update`; the answers go as one `tasks/update` once every key
//! still asked for is answered.
//!
//! The application keeps the id of its `tools/call` (or `tasks/result`)
//! for the whole follow: progress and the completion carry it. The
//! requests this sub-state sends are queued ([`Tasks::next_send`]) for the
//! connection, which stamps them for the era and notes what they are
//! ([`Tasks::sent`]); their completions come back through
//! [`Tasks::complete`].
//!
//! ```text
//!   mod.rs     the state: what is followed, what is queued; the ends
//!   create.rs  the application's calls and whether their answer is a task
//!   follow.rs  polls, notifications, deadlines: a task to its end
//!   input.rs   2026-07-28 questions of a task and their answers
//! ```

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::inputs::Inputs;
use super::types::{Diagnostic, Output};
use super::Era;
use crate::mcp::methods::{notifications, MethodId};
use crate::mcp::types::{ServerCapabilities, Task, TaskStatus, TaskSupport};
use crate::mcp::ClientConfig;
use crate::rpc::{
    ErrorObject, IdMap, Progress, RequestError, RequestId, RequestOptions, RespondStatus,
};

mod create;
mod follow;
mod input;

type Outcome = Result<Box<RawValue>, RequestError>;

/// Poll interval when the server suggests none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Bounds on the server's poll interval (the spec says to respect it;
/// the upper bound only keeps a timer of ours finite).
const MIN_POLL: Duration = Duration::from_millis(10);
const MAX_POLL: Duration = Duration::from_secs(3600);
/// `tasks/get` timeouts in a row before the follow gives up.
const MAX_POLL_TIMEOUTS: u32 = 3;
/// Tasks followed at once, at most.
const MAX_FOLLOWS: usize = 1024;
/// Tools whose task support is remembered, at most.
const MAX_TOOLS: usize = 10_000;
/// Input keys remembered per task (answered ones are never asked twice).
const MAX_INPUT_KEYS: usize = 1024;
/// 2025-11-25 `tasks/result` requests in a row that may fail in the
/// transport (not the task's own error): the ones before the last go back
/// to polling, as the spec allows; the last ends the call.
const MAX_RESULT_FAILURES: u32 = 3;
/// `tasks/update` failures in a row (not a gone task) before the follow
/// gives up; each goes back to polling, and what is still asked is asked
/// again.
const MAX_UPDATE_FAILURES: u32 = 3;
/// JSON-RPC codes with which a 2025-11-25 server refuses a plain call of a
/// tool that must run as a task (-32601 in the spec, -32600 in drafts).
const TASK_REQUIRED_CODES: [i64; 2] = [-32601, -32600];

/// What a request of ours is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    Get,
    Result,
    Update,
    Cancel,
    /// 2025-11-25: a refused `tools/call` sent again as a task.
    Call,
}

impl Purpose {
    fn id(self) -> MethodId {
        match self {
            Purpose::Get => MethodId::GetTask,
            Purpose::Result => MethodId::TaskResult,
            Purpose::Update => MethodId::UpdateTask,
            Purpose::Cancel => MethodId::CancelTask,
            Purpose::Call => MethodId::CallTool,
        }
    }
}

/// Where a task's state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The `tools/call` that created it.
    Created,
    /// The answer to our `tasks/get`.
    Polled,
    /// A status notification.
    Pushed,
}

/// How a 2025-11-25 `tools/call` goes out ([`Tasks::augment`]).
pub(super) enum Augment {
    /// As the caller wrote it.
    Plain,
    /// Asking for a task, with these params.
    AsTask(Box<RawValue>),
    /// As the caller wrote it; a tool not listed yet: if the server says
    /// it must run as a task, it is sent again with these params (the
    /// tool, the params).
    RetryAsTask(String, Value),
}

/// The timeout of a call with `options`, as the caller set it.
fn timed_out(options: &RequestOptions) -> RequestError {
    let ms = options.timeout.map_or(0, |t| t.as_millis() as u64);
    RequestError::Timeout { ms }
}

/// Whether the server cancels tasks: every 2026-07-28 task, a 2025-11-25
/// server that declares `tasks.cancel`.
fn cancels(caps: &ServerCapabilities, era: Era) -> bool {
    era == Era::Modern || caps.tasks_cancel()
}

/// What a `tools/call` result is.
enum Creation {
    /// A plain result.
    NotTask,
    /// A task (the era's shape).
    Task(Task),
    /// Says it is a task, but is not one (why).
    Invalid(String),
}

/// A request for the connection to send on a follow's behalf.
#[derive(Debug)]
pub(super) struct Send {
    pub(super) app: u64,
    pub(super) purpose: Purpose,
    pub(super) params: Value,
    pub(super) options: RequestOptions,
}

impl Send {
    pub(super) fn method_id(&self) -> MethodId {
        self.purpose.id()
    }

    pub(super) fn method(&self) -> &'static str {
        self.purpose.id().name()
    }
}

/// A `tools/call` in flight that may come back as a task.
#[derive(Debug)]
struct Creating {
    options: RequestOptions,
    deadline: Option<Instant>,
    /// Whether the server cancels tasks (`tasks/cancel`).
    cancel_ok: bool,
    /// 2025-11-25, a tool not listed yet: its name and the call's params
    /// asking for a task, to send if the server says it must be one.
    retry: Option<(String, Value)>,
}

/// 2025-11-25: a call sent again as a task, waiting for its answer.
#[derive(Debug)]
struct Retrying {
    /// Our request, once sent.
    id: Option<u64>,
    creating: Creating,
    /// The tool, and the server's refusal of the plain call.
    name: String,
    refused: ErrorObject,
}

/// Why a followed task is given up before its call's deadline.
#[derive(Debug, Clone, Copy)]
enum GiveUp {
    /// The task's `ttl` (ms) passed.
    Ttl(u64),
    /// The client's longest wait ([`ClientConfig::max_task_wait`]).
    MaxWait,
}

/// After a task's `ttl`, how long more it is waited for (clocks differ).
const TTL_GRACE: Duration = Duration::from_secs(1);

/// A task followed for a call of the application.
#[derive(Debug)]
struct Follow {
    task_id: String,
    era: Era,
    options: RequestOptions,
    deadline: Option<Instant>,
    /// When the task is given up though its call has time left: the
    /// task's `ttl` past, or the client's longest wait (which, for the
    /// message).
    gives_up: Option<(Instant, GiveUp)>,
    /// When it was first seen.
    since: Instant,
    /// The id whose progress token the task reports with (2025-11-25):
    /// the creating request's.
    progress_id: u64,
    /// Whether `tasks/cancel` may be sent (2025-11-25: `tasks.cancel`).
    cancel_ok: bool,
    /// A terminal 2026-07-28 answer of `tasks/get` without its inline
    /// result was asked for again once.
    refetched: bool,
    /// A state without its result said the task ended while a poll was in
    /// flight: poll again at once when that poll answers.
    fetch_now: bool,
    /// 2026-07-28: the keys of the `tasks/update` in flight, and the
    /// updates that failed in a row.
    updating: Vec<String>,
    update_failures: u32,
    /// Questions surfaced so far (each gets a fresh id).
    asked: u64,
    /// 2025-11-25 `tasks/result` failures in the transport so far.
    result_failures: u32,
    /// Status and message last told (progress only on a change).
    told: Option<(TaskStatus, Option<String>)>,
    updates: u32,
    interval: Duration,
    poll_at: Option<Instant>,
    /// Our request in flight (`tasks/get`, or `tasks/result` in 2025).
    in_flight: Option<u64>,
    /// 2025-11-25: `tasks/result` sent (the end comes on it).
    fetching: bool,
    timeouts: u32,
    /// 2026-07-28 inputs: keys ever surfaced, keys the application still
    /// answers, and the answers not yet sent.
    seen: BTreeSet<String>,
    pending: BTreeSet<String>,
    responses: Map<String, Value>,
}

/// What a step of the tasks sub-state reads and writes besides its own
/// state: the time, the connection's outputs, the client's settings and
/// the era spoken.
pub(super) struct Ctx<'a> {
    pub(super) now: Instant,
    pub(super) out: &'a mut VecDeque<Output>,
    pub(super) client: &'a ClientConfig,
    pub(super) era: Era,
}

/// The connection's tasks (see the [module docs](self)).
#[derive(Debug)]
pub(super) struct Tasks {
    enabled: bool,
    /// [`ClientConfig::max_task_wait`].
    max_wait: Option<Duration>,
    /// 2025-11-25: each tool's `execution.taskSupport`, from `tools/list`.
    support: HashMap<String, TaskSupport>,
    /// `tools/list` requests whose tools' support is read.
    tool_lists: BTreeSet<u64>,
    creating: IdMap<Creating>,
    follows: IdMap<Follow>,
    /// Our requests in flight → (the application's id, what for).
    ours: IdMap<(u64, Purpose)>,
    sends: VecDeque<Send>,
    /// Our requests whose answer no longer matters (to cancel).
    drops: Vec<u64>,
    /// Inputs surfaced as server requests (by follow and key).
    inputs: Inputs,
    /// 2025-11-25 calls sent again as tasks, by the application's id; and
    /// our request's id → the application's (for progress).
    calls: IdMap<Retrying>,
    alias: IdMap<u64>,
    /// The 2026-07-28 tasks followed changed since the last look.
    watch_changed: bool,
    /// 2025-11-25 progress tokens to keep (true) or let go (false): a
    /// task reports progress with its creating call's token.
    lingers: Vec<(u64, bool)>,
}

impl Tasks {
    pub(super) fn new(client: &ClientConfig) -> Tasks {
        Tasks {
            enabled: client.tasks,
            max_wait: client.max_task_wait,
            support: HashMap::new(),
            tool_lists: BTreeSet::new(),
            creating: IdMap::default(),
            follows: IdMap::default(),
            ours: IdMap::default(),
            sends: VecDeque::new(),
            drops: Vec::new(),
            inputs: Inputs::default(),
            calls: IdMap::default(),
            alias: IdMap::default(),
            watch_changed: false,
            lingers: Vec::new(),
        }
    }

    // ---- what the connection sends for us -------------------------------------

    /// Whether anything waits for the connection: a send, a drop, a
    /// progress token to keep or let go, a change of the watched tasks.
    pub(super) fn has_work(&self) -> bool {
        !self.sends.is_empty()
            || !self.drops.is_empty()
            || !self.lingers.is_empty()
            || self.watch_changed
    }

    /// The next request to send, if any (a call sent again as a task gets
    /// the time its deadline leaves now).
    pub(super) fn next_send(&mut self, now: Instant) -> Option<Send> {
        let mut send = self.sends.pop_front()?;
        if send.purpose == Purpose::Call {
            if let Some(d) = self.calls.get(&send.app).and_then(|r| r.creating.deadline) {
                send.options.timeout = Some(d.saturating_duration_since(now).max(MIN_POLL));
            }
        }
        Some(send)
    }

    /// Progress tokens to keep alive (true) or let go (false).
    pub(super) fn take_lingers(&mut self) -> Vec<(u64, bool)> {
        std::mem::take(&mut self.lingers)
    }

    /// Our requests whose answers are no longer wanted.
    pub(super) fn take_drops(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.drops)
    }

    /// `send` went out as request `id`.
    pub(super) fn sent(&mut self, id: u64, send: &Send) {
        self.ours.insert(id, (send.app, send.purpose));
        if send.purpose == Purpose::Call {
            if let Some(r) = self.calls.get_mut(&send.app) {
                r.id = Some(id);
                self.alias.insert(id, send.app);
            }
        }
        if matches!(send.purpose, Purpose::Get | Purpose::Result) {
            if let Some(f) = self.follows.get_mut(&send.app) {
                f.in_flight = Some(id);
            }
        }
    }

    /// `send` could not go out: the follow ends with `message`.
    pub(super) fn send_failed(&mut self, out: &mut VecDeque<Output>, send: &Send, message: String) {
        if send.purpose == Purpose::Cancel {
            return;
        }
        let error = RequestError::Transport {
            message: format!("{} not sent: {message}", send.method()),
        };
        if send.purpose == Purpose::Call {
            self.end_retry(out, send.app, Err(error), false);
            return;
        }
        self.end(out, send.app, Err(error), "failed", false);
    }

    // ---- the end -------------------------------------------------------------------

    /// The application cancels call `app`: a followed task is cancelled on
    /// the server (`tasks/cancel`, never `notifications/cancelled`). False
    /// when it is not a followed task.
    pub(super) fn cancel(&mut self, out: &mut VecDeque<Output>, app: u64, reason: &str) -> bool {
        let error = RequestError::Cancelled {
            reason: reason.to_owned(),
        };
        // A call sent again as a task: that request is cancelled (the
        // server hears notifications/cancelled; a task it made by then is
        // answered to nobody and ends by its ttl).
        if self.end_retry(out, app, Err(error.clone()), true) {
            return true;
        }
        if !self.follows.contains_key(&app) {
            return false;
        }
        self.end(out, app, Err(error), reason, true);
        true
    }

    /// The connection is closing: every follow ends with `reason`.
    pub(super) fn close(&mut self, out: &mut VecDeque<Output>, reason: &str) {
        let apps: Vec<u64> = self.follows.keys().copied().collect();
        for app in apps {
            let error = RequestError::Closed {
                reason: reason.to_owned(),
            };
            self.end(out, app, Err(error), reason, false);
        }
        let retries: Vec<u64> = self.calls.keys().copied().collect();
        for app in retries {
            let error = RequestError::Closed {
                reason: reason.to_owned(),
            };
            // The engine closes its request.
            self.end_retry(out, app, Err(error), false);
        }
        self.sends.clear();
        self.creating.clear();
    }

    /// Ends call `app` sent again as a task with `outcome`, once: it
    /// leaves `calls` (a later cancel or close finds nothing), its queued
    /// send goes, and its request, if out, is cancelled (`drop_request`)
    /// or left to the engine. False when `app` is no such call.
    fn end_retry(
        &mut self,
        out: &mut VecDeque<Output>,
        app: u64,
        outcome: Outcome,
        drop_request: bool,
    ) -> bool {
        let Some(retrying) = self.calls.remove(&app) else {
            return false;
        };
        self.sends.retain(|s| s.app != app);
        if let Some(id) = retrying.id {
            self.alias.remove(&id);
            if drop_request {
                self.drops.push(id);
            }
        }
        out.push_back(Output::Complete { id: app, outcome });
        true
    }

    /// Ends the follow of `app` with `outcome`: its open inputs are
    /// withdrawn, its request in flight dropped, and (`cancel_task`) the
    /// task cancelled on the server.
    fn end(
        &mut self,
        out: &mut VecDeque<Output>,
        app: u64,
        outcome: Outcome,
        why: &str,
        cancel_task: bool,
    ) {
        let Some(f) = self.follows.remove(&app) else {
            return;
        };
        self.watch_changed |= f.modern();
        if !f.modern() && f.options.progress {
            self.lingers.push((f.progress_id, false));
        }
        if f.progress_id != app {
            self.alias.remove(&f.progress_id);
        }
        if let Some(id) = f.in_flight {
            // Its answer (or the cancel's) still comes here (it stays in
            // `ours`) and is dropped: no follow.
            self.drops.push(id);
        }
        self.sends.retain(|s| s.app != app);
        self.inputs.withdraw(out, app, |_| true, why);
        // Another follow of the same task still wants it.
        let shared = self.follows.values().any(|o| o.task_id == f.task_id);
        if cancel_task && f.cancel_ok && !shared {
            out.push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                "task {}: {why}; cancelling it on the server",
                f.task_id
            ))));
            self.queue_cancel(app, &f.task_id);
        }
        out.push_back(Output::Complete { id: app, outcome });
    }
}

impl Follow {
    fn new(
        task_id: String,
        era: Era,
        options: RequestOptions,
        (since, deadline, max_wait): (Instant, Option<Instant>, Option<Duration>),
        progress_id: u64,
        cancel_ok: bool,
    ) -> Follow {
        Follow {
            task_id,
            era,
            options,
            deadline,
            gives_up: max_wait
                .and_then(|d| since.checked_add(d))
                .map(|at| (at, GiveUp::MaxWait)),
            since,
            progress_id,
            cancel_ok,
            refetched: false,
            fetch_now: false,
            updating: Vec::new(),
            update_failures: 0,
            asked: 0,
            result_failures: 0,
            told: None,
            updates: 0,
            interval: DEFAULT_POLL,
            poll_at: None,
            in_flight: None,
            fetching: false,
            timeouts: 0,
            seen: BTreeSet::new(),
            pending: BTreeSet::new(),
            responses: Map::new(),
        }
    }

    /// Whether the task is a 2026-07-28 one.
    fn modern(&self) -> bool {
        self.era == Era::Modern
    }

    /// Options of a request of ours: the time left of the call, else the
    /// connection's default (`tasks/result` waits for the end: no bound
    /// but the call's).
    fn request_options(&self, now: Instant, purpose: Purpose) -> RequestOptions {
        let mut options = RequestOptions::default();
        match self.deadline {
            Some(d) => options.timeout = Some(d.saturating_duration_since(now).max(MIN_POLL)),
            None if purpose == Purpose::Result => options.timeout = Some(Duration::MAX),
            None => {}
        }
        options
    }
}
