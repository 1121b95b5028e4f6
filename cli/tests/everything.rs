//! The real `mcpwire` binary against a server nobody here wrote: the
//! TypeScript SDK's reference server-everything over stdio, installed by
//! `scripts/test` into .deps/ (a missing install fails the test).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mcpwire_tests::suite::support::fresh_cache_home;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

fn everything() -> String {
    let modules = std::env::var_os("MCPWIRE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../.deps/node/node_modules")
        });
    let entry = modules.join("@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "server-everything not found at {}: run `scripts/test` (it installs it) or set MCPWIRE_NODE_MODULES",
        entry.display()
    );
    entry.to_string_lossy().into_owned()
}

fn run(args: &[&str]) -> Output {
    let entry = everything();
    let node = std::env::var("MCPWIRE_NODE").unwrap_or_else(|_| "node".into());
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--", &node, &entry, "stdio"]);
    Command::new(BIN)
        .env("XDG_CACHE_HOME", fresh_cache_home())
        .args(&all)
        .stdin(Stdio::null())
        .output()
        .expect("run mcpwire")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn commands_against_server_everything() {
    let o = run(&["tools"]);
    assert!(o.status.success(), "{}", err(&o));
    for tool in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(out(&o).contains(tool), "{tool} missing:\n{}", out(&o));
    }

    let o = run(&["call", "echo", "message=interop"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("interop"), "{}", out(&o));

    let o = run(&["call", "get-sum", "--args", r#"{"a": 2, "b": 3}"#, "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["content"][0]["text"].as_str().unwrap().contains('5'),
        "{v}"
    );

    let o = run(&[
        "call",
        "trigger-long-running-operation",
        "duration=1",
        "steps=3",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("progress 3/3"),
        "progress shown:\n{}",
        err(&o)
    );

    let o = run(&["call", "get-sum", "a=x"]);
    assert!(
        matches!(o.status.code(), Some(1) | Some(3)),
        "bad arguments are a tool error or a protocol error: {:?}",
        o.status
    );

    let o = run(&["info", "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["transport"], "stdio");
    assert_eq!(v["protocolVersion"], "2025-11-25");
    assert!(v["capabilities"]["tools"].is_object(), "{v}");

    let o = run(&["resources"]);
    assert!(o.status.success(), "{}", err(&o));
    let first_uri = out(&o)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(first_uri.contains("://"), "{}", out(&o));
    let o = run(&["read", &first_uri]);
    assert!(o.status.success(), "{}", err(&o));

    let o = run(&["prompts"]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("simple-prompt"), "{}", out(&o));
    let o = run(&["prompt", "simple-prompt"]);
    assert!(o.status.success(), "{}", err(&o));

    let o = run(&["ping"]);
    assert!(out(&o).starts_with("pong"), "{}", err(&o));
}
