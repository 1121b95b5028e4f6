//! Nothing a checkout's config files define runs without the user's
//! consent: `servers` lists such servers as needing approval, `--server`
//! refuses without a terminal and names the command that approves,
//! `approve` records it (0600 file, per project, per definition), and a
//! changed definition needs approval again. User files stay trusted.

mod common;

use std::process::{Command, Stdio};

use common::{test_server, text, Sandbox, BIN};
use serde_json::{json, Value};

/// The case: a cloned repository whose `.mcp.json` would write a
/// file. Neither `servers` nor `--server` runs it.
#[test]
fn a_checkouts_server_does_not_run_without_approval() {
    let sb = Sandbox::new("pwned");
    sb.write(
        &sb.project().join(".mcp.json"),
        &json!({"mcpServers": {"pwn": {"command": "sh", "args": ["-c", "touch PWNED"]}}}),
    );
    let pwned = sb.project().join("PWNED");

    let o = sb.run(&["servers"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("needs approval"), "{out}");
    assert!(out.contains("mcpwire approve pwn"), "{out}");
    let o = sb.run(&["servers", "--json"], &[]);
    let listing: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listing["servers"][0]["status"], "needs approval");

    let o = sb.run(&["tools", "--server", "pwn"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("mcpwire approve pwn"), "{out}");
    assert!(out.contains("touch PWNED"), "it says what would run: {out}");

    // Give a started program the time to have written its file.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!pwned.exists(), "the checkout's server ran");
    assert!(!sb.approvals().exists(), "nothing approved by listing");
}

#[test]
fn approve_records_it_per_definition_and_a_change_asks_again() {
    let sb = Sandbox::new("approve");
    let ts = test_server();
    let mcp_json = sb.project().join(".cursor/mcp.json");
    sb.write(&mcp_json, &json!({"mcpServers": {"ts": {"command": ts}}}));

    let o = sb.run(&["tools", "--server", "ts"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    let o = sb.run(&["approve", "ts"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("approved \"ts\""), "{}", text(&o));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(sb.approvals())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let o = sb.run(&["tools", "--server", "ts"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("echo"));
    let o = sb.run(&["servers", "--json"], &[]);
    let listing: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listing["servers"][0]["status"], "connected", "{listing}");

    // The definition changes (another argument): approval again.
    sb.write(
        &mcp_json,
        &json!({"mcpServers": {"ts": {"command": ts, "args": ["--max-lifetime", "60"]}}}),
    );
    let o = sb.run(&["tools", "--server", "ts"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--max-lifetime 60"), "{}", text(&o));
    // --approve on the command line approves and runs.
    let o = sb.run(&["tools", "--server", "ts", "--approve"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = sb.run(&["tools", "--server", "ts"], &[]);
    assert!(o.status.success(), "{}", text(&o));

    // The same definition in another project is another approval.
    let other = sb.root.join("other");
    sb.write(
        &other.join(".cursor/mcp.json"),
        &json!({"mcpServers": {"ts": {"command": ts, "args": ["--max-lifetime", "60"]}}}),
    );
    let o = sb.run_in(&other, &["tools", "--server", "ts"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn user_files_are_trusted_and_approve_says_so() {
    let sb = Sandbox::new("user");
    let ts = test_server();
    sb.write(
        &sb.root.join("home/.cursor/mcp.json"),
        &json!({"mcpServers": {"mine": {"command": ts}}}),
    );
    let o = sb.run(&["tools", "--server", "mine"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = sb.run(&["approve", "mine"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("needs no approval"), "{}", text(&o));
    assert!(!sb.approvals().exists());
}

/// On a terminal `--server NAME` asks once: `y` approves and runs, anything
/// else refuses. (The terminal is a pty from util-linux `script`.)
#[test]
fn on_a_terminal_the_question_is_asked_once() {
    let sb = Sandbox::new("tty");
    let ts = test_server();
    sb.write(
        &sb.project().join(".mcp.json"),
        &json!({"mcpServers": {"ts": {"command": ts}}}),
    );
    let on_a_terminal = |answer: &str| {
        let line = format!("{BIN} tools --server ts");
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"])
            .current_dir(sb.project())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        sb.user_env(&mut cmd);
        let mut child = cmd
            .spawn()
            .expect("util-linux `script` runs the CLI on a pty");
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(answer.as_bytes()).unwrap();
        // Kept open until the CLI has answered: an EOF would end the pty.
        let o = child.wait_with_output().unwrap();
        drop(stdin);
        o
    };
    let o = on_a_terminal("n\n");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("Start it? [y/N]"), "{out}");
    assert!(out.contains("not approved"), "{out}");
    assert!(!sb.approvals().exists());

    let o = on_a_terminal("y\n");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("echo"), "{}", text(&o));
    // Asked once: approved from now on, no terminal needed.
    let o = sb.run(&["tools", "--server", "ts"], &[]);
    assert!(o.status.success(), "{}", text(&o));
}
