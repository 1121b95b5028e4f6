//! OAuth tokens in the operating system's credential store (feature
//! `keychain`): the Secret Service on Linux (GNOME Keyring, KWallet,
//! KeePassXC), the Keychain on macOS, the Credential Manager on Windows,
//! by the `keyring` crate.
//!
//! ```text
//!  service "mcpwire", account = the resource (https://h.example/mcp) ─► the AuthState as JSON
//!  load(endpoint): the endpoint's path, then each parent up to the origin (most specific first)
//!  lock: a LockFile beside the file store (…/mcpwire/keychain.lock), as FileStore's
//! ```
//!
//! One entry per protected resource (Windows caps a credential at 2560
//! bytes: a whole file of states would not fit, one state does). The
//! credential store has no lock of its own: processes sharing it take an
//! advisory lock on a file, as the file store does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpwire::exchange::HttpUrl;

use crate::auth::{AuthState, FileStore, StoreError, StoreLock, TokenStore};
use crate::files::LockFile;

/// Tokens in the OS credential store, one entry per resource (service
/// `mcpwire` unless set). See the [module docs](self).
#[derive(Debug, Clone)]
pub struct KeychainStore {
    service: String,
    lock_path: PathBuf,
}

impl KeychainStore {
    /// Entries of service `mcpwire`; the lock file is
    /// `$XDG_CONFIG_HOME/mcpwire/keychain.lock` (else `~/.config/…`, else
    /// the temporary folder).
    pub fn new() -> Self {
        let lock_path = FileStore::default_path()
            .map(|p| p.with_file_name("keychain.lock"))
            .unwrap_or_else(|| std::env::temp_dir().join("mcpwire-keychain.lock"));
        KeychainStore {
            service: "mcpwire".into(),
            lock_path,
        }
    }

    /// Entries of another service name (to keep apart the tokens of two
    /// programs, or of a test).
    pub fn service(mut self, service: impl Into<String>) -> Self {
        self.service = service.into();
        self
    }

    /// Another lock file (every process sharing the entries must use the
    /// same one).
    pub fn lock_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.lock_path = path.into();
        self
    }

    /// The lock file.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// Whether the credential store answers: reads an entry that need
    /// not exist (`Err` says why not, e.g. no Secret Service on D-Bus).
    pub fn check(&self) -> Result<(), StoreError> {
        let entry = self.entry("mcpwire-check")?;
        match entry.get_password() {
            Ok(_) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(keychain_error(e)),
        }
    }

    fn entry(&self, account: &str) -> Result<keyring::Entry, StoreError> {
        keyring::Entry::new(&self.service, account).map_err(keychain_error)
    }

    fn read(&self, account: &str) -> Option<AuthState> {
        let entry = self.entry(account).ok()?;
        match entry.get_password() {
            Ok(text) => match serde_json::from_str(&text) {
                Ok(state) => Some(state),
                Err(e) => {
                    tracing::warn!(account, "ignoring an unreadable keychain entry: {e}");
                    None
                }
            },
            Err(keyring::Error::NoEntry) => None,
            Err(e) => {
                tracing::warn!(account, "the OS credential store: {e}");
                None
            }
        }
    }

    fn write(&self, state: &AuthState) -> Result<(), StoreError> {
        let text = serde_json::to_string(state).map_err(StoreError::Format)?;
        self.entry(&account(&state.resource))?
            .set_password(&text)
            .map_err(keychain_error)
    }

    fn take_lock(&self) -> Result<LockFile, StoreError> {
        LockFile::acquire(&self.lock_path).map_err(|source| StoreError::Lock {
            path: self.lock_path.clone(),
            source,
        })
    }
}

/// The `keyring` crate's error as the store's.
fn keychain_error(e: keyring::Error) -> StoreError {
    StoreError::Keychain(Box::new(e))
}

impl Default for KeychainStore {
    fn default() -> Self {
        KeychainStore::new()
    }
}

/// A resource as an entry's account: no trailing `/`.
fn account(resource: &str) -> String {
    resource.trim_end_matches('/').to_owned()
}

/// The resources that may cover `endpoint`, most specific first: its own
/// URL without the query, then each parent path, then the origin.
fn candidates(endpoint: &str) -> Vec<String> {
    let Ok(url) = HttpUrl::parse(endpoint) else {
        return Vec::new();
    };
    let (scheme, host, port) = url.origin();
    let origin = if port == scheme.default_port() {
        format!("{}://{host}", scheme.as_str())
    } else {
        format!("{}://{host}:{port}", scheme.as_str())
    };
    let mut path = url.path().trim_end_matches('/').to_owned();
    let mut out = Vec::new();
    loop {
        out.push(format!("{origin}{path}"));
        match path.rfind('/') {
            Some(i) => path.truncate(i),
            None => break,
        }
    }
    out
}

impl TokenStore for KeychainStore {
    fn load(&self, endpoint: &str) -> Option<AuthState> {
        candidates(endpoint).iter().find_map(|a| self.read(a))
    }

    fn save(&self, state: &AuthState) -> Result<(), StoreError> {
        let _lock = self.take_lock()?;
        self.write(state)
    }

    fn lock(self: Arc<Self>) -> Result<Box<dyn StoreLock>, StoreError> {
        let lock = self.take_lock()?;
        Ok(Box::new(KeychainLock {
            store: KeychainStore::clone(&self),
            _lock: lock,
        }))
    }
}

struct KeychainLock {
    store: KeychainStore,
    _lock: LockFile,
}

impl StoreLock for KeychainLock {
    fn load(&self, endpoint: &str) -> Option<AuthState> {
        self.store.load(endpoint)
    }

    fn save(&self, state: &AuthState) -> Result<(), StoreError> {
        self.store.write(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_go_from_the_endpoint_to_its_origin() {
        assert_eq!(
            candidates("https://h.example/a/mcp?x=1"),
            [
                "https://h.example/a/mcp",
                "https://h.example/a",
                "https://h.example"
            ]
        );
        assert_eq!(
            candidates("http://127.0.0.1:8080/"),
            ["http://127.0.0.1:8080"]
        );
        assert_eq!(account("https://h.example/"), "https://h.example");
    }
}
