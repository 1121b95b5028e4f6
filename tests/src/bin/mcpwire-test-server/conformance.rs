//! `--conformance`: the tools, resources and prompts that the server
//! scenarios of the MCP conformance suite (`conformance server`,
//! @modelcontextprotocol/conformance 0.2.0-alpha.12) call by name.
//!
//! In this mode `tools/list`, `resources/*`, `prompts/*` and
//! `completion/complete` serve the suite's set instead of the test
//! server's own (whose tools stay callable); everything else (the
//! handshake, `server/discover`, `subscriptions/listen`, tasks, the
//! transports) is the test server's usual behaviour.
//!
//! Tools that need the client (sampling, elicitation, roots) are *plans*:
//! a function from the answers so far to either more questions or the
//! result ([`plan`]). In 2025-11-25 the server asks each question on the
//! call's own stream and waits; in 2026-07-28 each round is an
//! `input_required` result whose `requestState` carries the answers so
//! far, tagged with a per-process key (a changed state is `-32602`).
//! 2026-07-28 results of the cacheable methods carry the SEP-2549 hints
//! `ttlMs` and `cacheScope`.
//!
//! The tasks extension scenarios (SEP-2663) call tools that run as tasks
//! ([`task_support`]): when the call asks for one (2026-07-28: the
//! extension declared, for the session or in the request's `_meta`;
//! 2025-11-25: `params.task`) the answer creates a task of `tasks.rs`,
//! which the client follows with `tasks/*`; a plan's questions are then
//! the task's `inputRequests`, answered by `tasks/update`. Without a
//! task, an optional one runs inline and a required one is refused
//! (-32021 in 2026-07-28). `test_tool_with_task` asks its question as an
//! `input_required` round first and becomes a task on the round that
//! has the answer.

use crate::protocol::{
    base64, lock, reply_for, response, Ctx, Era, Outbound, Outcome, Peer, RpcError,
    CAPABILITIES_KEY, MISSING_REQUIRED_CLIENT_CAPABILITY,
};
use crate::tasks::{self, End, Next, Work};
use serde_json::{json, Map, Value};
use std::collections::hash_map::RandomState;
use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// A 1x1 red pixel (RGBA), a whole PNG file.
const RED_PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const SCHEMA_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// SEP-2164 (2026-07-28): an unknown resource is invalid params; before,
/// the resource-not-found code.
const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;

/// `test_trigger_tool_change` / `test_trigger_prompt_change` flip these:
/// the lists really change (one tool / prompt more or less).
static EXTRA_TOOL: AtomicBool = AtomicBool::new(false);
static EXTRA_PROMPT: AtomicBool = AtomicBool::new(false);
/// URIs of `resources/subscribe` (2025-11-25), for every session.
static SUBSCRIBED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Handles `method` if this mode serves it; `None` leaves it to the test
/// server's usual handling.
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
) -> Option<Outcome> {
    let result = match method {
        "tools/list" => Ok(cacheable(era, json!({ "tools": tools(era) }), 0, "private")),
        "tools/call" => return call_tool(ctx, peer, era, id, params, cancel, out),
        "resources/list" => Ok(cacheable(era, resources_list(), 0, "private")),
        "resources/templates/list" => Ok(cacheable(
            era,
            json!({"resourceTemplates": [{
                "uriTemplate": "test://template/{id}/data",
                "name": "template-data",
                "description": "JSON data for an id, e.g. test://template/123/data",
                "mimeType": "application/json",
            }]}),
            0,
            "private",
        )),
        "resources/read" => resources_read(era, params),
        "resources/subscribe" | "resources/unsubscribe" => match params["uri"].as_str() {
            Some(uri) => {
                let mut set = lock(&SUBSCRIBED);
                if method == "resources/subscribe" {
                    set.insert(uri.to_owned());
                } else {
                    set.remove(uri);
                }
                Ok(json!({}))
            }
            None => Err(RpcError::invalid_params("missing uri")),
        },
        "prompts/list" => Ok(cacheable(
            era,
            json!({ "prompts": prompts(era) }),
            0,
            "private",
        )),
        "prompts/get" => return Some(prompts_get(era, id, params)),
        "completion/complete" => Ok(complete(params)),
        _ => return None,
    };
    Some(reply_for(era, id, result))
}

/// A 2026-07-28 result of a cacheable method, with its SEP-2549 hints.
fn cacheable(era: Era, mut result: Value, ttl_ms: u64, scope: &str) -> Value {
    if era == Era::Modern {
        result["ttlMs"] = json!(ttl_ms);
        result["cacheScope"] = json!(scope);
    }
    result
}

fn text(t: impl Into<String>) -> Value {
    json!({"type": "text", "text": t.into()})
}

fn tool_result(content: Vec<Value>) -> Value {
    json!({ "content": content })
}

fn image() -> Value {
    json!({"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"})
}

