//! Tasks, in both eras: the tools `task_sleep`, `task_required` and
//! `task_ask`, and the `tasks/*` methods.
//!
//! Tasks live in [`Ctx`] (global: every connection and session sees every
//! task, as the stateless 2026-07-28 era needs). Each task runs on a
//! thread of its own; a cancelled task stops at its next step.
//!
//! * 2025-11-25 (experimental tasks): `initialize` advertises
//!   `capabilities.tasks`; a `tools/call` with `params.task` (`{ttl?}`) is
//!   answered at once with `{"task": Task}`; `tasks/get` (the Task),
//!   `tasks/result` (blocks until terminal; for `task_ask` it asks the
//!   client `elicitation/create` on its own stream while it waits, and
//!   so for any task's pending questions, one after another),
//!   `tasks/list`, `tasks/cancel`; `notifications/tasks/status` (the Task)
//!   goes to the connection / session that created the task on every
//!   change of its status or status message (HTTP: on the session's GET
//!   listener stream).
//! * 2026-07-28 (extension `io.modelcontextprotocol/tasks`, declared in
//!   each request's client capabilities): a `tools/call` of a task tool is
//!   answered `{"resultType": "task", taskId, status, …, ttlMs,
//!   pollIntervalMs}`; `tasks/get` (with `result` / `error` /
//!   `inputRequests`: the questions still pending), `tasks/update`
//!   (`inputResponses`, some or all of them; the task goes on once none
//!   is pending; keys it does not ask are ignored), `tasks/cancel`;
//!   no `tasks/list` (-32601); `subscriptions/listen` with
//!   `notifications.taskIds` gets `notifications/tasks` (the detailed
//!   task) on every change. Without the extension declared: -32021.
//!
//! Every `tasks/*` request is logged (as any message, by the transport)
//! and also as a `task_request` event; each change of a task as a
//! `task_status` event.
//!
//! What a task does is a [`Work`]: sleep then end (a result, a tool
//! error, a failure), or a [`Plan`] that asks the client questions until
//! it has what it needs. Other modules start tasks of their own tools
//! with [`start`] (`--conformance` does).

use crate::protocol::{
    lock, reply_for, response, rpc_error_response, text_result, Ctx, Era, Outbound, Outcome, Peer,
    RpcError, CAPABILITIES_KEY, MISSING_REQUIRED_CLIENT_CAPABILITY,
};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const RELATED_TASK_KEY: &str = "io.modelcontextprotocol/related-task";
/// The one input request of `task_ask` (same key on every poll).
const INPUT_KEY: &str = "name";
/// A task's `ttl` / `ttlMs` and `pollInterval` / `pollIntervalMs` unless
/// its call says otherwise.
pub const DEFAULT_TTL_MS: u64 = 60_000;
pub const DEFAULT_POLL_MS: u64 = 50;

/// Where a legacy task's `notifications/tasks/status` go.
pub type Notifier = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// All tasks, oldest first.
#[derive(Default)]
pub struct Tasks {
    all: Mutex<Vec<Arc<Task>>>,
    next: AtomicU64,
}

pub struct Task {
    id: String,
    cancel: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
    /// 2025-11-25: the creating connection / session's stream.
    notify: Option<Notifier>,
}

struct State {
    status: &'static str,
    message: Option<String>,
    created: String,
    updated: String,
    ttl: u64,
    poll: u64,
    /// completed: the CallToolResult.
    result: Option<Value>,
    /// failed: `{code, message}`.
    error: Option<Value>,
    /// input_required: the questions not answered yet, by input key
    /// (`{method, params}`, as `inputRequests` shows them).
    inputs: Map<String, Value>,
    /// The client's answers to questions of `inputs`, by input key, not
    /// yet taken by the task.
    answers: Map<String, Value>,
    /// A legacy `tasks/result` is asking the client right now.
    asking: bool,
}

fn terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

impl Task {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The Task of 2025-11-25.
    fn legacy_json(&self) -> Value {
        let s = self.state();
        let mut t = json!({
            "taskId": self.id, "status": s.status, "createdAt": s.created,
            "lastUpdatedAt": s.updated, "ttl": s.ttl, "pollInterval": s.poll,
        });
        if let Some(m) = &s.message {
            t["statusMessage"] = json!(m);
        }
        t
    }

