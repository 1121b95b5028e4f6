//! Finding server definitions: explicit files, then the project's, then
//! the user's. The **first definition of a name wins**; later ones are
//! kept in [`Discovered::shadowed`] so a host can say why its entry is not
//! used.
//!
//! | # | scope    | file                                             | servers under |
//! |---|----------|--------------------------------------------------|---------------|
//! | 1 | explicit | each file given with [`Discovery::file`], in order | `mcpServers` (or `servers`) |
//! | 2 | project  | `<project>/.mcp.json`                            | `mcpServers`  |
//! | 3 | project  | `<project>/mcp.json`                             | `mcpServers`  |
//! | 4 | project  | `<project>/.cursor/mcp.json`                     | `mcpServers`  |
//! | 5 | project  | `<project>/.vscode/mcp.json`                     | `servers`     |
//! | 6 | user     | `~/.cursor/mcp.json`                             | `mcpServers`  |
//! | 7 | user     | Claude Desktop's `claude_desktop_config.json` (see [`crate::paths::claude_desktop_config`]) | `mcpServers` |
//! | 8 | user     | `~/.claude.json`: first `projects["<project>"].mcpServers` (Claude Code's local scope), then the top-level `mcpServers` | |
//! | 9 | user     | Codex: `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`) | `[mcp_servers.NAME]` |
//!
//! `<project>` is the project directory (default: the current directory;
//! parents are not searched). [`Discovery::project_files`]`(false)` skips
//! rows 2–5 — the switch for a checkout you do not trust to start
//! programs. A JSON file may hold its servers under `mcpServers` or
//! `servers` (the first present is used). Missing discovered files are
//! skipped silently; a missing explicit file, an unreadable file or one
//! that does not parse is a [`SourceError`] and the other files are still
//! read. A single bad entry becomes a [`ServerEntry`] whose `config` is the
//! error; the rest of its file is used. `"disabled": true` (Cline, Roo)
//! counts as `"enabled": false`.
//!
//! Codex entries map as: `command`, `args`, `env`, `cwd`, `url`,
//! `enabled` as is; `http_headers` → `headers`; `env_http_headers`
//! `{H = "VAR"}` → header `H: ${VAR}`; `bearer_token_env_var = "VAR"` →
//! `Authorization: Bearer ${VAR}`; `tool_timeout_sec` → `timeout` (ms).
//! The variables are expanded when the manager starts the server.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use mcpwire::config::ServerConfig;
use serde_json::Value;

use crate::paths::{self, Env};

/// Where a definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A file named by the caller.
    Explicit,
    /// A file of the project directory.
    Project,
    /// A file of the user's home or config directory.
    User,
    /// Given in code ([`ServerEntry::new`]).
    Code,
}

impl Scope {
    /// `explicit`, `project`, `user` or `code`.
    pub fn label(self) -> &'static str {
        match self {
            Scope::Explicit => "explicit",
            Scope::Project => "project",
            Scope::User => "user",
            Scope::Code => "code",
        }
    }
}

/// How a source file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON with `mcpServers` (or VS Code's `servers`).
    McpJson,
    /// Claude Code's `~/.claude.json`: this project's local servers, then
    /// the user's.
    ClaudeCode,
    /// Codex's `config.toml`, `[mcp_servers.NAME]`.
    CodexToml,
}

/// One file discovery reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The file.
    pub path: PathBuf,
    /// Its scope.
    pub scope: Scope,
    /// Its format.
    pub format: Format,
    /// Whether its absence is an error (explicit files).
    pub required: bool,
}

/// One server definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEntry {
    /// The name (the key in `mcpServers`).
    pub name: String,
    /// The file it came from (`None` when given in code).
    pub source: Option<PathBuf>,
    /// The kind of source.
    pub scope: Scope,
    /// The project directory, for an entry of a project's file (the key
    /// of its approval, see [`crate::consent`]).
    pub project: Option<PathBuf>,
    /// The entry, unexpanded, or why it could not be read.
    pub config: Result<ServerConfig, String>,
}