/// A WAV file of 0.1 s of a 440 Hz square wave, 8 kHz, 8-bit mono.
fn wav() -> Vec<u8> {
    let samples: Vec<u8> = (0..800u32)
        .map(|i| {
            if (i * 440 * 2 / 8000) % 2 == 0 {
                0xc0
            } else {
                0x40
            }
        })
        .collect();
    let mut w = Vec::with_capacity(44 + samples.len());
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    w.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    w.extend_from_slice(&1u16.to_le_bytes()); // block align
    w.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    w.extend_from_slice(b"data");
    w.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    w.extend_from_slice(&samples);
    w
}

// ---------------------------------------------------------------- tools

fn tools(era: Era) -> Vec<Value> {
    let none = || json!({"type": "object", "properties": {}});
    let tool = |name: &str, description: &str, input: Value| json!({"name": name, "description": description, "inputSchema": input});
    let string_arg = |arg: &str, description: &str| {
        json!({"type": "object",
               "properties": {arg: {"type": "string", "description": description}},
               "required": [arg]})
    };
    let mut list =
        vec![
        tool("test_simple_text", "Returns a simple text", none()),
        tool(
            "test_header_param",
            "Returns its region, which 2026-07-28 calls over HTTP mirror in Mcp-Param-Region",
            json!({"type": "object",
                   "properties": {"region": {"type": "string", "x-mcp-header": "Region",
                                             "description": "Where"}},
                   "required": ["region"]}),
        ),
        tool(
            "greet",
            "Returns \"Hello, <name>!\" (never as a task)",
            string_arg("name", "Who to greet"),
        ),
        tool("test_image_content", "Returns a PNG image", none()),
        tool("test_audio_content", "Returns a WAV audio clip", none()),
        tool("test_embedded_resource", "Returns an embedded text resource", none()),
        tool(
            "test_multiple_content_types",
            "Returns text, an image and an embedded JSON resource",
            none(),
        ),
        tool(
            "test_tool_with_logging",
            "Sends three info log messages, 50 ms apart, while it runs",
            none(),
        ),
        tool(
            "test_logging_tool",
            "Sends three info log messages (2026-07-28: only when the request sets a log level)",
            none(),
        ),
        tool("test_error_handling", "Always fails (isError: true)", none()),
        tool(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100, 50 ms apart",
            none(),
        ),
        tool(
            "test_sampling",
            "Asks the client to sample a completion of `prompt`",
            string_arg("prompt", "The prompt for the LLM"),
        ),
        tool(
            "test_elicitation",
            "Asks the user, with `message`, for a username and an email",
            string_arg("message", "The message to show the user"),
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Elicits a form whose fields all have defaults (SEP-1034)",
            none(),
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Elicits a form with the five kinds of enum (SEP-1330)",
            none(),
        ),
        tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json!({
                "$schema": SCHEMA_2020_12,
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                                      "properties": {"street": {"type": "string"},
                                                     "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"},
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}},
                       "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false,
            }),
        ),
        tool(
            "test_reconnection",
            "HTTP, 2025-11-25: closes its SSE stream mid-call; the result comes on the GET \
             that resumes it (Last-Event-ID)",
            none(),
        ),
        tool(
            "test_missing_capability",
            "Needs the client's sampling capability (2026-07-28: -32021 without it)",
            none(),
        ),
        tool(
            "test_streaming_elicitation",
            "Elicits a name (2026-07-28: as an input_required result, never a request on the \
             stream)",
            none(),
        ),
        tool(
            "test_trigger_tool_change",
            "Adds or removes the tool test_dynamic_tool and announces the change",
            none(),
        ),
        tool(
            "test_trigger_prompt_change",
            "Adds or removes the prompt test_dynamic_prompt and announces the change",
            none(),
        ),
    ];
    for (name, description) in [
        ("elicitation", "Asks the user's name (input user_name)"),
        (
            "sampling",
            "Asks for the capital of France (input capital_question)",
        ),
        (
            "list_roots",
            "Asks for the client's roots (input client_roots)",
        ),
        (
            "request_state",
            "Asks a confirmation; the answer says state-ok once the echoed state checked out",
        ),
        (
            "multiple_inputs",
            "Asks a name, a sampled greeting and the roots at once",
        ),
        ("multi_round", "Asks a name, then a favourite colour"),
        (
            "tampered_state",
            "Asks a confirmation; a requestState that was changed is refused",
        ),
        (
            "capabilities",
            "Asks only what the client's declared capabilities allow",
        ),
    ] {
        list.push(tool(
            &format!("test_input_required_result_{name}"),
            description,
            none(),
        ));
    }
    list.extend(task_tools(era));
    if EXTRA_TOOL.load(Ordering::SeqCst) {
        list.push(tool(
            "test_dynamic_tool",
            "Added by test_trigger_tool_change",
            none(),
        ));
    }
    list
}

