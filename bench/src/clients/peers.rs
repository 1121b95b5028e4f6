//! The clients users would pick instead of a Rust one: the TypeScript SDK's
//! (`bench/peers/ts-client.mjs`, on node) and the Python SDK's
//! (`bench/peers/py-client.py`), installed by `bench/peers/install` into
//! `.deps/`. Each script measures itself the way `drive` does (the same
//! warm-up, runs, latencies and `/proc/self/status` RSS) and prints the
//! same `RESULT` line; this client process starts it (a pinned run's CPU
//! mask is inherited) and hands its result on.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;

use crate::drive::{Error, Target};
use crate::scenario::{Job, Measured};

/// The peers' names in the table.
pub const PEERS: &[&str] = &["ts-sdk", "py-sdk"];

/// The workspace root (the bench is a member of it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ is in the workspace")
        .to_path_buf()
}

/// Whether the peer `name` is installed (after `bench/peers/install`).
pub fn installed(name: &str) -> bool {
    let root = root();
    match name {
        "ts-sdk" => root
            .join(".deps/bench-node/node_modules/@modelcontextprotocol/sdk/package.json")
            .exists(),
        "py-sdk" => root.join(".deps/bench-venv/bin/python").exists(),
        _ => true,
    }
}

fn target_json(target: &Target) -> String {
    match target {
        Target::Stdio { command, args, .. } => {
            json!({"stdio": {"command": command, "args": args}}).to_string()
        }
        Target::Http { url } => json!({"http": url}).to_string(),
    }
}

fn run_script(mut cmd: Command, job: &Job, target: &Target) -> Result<Measured, Error> {
    let out = cmd
        .arg(serde_json::to_string(job)?)
        .arg(target_json(target))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    Ok(Measured::from_output(&out)?)
}

/// The TypeScript SDK's `Client` (stdio and Streamable HTTP transports).
pub fn run_ts(job: &Job, target: &Target) -> Result<Measured, Error> {
    let root = root();
    let mut cmd = Command::new("node");
    cmd.arg(root.join("bench/peers/ts-client.mjs"))
        .arg(root.join(".deps/bench-node"));
    run_script(cmd, job, target)
}

/// The Python SDK's `ClientSession` on asyncio (stdio and Streamable HTTP).
pub fn run_py(job: &Job, target: &Target) -> Result<Measured, Error> {
    let root = root();
    let mut cmd = Command::new(root.join(".deps/bench-venv/bin/python"));
    cmd.arg(root.join("bench/peers/py-client.py"));
    run_script(cmd, job, target)
}

/// Whether the bridge `via` runs from npm (`bench/peers/install` put it
/// into `.deps/bench-node`).
pub fn bridge_installed(via: crate::scenario::Via) -> bool {
    let modules = root().join(".deps/bench-node/node_modules");
    match via {
        crate::scenario::Via::McpRemote => modules.join("mcp-remote/dist/proxy.js").is_file(),
        crate::scenario::Via::Supergateway => modules.join("supergateway/dist/index.js").is_file(),
        _ => true,
    }
}
