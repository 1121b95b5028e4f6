//! The protocol era each server was found to speak, remembered so that a
//! later connection to a server of the handshake era does not probe it
//! again (the spec: the era is a property of the server; cache it, and
//! probe again when the assumption fails — the core does that).
//!
//! Two memories, in this order:
//! * this process's, always (unless
//!   [`ConnectOptions::remember_era(false)`](crate::ConnectOptions::remember_era));
//! * a file that every process of the user shares, when asked for with
//!   [`ConnectOptions::era_cache`](crate::ConnectOptions::era_cache)
//!   ([`EraCache::user`]: `eras.json` in the user's cache folder; the
//!   `mcpwire` command and the manager use it). A verdict is kept there
//!   for [`EraCache::MAX_AGE`] and then found again, so that a server
//!   upgraded in place (behind `npx`, say) is not spoken to in its old era
//!   for ever.
//!
//! A server is known by what would start it: its URL, or its command,
//! arguments, environment and folder plus the identity of the executable
//! (its resolved path, size and modification time: a rebuilt or upgraded
//! binary is another server). The file holds only a SHA-256 of that, never
//! the environment's values.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpwire::connection::Era;
use mcpwire::ServerConfig;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most servers remembered, in the process and in the file (oldest
/// forgotten first).
const MAX_REMEMBERED: usize = 1024;

/// Era by server, and the servers in the order they were first recorded.
type Table = (HashMap<String, Era>, Vec<String>);

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// What identifies a server: its URL, or how it is started.
fn key(server: &ServerConfig) -> String {
    match &server.url {
        Some(url) => format!("url {url}"),
        None => {
            let command = server.command.as_deref().unwrap_or_default();
            let exe = executable(command, server).map_or_else(String::new, |(path, meta)| {
                let modified = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("{} {} {modified}", path.display(), meta.len())
            });
            format!(
                "cmd {command:?} {:?} {:?} {:?} exe {exe}",
                server.args, server.env, server.cwd
            )
        }
    }
}

/// The executable `command` starts, as the OS would find it (a name
/// without a slash is looked up in the server's `PATH`, else ours), and
/// its metadata.
fn executable(command: &str, server: &ServerConfig) -> Option<(PathBuf, std::fs::Metadata)> {
    let found = |p: PathBuf| -> Option<(PathBuf, std::fs::Metadata)> {
        let meta = std::fs::metadata(&p).ok().filter(|m| m.is_file())?;
        Some((p, meta))
    };
    let as_path = Path::new(command);
    if as_path.components().count() > 1 {
        let base = server.cwd.as_deref().map(Path::new);
        let full = match base {
            Some(dir) if as_path.is_relative() => dir.join(as_path),
            _ => as_path.to_path_buf(),
        };
        return found(full);
    }
    let path = server
        .env
        .get("PATH")
        .map(Into::into)
        .or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path).find_map(|dir| {
        let candidate = dir.join(command);
        #[cfg(windows)]
        {
            let _ = &candidate;
            let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
            exts.split(';')
                .filter(|e| !e.is_empty())
                .find_map(|e| found(dir.join(format!("{command}{}", e.to_ascii_lowercase()))))
                .or_else(|| found(candidate))
        }
        #[cfg(not(windows))]
        found(candidate)
    })
}

/// The era `server` was last found to speak in this process, if any.
pub fn recall(server: &ServerConfig) -> Option<Era> {
    recall_key(&key(server))
}

fn recall_key(k: &str) -> Option<Era> {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.0.get(k).copied()
}

/// Records the era `server` speaks (in this process).
pub fn remember(server: &ServerConfig, era: Era) {
    remember_key(key(server), era);
}

fn remember_key(k: String, era: Era) {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if t.0.insert(k.clone(), era).is_none() {
        t.1.push(k);
        if t.1.len() > MAX_REMEMBERED {
            let old = t.1.remove(0);
            t.0.remove(&old);
        }
    }
}

/// Forgets what was remembered of `server` in this process: a new server
/// now answers at its URL or command line (a test server on a reused
/// port, say).
pub fn forget(server: &ServerConfig) {
    let k = key(server);
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if t.0.remove(&k).is_some() {
        t.1.retain(|old| *old != k);
    }
}

