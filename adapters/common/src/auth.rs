//! The application's side of OAuth: where the user agent goes
//! ([`RedirectHandler`]: a browser and a loopback listener by default, or a
//! printed URL), and where tokens live between runs ([`TokenStore`]: in
//! memory, a `0600` JSON file, or the OS keychain with the `keychain`
//! feature). The flow itself is the core's ([`mcpwire::auth`]); the driver
//! runs a handler on a thread of its own (it blocks while the user logs
//! in), so the same handlers serve every runtime.
//!
//! A store is shared: by the connections of a process, and by processes
//! (several `mcpwire` commands, a manager beside them). A refresh runs
//! under the store's lock, from reading the stored state to saving the new
//! one ([`TokenStore::lock`], driven by
//! [`Output::LockTokens`](mcpwire::Output::LockTokens)), so that one
//! refresh runs at a time and the others use its tokens: a server that
//! rotates refresh tokens revokes the whole grant when a spent one comes
//! back (RFC 9700 §4.14.2).
//!
//! ```text
//!  401 ─► LockTokens ─► lock_on_thread: store.lock() (waits) + load ─► Session::store_locked
//!           └► core: newer and good? use it (UnlockTokens) : refresh ─► Authorized ─► save, unlock
//! ```

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::files::{remove_stale_temporaries, write_atomic, LockFile};
use crate::runtime::SpawnError;
use mcpwire::auth::resource_covers;
pub use mcpwire::auth::{
    AssertionClaims, AssertionSigner, AuthConfig, AuthError, AuthState, BoxError,
    ClientCredentials, CredentialSource, DpopKey, EnterpriseIdp, Grant, TokenAuthMethod, Tokens,
    WallClock,
};
use mcpwire::exchange::HttpUrl;

/// Why the user agent did not come back from an authorization URL
/// ([`RedirectHandler::authorize`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorizeError {
    /// No redirect arrived in time ([`LoopbackRedirect::timeout`]).
    #[error("no redirect to {redirect_uri} within {} s", timeout.as_secs())]
    Timeout {
        /// Where it was awaited.
        redirect_uri: String,
        /// How long.
        timeout: Duration,
    },
    /// The loopback listener failed.
    #[error("redirect listener: {0}")]
    Listener(#[source] io::Error),
    /// The handler's thread could not be started
    /// ([`authorize_on_thread`]).
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// An application's handler failed ([`FnRedirect`], or any
    /// [`RedirectHandler`]): its error, as it says.
    #[error(transparent)]
    Other(BoxError),
}

impl AuthorizeError {
    /// An application handler's error (`AuthorizeError::other("the user
    /// closed the window")`).
    pub fn other(error: impl Into<BoxError>) -> Self {
        AuthorizeError::Other(error.into())
    }
}

/// Why a token store could not save a state or take its lock
/// ([`TokenStore::save`], [`TokenStore::lock`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The store's lock file could not be opened or locked.
    #[error("{}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The state could not be encoded as JSON.
    #[error("encoding tokens: {0}")]
    Format(#[source] serde_json::Error),
    /// The OS credential store failed (the `keychain` feature's
    /// `KeychainStore`): the `keyring` crate's error.
    #[error("the OS credential store: {0}")]
    Keychain(#[source] BoxError),
    /// An application's store failed: its error, as it says.
    #[error(transparent)]
    Other(BoxError),
}

impl StoreError {
    /// An application store's error (`StoreError::other("database is
    /// down")`).
    pub fn other(error: impl Into<BoxError>) -> Self {
        StoreError::Other(error.into())
    }
}

/// Sends the user agent to an authorization URL and brings back where the
/// authorization server redirected it.
pub trait RedirectHandler: Send + Sync {
    /// The `redirect_uri` to register and send (must be where
    /// [`authorize`](Self::authorize) can see the redirect arrive).
    fn redirect_uri(&self) -> String;

    /// Sends the user to `url` and blocks until the redirect arrives;
    /// returns the URL it reached (with `code` and `state`, or `error`).
    /// Runs on a thread of its own.
    fn authorize(&self, url: &str) -> Result<String, AuthorizeError>;
}

/// Runs `handler.authorize(url)` on a thread of its own (it blocks until
/// the user is back) and hands its answer to `deliver`: how a driver, async
/// or not, performs [`Output::Authorize`](mcpwire::Output::Authorize).
pub fn authorize_on_thread(
    handler: Arc<dyn RedirectHandler>,
    url: String,
    deliver: impl FnOnce(Result<String, AuthorizeError>) + Send + 'static,
) -> Result<(), SpawnError> {
    std::thread::Builder::new()
        .name("mcpwire-authorize".into())
        .spawn(move || deliver(handler.authorize(&url)))
        .map(|_| ())
        .map_err(SpawnError::Thread)
}

/// Keeps authorization state between connections (and runs).
pub trait TokenStore: Send + Sync + 'static {
    /// The state saved for the MCP endpoint `endpoint`, if any.
    fn load(&self, endpoint: &str) -> Option<AuthState>;
    /// Saves `state` (replacing the one for the same issuer and resource).
    fn save(&self, state: &AuthState) -> Result<(), StoreError>;
    /// Takes the store's lock for a refresh: the state is read and the
    /// refreshed one saved through the [`StoreLock`], and nobody else (no
    /// other connection, no other process sharing the store) takes the
    /// lock until it is dropped. Blocks while another holds it; a holder
    /// that died must not block it. The default has no lock (a store only
    /// this connection uses).
    fn lock(self: Arc<Self>) -> Result<Box<dyn StoreLock>, StoreError> {
        Ok(Box::new(Unlocked(self)))
    }
}

