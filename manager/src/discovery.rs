//! Finding server definitions: explicit files, then the project's, then
//! the user's. The **first definition of a name wins**; later ones are
//! kept in [`Discovered::shadowed`] so a host can say why its entry is not
//! used, and [`Discovered::files`] says what each file contributed.
//!
//! | #  | scope    | file                                             | servers under |
//! |----|----------|--------------------------------------------------|---------------|
//! | 1  | explicit | each file given with [`Discovery::file`], in order (`.toml`: Codex) | `mcpServers` (or `servers`) |
//! | 2  | project  | `<project>/.mcp.json` (Claude Code, Copilot CLI)  | `mcpServers`  |
//! | 3  | project  | `<project>/mcp.json`                             | `mcpServers`  |
//! | 4  | project  | `<project>/.cursor/mcp.json` (Cursor)            | `mcpServers`  |
//! | 5  | project  | `<project>/.vscode/mcp.json` (VS Code)           | `servers`, VS Code's variables and `inputs` |
//! | 6  | project  | `<project>/.gemini/settings.json` (Gemini CLI)   | `mcpServers`, Gemini's fields |
//! | 7  | project  | `<project>/.codex/config.toml` (Codex)           | `[mcp_servers.NAME]` |
//! | 8  | project  | `<project>/.github/mcp.json` (Copilot CLI)       | `mcpServers`, Copilot's fields |
//! | 9  | project  | `<project>/.zed/settings.json` (Zed)             | `context_servers` |
//! | 10 | project  | Copilot CLI, each directory above `<project>` up to the Git root, nearest first: `.mcp.json`, then `.github/mcp.json` | `mcpServers`, Copilot's fields |
//! | 11 | user     | `~/.cursor/mcp.json` (Cursor)                    | `mcpServers`  |
//! | 12 | user     | Claude Desktop's `claude_desktop_config.json` (see [`paths::claude_desktop_config`]) | `mcpServers` |
//! | 13 | user     | `~/.claude.json`: first `projects["<project>"].mcpServers` (Claude Code's local scope), then the top-level `mcpServers` | |
//! | 14 | user     | Codex: `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`) | `[mcp_servers.NAME]` |
//! | 15 | user     | GitHub Copilot CLI: `$COPILOT_HOME/mcp-config.json` (default `~/.copilot/mcp-config.json`) | `mcpServers`, Copilot's fields |
//! | 16 | user     | Windsurf: `~/.codeium/windsurf/mcp_config.json`   | `mcpServers`, Windsurf's fields |
//! | 17 | user     | Gemini CLI: `~/.gemini/settings.json`             | `mcpServers`, Gemini's fields |
//! | 18 | user     | Zed: `settings.json` (see [`paths::zed_settings`]) | `context_servers` |
//! | 19 | user     | VS Code's user-profile `mcp.json` (see [`paths::vscode_user_mcp`]) | `servers`, VS Code's variables and `inputs` |
//! | 20 | user     | VS Code Insiders' (see [`paths::vscode_insiders_user_mcp`]) | as VS Code |
//! | 21 | user     | VSCodium's (see [`paths::vscodium_user_mcp`])     | as VS Code |
//! | 22 | user     | Goose: `config.yaml` (see [`paths::goose_config`]) | `extensions`  |
//!
//! `<project>` is the project directory (default: the current directory).
//! Its parents are searched for GitHub Copilot CLI's files only (row 10),
//! as Copilot does: up to the root of the Git repository (the nearest
//! directory with a `.git` directory or file), nothing above it, and no
//! parent at all outside a repository; a file nearer the project wins.
//! [`Discovery::project_files`]`(false)` skips rows 2–10 — the switch for
//! a checkout you do not trust to start programs; when read, their servers
//! are [`Scope::Project`] and need the user's approval
//! ([`crate::consent`]), kept for the project directory (a parent's server
//! approved in one subdirectory is asked for again in another). Every JSON file may have
//! comments and trailing commas (JSONC, as VS Code, Zed and Cursor
//! write). A plain JSON file may hold its servers under `mcpServers` or
//! `servers` (the first present is used). Missing discovered files are
//! skipped silently; a missing explicit file, an unreadable file or one
//! that does not parse is a [`SourceError`] and the other files are still
//! read. A single bad entry becomes a [`ServerEntry`] whose `config` is the
//! error, naming the field; the rest of its file is used.
//!
//! How each host's fields map (anything not listed is ignored):
//!
//! | host | fields |
//! |------|--------|
//! | Claude, Cursor, VS Code | `type`, `command`, `args`, `env`, `cwd`, `url`, `headers`, `timeout` (ms), `enabled`; `"disabled": true` (Cline, Roo, Windsurf) counts as `"enabled": false` |
//! | VS Code (and Insiders, VSCodium) | as above, plus `${workspaceFolder}`, `${userHome}`, `${env:NAME}`, `${config:NAME}`, `${input:ID}` (`inputs` of type `promptString` and `pickString`) and `envFile`; other variables are errors naming the field: see [`vscode`] |
//! | Windsurf | as above; `serverUrl` → `url`; `disabledTools` → [`ToolFilter::exclude`] |
//! | Copilot CLI | as above; `type: "local"` → `stdio`; `tools` → [`ToolFilter::include`] (`["*"]`: all). Its project files are `.mcp.json` and `.github/mcp.json`, in the project directory (rows 2 and 8; row 2 is read as the shared format) and in each directory above it up to the Git root (row 10); a project's `.copilot/mcp-config.json` is not one of them (Copilot reads none); there is no environment variable naming another file (`--additional-mcp-config` is a flag of its own command line) |
//! | Gemini CLI | as above; `httpUrl` → `url` with type `http`; `url` alone → type `sse` (unless `type` says); `includeTools` / `excludeTools` → [`ToolFilter`]; `$NAME` → `${NAME}`. The file's server-name lists `mcp.allowed` / `mcp.excluded` (or v1's `allowMCPServers` / `excludeMCPServers`) apply to its own servers: one not allowed, or excluded, is disabled with a note. `trust` (skip Gemini's confirmation of tool calls) is ignored: mcpwire asks no such confirmation, a host does |
//! | Zed (user and project `.zed/settings.json`) | `command` a string with `args`, `env` (Zed ≥ 0.193) or `{path, args, env}` (older); or `url`, `headers`; `enabled`. `"source": "extension"` entries (and entries with neither `command` nor `url`) run an extension's command: skipped with a note |
//! | Codex | `command`, `args`, `env`, `cwd`, `url`, `enabled` as is; `http_headers` → `headers`; `env_http_headers` `{H = "VAR"}` → header `H: ${VAR}`; `bearer_token_env_var = "VAR"` → `Authorization: Bearer ${VAR}`; `tool_timeout_sec` → `timeout` (ms); `startup_timeout_sec` (or `_ms`) → [`ServerEntry::startup_timeout`]; `enabled_tools` / `disabled_tools` → [`ToolFilter`]; `env_vars` is checked and needs no mapping (a server inherits the manager's environment) |
//! | Goose | `cmd` → `command`, `args`, `envs` → `env`, `uri` → `url` (`type` `sse`, or `streamable_http` → `http`), `headers`, `enabled`, `timeout` (s → ms), non-empty `available_tools` → [`ToolFilter::include`]; `env_keys` from the environment, else Goose's `secrets.yaml` (its keyring is not read; a key in neither fails the server); YAML anchors and aliases, and merge keys (`<<: *anchor`, `<<: [*a, *b]`: YAML 1.1, which Goose itself does not apply); `builtin`, `platform`, `frontend` and `inline_python` extensions run inside Goose: skipped with a note. See [`goose`] |
//!
//! The variables are expanded when the manager starts the server.