fn call_tool(
    ctx: &Ctx,
    peer: &Peer,
    era: Era,
    id: &Value,
    params: &Value,
    cancel: &AtomicBool,
    out: &dyn Outbound,
) -> Option<Outcome> {
    let name = params["name"].as_str()?;
    let args = match params.get("arguments") {
        Some(a @ Value::Object(_)) => a.clone(),
        _ => json!({}),
    };
    let reply = |r: Result<Value, RpcError>| Some(reply_for(era, id, r));
    if let Some(outcome) = call_task_tool(ctx, peer, era, id, name, &args, params, cancel) {
        return Some(outcome);
    }
    if let Some(outcome) = asking(peer, era, id, name, &args, params, cancel, out) {
        return Some(outcome);
    }
    match name {
        "greet" => reply(Ok(tool_result(vec![text(format!(
            "Hello, {}!",
            args["name"].as_str().unwrap_or("World")
        ))]))),
        "test_simple_text" => reply(Ok(tool_result(vec![text(
            "This is a simple text response for testing.",
        )]))),
        "test_header_param" => reply(Ok(tool_result(vec![text(format!(
            "region: {}",
            args["region"].as_str().unwrap_or("")
        ))]))),
        "test_image_content" => reply(Ok(tool_result(vec![image()]))),
        "test_audio_content" => reply(Ok(tool_result(vec![json!({
            "type": "audio", "data": base64(&wav()), "mimeType": "audio/wav",
        })]))),
        "test_embedded_resource" => reply(Ok(tool_result(vec![json!({
            "type": "resource",
            "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain",
                         "text": "This is an embedded resource content."},
        })]))),
        "test_multiple_content_types" => reply(Ok(tool_result(vec![
            text("Multiple content types test:"),
            image(),
            json!({"type": "resource",
                   "resource": {"uri": "test://mixed-content-resource",
                                "mimeType": "application/json",
                                "text": json!({"test": "data", "value": 123}).to_string()}}),
        ]))),
        "test_tool_with_logging" | "test_logging_tool" => {
            let messages = [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ];
            let logs = logs_wanted(ctx, era, params, "info");
            for (i, message) in messages.iter().enumerate() {
                if i > 0 && crate::sleep_cancellable(Duration::from_millis(50), cancel) {
                    return Some(Outcome::Silent);
                }
                if logs {
                    out.send(&json!({"jsonrpc": "2.0", "method": "notifications/message",
                                     "params": {"level": "info", "logger": name,
                                                "data": message}}));
                }
            }
            reply(Ok(tool_result(vec![text(format!(
                "Logging done ({})",
                if logs {
                    "3 messages sent"
                } else {
                    "no messages: no log level asked for"
                }
            ))])))
        }
        "test_error_handling" => reply(Ok(json!({
            "content": [text("This tool intentionally returns an error for testing")],
            "isError": true,
        }))),
        "test_tool_with_progress" => {
            let token = params["_meta"].get("progressToken").cloned();
            for (i, progress) in [0, 50, 100].into_iter().enumerate() {
                if i > 0 && crate::sleep_cancellable(Duration::from_millis(50), cancel) {
                    return Some(Outcome::Silent);
                }
                if let Some(token) = &token {
                    out.send(
                        &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                     "params": {"progressToken": token, "progress": progress,
                                                "total": 100}}),
                    );
                }
            }
            reply(Ok(tool_result(vec![text("Progress done: 100/100")])))
        }
        "json_schema_2020_12_tool" => {
            reply(Ok(tool_result(vec![text(format!("Received {args}"))])))
        }
        "test_reconnection" if era == Era::Legacy => {
            let done = tool_result(vec![text("Reconnection test completed successfully")]);
            Some(Outcome::SseDrop {
                after_ms: 100,
                retry_ms: 500,
                reply: Some(response(id, done)),
            })
        }
        "test_reconnection" => reply(Ok(tool_result(vec![text(
            "test_reconnection: no stream resumption in 2026-07-28",
        )]))),
        "test_trigger_tool_change" | "test_trigger_prompt_change" => {
            let (flag, wanted, method, what) = if name == "test_trigger_tool_change" {
                (
                    &EXTRA_TOOL,
                    "toolsListChanged",
                    "notifications/tools/list_changed",
                    "test_dynamic_tool",
                )
            } else {
                (
                    &EXTRA_PROMPT,
                    "promptsListChanged",
                    "notifications/prompts/list_changed",
                    "test_dynamic_prompt",
                )
            };
            let added = !flag.fetch_xor(true, Ordering::SeqCst);
            let reached = match era {
                Era::Modern => ctx.broadcast(wanted, method),
                Era::Legacy => usize::from(out.send(&json!({"jsonrpc": "2.0", "method": method}))),
            };
            reply(Ok(tool_result(vec![text(format!(
                "{} {what}; {reached} listeners told",
                if added { "added" } else { "removed" }
            ))])))
        }
        "test_dynamic_tool" if EXTRA_TOOL.load(Ordering::SeqCst) => {
            reply(Ok(tool_result(vec![text("test_dynamic_tool was called")])))
        }
        _ => None,
    }
}

// ----------------------------------------------------------- task tools

/// How a tool of the tasks scenarios runs as a task (`optional` or
/// `required`); `None` for the other tools.
fn task_support(name: &str) -> Option<&'static str> {
    match name {
        "slow_compute" | "protocol_error_job" | "confirm_delete" | "multi_input" => {
            Some("optional")
        }
        "failing_job" | "test_tool_with_task" => Some("required"),
        _ => None,
    }
}