/// A [`TokenStore`] held by [`TokenStore::lock`]; dropping it releases
/// the lock.
pub trait StoreLock: Send {
    /// The state saved for the MCP endpoint `endpoint`, read now.
    fn load(&self, endpoint: &str) -> Option<AuthState>;
    /// Saves `state` under the lock.
    fn save(&self, state: &AuthState) -> Result<(), StoreError>;
}

/// The default "lock" of a store: none.
struct Unlocked<S: ?Sized>(Arc<S>);

impl<S: TokenStore + ?Sized> StoreLock for Unlocked<S> {
    fn load(&self, endpoint: &str) -> Option<AuthState> {
        self.0.load(endpoint)
    }

    fn save(&self, state: &AuthState) -> Result<(), StoreError> {
        self.0.save(state)
    }
}

/// What [`lock_on_thread`] hands over: the lock (`None` when it could not
/// be taken: the state was read without it) and the state read under it.
pub type Locked = (Option<Box<dyn StoreLock>>, Option<AuthState>);

/// Takes `store`'s lock on a thread of its own (it may wait for another
/// process's refresh) and reads the state for `endpoint` under it, then
/// hands both to `deliver`: how a driver, async or not, performs
/// [`Output::LockTokens`](mcpwire::Output::LockTokens). A lock that cannot
/// be taken (a read-only folder) is logged and the state read without it.
pub fn lock_on_thread(
    store: Arc<dyn TokenStore>,
    endpoint: String,
    deliver: impl FnOnce(Locked) + Send + 'static,
) -> Result<(), SpawnError> {
    std::thread::Builder::new()
        .name("mcpwire-token-lock".into())
        .spawn(move || {
            let locked = match store.clone().lock() {
                Ok(lock) => {
                    let state = lock.load(&endpoint);
                    (Some(lock), state)
                }
                Err(e) => {
                    tracing::warn!(
                        "the token store cannot be locked ({e}): refreshing without its lock"
                    );
                    (None, store.load(&endpoint))
                }
            };
            deliver(locked)
        })
        .map(|_| ())
        .map_err(SpawnError::Thread)
}

/// How a connection authorizes itself: the core's [`AuthConfig`], where
/// the user goes, where tokens are kept.
#[derive(Clone)]
pub struct AuthOptions {
    pub(crate) config: AuthConfig,
    pub(crate) redirect: Arc<dyn RedirectHandler>,
    pub(crate) store: Arc<dyn TokenStore>,
}

impl AuthOptions {
    /// OAuth with this redirect handler and an in-memory token store.
    pub fn new(redirect: impl RedirectHandler + 'static) -> Self {
        AuthOptions {
            config: AuthConfig::default(),
            redirect: Arc::new(redirect),
            store: Arc::new(MemoryStore::default()),
        }
    }

    /// OAuth with the default handler: the system browser and a loopback
    /// listener on `127.0.0.1` (a random port).
    pub fn browser() -> io::Result<Self> {
        Ok(Self::new(LoopbackRedirect::bind(true)?))
    }

    /// Where tokens are kept.
    pub fn store(mut self, store: impl TokenStore + 'static) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// Pre-registered client credentials (used before any registration).
    pub fn client(mut self, client: ClientCredentials) -> Self {
        self.config.client = Some(client);
        self
    }

    /// This client's metadata document URL (an HTTPS `client_id` for
    /// servers that accept Client ID Metadata Documents).
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.config.client_metadata_url = Some(url.into());
        self
    }

