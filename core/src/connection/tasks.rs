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
use crate::rpc::{ErrorObject, Progress, RequestError, RequestId, RequestOptions, RespondStatus};

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
    creating: HashMap<u64, Creating>,
    follows: HashMap<u64, Follow>,
    /// Our requests in flight → (the application's id, what for).
    ours: HashMap<u64, (u64, Purpose)>,
    sends: VecDeque<Send>,
    /// Our requests whose answer no longer matters (to cancel).
    drops: Vec<u64>,
    /// Inputs surfaced as server requests (by follow and key).
    inputs: Inputs,
    /// 2025-11-25 calls sent again as tasks, by the application's id; and
    /// our request's id → the application's (for progress).
    calls: HashMap<u64, Retrying>,
    alias: HashMap<u64, u64>,
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
            creating: HashMap::new(),
            follows: HashMap::new(),
            ours: HashMap::new(),
            sends: VecDeque::new(),
            drops: Vec::new(),
            inputs: Inputs::default(),
            calls: HashMap::new(),
            alias: HashMap::new(),
            watch_changed: false,
            lingers: Vec::new(),
        }
    }

    // ---- requests of the application ---------------------------------------

    /// 2025-11-25: how `tools/call` goes out to a server that takes
    /// tasks (see [`Augment`]). One parse of the params decides it.
    pub(super) fn augment(
        &self,
        method: Option<MethodId>,
        params: Option<&RawValue>,
        options: &RequestOptions,
        caps: &ServerCapabilities,
    ) -> Augment {
        let augmentable = method.is_some_and(|m| m.spec().task_augmentable);
        if !self.enabled || !augmentable || !caps.tasks_for_tool_calls() {
            return Augment::Plain;
        }
        let Some(value) = params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok()) else {
            return Augment::Plain;
        };
        let Some(name) = value.get("name").and_then(Value::as_str) else {
            return Augment::Plain;
        };
        let wanted = match self.support.get(name).copied() {
            Some(TaskSupport::Required) => true,
            Some(TaskSupport::Optional) => options.detach_task,
            Some(TaskSupport::Forbidden) => false,
            // Asked for as a task by the caller: nothing to retry.
            None if value.get("task").is_some() => return Augment::Plain,
            // Not listed yet: plain; if the server says it must run as a
            // task, it is sent again as one.
            None => {
                let name = name.to_owned();
                return with_task(value, options)
                    .map_or(Augment::Plain, |v| Augment::RetryAsTask(name, v));
            }
        };
        if !wanted {
            return Augment::Plain;
        }
        with_task(value, options)
            .and_then(|v| serde_json::value::to_raw_value(&v).ok())
            .map_or(Augment::Plain, Augment::AsTask)
    }

    /// Request `id` of the application was sent: a `tools/call` that may
    /// come back as a task (`augmented`: asked for as one, 2025-11-25;
    /// `retry`: the tool and params to send again as a task if refused;
    /// in 2026-07-28 the server decides), or a `tools/list` whose tools
    /// say whether they take tasks.
    pub(super) fn requested(
        &mut self,
        (now, era): (Instant, Era),
        id: u64,
        method: Option<MethodId>,
        options: RequestOptions,
        caps: &ServerCapabilities,
        augment: Augment,
    ) {
        let modern = era == Era::Modern;
        let (augmented, retry) = match augment {
            Augment::Plain => (false, None),
            Augment::AsTask(_) => (true, None),
            Augment::RetryAsTask(name, params) => (false, Some((name, params))),
        };
        match method {
            Some(MethodId::CallTool)
                if augmented || retry.is_some() || (self.enabled && modern) =>
            {
                let deadline = options.timeout.and_then(|t| now.checked_add(t));
                let creating = Creating {
                    options,
                    deadline,
                    cancel_ok: cancels(caps, era),
                    retry,
                };
                self.creating.insert(id, creating);
            }
            Some(MethodId::ListTools) if self.enabled && !modern && caps.tasks_for_tool_calls() => {
                self.tool_lists.insert(id);
            }
            _ => {}
        }
    }

    /// The application's id of request `id` of ours (a call sent again as
    /// a task reports progress under its own id).
    pub(super) fn app_id(&self, id: u64) -> Option<u64> {
        self.alias.get(&id).copied()
    }

    /// `tasks/result {taskId}` of the application, under `app` (an id the
    /// connection reserved): follows the task to its end.
    pub(super) fn await_task(
        &mut self,
        (now, era): (Instant, Era),
        app: u64,
        params: Option<&RawValue>,
        options: RequestOptions,
        caps: &ServerCapabilities,
    ) -> Result<(), &'static str> {
        let task_id = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .and_then(|v| v.get("taskId").and_then(Value::as_str).map(str::to_owned))
            .ok_or("tasks/result needs a string taskId")?;
        if self.follows.len() >= MAX_FOLLOWS {
            return Err("too many tasks followed at once");
        }
        let deadline = options.timeout.and_then(|t| now.checked_add(t));
        let follow = Follow::new(
            task_id,
            era,
            options,
            (now, deadline, self.max_wait),
            app,
            cancels(caps, era),
        );
        self.watch_changed |= era == Era::Modern;
        self.follows.insert(app, follow);
        self.poll(now, app);
        Ok(())
    }

    // ---- what the connection sends for us -------------------------------------

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

    // ---- timers -----------------------------------------------------------------

    /// When a poll or a deadline is due next.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        let follows = self
            .follows
            .values()
            .flat_map(|f| {
                [
                    f.poll_at.filter(|_| f.in_flight.is_none()),
                    f.deadline,
                    f.gives_up.map(|(at, _)| at),
                ]
            })
            .flatten();
        // Calls waiting to be sent again as tasks (a 2025-11-25 session
        // starting over): their deadline (once sent, the engine's).
        let queued = self
            .calls
            .values()
            .filter(|r| r.id.is_none())
            .filter_map(|r| r.creating.deadline);
        follows.chain(queued).min()
    }

    /// Deadlines over: the task is cancelled and the call times out; polls
    /// due: `tasks/get`.
    pub(super) fn handle_timeout(&mut self, now: Instant, out: &mut VecDeque<Output>) {
        let queued: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, r)| r.id.is_none() && r.creating.deadline.is_some_and(|d| d <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in queued {
            let error = timed_out(&self.calls[&app].creating.options);
            self.end_retry(out, app, Err(error), false);
        }
        let late: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.deadline.is_some_and(|d| d <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in late {
            let error = timed_out(&self.follows[&app].options);
            self.end(out, app, Err(error), "timed out", true);
        }
        let expired: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.gives_up.is_some_and(|(at, _)| at <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in expired {
            let f = &self.follows[&app];
            let waited = now.saturating_duration_since(f.since).as_secs();
            let state = f.told.as_ref().map_or("not ended".to_owned(), |(s, _)| {
                format!("{s:?}").to_lowercase()
            });
            let why = match f.gives_up.map(|(_, why)| why) {
                Some(GiveUp::Ttl(ms)) if ms % 1000 == 0 => format!(
                    "it outlived its ttl of {} s, the time the server keeps it",
                    ms / 1000
                ),
                Some(GiveUp::Ttl(ms)) => {
                    format!("it outlived its ttl of {ms} ms, the time the server keeps it")
                }
                _ => format!(
                    "the client waits for a task at most {} s (ClientConfig::max_task_wait)",
                    self.max_wait.map_or(0, |d| d.as_secs())
                ),
            };
            let error = RequestError::TaskExpired {
                task_id: f.task_id.clone(),
                message: format!(
                    "task {} given up after {waited} s, still {state}: {why}; it was cancelled",
                    f.task_id
                ),
            };
            self.end(out, app, Err(error), "given up", true);
        }
        let due: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.in_flight.is_none() && f.poll_at.is_some_and(|t| t <= now))
            .map(|(app, _)| *app)
            .collect();
        for app in due {
            self.poll(now, app);
        }
    }

    /// Asks the server to cancel task `task_id` (nobody follows it).
    fn queue_cancel(&mut self, app: u64, task_id: &str) {
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Cancel,
            params: serde_json::json!({ "taskId": task_id }),
            options: RequestOptions::default(),
        });
    }

    fn poll(&mut self, now: Instant, app: u64) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        f.poll_at = None;
        let options = f.request_options(now, Purpose::Get);
        let params = serde_json::json!({ "taskId": f.task_id });
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Get,
            params,
            options,
        });
    }

    // ---- completions -------------------------------------------------------------

    /// A completion for the application's request `id` (or one of ours):
    /// `Some` to deliver, `None` when this sub-state took it (a task result
    /// has the shape of the era `cx` speaks only).
    pub(super) fn complete(
        &mut self,
        cx: &mut Ctx<'_>,
        id: u64,
        outcome: Outcome,
    ) -> Option<(u64, Outcome)> {
        if self.ours.is_empty() && self.creating.is_empty() && self.tool_lists.is_empty() {
            // No task in sight (the common case): nothing to look up.
            return Some((id, outcome));
        }
        if let Some((app, purpose)) = self.ours.remove(&id) {
            self.ours_done(cx, app, id, purpose, outcome);
            return None;
        }
        if self.tool_lists.remove(&id) {
            if let Ok(raw) = &outcome {
                self.read_support(raw);
            }
            return Some((id, outcome));
        }
        let Some(mut creating) = self.creating.remove(&id) else {
            return Some((id, outcome));
        };
        let raw = match outcome {
            Ok(raw) => raw,
            Err(RequestError::Remote(e))
                if creating.retry.is_some() && TASK_REQUIRED_CODES.contains(&e.code) =>
            {
                let (name, params) = creating.retry.take()?;
                return self.call_as_task(cx, id, (name, params), creating, &e);
            }
            e => return Some((id, e)),
        };
        let creation = task_of_creation(&raw, cx.era);
        self.created(cx, id, id, creating, creation, raw)
    }

    /// A `tools/call` answered with `raw` (which is `creation`): a task to
    /// follow (`None`: it is followed), or what to deliver to the
    /// application's `app`. `progress_id`: the request that carried the
    /// call's progress token.
    fn created(
        &mut self,
        cx: &mut Ctx<'_>,
        app: u64,
        progress_id: u64,
        creating: Creating,
        creation: Creation,
        raw: Box<RawValue>,
    ) -> Option<(u64, Outcome)> {
        let modern = cx.era == Era::Modern;
        let task = match creation {
            Creation::NotTask => return Some((app, Ok(raw))),
            Creation::Invalid(why) => {
                let message = format!("the server answered tools/call with an invalid task: {why}");
                return Some((app, Err(RequestError::Transport { message })));
            }
            Creation::Task(task) => task,
        };
        if creating.options.detach_task {
            return Some((app, Ok(raw)));
        }
        if self.follows.len() >= MAX_FOLLOWS {
            // Nobody would follow it: the server need not run it.
            if creating.cancel_ok {
                self.queue_cancel(app, &task.task_id);
            }
            let message = format!(
                "too many tasks followed at once; task {} is cancelled",
                task.task_id
            );
            return Some((app, Err(RequestError::Transport { message })));
        }
        let follow = Follow::new(
            task.task_id.clone(),
            cx.era,
            creating.options,
            (cx.now, creating.deadline, self.max_wait),
            progress_id,
            creating.cancel_ok,
        );
        self.watch_changed |= modern;
        if !modern && creating.options.progress {
            self.lingers.push((progress_id, true));
        }
        self.follows.insert(app, follow);
        self.apply(cx, app, task, Source::Created);
        None
    }

    /// 2025-11-25: the server refused call `app` of tool `name` as a plain
    /// call with `error`; it must run as a task. Sent again as one (a new
    /// id) with the time the call has left.
    fn call_as_task(
        &mut self,
        cx: &mut Ctx<'_>,
        app: u64,
        (name, params): (String, Value),
        creating: Creating,
        error: &ErrorObject,
    ) -> Option<(u64, Outcome)> {
        cx.out
            .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                "tools/call {name:?} refused as a plain call ({}: {}); the server takes tasks, \
             so it is sent again as a task",
                error.code, error.message
            ))));
        let mut options = creating.options;
        if let Some(deadline) = creating.deadline {
            let left = deadline.saturating_duration_since(cx.now);
            if left.is_zero() {
                return Some((app, Err(RequestError::Remote(error.clone()))));
            }
            options.timeout = Some(left);
        }
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Call,
            params,
            options,
        });
        let retrying = Retrying {
            id: None,
            creating,
            name,
            refused: error.clone(),
        };
        self.calls.insert(app, retrying);
        None
    }

    fn ours_done(
        &mut self,
        cx: &mut Ctx<'_>,
        app: u64,
        id: u64,
        purpose: Purpose,
        outcome: Outcome,
    ) {
        if purpose == Purpose::Call {
            return self.call_done(cx, app, id, outcome);
        }
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        if f.in_flight == Some(id) {
            f.in_flight = None;
        }
        match (purpose, outcome) {
            (Purpose::Cancel | Purpose::Call, _) => {}
            (Purpose::Update, Ok(_)) => {
                f.updating.clear();
                f.update_failures = 0;
                if f.in_flight.is_none() && f.poll_at.is_none() {
                    f.poll_at = cx.now.checked_add(f.interval);
                }
            }
            (Purpose::Update, Err(e)) => {
                // A task the server no longer knows needs no cancel.
                let gone = matches!(&e, RequestError::Remote(o) if o.code == -32602);
                if !gone && f.update_failures + 1 < MAX_UPDATE_FAILURES {
                    // Perhaps applied already (a re-issue), perhaps not:
                    // the next state says; what it still asks is asked
                    // again.
                    f.update_failures += 1;
                    for key in std::mem::take(&mut f.updating) {
                        f.seen.remove(&key);
                    }
                    cx.out
                        .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                            "tasks/update of task {} failed ({e}); polling it again",
                            f.task_id
                        ))));
                    if f.in_flight.is_none() {
                        self.poll(cx.now, app);
                    }
                    return;
                }
                let message = format!("tasks/update of task {} failed: {e}", f.task_id);
                let error = Err(RequestError::Transport { message });
                self.end(cx.out, app, error, "tasks/update failed", !gone);
            }
            (Purpose::Result, Err(e))
                if matches!(
                    e,
                    RequestError::Transport { .. }
                        | RequestError::Timeout { .. }
                        | RequestError::Http { .. }
                ) && f.result_failures + 1 < MAX_RESULT_FAILURES =>
            {
                // Not the task's own error: the task goes on; back to
                // polling (the spec allows it after a failed tasks/result).
                f.result_failures += 1;
                f.fetching = false;
                f.poll_at = cx.now.checked_add(f.interval);
                cx.out
                    .push_back(Output::Diagnostic(Diagnostic::Transport(format!(
                        "tasks/result of task {} failed ({e}); polling it again",
                        f.task_id
                    ))));
            }
            (Purpose::Result, outcome) => self.end(cx.out, app, outcome, "done", false),
            (Purpose::Get, Ok(raw)) => {
                f.timeouts = 0;
                let value: Option<Value> = serde_json::from_str(raw.get()).ok();
                match value.as_ref().and_then(Task::from_value) {
                    Some(task) if task.task_id == f.task_id => {
                        self.apply(cx, app, task, Source::Polled)
                    }
                    _ => {
                        let message = format!(
                            "tasks/get of task {} answered with something that is not that task",
                            f.task_id
                        );
                        let error = Err(RequestError::Transport { message });
                        self.end(cx.out, app, error, "invalid tasks/get", true);
                    }
                }
            }
            (Purpose::Get, Err(RequestError::Timeout { .. }))
                if f.timeouts + 1 < MAX_POLL_TIMEOUTS =>
            {
                f.timeouts += 1;
                f.poll_at = cx.now.checked_add(f.interval);
            }
            (Purpose::Get, Err(e)) => self.end(cx.out, app, Err(e), "tasks/get failed", false),
        }
    }

    /// 2025-11-25: the answer to call `app` sent again as a task (our
    /// request `id`).
    fn call_done(&mut self, cx: &mut Ctx<'_>, app: u64, id: u64, outcome: Outcome) {
        if self.calls.get(&app).and_then(|r| r.id) != Some(id) {
            // Cancelled or closed already: the application was told.
            self.alias.remove(&id);
            return;
        }
        let Some(retrying) = self.calls.remove(&app) else {
            return;
        };
        let asked = retrying.creating.options.timeout;
        let delivered = match outcome {
            Ok(raw) => {
                // Only a 2025-11-25 call is sent again as a task.
                let creation = task_of_creation(&raw, Era::Legacy);
                if matches!(creation, Creation::Task(_)) && self.support.len() < MAX_TOOLS {
                    // It is a task tool: the next call asks at once.
                    self.support.insert(retrying.name, TaskSupport::Required);
                }
                let creating = retrying.creating;
                self.created(cx, app, id, creating, creation, raw)
            }
            Err(RequestError::Timeout { ms }) => {
                // The caller's timeout, not the time that was left.
                let ms = asked.map_or(ms, |t| t.as_millis() as u64);
                Some((app, Err(RequestError::Timeout { ms })))
            }
            // Refused as a task too: the tool takes none; the first
            // refusal says more.
            Err(RequestError::Remote(e)) if TASK_REQUIRED_CODES.contains(&e.code) => {
                Some((app, Err(RequestError::Remote(retrying.refused))))
            }
            Err(e) => Some((app, Err(e))),
        };
        if let Some((id_app, outcome)) = delivered {
            self.alias.remove(&id);
            cx.out.push_back(Output::Complete {
                id: id_app,
                outcome,
            });
        }
    }

    /// A task's state (a poll's answer, a notification, the creation):
    /// progress on a change, then what the status asks for.
    fn apply(&mut self, cx: &mut Ctx<'_>, app: u64, task: Task, source: Source) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        // The server keeps the task `ttl` after its creation: past it
        // (and a second of grace) nothing will end it.
        if let Some(ms) = task.ttl_ms {
            let at = f
                .since
                .checked_add(Duration::from_millis(ms).saturating_add(TTL_GRACE));
            if let Some(at) = at.filter(|at| f.gives_up.is_none_or(|(g, _)| *at < g)) {
                f.gives_up = Some((at, GiveUp::Ttl(ms)));
            }
        }
        if let Some(ms) = task.poll_interval_ms {
            f.interval = Duration::from_millis(ms).clamp(MIN_POLL, MAX_POLL);
        }
        let state = (task.status, task.status_message.clone());
        if f.told.as_ref() != Some(&state) {
            f.told = Some(state);
            f.updates += 1;
            if f.options.progress {
                cx.out.push_back(Output::Progress {
                    id: app,
                    progress: Progress {
                        progress: f64::from(f.updates),
                        total: None,
                        message: Some(format!("task {}: {}", task.task_id, task.describe())),
                        task: serde_json::to_value(&task).ok(),
                    },
                });
            }
        }
        let modern = f.era == Era::Modern;
        if modern {
            // The questions still asked for are the ones of this state (an
            // input_required state that lists none says nothing of them).
            match (task.status, task.input_requests()) {
                (TaskStatus::InputRequired, None) => {}
                (TaskStatus::InputRequired, asked) => self.reconcile(cx.out, app, asked),
                _ => self.reconcile(cx.out, app, None),
            }
        }
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        match task.status {
            TaskStatus::Cancelled => {
                let reason = match &task.status_message {
                    Some(m) => format!("the server cancelled task {}: {m}", task.task_id),
                    None => format!("the server cancelled task {}", task.task_id),
                };
                self.end(
                    cx.out,
                    app,
                    Err(RequestError::Cancelled { reason }),
                    "cancelled",
                    false,
                );
            }
            TaskStatus::Completed | TaskStatus::Failed if modern => match terminal_outcome(&task) {
                Some(outcome) => self.end(cx.out, app, outcome, "done", false),
                None if source != Source::Polled || !f.refetched => {
                    // A creation or a push need not carry the result:
                    // tasks/get does (asked once more if its own answer
                    // lacked it).
                    f.refetched |= source == Source::Polled;
                    if f.in_flight.is_none() {
                        self.poll(cx.now, app);
                    } else {
                        f.fetch_now = true;
                    }
                }
                None => {
                    let message = format!(
                        "task {} is {} but carries no {}",
                        task.task_id,
                        task.status,
                        if task.status == TaskStatus::Completed {
                            "result"
                        } else {
                            "error"
                        }
                    );
                    let error = Err(RequestError::Transport { message });
                    self.end(cx.out, app, error, "invalid task", false);
                }
            },
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::InputRequired if !modern => {
                // 2025-11-25: the end (and the server's questions) come on
                // tasks/result.
                if !f.fetching {
                    f.fetching = true;
                    f.poll_at = None;
                    let options = f.request_options(cx.now, Purpose::Result);
                    let params = serde_json::json!({ "taskId": f.task_id });
                    self.sends.push_back(Send {
                        app,
                        purpose: Purpose::Result,
                        params,
                        options,
                    });
                }
            }
            TaskStatus::InputRequired => {
                if let Err(message) = self.ask(cx, app, &task) {
                    let error = Err(RequestError::Transport { message });
                    self.end(cx.out, app, error, "input not possible", true);
                    return;
                }
                self.schedule(cx.now, app);
            }
            _ => self.schedule(cx.now, app),
        }
        // Answers go once this state's new questions are out too.
        if let Some(f) = self.follows.get(&app) {
            if modern && f.pending.is_empty() && !f.responses.is_empty() {
                self.send_update(cx.now, app);
            }
        }
    }

    /// The next poll after the interval (at once when an end was said
    /// without its result).
    fn schedule(&mut self, now: Instant, app: u64) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        if f.in_flight.is_some() || f.fetching || f.poll_at.is_some() {
            return;
        }
        if std::mem::take(&mut f.fetch_now) {
            self.poll(now, app);
        } else {
            f.poll_at = now.checked_add(f.interval);
        }
    }

    /// 2026-07-28: keeps task `app`'s open questions in step with the
    /// server's last state (`asked`: its `inputRequests`, `None` when it
    /// asks nothing). A question no longer asked is withdrawn and its
    /// answer never sent (each key of `tasks/update` MUST be outstanding);
    /// it is forgotten, so a later state that asks it again is asked anew.
    fn reconcile(
        &mut self,
        out: &mut VecDeque<Output>,
        app: u64,
        asked: Option<&Map<String, Value>>,
    ) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        if f.pending.is_empty() && f.responses.is_empty() {
            return;
        }
        let still = |k: &str| asked.is_some_and(|m| m.contains_key(k));
        let gone: BTreeSet<String> = f.pending.iter().filter(|k| !still(k)).cloned().collect();
        f.pending.retain(|k| still(k));
        let unsent: Vec<String> = f.responses.keys().filter(|k| !still(k)).cloned().collect();
        for k in gone.iter().chain(&unsent) {
            f.seen.remove(k);
            f.responses.remove(k);
        }
        if !gone.is_empty() {
            let why = "the server no longer asks for it";
            self.inputs.withdraw(out, app, |k| gone.contains(k), why);
        }
    }

    /// Sends task `app`'s answers in one `tasks/update`.
    fn send_update(&mut self, now: Instant, app: u64) {
        let Some(f) = self.follows.get_mut(&app) else {
            return;
        };
        let responses = std::mem::take(&mut f.responses);
        f.updating = responses.keys().cloned().collect();
        let params = serde_json::json!({
            "taskId": f.task_id,
            "inputResponses": responses,
        });
        let options = f.request_options(now, Purpose::Update);
        self.sends.push_back(Send {
            app,
            purpose: Purpose::Update,
            params,
            options,
        });
    }

    /// 2026-07-28 `input_required`: each question not seen before goes to
    /// the application as a server request.
    fn ask(&mut self, cx: &mut Ctx<'_>, app: u64, task: &Task) -> Result<(), String> {
        let Some(requests) = task.input_requests() else {
            return Ok(());
        };
        // A task followed twice is asked once (by the first to see it).
        let elsewhere: BTreeSet<String> = self
            .follows
            .iter()
            .filter(|(a, f)| **a != app && f.task_id == task.task_id)
            .flat_map(|(_, f)| f.seen.iter().cloned())
            .collect();
        let Some(f) = self.follows.get_mut(&app) else {
            return Ok(());
        };
        let handled = cx.client.handled_requests();
        for (key, request) in requests {
            if f.seen.contains(key) || elsewhere.contains(key) {
                continue;
            }
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("task {}: input {key:?} has no method", f.task_id))?;
            if !handled.contains(&method) {
                return Err(format!(
                    "task {} asked for {method} (input {key:?}), which this client did not declare",
                    f.task_id
                ));
            }
            if f.seen.len() >= MAX_INPUT_KEYS {
                return Err(format!("task {} asked for too many inputs", f.task_id));
            }
            f.seen.insert(key.clone());
            f.pending.insert(key.clone());
            let params = request
                .get("params")
                .and_then(|p| serde_json::value::to_raw_value(p).ok());
            f.asked += 1;
            let rid = RequestId::String(format!("task-input-{app}-{}-{key}", f.asked));
            self.inputs.open(rid.clone(), app, key.clone());
            cx.out.push_back(Output::ServerRequest {
                id: rid,
                method: method.to_owned(),
                params,
            });
        }
        Ok(())
    }

    /// An answer to a task's input, if `id` is one; `None` otherwise.
    pub(super) fn respond(
        &mut self,
        now: Instant,
        out: &mut VecDeque<Output>,
        id: &RequestId,
        response: &Result<Box<RawValue>, ErrorObject>,
    ) -> Option<RespondStatus> {
        let (app, key) = match self.inputs.answer(id) {
            Ok(open) => open,
            // One of ours withdrawn lately; any other id is not ours.
            Err(withdrawn) => return withdrawn.then_some(RespondStatus::Withdrawn),
        };
        let Some(f) = self.follows.get_mut(&app) else {
            return Some(RespondStatus::Withdrawn);
        };
        let answer = match response {
            Ok(raw) => serde_json::from_str::<Value>(raw.get())
                .map_err(|e| format!("its answer is not JSON: {e}")),
            Err(e) => Err(e.message.clone()),
        };
        match answer {
            Ok(v) => {
                f.pending.remove(&key);
                f.responses.insert(key, v);
                if f.pending.is_empty() {
                    self.send_update(now, app);
                }
            }
            Err(message) => {
                let message = format!(
                    "the application could not answer input {key:?} of task {}: {message}",
                    f.task_id
                );
                let error = Err(RequestError::Transport { message });
                self.end(out, app, error, "answer failed", true);
            }
        }
        Some(RespondStatus::Sent)
    }

    // ---- notifications -------------------------------------------------------------

    /// A server notification: a status change of a task followed counts as
    /// a poll's answer.
    pub(super) fn notified(&mut self, cx: &mut Ctx<'_>, method: &str, params: Option<&RawValue>) {
        if !matches!(method, notifications::TASK_STATUS | notifications::TASKS)
            || self.follows.is_empty()
        {
            return;
        }
        let Some(task) = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .as_ref()
            .and_then(Task::from_value)
        else {
            return;
        };
        // Every follow of that task (it may be awaited twice).
        let apps: Vec<u64> = self
            .follows
            .iter()
            .filter(|(_, f)| f.task_id == task.task_id)
            .map(|(app, _)| *app)
            .collect();
        for app in apps {
            self.apply(cx, app, task.clone(), Source::Pushed);
        }
    }

    /// The 2026-07-28 task ids followed, when they changed since the last
    /// call (for the `subscriptions/listen` filter).
    pub(super) fn take_watch_change(&mut self) -> Option<BTreeSet<String>> {
        if !std::mem::take(&mut self.watch_changed) {
            return None;
        }
        let ids = self
            .follows
            .values()
            .filter(|f| f.modern())
            .map(|f| f.task_id.clone())
            .collect();
        Some(ids)
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

    /// 2025-11-25: remembers the tools' task support from a `tools/list` page.
    fn read_support(&mut self, raw: &RawValue) {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tools: Vec<Value>,
        }
        let Ok(page) = serde_json::from_str::<Page>(raw.get()) else {
            return;
        };
        for tool in page.tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            // Forbidden is kept too: a tool listed is a tool known (one
            // not listed may be retried as a task when refused).
            let support = TaskSupport::of_value(&tool);
            if self.support.len() < MAX_TOOLS || self.support.contains_key(name) {
                self.support.insert(name.to_owned(), support);
            }
        }
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