/// Forgets every server (tests, or after a fleet upgrade).
pub fn forget_all() {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.0.clear();
    t.1.clear();
}

/// A file of eras that the processes of a user share (see the
/// [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EraCache {
    path: PathBuf,
}

/// The file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    /// By SHA-256 (hex) of the server's identity.
    servers: HashMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    era: EraName,
    /// When it was found (seconds since the Unix epoch).
    at: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum EraName {
    Legacy,
    Modern,
}

impl From<Era> for EraName {
    fn from(e: Era) -> Self {
        match e {
            Era::Legacy => EraName::Legacy,
            Era::Modern => EraName::Modern,
        }
    }
}

impl From<EraName> for Era {
    fn from(e: EraName) -> Self {
        match e {
            EraName::Legacy => Era::Legacy,
            EraName::Modern => Era::Modern,
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl EraCache {
    /// How long a verdict is trusted before the server is probed again.
    pub const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

    /// The cache in the file `path` (created when first written).
    pub fn at(path: impl Into<PathBuf>) -> EraCache {
        EraCache { path: path.into() }
    }

    /// `eras.json` in the user's cache folder: `$XDG_CACHE_HOME/mcpwire`
    /// when set, else `~/Library/Caches/mcpwire` on macOS,
    /// `%LOCALAPPDATA%\mcpwire\cache` on Windows, `~/.cache/mcpwire`
    /// elsewhere. `None` when there is no home folder.
    pub fn user() -> Option<EraCache> {
        Some(EraCache::at(user_cache_dir()?.join("eras.json")))
    }

    /// Where the eras are kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> CacheFile {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::debug!(path = %self.path.display(), "ignoring an unreadable era cache: {e}");
                CacheFile::default()
            }),
            Err(_) => CacheFile::default(),
        }
    }

    /// The era `server` was found to speak, if known and not older than
    /// [`EraCache::MAX_AGE`].
    pub fn recall(&self, server: &ServerConfig) -> Option<Era> {
        self.recall_hash(&hash(&key(server)))
    }

    fn recall_hash(&self, h: &str) -> Option<Era> {
        let entry = self.read().servers.remove(h)?;
        let age = unix_now().saturating_sub(entry.at);
        (age <= Self::MAX_AGE.as_secs()).then(|| entry.era.into())
    }

    /// Records the era `server` speaks. Errors are the file's (the caller
    /// may ignore them: it is a cache).
    pub fn remember(&self, server: &ServerConfig, era: Era) -> std::io::Result<()> {
        self.remember_hash(hash(&key(server)), era)
    }

    fn remember_hash(&self, h: String, era: Era) -> std::io::Result<()> {
        let mut file = self.read();
        let now = unix_now();
        if file
            .servers
            .get(&h)
            .is_some_and(|e| Era::from(e.era) == era && now.saturating_sub(e.at) < 3600)
        {
            return Ok(()); // known and fresh: no write
        }
        file.servers.insert(
            h,
            Entry {
                era: era.into(),
                at: now,
            },
        );
        if file.servers.len() > MAX_REMEMBERED {
            let mut by_age: Vec<(u64, String)> = file
                .servers
                .iter()
                .map(|(k, e)| (e.at, k.clone()))
                .collect();
            by_age.sort();
            let excess = file.servers.len() - MAX_REMEMBERED;
            for (_, k) in by_age.into_iter().take(excess) {
                file.servers.remove(&k);
            }
        }
        let text = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        crate::files::write_atomic(&self.path, &text, false)
    }

    /// Forgets `server`.
    pub fn forget(&self, server: &ServerConfig) -> std::io::Result<()> {
        let mut file = self.read();
        if file.servers.remove(&hash(&key(server))).is_none() {
            return Ok(());
        }
        let text = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        crate::files::write_atomic(&self.path, &text, false)
    }
}

fn hash(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// mcpwire's cache folder (see [`EraCache::user`]).
pub fn user_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(xdg) = var("XDG_CACHE_HOME") {
        return Some(xdg.join("mcpwire"));
    }
    let home = var("HOME").or_else(|| var("USERPROFILE"));
    if cfg!(target_os = "macos") {
        Some(home?.join("Library/Caches/mcpwire"))
    } else if cfg!(windows) {
        Some(
            var("LOCALAPPDATA")
                .or_else(|| home.map(|h| h.join("AppData").join("Local")))?
                .join("mcpwire")
                .join("cache"),
        )
    } else {
        Some(home?.join(".cache/mcpwire"))
    }
}