    /// The scope to ask for (else the server's challenge or metadata
    /// decides).
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.config.scope = Some(scope.into());
        self
    }

    /// Whether a user may be sent to the browser (false: only stored and
    /// refreshed tokens are used; a flow that needs a user fails).
    pub fn interactive(mut self, yes: bool) -> Self {
        self.config.interactive = yes;
        self
    }

    /// Whether to ask for DPoP-bound tokens (RFC 9449) where the
    /// authorization server offers them (default true): a key pair per
    /// client, kept in the token store with the tokens.
    pub fn dpop(mut self, yes: bool) -> Self {
        self.config.dpop = yes;
        self
    }

    /// Workload identity federation: tokens by the RFC 7523 JWT bearer
    /// grant, its assertion read from `source` at every token request (so
    /// a rotated token is used once the tokens expire). Needs a
    /// pre-registered client ([`client`](Self::client)).
    pub fn workload_identity(mut self, source: TokenSource) -> Self {
        self.config.grant = Grant::JwtBearer;
        self.config.workload_identity = Some(source.reader());
        self
    }

    /// Enterprise-managed authorization (SEP-990, cross-app access): the
    /// user's ID token from the enterprise IdP (read from `id_token` at
    /// every token request) is exchanged at `idp.token_endpoint` for an
    /// ID-JAG, which the MCP server's authorization server takes as a JWT
    /// bearer grant. Needs a pre-registered client there
    /// ([`client`](Self::client)).
    pub fn enterprise(mut self, idp: EnterpriseIdpOptions, id_token: TokenSource) -> Self {
        self.config.grant = Grant::EnterpriseManaged;
        self.config.enterprise = Some(EnterpriseIdp {
            token_endpoint: idp.token_endpoint,
            client_id: idp.client_id,
            client_secret: idp.client_secret,
            id_token: id_token.reader(),
        });
        self
    }

    /// Any other setting of the core's [`AuthConfig`].
    pub fn config(mut self, f: impl FnOnce(&mut AuthConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// The redirect handler (a driver runs it on a thread of its own).
    pub fn redirect_handler(&self) -> Arc<dyn RedirectHandler> {
        self.redirect.clone()
    }

    /// The token store (a driver saves `Authorized` states to it).
    pub fn token_store(&self) -> Arc<dyn TokenStore> {
        self.store.clone()
    }

    /// The core configuration for a connection to `endpoint`: the handler's
    /// redirect URI and the stored state.
    pub fn for_endpoint(&self, endpoint: &str) -> AuthConfig {
        let mut c = self.config.clone();
        c.redirect_uri = self.redirect.redirect_uri();
        if c.wall_clock.is_none() {
            // The core has no clock: DPoP proofs are dated from this anchor
            // and the `now` of each call.
            c.wall_clock = Some(WallClock::anchor(Instant::now(), SystemTime::now()));
        }
        if c.state.is_none() {
            c.state = self.store.load(endpoint);
        }
        c
    }
}

impl std::fmt::Debug for AuthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthOptions")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The enterprise IdP of [`AuthOptions::enterprise`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnterpriseIdpOptions {
    /// The IdP's token endpoint (RFC 8693 token exchange).
    pub token_endpoint: String,
    /// This client's id at the IdP.
    pub client_id: String,
    /// This client's secret at the IdP, if any.
    pub client_secret: Option<String>,
}

/// Where a credential (a compact JWT: a workload identity token, an ID
/// token) is read from, each time a flow needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenSource {
    /// The contents of a file (a projected service account token, a CI
    /// job's OIDC token file), read anew each time.
    File(PathBuf),
    /// The value of an environment variable, read anew each time.
    Env(String),
    /// What a command prints on stdout (the program and its arguments, no
    /// shell), run anew each time; a non-zero exit is an error.
    Command(Vec<String>),
    /// A fixed value.
    Value(String),
}

/// Largest credential a source may give (a JWT is a few KiB).
const MAX_CREDENTIAL: usize = 64 * 1024;

