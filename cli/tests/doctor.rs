//! `mcpwire doctor`: every configured server's state in one place, as a
//! table and as JSON.

mod common;

use common::{test_server, text, Sandbox};
use serde_json::{json, Value};

#[test]
fn doctor_names_each_servers_state() {
    let sb = Sandbox::new("doctor");
    let ts = test_server();
    sb.write(
        &sb.home().join(".cursor/mcp.json"),
        &json!({"mcpServers": {
            "ok": {"command": ts},
            "legacy": {"command": ts, "args": ["--era", "legacy"]},
            "gone": {"command": "/nonexistent/mcp-server"},
            "off": {"command": ts, "enabled": false},
            "web": {"url": "http://127.0.0.1:9/mcp"},
            "bad": {"type": "stdio"},
        }}),
    );
    sb.write(
        &sb.project().join(".mcp.json"),
        &json!({"mcpServers": {"proj": {"command": ts}}}),
    );
    let o = sb.run(&["doctor", "--json", "--timeout", "20000"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let get = |n: &str| {
        report["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .unwrap_or_else(|| panic!("no {n} in {report}"))
            .clone()
    };
    let ok = get("ok");
    assert_eq!(ok["state"], "connected", "{ok}");
    assert_eq!(ok["starts"], true);
    assert_eq!(ok["protocolVersion"], "2026-07-28");
    assert!(ok["eraFinding"].as_str().is_some(), "{ok}");
    assert!(ok["connectMs"].as_f64().unwrap() >= 0.0);
    assert!(ok["tools"].as_u64().unwrap() > 10);
    assert_eq!(ok["auth"], "-");
    assert_eq!(ok["route"], "local process");
    assert_eq!(ok["error"], Value::Null);
    assert_eq!(get("legacy")["protocolVersion"], "2025-11-25");
    let gone = get("gone");
    assert_eq!(gone["state"], "failed");
    assert!(
        gone["error"].as_str().unwrap().contains("cannot start"),
        "{gone}"
    );
    assert!(gone["hint"].as_str().unwrap().contains("PATH"), "{gone}");
    let off = get("off");
    assert_eq!(off["state"], "disabled");
    assert!(off["hint"].as_str().unwrap().contains("mcpwire enable off"));
    let web = get("web");
    assert_eq!(web["state"], "failed", "{web}");
    assert_eq!(web["auth"], "none");
    assert_eq!(web["route"], "direct");
    assert!(web["hint"].as_str().is_some(), "{web}");
    let bad = get("bad");
    assert!(
        bad["error"].as_str().unwrap().contains("without `command`"),
        "{bad}"
    );
    assert!(
        bad["hint"].as_str().unwrap().contains("mcpwire get bad"),
        "{bad}"
    );
    let proj = get("proj");
    assert_eq!(proj["state"], "needs approval");
    assert!(proj["hint"]
        .as_str()
        .unwrap()
        .contains("mcpwire approve proj"));

    let o = sb.run(&["doctor", "--timeout", "20000"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("NAME "), "{out}");
    let line = out.lines().find(|l| l.starts_with("ok ")).unwrap();
    assert!(
        line.contains("connected") && line.contains("2026-07-28"),
        "{out}"
    );
    assert!(
        out.contains("    hint: the command could not be started"),
        "{out}"
    );
    // A target is a usage error: doctor checks the configured servers.
    let o = sb.run(&["doctor", "--url", "http://h/mcp"], &[]);
    assert_eq!(o.status.code(), Some(2));
}
