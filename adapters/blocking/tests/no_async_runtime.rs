//! The dependency tree holds no async runtime (issue 7's acceptance check:
//! `cargo tree -p mcpwire-blocking | grep -Ei 'tokio|async-io|smol'` prints
//! nothing).

#[test]
fn no_async_runtime_in_the_dependency_tree() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "mcpwire-blocking",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("ureq"), "unexpected tree:\n{tree}");
    let runtimes: Vec<&str> = tree
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            ["tokio", "async-io", "smol"].iter().any(|r| l.contains(r))
        })
        .collect();
    assert!(
        runtimes.is_empty(),
        "async runtimes in the tree: {runtimes:?}"
    );
}
