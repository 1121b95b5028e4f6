//! `--server NAME` applies the entry's tool list exactly as the manager
//! does: hidden tools are not listed, and a call to one is refused as an
//! unknown tool before anything is sent to the server.

mod common;

use std::path::Path;

use common::{test_server, text, Sandbox};
use serde_json::{json, Value};

/// The `tools/call` requests the test server logged.
fn calls(log: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(log) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"]["method"] == "tools/call")
        .map(|v| {
            v["message"]["params"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

fn tool_names(out: &std::process::Output) -> Vec<String> {
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(out)));
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_discovered_entrys_tool_list_applies_to_tools_and_call() {
    let sb = Sandbox::new("srvtools");
    let ts = test_server();
    let log = sb.root.join("gem.log");
    // Gemini CLI's user settings (a user file: no approval needed).
    sb.write(
        &sb.home().join(".gemini/settings.json"),
        &json!({"mcpServers": {
            "gem": {"command": ts, "args": ["--log-file", log.to_string_lossy()],
                    "includeTools": ["echo", "add"], "excludeTools": ["add"]},
            "all": {"command": ts}
        }}),
    );

    let o = sb.run(&["tools", "--json", "--server", "gem"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(tool_names(&o), ["echo"]);
    let o = sb.run(&["tools", "--server", "gem"], &[]);
    let listed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        listed.starts_with("echo") && listed.lines().count() == 1,
        "{listed}"
    );
    // The same server without a tool list has them all.
    let o = sb.run(&["tools", "--json", "--server", "all"], &[]);
    let all = tool_names(&o);
    assert!(
        all.len() > 10 && all.contains(&"add".to_string()),
        "{all:?}"
    );

    let o = sb.run(&["call", "echo", "message=hi", "--server", "gem"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(calls(&log), ["echo"]);

    // A hidden tool, and one the server does not have at all, are refused
    // before anything is sent: the server logs no new call.
    for tool in ["add", "crash"] {
        let o = sb.run(&["call", tool, "a=1", "b=2", "--server", "gem"], &[]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let out = text(&o);
        assert!(
            out.contains(&format!("unknown tool `{tool}`")) && out.contains("server \"gem\""),
            "{out}"
        );
    }
    assert_eq!(calls(&log), ["echo"], "nothing was sent");
    let o = sb.run(&["call", "add", "a=1", "b=2", "--server", "all"], &[]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_codex_entry_given_with_config_filters_too() {
    let sb = Sandbox::new("srvtoolscodex");
    let ts = test_server();
    let file = sb.root.join("servers.toml");
    std::fs::write(
        &file,
        format!(
            "[mcp_servers.cx]\ncommand = {ts:?}\nenabled_tools = [\"echo\", \"add\"]\ndisabled_tools = [\"echo\"]\n"
        ),
    )
    .unwrap();
    let f = file.to_string_lossy().into_owned();
    let o = sb.run(&["tools", "--json", "--server", "cx", "--config", &f], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(tool_names(&o), ["add"]);
    let o = sb.run(
        &[
            "call",
            "echo",
            "message=x",
            "--server",
            "cx",
            "--config",
            &f,
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unknown tool `echo`"), "{}", text(&o));
    let o = sb.run(
        &[
            "--json", "call", "add", "a=2", "b=40", "--server", "cx", "--config", &f,
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
}
