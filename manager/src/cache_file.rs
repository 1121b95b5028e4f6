//! The tool cache on disk: read once at startup, rewritten (read, update,
//! write to a temporary file, rename) after every successful listing. The
//! format and its rules are [`crate::policy::cache`].
//!
//! Writes go to one writer thread per cache file, in the order they were
//! asked for, so that no runtime's worker (nor a blocking caller) waits
//! on the disk; [`CacheFile::flush`] waits for them (the manager's close).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use mcpwire::config::ServerConfig;
use mcpwire::mcp::types::Tool;

use crate::policy::cache::ToolCache;

enum Job {
    Store(Box<Store>),
    /// Answered once every earlier job is done.
    Flush(async_channel::Sender<()>),
}

struct Store {
    server: String,
    config: ServerConfig,
    tools: Vec<Tool>,
    server_ttl: Option<Duration>,
}

/// Where the cache lives and how long entries last.
#[derive(Debug)]
pub(crate) struct CacheFile {
    path: PathBuf,
    ttl: Duration,
    /// The writer thread's queue, started with the first write.
    writer: Mutex<Option<async_channel::Sender<Job>>>,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl CacheFile {
    pub(crate) fn new(path: PathBuf, ttl: Duration) -> Self {
        CacheFile {
            path,
            ttl,
            writer: Mutex::new(None),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn read(path: &Path, ttl: Duration) -> ToolCache {
        match std::fs::read(path) {
            Ok(bytes) => ToolCache::parse(&bytes).with_ttl(ttl),
            Err(_) => ToolCache::new().with_ttl(ttl),
        }
    }

    /// The whole cache (empty when missing or corrupt).
    pub(crate) fn load(&self) -> ToolCache {
        Self::read(&self.path, self.ttl)
    }

    /// Records `tools` for (`server`, unexpanded `config`), in the
    /// background. Failures are logged, never fatal: the cache is an
    /// optimisation.
    pub(crate) fn store(
        &self,
        server: &str,
        config: &ServerConfig,
        tools: Vec<Tool>,
        server_ttl: Option<Duration>,
    ) {
        self.send(Job::Store(Box::new(Store {
            server: server.to_string(),
            config: config.clone(),
            tools,
            server_ttl,
        })));
    }

    /// Waits until every write asked for so far is done.
    pub(crate) async fn flush(&self) {
        let (tx, rx) = async_channel::bounded(1);
        if self.send(Job::Flush(tx)) {
            let _ = rx.recv().await;
        }
    }

    /// [`CacheFile::flush`], blocking.
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(crate) fn flush_blocking(&self) {
        let (tx, rx) = async_channel::bounded(1);
        if self.send(Job::Flush(tx)) {
            let _ = rx.recv_blocking();
        }
    }

    /// Queues `job`, starting the writer if needed; whether it is queued.
    fn send(&self, job: Job) -> bool {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if writer.is_none() {
            if matches!(job, Job::Flush(_)) {
                return false;
            }
            let (tx, rx) = async_channel::unbounded();
            let (path, ttl) = (self.path.clone(), self.ttl);
            let spawned = std::thread::Builder::new()
                .name("mcpwire-tool-cache".into())
                .spawn(move || {
                    while let Ok(job) = rx.recv_blocking() {
                        match job {
                            Job::Store(job) => {
                                let Store {
                                    server,
                                    config,
                                    tools,
                                    server_ttl,
                                } = *job;
                                let store = (server.as_str(), &config, tools, server_ttl);
                                if let Err(e) = write(&path, ttl, store) {
                                    tracing::warn!("tool cache {}: {e}", path.display());
                                }
                            }
                            Job::Flush(done) => {
                                let _ = done.try_send(());
                            }
                        }
                    }
                });
            match spawned {
                Ok(_) => *writer = Some(tx),
                Err(e) => {
                    tracing::warn!("tool cache {}: no writer thread: {e}", self.path.display());
                    return false;
                }
            }
        }
        writer.as_ref().is_some_and(|tx| tx.try_send(job).is_ok())
    }
}

fn write(
    path: &Path,
    ttl: Duration,
    (server, config, tools, server_ttl): (&str, &ServerConfig, Vec<Tool>, Option<Duration>),
) -> std::io::Result<()> {
    let mut cache = CacheFile::read(path, ttl);
    cache.insert_listing(server, config, tools, server_ttl, SystemTime::now());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&tmp, cache.to_json())?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
