//! Long-running tool calls (tasks) and checked structured output, against
//! any stdio server; the demo server has both (`slow_job`, `add`).
//!
//! ```sh
//! cargo build -p mcpwire-cli
//! cargo run -p mcpwire-tokio --example tasks -- target/debug/mcpwire serve --demo
//! MCPWIRE_EXAMPLE_ERA=legacy cargo run -p mcpwire-tokio --example tasks -- target/debug/mcpwire serve --demo
//! ```
//!
//! `call_tool` follows a task by itself (status changes as progress, the
//! server's questions to the handlers, `tasks/cancel` on timeout or drop);
//! `start_tool_task` returns the task at once to come back to later.

use std::time::Duration;

use mcpwire_tokio::types::{Task, TaskStarted};
use mcpwire_tokio::{CallOptions, Client, Error, ServerConfig};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let Some(command) = argv.next() else {
        eprintln!(
            "usage: tasks <server command> [args...]   (e.g. target/debug/mcpwire serve --demo)"
        );
        std::process::exit(2);
    };
    let mut config = ServerConfig::stdio(command).args(argv);
    // The era is found by probing; pin it to see the other one.
    if let Ok(era) = std::env::var("MCPWIRE_EXAMPLE_ERA") {
        config = config.era(&era);
    }
    let client = Client::connect(config).await?;
    println!("protocol {}", client.protocol_version());
    // 2025-11-25: a tool's task support comes from the list.
    client.list_tools().await?;

    // Transparent: the call may become a task; its status is progress.
    let out = client
        .call_tool_with(
            "slow_job",
            json!({"seconds": 1}),
            CallOptions::new()
                .timeout(Duration::from_secs(30)) // a timeout cancels the task on the server
                .on_progress(|p| match p.task.as_ref().and_then(Task::from_value) {
                    Some(task) => println!("  task {}: {}", task.task_id, task.describe()),
                    None => println!("  progress {}", p.progress),
                }),
        )
        .await?;
    println!("call_tool -> {}", out.text());

    // Detached: start now, come back later.
    match client
        .start_tool_task("slow_job", json!({"seconds": 0.5}), CallOptions::new())
        .await?
    {
        TaskStarted::Task(task) => {
            println!("started task {} ({})", task.task_id, task.describe());
            let now = client.get_task(&task.task_id).await?;
            println!("  now: {}", now.describe());
            let out = client
                .task_result(&task.task_id, CallOptions::new())
                .await?;
            println!("  result: {}", out.text());
        }
        TaskStarted::Done(out) => println!("answered at once: {}", out.text()),
    }

    // Structured output is checked against the tool's outputSchema.
    match client.call_tool("add", json!({"a": 2, "b": 40})).await {
        Ok(out) => println!("add -> {:?}", out.structured_content),
        Err(Error::StructuredOutput { tool, problem }) => println!("{tool}: {problem}"),
        Err(e) => return Err(e.into()),
    }
    client.close().await?;
    Ok(())
}
