//! VS Code's `pickString` input asked on a real terminal: the numbered
//! choice, a wrong answer asked again, Enter for the default. The terminal
//! is a pseudo-terminal made by util-linux `script`; where it is missing
//! the test says so and does nothing.

#![cfg(target_os = "linux")]

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{test_server, Sandbox, BIN};
use serde_json::json;

/// Runs `mcpwire ARGS` in the sandbox on a pseudo-terminal, typing
/// `typed`; returns what the terminal showed.
fn on_a_terminal(sb: &Sandbox, args: &str, typed: &str) -> Option<String> {
    let script = Path::new("/usr/bin/script");
    if !script.is_file() {
        eprintln!("no /usr/bin/script (util-linux): the terminal test is not run");
        return None;
    }
    let mut cmd = Command::new(script);
    cmd.args(["-qec", &format!("{BIN} {args}"), "/dev/null"])
        .current_dir(sb.project())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    sb.user_env(&mut cmd);
    let mut child = cmd.spawn().expect("run script");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    // stdin stays open until the command is done: `script` may stop at
    // its end of input.
    let status = child.wait().unwrap();
    drop(stdin);
    let out = reader.join().unwrap();
    assert!(status.success(), "{out}");
    Some(out)
}

#[test]
fn a_pick_string_is_a_numbered_choice_on_a_terminal() {
    let sb = Sandbox::new("tty");
    let ts = test_server();
    let log = |n: &str| -> PathBuf { sb.root.join(format!("{n}.log")) };
    let (a, b) = (log("a"), log("b"));
    sb.write(
        &sb.root.join("config/Code/User/mcp.json"),
        &json!({
            "inputs": [{"type": "pickString", "id": "log", "description": "Log file",
                        "options": [a.to_string_lossy(), {"label": "the other log", "value": b.to_string_lossy()}],
                        "default": a.to_string_lossy()}],
            "servers": {"picked": {"type": "stdio", "command": ts, "args": ["--log-file", "${input:log}"]}}
        }),
    );
    // A wrong answer, then the second option.
    let Some(out) = on_a_terminal(&sb, "tools --server picked", "9\n2\n") else {
        return;
    };
    assert!(out.contains("asks for Log file:"), "{out}");
    assert!(out.contains("  1) ") && out.contains(" [default]"), "{out}");
    assert!(out.contains("  2) the other log"), "{out}");
    assert!(
        out.contains("\"9\" is not one of the choices 1 to 2; choose again"),
        "{out}"
    );
    assert!(out.contains("echo"), "{out}");
    assert!(
        b.is_file() && !a.exists(),
        "the second option reached the server"
    );

    // Enter: the default.
    let out = on_a_terminal(&sb, "tools --server picked", "\n").unwrap();
    assert!(out.contains("(Enter: 1)"), "{out}");
    assert!(a.is_file(), "the default reached the server");
}
