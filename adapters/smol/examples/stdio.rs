//! Connects to a stdio MCP server, lists its tools, calls `echo` if it has
//! one, and closes; on smol.
//!
//! ```sh
//! cargo run -p mcpwire-smol --example smol-stdio -- <server command> [args...]
//! # against the project's test server (the default when no command is
//! # given: $MCPWIRE_TEST_SERVER, else target/<profile>/mcpwire-test-server):
//! cargo build -p mcpwire-tests --bin mcpwire-test-server
//! cargo run -p mcpwire-smol --example smol-stdio
//! ```

use std::path::PathBuf;
use std::time::Duration;

use mcpwire_smol::{CallOptions, Client, ServerConfig};
use serde_json::json;

/// The test server: `$MCPWIRE_TEST_SERVER`, else next to this example's
/// directory (`target/<profile>/examples/stdio` → `target/<profile>/`).
fn test_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MCPWIRE_TEST_SERVER") {
        return Some(p.into());
    }
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join(format!(
        "mcpwire-test-server{}",
        std::env::consts::EXE_SUFFIX
    ));
    bin.is_file().then_some(bin)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut argv = std::env::args_os().skip(1);
    let command = match argv.next().map(PathBuf::from).or_else(test_server) {
        Some(c) => c,
        None => {
            eprintln!(
                "usage: stdio [<server command> [args...]]\n\
                 (without a command: $MCPWIRE_TEST_SERVER or target/<profile>/mcpwire-test-server; \
                 build it with `cargo build -p mcpwire-tests --bin mcpwire-test-server`)"
            );
            std::process::exit(2);
        }
    };
    let args: Vec<String> = argv.map(|a| a.to_string_lossy().into_owned()).collect();
    let config = ServerConfig::stdio(command.to_string_lossy()).args(args);
    smol::block_on(async {
        let client = Client::connect(config).await?;
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
                    json!({"message": "hello from mcpwire-smol"}),
                    CallOptions::new().timeout(Duration::from_secs(5)),
                )
                .await?;
            println!("echo -> {}", out.text());
        }
        client.close().await?;
        Ok(())
    })
}
