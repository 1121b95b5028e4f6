//! The commands that talk to one server: tools, call, resources, read,
//! prompts, prompt, ping, info.

use std::time::{Duration, Instant};

use mcpwire_manager::ToolFilter;
use mcpwire_tokio::types::{CallToolResult, Task, TaskStarted};
use mcpwire_tokio::{CallOptions, CancelToken, Client, TraceContext};
use serde_json::json;

use crate::args::*;
use crate::render::*;
use crate::target::*;

/// The caller's trace, from `TRACEPARENT`, `TRACESTATE` and `BAGGAGE` (the
/// environment variables OpenTelemetry uses to pass a context to a child
/// process): the requests carry it in `_meta` (SEP-414). A malformed one is
/// left out with a warning (it is the caller's environment, not an
/// argument).
fn trace_from_env() -> Option<TraceContext> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let parent = var("TRACEPARENT")?;
    let context = TraceContext::new(parent.trim()).and_then(|mut t| {
        if let Some(state) = var("TRACESTATE") {
            t = t.with_state(state.trim())?;
        }
        if let Some(baggage) = var("BAGGAGE") {
            t = t.with_baggage(baggage.trim())?;
        }
        Ok(t)
    });
    match context {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!("TRACEPARENT ignored: {e}");
            None
        }
    }
}