fn task_tools(era: Era) -> Vec<Value> {
    let tool = |name: &str, description: &str, props: Value| {
        let support = task_support(name).expect("a task tool");
        tasks::tool_definition(era, name, description, props, support)
    };
    vec![
        tool(
            "slow_compute",
            "Sleeps `seconds` (default 1, 0 for an immediate result), then says it computed \
             `label`; a task of it that is cancelled stays cancelled",
            json!({"seconds": {"type": "number", "description": "how long (default 1)"},
                   "label": {"type": "string", "description": "named in the result"}}),
        ),
        tool(
            "failing_job",
            "Must run as a task: after 1 s, a tool error (completed, isError)",
            json!({}),
        ),
        tool(
            "protocol_error_job",
            "As a task: fails after 100 ms (status failed, error -32603); inline, a -32603 \
             error",
            json!({}),
        ),
        tool(
            "confirm_delete",
            "Asks the user to confirm the deletion of `filename` (one elicitation), then says \
             what it did (nothing is deleted)",
            json!({"filename": {"type": "string", "description": "the file to delete"}}),
        ),
        tool(
            "multi_input",
            "Asks two questions at once (a name and a confirmation), then says both answers",
            json!({}),
        ),
        tool(
            "test_tool_with_task",
            "Must run as a task: asks the user's name (2026-07-28: as an input_required round, \
             then the round with the answer creates the task), then greets them",
            json!({}),
        ),
    ]
}

/// `tools/call` of a task tool (see [`task_support`]); `None` for the
/// other tools, and for a plan that runs inline (the caller asks).
#[allow(clippy::too_many_arguments)]
fn call_task_tool(
    ctx: &Ctx,
    peer: &Peer,
    era: Era,
    id: &Value,
    name: &str,
    args: &Value,
    params: &Value,
    cancel: &AtomicBool,
) -> Option<Outcome> {
    let support = task_support(name)?;
    let reply = |r: Result<Value, RpcError>| Some(reply_for(era, id, r));
    let seconds = args["seconds"].as_f64().unwrap_or(1.0).clamp(0.0, 3600.0);
    let computed = || {
        tool_result(vec![text(format!(
            "Computed {} in {seconds} s",
            args["label"].as_str().unwrap_or("slow_compute")
        ))])
    };
    let protocol_error = "protocol_error_job failed on purpose";
    if !tasks::wants_task(era, params) {
        return match (support, name) {
            ("required", _) => reply(Err(tasks::task_required(era, name))),
            (_, "slow_compute") => {
                if crate::sleep_cancellable(Duration::from_secs_f64(seconds), cancel) {
                    return Some(Outcome::Silent);
                }
                reply(Ok(computed()))
            }
            (_, "protocol_error_job") => reply(Err(RpcError::new(-32603, protocol_error))),
            // A plan: asked inline.
            _ => None,
        };
    }
    let after = |ms: u64, end: End| Work::Sleep { ms, steps: 1, end };
    let work = match name {
        "slow_compute" => after((seconds * 1000.0) as u64, End::Complete(computed())),
        "failing_job" => after(
            1000,
            End::Complete(
                json!({"content": [text("failing_job failed (a tool error)")],
                                 "isError": true}),
            ),
        ),
        "protocol_error_job" => after(
            100,
            End::Fail(json!({"code": -32603, "message": protocol_error})),
        ),
        // The question as an input_required round; the round that has
        // the answer makes the task, whose result it is.
        "test_tool_with_task" if era == Era::Modern => match round(name, args, params)? {
            Err(e) => return reply(Err(e)),
            Ok(r) if r["resultType"] == "input_required" => return reply(Ok(r)),
            Ok(result) => after(200, End::Complete(result)),
        },
        _ => plan_work(name, args),
    };
    let ttl = match era {
        Era::Legacy => params["task"]["ttl"].as_u64(),
        Era::Modern => None,
    };
    let created = tasks::start(
        ctx,
        peer,
        era,
        name,
        work,
        ttl.unwrap_or(tasks::DEFAULT_TTL_MS),
        tasks::DEFAULT_POLL_MS,
    );
    reply(Ok(created))
}

/// The plan of tool `name` as a task's work: its questions become the
/// task's input requests.
fn plan_work(name: &str, args: &Value) -> Work {
    let (name, args) = (name.to_owned(), args.clone());
    Work::Ask(Box::new(move |answers: &Map<String, Value>| {
        match plan(&name, &args, answers, None) {
            Some(Step::Done(result)) => Next::Done(result),
            Some(Step::Ask(asks)) => Next::Ask(
                asks.into_iter()
                    .map(|a| {
                        let request = json!({"method": a.method, "params": a.params});
                        (a.key.to_owned(), request)
                    })
                    .collect(),
            ),
            None => Next::Done(json!({"content": [text(format!("{name} is no plan"))],
                                      "isError": true})),
        }
    }))
}

