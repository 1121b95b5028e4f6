//! `mcpwire serve --demo`: a small MCP server over stdio, built in so the
//! CLI can be tried with nothing else installed.
//!
//! Tools: `echo` (text and structured content), `add` (structured content
//! with an output schema), `countdown` (progress notifications, honours
//! cancellation), `slow_job` (a task, for clients that support tasks).
//! Resource: `demo://readme`. Prompt: `greet`.
//!
//! The protocol is core's [`ServerSession`] (the one server side of
//! mcpwire, shared with `mcpwire bridge`): framing, the handshake,
//! both eras request by request (the 2025-11-25 handshake, and the
//! stateless 2026-07-28 protocol with its envelope, `server/discover`
//! and `resultType`), `ping`, cancellation, ids answered once. This file
//! is only the demo's tools, resource and prompt. Plain std: one loop
//! owns the session; a reader thread feeds it stdin, and each slow call
//! or task answers from a thread of its own through the same channel.
//!
//! Tasks (`slow_job` only; see [`Tasks`]): every client sees `slow_job` in
//! `tools/list` (in 2025-11-25 with `execution.taskSupport: "optional"`).
//! In 2026-07-28, a call whose envelope declares the
//! `io.modelcontextprotocol/tasks` extension gets a task (`tasks/get`,
//! `tasks/cancel`, `tasks/update`; without the extension these are
//! -32021); in 2025-11-25, `params.task` makes it a task (`tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel`). Without a task it just
//! sleeps and answers.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpwire::mcp::methods::notifications;
use mcpwire::modern::Era;
use mcpwire::rpc::{ErrorObject, RequestId};
use mcpwire::server::{ServerEvent, ServerSession};
use serde_json::{json, Value};

const README: &str = "mcpwire demo server\n\nThis resource was read over MCP from the \
server that `mcpwire serve --demo` runs. Try `mcpwire tools -- mcpwire serve --demo`.\n";

/// What the loop that owns the session is told: bytes from stdin, or an
/// answer or a notification from a thread doing slow work.
enum Note {
    Read(Vec<u8>),
    Eof,
    Answer(RequestId, Result<Value, ErrorObject>),
    Notify(&'static str, Value),
}

/// Where threads send their answers.
type Out = mpsc::Sender<Note>;

type Answer = Result<Value, ErrorObject>;

fn error(code: i64, message: impl Into<String>) -> Answer {
    Err(ErrorObject::new(code, message))
}

fn server_info() -> Value {
    json!({"name": "mcpwire-demo", "title": "mcpwire demo server", "version": env!("CARGO_PKG_VERSION")})
}

const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Whether a 2026-07-28 request declares the tasks extension.
fn declares_tasks(params: &Value) -> bool {
    !params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"][TASKS_EXTENSION]
        .is_null()
}

/// Now as ISO 8601 UTC (`2026-12-03T19:30:00Z`).
fn now_iso8601() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
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
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// One `slow_job` task.
struct Task {
    status: &'static str,
    message: Option<String>,
    created: String,
    updated: String,
    result: Option<Value>,
    ttl: u64,
    cancel: Arc<AtomicBool>,
}

/// The ttl of a task whose creator asked for none.
const TASK_TTL_MS: u64 = 300_000;
const TASK_POLL_MS: u64 = 250;

fn terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// Every task, by id (`job-<n>`).
#[derive(Default)]
struct Tasks {
    all: Mutex<Vec<(String, Task)>>,
}

impl Tasks {
    /// The task's fields of either era (`ttl`/`pollInterval` or
    /// `ttlMs`/`pollIntervalMs`; the result in 2026-07-28).
    fn view(&self, id: &str, modern: bool) -> Option<Value> {
        let all = self.all.lock().expect("lock");
        let (_, t) = all.iter().find(|(i, _)| i == id)?;
        let (ttl, poll) = if modern {
            ("ttlMs", "pollIntervalMs")
        } else {
            ("ttl", "pollInterval")
        };
        let mut v = json!({"taskId": id, "status": t.status, "createdAt": t.created,
                           "lastUpdatedAt": t.updated, ttl: t.ttl, poll: TASK_POLL_MS});
        if let Some(m) = &t.message {
            v["statusMessage"] = json!(m);
        }
        if modern {
            if let Some(r) = &t.result {
                v["result"] = r.clone();
            }
        }
        Some(v)
    }