/// Why a [`TokenSource`] cannot be parsed ([`TokenSource::parse`]) or
/// read ([`TokenSource::read`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenSourceError {
    /// The spec names no known kind of source.
    #[error("{spec:?}: expected file:PATH, env:VAR, cmd:COMMAND or value:TOKEN")]
    Spec {
        /// The spec.
        spec: String,
    },
    /// The spec has nothing after its kind.
    #[error("{spec:?}: nothing after {kind}:")]
    Empty {
        /// The spec.
        spec: String,
        /// Its kind (`file`, `env`, ...).
        kind: String,
    },
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The environment variable is not set (or not Unicode).
    #[error("environment variable {var}: {source}")]
    Env {
        /// The variable.
        var: String,
        /// Why.
        source: std::env::VarError,
    },
    /// The command is empty.
    #[error("an empty command")]
    EmptyCommand,
    /// The command cannot be started.
    #[error("{program}: {source}")]
    Command {
        /// The program.
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// The command exited unsuccessfully.
    #[error("{program} failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    CommandFailed {
        /// The program.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The start of what it wrote on stderr (trimmed, at most 200
        /// characters; empty if nothing).
        stderr: String,
    },
    /// The credential is too long.
    #[error("{what}: more than {MAX_CREDENTIAL} bytes")]
    TooLong {
        /// The file or the program.
        what: String,
    },
    /// The credential is not UTF-8.
    #[error("{what}: not UTF-8")]
    NotUtf8 {
        /// The file or the program.
        what: String,
    },
}

impl TokenSource {
    /// `file:PATH`, `env:VAR`, `cmd:PROGRAM ARG…` (split on white space),
    /// or `value:TOKEN`.
    pub fn parse(spec: &str) -> Result<TokenSource, TokenSourceError> {
        let unknown = || TokenSourceError::Spec {
            spec: spec.to_owned(),
        };
        let (kind, rest) = spec.split_once(':').ok_or_else(unknown)?;
        if rest.is_empty() {
            return Err(TokenSourceError::Empty {
                spec: spec.to_owned(),
                kind: kind.to_owned(),
            });
        }
        Ok(match kind {
            "file" => TokenSource::File(PathBuf::from(rest)),
            "env" => TokenSource::Env(rest.to_owned()),
            "cmd" => TokenSource::Command(rest.split_whitespace().map(str::to_owned).collect()),
            "value" => TokenSource::Value(rest.to_owned()),
            _ => return Err(unknown()),
        })
    }

    /// Reads the credential now.
    pub fn read(&self) -> Result<String, TokenSourceError> {
        let text = match self {
            TokenSource::File(path) => {
                let mut buf = Vec::new();
                std::fs::File::open(path)
                    .and_then(|f| f.take(MAX_CREDENTIAL as u64 + 1).read_to_end(&mut buf))
                    .map_err(|source| TokenSourceError::File {
                        path: path.clone(),
                        source,
                    })?;
                bytes_to_text(buf, &path.display().to_string())?
            }
            TokenSource::Env(var) => {
                std::env::var(var).map_err(|source| TokenSourceError::Env {
                    var: var.clone(),
                    source,
                })?
            }
            TokenSource::Command(argv) => {
                let (program, args) = argv.split_first().ok_or(TokenSourceError::EmptyCommand)?;
                let out = std::process::Command::new(program)
                    .args(args)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map_err(|source| TokenSourceError::Command {
                        program: program.clone(),
                        source,
                    })?;
                if !out.status.success() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    return Err(TokenSourceError::CommandFailed {
                        program: program.clone(),
                        status: out.status,
                        stderr: err.trim().chars().take(200).collect(),
                    });
                }
                bytes_to_text(out.stdout, program)?
            }
            TokenSource::Value(v) => v.clone(),
        };
        Ok(text.trim().to_owned())
    }

    /// The source as the core's [`CredentialSource`].
    pub fn reader(&self) -> CredentialSource {
        let me = self.clone();
        Arc::new(move || me.read().map_err(Into::into))
    }
}

fn bytes_to_text(bytes: Vec<u8>, what: &str) -> Result<String, TokenSourceError> {
    if bytes.len() > MAX_CREDENTIAL {
        return Err(TokenSourceError::TooLong { what: what.into() });
    }
    String::from_utf8(bytes).map_err(|_| TokenSourceError::NotUtf8 { what: what.into() })
}

/// Tokens in memory, for the life of the process. Its lock is the
/// process's: connections sharing one store refresh one at a time.
#[derive(Debug, Default)]
pub struct MemoryStore {
    states: Mutex<Vec<AuthState>>,
    /// Whether a [`StoreLock`] is out.
    held: Mutex<bool>,
    released: std::sync::Condvar,
}

impl TokenStore for MemoryStore {
    fn load(&self, endpoint: &str) -> Option<AuthState> {
        find(
            &self.states.lock().unwrap_or_else(|e| e.into_inner()),
            endpoint,
        )
    }

    fn save(&self, state: &AuthState) -> Result<(), StoreError> {
        upsert(
            &mut self.states.lock().unwrap_or_else(|e| e.into_inner()),
            state,
        );
        Ok(())
    }

    fn lock(self: Arc<Self>) -> Result<Box<dyn StoreLock>, StoreError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        while *held {
            held = self.released.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        *held = true;
        drop(held);
        Ok(Box::new(MemoryLock(self)))
    }
}

