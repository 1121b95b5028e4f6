//! Connects to a stdio MCP server, lists its tools, calls one, closes.
//!
//! ```sh
//! cargo run -p mcpwire-tokio --example stdio -- <server command> [args...]
//! # against the project's test server:
//! cargo build -p mcpwire-tests && cargo run -p mcpwire-tokio --example stdio -- target/debug/mcpwire-test-server
//! ```

use std::time::Duration;

use mcpwire_tokio::{CallOptions, Client, ServerConfig};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args().skip(1);
    let Some(command) = argv.next() else {
        eprintln!("usage: stdio <server command> [args...]");
        std::process::exit(2);
    };
    let client = Client::connect(ServerConfig::stdio(command).args(argv)).await?;
    let server = client.server();
    println!(
        "connected to {} {} (protocol {})",
        server.server_info.name, server.server_info.version, server.protocol_version
    );
    let tools = client.list_tools().await?;
    for t in &tools {
        println!(
            "  {:<20} {}",
            t.name,
            t.description.as_deref().unwrap_or("")
        );
    }
    if tools.iter().any(|t| t.name == "echo") {
        let out = client
            .call_tool_with(
                "echo",
                json!({"message": "hello from mcpwire-tokio"}),
                CallOptions::new().timeout(Duration::from_secs(5)),
            )
            .await?;
        println!("echo -> {}", out.text());
    }
    client.close().await?;
    Ok(())
}