    fn ids(&self) -> Vec<String> {
        let all = self.all.lock().expect("lock");
        all.iter().map(|(i, _)| i.clone()).collect()
    }

    /// Changes a task that is not terminal yet; `false` if it was.
    fn update(&self, id: &str, f: impl FnOnce(&mut Task)) -> bool {
        let mut all = self.all.lock().expect("lock");
        match all.iter_mut().find(|(i, _)| i == id) {
            Some((_, t)) if !terminal(t.status) => {
                f(t);
                t.updated = now_iso8601();
                true
            }
            _ => false,
        }
    }

    /// Starts `slow_job` as a task; returns its id.
    fn start(self: &Arc<Self>, seconds: f64, ttl: u64) -> String {
        let cancel = Arc::new(AtomicBool::new(false));
        let steps = ((seconds * 1000.0 / 250.0).ceil() as u64).max(1);
        let id = {
            let mut all = self.all.lock().expect("lock");
            let id = format!("job-{}", all.len() + 1);
            let now = now_iso8601();
            all.push((
                id.clone(),
                Task {
                    status: "working",
                    message: Some(format!("0/{steps}")),
                    created: now.clone(),
                    updated: now,
                    result: None,
                    ttl,
                    cancel: cancel.clone(),
                },
            ));
            id
        };
        let (tasks, task_id) = (self.clone(), id.clone());
        std::thread::spawn(move || {
            let per_step = Duration::from_secs_f64(seconds.max(0.0) / steps as f64);
            for i in 1..=steps {
                std::thread::sleep(per_step);
                if cancel.load(Ordering::SeqCst) {
                    return;
                }
                tasks.update(&task_id, |t| t.message = Some(format!("{i}/{steps}")));
            }
            tasks.update(&task_id, |t| {
                t.status = "completed";
                t.message = None;
                t.result = Some(slow_job_result(seconds));
            });
        });
        id
    }

    /// Cancels a task that is not terminal yet; `false` if it was.
    fn cancel(&self, id: &str) -> bool {
        self.update(id, |t| {
            t.status = "cancelled";
            t.message = Some("cancelled by the client".into());
            t.cancel.store(true, Ordering::SeqCst);
        })
    }

