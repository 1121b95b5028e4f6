//! `mcpwire servers` and `--server NAME` through the manager's discovery,
//! on temporary project and home directories.

mod common;

use std::path::Path;
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
        &sb.project().join(".mcp.json"),
        &json!({"mcpServers": {"ts": {"type": "stdio", "command": "${TS_BIN}",
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

#[test]
fn servers_sources_lists_every_file_and_what_it_gave() {
    let sb = Sandbox::new("sources");
    let ts = test_server();
    let cursor = sb.write(
        &sb.project().join(".cursor/mcp.json"),
        &json!({"mcpServers": {"shared": {"command": ts}, "bad": {"command": 5}}}),
    );
    let gemini = sb.write(
        &sb.home().join(".gemini/settings.json"),
        &json!({"mcpServers": {
            "shared": {"command": ts},
            "gem": {"command": ts, "includeTools": ["echo", "add"], "excludeTools": ["add"]}
        }}),
    );
    let zed = sb.root.join("config/zed/settings.json");
    std::fs::create_dir_all(zed.parent().unwrap()).unwrap();
    std::fs::write(
        &zed,
        "// Zed\n{\"context_servers\": {\"ext\": {\"source\": \"extension\", \"settings\": {}},},}",
    )
    .unwrap();
    let windsurf = sb.home().join(".codeium/windsurf/mcp_config.json");
    std::fs::create_dir_all(windsurf.parent().unwrap()).unwrap();
    std::fs::write(&windsurf, "{\"mcpServers\": ").unwrap();

    let o = sb.run(&["servers", "--sources", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let v = json_out(&o);
    let files = v["sources"].as_array().unwrap();
    assert_eq!(files.len(), 20, "{v}");
    let file = |p: &Path| {
        files
            .iter()
            .find(|f| f["path"] == p.display().to_string())
            .unwrap_or_else(|| panic!("{} not listed: {v}", p.display()))
    };
    let c = file(&cursor);
    assert_eq!(c["present"], true);
    assert_eq!(c["scope"], "project");
    assert_eq!(c["servers"][1]["name"], "shared");
    assert!(c["servers"][0]["error"]
        .as_str()
        .unwrap()
        .contains("`command` must be a string"));
    let g = file(&gemini);
    assert_eq!(
        (&g["scope"], &g["format"]),
        (&json!("user"), &json!("gemini-cli"))
    );
    assert_eq!(g["servers"][0]["name"], "gem");
    assert_eq!(g["shadowed"], json!(["shared"]));
    let z = file(&zed);
    assert!(z["servers"].as_array().unwrap().is_empty());
    assert!(z["notes"][0].as_str().unwrap().contains("extension"));
    let w = file(&windsurf);
    assert!(
        w["error"].as_str().unwrap().contains("not valid JSON"),
        "{w}"
    );
    let absent = file(&sb.project().join(".mcp.json"));
    assert_eq!(absent["present"], false);

    let o = sb.run(&["servers", "--sources"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = |p: &Path| {
        out.lines()
            .find(|l| l.ends_with(&p.display().to_string()))
            .unwrap_or_else(|| panic!("{} not in {out}", p.display()))
            .to_string()
    };
    assert!(line(&cursor).starts_with("read") && line(&cursor).contains("project"));
    assert!(line(&windsurf).starts_with("error"), "{out}");
    assert!(line(&sb.project().join(".mcp.json")).starts_with("absent"));
    assert!(
        out.contains("    server bad: invalid entry: `command` must be a string"),
        "{out}"
    );
    assert!(out.contains("    shadowed shared"), "{out}");
    assert!(out.contains("    note: `context_servers.ext`"), "{out}");

    // The Gemini entry's tool list applies when the servers run.
    let o = sb.run(&["servers", "--json", "--no-project-config"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    let gem = server(&listing, "gem");
    assert_eq!(gem["status"], "connected", "{gem}");
    assert_eq!(gem["tools"], 1, "{gem}");
    assert!(server(&listing, "shared")["tools"].as_u64().unwrap() > 10);
}

#[test]
fn vscode_inputs_without_a_terminal_name_the_input() {
    let sb = Sandbox::new("inputs");
    let ts = test_server();
    let user = sb.root.join("config/Code/User/mcp.json");
    sb.write(
        &user,
        &json!({
            "inputs": [{"type": "promptString", "id": "log", "description": "Log file", "password": true}],
            "servers": {
                "asks": {"type": "stdio", "command": ts, "args": ["--log-file", "${input:log}"]},
                "plain": {"type": "stdio", "command": ts, "args": ["--max-lifetime", "${env:LIFE}"]}
            }
        }),
    );
    let o = sb.run(&["tools", "--server", "asks"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("asks for input `log` (Log file): run it on a terminal"),
        "{}",
        text(&o)
    );
    // `${env:LIFE}` is the variable when the server starts.
    let o = sb.run(&["tools", "--server", "plain"], &[("LIFE", "60")]);
    assert!(o.status.success(), "{}", text(&o));

    let o = sb.run(&["servers", "--json"], &[("LIFE", "60")]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    let asks = server(&listing, "asks");
    assert_eq!(asks["status"], "failed");
    assert!(asks["error"]
        .as_str()
        .unwrap()
        .contains("input `log` (Log file) has no value"));
    assert_eq!(server(&listing, "plain")["status"], "connected");
}

/// VS Code's `pickString` without a terminal is its default (or an error
/// naming the input when it has none); a `command` input fails its server
/// naming the input and the file.
#[test]
fn vscode_pick_and_command_inputs_without_a_terminal() {
    let sb = Sandbox::new("pick");
    let ts = test_server();
    let user = sb.root.join("config/Code/User/mcp.json");
    sb.write(
        &user,
        &json!({
            "inputs": [
                {"type": "pickString", "id": "life", "description": "Lifetime", "options": ["60", {"label": "two minutes", "value": "120"}], "default": "120"},
                {"type": "pickString", "id": "nodefault", "options": ["60"]},
                {"type": "command", "id": "tok", "command": "extension.getToken"}
            ],
            "servers": {
                "picked": {"type": "stdio", "command": ts, "args": ["--max-lifetime", "${input:life}"]},
                "nodefault": {"type": "stdio", "command": ts, "args": ["--max-lifetime", "${input:nodefault}"]},
                "cmd": {"type": "stdio", "command": ts, "env": {"TOKEN": "${input:tok}"}}
            }
        }),
    );
    let o = sb.run(&["tools", "--server", "picked"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("echo"));

    let o = sb.run(&["tools", "--server", "nodefault"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(
            "asks for input `nodefault`, a choice without a default: run it on a terminal"
        ),
        "{}",
        text(&o)
    );

    let o = sb.run(&["tools", "--server", "cmd"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains(&format!("server \"cmd\" in {}", user.display()))
            && out.contains("input `tok`")
            && out.contains("extension.getToken")
            && out.contains("cannot run outside VS Code"),
        "{out}"
    );

    // `servers` starts the one with a default; the command input fails
    // only its own server.
    let o = sb.run(&["servers", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    assert_eq!(
        server(&listing, "picked")["status"],
        "connected",
        "{listing}"
    );
    assert_eq!(server(&listing, "nodefault")["status"], "failed");
    let cmd = server(&listing, "cmd");
    assert_eq!(cmd["status"], "failed");
    assert!(
        cmd["error"].as_str().unwrap().contains("input `tok`"),
        "{cmd}"
    );
}

/// GitHub Copilot CLI's project files are read from each directory above
/// the current one up to the Git root: run in a subdirectory of a
/// repository, the root's `.mcp.json` and `.github/mcp.json` are listed,
/// need approval like any project server, and run once approved.
#[test]
fn copilot_project_files_up_to_the_git_root() {
    let sb = Sandbox::new("copilotwalk");
    let ts = test_server();
    let repo = sb.project();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let sub = repo.join("packages/web");
    std::fs::create_dir_all(&sub).unwrap();
    let root_file = sb.write(
        &repo.join(".mcp.json"),
        &json!({"mcpServers": {"repo-ts": {"type": "local", "command": ts, "args": [], "tools": ["echo"]}}}),
    );
    sb.write(
        &repo.join(".github/mcp.json"),
        &json!({"mcpServers": {"gh-ts": {"type": "stdio", "command": ts, "args": [], "tools": ["*"]}}}),
    );
    // Above the repository: not read.
    sb.write(
        &sb.root.join(".mcp.json"),
        &json!({"mcpServers": {"outside": {"command": ts}}}),
    );

    let o = sb.run_in(&sub, &["servers", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    let repo_ts = server(&listing, "repo-ts");
    assert_eq!(repo_ts["status"], "needs approval", "{repo_ts}");
    assert_eq!(repo_ts["scope"], "project");
    assert_eq!(
        repo_ts["source"],
        root_file.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(server(&listing, "gh-ts")["status"], "needs approval");
    let names: Vec<&str> = listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"outside"), "{listing}");

    let o = sb.run_in(&sub, &["servers", "--sources", "--json"], &[]);
    let v = json_out(&o);
    let root_source = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == root_file.canonicalize().unwrap().display().to_string())
        .unwrap_or_else(|| panic!("the root's .mcp.json is not listed: {v}"));
    assert_eq!(root_source["format"], "copilot-cli");
    assert_eq!(root_source["scope"], "project");

    let o = sb.run_in(&sub, &["approve", "repo-ts"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = sb.run_in(&sub, &["servers", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    let repo_ts = server(&listing, "repo-ts");
    assert_eq!(repo_ts["status"], "connected", "{repo_ts}");
    assert_eq!(repo_ts["tools"], 1, "Copilot's `tools` list applies");
    assert_eq!(server(&listing, "gh-ts")["status"], "needs approval");

    let o = sb.run_in(&sub, &["servers", "--json", "--no-project-config"], &[]);
    let listing = json_out(&o);
    assert!(
        listing["servers"].as_array().unwrap().is_empty(),
        "{listing}"
    );
}

/// A hand-edited Goose `config.yaml` whose extension takes its `type`,
/// `cmd` and `enabled` from an anchor through a YAML merge key: the
/// server is found and runs, with the entry's own `available_tools`.
#[test]
fn goose_extension_from_a_yaml_merge_key() {
    let sb = Sandbox::new("goosemerge");
    let config = sb.root.join("config/goose/config.yaml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "GOOSE_PROVIDER: openai\nx-test-server: &ts\n  type: stdio\n  cmd: {:?}\n  enabled: true\n  timeout: 60\nextensions:\n  merged:\n    <<: *ts\n    args: []\n    available_tools: [echo]\n    name: merged\n",
            test_server()
        ),
    )
    .unwrap();
    let o = sb.run(&["servers", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    let merged = server(&listing, "merged");
    assert_eq!(merged["status"], "connected", "{merged}");
    assert_eq!(merged["scope"], "user");
    assert_eq!(merged["tools"], 1, "{merged}");
}

/// A workspace's `.vscode/mcp.json` whose command is `${config:NAME}`,
/// set only in VS Code Insiders' user settings (the workspace is opened in
/// Insiders): found there, the server runs once approved.
#[test]
fn vscode_workspace_config_variable_from_insiders_user_settings() {
    let sb = Sandbox::new("insidersconfig");
    sb.write(
        &sb.root.join("config/Code - Insiders/User/settings.json"),
        &json!({"workbench.colorTheme": "Default Dark Modern", "mcpwire.testServer": test_server()}),
    );
    sb.write(
        &sb.project().join(".vscode/mcp.json"),
        &json!({"servers": {"from-settings": {
            "type": "stdio",
            "command": "${config:mcpwire.testServer}",
            "args": ["--max-lifetime", "60"]
        }}}),
    );
    let o = sb.run(&["servers", "--json", "--approve"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = json_out(&o);
    let s = server(&listing, "from-settings");
    assert_eq!(s["status"], "connected", "{s}");
    assert_eq!(s["scope"], "project");
}
