//! `mcpwire serve --demo`: a small MCP server over stdio, built in so the
//! CLI can be tried with nothing else installed.
//!
//! Tools: `echo` (text and structured content), `add` (structured content
//! with an output schema), `countdown` (progress notifications, honours
//! cancellation). Resource: `demo://readme`. Prompt: `greet`.
//! Plain std: one reader loop, one thread per slow call.
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
use std::time::Duration;

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

fn capabilities() -> Value {
    json!({"tools": {}, "resources": {}, "prompts": {}, "logging": {}})
}

const INSTRUCTIONS: &str =
    "A demo server: echo, add and countdown tools, one resource, one prompt.";

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
            r.insert("resultType".into(), json!("complete"));
        }
    }
    reply
}

fn tools() -> Value {
    json!([
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
    ])
}

/// Runs the demo server on this process's stdin/stdout until stdin ends.
pub fn run() {
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let running: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>> = Default::default();
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
                    "capabilities": capabilities(),
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
                        "capabilities": capabilities(),
                        "serverInfo": server_info(),
                        "instructions": INSTRUCTIONS,
                    }),
                )
            }
            "ping" | "logging/setLevel" => result(&id, json!({})),
            "tools/list" => result(&id, json!({"tools": tools()})),
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or("");
                let args = &params["arguments"];
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