    /// `tasks/result` (2025-11-25), on a thread of its own: waits for the
    /// end of the task, then answers.
    fn answer_result(self: &Arc<Self>, out: &Out, id: RequestId, task_id: String) {
        let (tasks, out) = (self.clone(), out.clone());
        std::thread::spawn(move || loop {
            let done = {
                let all = tasks.all.lock().expect("lock");
                all.iter()
                    .find(|(i, _)| *i == task_id)
                    .filter(|(_, t)| terminal(t.status))
                    .map(|(_, t)| (t.status, t.result.clone()))
            };
            let answer = match done {
                Some(("completed", Some(mut r))) => {
                    r["_meta"] =
                        json!({"io.modelcontextprotocol/related-task": {"taskId": task_id}});
                    Ok(r)
                }
                Some(_) => error(-32603, "task was cancelled"),
                None => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let _ = out.send(Note::Answer(id, answer));
            return;
        });
    }
}

fn slow_job_result(seconds: f64) -> Value {
    json!({"content": [{"type": "text", "text": format!("done after {} s", json!(seconds))}],
           "isError": false})
}

fn seconds_arg(args: &Value) -> f64 {
    args["seconds"].as_f64().unwrap_or(2.0).clamp(0.0, 3600.0)
}

/// `tasks/*` of either era; `None` if answered later (`tasks/result`).
fn tasks_request(
    tasks: &Arc<Tasks>,
    out: &Out,
    id: &RequestId,
    method: &str,
    params: &Value,
    modern: bool,
) -> Option<Answer> {
    let not_found = || error(-32602, "Failed to retrieve task: Task not found");
    let task_id = params["taskId"].as_str().unwrap_or("").to_owned();
    if modern && !declares_tasks(params) {
        let data = json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}});
        let e = ErrorObject::new(
            -32021,
            format!("{method} needs the client extension {TASKS_EXTENSION}"),
        );
        let e = match serde_json::value::to_raw_value(&data) {
            Ok(data) => e.with_data(data),
            Err(_) => e,
        };
        return Some(Err(e));
    }
    Some(match (modern, method) {
        (_, "tasks/get") => tasks.view(&task_id, modern).map_or_else(not_found, Ok),
        (_, "tasks/cancel") => {
            if tasks.view(&task_id, modern).is_none() {
                return Some(not_found());
            }
            let cancelled = tasks.cancel(&task_id);
            match tasks.view(&task_id, modern) {
                _ if modern => Ok(json!({})),
                Some(v) if cancelled => Ok(v),
                _ => error(-32602, "task is already terminal"),
            }
        }
        (true, "tasks/update") => match tasks.view(&task_id, modern) {
            Some(_) => Ok(json!({})),
            None => not_found(),
        },
        (false, "tasks/result") => {
            if tasks.view(&task_id, modern).is_none() {
                return Some(not_found());
            }
            tasks.answer_result(out, id.clone(), task_id);
            return None;
        }
        (false, "tasks/list") => {
            let all: Vec<Value> = tasks
                .ids()
                .iter()
                .filter_map(|i| tasks.view(i, false))
                .collect();
            Ok(json!({ "tasks": all }))
        }
        _ => error(-32601, format!("Method not found: {method}")),
    })
}

const INSTRUCTIONS: &str =
    "A demo server: echo, add and countdown tools, slow_job (a task), one resource, one prompt.";