struct MemoryLock(Arc<MemoryStore>);

impl StoreLock for MemoryLock {
    fn load(&self, endpoint: &str) -> Option<AuthState> {
        self.0.load(endpoint)
    }

    fn save(&self, state: &AuthState) -> Result<(), StoreError> {
        self.0.save(state)
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        *self.0.held.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.0.released.notify_one();
    }
}

/// Tokens in a JSON file readable by its owner only (`0600`), keyed by
/// authorization server and resource (DPoP keys and registered clients
/// with them). Safe to share between processes: every read-modify-write,
/// and a refresh from read to write ([`TokenStore::lock`]), holds an
/// advisory lock on the sibling `NAME.lock` ([`LockFile`]: it dies with its
/// process), and the file is replaced atomically ([`write_atomic`]: a
/// temporary file in the same folder, synced, renamed; the temporary files
/// of writers that died are removed by the next write).
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// A store in `path` (created on the first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileStore { path: path.into() }
    }

    /// `$XDG_CONFIG_HOME/mcpwire/tokens.json` (else `~/.config/…`).
    pub fn default_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
        Some(base.join("mcpwire").join("tokens.json"))
    }

    /// Where the tokens are kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock file beside the store (`tokens.json.lock`).
    pub fn lock_path(&self) -> PathBuf {
        let mut name = self
            .path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_else(|| "tokens".into());
        name.push(".lock");
        self.path.with_file_name(name)
    }

    fn take_lock(&self) -> Result<LockFile, StoreError> {
        let path = self.lock_path();
        LockFile::acquire(&path).map_err(|source| StoreError::Lock { path, source })
    }

    /// Saves `state` into the file; the caller holds the lock.
    fn write(&self, state: &AuthState) -> Result<(), StoreError> {
        let mut states = self.read();
        upsert(&mut states, state);
        let text =
            serde_json::to_string_pretty(&StoreFile { states }).map_err(StoreError::Format)?;
        if let Some(dir) = self.path.parent() {
            // Before 0.1 the store's temporary files were `tokens.tmp<pid>-<n>`.
            if let Some(stem) = self.path.file_stem().and_then(|s| s.to_str()) {
                remove_stale_temporaries(dir, &format!("{stem}.tmp"));
            }
        }
        write_atomic(&self.path, text.as_bytes(), true).map_err(|source| StoreError::Io {
            path: self.path.clone(),
            source,
        })
    }

    fn read(&self) -> Vec<AuthState> {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Vec::new();
        };
        match serde_json::from_str::<StoreFile>(&text) {
            Ok(f) => f.states,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "ignoring unreadable token store: {e}");
                Vec::new()
            }
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoreFile {
    states: Vec<AuthState>,
}

impl TokenStore for FileStore {
    fn load(&self, endpoint: &str) -> Option<AuthState> {
        find(&self.read(), endpoint)
    }

    fn save(&self, state: &AuthState) -> Result<(), StoreError> {
        // One read-modify-write at a time, in this process and across
        // processes: none loses another's update.
        let _lock = self.take_lock()?;
        self.write(state)
    }

    fn lock(self: Arc<Self>) -> Result<Box<dyn StoreLock>, StoreError> {
        let lock = self.take_lock()?;
        Ok(Box::new(FileLock {
            store: FileStore::clone(&self),
            _lock: lock,
        }))
    }
}

/// A [`FileStore`] under its lock.
struct FileLock {
    store: FileStore,
    _lock: LockFile,
}

impl StoreLock for FileLock {
    fn load(&self, endpoint: &str) -> Option<AuthState> {
        self.store.load(endpoint)
    }

    fn save(&self, state: &AuthState) -> Result<(), StoreError> {
        self.store.write(state)
    }
}

/// The state whose resource covers `endpoint` (the most specific one).
fn find(states: &[AuthState], endpoint: &str) -> Option<AuthState> {
    let url = HttpUrl::parse(endpoint).ok()?;
    states
        .iter()
        .filter(|s| resource_covers(&s.resource, &url))
        .max_by_key(|s| s.resource.len())
        .cloned()
}

fn upsert(states: &mut Vec<AuthState>, state: &AuthState) {
    states.retain(|s| !(s.resource == state.resource && s.issuer == state.issuer));
    states.push(state.clone());
}

/// Receives the redirect on `http://127.0.0.1:<port>/callback` (RFC 8252
/// loopback redirect), after opening the system browser or printing the
/// URL for the user to open.
#[derive(Debug)]
pub struct LoopbackRedirect {
    listener: Mutex<TcpListener>,
    addr: SocketAddr,
    open_browser: bool,
    timeout: Duration,
}

