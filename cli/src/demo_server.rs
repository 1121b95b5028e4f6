//! `mcpwire serve --demo`: a small MCP server over stdio, built in so the
//! CLI can be tried with nothing else installed.
//!
//! Tools: `echo` (text and structured content), `add` (structured content
//! with an output schema), `countdown` (progress notifications, honours
//! cancellation), `slow_job` (a task, for clients that support tasks).
//! Resource: `demo://readme`. Prompt: `greet`.
//! Plain std: one reader loop, one thread per slow call and per task.
//!
//! Tasks (`slow_job` only; see [`Tasks`]): in 2026-07-28, a client that
//! declares the `io.modelcontextprotocol/tasks` extension gets a task
//! (`tasks/get`, `tasks/cancel`, `tasks/update`), and sees `slow_job` in
//! `tools/list`; in 2025-11-25, `params.task` makes it a task (`tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel`). Without a task it just
//! sleeps and answers.
//!
//! Dual-era, as real servers are: the 2025-11-25 handshake (`initialize`)
//! and the stateless 2026-07-28 protocol (`server/discover`; each request
//! carries `io.modelcontextprotocol/protocolVersion` in `_meta`; results
//! say `resultType: "complete"`; `initialize` and `ping` are gone there),
//! request by request.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

const README: &str = "mcpwire demo server\n\nThis resource was read over MCP from the \
server that `mcpwire serve --demo` runs. Try `mcpwire tools -- mcpwire serve --demo`.\n";

type Out = Arc<Mutex<std::io::Stdout>>;

fn send(out: &Out, msg: &Value) {
    let mut line = serde_json::to_vec(msg).expect("JSON");
    line.push(b'\n');
    let mut o = out.lock().expect("stdout lock");
    // A closed stdout means the client is gone; nothing left to do.
    let _ = o.write_all(&line).and_then(|()| o.flush());
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The stateless era's version, and the versions served, newest first.
const MODERN: &str = "2026-07-28";
const VERSIONS: &[&str] = &[
    MODERN,
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

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
    fn answer_result(self: &Arc<Self>, out: &Out, id: Value, task_id: String) {
        let (tasks, out) = (self.clone(), out.clone());
        std::thread::spawn(move || loop {
            let done = {
                let all = tasks.all.lock().expect("lock");
                all.iter()
                    .find(|(i, _)| *i == task_id)
                    .filter(|(_, t)| terminal(t.status))
                    .map(|(_, t)| (t.status, t.result.clone()))
            };
            match done {
                Some(("completed", Some(mut r))) => {
                    r["_meta"] =
                        json!({"io.modelcontextprotocol/related-task": {"taskId": task_id}});
                    return send(&out, &result(&id, r));
                }
                Some(_) => return send(&out, &error(&id, -32603, "task was cancelled")),
                None => std::thread::sleep(Duration::from_millis(50)),
            }
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
    id: &Value,
    method: &str,
    params: &Value,
    modern: bool,
) -> Option<Value> {
    let not_found = || error(id, -32602, "Failed to retrieve task: Task not found");
    let task_id = params["taskId"].as_str().unwrap_or("").to_owned();
    if modern && !declares_tasks(params) {
        return Some(json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32021,
            "message": format!("{method} needs the client extension {TASKS_EXTENSION}"),
            "data": {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        }}));
    }
    Some(match (modern, method) {
        (_, "tasks/get") => match tasks.view(&task_id, modern) {
            Some(v) => result(id, v),
            None => not_found(),
        },
        (_, "tasks/cancel") => {
            if tasks.view(&task_id, modern).is_none() {
                return Some(not_found());
            }
            let cancelled = tasks.cancel(&task_id);
            match tasks.view(&task_id, modern) {
                _ if modern => result(id, json!({})),
                Some(v) if cancelled => result(id, v),
                _ => error(id, -32602, "task is already terminal"),
            }
        }
        (true, "tasks/update") => match tasks.view(&task_id, modern) {
            Some(_) => result(id, json!({})),
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
            result(id, json!({ "tasks": all }))
        }
        _ => error(id, -32601, &format!("Method not found: {method}")),
    })
}

const INSTRUCTIONS: &str =
    "A demo server: echo, add and countdown tools, slow_job (a task), one resource, one prompt.";

/// Whether request `method` with `params` is of the 2026-07-28 era
/// (`Err`: the error answer, a version this server does not serve).
fn modern(id: &Value, method: &str, params: &Value) -> Result<bool, Value> {
    match &params["_meta"]["io.modelcontextprotocol/protocolVersion"] {
        Value::String(v) if v == MODERN => Ok(true),
        Value::Null => Ok(method == "server/discover"),
        other => Err(json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32022,
            "message": format!("Unsupported protocol version {other}"),
            "data": {"supported": VERSIONS, "requested": other},
        }})),
    }
}