/// Whether a log message at `level` goes out: 2025-11-25, at or above the
/// level of `logging/setLevel`; 2026-07-28, only when the request names a
/// level, at or above it.
fn logs_wanted(ctx: &Ctx, era: Era, params: &Value, level: &str) -> bool {
    const LEVELS: &[&str] = &[
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    let rank = |l: &str| LEVELS.iter().position(|x| *x == l);
    let threshold = match era {
        Era::Legacy => Some(lock(&ctx.log_level).clone()),
        Era::Modern => params["_meta"][LOG_LEVEL_KEY].as_str().map(str::to_owned),
    };
    match threshold {
        Some(t) => rank(level) >= rank(&t),
        None => false,
    }
}

// ---------------------------------------------------------- input plans

/// One question for the client: its key in `inputRequests`, the request.
struct Ask {
    key: &'static str,
    method: &'static str,
    params: Value,
}

enum Step {
    Ask(Vec<Ask>),
    Done(Value),
}

fn elicit(key: &'static str, message: &str, properties: Value, required: &[&str]) -> Ask {
    Ask {
        key,
        method: "elicitation/create",
        params: json!({
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        }),
    }
}

fn sample(key: &'static str, prompt: &str, max_tokens: u64) -> Ask {
    Ask {
        key,
        method: "sampling/createMessage",
        params: json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        }),
    }
}

fn roots(key: &'static str) -> Ask {
    Ask {
        key,
        method: "roots/list",
        params: json!({}),
    }
}

/// How an elicitation was answered, as the suite's texts put it.
fn elicited(answer: &Value) -> String {
    format!(
        "action={}, content={}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").unwrap_or(&Value::Null)
    )
}

fn sampled(answer: &Value) -> String {
    answer["content"]["text"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| answer["content"].to_string())
}

/// The client capability a question needs.
fn capability(method: &str) -> &'static str {
    match method {
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        _ => "elicitation",
    }
}

