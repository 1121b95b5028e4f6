//! What a host entry adds to its server config: the tool list
//! (`includeTools`, `enabled_tools`, `tools`, …) decides which tools the
//! manager exposes and lets the agent call, the startup timeout bounds each
//! connection attempt, VS Code's inputs are supplied by the host.

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::*;
use mcpwire::mcp::types::Tool;
use mcpwire_manager::policy::cache::ToolCache;
use mcpwire_manager::{
    CallOptions, Error, Input, ManagerOptions, ServerConfig, ServerEntry, ServerState, ToolFilter,
};
use serde_json::json;

fn filtered(
    name: &str,
    config: ServerConfig,
    include: Option<&[&str]>,
    exclude: &[&str],
) -> ServerEntry {
    ServerEntry {
        tools: ToolFilter {
            include: include.map(|i| i.iter().map(|s| s.to_string()).collect()),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
        },
        ..ServerEntry::new(name, config)
    }
}

fn names<M: Front>(m: &M, server: &str) -> Vec<String> {
    let mut n: Vec<String> = m
        .tools()
        .into_iter()
        .filter(|t| t.server == server)
        .map(|t| t.name)
        .collect();
    n.sort();
    n
}

fn hidden_tools_are_not_listed_and_their_calls_are_refused<M: Front>() {
    let ts = ServerConfig::stdio(test_server());
    let m = M::start(
        [
            filtered("only", ts.clone(), Some(&["echo", "add"]), &["add"]),
            filtered("but", ts.clone(), None, &["echo", "slow", "crash"]),
            ServerEntry::new("all", ts.clone()),
        ],
        ManagerOptions::new().no_cache(),
    );
    for s in ["only", "but", "all"] {
        assert!(is_connected(&status_of(&m, s)), "{:?}", m.status());
    }
    // Exclude wins over include.
    assert_eq!(names(&m, "only"), ["mcp__only__echo"]);
    assert_eq!(status_of(&m, "only").tools, 1);
    let but = names(&m, "but");
    assert!(but.contains(&"mcp__but__add".to_string()), "{but:?}");
    assert!(!but
        .iter()
        .any(|n| n.ends_with("__echo") || n.ends_with("__slow")));
    let all = names(&m, "all");
    assert_eq!(all.len(), but.len() + 3, "{all:?} vs {but:?}");

    let out = m
        .call(
            "mcp__only__echo",
            json!({"message": "hi"}),
            CallOptions::new(),
        )
        .unwrap();
    assert_ne!(out.is_error, Some(true));
    match m.call(
        "mcp__only__add",
        json!({"a": 1, "b": 2}),
        CallOptions::new(),
    ) {
        Err(Error::UnknownTool(t)) => assert_eq!(t, "mcp__only__add"),
        other => panic!("a hidden tool was called: {other:?}"),
    }
    assert!(m
        .call("mcp__all__add", json!({"a": 1, "b": 2}), CallOptions::new())
        .is_ok());
    m.close();
}

fn tool(name: &str) -> Tool {
    serde_json::from_value(json!({"name": name, "inputSchema": {"type": "object"}})).unwrap()
}

/// Cached tools are filtered too: a hidden tool is not offered while the
/// server is still connecting.
#[cfg(unix)]
fn cached_tools_are_filtered_and_the_startup_timeout_bounds_each_attempt<M: Front>() {
    let dir = TempDir::new("filter-cache");
    let cache_path = dir.path().join("tools.json");
    let slow = ServerConfig::stdio("sh").args([
        "-c".to_string(),
        "sleep 3; exec \"$0\"".to_string(),
        test_server(),
    ]);
    let mut cache = ToolCache::new();
    cache.insert(
        "slow",
        &slow,
        vec![tool("echo"), tool("add")],
        SystemTime::now(),
    );
    std::fs::write(&cache_path, cache.to_json()).unwrap();

    let entry = ServerEntry {
        startup_timeout: Some(Duration::from_millis(800)),
        ..filtered("slow", slow.clone(), Some(&["echo"]), &[])
    };
    let started = Instant::now();
    let m = M::start(
        [entry],
        ManagerOptions::new()
            .cache_file(&cache_path)
            .connect_timeout(Duration::from_secs(30)),
    );
    assert_eq!(names(&m, "slow"), ["mcp__slow__echo"]);
    // The entry's 800 ms wins over the manager's 30 s: the first attempt
    // fails (and a failed first attempt is final) long before the server
    // would have started.
    eventually(
        Duration::from_millis(2500),
        "the attempt to time out",
        || matches!(status_of(&m, "slow").state, ServerState::Failed { .. }),
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    m.close();
}

fn inputs_come_from_the_host<M: Front>() {
    let dir = TempDir::new("inputs");
    let log = dir.path().join("log.jsonl");
    let input = |id: &str| Input {
        id: id.into(),
        description: Some(format!("the {id}")),
        password: true,
        default: None,
        options: Vec::new(),
    };
    // The test server's --log-file comes from an input.
    let entry = |name: &str| ServerEntry {
        inputs: vec![input("log")],
        ..ServerEntry::new(
            name,
            ServerConfig::stdio(test_server()).args(["--log-file", "${input:log}"]),
        )
    };
    let log_path = log.to_string_lossy().into_owned();
    let m = M::start(
        [entry("given"), entry("refused")],
        ManagerOptions::new()
            .no_cache()
            .inputs(move |e, i| (e.name == "given" && i.id == "log").then(|| log_path.clone())),
    );
    assert!(is_connected(&status_of(&m, "given")), "{:?}", m.status());
    assert!(log.is_file(), "the input's value reached the server");
    match status_of(&m, "refused").state {
        ServerState::Failed { error } => {
            assert!(
                error.contains("input `log` (the log) has no value"),
                "{error}"
            )
        }
        other => panic!("{other:?}"),
    }
    m.close();
    // Without a supplier, every entry with inputs fails.
    let m = M::start([entry("none")], ManagerOptions::new().no_cache());
    assert!(matches!(
        status_of(&m, "none").state,
        ServerState::Failed { .. }
    ));
    m.close();
}

on_every_front_end!(
    hidden_tools_are_not_listed_and_their_calls_are_refused,
    cached_tools_are_filtered_and_the_startup_timeout_bounds_each_attempt,
    inputs_come_from_the_host,
);