/// A 2026-07-28 answer: its result says it is complete.
fn stamp(modern: bool, mut reply: Value) -> Value {
    if modern {
        if let Some(r) = reply.get_mut("result").and_then(Value::as_object_mut) {
            r.entry("resultType").or_insert(json!("complete"));
        }
    }
    reply
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
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let running: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>> = Default::default();
    let tasks: Arc<Tasks> = Default::default();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                send(
                    &out,
                    &error(&Value::Null, -32700, &format!("Parse error: {e}")),
                );
                continue;
            }
        };
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let id = msg.get("id").cloned();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = id else {
            // Notifications.
            if method == "notifications/cancelled" {
                let key = params["requestId"].to_string();
                if let Some(flag) = running.lock().expect("lock").get(&key) {
                    flag.store(true, Ordering::SeqCst);
                }
            }
            continue;
        };
        if method.is_empty() {
            continue; // a response to us: we never ask anything
        }
        let modern = match modern(&id, method, &params) {
            Ok(m) => m,
            Err(refusal) => {
                send(&out, &refusal);
                continue;
            }
        };
        let reply = match method {
            "initialize" | "ping" | "logging/setLevel" if modern => error(
                &id,
                -32601,
                &format!("Method not found: {method} (not in {MODERN})"),
            ),
            "server/discover" => result(
                &id,
                json!({
                    "supportedVersions": VERSIONS,
                    "capabilities": {
                        "extensions": {TASKS_EXTENSION: {}},
                        "tools": {}, "resources": {}, "prompts": {}, "logging": {},
                    },
                    "serverInfo": server_info(),
                    "instructions": INSTRUCTIONS,
                    "ttlMs": 0,
                    "cacheScope": "private",
                    "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
                }),
            ),
            "initialize" => {
                let asked = params["protocolVersion"].as_str().unwrap_or("2025-11-25");
                let version = match asked {
                    "2025-11-25" | "2025-06-18" | "2025-03-26" | "2024-11-05" => asked,
                    _ => "2025-11-25",
                };
                result(
                    &id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {
                            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
                            "tools": {}, "resources": {}, "prompts": {}, "logging": {},
                        },
                        "serverInfo": server_info(),
                        "instructions": INSTRUCTIONS,
                    }),
                )
            }
            "ping" | "logging/setLevel" => result(&id, json!({})),
            "tools/list" => result(&id, json!({"tools": tools(modern)})),
            _ if method.starts_with("tasks/") => {
                match tasks_request(&tasks, &out, &id, method, &params, modern) {
                    Some(reply) => reply,
                    None => continue, // answered by a thread of its own
                }
            }
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or("");
                let args = &params["arguments"];
                if !modern && name != "slow_job" && !params["task"].is_null() {
                    let refusal = error(&id, -32602, &format!("{name} does not support tasks"));
                    send(&out, &refusal);
                    continue;
                }
                match name {
                    "echo" => match args["message"].as_str() {
                        Some(m) => result(
                            &id,
                            json!({"content": [{"type": "text", "text": m}], "structuredContent": {"message": m}}),
                        ),
                        None => error(&id, -32602, "echo needs a string `message`"),
                    },
                    "add" => match (args["a"].as_f64(), args["b"].as_f64()) {
                        (Some(a), Some(b)) => {
                            let sum = a + b;
                            let sum_json = if sum.fract() == 0.0 && sum.abs() < 9e15 {
                                json!(sum as i64)
                            } else {
                                json!(sum)
                            };
                            result(
                                &id,
                                json!({"content": [{"type": "text", "text": sum_json.to_string()}], "structuredContent": {"sum": sum_json}}),
                            )
                        }
                        _ => error(&id, -32602, "add needs numbers `a` and `b`"),
                    },
                    "countdown" => {
                        let steps = args["steps"].as_u64().unwrap_or(5).clamp(1, 100);
                        let ms = args["ms"].as_u64().unwrap_or(200).min(10_000);
                        let token = params["_meta"]["progressToken"].clone();
                        let flag = Arc::new(AtomicBool::new(false));
                        running
                            .lock()
                            .expect("lock")
                            .insert(id.to_string(), flag.clone());
                        let out = out.clone();
                        let running = running.clone();
                        std::thread::spawn(move || {
                            for i in 1..=steps {
                                std::thread::sleep(Duration::from_millis(ms));
                                if flag.load(Ordering::SeqCst) {
                                    running.lock().expect("lock").remove(&id.to_string());
                                    return; // cancelled: no answer, per the spec
                                }
                                if !token.is_null() {
                                    send(
                                        &out,
                                        &json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                                            "progressToken": token, "progress": i, "total": steps,
                                            "message": format!("{} to go", steps - i)
                                        }}),
                                    );
                                }
                            }
                            running.lock().expect("lock").remove(&id.to_string());
                            let done = result(
                                &id,
                                json!({"content": [{"type": "text", "text": format!("Liftoff after {steps} steps")}]}),
                            );
                            send(&out, &stamp(modern, done));
                        });
                        continue;
                    }
                    "slow_job" => {
                        let seconds = seconds_arg(args);
                        let as_task = if modern {
                            declares_tasks(&params)
                        } else {
                            !params["task"].is_null()
                        };
                        if as_task {
                            let ttl = params["task"]["ttl"].as_u64().unwrap_or(TASK_TTL_MS);
                            let task_id = tasks.start(seconds, ttl);
                            let mut view = tasks.view(&task_id, modern).expect("just started");
                            if modern {
                                view["resultType"] = json!("task");
                            } else {
                                view = json!({ "task": view });
                            }
                            result(&id, view)
                        } else {
                            let out = out.clone();
                            std::thread::spawn(move || {
                                std::thread::sleep(Duration::from_secs_f64(seconds));
                                send(&out, &stamp(modern, result(&id, slow_job_result(seconds))));
                            });
                            continue;
                        }
                    }
                    other => result(
                        &id,
                        json!({"content": [{"type": "text", "text": format!("unknown tool: {other}")}], "isError": true}),
                    ),
                }
            }
            "resources/list" => result(
                &id,
                json!({"resources": [{"uri": "demo://readme", "name": "readme", "title": "About this demo", "mimeType": "text/plain"}]}),
            ),
            "resources/templates/list" => result(&id, json!({"resourceTemplates": []})),
            "resources/read" => match params["uri"].as_str() {
                Some("demo://readme") => result(
                    &id,
                    json!({"contents": [{"uri": "demo://readme", "mimeType": "text/plain", "text": README}]}),
                ),
                Some(other) => error(&id, -32002, &format!("Resource not found: {other}")),
                None => error(&id, -32602, "resources/read needs `uri`"),
            },
            "prompts/list" => result(
                &id,
                json!({"prompts": [{"name": "greet", "title": "Greeting", "description": "Asks for a friendly greeting.",
                    "arguments": [{"name": "name", "description": "Who to greet", "required": true}]}]}),
            ),
            "prompts/get" => match (
                params["name"].as_str(),
                params["arguments"]["name"].as_str(),
            ) {
                (Some("greet"), Some(name)) => result(
                    &id,
                    json!({"description": "A friendly greeting", "messages": [
                        {"role": "user", "content": {"type": "text", "text": format!("Please greet {name} warmly, in one sentence.")}}
                    ]}),
                ),
                (Some("greet"), None) => error(&id, -32602, "greet needs the argument `name`"),
                _ => error(&id, -32602, "unknown prompt"),
            },
            _ => error(&id, -32601, &format!("Method not found: {method}")),
        };
        send(&out, &stamp(modern, reply));
    }
}
