//! Connects to a Streamable HTTP MCP server (falling back to legacy SSE when
//! the server asks for it), shows progress of a long call, closes.
//!
//! ```sh
//! cargo run -p mcpwire-tokio --example http -- http://127.0.0.1:3001/mcp
//! # against the project's test server (it prints its URL, then waits):
//! target/debug/mcpwire-test-server --http &   # listening on http://127.0.0.1:PORT/mcp
//! cargo run -p mcpwire-tokio --example http -- http://127.0.0.1:PORT/mcp
//! ```

use mcpwire_tokio::{CallOptions, Client, ServerConfig};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: http <url> [tool]");
        std::process::exit(2);
    };
    let client = Client::connect(ServerConfig::http(url)).await?;
    println!(
        "connected to {} over {} (protocol {})",
        client.server().server_info.name,
        client.transport(),
        client.protocol_version()
    );
    let tools = client.list_tools().await?;
    println!("{} tools", tools.len());
    if tools.iter().any(|t| t.name == "slow") {
        let out = client
            .call_tool_with(
                "slow",
                json!({"ms": 500, "steps": 5}),
                CallOptions::new().on_progress(|p| {
                    println!("  progress {}/{}", p.progress, p.total.unwrap_or(0.0))
                }),
            )
            .await?;
        println!("slow -> {}", out.text());
    }
    client.close().await?;
    Ok(())
}
