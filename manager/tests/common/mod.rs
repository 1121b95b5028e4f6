//! Helpers shared by the manager tests: every front end behind one
//! blocking test interface ([`Front`]), temporary directories, the test
//! server, polling with a bound.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire::mcp::types::CallToolResult;
use mcpwire_manager::{
    AgentTool, CallOptions, Changes, Error, ManagerOptions, ServerConfig, ServerEntry, ServerState,
    ServerStatus,
};
use serde_json::Value;

/// A manager front end as the cases drive it: blocking calls, whatever
/// runs underneath. Each case is a `fn case<M: Front>()`, run on every
/// front end by [`on_every_front_end!`].
pub trait Front: Clone + Send + Sync + 'static {
    /// The flavor of the connection handlers its options take.
    type Flavor: 'static;
    fn start(
        entries: impl IntoIterator<Item = ServerEntry>,
        options: ManagerOptions<Self::Flavor>,
    ) -> Self;
    fn call(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error>;
    fn tools(&self) -> Vec<AgentTool>;
    fn status(&self) -> Vec<ServerStatus>;
    fn changes(&self) -> Changes;
    fn wait_settled(&self, timeout: Duration) -> bool;
    fn close(&self);
}

/// The tokio manager on a multi-thread runtime of its own (2 workers).
#[derive(Clone)]
pub struct OnTokio {
    m: mcpwire_manager::tokio::Manager,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Front for OnTokio {
    type Flavor = mcpwire_adapter::Async;
    fn start(
        entries: impl IntoIterator<Item = ServerEntry>,
        options: ManagerOptions<Self::Flavor>,
    ) -> Self {
        let rt = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        );
        let entries: Vec<_> = entries.into_iter().collect();
        let m = rt.block_on(mcpwire_manager::tokio::Manager::start(entries, options));
        OnTokio { m, rt }
    }
    fn call(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        self.rt.block_on(self.m.call(tool, arguments, options))
    }
    fn tools(&self) -> Vec<AgentTool> {
        self.m.tools()
    }
    fn status(&self) -> Vec<ServerStatus> {
        self.m.status()
    }
    fn changes(&self) -> Changes {
        self.m.changes()
    }
    fn wait_settled(&self, timeout: Duration) -> bool {
        self.rt.block_on(self.m.wait_settled(timeout))
    }
    fn close(&self) {
        self.rt.block_on(self.m.close())
    }
}

/// The smol manager; its tasks run on smol's global executor.
#[derive(Clone)]
pub struct OnSmol(mcpwire_manager::smol::Manager);

impl Front for OnSmol {
    type Flavor = mcpwire_adapter::Async;
    fn start(
        entries: impl IntoIterator<Item = ServerEntry>,
        options: ManagerOptions<Self::Flavor>,
    ) -> Self {
        OnSmol(smol::block_on(mcpwire_manager::smol::Manager::start(
            entries, options,
        )))
    }
    fn call(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        smol::block_on(self.0.call(tool, arguments, options))
    }
    fn tools(&self) -> Vec<AgentTool> {
        self.0.tools()
    }
    fn status(&self) -> Vec<ServerStatus> {
        self.0.status()
    }
    fn changes(&self) -> Changes {
        self.0.changes()
    }
    fn wait_settled(&self, timeout: Duration) -> bool {
        smol::block_on(self.0.wait_settled(timeout))
    }
    fn close(&self) {
        smol::block_on(self.0.close())
    }
}

/// The blocking manager: threads, no runtime.
#[derive(Clone)]
pub struct OnThreads(mcpwire_manager::blocking::Manager);

impl Front for OnThreads {
    type Flavor = mcpwire_adapter::Blocking;
    fn start(
        entries: impl IntoIterator<Item = ServerEntry>,
        options: ManagerOptions<Self::Flavor>,
    ) -> Self {
        OnThreads(mcpwire_manager::blocking::Manager::start(entries, options))
    }
    fn call(
        &self,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, Error> {
        self.0.call(tool, arguments, options)
    }
    fn tools(&self) -> Vec<AgentTool> {
        self.0.tools()
    }
    fn status(&self) -> Vec<ServerStatus> {
        self.0.status()
    }
    fn changes(&self) -> Changes {
        self.0.changes()
    }
    fn wait_settled(&self, timeout: Duration) -> bool {
        self.0.wait_settled(timeout)
    }
    fn close(&self) {
        self.0.close()
    }
}

/// Runs each `fn case<M: Front>()` named on tokio, smol and threads:
/// `on_tokio::case`, `on_smol::case`, `on_threads::case`.
#[macro_export]
macro_rules! on_every_front_end {
    ($($(#[$attr:meta])* $case:ident),* $(,)?) => {
        mod on_tokio {
            $( $(#[$attr])* #[test] fn $case() { super::$case::<super::common::OnTokio>() } )*
        }
        mod on_smol {
            $( $(#[$attr])* #[test] fn $case() { super::$case::<super::common::OnSmol>() } )*
        }
        mod on_threads {
            $( $(#[$attr])* #[test] fn $case() { super::$case::<super::common::OnThreads>() } )*
        }
    };
}

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

pub fn status_of(m: &impl Front, name: &str) -> ServerStatus {
    m.status()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

/// Polls `f` every 20 ms until it is true, at most `within`.
pub fn eventually(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn is_connected(s: &ServerStatus) -> bool {
    s.state == ServerState::Connected
}
