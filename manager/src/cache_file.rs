//! The tool cache on disk: read once at startup, rewritten (read, update,
//! write to a temporary file, rename) after every successful listing. The
//! format and its rules are core's [`mcpwire::manager::cache`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use mcpwire::config::ServerConfig;
use mcpwire::manager::cache::ToolCache;
use mcpwire::mcp::types::Tool;

/// Where the cache lives and how long entries last.
#[derive(Debug)]
pub(crate) struct CacheFile {
    path: PathBuf,
    ttl: Duration,
    /// Writes of this process, one at a time.
    lock: tokio::sync::Mutex<()>,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl CacheFile {
    pub(crate) fn new(path: PathBuf, ttl: Duration) -> Self {
        CacheFile {
            path,
            ttl,
            lock: tokio::sync::Mutex::new(()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn read_sync(path: &Path, ttl: Duration) -> ToolCache {
        match std::fs::read(path) {
            Ok(bytes) => ToolCache::parse(&bytes).with_ttl(ttl),
            Err(_) => ToolCache::new().with_ttl(ttl),
        }
    }

    /// The whole cache (empty when missing or corrupt).
    pub(crate) async fn load(&self) -> ToolCache {
        let (path, ttl) = (self.path.clone(), self.ttl);
        tokio::task::spawn_blocking(move || Self::read_sync(&path, ttl))
            .await
            .unwrap_or_default()
    }

    /// Records `tools` for (`server`, unexpanded `config`). Failures are
    /// logged, never fatal: the cache is an optimisation.
    pub(crate) async fn store(&self, server: &str, config: &ServerConfig, tools: Vec<Tool>) {
        let _guard = self.lock.lock().await;
        let (path, ttl) = (self.path.clone(), self.ttl);
        let (server, config) = (server.to_string(), config.clone());
        let result = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let mut cache = Self::read_sync(&path, ttl);
            cache.insert(&server, &config, tools, SystemTime::now());
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension(format!(
                "tmp.{}.{}",
                std::process::id(),
                TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&tmp, cache.to_json())?;
            std::fs::rename(&tmp, &path).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
        })
        .await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("tool cache {}: {e}", self.path.display()),
            Err(e) => tracing::warn!("tool cache {}: {e}", self.path.display()),
        }
    }
}