pub mod goose;
mod hosts;
mod jsonc;
pub mod vscode;

pub use vscode::{resolve_inputs, Input, PickOption};

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpwire::config::ServerConfig;
use serde_json::Value;

use crate::paths::{self, Env};
use hosts::{Dialect, FileServers};

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
    /// VS Code's `mcp.json`: `servers`, `inputs`, its variables, `envFile`.
    VsCode,
    /// GitHub Copilot CLI's `mcp-config.json`.
    Copilot,
    /// Windsurf's `mcp_config.json`.
    Windsurf,
    /// Gemini CLI's `settings.json`.
    Gemini,
    /// Zed's `settings.json`, `context_servers`.
    Zed,
    /// Goose's `config.yaml`, `extensions`.
    Goose,
}

impl Format {
    /// A short name of the host or format, for listings.
    pub fn label(self) -> &'static str {
        match self {
            Format::McpJson => "mcp.json",
            Format::ClaudeCode => "claude-code",
            Format::CodexToml => "codex",
            Format::VsCode => "vscode",
            Format::Copilot => "copilot-cli",
            Format::Windsurf => "windsurf",
            Format::Gemini => "gemini-cli",
            Format::Zed => "zed",
            Format::Goose => "goose",
        }
    }
}

/// Which of a server's tools a host's entry lets the agent see and call
/// (Gemini's `includeTools` / `excludeTools`, Codex's `enabled_tools` /
/// `disabled_tools`, Copilot's `tools`, Windsurf's `disabledTools`). The
/// manager leaves other tools out of [`crate::Manager::tools`], so calls
/// to them are refused as unknown tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Only these tools (`None`: every tool).
    pub include: Option<Vec<String>>,
    /// Never these tools (wins over `include`).
    pub exclude: Vec<String>,
}