impl LoopbackRedirect {
    /// Binds `127.0.0.1` on a random port. `open_browser`: launch the
    /// system browser (`xdg-open`, `open`, `start`); else print the URL on
    /// stderr (for a headless machine with a forwarded port).
    pub fn bind(open_browser: bool) -> io::Result<Self> {
        Self::bind_to(SocketAddr::from(([127, 0, 0, 1], 0)), open_browser)
    }

    /// Binds a given loopback address (a fixed port some servers require).
    pub fn bind_to(addr: SocketAddr, open_browser: bool) -> io::Result<Self> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the redirect listener must be on a loopback address",
            ));
        }
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        Ok(LoopbackRedirect {
            listener: Mutex::new(listener),
            addr,
            open_browser,
            timeout: Duration::from_secs(300),
        })
    }

    /// How long to wait for the redirect (default 5 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The listener's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl RedirectHandler for LoopbackRedirect {
    fn redirect_uri(&self) -> String {
        format!("http://{}/callback", self.addr)
    }

    fn authorize(&self, url: &str) -> Result<String, AuthorizeError> {
        let listener = self.listener.lock().unwrap_or_else(|e| e.into_inner());
        if self.open_browser {
            if let Err(e) = open_browser(url) {
                eprintln!("Could not open a browser ({e}). Open this URL to authorize:\n  {url}");
            }
        } else {
            eprintln!("Open this URL to authorize:\n  {url}");
        }
        // Only the redirect of this authorization counts: a request with
        // another `state` (a stray local process) is turned away.
        let state = url
            .split_once('?')
            .map(|(_, q)| q)
            .unwrap_or_default()
            .split('&')
            .find_map(|p| p.strip_prefix("state="))
            .unwrap_or_default()
            .to_owned();
        let deadline = Instant::now() + self.timeout;
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    if let Some(target) = serve_callback(stream, &state) {
                        return Ok(format!("http://{}{target}", self.addr));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(AuthorizeError::Timeout {
                            redirect_uri: self.redirect_uri(),
                            timeout: self.timeout,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(AuthorizeError::Listener(e)),
            }
        }
    }
}

/// Reads one request (bounded); if it is `GET /callback?…` with a `code`
/// or an `error` and `state` (as sent, still encoded), answers a page and
/// returns its target.
fn serve_callback(mut stream: TcpStream, state: &str) -> Option<String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let target = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GET "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_default()
        .to_owned();
    let query = target.strip_prefix("/callback?").unwrap_or_default();
    let has = |k: &str| query.split('&').any(|p| p.starts_with(k));
    let is_callback = (has("code=") || has("error="))
        && query
            .split('&')
            .any(|p| p.strip_prefix("state=") == Some(state));
    let (status, page) = if is_callback {
        (
            "200 OK",
            "<!doctype html><title>mcpwire</title><p>Authorization received. You can close this window.",
        )
    } else {
        (
            "404 Not Found",
            "<!doctype html><title>mcpwire</title><p>Not here.",
        )
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    );
    is_callback.then_some(target)
}

/// Launches the system browser on `url`.
fn open_browser(url: &str) -> io::Result<()> {
    let mut cmd = if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut c = std::process::Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        std::process::Command::new(std::env::var("BROWSER").unwrap_or_else(|_| "xdg-open".into()))
    };
    cmd.arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|_| ())
}

/// A handler the application writes as a closure (e.g. one that fetches
/// the URL itself in a test, or asks the user to paste the redirect). Its
/// error is any error ([`BoxError`]; `Err("no redirect".into())` too),
/// which [`authorize`](RedirectHandler::authorize) hands on as
/// [`AuthorizeError::Other`].
pub struct FnRedirect<F> {
    redirect_uri: String,
    f: F,
}

impl<F> FnRedirect<F>
where
    F: Fn(&str) -> Result<String, BoxError> + Send + Sync,
{
    /// `f` gets the authorization URL and returns the redirect URL.
    pub fn new(redirect_uri: impl Into<String>, f: F) -> Self {
        FnRedirect {
            redirect_uri: redirect_uri.into(),
            f,
        }
    }
}