    /// The detailed task of 2026-07-28 (`tasks/get` without resultType).
    fn detail_json(&self) -> Value {
        let s = self.state();
        let mut t = json!({
            "taskId": self.id, "status": s.status, "createdAt": s.created,
            "lastUpdatedAt": s.updated, "ttlMs": s.ttl, "pollIntervalMs": s.poll,
        });
        if let Some(m) = &s.message {
            t["statusMessage"] = json!(m);
        }
        match s.status {
            "completed" => t["result"] = s.result.clone().unwrap_or(Value::Null),
            "failed" => t["error"] = s.error.clone().unwrap_or(Value::Null),
            "input_required" if !s.inputs.is_empty() => {
                t["inputRequests"] = Value::Object(s.inputs.clone());
            }
            _ => {}
        }
        t
    }

    /// Changes a task that is not terminal yet, then tells whoever
    /// listens. `false`: it was terminal already (nothing changed).
    fn update(&self, ctx: &Ctx, f: impl FnOnce(&mut State)) -> bool {
        {
            let mut s = self.state();
            if terminal(s.status) {
                return false;
            }
            f(&mut s);
            s.updated = now_iso8601();
        }
        self.changed.notify_all();
        let (status, message) = {
            let s = self.state();
            (s.status, s.message.clone())
        };
        ctx.log.event(
            "task_status",
            json!({"taskId": self.id, "status": status, "statusMessage": message}),
        );
        if let Some(notify) = &self.notify {
            notify(
                &json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                           "params": self.legacy_json()}),
            );
        }
        ctx.broadcast_task(&self.id, &self.detail_json());
        true
    }

    fn set_status(&self, ctx: &Ctx, status: &'static str, message: Option<String>) -> bool {
        self.update(ctx, |s| {
            s.status = status;
            s.message = message;
        })
    }

    fn complete(&self, ctx: &Ctx, result: Value) -> bool {
        self.update(ctx, |s| {
            s.status = "completed";
            s.message = None;
            s.inputs.clear();
            s.result = Some(result);
        })
    }

    /// Gives the task the answer to its question `key` (if it asks that
    /// now): the question is no longer pending, the task takes the
    /// answers once none is.
    fn answer(&self, key: &str, answer: Value) {
        let mut s = self.state();
        if s.inputs.remove(key).is_some() {
            s.answers.insert(key.to_owned(), answer);
            drop(s);
            self.changed.notify_all();
        }
    }
}

impl Tasks {
    pub fn get(&self, id: &str) -> Option<Arc<Task>> {
        lock(&self.all).iter().find(|t| t.id == id).cloned()
    }

    pub fn exists(&self, id: &str) -> bool {
        self.get(id).is_some()
    }
}

/// Now as `2026-12-03T19:30:00.123Z`.
pub fn now_iso8601() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Whether a 2026-07-28 request declares the tasks extension.
pub fn declares_tasks(params: &Value) -> bool {
    !params["_meta"][CAPABILITIES_KEY]["extensions"][TASKS_EXTENSION].is_null()
}

/// `-32021`: the tasks extension was not declared.
pub fn extension_missing(what: &str) -> RpcError {
    let mut e = RpcError::new(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("{what} needs the client extension {TASKS_EXTENSION}"),
    );
    e.data = Some(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}));
    e
}

/// The definition of a tool that runs as a task (`support`: optional or
/// required); `execution.taskSupport` in the 2025-11-25 listing only.
pub fn tool_definition(
    era: Era,
    name: &str,
    description: &str,
    props: Value,
    support: &str,
) -> Value {
    let mut t = json!({"name": name, "description": description,
                       "inputSchema": {"type": "object", "properties": props}});
    if era == Era::Legacy {
        t["execution"] = json!({"taskSupport": support});
    }
    t
}

