//! Tool pinning: what a server said about its tools when it was trusted,
//! kept, and compared with what it says at every later listing.
//!
//! A server that is approved once can still change what its tools say
//! afterwards (the "rug pull" of tool poisoning: a description that
//! later carries instructions for the model, a schema that asks for more).
//! With [`ConnectOptions::pin_tools`](crate::ConnectOptions::pin_tools),
//! `list_tools` (and `list_tools_fresh_for`) compare each listing with
//! the tools pinned for the server's key:
//!
//! ```text
//! list ──▶ no pins yet ──────────────▶ pinned (trust on first use), all returned
//!     └──▶ pins ──▶ same ────────────▶ all returned
//!                └▶ changed / added / removed ──▶ on_change(&changes),
//!                      kept as pending in the store (for a later accept),
//!                      withhold: changed and added tools left out, and
//!                      calls to them refused (Error::ToolWithheld)
//! ```
//!
//! A tool's pin is the SHA-256 of its `name`, `title`, `description`,
//! `inputSchema`, `outputSchema` and `annotations` (keys sorted), kept
//! with that normalized JSON so that a change can be shown field by field.
//! The store is one `0600` JSON file, replaced atomically under an
//! advisory lock, shared by every process; [`PinStore::accept`] makes the
//! pending list the pinned one (after the user looked at the diff).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpwire::mcp::types::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::files::{write_atomic, LockFile};

/// The fields of a tool that are pinned, in this order.
pub const PINNED_FIELDS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// One tool as pinned: the hash and the normalized JSON it is of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedTool {
    /// SHA-256 (hex) of `tool`'s canonical JSON.
    pub hash: String,
    /// The pinned fields of the tool (absent ones left out).
    pub tool: Value,
}

impl PinnedTool {
    /// The pin of `tool`.
    pub fn of(tool: &Tool) -> PinnedTool {
        let full = serde_json::to_value(tool).unwrap_or(Value::Null);
        let mut m = Map::new();
        for f in PINNED_FIELDS {
            if let Some(v) = full.get(f).filter(|v| !v.is_null()) {
                m.insert(f.to_string(), v.clone());
            }
        }
        // serde_json's map is sorted: the text is canonical.
        let tool = Value::Object(m);
        let text = serde_json::to_vec(&tool).unwrap_or_default();
        let hash = Sha256::digest(&text)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        PinnedTool { hash, tool }
    }
}

/// The pinned tools of one server, by name.
pub type PinnedTools = BTreeMap<String, PinnedTool>;

/// The pins of `tools`.
pub fn pins_of(tools: &[Tool]) -> PinnedTools {
    tools
        .iter()
        .map(|t| (t.name.clone(), PinnedTool::of(t)))
        .collect()
}

/// How a tool differs from its pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToolChange {
    /// A tool that was not there when the server was pinned.
    Added {
        /// Its name.
        name: String,
        /// What it says now.
        now: Value,
    },
    /// A pinned tool the server no longer lists.
    Removed {
        /// Its name.
        name: String,
        /// What it said.
        pinned: Value,
    },
    /// A tool whose pinned fields changed.
    Changed {
        /// Its name.
        name: String,
        /// The fields that differ (`description`, `inputSchema`, …).
        fields: Vec<String>,
        /// What it said.
        pinned: Value,
        /// What it says now.
        now: Value,
    },
}

impl ToolChange {
    /// The tool's name.
    pub fn name(&self) -> &str {
        match self {
            ToolChange::Added { name, .. }
            | ToolChange::Removed { name, .. }
            | ToolChange::Changed { name, .. } => name,
        }
    }

    /// `echo: description changed`, `+fetch (new)`, `-old (removed)`.
    pub fn summary(&self) -> String {
        match self {
            ToolChange::Added { name, .. } => format!("{name}: new"),
            ToolChange::Removed { name, .. } => format!("{name}: removed"),
            ToolChange::Changed { name, fields, .. } => {
                format!("{name}: {} changed", fields.join(", "))
            }
        }
    }