/// Runs the command on `client`; `tools` is the entry's tool list
/// (`--server NAME`): hidden tools are not listed (calls to them were
/// refused before connecting).
pub(crate) async fn command(
    cli: &Cli,
    client: &Client,
    tools: &ToolFilter,
    cancel: CancelToken,
) -> Result<u8, Fail> {
    let mut call_opts = CallOptions::new().cancel_token(cancel);
    if let Some(ms) = cli.timeout {
        call_opts = call_opts.timeout(Duration::from_millis(ms));
    }
    if let Some(trace) = trace_from_env() {
        call_opts = call_opts.trace(trace);
    }
    match cli.cmd() {
        Cmd::Tools => {
            let allowed = tools;
            let mut tools = client.list_tools().await?;
            tools.retain(|t| allowed.allows(&t.name));
            if cli.json {
                print_json(&json!({ "tools": tools }));
            } else {
                for t in tools {
                    let desc = t.description.as_deref().unwrap_or("");
                    println!("{:<28} {}", t.name, first_line(desc));
                }
            }
            Ok(0)
        }
        Cmd::Call { tool, args, pairs } => {
            let arguments = parse_args(args.as_deref(), pairs)?;
            // A 2025-11-25 tasks server: the list says which tools run as
            // tasks (the connection would also send a refused plain call
            // again as a task) and gives the output schemas to check.
            if client.server().capabilities.tasks_for_tool_calls() {
                client.list_tools().await?;
            }
            let progress = Progress::new(cli.quiet);
            let p = progress.clone();
            let result = client
                .call_tool_with(tool, arguments, call_opts.on_progress(move |pr| p.show(pr)))
                .await;
            progress.done();
            Ok(tool_result(cli, &result?))
        }
        Cmd::Tasks { action } => tasks(cli, client, tools, action, call_opts).await,
        Cmd::Resources => {
            let resources = client.list_resources().await?;
            if cli.json {
                print_json(&json!({ "resources": resources }));
            } else {
                for r in resources {
                    println!("{:<40} {}", r.uri, r.title.as_deref().unwrap_or(&r.name));
                }
            }
            Ok(0)
        }
        Cmd::Read { uri } => {
            let result = client.read_resource(uri).await?;
            if cli.json {
                print_json(&result);
            } else {
                for c in &result.contents {
                    print_contents(c);
                }
            }
            Ok(0)
        }
        Cmd::Prompts => {
            let prompts = client.list_prompts().await?;
            if cli.json {
                print_json(&json!({ "prompts": prompts }));
            } else {
                for p in prompts {
                    let args: Vec<String> = p
                        .arguments
                        .iter()
                        .map(|a| {
                            if a.required == Some(true) {
                                a.name.clone()
                            } else {
                                format!("[{}]", a.name)
                            }
                        })
                        .collect();
                    println!(
                        "{:<24} {:<24} {}",
                        p.name,
                        args.join(" "),
                        first_line(p.description.as_deref().unwrap_or(""))
                    );
                }
            }
            Ok(0)
        }
        Cmd::Prompt { name, args, pairs } => {
            let arguments = parse_args(args.as_deref(), pairs)?;
            let result = client.get_prompt(name, arguments).await?;
            if cli.json {
                print_json(&result);
            } else {
                for m in &result.messages {
                    print!("{}: ", m.role);
                    print_content(&m.content);
                }
            }
            Ok(0)
        }
        Cmd::Ping => {
            let t = Instant::now();
            client.ping().await?;
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if cli.json {
                print_json(&json!({ "ok": true, "ms": ms }));
            } else {
                println!("pong ({ms:.1} ms)");
            }
            Ok(0)
        }
        Cmd::Info => {
            let s = client.server();
            if cli.json {
                print_json(&json!({
                    "serverInfo": s.server_info,
                    "protocolVersion": s.protocol_version,
                    "transport": client.transport(),
                    "capabilities": s.capabilities,
                    "instructions": s.instructions,
                    "connectMs": client.connect_time().map(|d| d.as_secs_f64() * 1000.0),
                    "eraFinding": client.era_finding().map(|f| f.to_string()),
                }));
            } else {
                println!(
                    "server:       {} {}",
                    s.server_info.name, s.server_info.version
                );
                println!("protocol:     {}", s.protocol_version);
                println!("transport:    {}", client.transport());
                if cli.verbose > 0 {
                    if let Some(f) = client.era_finding() {
                        println!("era:          {f}");
                    }
                    if let Some(d) = client.connect_time() {
                        println!("connected in: {:.1} ms", d.as_secs_f64() * 1000.0);
                    }
                }
                let caps = serde_json::to_value(&s.capabilities).unwrap_or_default();
                let names: Vec<&String> = caps
                    .as_object()
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                println!(
                    "capabilities: {}",
                    names
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if let Some(i) = &s.instructions {
                    println!("instructions: {i}");
                }
            }
            Ok(0)
        }
        Cmd::Demo
        | Cmd::Serve { .. }
        | Cmd::Bridge { .. }
        | Cmd::Servers { .. }
        | Cmd::Approve { .. }
        | Cmd::Add { .. }
        | Cmd::Remove { .. }
        | Cmd::Enable { .. }
        | Cmd::Disable { .. }
        | Cmd::Get { .. }
        | Cmd::Import { .. }
        | Cmd::Doctor => {
            unreachable!("handled before connecting")
        }
    }
}

/// `mcpwire tasks …`.
async fn tasks(
    cli: &Cli,
    client: &Client,
    tools: &ToolFilter,
    action: &TaskCmd,
    call_opts: CallOptions,
) -> Result<u8, Fail> {
    match action {
        TaskCmd::Start { tool, args, pairs } => {
            if !tools.allows(tool) {
                return Err(Fail::usage(format!("unknown tool {tool:?}")));
            }
            let arguments = parse_args(args.as_deref(), pairs)?;
            // 2025-11-25: a task is asked for when the list says the tool
            // allows one.
            if client.server().capabilities.tasks_for_tool_calls() {
                client.list_tools().await?;
            }
            match client.start_tool_task(tool, arguments, call_opts).await? {
                TaskStarted::Task(task) => {
                    print_task(cli, &task);
                    Ok(0)
                }
                TaskStarted::Done(result) => {
                    if !cli.json {
                        eprintln!("the server answered at once (no task):");
                    }
                    Ok(tool_result(cli, &result))
                }
            }
        }
        TaskCmd::List => {
            let tasks = client.list_tasks().await?;
            if cli.json {
                print_json(&json!({ "tasks": tasks }));
            } else {
                for t in tasks {
                    println!(
                        "{:<38} {:<15} {}",
                        t.task_id,
                        t.status,
                        t.status_message.as_deref().unwrap_or("")
                    );
                }
            }
            Ok(0)
        }
        TaskCmd::Get { id } => {
            let task = client.get_task(id).await?;
            print_task(cli, &task);
            Ok(0)
        }
        TaskCmd::Result { id } => {
            let progress = Progress::new(cli.quiet);
            let p = progress.clone();
            let result = client
                .task_result(id, call_opts.on_progress(move |pr| p.show(pr)))
                .await;
            progress.done();
            Ok(tool_result(cli, &result?))
        }
        TaskCmd::Cancel { id } => {
            client.cancel_task(id).await?;
            if cli.json {
                print_json(&json!({ "cancelled": id }));
            } else {
                println!("asked the server to cancel task {id}");
            }
            Ok(0)
        }
    }
}

/// Prints a tool's result; its exit code (1 for a tool error).
fn tool_result(cli: &Cli, result: &CallToolResult) -> u8 {
    if cli.json {
        print_json(result);
    } else {
        print_call(result);
    }
    u8::from(result.is_error())
}

fn print_task(cli: &Cli, task: &Task) {
    if cli.json {
        print_json(task);
        return;
    }
    println!("task:    {}", task.task_id);
    println!("status:  {}", task.status);
    if let Some(m) = &task.status_message {
        println!("message: {m}");
    }
    if let Some(t) = &task.created_at {
        println!("created: {t}");
    }
    if let Some(ms) = task.ttl_ms {
        println!("ttl:     {ms} ms");
    }
    if let Some(ms) = task.poll_interval_ms {
        println!("poll:    every {ms} ms");
    }
}