/// The tool definitions of the task tools.
pub fn tool_definitions(era: Era) -> Vec<Value> {
    let int = |d: &str| json!({"type": "integer", "description": d});
    let tool = |name: &str, description: &str, props: Value, support: &str| {
        tool_definition(era, name, description, props, support)
    };
    let mut sleep = tool(
        "task_sleep",
        "As a task: `steps` steps of ms/steps each (statusMessage \"step i/steps\"), then \
         `outcome`: ok (\"slept <ms> ms\", structuredContent {ms}), bad_output (the same with \
         structuredContent that breaks the outputSchema), tool_error (isError result) or fail \
         (the task fails with -32603); without a task it sleeps ms and answers",
        json!({"ms": int("total duration (default 300)"),
               "steps": int("default 3"),
               "poll_ms": int("pollInterval (default 50)"),
               "outcome": {"type": "string", "enum": ["ok", "bad_output", "tool_error", "fail"]},
               "ttl_ms": int("ttl (default 60000)")}),
        "optional",
    );
    sleep["outputSchema"] = json!({"type": "object", "properties": {"ms": {"type": "integer"}},
                                   "required": ["ms"]});
    vec![
        sleep,
        tool(
            "task_required",
            "Must be called as a task: sleeps ms, then \"required task done\"",
            json!({"ms": int("default 100")}),
            "required",
        ),
        tool(
            "task_ask",
            "As a task: input_required at once (one elicitation/create asking for a name), then \
             \"hello <name>\" (or declined / cancelled); without a task it is a tool error",
            json!({"message": {"type": "string", "description": "default \"Your name?\""}}),
            "optional",
        ),
    ]
}

fn arg_u64(args: &Value, name: &str, default: u64) -> u64 {
    args.get(name).and_then(Value::as_u64).unwrap_or(default)
}

/// What a task does.
pub enum Work {
    /// Sleeps `ms` in `steps` steps (statusMessage "step i/steps"), then
    /// ends.
    Sleep { ms: u64, steps: u64, end: End },
    /// Asks the client what the plan wants to know, round after round
    /// (status `input_required` while a question is pending), until the
    /// plan is done.
    Ask(Plan),
}

/// How a task that ran ends.
pub enum End {
    /// `completed` with this CallToolResult (which may say `isError`).
    Complete(Value),
    /// `failed` with this error (`{code, message}`), which is also its
    /// statusMessage's text.
    Fail(Value),
}

/// A task's questions: given the answers so far (by input key), either
/// more questions or the result.
pub type Plan = Box<dyn FnMut(&Map<String, Value>) -> Next + Send>;

/// What a [`Plan`] wants next.
pub enum Next {
    /// These questions, by input key: `{method, params}` each.
    Ask(Map<String, Value>),
    /// Done: `completed` with this CallToolResult.
    Done(Value),
}

/// Whether a `tools/call` asks for a task: `params.task` in 2025-11-25,
/// the extension declared in 2026-07-28.
pub fn wants_task(era: Era, params: &Value) -> bool {
    match era {
        Era::Legacy => params.get("task").is_some_and(|t| !t.is_null()),
        Era::Modern => declares_tasks(params),
    }
}

/// The refusal of a call of a tool that must run as a task, made
/// without one: -32601 in 2025-11-25, -32021 (naming the extension) in
/// 2026-07-28.
pub fn task_required(era: Era, name: &str) -> RpcError {
    match era {
        Era::Legacy => RpcError::new(-32601, format!("{name} must be called as a task")),
        Era::Modern => extension_missing(name),
    }
}

