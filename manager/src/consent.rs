//! Consent before a project's servers run.
//!
//! A server defined by a project's file (`.mcp.json`, `.cursor/mcp.json`,
//! … — [`Scope::Project`]) is a program a cloned repository asks to run:
//! it is not started until the user approved it. Files the user wrote
//! (user scope, explicit files, entries given in code) are trusted.
//!
//! An approval is kept per user in [`paths::approvals_file`] (a 0600 file,
//! written atomically) and keyed by the project directory, the server's
//! name and the SHA-256 of its definition (`command`, `args`, `env`,
//! `cwd`, `url`, `headers`): a changed definition needs approval again.
//!
//! [`ManagerOptions::consent`](crate::ManagerOptions::consent) takes any
//! [`ConsentPolicy`], for hosts with a consent UI of their own; the
//! default is [`Approvals`] read from the user's file when the manager
//! starts.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use mcpwire::config::ServerConfig;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::discovery::{Scope, ServerEntry};
use crate::paths::{self, Env};

/// Decides whether a server may be started.
pub trait ConsentPolicy: Send + Sync + std::fmt::Debug {
    /// Whether `entry` may be started now. Only asked for entries that
    /// need consent ([`needs_consent`]).
    fn allows(&self, entry: &ServerEntry) -> bool;
}

/// Whether `entry` needs the user's consent before it is started: it comes
/// from a project's file.
pub fn needs_consent(entry: &ServerEntry) -> bool {
    entry.scope == Scope::Project
}

/// Every server may start: for a host that asked already, or a checkout
/// the user trusts as a whole.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrustAll;

impl ConsentPolicy for TrustAll {
    fn allows(&self, _entry: &ServerEntry) -> bool {
        true
    }
}

/// The SHA-256 (hex) of what a definition runs or reaches: `command`,
/// `args`, `env`, `cwd`, `url`, `headers` (not `timeout` or `enabled`).
pub fn definition_hash(config: &ServerConfig) -> String {
    #[derive(Serialize)]
    struct Runs<'a> {
        command: &'a Option<String>,
        args: &'a [String],
        env: &'a BTreeMap<String, String>,
        cwd: &'a Option<String>,
        url: &'a Option<String>,
        headers: &'a BTreeMap<String, String>,
    }
    let runs = Runs {
        command: &config.command,
        args: &config.args,
        env: &config.env,
        cwd: &config.cwd,
        url: &config.url,
        headers: &config.headers,
    };
    let text = serde_json::to_vec(&runs).unwrap_or_default();
    let digest = Sha256::digest(&text);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key a server's tool pins are kept under
/// ([`ManagerOptions::tool_pins`](crate::ManagerOptions::tool_pins)), as
/// an approval is keyed: a project's server by the project directory, its
/// name and its definition's hash; a user's by its file, name and hash. A
/// changed definition is pinned anew (a project's is approved anew
/// first). `None` for an invalid entry.
pub fn pin_key(entry: &ServerEntry) -> Option<String> {
    let config = entry.config.as_ref().ok()?;
    let place = match (&entry.project, entry.scope) {
        (Some(p), Scope::Project) => format!("project {}", p.display()),
        _ => format!("{} {}", entry.scope.label(), entry.origin()),
    };
    Some(format!(
        "{place} :: {} :: {}",
        entry.name,
        definition_hash(config)
    ))
}

/// One approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The project directory.
    pub project: PathBuf,
    /// The server's name.
    pub server: String,
    /// [`definition_hash`] of the approved definition.
    pub definition: String,
}

impl Approval {
    /// The approval `entry` needs; `None` for an entry that cannot be
    /// approved (not from a project, or invalid).
    pub fn of(entry: &ServerEntry) -> Option<Approval> {
        let config = entry.config.as_ref().ok()?;
        Some(Approval {
            project: entry.project.clone()?,
            server: entry.name.clone(),
            definition: definition_hash(config),
        })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FileFormat {
    version: u32,
    approved: Vec<Approval>,
}

/// Why the approvals could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ConsentError {
    /// No home or config directory to keep the approvals in.
    #[error("no configuration directory for the approvals (set HOME or XDG_CONFIG_HOME)")]
    NoConfigDir,
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not an approvals file.
    #[error("{path}: not an approvals file: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The entry is not from a project's file, or is invalid.
    #[error("server `{0}` is not a valid entry of a project's file: nothing to approve")]
    NotApprovable(String),
}

/// The user's approvals, as read from their file.
#[derive(Debug, Clone)]
pub struct Approvals {
    path: PathBuf,
    approved: Vec<Approval>,
}

impl Approvals {
    /// The user's file ([`paths::approvals_file`]); a missing file is no
    /// approval.
    pub fn load_user(env: &Env) -> Result<Approvals, ConsentError> {
        let path = paths::approvals_file(env).ok_or(ConsentError::NoConfigDir)?;
        Approvals::load(path)
    }

    /// The approvals in `path`; a missing file is no approval.
    pub fn load(path: impl Into<PathBuf>) -> Result<Approvals, ConsentError> {
        let path = path.into();
        let approved = match std::fs::read(&path) {
            Ok(bytes) => {
                let file: FileFormat =
                    serde_json::from_slice(&bytes).map_err(|e| ConsentError::Corrupt {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                file.approved
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(ConsentError::Io { path, source }),
        };
        Ok(Approvals { path, approved })
    }

    /// No approval at all, kept in `path` once one is given.
    pub fn empty(path: impl Into<PathBuf>) -> Approvals {
        Approvals {
            path: path.into(),
            approved: Vec::new(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `entry` (as defined now) was approved.
    pub fn is_approved(&self, entry: &ServerEntry) -> bool {
        Approval::of(entry).is_some_and(|a| self.approved.contains(&a))
    }

    /// Approves `entry` as defined now (replacing an approval of an older
    /// definition of the same server in the same project) and writes the
    /// file.
    pub fn approve(&mut self, entry: &ServerEntry) -> Result<(), ConsentError> {
        let approval =
            Approval::of(entry).ok_or_else(|| ConsentError::NotApprovable(entry.name.clone()))?;
        self.approved
            .retain(|a| !(a.project == approval.project && a.server == approval.server));
        self.approved.push(approval);
        self.save()
    }

    /// Writes the file: a 0600 temporary file beside it, synced, then
    /// renamed over it, so that a reader sees the old or the new file.
    fn save(&self) -> Result<(), ConsentError> {
        let io = |source| ConsentError::Io {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = FileFormat {
            version: 1,
            approved: self.approved.clone(),
        };
        let mut text = serde_json::to_vec_pretty(&file).unwrap_or_default();
        text.push(b'\n');
        let name = self
            .path
            .file_name()
            .map_or_else(|| "approvals.json".into(), |n| n.to_string_lossy());
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&tmp).and_then(|mut f| {
            f.write_all(&text)?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &self.path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        Ok(())
    }
}

impl ConsentPolicy for Approvals {
    fn allows(&self, entry: &ServerEntry) -> bool {
        self.is_approved(entry)
    }
}