/// The task a `tools/call` result created, if it is one, in the shape of
/// the era spoken: 2026-07-28 `resultType: "task"` with the task's fields
/// beside it; 2025-11-25 `{task: {taskId, …}}`. A plain result is only
/// scanned, never built.
fn task_of_creation(raw: &RawValue, era: Era) -> Creation {
    #[derive(serde::Deserialize)]
    struct Shape<'a> {
        #[serde(rename = "resultType", default, borrow)]
        result_type: Option<std::borrow::Cow<'a, str>>,
        #[serde(default, borrow)]
        task: Option<&'a RawValue>,
    }
    let Ok(shape) = serde_json::from_str::<Shape<'_>>(raw.get()) else {
        return Creation::NotTask;
    };
    let parsed = if era == Era::Modern {
        if shape.result_type.as_deref() != Some("task") {
            return Creation::NotTask;
        }
        serde_json::from_str::<Task>(raw.get())
    } else {
        let Some(task) = shape.task else {
            return Creation::NotTask;
        };
        match serde_json::from_str::<Value>(task.get()) {
            Ok(v) if v.get("taskId").is_some_and(Value::is_string) => serde_json::from_value(v),
            _ => return Creation::NotTask,
        }
    };
    match parsed {
        Ok(task) => Creation::Task(task),
        Err(e) => Creation::Invalid(e.to_string()),
    }
}

/// `params` of `tools/call` asking for a task (2025-11-25 `task: {ttl}`).
fn with_task(mut params: Value, options: &RequestOptions) -> Option<Value> {
    let mut task = Map::new();
    if let Some(ttl) = options.task_ttl {
        task.insert("ttl".into(), Value::from(ttl.as_millis() as u64));
    }
    params
        .as_object_mut()?
        .entry("task")
        .or_insert(Value::Object(task));
    Some(params)
}

/// A 2026-07-28 terminal task's inline result or error.
fn terminal_outcome(task: &Task) -> Option<Outcome> {
    match task.status {
        TaskStatus::Completed => {
            let result = task.inline_result()?;
            serde_json::value::to_raw_value(result).ok().map(Ok)
        }
        TaskStatus::Failed => {
            let error = task.inline_error()?;
            let error: ErrorObject = serde_json::from_value(error.clone()).ok()?;
            Some(Err(RequestError::Remote(error)))
        }
        _ => None,
    }
}