/// The plan of tool or prompt `name` given the `answers` so far (by input
/// key) and, in 2026-07-28, the client's declared capabilities; `None` if
/// `name` asks the client nothing.
fn plan(
    name: &str,
    args: &Value,
    answers: &Map<String, Value>,
    caps: Option<&Value>,
) -> Option<Step> {
    let one = |ask: Ask, done: &dyn Fn(&Value) -> Value| match answers.get(ask.key) {
        Some(a) => Step::Done(done(a)),
        None => Step::Ask(vec![ask]),
    };
    let texts = |t: String| tool_result(vec![text(t)]);
    let name_form = json!({"name": {"type": "string"}});
    let confirm = || {
        elicit(
            "confirm",
            "Please confirm",
            json!({"ok": {"type": "boolean"}}),
            &["ok"],
        )
    };
    Some(match name {
        "test_sampling" => one(
            sample("sampling", args["prompt"].as_str().unwrap_or(""), 100),
            &|a| texts(format!("LLM response: {}", sampled(a))),
        ),
        "test_missing_capability" => one(sample("sampling", "Say something", 50), &|a| {
            texts(format!("Sampled: {}", sampled(a)))
        }),
        "test_elicitation" => one(
            elicit(
                "elicitation",
                args["message"]
                    .as_str()
                    .unwrap_or("Please provide your information"),
                json!({"username": {"type": "string", "description": "User's response"},
                       "email": {"type": "string", "description": "User's email address"}}),
                &["username", "email"],
            ),
            &|a| texts(format!("User response: {}", elicited(a))),
        ),
        "test_streaming_elicitation" => one(
            elicit(
                "user_name",
                "What is your name?",
                name_form.clone(),
                &["name"],
            ),
            &|a| texts(format!("Elicitation completed: {}", elicited(a))),
        ),
        "test_elicitation_sep1034_defaults" => one(
            elicit(
                "defaults",
                "Test client default value handling - please accept with defaults",
                json!({
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status",
                               "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status",
                                 "default": true},
                }),
                &[],
            ),
            &|a| texts(format!("Elicitation completed: {}", elicited(a))),
        ),
        "test_elicitation_sep1330_enums" => one(
            elicit(
                "enums",
                "Pick some options",
                json!({
                    "untitledSingle": {"type": "string",
                                       "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {
                        "type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}]}},
                }),
                &[],
            ),
            &|a| texts(format!("Elicitation completed: {}", elicited(a))),
        ),
        "test_input_required_result_elicitation" => one(
            elicit(
                "user_name",
                "What is your name?",
                name_form.clone(),
                &["name"],
            ),
            &|a| {
                texts(format!(
                    "Hello, {}!",
                    a["content"]["name"].as_str().unwrap_or("whoever you are")
                ))
            },
        ),
        "test_input_required_result_sampling" => one(
            sample("capital_question", "What is the capital of France?", 100),
            &|a| texts(sampled(a)),
        ),
        "test_input_required_result_list_roots" => one(roots("client_roots"), &|a| {
            texts(format!("Roots: {}", a.get("roots").unwrap_or(&Value::Null)))
        }),
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            one(confirm(), &|a| texts(format!("state-ok: {}", elicited(a))))
        }
        "test_input_required_result_multiple_inputs" => {
            let asks: Vec<Ask> = [
                elicit(
                    "user_name",
                    "What is your name?",
                    name_form.clone(),
                    &["name"],
                ),
                sample("greeting", "Generate a greeting", 50),
                roots("client_roots"),
            ]
            .into_iter()
            .filter(|a| !answers.contains_key(a.key))
            .collect();
            if asks.is_empty() {
                Step::Done(texts(format!(
                    "name: {}; greeting: {}; roots: {}",
                    answers["user_name"]["content"]["name"],
                    sampled(&answers["greeting"]),
                    answers["client_roots"].get("roots").unwrap_or(&Value::Null)
                )))
            } else {
                Step::Ask(asks)
            }
        }
        "test_input_required_result_multi_round" => {
            if !answers.contains_key("step1") {
                Step::Ask(vec![elicit(
                    "step1",
                    "Step 1: What is your name?",
                    name_form.clone(),
                    &["name"],
                )])
            } else if !answers.contains_key("step2") {
                Step::Ask(vec![elicit(
                    "step2",
                    "Step 2: What is your favorite color?",
                    json!({"color": {"type": "string"}}),
                    &["color"],
                )])
            } else {
                Step::Done(texts(format!(
                    "{} likes {}",
                    answers["step1"]["content"]["name"], answers["step2"]["content"]["color"]
                )))
            }
        }
        "test_input_required_result_capabilities" => {
            let declared =
                |c: &str| caps.is_none_or(|caps| caps.get(c).is_some_and(|v| !v.is_null()));
            let asks: Vec<Ask> = [
                sample("sampling_input", "Say hello", 20),
                elicit(
                    "elicitation_input",
                    "What is your name?",
                    name_form.clone(),
                    &["name"],
                ),
                roots("roots_input"),
            ]
            .into_iter()
            .filter(|a| declared(capability(a.method)) && !answers.contains_key(a.key))
            .collect();
            if asks.is_empty() {
                let keys: Vec<&String> = answers.keys().collect();
                Step::Done(texts(format!("answered: {keys:?}")))
            } else {
                Step::Ask(asks)
            }
        }
        "confirm_delete" => {
            let file = args["filename"].as_str().unwrap_or("(no file)");
            one(
                elicit(
                    "confirm",
                    &format!("Delete {file}?"),
                    json!({"confirm": {"type": "boolean"}}),
                    &["confirm"],
                ),
                &|a| {
                    texts(
                        if a["action"] == "accept" && a["content"]["confirm"] == true {
                            format!("Deleted {file} (not really)")
                        } else {
                            format!("Kept {file}: {}", elicited(a))
                        },
                    )
                },
            )
        }
        "multi_input" => {
            let asks: Vec<Ask> = [
                elicit(
                    "user_name",
                    "What is your name?",
                    name_form.clone(),
                    &["name"],
                ),
                elicit(
                    "confirm",
                    "Do you confirm?",
                    json!({"confirm": {"type": "boolean"}}),
                    &["confirm"],
                ),
            ]
            .into_iter()
            .filter(|a| !answers.contains_key(a.key))
            .collect();
            if asks.is_empty() {
                Step::Done(texts(format!(
                    "name: {}; confirmed: {}",
                    elicited(&answers["user_name"]),
                    elicited(&answers["confirm"])
                )))
            } else {
                Step::Ask(asks)
            }
        }
        "test_tool_with_task" => one(
            elicit(
                "user_name",
                "What is your name?",
                name_form.clone(),
                &["name"],
            ),
            &|a| {
                texts(format!(
                    "Hello, {}! (the result of a task)",
                    a["content"]["name"].as_str().unwrap_or("whoever you are")
                ))
            },
        ),
        "test_input_required_result_prompt" => one(
            elicit(
                "user_context",
                "What context should the prompt use?",
                json!({"context": {"type": "string"}}),
                &["context"],
            ),
            &|a| {
                json!({
                    "description": "A prompt built from elicited context",
                    "messages": [{"role": "user", "content": text(format!(
                        "Use this context: {}",
                        a["content"]["context"].as_str().unwrap_or("")
                    ))}],
                })
            },
        ),
        _ => return None,
    })
}

/// The key `requestState` is tagged with (SipHash, keyed at random once
/// per process).
fn state_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// `requestState` for the answers so far of `name`: `<tag>.<json>`.
fn seal(name: &str, answers: &Map<String, Value>) -> String {
    let body = json!({"name": name, "answers": answers}).to_string();
    format!("{:016x}.{body}", state_key().hash_one(&body))
}

/// The answers a `requestState` of `name` carries, if its tag checks out.
fn open(name: &str, state: &str) -> Result<Map<String, Value>, RpcError> {
    let bad = || RpcError::invalid_params("requestState failed its integrity check");
    let (tag, body) = state.split_once('.').ok_or_else(bad)?;
    if tag != format!("{:016x}", state_key().hash_one(body)) {
        return Err(bad());
    }
    let v: Value = serde_json::from_str(body).map_err(|_| bad())?;
    if v["name"] != name {
        return Err(RpcError::invalid_params(format!(
            "requestState is of {}, not {name}",
            v["name"]
        )));
    }
    Ok(v["answers"].as_object().cloned().unwrap_or_default())
}

