//! `mcpwire servers` and `--server NAME` through the manager's discovery,
//! on temporary project and home directories.

mod common;

use std::process::Output;

use common::{test_server, text, Sandbox};
use serde_json::{json, Value};

fn json_out(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

fn server<'a>(listing: &'a Value, name: &str) -> &'a Value {
    listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {listing}"))
}

#[test]
fn servers_lists_status_and_tool_counts() {
    let sb = Sandbox::new("list");
    let cfg = sb.write(
        &sb.root.join("servers.json"),
        &json!({"mcpServers": {
            "ts": {"command": test_server()},
            "off": {"command": test_server(), "enabled": false},
            "nocmd": {"type": "stdio"},
            "gone": {"command": "/nonexistent/mcp-server"}
        }}),
    );
    let cfg = cfg.to_str().unwrap();
    let o = sb.run(&["servers", "--config", cfg, "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    let ts = server(&listing, "ts");
    assert_eq!(ts["status"], "connected");
    assert!(ts["tools"].as_u64().unwrap() > 10, "{ts}");
    assert_eq!(ts["transport"], "stdio");
    assert_eq!(ts["scope"], "explicit");
    assert_eq!(server(&listing, "off")["status"], "disabled");
    let nocmd = server(&listing, "nocmd");
    assert_eq!(nocmd["status"], "failed");
    assert!(nocmd["error"]
        .as_str()
        .unwrap()
        .contains("stdio server without `command`"));
    assert_eq!(server(&listing, "gone")["status"], "failed");
    assert!(
        sb.root.join("cache/mcpwire/tools.json").is_file(),
        "the tool cache is written under $XDG_CACHE_HOME"
    );

    let o = sb.run(&["servers", "--config", cfg], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("ts ")).unwrap();
    assert!(
        line.contains("connected") && line.contains("stdio"),
        "{out}"
    );
    assert!(
        out.contains("error: invalid entry: stdio server without `command`"),
        "{out}"
    );
}

#[test]
fn servers_discovers_project_and_user_files_and_the_project_switch() {
    let sb = Sandbox::new("discover");
    let ts = test_server();
    sb.write(
        &sb.project().join(".cursor/mcp.json"),
        &json!({"mcpServers": {"proj": {"command": ts}, "both": {"command": ts}}}),
    );
    sb.write(
        &sb.home().join(".claude.json"),
        &json!({"mcpServers": {"user": {"command": ts}, "both": {"command": "/nonexistent/x"}}}),
    );
    // The project's servers run once approved (see consent.rs).
    let o = sb.run(&["servers", "--json", "--approve"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    assert_eq!(server(&listing, "proj")["scope"], "project");
    assert_eq!(server(&listing, "user")["scope"], "user");
    let both = server(&listing, "both");
    assert_eq!(both["scope"], "project", "the first definition wins");
    assert_eq!(both["status"], "connected");
    assert_eq!(listing["shadowed"][0]["name"], "both");

    let o = sb.run(&["servers", "--json", "--no-project-config"], &[]);
    let listing = json_out(&o);
    let names: Vec<&str> = listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["both", "user"]);
    assert_eq!(server(&listing, "both")["status"], "failed");
}

#[test]
fn server_name_uses_discovery_and_expands_variables() {
    let sb = Sandbox::new("named");
    sb.write(
        &sb.project().join(".vscode/mcp.json"),
        &json!({"servers": {"ts": {"type": "stdio", "command": "${TS_BIN}",
                                   "args": ["--max-lifetime", "${LIFETIME:-60}"]}}}),
    );
    let ts = test_server();
    let o = sb.run(
        &["tools", "--server", "ts", "--approve"],
        &[("TS_BIN", &ts)],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("echo"));

    let o = sb.run(&["tools", "--server", "ts"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("TS_BIN"), "{}", text(&o));

    let o = sb.run(&["tools", "--server", "nope"], &[("TS_BIN", &ts)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("it has: ts"), "{}", text(&o));

    let o = sb.run(
        &["tools", "--server", "ts", "--no-project-config"],
        &[("TS_BIN", &ts)],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("add --config"), "{}", text(&o));
}

#[test]
fn servers_usage_errors() {
    let sb = Sandbox::new("usage");
    let o = sb.run(&["servers", "--url", "http://127.0.0.1:1/mcp"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = sb.run(&["servers", "--config", "/nonexistent/mcp.json"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("cannot read"), "{}", text(&o));
    let o = sb.run(&["servers"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no MCP servers configured"));
}