impl<F> RedirectHandler for FnRedirect<F>
where
    F: Fn(&str) -> Result<String, BoxError> + Send + Sync,
{
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, url: &str) -> Result<String, AuthorizeError> {
        (self.f)(url).map_err(AuthorizeError::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpwire::auth::Tokens;

    #[test]
    fn token_sources_parse_and_read_fresh() {
        assert_eq!(
            TokenSource::parse("file:/x/y").unwrap(),
            TokenSource::File("/x/y".into())
        );
        assert_eq!(
            TokenSource::parse("env:TOK").unwrap(),
            TokenSource::Env("TOK".into())
        );
        assert_eq!(
            TokenSource::parse("cmd:printf %s a.b.c").unwrap(),
            TokenSource::Command(vec!["printf".into(), "%s".into(), "a.b.c".into()])
        );
        for bad in ["file:", "nope:x", "plain", ""] {
            assert!(TokenSource::parse(bad).is_err(), "{bad}");
        }
        // A file is read anew each time (a rotated token is seen).
        let dir = std::env::temp_dir().join(format!("mcpwire-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first.jwt\n").unwrap();
        let read = TokenSource::File(path.clone()).reader();
        assert_eq!(read().unwrap(), "first.jwt");
        std::fs::write(&path, "second.jwt").unwrap();
        assert_eq!(read().unwrap(), "second.jwt");
        std::fs::write(&path, vec![b'a'; MAX_CREDENTIAL + 1]).unwrap();
        assert!(read().unwrap_err().to_string().contains("bytes"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(TokenSource::File(dir.join("missing")).read().is_err());
        // A command's stdout; a failing command is an error.
        let cmd = TokenSource::parse("cmd:printf %s cmd.jwt").unwrap();
        assert_eq!(cmd.read().unwrap(), "cmd.jwt");
        assert!(TokenSource::parse("cmd:false").unwrap().read().is_err());
        assert!(TokenSource::Command(Vec::new()).read().is_err());
        // A variable that is not set is an error.
        assert!(TokenSource::Env("MCPWIRE_SURELY_UNSET_VARIABLE".into())
            .read()
            .is_err());
        assert_eq!(TokenSource::Value(" v ".into()).read().unwrap(), "v");
    }

    /// The typed errors say what the strings said.
    #[test]
    fn error_texts_are_unchanged() {
        let text = |e: TokenSourceError| e.to_string();
        assert_eq!(
            text(TokenSource::parse("nope:x").unwrap_err()),
            "\"nope:x\": expected file:PATH, env:VAR, cmd:COMMAND or value:TOKEN"
        );
        assert_eq!(
            text(TokenSource::parse("file:").unwrap_err()),
            "\"file:\": nothing after file:"
        );
        assert_eq!(
            text(TokenSource::Command(Vec::new()).read().unwrap_err()),
            "an empty command"
        );
        assert!(text(
            TokenSource::Env("MCPWIRE_SURELY_UNSET_VARIABLE".into())
                .read()
                .unwrap_err()
        )
        .starts_with("environment variable MCPWIRE_SURELY_UNSET_VARIABLE: "));
        #[cfg(unix)]
        {
            let failing = TokenSource::Command(vec![
                "sh".into(),
                "-c".into(),
                "echo '  no token  ' >&2; exit 3".into(),
            ]);
            assert_eq!(
                text(failing.read().unwrap_err()),
                "sh failed (exit status: 3): no token"
            );
            let silent = TokenSource::Command(vec!["sh".into(), "-c".into(), "exit 3".into()]);
            assert_eq!(
                text(silent.read().unwrap_err()),
                "sh failed (exit status: 3)"
            );
        }
        let handler = FnRedirect::new("http://127.0.0.1/callback", |_: &str| {
            Err("log in first".into())
        });
        assert_eq!(
            handler
                .authorize("https://as.example/a")
                .unwrap_err()
                .to_string(),
            "log in first"
        );
        let e = std::io::Error::other("boom");
        assert_eq!(
            AuthorizeError::from(SpawnError::Thread(e)).to_string(),
            "cannot start a thread: boom"
        );
        let e = StoreError::Lock {
            path: "/x/tokens.json.lock".into(),
            source: std::io::Error::other("busy"),
        };
        assert_eq!(e.to_string(), "/x/tokens.json.lock: busy");
        assert_eq!(StoreError::other("db down").to_string(), "db down");
    }

    fn state(resource: &str, token: &str) -> AuthState {
        AuthState {
            resource: resource.into(),
            issuer: Some("https://as.example".into()),
            token_endpoint: "https://as.example/token".into(),
            client: ClientCredentials::public("c"),
            tokens: Tokens {
                access_token: token.into(),
                refresh_token: Some("r".into()),
                scope: None,
                expires_in: None,
                expires_at: None,
            },
            scope: None,
            dpop_key: None,
        }
    }

    #[test]
    fn file_store_round_trip_is_private_and_keyed() {
        let dir = std::env::temp_dir().join(format!("mcpwire-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = FileStore::new(dir.join("sub").join("tokens.json"));
        assert!(store.load("https://h.example/mcp").is_none());
        store.save(&state("https://h.example/mcp", "t1")).unwrap();
        store
            .save(&state("https://other.example/mcp", "t2"))
            .unwrap();
        store.save(&state("https://h.example/mcp", "t3")).unwrap();
        assert_eq!(
            store
                .load("https://h.example/mcp")
                .unwrap()
                .tokens
                .access_token,
            "t3"
        );
        assert_eq!(
            store
                .load("https://other.example/mcp")
                .unwrap()
                .tokens
                .access_token,
            "t2"
        );
        assert!(store.load("https://third.example/mcp").is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A corrupt file is ignored, not fatal.
        std::fs::write(store.path(), "{not json").unwrap();
        assert!(store.load("https://h.example/mcp").is_none());
        store.save(&state("https://h.example/mcp", "t4")).unwrap();
        assert_eq!(
            store
                .load("https://h.example/mcp")
                .unwrap()
                .tokens
                .access_token,
            "t4"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 34: a store writer killed between its fsync and its rename
    /// left `tokens.tmp<pid>-<n>` (live tokens) beside the store for ever.
    #[cfg(unix)]
    #[test]
    fn file_store_removes_what_dead_writers_left() {
        let dir = std::env::temp_dir().join(format!("mcpwire-store-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let left = [
            dir.join(format!("tokens.tmp{dead}-0")),
            dir.join(format!(".tokens.json.tmp{dead}-7")),
        ];
        for f in &left {
            std::fs::write(f, "{\"states\":[]}").unwrap();
        }
        let store = FileStore::new(dir.join("tokens.json"));
        store.save(&state("https://h.example/mcp", "t1")).unwrap();
        for f in &left {
            assert!(!f.exists(), "{} stays", f.display());
        }
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["tokens.json", "tokens.json.lock"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// One refresh at a time: a second lock waits for the first, and
    /// reads what the first saved.
    #[test]
    fn store_locks_exclude_each_other_and_see_the_saved_state() {
        let dir = std::env::temp_dir().join(format!("mcpwire-store-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let stores: [Arc<dyn TokenStore>; 2] = [
            Arc::new(FileStore::new(dir.join("tokens.json"))),
            Arc::new(MemoryStore::default()),
        ];
        for store in stores {
            store.save(&state("https://h.example/mcp", "t1")).unwrap();
            let first = store.clone().lock().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            let s2 = store.clone();
            let second = std::thread::spawn(move || {
                let lock = s2.lock().unwrap();
                tx.send(
                    lock.load("https://h.example/mcp")
                        .unwrap()
                        .tokens
                        .access_token,
                )
                .unwrap();
            });
            assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
            first.save(&state("https://h.example/mcp", "t2")).unwrap();
            drop(first);
            assert_eq!(rx.recv_timeout(Duration::from_secs(30)).unwrap(), "t2");
            second.join().unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn memory_store_matches_parent_resources() {
        let store = MemoryStore::default();
        store.save(&state("https://h.example", "root")).unwrap();
        assert_eq!(
            store
                .load("https://h.example/a/mcp")
                .unwrap()
                .tokens
                .access_token,
            "root"
        );
        store
            .save(&state("https://h.example/a/mcp", "exact"))
            .unwrap();
        assert_eq!(
            store
                .load("https://h.example/a/mcp")
                .unwrap()
                .tokens
                .access_token,
            "exact"
        );
    }

    #[test]
    fn loopback_receives_the_redirect() {
        let r = LoopbackRedirect::bind(false)
            .unwrap()
            .timeout(Duration::from_secs(10));
        let uri = r.redirect_uri();
        assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"));
        let addr = r.local_addr();
        let browser = std::thread::spawn(move || {
            // A stray request first (favicon), then the redirect.
            for target in [
                "/favicon.ico",
                "/callback?error=access_denied&state=forged",
                "/callback?code=abc&state=xyz",
            ] {
                let mut s = TcpStream::connect(addr).unwrap();
                write!(s, "GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let mut page = String::new();
                s.read_to_string(&mut page).unwrap();
                assert!(page.starts_with("HTTP/1.1 "), "{page}");
            }
        });
        let got = r
            .authorize("https://as.example/authorize?x=1&state=xyz")
            .unwrap();
        browser.join().unwrap();
        assert_eq!(got, format!("http://{addr}/callback?code=abc&state=xyz"));
        // Nobody comes: a timeout, not a hang.
        let r = r.timeout(Duration::from_millis(200));
        assert!(r
            .authorize("https://as.example/authorize")
            .unwrap_err()
            .to_string()
            .contains("no redirect"));
    }
}
