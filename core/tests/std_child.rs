//! The embedding example (`examples/std_child.rs`) run for real: a std-only
//! run loop against `mcpwire-test-server` as a child process.
//!
//! The server is a binary of another workspace crate (`mcpwire-tests`, which
//! depends on this one), so it cannot be a dependency: the test looks for it
//! where cargo builds binaries (next to `deps/`, in the same target dir and
//! profile), building it there with cargo if it is missing, or at
//! `$MCPWIRE_TEST_SERVER`.

#[path = "../examples/std_child.rs"]
mod example;

use std::path::PathBuf;

fn test_server() -> PathBuf {
    if let Some(path) = std::env::var_os("MCPWIRE_TEST_SERVER") {
        return PathBuf::from(path);
    }
    // <target>/<profile>/deps/std_child-<hash>
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("<target>/<profile>/deps");
    let path = profile_dir.join(format!(
        "mcpwire-test-server{}",
        std::env::consts::EXE_SUFFIX
    ));
    if !path.is_file() {
        // `cargo test -p mcpwire` alone does not build other crates'
        // binaries: build it, into the same target dir and profile.
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = std::process::Command::new(cargo);
        build.args([
            "build",
            "-q",
            "-p",
            "mcpwire-tests",
            "--bin",
            "mcpwire-test-server",
        ]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let built = build.status().is_ok_and(|s| s.success());
        assert!(
            built && path.is_file(),
            "{} is missing and could not be built: build it with `cargo build -p mcpwire-tests \
             --bin mcpwire-test-server` (same CARGO_TARGET_DIR and profile as this test), or \
             point MCPWIRE_TEST_SERVER at it",
            path.display()
        );
    }
    path
}

#[test]
fn the_example_connects_lists_every_page_of_tools_and_closes() {
    let server = test_server();
    let tools = example::list_tools(server.to_str().expect("a UTF-8 path"), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    // Both pages: `echo` is on the first, `expire_session` on the second.
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(names.contains(&"expire_session"), "{names:?}");
}

#[test]
fn the_example_reports_a_server_that_cannot_start() {
    let error = example::list_tools("/nonexistent/mcp-server", &[]).unwrap_err();
    assert!(
        error.starts_with("cannot start /nonexistent/mcp-server"),
        "{error}"
    );
}