/// `tools/call` of the task tools, and the refusal of `params.task` for
/// the other tools. `None`: not for this module.
#[allow(clippy::too_many_arguments)]
pub fn call_tool(
    ctx: &Ctx,
    peer: &Peer,
    era: Era,
    id: &Value,
    name: &str,
    args: &Value,
    params: &Value,
    cancel: &AtomicBool,
) -> Option<Outcome> {
    let reply = |r: Result<Value, RpcError>| Some(reply_for(era, id, r));
    let task_param = params.get("task").filter(|t| !t.is_null());
    if !matches!(name, "task_sleep" | "task_required" | "task_ask") {
        if era == Era::Legacy && task_param.is_some() {
            return reply(Err(RpcError::invalid_params(format!(
                "{name} does not support tasks"
            ))));
        }
        return None;
    }
    if !wants_task(era, params) {
        return match name {
            "task_sleep" => {
                let ms = arg_u64(args, "ms", 300);
                if crate::sleep_cancellable(Duration::from_millis(ms), cancel) {
                    return Some(Outcome::Silent);
                }
                let mut r = text_result(format!("slept {ms} ms"));
                r["structuredContent"] = match args["outcome"].as_str() {
                    Some("bad_output") => json!({"ms": "many"}),
                    _ => json!({"ms": ms}),
                };
                reply(Ok(r))
            }
            "task_required" => reply(Err(task_required(era, name))),
            _ => reply(Ok(json!({
                "content": [{"type": "text", "text": "task_ask must be called as a task"}],
                "isError": true,
            }))),
        };
    }
    let work = match name {
        "task_sleep" => {
            let ms = arg_u64(args, "ms", 300);
            let done = |structured: Value| {
                End::Complete(
                    json!({"content": [{"type": "text", "text": format!("slept {ms} ms")}],
                                     "isError": false, "structuredContent": structured}),
                )
            };
            let end = match args["outcome"].as_str().unwrap_or("ok") {
                "ok" => done(json!({"ms": ms})),
                "bad_output" => done(json!({"ms": "many"})),
                "tool_error" => End::Complete(
                    json!({"content": [{"type": "text", "text": "task failed as a tool"}],
                           "isError": true}),
                ),
                "fail" => End::Fail(json!({"code": -32603, "message": "task failed on purpose"})),
                outcome => {
                    return reply(Err(RpcError::invalid_params(format!(
                        "task_sleep: outcome must be ok, bad_output, tool_error or fail, not {outcome:?}"
                    ))))
                }
            };
            Work::Sleep {
                ms,
                steps: arg_u64(args, "steps", 3).clamp(1, 100_000),
                end,
            }
        }
        "task_required" => Work::Sleep {
            ms: arg_u64(args, "ms", 100),
            steps: 1,
            end: End::Complete(
                json!({"content": [{"type": "text", "text": "required task done"}],
                       "isError": false}),
            ),
        },
        _ => {
            let message = args["message"].as_str().unwrap_or("Your name?").to_owned();
            Work::Ask(Box::new(move |answers: &Map<String, Value>| {
                let Some(answer) = answers.get(INPUT_KEY) else {
                    let ask = json!({"method": "elicitation/create", "params": {
                        "mode": "form",
                        "message": message,
                        "requestedSchema": {"type": "object",
                                            "properties": {"name": {"type": "string"}},
                                            "required": ["name"]},
                    }});
                    return Next::Ask(Map::from_iter([(INPUT_KEY.to_owned(), ask)]));
                };
                let text = match answer["action"].as_str() {
                    Some("accept") => format!(
                        "hello {}",
                        answer["content"]["name"].as_str().unwrap_or("(no name)")
                    ),
                    Some("decline") => "declined".into(),
                    _ => "cancelled".into(),
                };
                Next::Done(json!({"content": [{"type": "text", "text": text}], "isError": false}))
            }))
        }
    };
    let ttl = match era {
        Era::Legacy => task_param
            .and_then(|t| t["ttl"].as_u64())
            .unwrap_or_else(|| arg_u64(args, "ttl_ms", DEFAULT_TTL_MS)),
        Era::Modern => arg_u64(args, "ttl_ms", DEFAULT_TTL_MS),
    };
    let poll = arg_u64(args, "poll_ms", DEFAULT_POLL_MS);
    reply(Ok(start(ctx, peer, era, name, work, ttl, poll)))
}

/// Starts a task of tool `name` doing `work` (on a thread of its own);
/// the answer that creates it: 2025-11-25 `{task}`, 2026-07-28 the flat
/// CreateTaskResult (`resultType: "task"`). A plan's first questions are
/// asked at once: such a task is created `input_required`.
pub fn start(
    ctx: &Ctx,
    peer: &Peer,
    era: Era,
    name: &str,
    work: Work,
    ttl: u64,
    poll: u64,
) -> Value {
    let (work, status, message, inputs) = match work {
        Work::Sleep { ms, steps, end } => (
            Work::Sleep { ms, steps, end },
            "working",
            format!("step 1/{steps}"),
            Map::new(),
        ),
        Work::Ask(mut plan) => match plan(&Map::new()) {
            Next::Ask(asks) => (
                Work::Ask(plan),
                "input_required",
                "waiting for input".to_owned(),
                asks,
            ),
            Next::Done(result) => (
                Work::Sleep {
                    ms: 0,
                    steps: 1,
                    end: End::Complete(result),
                },
                "working",
                "step 1/1".to_owned(),
                Map::new(),
            ),
        },
    };
    let now = now_iso8601();
    let task = Arc::new(Task {
        id: format!("task-{}", ctx.tasks.next.fetch_add(1, Ordering::SeqCst) + 1),
        cancel: AtomicBool::new(false),
        state: Mutex::new(State {
            status,
            message: Some(message),
            created: now.clone(),
            updated: now,
            ttl,
            poll,
            result: None,
            error: None,
            inputs,
            answers: Map::new(),
            asking: false,
        }),
        changed: Condvar::new(),
        notify: match era {
            Era::Legacy => peer.notifier(),
            Era::Modern => None,
        },
    });
    lock(&ctx.tasks.all).push(task.clone());
    ctx.log.event(
        "task_created",
        json!({"taskId": task.id, "tool": name, "status": status}),
    );
    eprintln!("mcpwire-test-server: {name} became {}", task.id);
    let created = match era {
        Era::Legacy => json!({"task": task.legacy_json()}),
        Era::Modern => {
            let mut t = task.detail_json();
            t["resultType"] = json!("task");
            t
        }
    };
    let me = ctx.arc();
    std::thread::spawn(move || run(&me, &task, work));
    created
}

