//! A client for the MCP conformance suite (`@modelcontextprotocol/conformance`).
//!
//! The suite runs `conformance-client <server-url>` with
//! `MCP_CONFORMANCE_SCENARIO` set, and judges what the client does on the
//! wire. Exit status 0 when every step the scenario asks for succeeded.

use std::process::ExitCode;
use std::time::Duration;

use mcpwire_tokio::{Client, ConnectOptions, ErrorObject, ServerConfig};
use serde_json::{json, Map, Value};

/// Fills an elicitation answer with the defaults of the requested schema
/// (SEP-1034: a client applies the defaults of omitted fields).
fn defaults_of(params: &Value) -> Value {
    let mut content = Map::new();
    if let Some(props) = params["requestedSchema"]["properties"].as_object() {
        for (name, schema) in props {
            if let Some(d) = schema.get("default") {
                content.insert(name.clone(), d.clone());
            }
        }
    }
    json!({ "action": "accept", "content": content })
}

async fn run(url: &str, scenario: &str) -> Result<(), String> {
    let mut options = ConnectOptions::new()
        .client_info("mcpwire-conformance-client", env!("CARGO_PKG_VERSION"))
        .timeout(Duration::from_secs(20));
    if scenario.starts_with("elicitation") {
        options =
            options.elicitation(|params| async move { Ok::<_, ErrorObject>(defaults_of(&params)) });
    }
    let client = Client::connect_with(ServerConfig::http(url), options)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let tools = if client.server().capabilities.tools.is_some() {
        client
            .list_tools()
            .await
            .map_err(|e| format!("tools/list: {e}"))?
    } else {
        Vec::new()
    };
    let call = |name: &'static str, args: Value| {
        let client = client.clone();
        async move {
            let r = client
                .call_tool(name, args)
                .await
                .map_err(|e| format!("tools/call {name}: {e}"))?;
            if r.is_error() {
                return Err(format!("tools/call {name} returned isError: {}", r.text()));
            }
            eprintln!("{name}: {}", r.text());
            Ok::<_, String>(())
        }
    };
    match scenario {
        "initialize" => {}
        "tools_call" => call("add_numbers", json!({"a": 5, "b": 3})).await?,
        "elicitation-sep1034-client-defaults" => {
            call("test_client_elicitation_defaults", json!({})).await?
        }
        "sse-retry" => call("test_reconnection", json!({})).await?,
        _ => {
            // Other scenarios (auth/*): use the first tool the server offers.
            if let Some(t) = tools.first() {
                let name: &'static str = Box::leak(t.name.clone().into_boxed_str());
                call(name, json!({})).await?;
            }
        }
    }
    client.close().await.map_err(|e| format!("close: {e}"))
}

fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance-client <server-url>  (MCP_CONFORMANCE_SCENARIO selects the scenario)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match rt.block_on(run(&url, &scenario)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client ({scenario}): {e}");
            ExitCode::from(1)
        }
    }
}
