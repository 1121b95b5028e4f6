//! Startup: parallel connects, the startup deadline, the tool cache
//! (warm, cold, corrupt), per-server validation and `${VAR}` expansion.

mod common;

use std::time::{Duration, Instant, SystemTime};

use common::*;
use mcpwire::mcp::types::Tool;
use mcpwire_manager::policy::cache::ToolCache;
use mcpwire_manager::{
    CallOptions, Env, Error, ManagerOptions, ServerConfig, ServerEntry, ServerState,
};
use serde_json::json;

fn echo_tool() -> Tool {
    serde_json::from_value(json!({
        "name": "echo",
        "description": "cached echo",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}
    }))
    .unwrap()
}

/// The test server behind `sh -c 'sleep N; exec server'`.
#[cfg(unix)]
fn slow_server(secs: u32) -> ServerConfig {
    ServerConfig::stdio("sh").args([
        "-c".to_string(),
        format!("sleep {secs}; exec \"$0\""),
        test_server(),
    ])
}

#[cfg(unix)]
fn slow_server_with_a_warm_cache_is_deferred_and_its_call_waits<M: Front>() {
    let dir = TempDir::new("warm");
    let cache_path = dir.path().join("tools.json");
    let slow = slow_server(2);
    let mut cache = ToolCache::new();
    cache.insert("slow", &slow, vec![echo_tool()], SystemTime::now());
    std::fs::write(&cache_path, cache.to_json()).unwrap();

    let started = Instant::now();
    let m = M::start(
        [
            ServerEntry::new("fast", ServerConfig::stdio(test_server())),
            ServerEntry::new("slow", slow.clone()),
        ],
        ManagerOptions::new().cache_file(&cache_path),
    );
    let ready_after = started.elapsed();
    // Not a benchmark: the slow server needs 2 s, so returning well
    // before that means it was not waited for.
    assert!(
        ready_after < Duration::from_millis(1500),
        "ready after {ready_after:?}"
    );
    assert!(is_connected(&status_of(&m, "fast")), "{:?}", m.status());
    let s = status_of(&m, "slow");
    assert_eq!(s.state, ServerState::Connecting);
    assert!(s.tools_from_cache && s.tools == 1, "{s:?}");
    let tools = m.tools();
    let deferred = tools.iter().find(|t| t.name == "mcp__slow__echo").unwrap();
    assert!(deferred.deferred);
    assert_eq!(deferred.tool.description.as_deref(), Some("cached echo"));
    assert!(tools
        .iter()
        .filter(|t| t.server == "fast")
        .all(|t| !t.deferred));

    let out = m
        .call(
            "mcp__slow__echo",
            json!({"message": "worth the wait"}),
            CallOptions::new().timeout(Duration::from_secs(10)),
        )
        .unwrap();
    assert_eq!(out.text(), "Echo: worth the wait");
    let s = status_of(&m, "slow");
    assert!(
        is_connected(&s) && !s.tools_from_cache && s.tools > 1,
        "{s:?}"
    );
    assert!(m.tools().iter().all(|t| !t.deferred));

    // The cache now holds the slow server's real list.
    eventually(Duration::from_secs(20), "the cache rewritten", || {
        let cache = ToolCache::parse(&std::fs::read(&cache_path).unwrap());
        cache
            .get("slow", &slow, SystemTime::now())
            .is_some_and(|listed| listed.len() > 1 && listed.iter().any(|t| t.name == "crash"))
    });
    m.close();
}

#[cfg(unix)]
fn servers_without_a_cache_are_awaited<M: Front>() {
    let dir = TempDir::new("cold");
    let m = M::start(
        [ServerEntry::new("slow", slow_server(1))],
        ManagerOptions::new().cache_file(dir.path().join("tools.json")),
    );
    assert!(is_connected(&status_of(&m, "slow")), "{:?}", m.status());
    assert!(m.tools().iter().any(|t| t.name == "mcp__slow__echo"));
    m.close();
}