/// What a connection remembers with, as its options chose.
#[derive(Debug, Clone)]
pub(crate) struct Memory {
    key: String,
    file: Option<EraCache>,
}

impl Memory {
    /// The memory of `server` (`file`: the shared one too).
    pub(crate) fn of(server: &ServerConfig, file: Option<EraCache>) -> Memory {
        Memory {
            key: key(server),
            file,
        }
    }

    /// The era remembered: this process's, else the file's.
    pub(crate) fn recall(&self) -> Option<Era> {
        recall_key(&self.key).or_else(|| {
            let era = self.file.as_ref()?.recall_hash(&hash(&self.key))?;
            remember_key(self.key.clone(), era);
            Some(era)
        })
    }

    /// Records `era` in this process and the file.
    pub(crate) fn remember(&self, era: Era) {
        remember_key(self.key.clone(), era);
        if let Some(file) = &self.file {
            if let Err(e) = file.remember_hash(hash(&self.key), era) {
                tracing::debug!(path = %file.path().display(), "could not write the era cache: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_by_url_and_by_command_line() {
        let a = ServerConfig::http("http://127.0.0.1:1/mcp");
        let b = ServerConfig::stdio("srv").arg("--x");
        let c = ServerConfig::stdio("srv").arg("--y");
        remember(&a, Era::Legacy);
        remember(&b, Era::Modern);
        assert_eq!(recall(&a), Some(Era::Legacy));
        assert_eq!(recall(&b), Some(Era::Modern));
        assert_eq!(recall(&c), None);
        remember(&a, Era::Modern);
        assert_eq!(recall(&a), Some(Era::Modern));
        forget(&a);
        assert_eq!(recall(&a), None);
    }

    #[test]
    fn the_environment_and_the_executable_are_part_of_a_server() {
        let dir = std::env::temp_dir().join(format!("mcpwire-era-exe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("srv");
        std::fs::write(&exe, b"one").unwrap();
        let server = ServerConfig::stdio(exe.to_str().unwrap());
        let before = key(&server);
        assert_ne!(before, key(&server.clone().env("TOKEN", "x")));
        // Rebuilt: another size (and modification time).
        std::fs::write(&exe, b"two, longer").unwrap();
        assert_ne!(before, key(&server));
        // A name is looked up in PATH.
        let by_name = ServerConfig::stdio("srv").env("PATH", dir.to_str().unwrap());
        assert!(
            key(&by_name).contains(exe.to_str().unwrap()),
            "{}",
            key(&by_name)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_file_is_shared_keeps_no_secret_and_ages() {
        let dir = std::env::temp_dir().join(format!("mcpwire-era-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = EraCache::at(dir.join("eras.json"));
        let server = ServerConfig::stdio("srv").env("API_KEY", "sekrit");
        assert_eq!(cache.recall(&server), None);
        cache.remember(&server, Era::Legacy).unwrap();
        // Another process: a cache at the same path.
        assert_eq!(
            EraCache::at(cache.path()).recall(&server),
            Some(Era::Legacy)
        );
        let text = std::fs::read_to_string(cache.path()).unwrap();
        assert!(!text.contains("sekrit") && !text.contains("srv"), "{text}");
        // Older than MAX_AGE: found again.
        let mut file = cache.read();
        for e in file.servers.values_mut() {
            e.at -= EraCache::MAX_AGE.as_secs() + 1;
        }
        std::fs::write(cache.path(), serde_json::to_vec(&file).unwrap()).unwrap();
        assert_eq!(cache.recall(&server), None);
        // Garbage in the file is a cold cache, not an error.
        std::fs::write(cache.path(), b"{not json").unwrap();
        assert_eq!(cache.recall(&server), None);
        cache.remember(&server, Era::Modern).unwrap();
        assert_eq!(cache.recall(&server), Some(Era::Modern));
        cache.forget(&server).unwrap();
        assert_eq!(cache.recall(&server), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