impl ToolFilter {
    /// Whether the tool named `tool` (the server's name for it) is exposed.
    pub fn allows(&self, tool: &str) -> bool {
        self.include
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == tool))
            && !self.exclude.iter().any(|t| t == tool)
    }

    /// Whether every tool is exposed.
    pub fn is_all(&self) -> bool {
        self.include.is_none() && self.exclude.is_empty()
    }
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
    /// The tools of the server the host's entry exposes (default all).
    pub tools: ToolFilter,
    /// How long each connection attempt (start and handshake) may take,
    /// when the host's entry says (Codex's `startup_timeout_sec`); default
    /// the manager's connect timeout.
    pub startup_timeout: Option<Duration>,
    /// The values the entry asks the user for (VS Code's `${input:ID}`),
    /// supplied by the host when the server starts
    /// ([`crate::ManagerOptions::inputs`]).
    pub inputs: Vec<Input>,
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
            tools: ToolFilter::default(),
            startup_timeout: None,
            inputs: Vec::new(),
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

/// What one file contributed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    /// The file, its scope and format.
    pub source: Source,
    /// Whether it was there.
    pub present: bool,
    /// Names it defined first (their entries are in
    /// [`Discovered::servers`], a bad entry's `config` says why).
    pub servers: Vec<String>,
    /// Names it defined that an earlier file had defined.
    pub shadowed: Vec<String>,
    /// Why it could not be used, if so.
    pub error: Option<String>,
    /// Entries it skipped on purpose, and why.
    pub notes: Vec<String>,
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
    /// Every file looked at and what it contributed, in order.
    pub files: Vec<SourceReport>,
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
            for (rel, format) in [
                (".mcp.json", Format::McpJson),
                ("mcp.json", Format::McpJson),
                (".cursor/mcp.json", Format::McpJson),
                (".vscode/mcp.json", Format::VsCode),
                (".gemini/settings.json", Format::Gemini),
                (".codex/config.toml", Format::CodexToml),
                (".github/mcp.json", Format::Copilot),
                (".zed/settings.json", Format::Zed),
            ] {
                out.push(found(p.join(rel), Scope::Project, format));
            }
            // GitHub Copilot CLI reads `.mcp.json` and `.github/mcp.json`
            // "from the working directory upward to the Git root" (Copilot
            // CLI command reference, "MCP server loading priority"; files
            // nearer the working directory win: "Adding per-repository MCP
            // servers" in its how-to). The project's own are the rows
            // above; each parent's follow, nearest first. Other hosts read
            // the project directory only.
            for dir in parents_to_git_root(&p) {
                for rel in [".mcp.json", ".github/mcp.json"] {
                    out.push(found(dir.join(rel), Scope::Project, Format::Copilot));
                }
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
            let hosts = [
                (paths::codex_config(&self.env), Format::CodexToml),
                (paths::copilot_config(&self.env), Format::Copilot),
                (paths::windsurf_config(&self.env), Format::Windsurf),
                (paths::gemini_settings(&self.env), Format::Gemini),
                (paths::zed_settings(&self.env), Format::Zed),
                (paths::vscode_user_mcp(&self.env), Format::VsCode),
                (paths::vscode_insiders_user_mcp(&self.env), Format::VsCode),
                (paths::vscodium_user_mcp(&self.env), Format::VsCode),
                (paths::goose_config(&self.env), Format::Goose),
            ];
            for (path, format) in hosts {
                if let Some(p) = path {
                    out.push(found(p, Scope::User, format));
                }
            }
        }
        out
    }

    /// Reads every source; never fails as a whole.
    pub fn discover(&self) -> Discovered {
        let mut d = Discovered::default();
        let mut seen: HashSet<String> = HashSet::new();
        let project = self.project();
        let home = paths::home_dir(&self.env);
        for source in self.sources() {
            d.searched.push(source.path.clone());
            let mut report = SourceReport {
                source: source.clone(),
                present: false,
                servers: Vec::new(),
                shadowed: Vec::new(),
                error: None,
                notes: Vec::new(),
            };
            let read = match std::fs::read(&source.path) {
                Ok(bytes) => {
                    report.present = true;
                    let ctx = FileCtx {
                        source: &source,
                        project: &project,
                        home: home.as_deref(),
                        env: &self.env,
                    };
                    parse(&ctx, &bytes)
                }
                Err(e) if !source.required && e.kind() == std::io::ErrorKind::NotFound => {
                    d.files.push(report);
                    continue;
                }
                Err(e) => Err(format!("cannot read: {e}")),
            };
            let found = match read {
                Ok(f) => f,
                Err(message) => {
                    report.error = Some(message.clone());
                    d.errors.push(SourceError {
                        path: source.path.clone(),
                        message,
                    });
                    d.files.push(report);
                    continue;
                }
            };
            report.notes = found.notes;
            for (name, parsed) in found.entries {
                let (config, tools, startup_timeout, inputs) = match parsed {
                    Ok(p) => (Ok(p.config), p.tools, p.startup_timeout, p.inputs),
                    Err(e) => (Err(e), ToolFilter::default(), None, Vec::new()),
                };
                let entry = ServerEntry {
                    name: name.clone(),
                    source: Some(source.path.clone()),
                    scope: source.scope,
                    project: (source.scope == Scope::Project).then(|| project.clone()),
                    config,
                    tools,
                    startup_timeout,
                    inputs,
                };
                if seen.insert(name.clone()) {
                    report.servers.push(name);
                    d.servers.push(entry);
                } else {
                    report.shadowed.push(name);
                    d.shadowed.push(entry);
                }
            }
            d.files.push(report);
        }
        d
    }
}