/// A 2026-07-28 server's `ttlMs` on its tool list (SEP-2549) is kept with
/// the cache entry: while it lasts, a later start uses the list without
/// asking the server again (output schemas still checked); without a
/// hint the list is asked for at every start.
fn a_list_the_server_says_is_fresh_is_not_asked_for_again<M: Front>() {
    let dir = TempDir::new("fresh");
    let cache_path = dir.path().join("tools.json");
    for (ttl, lists_in_second_run) in [(Some("60000"), 0), (None, 2)] {
        let log = dir.path().join(format!("server-{ttl:?}.log"));
        let mut config =
            ServerConfig::stdio(test_server()).args(["--log-file", log.to_str().unwrap()]);
        if let Some(ms) = ttl {
            config = config.args(["--list-ttl-ms", ms]);
        }
        let lists = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(r#""method":"tools/list""#))
                .count()
        };
        for run in 0..2 {
            let m = M::start(
                [ServerEntry::new("ts", config.clone())],
                ManagerOptions::new().cache_file(&cache_path),
            );
            let s = status_of(&m, "ts");
            assert!(is_connected(&s), "{:?}", m.status());
            assert!(!s.tools_from_cache, "{s:?}");
            assert!(m.tools().iter().any(|t| t.name == "mcp__ts__add"));
            let out = m
                .call("mcp__ts__add", json!({"a": 2, "b": 3}), CallOptions::new())
                .unwrap();
            assert_eq!(out.structured_content, Some(json!({"sum": 5})));
            // A result that breaks the listed output schema is still
            // refused: the schemas came with the kept list.
            let broken = m.call(
                "mcp__ts__add",
                json!({"a": 2, "b": 3, "broken": "type"}),
                CallOptions::new(),
            );
            assert!(broken.is_err(), "{broken:?}");
            m.close();
            let expected = if run == 0 { 2 } else { 2 + lists_in_second_run };
            assert_eq!(lists(), expected, "run {run}, ttl {ttl:?}");
        }
        let cache = ToolCache::parse(&std::fs::read(&cache_path).unwrap());
        let fresh = cache.fresh_listing("ts", &config, SystemTime::now());
        assert_eq!(fresh.is_some(), ttl.is_some(), "{ttl:?}");
    }
}

fn a_corrupt_cache_is_a_miss_and_is_rewritten<M: Front>() {
    let dir = TempDir::new("corrupt");
    let cache_path = dir.write("cache/tools.json", "{ this is not json");
    let config = ServerConfig::stdio(test_server());
    let m = M::start(
        [ServerEntry::new("ts", config.clone())],
        ManagerOptions::new().cache_file(&cache_path),
    );
    assert!(is_connected(&status_of(&m, "ts")));
    m.close();
    let cache = ToolCache::parse(&std::fs::read(&cache_path).unwrap());
    assert!(cache.get("ts", &config, SystemTime::now()).is_some());
    // Another config of the same name misses.
    assert!(cache
        .get(
            "ts",
            &config.clone().arg("--no-tools-cap"),
            SystemTime::now()
        )
        .is_none());
}

fn each_entry_is_validated_alone<M: Front>() {
    let entry = |name: &str, v: serde_json::Value| {
        ServerEntry::new(name, serde_json::from_value::<ServerConfig>(v).unwrap())
    };
    let ts = test_server();
    let m = M::start(
        [
            entry("good", json!({"command": ts})),
            entry(
                "both",
                json!({"command": ts, "url": "http://127.0.0.1:1/mcp"}),
            ),
            entry("nocommand", json!({"type": "stdio", "args": ["x"]})),
            entry("nourl", json!({"type": "http"})),
            entry("weird", json!({"type": "websocket", "url": "ws://h"})),
            entry("off", json!({"command": ts, "enabled": false})),
            entry(
                "unset",
                json!({"command": ts, "env": {"K": "${MCPWIRE_TEST_UNSET_VAR}"}}),
            ),
            entry("missing", json!({"command": "/nonexistent/mcp-server"})),
            ServerEntry {
                config: Err("invalid entry: invalid type: integer `5`, expected a sequence".into()),
                ..ServerEntry::new("unparsable", ServerConfig::default())
            },
        ],
        ManagerOptions::new().no_cache(),
    );
    let failed = |name: &str| match status_of(&m, name).state {
        ServerState::Failed { error } => error,
        other => panic!("{name}: {other:?}"),
    };
    assert!(is_connected(&status_of(&m, "good")));
    assert!(failed("both").contains("both `command` and `url`"));
    assert!(failed("nocommand").contains("stdio server without `command`"));
    assert!(failed("nourl").contains("http server without `url`"));
    assert!(failed("weird").contains("unknown server type `websocket`"));
    assert_eq!(status_of(&m, "off").state, ServerState::Disabled);
    let e = failed("unset");
    assert!(
        e.contains("MCPWIRE_TEST_UNSET_VAR") && e.contains("env.K"),
        "{e}"
    );
    assert!(failed("missing").contains("/nonexistent/mcp-server"));
    assert!(failed("unparsable").contains("expected a sequence"));
    assert!(m.tools().iter().all(|t| t.server == "good"));
    assert!(!m.tools().is_empty());
    m.close();
}