impl ServerEntry {
    /// An entry given in code.
    pub fn new(name: impl Into<String>, config: ServerConfig) -> Self {
        ServerEntry {
            name: name.into(),
            source: None,
            scope: Scope::Code,
            project: None,
            config: Ok(config),
        }
    }

    /// Where it came from, for messages: the file, or `code`.
    pub fn origin(&self) -> String {
        self.source
            .as_ref()
            .map_or_else(|| "code".to_string(), |p| p.display().to_string())
    }
}

/// A file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// What discovery found.
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    /// The winning definition of each name, in source order.
    pub servers: Vec<ServerEntry>,
    /// Later definitions of names already defined.
    pub shadowed: Vec<ServerEntry>,
    /// Files that could not be used.
    pub errors: Vec<SourceError>,
    /// The files that were looked at, in order (present or not).
    pub searched: Vec<PathBuf>,
}

impl Discovered {
    /// The winning definition of `name`.
    pub fn get(&self, name: &str) -> Option<&ServerEntry> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// Which files to read (see the module docs for the order).
#[derive(Debug, Clone)]
pub struct Discovery {
    files: Vec<PathBuf>,
    project_dir: Option<PathBuf>,
    project_files: bool,
    user_files: bool,
    env: Env,
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery::new()
    }
}

impl Discovery {
    /// Project files of the current directory and user files, from the
    /// process environment.
    pub fn new() -> Self {
        Discovery {
            files: Vec::new(),
            project_dir: None,
            project_files: true,
            user_files: true,
            env: Env::process(),
        }
    }

    /// Only `files`, nothing discovered.
    pub fn only_files<P: Into<PathBuf>>(files: impl IntoIterator<Item = P>) -> Self {
        Discovery {
            files: files.into_iter().map(Into::into).collect(),
            project_files: false,
            user_files: false,
            ..Discovery::new()
        }
    }

    /// Adds an explicit file (read before anything discovered).
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.push(path.into());
        self
    }

    /// The project directory (default: the current directory).
    pub fn project_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.project_dir = Some(dir.into());
        self
    }

    /// Whether the project's files are read (default yes). `false` is the
    /// switch for untrusted checkouts.
    pub fn project_files(mut self, on: bool) -> Self {
        self.project_files = on;
        self
    }

    /// Whether the user's files are read (default yes).
    pub fn user_files(mut self, on: bool) -> Self {
        self.user_files = on;
        self
    }

    /// The environment used to find the home, config and Codex
    /// directories (default: the process environment).
    pub fn env(mut self, env: Env) -> Self {
        self.env = env;
        self
    }

    /// The project directory, absolute and canonical when it can be (the
    /// key of the approvals of its servers).
    fn project(&self) -> PathBuf {
        let dir = self
            .project_dir
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        std::fs::canonicalize(&dir).unwrap_or(dir)
    }

    /// The files read, in priority order.
    pub fn sources(&self) -> Vec<Source> {
        let mut out: Vec<Source> = self
            .files
            .iter()
            .map(|p| Source {
                path: p.clone(),
                scope: Scope::Explicit,
                format: if p.extension().is_some_and(|e| e == "toml") {
                    Format::CodexToml
                } else {
                    Format::McpJson
                },
                required: true,
            })
            .collect();
        let found = |path: PathBuf, scope, format| Source {
            path,
            scope,
            format,
            required: false,
        };
        if self.project_files {
            let p = self.project();
            for rel in [
                ".mcp.json",
                "mcp.json",
                ".cursor/mcp.json",
                ".vscode/mcp.json",
            ] {
                out.push(found(p.join(rel), Scope::Project, Format::McpJson));
            }
        }
        if self.user_files {
            let home = paths::home_dir(&self.env);
            if let Some(h) = &home {
                out.push(found(
                    h.join(".cursor/mcp.json"),
                    Scope::User,
                    Format::McpJson,
                ));
            }
            if let Some(p) = paths::claude_desktop_config(&self.env) {
                out.push(found(p, Scope::User, Format::McpJson));
            }
            if let Some(h) = &home {
                out.push(found(
                    h.join(".claude.json"),
                    Scope::User,
                    Format::ClaudeCode,
                ));
            }
            if let Some(p) = paths::codex_config(&self.env) {
                out.push(found(p, Scope::User, Format::CodexToml));
            }
        }
        out
    }

    /// Reads every source; never fails as a whole.
    pub fn discover(&self) -> Discovered {
        let mut d = Discovered::default();
        let mut seen: HashSet<String> = HashSet::new();
        let project = self.project();
        for source in self.sources() {
            d.searched.push(source.path.clone());
            let bytes = match std::fs::read(&source.path) {
                Ok(b) => b,
                Err(e) if !source.required && e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    d.errors.push(SourceError {
                        path: source.path.clone(),
                        message: format!("cannot read: {e}"),
                    });
                    continue;
                }
            };
            let entries = match source.format {
                Format::McpJson => parse_mcp_json(&bytes),
                Format::ClaudeCode => parse_claude_code(&bytes, &project),
                Format::CodexToml => parse_codex(&bytes),
            };
            let entries = match entries {
                Ok(e) => e,
                Err(message) => {
                    d.errors.push(SourceError {
                        path: source.path.clone(),
                        message,
                    });
                    continue;
                }
            };
            for (name, config) in entries {
                let entry = ServerEntry {
                    name: name.clone(),
                    source: Some(source.path.clone()),
                    scope: source.scope,
                    project: (source.scope == Scope::Project).then(|| project.clone()),
                    config,
                };
                if seen.insert(name) {
                    d.servers.push(entry);
                } else {
                    d.shadowed.push(entry);
                }
            }
        }
        d
    }
}

