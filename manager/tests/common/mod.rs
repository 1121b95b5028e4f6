//! Helpers shared by the manager tests: temporary directories, the test
//! server, polling with a bound.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mcpwire_manager::{Manager, ServerConfig, ServerState, ServerStatus};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcpwire-manager-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` at `rel`, creating parents.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn test_server() -> String {
    mcpwire_tests::test_server_binary()
        .to_string_lossy()
        .into_owned()
}

/// The test server on stdio, logging what it receives to `log`.
pub fn server_with_log(log: &Path) -> ServerConfig {
    ServerConfig::stdio(test_server()).args(["--log-file", &log.to_string_lossy()])
}

/// How many `tools/list` first pages the server(s) writing `log` received.
pub fn tools_list_count(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["message"]["method"] == "tools/list" && v["message"]["params"]["cursor"].is_null()
        })
        .count()
}

pub fn status_of(m: &Manager, name: &str) -> ServerStatus {
    m.status()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

/// Polls `f` every 20 ms until it is true, at most `within`.
pub async fn eventually(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn is_connected(s: &ServerStatus) -> bool {
    s.state == ServerState::Connected
}