/// The answer to `initialize` (`modern` false) or `server/discover`: the
/// session adds the versions.
fn identity(modern: bool) -> Value {
    let tasks = if modern {
        json!({"extensions": {TASKS_EXTENSION: {}}})
    } else {
        json!({"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})
    };
    let mut caps = json!({"tools": {}, "resources": {}, "prompts": {}, "logging": {}});
    if let (Value::Object(caps), Value::Object(tasks)) = (&mut caps, tasks) {
        caps.extend(tasks);
    }
    json!({"capabilities": caps, "serverInfo": server_info(), "instructions": INSTRUCTIONS})
}

/// The tools; `slow_job` runs as a task for a client that can (2026-07-28:
/// one declaring the tasks extension; 2025-11-25: one asking, as its
/// `execution.taskSupport: "optional"` allows), else inline.
fn tools(modern: bool) -> Value {
    let mut tools = json!([
        {
            "name": "echo",
            "title": "Echo",
            "description": "Returns the message it was given.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
        },
        {
            "name": "add",
            "title": "Add",
            "description": "Adds two numbers; the sum comes as structured content too.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
            "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
        },
        {
            "name": "countdown",
            "title": "Countdown",
            "description": "Counts down, reporting progress at each step; can be cancelled.",
            "inputSchema": {"type": "object", "properties": {
                "steps": {"type": "integer", "minimum": 1, "maximum": 100},
                "ms": {"type": "integer", "minimum": 0, "maximum": 10000, "description": "pause per step"}
            }}
        }
    ]);
    {
        let mut job = json!({
            "name": "slow_job",
            "title": "Slow job",
            "description": "Works for `seconds` (default 2); as a task, reports i/n every 250 ms.",
            "inputSchema": {"type": "object", "properties": {
                "seconds": {"type": "number", "minimum": 0, "maximum": 3600}
            }}
        });
        if !modern {
            job["execution"] = json!({"taskSupport": "optional"});
        }
        tools.as_array_mut().expect("array").push(job);
    }
    tools
}

/// Runs the demo server on this process's stdin/stdout until stdin ends.
pub fn run() {
    let (out, notes) = mpsc::channel::<Note>();
    {
        let out = out.clone();
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if out.send(Note::Read(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = out.send(Note::Eof);
        });
    }
    let mut demo = Demo {
        out,
        running: HashMap::new(),
        tasks: Arc::default(),
    };
    let mut session = ServerSession::default();
    let mut stdout = std::io::stdout().lock();
    let mut done = false;
    for note in notes.iter() {
        match note {
            Note::Read(bytes) => session.feed(&bytes),
            Note::Eof => session.finish(),
            Note::Answer(id, answer) => {
                demo.running.remove(&id);
                let outcome = answer.and_then(|v| {
                    serde_json::value::to_raw_value(&v)
                        .map_err(|e| ErrorObject::internal(e.to_string()))
                });
                // Refused when the client cancelled it meanwhile: no answer is due.
                let _ = session.respond(id, outcome);
            }
            Note::Notify(method, params) => {
                if let Ok(params) = serde_json::value::to_raw_value(&params) {
                    let _ = session.notify(method, Some(&params));
                }
            }
        }
        while let Some(event) = session.poll_event() {
            match event {
                ServerEvent::Initialize { id, .. } => {
                    let _ = session.accept(&id, identity(false));
                }
                ServerEvent::Discover { id, .. } => {
                    let _ = session.discover(&id, identity(true));
                }
                ServerEvent::Request {
                    id,
                    method,
                    params,
                    era,
                } => {
                    let params: Value = params
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or(Value::Null);
                    if let Some(answer) = demo.request(&id, &method, &params, era == Era::Modern) {
                        let outcome = answer.and_then(|v| {
                            serde_json::value::to_raw_value(&v)
                                .map_err(|e| ErrorObject::internal(e.to_string()))
                        });
                        let _ = session.respond(id, outcome);
                    }
                }
                ServerEvent::Cancelled { id, .. } => {
                    if let Some(flag) = demo.running.remove(&id) {
                        flag.store(true, Ordering::SeqCst);
                    }
                }
                ServerEvent::Closed { .. } => done = true,
                // We never ask the client anything; other notifications
                // need nothing.
                ServerEvent::Initialized
                | ServerEvent::Notification { .. }
                | ServerEvent::Response { .. }
                | ServerEvent::Diagnostic(_) => {}
            }
        }
        while let Some(line) = session.poll_write() {
            // A closed stdout means the client is gone.
            if stdout.write_all(&line).is_err() {
                return;
            }
        }
        let _ = stdout.flush();
        if done {
            return;
        }
    }
}

/// The demo's state: calls running on threads, tasks.
struct Demo {
    out: Out,
    /// Calls answered by a thread, with their cancel flag.
    running: HashMap<RequestId, Arc<AtomicBool>>,
    tasks: Arc<Tasks>,
}

impl Demo {
    /// The answer to a request, or `None` when a thread answers it later.
    fn request(
        &mut self,
        id: &RequestId,
        method: &str,
        params: &Value,
        modern: bool,
    ) -> Option<Answer> {
        Some(match method {
            // `initialize`, `ping` and `server/discover` are the
            // session's; `logging/setLevel` is never sent in 2026-07-28.
            "logging/setLevel" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": tools(modern)})),
            _ if method.starts_with("tasks/") => {
                return tasks_request(&self.tasks, &self.out, id, method, params, modern)
            }
            "tools/call" => return self.call(id, params, modern),
            "resources/list" => Ok(
                json!({"resources": [{"uri": "demo://readme", "name": "readme", "title": "About this demo", "mimeType": "text/plain"}]}),
            ),
            "resources/templates/list" => Ok(json!({"resourceTemplates": []})),
            "resources/read" => match params["uri"].as_str() {
                Some("demo://readme") => Ok(
                    json!({"contents": [{"uri": "demo://readme", "mimeType": "text/plain", "text": README}]}),
                ),
                Some(other) => error(-32002, format!("Resource not found: {other}")),
                None => error(-32602, "resources/read needs `uri`"),
            },
            "prompts/list" => Ok(
                json!({"prompts": [{"name": "greet", "title": "Greeting", "description": "Asks for a friendly greeting.",
                    "arguments": [{"name": "name", "description": "Who to greet", "required": true}]}]}),
            ),
            "prompts/get" => match (
                params["name"].as_str(),
                params["arguments"]["name"].as_str(),
            ) {
                (Some("greet"), Some(name)) => {
                    Ok(json!({"description": "A friendly greeting", "messages": [
                        {"role": "user", "content": {"type": "text", "text": format!("Please greet {name} warmly, in one sentence.")}}
                    ]}))
                }
                (Some("greet"), None) => error(-32602, "greet needs the argument `name`"),
                _ => error(-32602, "unknown prompt"),
            },
            _ => error(-32601, format!("Method not found: {method}")),
        })
    }

    /// `tools/call`; `None` when a thread answers it later.
    fn call(&mut self, id: &RequestId, params: &Value, modern: bool) -> Option<Answer> {
        let name = params["name"].as_str().unwrap_or("");
        let args = &params["arguments"];
        if !modern && name != "slow_job" && !params["task"].is_null() {
            return Some(error(-32602, format!("{name} does not support tasks")));
        }
        Some(match name {
            "echo" => match args["message"].as_str() {
                Some(m) => Ok(
                    json!({"content": [{"type": "text", "text": m}], "structuredContent": {"message": m}}),
                ),
                None => error(-32602, "echo needs a string `message`"),
            },
            "add" => match (args["a"].as_f64(), args["b"].as_f64()) {
                (Some(a), Some(b)) => {
                    let sum = a + b;
                    let sum = if sum.fract() == 0.0 && sum.abs() < 9e15 {
                        json!(sum as i64)
                    } else {
                        json!(sum)
                    };
                    Ok(
                        json!({"content": [{"type": "text", "text": sum.to_string()}], "structuredContent": {"sum": sum}}),
                    )
                }
                _ => error(-32602, "add needs numbers `a` and `b`"),
            },
            "countdown" => {
                let steps = args["steps"].as_u64().unwrap_or(5).clamp(1, 100);
                let ms = args["ms"].as_u64().unwrap_or(200).min(10_000);
                let token = params["_meta"]["progressToken"].clone();
                let flag = Arc::new(AtomicBool::new(false));
                self.running.insert(id.clone(), flag.clone());
                let (out, id) = (self.out.clone(), id.clone());
                std::thread::spawn(move || {
                    for i in 1..=steps {
                        std::thread::sleep(Duration::from_millis(ms));
                        if flag.load(Ordering::SeqCst) {
                            return; // cancelled: no answer, per the spec
                        }
                        if !token.is_null() {
                            let progress = json!({"progressToken": token, "progress": i,
                                "total": steps, "message": format!("{} to go", steps - i)});
                            let _ = out.send(Note::Notify(notifications::PROGRESS, progress));
                        }
                    }
                    let done = json!({"content": [{"type": "text", "text": format!("Liftoff after {steps} steps")}]});
                    let _ = out.send(Note::Answer(id, Ok(done)));
                });
                return None;
            }
            "slow_job" => {
                let seconds = seconds_arg(args);
                let as_task = if modern {
                    declares_tasks(params)
                } else {
                    !params["task"].is_null()
                };
                if !as_task {
                    let (out, id) = (self.out.clone(), id.clone());
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs_f64(seconds));
                        let _ = out.send(Note::Answer(id, Ok(slow_job_result(seconds))));
                    });
                    return None;
                }
                let ttl = params["task"]["ttl"].as_u64().unwrap_or(TASK_TTL_MS);
                let task_id = self.tasks.start(seconds, ttl);
                let mut view = self.tasks.view(&task_id, modern).expect("just started");
                if modern {
                    view["resultType"] = json!("task");
                    Ok(view)
                } else {
                    Ok(json!({ "task": view }))
                }
            }
            other => Ok(
                json!({"content": [{"type": "text", "text": format!("unknown tool: {other}")}], "isError": true}),
            ),
        })
    }
}
