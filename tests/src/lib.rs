//! Test support for mcpwire (not published).
//!
//! The main item is the `mcpwire-test-server` binary (see its `--help`). Tests
//! of this crate use `env!("CARGO_BIN_EXE_mcpwire-test-server")`; tests of other
//! crates can call [`test_server_binary`]. Every adapter runs the same
//! cases against it: [`suite`], through [`adapter_suite!`] (mcpwire-blocking
//! too, with the `blocking` feature).

use std::path::PathBuf;

pub mod oauth;
pub mod pki;
pub mod suite;

/// Path of the `mcpwire-test-server` binary for tests of *other* crates.
///
/// Looks at `$MCPWIRE_TEST_SERVER` first, then next to the running test
/// executable (`target/<profile>/deps/<test>` → `target/<profile>/`). If the
/// binary is not there, it is built with `cargo build -p mcpwire-tests --bin
/// mcpwire-test-server` (same profile) and the path is returned.
///
/// Panics with an explanation if it cannot be found or built.
pub fn test_server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MCPWIRE_TEST_SERVER") {
        return PathBuf::from(p);
    }
    binary("mcpwire-test-server")
}

/// Path of the `mcpwire-test-proxy` binary (a scriptable HTTP forward
/// proxy on 127.0.0.1; see its `--help`), found or built as
/// [`test_server_binary`] does (`$MCPWIRE_TEST_PROXY` first).
pub fn test_proxy_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MCPWIRE_TEST_PROXY") {
        return PathBuf::from(p);
    }
    binary("mcpwire-test-proxy")
}

/// A binary of this crate next to the running test executable, built if
/// missing.
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let mut dir = exe.parent().expect("test executable has a directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("deps has a parent");
    }
    let candidate = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if candidate.is_file() {
        return candidate;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "-q", "-p", "mcpwire-tests", "--bin", name]);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .expect("running cargo to build the test server");
    assert!(
        status.success() && candidate.is_file(),
        "could not build {name} (expected at {}); run `cargo build -p mcpwire-tests` \
         or set MCPWIRE_TEST_SERVER / MCPWIRE_TEST_PROXY",
        candidate.display()
    );
    candidate
}