/// Runs `name` if it is a plan: 2026-07-28, one round (see the module
/// doc); 2025-11-25, every question asked on `out` in turn.
#[allow(clippy::too_many_arguments)]
fn asking(
    peer: &Peer,
    era: Era,
    id: &Value,
    name: &str,
    args: &Value,
    params: &Value,
    cancel: &AtomicBool,
    out: &dyn Outbound,
) -> Option<Outcome> {
    let reply = |r: Result<Value, RpcError>| Some(reply_for(era, id, r));
    if era == Era::Modern {
        return reply(round(name, args, params)?);
    }
    let mut answers = Map::new();
    loop {
        match plan(name, args, &answers, None)? {
            Step::Done(result) => return reply(Ok(result)),
            Step::Ask(asks) => {
                for ask in asks {
                    let answer = match peer.request_client(out, ask.method, ask.params, cancel) {
                        Ok(answer) => answer,
                        Err(_) if cancel.load(Ordering::SeqCst) => return Some(Outcome::Silent),
                        Err(e) => {
                            return reply(Ok(json!({"content": [text(format!(
                                "{name}: {} not answered: {e}", ask.method
                            ))], "isError": true})))
                        }
                    };
                    match answer.get("result") {
                        Some(r) => answers.insert(ask.key.to_owned(), r.clone()),
                        None => {
                            return reply(Ok(json!({"content": [text(format!(
                                "{name}: the client refused {}: {}",
                                ask.method,
                                answer.get("error").unwrap_or(&Value::Null)
                            ))], "isError": true})))
                        }
                    };
                }
            }
        }
    }
}

/// One 2026-07-28 round of plan `name`: the answers so far come from the
/// echoed `requestState` and this request's `inputResponses` (keys the
/// plan does not know are ignored); the result is the plan's, or an
/// `input_required` one. A question the client has not declared the
/// capability for is `-32021`. `None` if `name` is not a plan.
fn round(name: &str, args: &Value, params: &Value) -> Option<Result<Value, RpcError>> {
    let caps = &params["_meta"][CAPABILITIES_KEY];
    plan(name, args, &Map::new(), Some(caps))?;
    Some((|| {
        let mut answers = match params["requestState"].as_str() {
            Some(state) => open(name, state)?,
            None if params.get("requestState").is_some_and(|s| !s.is_null()) => {
                return Err(RpcError::invalid_params("requestState must be a string"))
            }
            None => Map::new(),
        };
        match params.get("inputResponses") {
            None => {}
            Some(Value::Object(responses)) => {
                for (key, answer) in responses {
                    if !answer.is_object() {
                        return Err(RpcError::invalid_params(format!(
                            "inputResponses.{key} must be an object"
                        )));
                    }
                    answers.insert(key.clone(), answer.clone());
                }
            }
            Some(_) => return Err(RpcError::invalid_params("inputResponses must be an object")),
        }
        match plan(name, args, &answers, Some(caps)).expect("a plan") {
            Step::Done(result) => Ok(result),
            Step::Ask(asks) => {
                let mut requests = Map::new();
                for ask in asks {
                    let needed = capability(ask.method);
                    if caps.get(needed).is_none_or(Value::is_null) {
                        let mut e = RpcError::new(
                            MISSING_REQUIRED_CLIENT_CAPABILITY,
                            format!("{name} needs the client capability {needed}"),
                        );
                        e.data = Some(json!({"requiredCapabilities": {needed: {}}}));
                        return Err(e);
                    }
                    requests.insert(
                        ask.key.to_owned(),
                        json!({"method": ask.method, "params": ask.params}),
                    );
                }
                // Only what the plan knows goes into the state.
                answers.retain(|k, _| known_key(k));
                Ok(json!({
                    "resultType": "input_required",
                    "inputRequests": requests,
                    "requestState": seal(name, &answers),
                }))
            }
        }
    })())
}

/// Input keys some plan asks for.
fn known_key(key: &str) -> bool {
    matches!(
        key,
        "sampling"
            | "elicitation"
            | "user_name"
            | "defaults"
            | "enums"
            | "capital_question"
            | "client_roots"
            | "confirm"
            | "greeting"
            | "step1"
            | "step2"
            | "sampling_input"
            | "elicitation_input"
            | "roots_input"
            | "user_context"
    )
}

// ------------------------------------------------------------ resources

fn resources_list() -> Value {
    json!({"resources": [
        {"uri": "test://static-text", "name": "static-text", "mimeType": "text/plain",
         "description": "A static text resource"},
        {"uri": "test://static-binary", "name": "static-binary", "mimeType": "image/png",
         "description": "A static binary resource (a PNG image)"},
        {"uri": "test://watched-resource", "name": "watched-resource", "mimeType": "text/plain",
         "description": "A resource to subscribe to"},
    ]})
}