fn variables_are_expanded_but_the_cache_keeps_the_unexpanded_entry<M: Front>() {
    let dir = TempDir::new("expand");
    let cache_path = dir.path().join("tools.json");
    let raw: ServerConfig = serde_json::from_value(json!({
        "command": "${TS_BIN}",
        "args": ["--log-file", "${LOG_DIR}/server.log", "${EXTRA:---max-lifetime=60}"],
        "env": {"API_TOKEN": "${SECRET}"}
    }))
    .unwrap();
    let env = Env::from_pairs([
        ("TS_BIN", test_server()),
        ("LOG_DIR", dir.path().to_string_lossy().into_owned()),
        ("SECRET", "hunter2-do-not-store".to_string()),
    ]);
    let m = M::start(
        [ServerEntry::new("x", raw.clone())],
        ManagerOptions::new().cache_file(&cache_path).env(env),
    );
    assert!(is_connected(&status_of(&m, "x")), "{:?}", m.status());
    assert!(dir.path().join("server.log").exists(), "args were expanded");
    m.close();
    let text = std::fs::read_to_string(&cache_path).unwrap();
    assert!(!text.contains("hunter2"), "no secret in the cache");
    let cache = ToolCache::parse(text.as_bytes());
    assert!(cache.get("x", &raw, SystemTime::now()).is_some());
}

fn names_are_unique_across_servers<M: Front>() {
    let ts = test_server();
    let m = M::start(
        [
            ServerEntry::new("a.b", ServerConfig::stdio(&ts)),
            ServerEntry::new("a_b", ServerConfig::stdio(&ts)),
            ServerEntry::new("plain", ServerConfig::stdio(&ts)),
        ],
        ManagerOptions::new().no_cache(),
    );
    let tools = m.tools();
    let names: std::collections::HashSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), tools.len());
    assert!(names.contains("mcp__plain__echo"));
    assert!(
        !names.contains("mcp__a_b__echo"),
        "colliding names are hashed"
    );
    assert!(tools.iter().all(|t| t.name.len() <= 64));
    let hashed = tools
        .iter()
        .find(|t| t.server == "a.b" && t.tool.name == "echo")
        .unwrap();
    let out = m
        .call(
            &hashed.name,
            json!({"message": "via a.b"}),
            CallOptions::new(),
        )
        .unwrap();
    assert_eq!(out.text(), "Echo: via a.b");
    assert!(matches!(
        m.call("mcp__a_b__echo", json!({}), CallOptions::new()),
        Err(Error::UnknownTool(_))
    ));
    m.close();
}

#[cfg(unix)]
fn a_server_that_never_answers_fails_at_its_own_connect_timeout<M: Front>() {
    let ts = test_server();
    let hung: ServerConfig = serde_json::from_value(json!({
        "command": "sh", "args": ["-c", "exec sleep 30"], "timeout": 300
    }))
    .unwrap();
    let started = Instant::now();
    let m = M::start(
        [
            ServerEntry::new("hung", hung),
            ServerEntry::new("ok", ServerConfig::stdio(ts)),
        ],
        ManagerOptions::new().no_cache(),
    );
    // Its own 300 ms, not the 30 s default (and not the others' waits).
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(is_connected(&status_of(&m, "ok")));
    match status_of(&m, "hung").state {
        ServerState::Failed { error } => assert!(error.contains("300ms"), "{error}"),
        other => panic!("{other:?}"),
    }
    m.close();
}

on_every_front_end!(
    slow_server_with_a_warm_cache_is_deferred_and_its_call_waits,
    servers_without_a_cache_are_awaited,
    a_corrupt_cache_is_a_miss_and_is_rewritten,
    a_list_the_server_says_is_fresh_is_not_asked_for_again,
    each_entry_is_validated_alone,
    variables_are_expanded_but_the_cache_keeps_the_unexpanded_entry,
    names_are_unique_across_servers,
    a_server_that_never_answers_fails_at_its_own_connect_timeout,
);
