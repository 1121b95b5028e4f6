//! No server process is left a zombie: after `close`, after dropping the
//! last client, after a crash. (A test binary of its own, so that no other
//! test's children are around.) Linux only: it reads `/proc`.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use mcpwire_blocking::{Client, ServerConfig};
use serde_json::json;

/// The children of this process, with their states (Linux `/proc`).
fn children() -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in list
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) S ..."
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
                .unwrap_or('?');
            out.push((pid, state));
        }
    }
    out
}

#[test]
fn server_processes_are_reaped() {
    let bin = mcpwire_tests::test_server_binary();
    let stdio = || ServerConfig::stdio(bin.to_string_lossy().into_owned());

    let a = Client::connect(stdio()).unwrap();
    a.ping().unwrap();
    assert_eq!(children().len(), 1, "the probe sees the live server");
    a.close().unwrap();

    let b = Client::connect(stdio()).unwrap();
    b.ping().unwrap();
    drop(b);

    let c = Client::connect(stdio()).unwrap();
    let _ = c.call_tool("crash", json!({"code": 3})).unwrap_err();

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = children();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "children left: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(c);
}