fn resources_read(era: Era, params: &Value) -> Result<Value, RpcError> {
    let Some(uri) = params["uri"].as_str() else {
        return Err(RpcError::invalid_params("missing uri"));
    };
    let (content, ttl, scope) = if uri == "test://static-text" {
        let text = "This is the content of the static text resource.";
        (
            json!({"uri": uri, "mimeType": "text/plain", "text": text}),
            60_000,
            "public",
        )
    } else if uri == "test://static-binary" {
        (
            json!({"uri": uri, "mimeType": "image/png", "blob": RED_PIXEL_PNG}),
            60_000,
            "public",
        )
    } else if uri == "test://watched-resource" {
        let text = format!(
            "Watched resource ({} subscription(s) to it)",
            usize::from(lock(&SUBSCRIBED).contains(uri))
        );
        (
            json!({"uri": uri, "mimeType": "text/plain", "text": text}),
            0,
            "private",
        )
    } else if let Some(id) = uri
        .strip_prefix("test://template/")
        .and_then(|rest| rest.strip_suffix("/data"))
        .filter(|id| !id.is_empty() && !id.contains('/'))
    {
        let data = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
        (
            json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()}),
            60_000,
            "public",
        )
    } else {
        let code = match era {
            Era::Modern => -32602,
            Era::Legacy => RESOURCE_NOT_FOUND_LEGACY,
        };
        let mut e = RpcError::new(code, "Resource not found");
        e.data = Some(json!({ "uri": uri }));
        return Err(e);
    };
    Ok(cacheable(era, json!({ "contents": [content] }), ttl, scope))
}

// -------------------------------------------------------------- prompts

fn prompts(era: Era) -> Vec<Value> {
    let arg = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    let mut list = vec![
        json!({"name": "test_simple_prompt", "description": "A simple prompt without arguments"}),
        json!({"name": "test_prompt_with_arguments",
               "description": "A prompt with two arguments",
               "arguments": [arg("arg1", "First test argument"),
                             arg("arg2", "Second test argument")]}),
        json!({"name": "test_prompt_with_embedded_resource",
               "description": "A prompt that embeds a resource",
               "arguments": [arg("resourceUri", "URI of the resource to embed")]}),
        json!({"name": "test_prompt_with_image", "description": "A prompt with an image"}),
    ];
    if era == Era::Modern {
        list.push(json!({"name": "test_input_required_result_prompt",
                         "description": "A prompt that first asks the user for context"}));
    }
    if EXTRA_PROMPT.load(Ordering::SeqCst) {
        list.push(json!({"name": "test_dynamic_prompt",
                         "description": "Added by test_trigger_prompt_change"}));
    }
    list
}

fn prompts_get(era: Era, id: &Value, params: &Value) -> Outcome {
    let user = |content: Value| json!({"role": "user", "content": content});
    let args = &params["arguments"];
    let name = params["name"].as_str().unwrap_or("");
    let result = match name {
        "test_simple_prompt" => Ok(json!({"messages": [
            user(text("This is a simple prompt for testing."))]})),
        "test_prompt_with_arguments" => match (args["arg1"].as_str(), args["arg2"].as_str()) {
            (Some(a1), Some(a2)) => Ok(json!({"messages": [user(text(format!(
                "Prompt with arguments: arg1='{a1}', arg2='{a2}'"
            )))]})),
            _ => Err(RpcError::invalid_params(
                "test_prompt_with_arguments needs arg1 and arg2",
            )),
        },
        "test_prompt_with_embedded_resource" => match args["resourceUri"].as_str() {
            Some(uri) => Ok(json!({"messages": [
                user(json!({"type": "resource", "resource": {
                    "uri": uri, "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."}})),
                user(text("Please process the embedded resource above.")),
            ]})),
            None => Err(RpcError::invalid_params(
                "test_prompt_with_embedded_resource needs resourceUri",
            )),
        },
        "test_prompt_with_image" => Ok(json!({"messages": [
            user(image()),
            user(text("Please analyze the image above.")),
        ]})),
        "test_dynamic_prompt" if EXTRA_PROMPT.load(Ordering::SeqCst) => Ok(json!({
            "messages": [user(text("Added by test_trigger_prompt_change."))]})),
        "test_input_required_result_prompt" if era == Era::Modern => {
            round(name, &Value::Null, params).expect("a plan")
        }
        _ => Err(RpcError::invalid_params(format!("Unknown prompt: {name}"))),
    };
    reply_for(era, id, result)
}

fn complete(params: &Value) -> Value {
    let prefix = params["argument"]["value"].as_str().unwrap_or("");
    let candidates: &[&str] = match (
        params["ref"]["type"].as_str(),
        params["ref"]["name"]
            .as_str()
            .or(params["ref"]["uri"].as_str()),
        params["argument"]["name"].as_str(),
    ) {
        (Some("ref/prompt"), Some("test_prompt_with_arguments"), Some("arg1" | "arg2")) => {
            &["paris", "park", "party", "test", "testValue1", "testValue2"]
        }
        (Some("ref/resource"), Some("test://template/{id}/data"), Some("id")) => {
            &["1", "2", "3", "123"]
        }
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(prefix))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}

/// The `x-mcp-header` annotations of `--conformance` tool `name`, on its
/// top-level properties: (header suffix, argument), for the HTTP
/// listener's `Mcp-Param-*` check (SEP-2243).
pub(crate) fn header_params(name: &str) -> Vec<(String, String)> {
    let Some(tool) = tools(Era::Modern).into_iter().find(|t| t["name"] == name) else {
        return Vec::new();
    };
    let Some(props) = tool["inputSchema"]["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .filter_map(|(arg, schema)| {
            let header = schema["x-mcp-header"].as_str()?;
            Some((header.to_owned(), arg.clone()))
        })
        .collect()
}