/// The directories above `dir` up to the root of its Git repository (the
/// first directory, `dir` included, holding a `.git` directory or file: a
/// worktree's or a submodule's root counts), nearest first. Empty when
/// `dir` is the root itself or is in no repository: outside a repository
/// nothing above the project directory is read.
fn parents_to_git_root(dir: &Path) -> Vec<PathBuf> {
    let mut parents = Vec::new();
    let mut here = dir;
    while !here.join(".git").exists() {
        let Some(up) = here.parent() else {
            return Vec::new();
        };
        parents.push(up.to_path_buf());
        here = up;
    }
    parents
}

/// What reading one file needs besides its bytes.
struct FileCtx<'a> {
    source: &'a Source,
    project: &'a Path,
    home: Option<&'a Path>,
    env: &'a Env,
}

/// Reads one file's servers.
fn parse(ctx: &FileCtx<'_>, bytes: &[u8]) -> Result<FileServers, String> {
    let (key, dialect) = match ctx.source.format {
        Format::VsCode => {
            // `${config:NAME}`: VS Code reads the merged configuration of
            // the workspace folder (`configurationService.getValue(name,
            // {resource: folder})` in its configuration resolver): the
            // workspace's `.vscode/settings.json` over the user's. So: the
            // settings next to this `mcp.json` (the workspace's, or a
            // profile's own), then, for a workspace's file, the user
            // settings of each build that may open it — VS Code, Insiders,
            // VSCodium, in the order their profiles are read — the first
            // that has the setting wins.
            let mut settings = vec![ctx.source.path.with_file_name("settings.json")];
            if ctx.source.scope == Scope::Project {
                for user in [
                    paths::vscode_user_mcp(ctx.env),
                    paths::vscode_insiders_user_mcp(ctx.env),
                    paths::vscodium_user_mcp(ctx.env),
                ]
                .into_iter()
                .flatten()
                {
                    settings.push(user.with_file_name("settings.json"));
                }
            }
            let vs = vscode::Context {
                workspace: ctx.project,
                home: ctx.home,
                settings,
            };
            return vscode::servers(&json_object(bytes)?, &vs);
        }
        Format::CodexToml => return hosts::codex(bytes),
        Format::Goose => {
            let secrets = ctx.source.path.with_file_name("secrets.yaml");
            return goose::servers(bytes, ctx.env, &secrets);
        }
        Format::ClaudeCode => return claude_code(&json_object(bytes)?, ctx.project),
        Format::McpJson => {
            let obj = json_object(bytes)?;
            let key = if obj.contains_key("mcpServers") || !obj.contains_key("servers") {
                "mcpServers"
            } else {
                "servers"
            };
            return hosts::json_servers(&obj, key, Dialect::Standard);
        }
        Format::Gemini => {
            let obj = json_object(bytes)?;
            let mut found = hosts::json_servers(&obj, "mcpServers", Dialect::Gemini)?;
            hosts::gemini_server_lists(&obj, &mut found)?;
            return Ok(found);
        }
        Format::Copilot => ("mcpServers", Dialect::Copilot),
        Format::Windsurf => ("mcpServers", Dialect::Windsurf),
        Format::Zed => ("context_servers", Dialect::Zed),
    };
    hosts::json_servers(&json_object(bytes)?, key, dialect)
}

/// A JSON (or JSONC) file's top-level object.
pub(crate) fn json_object(bytes: &[u8]) -> Result<serde_json::Map<String, Value>, String> {
    let text = jsonc::strip(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    match serde_json::from_slice::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

/// Claude Code's `~/.claude.json`: this project's local servers, then the
/// user's.
fn claude_code(
    obj: &serde_json::Map<String, Value>,
    project: &Path,
) -> Result<FileServers, String> {
    let mut out = FileServers::default();
    if let Some(Value::Object(projects)) = obj.get("projects") {
        let mut keys = vec![project.to_string_lossy().into_owned()];
        if let Ok(c) = project.canonicalize() {
            keys.push(c.to_string_lossy().into_owned());
        }
        if let Some(Value::Object(p)) = keys.iter().find_map(|k| projects.get(k)) {
            let local = hosts::json_servers(p, "mcpServers", Dialect::Standard)?;
            out.entries.extend(local.entries);
        }
    }
    let user = hosts::json_servers(obj, "mcpServers", Dialect::Standard)?;
    out.entries.extend(user.entries);
    Ok(out)
}
