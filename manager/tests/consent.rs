//! The manager's default rule: a server of a project's file is not started
//! until the user approved it; a host's own policy replaces the rule.

mod common;

use std::time::Duration;

use common::*;
use mcpwire_manager::{
    Approvals, CallOptions, ConsentPolicy, Discovery, Env, Error, ManagerOptions, ServerEntry,
    ServerState, TrustAll,
};
use serde_json::json;

/// A project with one server in `.mcp.json` that would write `PWNED`, one
/// that is the test server, and a user config directory of its own.
fn project(dir: &TempDir) -> (Vec<ServerEntry>, Env) {
    let pwned = dir.path().join("project/PWNED");
    dir.write(
        "project/.mcp.json",
        &json!({"mcpServers": {
            "pwn": {"command": "sh", "args": ["-c", format!("touch '{}'", pwned.display())]},
            "ts": {"command": test_server()}
        }})
        .to_string(),
    );
    let found = Discovery::new()
        .project_dir(dir.path().join("project"))
        .user_files(false)
        .discover();
    assert!(found.errors.is_empty(), "{:?}", found.errors);
    let config = dir.path().join("config");
    let env = Env::from_pairs([("XDG_CONFIG_HOME", config.to_str().unwrap())]);
    (found.servers, env)
}

fn project_servers_wait_for_approval_by_default<M: Front>() {
    let dir = TempDir::new("consent-default");
    let (entries, env) = project(&dir);
    let options = || ManagerOptions::new().no_cache().env(env.clone());
    let m = M::start(entries.clone(), options());
    m.wait_settled(Duration::from_secs(10));
    for name in ["pwn", "ts"] {
        assert_eq!(status_of(&m, name).state, ServerState::NeedsApproval);
    }
    match m.call("mcp__ts__echo", json!({"message": "x"}), CallOptions::new()) {
        Err(Error::NeedsApproval(s)) | Err(Error::UnknownTool(s)) => assert!(s.contains("ts")),
        other => panic!("{other:?}"),
    }
    m.close();
    assert!(!dir.path().join("project/PWNED").exists());

    // Approved in the user's file: that one starts, the other still not.
    let mut approvals = Approvals::load_user(&env).unwrap();
    let ts = entries.iter().find(|e| e.name == "ts").unwrap();
    approvals.approve(ts).unwrap();
    let m = M::start(entries.clone(), options());
    m.wait_settled(Duration::from_secs(10));
    assert!(
        is_connected(&status_of(&m, "ts")),
        "{:?}",
        status_of(&m, "ts")
    );
    assert_eq!(status_of(&m, "pwn").state, ServerState::NeedsApproval);
    m.close();
    assert!(!dir.path().join("project/PWNED").exists());
}

/// A host with its own consent UI: its policy decides, per entry.
fn a_hosts_policy_decides<M: Front>() {
    #[derive(Debug)]
    struct OnlyTs;
    impl ConsentPolicy for OnlyTs {
        fn allows(&self, entry: &ServerEntry) -> bool {
            entry.name == "ts"
        }
    }
    let dir = TempDir::new("consent-hook");
    let (entries, env) = project(&dir);
    let m = M::start(
        entries.clone(),
        ManagerOptions::new()
            .no_cache()
            .env(env.clone())
            .consent(OnlyTs),
    );
    m.wait_settled(Duration::from_secs(10));
    assert!(is_connected(&status_of(&m, "ts")));
    assert_eq!(status_of(&m, "pwn").state, ServerState::NeedsApproval);
    m.close();

    let m = M::start(
        entries,
        ManagerOptions::new().no_cache().env(env).consent(TrustAll),
    );
    m.wait_settled(Duration::from_secs(10));
    m.close();
    std::thread::sleep(Duration::from_millis(200));
    // TrustAll ran the checkout's command: the rule is the default, not a
    // hard-wired ban.
    assert!(dir.path().join("project/PWNED").exists());
}

on_every_front_end!(
    project_servers_wait_for_approval_by_default,
    a_hosts_policy_decides,
);