    /// What changed, field by field, for a person to review: `-` what was
    /// pinned, `+` what the server says now.
    pub fn details(&self) -> String {
        let show = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        };
        let mut out = String::new();
        match self {
            ToolChange::Added { name, now } => {
                out.push_str(&format!("+ tool {name} (new)\n"));
                for (k, v) in now.as_object().into_iter().flatten() {
                    out.push_str(&format!("+   {k}: {}\n", show(v)));
                }
            }
            ToolChange::Removed { name, .. } => {
                out.push_str(&format!("- tool {name} (removed)\n"));
            }
            ToolChange::Changed {
                name,
                fields,
                pinned,
                now,
            } => {
                out.push_str(&format!("~ tool {name}\n"));
                for f in fields {
                    if let Some(v) = pinned.get(f) {
                        out.push_str(&format!("-   {f}: {}\n", show(v)));
                    }
                    if let Some(v) = now.get(f) {
                        out.push_str(&format!("+   {f}: {}\n", show(v)));
                    }
                }
            }
        }
        out
    }
}

/// What changed between `pinned` and `now`, in name order.
pub fn compare(pinned: &PinnedTools, now: &PinnedTools) -> Vec<ToolChange> {
    let mut out = Vec::new();
    for (name, p) in pinned {
        match now.get(name) {
            None => out.push(ToolChange::Removed {
                name: name.clone(),
                pinned: p.tool.clone(),
            }),
            Some(n) if n.hash != p.hash => {
                let fields = PINNED_FIELDS
                    .iter()
                    .filter(|f| p.tool.get(**f) != n.tool.get(**f))
                    .map(|f| f.to_string())
                    .collect();
                out.push(ToolChange::Changed {
                    name: name.clone(),
                    fields,
                    pinned: p.tool.clone(),
                    now: n.tool.clone(),
                });
            }
            Some(_) => {}
        }
    }
    for (name, n) in now {
        if !pinned.contains_key(name) {
            out.push(ToolChange::Added {
                name: name.clone(),
                now: n.tool.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.name().cmp(b.name()));
    out
}

/// One server's record in the store.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Record {
    key: String,
    tools: PinnedTools,
    /// The last listing that differed from `tools`, until accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pending: Option<PinnedTools>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    servers: Vec<Record>,
}

/// Why the pin store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// Reading, locking or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a pin store.
    #[error("{path}: not a tool pin file: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The file the pins are kept in (`0600`, shared by processes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinStore {
    path: PathBuf,
}

impl PinStore {
    /// Pins kept in `path`.
    pub fn at(path: impl Into<PathBuf>) -> PinStore {
        PinStore { path: path.into() }
    }

    /// `$XDG_CONFIG_HOME/mcpwire/tool-pins.json` (else `~/.config/…`),
    /// beside the token store.
    pub fn user() -> Option<PinStore> {
        let tokens = crate::auth::FileStore::default_path()?;
        Some(PinStore::at(tokens.with_file_name("tool-pins.json")))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> Result<LockFile, PinError> {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".lock");
        LockFile::acquire(Path::new(&name)).map_err(|source| PinError::Io {
            path: PathBuf::from(name),
            source,
        })
    }

    fn read(&self) -> Result<StoreFile, PinError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| PinError::Corrupt {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoreFile::default()),
            Err(source) => Err(PinError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    fn write(&self, file: &StoreFile) -> Result<(), PinError> {
        let mut text = serde_json::to_vec_pretty(file).unwrap_or_default();
        text.push(b'\n');
        write_atomic(&self.path, &text, true).map_err(|source| PinError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Runs `f` on `key`'s record under the lock and writes the file.
    fn update<T>(&self, key: &str, f: impl FnOnce(&mut Record) -> T) -> Result<T, PinError> {
        let _lock = self.lock()?;
        let mut file = self.read()?;
        file.version = 1;
        let i = match file.servers.iter().position(|r| r.key == key) {
            Some(i) => i,
            None => {
                file.servers.push(Record {
                    key: key.to_string(),
                    ..Record::default()
                });
                file.servers.len() - 1
            }
        };
        let out = f(&mut file.servers[i]);
        self.write(&file)?;
        Ok(out)
    }

    /// The tools pinned for `key` (`None`: never pinned).
    pub fn pinned(&self, key: &str) -> Result<Option<PinnedTools>, PinError> {
        Ok(self
            .read()?
            .servers
            .into_iter()
            .find(|r| r.key == key)
            .map(|r| r.tools))
    }

    /// What changed in the last listing of `key` that differed from its
    /// pins, not accepted yet (empty: nothing pending).
    pub fn pending(&self, key: &str) -> Result<Vec<ToolChange>, PinError> {
        let file = self.read()?;
        Ok(file
            .servers
            .iter()
            .find(|r| r.key == key)
            .and_then(|r| r.pending.as_ref().map(|p| compare(&r.tools, p)))
            .unwrap_or_default())
    }

    /// Pins `tools` for `key` (replacing any pins, clearing what was
    /// pending).
    pub fn pin(&self, key: &str, tools: &[Tool]) -> Result<(), PinError> {
        let pins = pins_of(tools);
        self.update(key, |r| {
            r.tools = pins;
            r.pending = None;
        })
    }

    /// Makes the pending listing of `key` its pins; what changed (empty:
    /// nothing was pending).
    pub fn accept(&self, key: &str) -> Result<Vec<ToolChange>, PinError> {
        self.update(key, |r| match r.pending.take() {
            Some(p) => {
                let changes = compare(&r.tools, &p);
                r.tools = p;
                changes
            }
            None => Vec::new(),
        })
    }

    /// Compares a listing of `key` with its pins: pins it when there
    /// were none (returns no change), keeps it as pending when it
    /// differs (or clears what was pending when it matches again).
    pub fn check(&self, key: &str, tools: &[Tool]) -> Result<Vec<ToolChange>, PinError> {
        let now = pins_of(tools);
        let _lock = self.lock()?;
        let mut file = self.read()?;
        let changes = match file.servers.iter_mut().find(|r| r.key == key) {
            None => {
                file.servers.push(Record {
                    key: key.to_string(),
                    tools: now,
                    pending: None,
                });
                Vec::new()
            }
            Some(r) => {
                let changes = compare(&r.tools, &now);
                let pending = (!changes.is_empty()).then_some(now);
                if r.pending == pending {
                    return Ok(changes);
                }
                r.pending = pending;
                changes
            }
        };
        file.version = 1;
        self.write(&file)?;
        Ok(changes)
    }
}

/// Called with a listing's changes against the pins.
pub type ChangeFn = dyn Fn(&[ToolChange]) + Send + Sync;

/// [`ConnectOptions::pin_tools`](crate::ConnectOptions::pin_tools): where
/// a connection's tools are pinned, under which key, and what a change
/// does.
#[derive(Clone)]
pub struct ToolPins {
    pub(crate) store: PinStore,
    pub(crate) key: String,
    pub(crate) withhold: bool,
    pub(crate) on_change: Option<Arc<ChangeFn>>,
}

impl std::fmt::Debug for ToolPins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolPins")
            .field("store", &self.store)
            .field("key", &self.key)
            .field("withhold", &self.withhold)
            .finish_non_exhaustive()
    }
}

impl ToolPins {
    /// Pins under `key` (one per server definition: the manager uses the
    /// project, the server's name and its definition's hash) in `store`;
    /// changes are reported, nothing withheld.
    pub fn new(store: PinStore, key: impl Into<String>) -> ToolPins {
        ToolPins {
            store,
            key: key.into(),
            withhold: false,
            on_change: None,
        }
    }

    /// Leaves changed and added tools out of the list and refuses calls
    /// to them ([`Error::ToolWithheld`](crate::Error::ToolWithheld))
    /// until the change is accepted ([`PinStore::accept`]).
    pub fn withhold(mut self, yes: bool) -> ToolPins {
        self.withhold = yes;
        self
    }

    /// Calls `f` with the changes of every listing that differs from the
    /// pins.
    pub fn on_change(mut self, f: impl Fn(&[ToolChange]) + Send + Sync + 'static) -> ToolPins {
        self.on_change = Some(Arc::new(f));
        self
    }

    /// The store.
    pub fn store(&self) -> &PinStore {
        &self.store
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Checks a listing: the tools to return, and the withheld ones with
    /// why. A store that cannot be used withholds nothing and says so in
    /// the log (the listing itself succeeded).
    pub(crate) fn apply(&self, tools: Vec<Tool>) -> (Vec<Tool>, BTreeMap<String, String>) {
        let changes = match self.store.check(&self.key, &tools) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("tool pins not checked: {e}");
                return (tools, BTreeMap::new());
            }
        };
        if changes.is_empty() {
            return (tools, BTreeMap::new());
        }
        if let Some(f) = &self.on_change {
            f(&changes);
        }
        if !self.withhold {
            return (tools, BTreeMap::new());
        }
        let withheld: BTreeMap<String, String> = changes
            .iter()
            .filter(|c| !matches!(c, ToolChange::Removed { .. }))
            .map(|c| (c.name().to_string(), c.summary()))
            .collect();
        let kept = tools
            .into_iter()
            .filter(|t| !withheld.contains_key(&t.name))
            .collect();
        (kept, withheld)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, desc: &str) -> Tool {
        serde_json::from_value(
            json!({"name": name, "description": desc, "inputSchema": {"type": "object"}}),
        )
        .unwrap()
    }

    #[test]
    fn changes_are_found_field_by_field() {
        let before = pins_of(&[tool("a", "x"), tool("b", "y")]);
        let mut c = tool("c", "z");
        c.annotations = None;
        let now = pins_of(&[tool("a", "x IGNORE PREVIOUS"), c]);
        let changes = compare(&before, &now);
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].summary(), "a: description changed");
        assert_eq!(changes[1].summary(), "b: removed");
        assert_eq!(changes[2].summary(), "c: new");
        assert!(changes[0]
            .details()
            .contains("-   description: x\n+   description: x IGNORE PREVIOUS\n"));
        // Other members (`_meta`, icons) are not pinned.
        let mut d = tool("a", "x");
        d.extra.insert("_meta".into(), json!({"v": 2}));
        assert_eq!(PinnedTool::of(&d), PinnedTool::of(&tool("a", "x")));
    }

    #[test]
    fn the_store_pins_first_then_keeps_what_differs_pending() {
        let dir = std::env::temp_dir().join(format!("mcpwire-pins-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = PinStore::at(dir.join("pins.json"));
        assert!(store.check("k", &[tool("a", "x")]).unwrap().is_empty());
        assert!(store.check("k", &[tool("a", "x")]).unwrap().is_empty());
        let changes = store.check("k", &[tool("a", "y")]).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(store.pending("k").unwrap(), changes);
        // Another key is another server.
        assert!(store.check("other", &[tool("a", "y")]).unwrap().is_empty());
        assert_eq!(store.accept("k").unwrap(), changes);
        assert!(store.pending("k").unwrap().is_empty());
        assert!(store.check("k", &[tool("a", "y")]).unwrap().is_empty());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let pins = ToolPins::new(store, "k").withhold(true);
        let (kept, withheld) = pins.apply(vec![tool("a", "z"), tool("n", "new")]);
        assert!(kept.is_empty());
        assert_eq!(withheld["a"], "a: description changed");
        assert_eq!(withheld["n"], "n: new");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