type Entries = Vec<(String, Result<ServerConfig, String>)>;

fn parse_json(bytes: &[u8]) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

/// `mcpServers` (else `servers`) of a JSON object; absent is no servers.
fn servers_of(obj: &serde_json::Map<String, Value>) -> Result<Entries, String> {
    let (key, servers) = match (obj.get("mcpServers"), obj.get("servers")) {
        (Some(s), _) => ("mcpServers", s),
        (None, Some(s)) => ("servers", s),
        (None, None) => return Ok(Vec::new()),
    };
    let Value::Object(map) = servers else {
        return Err(format!("`{key}` is not an object"));
    };
    Ok(map
        .iter()
        .map(|(name, v)| (name.clone(), entry_from_json(v)))
        .collect())
}

fn entry_from_json(v: &Value) -> Result<ServerConfig, String> {
    if !v.is_object() {
        return Err("invalid entry: not an object".into());
    }
    let mut config: ServerConfig =
        serde_json::from_value(v.clone()).map_err(|e| format!("invalid entry: {e}"))?;
    if config.enabled.is_none() && v.get("disabled") == Some(&Value::Bool(true)) {
        config.enabled = Some(false);
    }
    Ok(config)
}

fn parse_mcp_json(bytes: &[u8]) -> Result<Entries, String> {
    servers_of(&parse_json(bytes)?)
}

fn parse_claude_code(bytes: &[u8], project: &Path) -> Result<Entries, String> {
    let obj = parse_json(bytes)?;
    let mut out = Vec::new();
    if let Some(Value::Object(projects)) = obj.get("projects") {
        let mut keys = vec![project.to_string_lossy().into_owned()];
        if let Ok(c) = project.canonicalize() {
            keys.push(c.to_string_lossy().into_owned());
        }
        if let Some(Value::Object(p)) = keys.iter().find_map(|k| projects.get(k)) {
            if let Some(servers) = p.get("mcpServers") {
                let mut local = serde_json::Map::new();
                local.insert("mcpServers".into(), servers.clone());
                out.extend(servers_of(&local)?);
            }
        }
    }
    let mut user = serde_json::Map::new();
    if let Some(s) = obj.get("mcpServers") {
        user.insert("mcpServers".into(), s.clone());
    }
    out.extend(servers_of(&user)?);
    Ok(out)
}

