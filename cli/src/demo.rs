//! `mcpwire demo`: a walk through a session with the built-in demo
//! server.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use mcpwire_tokio::types::TaskStarted;
use mcpwire_tokio::{CallOptions, ServerConfig};
use serde_json::json;

use crate::args::*;
use crate::render::*;
use crate::target::*;

/// `mcpwire demo`: runs this binary's demo server as a child and walks
/// through a session with it.
pub(crate) async fn demo(cli: &Cli) -> Result<u8, Fail> {
    let exe = std::env::current_exe().map_err(|e| Fail {
        code: 3,
        message: format!("cannot find this program: {e}"),
    })?;
    let mut config =
        ServerConfig::stdio(exe.to_string_lossy().into_owned()).args(["serve", "--demo"]);
    // The demo server speaks both eras: `--era` picks one (auto finds
    // 2026-07-28).
    config.protocol_era = cli.era.clone();
    let bold = std::io::stdout().is_terminal() && no_color_unset();
    let say = |s: &str| {
        if bold {
            println!("\n\x1b[1m▸ {s}\x1b[0m");
        } else {
            println!("\n▸ {s}");
        }
    };
    let how = match cli.era.as_deref() {
        Some("legacy") => "initializing (the 2025-11-25 handshake)",
        Some("modern") => "discovering (server/discover, 2026-07-28 only)",
        _ => "probing its era (server/discover, else initialize)",
    };
    say(&format!(
        "spawning `{} serve --demo` and {how} (stdio)",
        exe.display()
    ));
    let t = Instant::now();
    let client = connect(cli, config, None).await?;
    let s = client.server();
    let era = if client.protocol_version() == "2026-07-28" {
        "the stateless era: server/discover, no initialize, no session"
    } else {
        "the handshake era: initialize first"
    };
    println!(
        "connected to {} {} in {:.1} ms, protocol {} ({era})",
        s.server_info.name,
        s.server_info.version,
        t.elapsed().as_secs_f64() * 1000.0,
        client.protocol_version()
    );
    if let Some(i) = &s.instructions {
        println!("instructions: {i}");
    }

    say("tools/list");
    for tool in client.list_tools().await? {
        println!(
            "  {:<10} {}",
            tool.name,
            tool.description.unwrap_or_default()
        );
    }

    say("tools/call echo {\"message\": \"hello from mcpwire\"}");
    let r = client
        .call_tool("echo", json!({"message": "hello from mcpwire"}))
        .await?;
    print_call(&r);

    say("tools/call add {\"a\": 2, \"b\": 40}  (structured content)");
    let r = client.call_tool("add", json!({"a": 2, "b": 40})).await?;
    println!(
        "  text: {}  structuredContent: {}",
        r.text(),
        r.structured_content.unwrap_or_default()
    );

    say("tools/call countdown {\"steps\": 5, \"ms\": 150}  (with progress)");
    let progress = Progress::new(false);
    let p = progress.clone();
    let r = client
        .call_tool_with(
            "countdown",
            json!({"steps": 5, "ms": 150}),
            CallOptions::new().on_progress(move |pr| p.show(pr)),
        )
        .await?;
    progress.done();
    print_call(&r);

    say("tools/call countdown {\"steps\": 50, \"ms\": 100} with a 300 ms timeout");
    let started = Instant::now();
    match client
        .call_tool_with(
            "countdown",
            json!({"steps": 50, "ms": 100}),
            CallOptions::new().timeout(Duration::from_millis(300)),
        )
        .await
    {
        Err(e) if e.is_timeout() => println!(
            "  {e} (after {:.0} ms; the server was sent notifications/cancelled)",
            started.elapsed().as_secs_f64() * 1000.0
        ),
        other => println!("  unexpected: {other:?}"),
    }

    say("a task: tools/call slow_job {\"seconds\": 0.75} started as a task, then followed");
    match client
        .start_tool_task("slow_job", json!({"seconds": 0.75}), CallOptions::new())
        .await?
    {
        TaskStarted::Task(task) => {
            println!(
                "  the server runs it in the background: task {} ({})",
                task.task_id,
                task.describe()
            );
            let progress = Progress::new(false);
            let p = progress.clone();
            let options = CallOptions::new().on_progress(move |pr| p.show(pr));
            let r = client.task_result(&task.task_id, options).await?;
            progress.done();
            print_call(&r);
        }
        TaskStarted::Done(r) => {
            println!("  the server answered at once:");
            print_call(&r);
        }
    }

    say("resources/list and resources/read");
    for r in client.list_resources().await? {
        println!("  {} ({})", r.uri, r.name);
        for c in client.read_resource(&r.uri).await?.contents {
            for line in c.text.unwrap_or_default().lines() {
                println!("    | {line}");
            }
        }
    }

    say("prompts/get greet {\"name\": \"Ada\"}");
    let p = client.get_prompt("greet", json!({"name": "Ada"})).await?;
    for m in p.messages {
        print!("  {}: ", m.role);
        print_content(&m.content);
    }

    say(if client.protocol_version() == "2026-07-28" {
        "ping (a server/discover in 2026-07-28), then close (stdin closed; the server exits)"
    } else {
        "ping, then close (stdin closed; the server exits)"
    });
    let t = Instant::now();
    client.ping().await?;
    println!("  pong in {:.2} ms", t.elapsed().as_secs_f64() * 1000.0);
    client.close().await?;
    println!("  closed.\n\nNext: `mcpwire tools -- <your server command>` or `mcpwire info --url <URL>`.");
    Ok(0)
}