/// A task's thread.
fn run(ctx: &Ctx, task: &Task, work: Work) {
    match work {
        Work::Sleep { ms, steps, end } => {
            let per_step = Duration::from_micros(ms.saturating_mul(1000) / steps);
            for i in 1..=steps {
                if i > 1 {
                    task.set_status(ctx, "working", Some(format!("step {i}/{steps}")));
                }
                if crate::sleep_cancellable(per_step, &task.cancel) {
                    return;
                }
            }
            finish(ctx, task, end);
        }
        Work::Ask(mut plan) => {
            let mut answers = Map::new();
            loop {
                // Until every pending question is answered.
                {
                    let mut s = task.state();
                    loop {
                        if task.cancel.load(Ordering::SeqCst) || terminal(s.status) {
                            return;
                        }
                        if s.inputs.is_empty() {
                            // Working from here on, in the same lock: a
                            // tasks/result between the two would wait
                            // for questions no longer asked.
                            answers.append(&mut s.answers);
                            s.status = "working";
                            break;
                        }
                        s = task
                            .changed
                            .wait_timeout(s, Duration::from_millis(50))
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
                task.set_status(ctx, "working", Some("got the answer".into()));
                if crate::sleep_cancellable(Duration::from_millis(50), &task.cancel) {
                    return;
                }
                match plan(&answers) {
                    Next::Ask(asks) => {
                        task.update(ctx, |s| {
                            s.status = "input_required";
                            s.message = Some("waiting for input".into());
                            s.inputs = asks;
                        });
                    }
                    Next::Done(result) => {
                        task.complete(ctx, result);
                        return;
                    }
                }
            }
        }
    }
}

/// Ends a task that ran.
fn finish(ctx: &Ctx, task: &Task, end: End) {
    match end {
        End::Complete(result) => {
            task.complete(ctx, result);
        }
        End::Fail(error) => {
            task.update(ctx, |s| {
                s.status = "failed";
                s.message = error["message"].as_str().map(str::to_owned);
                s.error = Some(error);
            });
        }
    }
}

/// `tasks/*` of either era.
#[allow(clippy::too_many_arguments)]
pub fn handle(
    ctx: &Ctx,
    peer: &Peer,
    era: Era,
    id: &Value,
    method: &str,
    params: &Value,
    cancel: &AtomicBool,
    out: &dyn Outbound,
) -> Outcome {
    let task_id = params["taskId"].as_str();
    ctx.log.event(
        "task_request",
        json!({"method": method, "taskId": task_id, "id": id}),
    );
    eprintln!(
        "mcpwire-test-server: {method} {}",
        task_id.unwrap_or("(no taskId)")
    );
    let reply = |r: Result<Value, RpcError>| reply_for(era, id, r);
    let known = matches!(
        method,
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update"
    );
    let in_era = match era {
        Era::Legacy => !matches!(method, "tasks/update"),
        Era::Modern => !matches!(method, "tasks/list" | "tasks/result"),
    };
    if !known || !in_era {
        return reply(Err(RpcError::new(
            -32601,
            format!("Method not found: {method}"),
        )));
    }
    if era == Era::Modern && !declares_tasks(params) {
        return reply(Err(extension_missing(method)));
    }
    if method == "tasks/list" {
        let all: Vec<Arc<Task>> = lock(&ctx.tasks.all).clone();
        let tasks: Vec<Value> = all.iter().map(|t| t.legacy_json()).collect();
        return reply(Ok(json!({ "tasks": tasks })));
    }
    let Some(task) = task_id.and_then(|t| ctx.tasks.get(t)) else {
        return reply(Err(RpcError::invalid_params(
            "Failed to retrieve task: Task not found",
        )));
    };
    match (era, method) {
        (Era::Legacy, "tasks/get") => reply(Ok(task.legacy_json())),
        (Era::Modern, "tasks/get") => reply(Ok(task.detail_json())),
        (_, "tasks/cancel") => {
            let cancelled =
                task.set_status(ctx, "cancelled", Some("cancelled by the client".into()));
            task.cancel.store(true, Ordering::SeqCst);
            match era {
                Era::Modern => reply(Ok(json!({}))),
                Era::Legacy if cancelled => reply(Ok(task.legacy_json())),
                Era::Legacy => reply(Err(RpcError::invalid_params("task is already terminal"))),
            }
        }
        (_, "tasks/update") => {
            // Answers to questions the task does not ask (now) are
            // ignored.
            if let Some(responses) = params["inputResponses"].as_object() {
                for (key, answer) in responses {
                    task.answer(key, answer.clone());
                }
            }
            reply(Ok(json!({})))
        }
        _ => task_result(peer, id, &task, cancel, out),
    }
}

/// `tasks/result` (2025-11-25): waits for the task to end; asks the
/// client the task's questions on this request's stream meanwhile, one
/// after another.
fn task_result(
    peer: &Peer,
    id: &Value,
    task: &Task,
    cancel: &AtomicBool,
    out: &dyn Outbound,
) -> Outcome {
    let related = json!({RELATED_TASK_KEY: {"taskId": task.id}});
    loop {
        if cancel.load(Ordering::SeqCst) || !out.alive() {
            return Outcome::Silent;
        }
        let mut s = task.state();
        match s.status {
            "completed" => {
                let mut r = s.result.clone().unwrap_or_else(|| json!({}));
                r["_meta"] = related;
                return Outcome::Reply(response(id, r));
            }
            "failed" => {
                let e = s.error.clone().unwrap_or(Value::Null);
                let mut err = RpcError::new(
                    e["code"].as_i64().unwrap_or(-32603),
                    e["message"].as_str().unwrap_or("task failed"),
                );
                err.data = e.get("data").cloned();
                return Outcome::Reply(rpc_error_response(id, err));
            }
            "cancelled" => {
                return Outcome::Reply(rpc_error_response(
                    id,
                    RpcError::new(-32603, "task was cancelled"),
                ))
            }
            _ => {}
        }
        let question = s.inputs.iter().next().map(|(k, q)| (k.clone(), q.clone()));
        if let (Some((key, question)), false) = (question, s.asking) {
            s.asking = true;
            drop(s);
            let method = question["method"].as_str().unwrap_or("elicitation/create");
            let mut p = question.get("params").cloned().unwrap_or_else(|| json!({}));
            p["_meta"] = related.clone();
            let answer = peer.request_client(out, method, p, cancel);
            task.state().asking = false;
            match answer {
                Ok(msg) => task.answer(
                    &key,
                    msg.get("result")
                        .cloned()
                        .unwrap_or_else(|| json!({"action": "cancel"})),
                ),
                Err(why) => {
                    eprintln!("mcpwire-test-server: tasks/result for {}: {why}", task.id);
                    // Cancelled / gone: the loop's first check ends it;
                    // else poll a while before asking again.
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            continue;
        }
        drop(
            task.changed
                .wait_timeout(s, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner()),
        );
    }
}

/// A `subscriptions/listen` filter's `taskIds`: checked (the extension
/// must be declared) and narrowed to the tasks that exist.
pub fn listen_task_ids(ctx: &Ctx, params: &Value, wanted: &mut Value) -> Result<(), RpcError> {
    let Some(ids) = wanted.get("taskIds").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let Some(ids) = ids.as_array() else {
        return Err(RpcError::invalid_params("taskIds must be an array"));
    };
    if !declares_tasks(params) {
        return Err(extension_missing("subscriptions/listen with taskIds"));
    }
    let known: Vec<Value> = ids
        .iter()
        .filter(|i| i.as_str().is_some_and(|i| ctx.tasks.exists(i)))
        .cloned()
        .collect();
    wanted["taskIds"] = Value::Array(known);
    Ok(())
}