fn parse_codex(bytes: &[u8]) -> Result<Entries, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let table: toml::Table = toml::from_str(text).map_err(|e| format!("not valid TOML: {e}"))?;
    let Some(servers) = table.get("mcp_servers") else {
        return Ok(Vec::new());
    };
    let toml::Value::Table(servers) = servers else {
        return Err("`mcp_servers` is not a table".into());
    };
    Ok(servers
        .iter()
        .map(|(name, v)| (name.clone(), codex_entry(v)))
        .collect())
}

fn codex_entry(v: &toml::Value) -> Result<ServerConfig, String> {
    let toml::Value::Table(t) = v else {
        return Err("invalid entry: not a table".into());
    };
    let bad = |key: &str, what: &str| format!("invalid entry: `{key}` must be {what}");
    let string = |key: &str| -> Result<Option<String>, String> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(key, "a string")),
        }
    };
    let strings = |key: &str| -> Result<BTreeMap<String, String>, String> {
        match t.get(key) {
            None => Ok(BTreeMap::new()),
            Some(toml::Value::Table(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    toml::Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(bad(&format!("{key}.{k}"), "a string")),
                })
                .collect(),
            Some(_) => Err(bad(key, "a table of strings")),
        }
    };
    let mut c = ServerConfig {
        kind: string("type")?,
        command: string("command")?,
        cwd: string("cwd")?,
        url: string("url")?,
        env: strings("env")?,
        headers: strings("http_headers")?,
        ..ServerConfig::default()
    };
    match t.get("args") {
        None => {}
        Some(toml::Value::Array(a)) => {
            for item in a {
                match item {
                    toml::Value::String(s) => c.args.push(s.clone()),
                    _ => return Err(bad("args", "an array of strings")),
                }
            }
        }
        Some(_) => return Err(bad("args", "an array of strings")),
    }
    for (header, var) in strings("env_http_headers")? {
        c.headers.insert(header, format!("${{{var}}}"));
    }
    if let Some(var) = string("bearer_token_env_var")? {
        c.headers
            .insert("Authorization".into(), format!("Bearer ${{{var}}}"));
    }
    match t.get("enabled") {
        None => {}
        Some(toml::Value::Boolean(b)) => c.enabled = Some(*b),
        Some(_) => return Err(bad("enabled", "true or false")),
    }
    match t.get("tool_timeout_sec") {
        None => {}
        Some(toml::Value::Integer(s)) if *s >= 0 => c.timeout = Some(*s as u64 * 1000),
        Some(toml::Value::Float(s)) if *s >= 0.0 => c.timeout = Some((*s * 1000.0) as u64),
        Some(_) => return Err(bad("tool_timeout_sec", "a number of seconds")),
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_mapping() {
        let entries = parse_codex(
            br#"
model = "o3"
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server"]
env = { "API_KEY" = "k" }
tool_timeout_sec = 2.5

[mcp_servers.remote]
url = "https://h/mcp"
bearer_token_env_var = "TOKEN"
http_headers = { "X-A" = "a" }
env_http_headers = { "X-B" = "B_VAR" }
enabled = false

[mcp_servers.bad]
command = 5
"#,
        )
        .unwrap();
        let get = |n: &str| entries.iter().find(|e| e.0 == n).unwrap().1.clone();
        let docs = get("docs").unwrap();
        assert_eq!(docs.command.as_deref(), Some("npx"));
        assert_eq!(docs.args, ["-y", "docs-server"]);
        assert_eq!(docs.env["API_KEY"], "k");
        assert_eq!(docs.timeout, Some(2500));
        let remote = get("remote").unwrap();
        assert_eq!(remote.url.as_deref(), Some("https://h/mcp"));
        assert_eq!(remote.headers["Authorization"], "Bearer ${TOKEN}");
        assert_eq!(remote.headers["X-A"], "a");
        assert_eq!(remote.headers["X-B"], "${B_VAR}");
        assert_eq!(remote.enabled, Some(false));
        assert!(get("bad")
            .unwrap_err()
            .contains("`command` must be a string"));
        assert!(parse_codex(b"model = \"x\"").unwrap().is_empty());
        assert!(parse_codex(b"[mcp_servers").unwrap_err().contains("TOML"));
    }
}
