//! `mcpwire add`, `remove`, `enable`, `disable`, `get`, `import`: the
//! hosts' own files written and given back byte for byte.

mod common;

use std::process::Output;

use common::{text, Sandbox, BIN};
use serde_json::Value;

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json_out(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

/// The case: `add demo -- mcpwire serve --demo` into Claude Code
/// and Codex; `servers` lists it from both, `get` names the files, and
/// `remove` gives both files back as they were: absent in a fresh home,
/// byte for byte where the hosts had written them.
#[test]
fn add_list_get_remove_in_claude_code_and_codex() {
    for fresh in [true, false] {
        let sb = Sandbox::new("add");
        let claude = sb.home().join(".claude.json");
        let codex = sb.root.join("codex/config.toml");
        let claude_before = "{\n  \"numStartups\": 3,\n  \"projects\": {},\n  \"mcpServers\": {},\n  \"userID\": \"u\"\n}";
        let codex_before = "model = \"gpt-5\" # mine\n\n[profiles.x]\nmodel = \"o3\"\n";
        if !fresh {
            std::fs::write(&claude, claude_before).unwrap();
            std::fs::write(&codex, codex_before).unwrap();
        }
        let o = sb.run(
            &[
                "add",
                "demo",
                "--host",
                "claude-code",
                "--host",
                "codex",
                "--",
                BIN,
                "serve",
                "--demo",
            ],
            &[],
        );
        let out = ok(&o);
        assert!(
            out.contains(&format!("added \"demo\" to {}", claude.display())),
            "{out}"
        );
        assert!(
            out.contains(&format!("added \"demo\" to {}", codex.display())),
            "{out}"
        );

        let listing = json_out(&sb.run(&["servers", "--json"], &[]));
        let s = &listing["servers"][0];
        assert_eq!(s["name"], "demo");
        assert_eq!(s["status"], "connected", "{listing}");
        assert_eq!(s["source"], claude.display().to_string());
        assert_eq!(
            listing["shadowed"][0]["source"],
            codex.display().to_string()
        );
        let sources = ok(&sb.run(&["servers", "--sources"], &[]));
        let by_file = |f: &std::path::Path| {
            let at = sources.find(&f.display().to_string()).unwrap();
            sources[at..].lines().nth(1).unwrap_or("").to_string()
        };
        assert!(by_file(&claude).contains("server demo"), "{sources}");
        assert!(by_file(&codex).contains("shadowed demo"), "{sources}");

        let got = json_out(&sb.run(&["get", "demo", "--json"], &[]));
        assert_eq!(got["source"], claude.display().to_string());
        assert_eq!(got["host"], "claude-code");
        assert_eq!(got["definition"]["args"][1], "--demo");
        assert_eq!(got["shadowed"][0]["source"], codex.display().to_string());
        assert_eq!(got["shadowed"][0]["host"], "codex");
        let plain = ok(&sb.run(&["get", "demo"], &[]));
        assert!(plain.contains(&claude.display().to_string()), "{plain}");

        let out = ok(&sb.run(&["remove", "demo"], &[]));
        assert!(out.contains("removed \"demo\""), "{out}");
        if fresh {
            assert!(!claude.exists() && !codex.exists(), "{out}");
        } else {
            assert_eq!(std::fs::read_to_string(&claude).unwrap(), claude_before);
            assert_eq!(std::fs::read_to_string(&codex).unwrap(), codex_before);
        }
    }
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let sb = Sandbox::new("dry");
    let cursor = sb.home().join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(&cursor, "{\n  \"mcpServers\": {}\n}\n").unwrap();
    let o = sb.run(
        &[
            "add",
            "web",
            "--host",
            "cursor",
            "--url",
            "https://h/mcp",
            "--header",
            "Authorization: Bearer ${TOKEN}",
            "--dry-run",
        ],
        &[],
    );
    let out = ok(&o);
    assert_eq!(
        out,
        format!(
            "--- {p}\n+++ {p}\n@@ -1,3 +1,10 @@\n {{\n-  \"mcpServers\": {{}}\n+  \"mcpServers\": {{\n+    \"web\": {{\n+      \"url\": \"https://h/mcp\",\n+      \"headers\": {{\n+        \"Authorization\": \"Bearer ${{TOKEN}}\"\n+      }}\n+    }}\n+  }}\n }}\n",
            p = cursor.display()
        )
    );
    assert!(text(&o).contains("nothing written"));
    assert_eq!(
        std::fs::read_to_string(&cursor).unwrap(),
        "{\n  \"mcpServers\": {}\n}\n"
    );
    // Without --host: the hosts installed for this user (Cursor, and
    // Codex: the sandbox has a CODEX_HOME).
    ok(&sb.run(&["add", "web", "--url", "https://h/mcp"], &[]));
    assert!(std::fs::read_to_string(&cursor)
        .unwrap()
        .contains("\"web\""));
    let codex = std::fs::read_to_string(sb.root.join("codex/config.toml")).unwrap();
    assert_eq!(codex, "[mcp_servers.web]\nurl = \"https://h/mcp\"\n");
    assert!(
        !sb.root.join("config/goose/config.yaml").exists(),
        "not installed"
    );
    let o = sb.run(&["remove", "web", "--dry-run"], &[]);
    assert!(ok(&o).contains("-    \"web\": {"), "{}", text(&o));
    assert!(std::fs::read_to_string(&cursor)
        .unwrap()
        .contains("\"web\""));
}

#[test]
fn unparsable_files_and_usage_errors_are_refused() {
    let sb = Sandbox::new("refuse");
    let claude = sb.home().join(".claude.json");
    std::fs::write(&claude, "{\"mcpServers\": {\n").unwrap();
    let o = sb.run(&["add", "x", "--host", "claude-code", "--", "true"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not valid JSON"), "{}", text(&o));
    assert!(text(&o).contains("not edited"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&claude).unwrap(),
        "{\"mcpServers\": {\n"
    );
    for (args, says) in [
        (
            &["add", "x", "--host", "nope", "--", "true"][..],
            "unknown host",
        ),
        (
            &["add", "x", "--host", "codex"][..],
            "what does the server run",
        ),
        (
            &[
                "add", "x", "--host", "goose", "--scope", "project", "--", "true",
            ][..],
            "no project file",
        ),
        (
            &[
                "add", "x", "--host", "codex", "--scope", "local", "--", "true",
            ][..],
            "Claude Code's",
        ),
        (
            &["add", "x", "--host", "claude-desktop", "--url", "https://h"][..],
            "stdio",
        ),
        (&["remove", "nope"][..], "no config file defines"),
        (&["disable", "nope"][..], "no config file defines"),
    ] {
        let o = sb.run(args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
    // Adding a name the file has already is refused.
    ok(&sb.run(&["add", "x", "--host", "codex", "--", "true"], &[]));
    let o = sb.run(&["add", "x", "--host", "codex", "--", "true"], &[]);
    assert!(
        text(&o).contains("already defines server `x`"),
        "{}",
        text(&o)
    );
}

#[test]
fn disable_and_enable_with_the_hosts_switch() {
    let sb = Sandbox::new("switch");
    ok(&sb.run(
        &[
            "add", "demo", "--host", "codex", "--", BIN, "serve", "--demo",
        ],
        &[],
    ));
    let codex = sb.root.join("codex/config.toml");
    let added = std::fs::read_to_string(&codex).unwrap();
    ok(&sb.run(&["disable", "demo"], &[]));
    assert!(std::fs::read_to_string(&codex)
        .unwrap()
        .contains("enabled = false"));
    let listing = json_out(&sb.run(&["servers", "--json"], &[]));
    assert_eq!(listing["servers"][0]["status"], "disabled", "{listing}");
    ok(&sb.run(&["enable", "demo"], &[]));
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), added);
    // Claude Code has no switch in its file: refused, with why.
    ok(&sb.run(&["add", "cc", "--host", "claude-code", "--", "true"], &[]));
    let o = sb.run(&["disable", "cc"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("no on/off switch"), "{}", text(&o));
}

#[test]
fn import_from_one_host_into_another() {
    let sb = Sandbox::new("import");
    ok(&sb.run(
        &[
            "add",
            "a",
            "--host",
            "claude-code",
            "--env",
            "K=v",
            "--",
            "srv",
            "--x",
        ],
        &[],
    ));
    ok(&sb.run(
        &[
            "add",
            "b",
            "--host",
            "claude-code",
            "--url",
            "https://h/mcp",
        ],
        &[],
    ));
    let goose = sb.root.join("config/goose/config.yaml");
    let o = sb.run(
        &[
            "import",
            "--from",
            "claude-code",
            "--to",
            "goose",
            "--dry-run",
        ],
        &[],
    );
    assert!(
        ok(&o).contains("+  a:\n+    args:\n+    - '--x'\n"),
        "{}",
        text(&o)
    );
    assert!(!goose.exists());
    ok(&sb.run(&["import", "--from", "claude-code", "--to", "goose"], &[]));
    let yaml = std::fs::read_to_string(&goose).unwrap();
    assert!(yaml.contains("    cmd: srv\n"), "{yaml}");
    assert!(yaml.contains("    envs:\n      K: v\n"), "{yaml}");
    assert!(
        yaml.contains("    type: streamable_http\n    uri: https://h/mcp\n"),
        "{yaml}"
    );
    // Names the target has are left alone.
    let o = sb.run(
        &["import", "--from", "claude-code", "--to", "goose", "a"],
        &[],
    );
    assert!(text(&o).contains("skipped \"a\""), "{}", text(&o));
    let sources = ok(&sb.run(&["servers", "--sources"], &[]));
    assert!(sources.contains(&goose.display().to_string()), "{sources}");
}
