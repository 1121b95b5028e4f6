//! What the CLI tests on config files share: a sandbox with a project
//! directory and a user of its own.

#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

pub fn test_server() -> String {
    mcpwire_tests::test_server_binary()
        .to_string_lossy()
        .into_owned()
}

/// A project dir and a home dir; the command runs in the project with its
/// home, config and cache directories pointed into the sandbox.
pub struct Sandbox {
    pub root: PathBuf,
}

impl Sandbox {
    pub fn new(tag: &str) -> Sandbox {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "mcpwire-cli-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        for d in ["project", "home", "config", "cache", "codex"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        Sandbox { root }
    }

    pub fn project(&self) -> PathBuf {
        self.root.join("project")
    }

    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The user's approvals file.
    pub fn approvals(&self) -> PathBuf {
        self.root.join("config/mcpwire/approvals.json")
    }

    pub fn write(&self, path: &Path, v: &Value) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, v.to_string()).unwrap();
        path.to_path_buf()
    }

    /// The sandbox's user environment on `cmd`.
    pub fn user_env(&self, cmd: &mut Command) {
        cmd.env("HOME", self.home())
            .env_remove("USERPROFILE")
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("XDG_CACHE_HOME", self.root.join("cache"))
            .env("CODEX_HOME", self.root.join("codex"));
    }

    pub fn run(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        self.run_in(&self.project(), args, extra_env)
    }

    pub fn run_in(&self, dir: &Path, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.args(args).current_dir(dir).stdin(Stdio::null());
        self.user_env(&mut cmd);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd.output().expect("run mcpwire")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
