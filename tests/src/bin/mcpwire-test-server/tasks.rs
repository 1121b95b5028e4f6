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
//!   client `elicitation/create` on its own stream while it waits),
//!   `tasks/list`, `tasks/cancel`; `notifications/tasks/status` (the Task)
//!   goes to the connection / session that created the task on every
//!   change of its status or status message (HTTP: on the session's GET
//!   listener stream).
//! * 2026-07-28 (extension `io.modelcontextprotocol/tasks`, declared in
//!   each request's client capabilities): a `tools/call` of a task tool is
//!   answered `{"resultType": "task", taskId, status, …, ttlMs,
//!   pollIntervalMs}`; `tasks/get` (with `result` / `error` /
//!   `inputRequests`), `tasks/update` (`inputResponses`), `tasks/cancel`;
//!   no `tasks/list` (-32601); `subscriptions/listen` with
//!   `notifications.taskIds` gets `notifications/tasks` (the detailed
//!   task) on every change. Without the extension declared: -32021.
//!
//! Every `tasks/*` request is logged (as any message, by the transport)
//! and also as a `task_request` event; each change of a task as a
//! `task_status` event.

use crate::protocol::{
    lock, reply_for, response, rpc_error_response, text_result, Ctx, Era, Outbound, Outcome, Peer,
    RpcError, CAPABILITIES_KEY, MISSING_REQUIRED_CLIENT_CAPABILITY,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const RELATED_TASK_KEY: &str = "io.modelcontextprotocol/related-task";
/// The one input request of `task_ask` (same key on every poll).
const INPUT_KEY: &str = "name";

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
    /// input_required: the `elicitation/create` params.
    input: Option<Value>,
    /// The client's answer to `input`, not yet taken by the task.
    answer: Option<Value>,
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
            "input_required" => {
                if let Some(p) = &s.input {
                    t["inputRequests"] =
                        json!({INPUT_KEY: {"method": "elicitation/create", "params": p}});
                }
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
            s.input = None;
            s.result = Some(result);
        })
    }

    /// Gives `task_ask` its answer (an ElicitResult).
    fn answer(&self, answer: Value) {
        let mut s = self.state();
        if s.input.is_some() && s.answer.is_none() {
            s.answer = Some(answer);
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

/// The tool definitions of the task tools; `execution.taskSupport` in
/// the 2025-11-25 listing only.
pub fn tool_definitions(era: Era) -> Vec<Value> {
    let int = |d: &str| json!({"type": "integer", "description": d});
    let tool = |name: &str, description: &str, props: Value, support: &str| {
        let mut t = json!({"name": name, "description": description,
                           "inputSchema": {"type": "object", "properties": props}});
        if era == Era::Legacy {
            t["execution"] = json!({"taskSupport": support});
        }
        t
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
enum Work {
    Sleep {
        ms: u64,
        steps: u64,
        outcome: String,
        text: String,
        /// Its `structuredContent`, if any.
        structured: Option<Value>,
    },
    Ask,
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
    let as_task = match era {
        Era::Legacy => task_param.is_some(),
        Era::Modern => declares_tasks(params),
    };
    if !as_task {
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
            "task_required" if era == Era::Legacy => reply(Err(RpcError::new(
                -32601,
                "task_required must be called as a task",
            ))),
            "task_required" => reply(Err(extension_missing("task_required"))),
            _ => reply(Ok(json!({
                "content": [{"type": "text", "text": "task_ask must be called as a task"}],
                "isError": true,
            }))),
        };
    }
    let (work, poll) = match name {
        "task_sleep" => {
            let ms = arg_u64(args, "ms", 300);
            let outcome = args["outcome"].as_str().unwrap_or("ok");
            if !matches!(outcome, "ok" | "bad_output" | "tool_error" | "fail") {
                return reply(Err(RpcError::invalid_params(format!(
                    "task_sleep: outcome must be ok, bad_output, tool_error or fail, not {outcome:?}"
                ))));
            }
            let structured = match outcome {
                "bad_output" => json!({"ms": "many"}),
                _ => json!({"ms": ms}),
            };
            (
                Work::Sleep {
                    ms,
                    steps: arg_u64(args, "steps", 3).clamp(1, 100_000),
                    outcome: outcome.to_owned(),
                    text: format!("slept {ms} ms"),
                    structured: Some(structured),
                },
                arg_u64(args, "poll_ms", 50),
            )
        }
        "task_required" => (
            Work::Sleep {
                ms: arg_u64(args, "ms", 100),
                steps: 1,
                outcome: "ok".into(),
                text: "required task done".into(),
                structured: None,
            },
            arg_u64(args, "poll_ms", 50),
        ),
        _ => (Work::Ask, arg_u64(args, "poll_ms", 50)),
    };
    let ttl = match era {
        Era::Legacy => task_param
            .and_then(|t| t["ttl"].as_u64())
            .unwrap_or_else(|| arg_u64(args, "ttl_ms", 60_000)),
        Era::Modern => arg_u64(args, "ttl_ms", 60_000),
    };
    let (status, message, input) = match &work {
        Work::Sleep { steps, .. } => ("working", format!("step 1/{steps}"), None),
        Work::Ask => (
            "input_required",
            "waiting for input".to_owned(),
            Some(json!({
                "mode": "form",
                "message": args["message"].as_str().unwrap_or("Your name?"),
                "requestedSchema": {"type": "object",
                                    "properties": {"name": {"type": "string"}},
                                    "required": ["name"]},
            })),
        ),
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
            input,
            answer: None,
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
    let runner = task.clone();
    std::thread::spawn(move || run(&me, &runner, work));
    reply(Ok(created))
}

/// A task's thread.
fn run(ctx: &Ctx, task: &Task, work: Work) {
    match work {
        Work::Sleep {
            ms,
            steps,
            outcome,
            text,
            structured,
        } => {
            let per_step = Duration::from_micros(ms.saturating_mul(1000) / steps);
            for i in 1..=steps {
                if i > 1 {
                    task.set_status(ctx, "working", Some(format!("step {i}/{steps}")));
                }
                if crate::sleep_cancellable(per_step, &task.cancel) {
                    return;
                }
            }
            match outcome.as_str() {
                "fail" => {
                    task.update(ctx, |s| {
                        s.status = "failed";
                        s.message = Some("task failed on purpose".into());
                        s.error =
                            Some(json!({"code": -32603, "message": "task failed on purpose"}));
                    });
                }
                "tool_error" => {
                    task.complete(
                        ctx,
                        json!({"content": [{"type": "text", "text": "task failed as a tool"}],
                               "isError": true}),
                    );
                }
                _ => {
                    let mut result =
                        json!({"content": [{"type": "text", "text": text}], "isError": false});
                    if let Some(s) = structured {
                        result["structuredContent"] = s;
                    }
                    task.complete(ctx, result);
                }
            }
        }
        Work::Ask => {
            let answer = {
                let mut s = task.state();
                loop {
                    if task.cancel.load(Ordering::SeqCst) || terminal(s.status) {
                        return;
                    }
                    if let Some(a) = s.answer.take() {
                        // Asked no more from here on: in the same lock, or
                        // a tasks/result between the two would ask again.
                        s.input = None;
                        s.status = "working";
                        break a;
                    }
                    s = task
                        .changed
                        .wait_timeout(s, Duration::from_millis(50))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            };
            task.update(ctx, |s| {
                s.status = "working";
                s.message = Some("got the answer".into());
                s.input = None;
            });
            if crate::sleep_cancellable(Duration::from_millis(50), &task.cancel) {
                return;
            }
            let text = match answer["action"].as_str() {
                Some("accept") => format!(
                    "hello {}",
                    answer["content"]["name"].as_str().unwrap_or("(no name)")
                ),
                Some("decline") => "declined".into(),
                _ => "cancelled".into(),
            };
            task.complete(
                ctx,
                json!({"content": [{"type": "text", "text": text}], "isError": false}),
            );
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
            if let Some(answer) = params["inputResponses"].get(INPUT_KEY) {
                task.answer(answer.clone());
            }
            reply(Ok(json!({})))
        }
        _ => task_result(peer, id, &task, cancel, out),
    }
}

/// `tasks/result` (2025-11-25): waits for the task to end; asks the
/// client the task's question on this request's stream meanwhile.
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
        if let (Some(input), false, None) = (s.input.clone(), s.asking, s.answer.as_ref()) {
            s.asking = true;
            drop(s);
            let mut p = input;
            p["_meta"] = related.clone();
            let answer = peer.request_client(out, "elicitation/create", p, cancel);
            task.state().asking = false;
            match answer {
                Ok(msg) => task.answer(
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
