//! Writing server definitions into the hosts' own config files: add,
//! remove, enable and disable, each as the host itself writes it.
//!
//! An edit is planned first ([`FileEdit`]: the file's text before and
//! after, [`FileEdit::diff`] for `--dry-run`) and written only by
//! [`FileEdit::apply`]: atomically (a temporary file in the same folder,
//! synced, renamed over it), keeping the file's mode, through a symlink
//! to the file it points at, and only if the file is still as it was
//! read. Every other byte of the file stays as it was: JSON and JSONC
//! files are edited as text (`hostedit::json`), Codex's TOML with `toml_edit`,
//! Goose's YAML as lines (`hostedit::yaml`). A file that does not parse is
//! refused. Each planned text is parsed again and compared with the
//! intended value before it is offered, so an edit never writes what it
//! did not mean to. Removing what was added gives the file back byte for
//! byte; a file that an add created, and that holds nothing but what
//! that add wrote around the entry once it is removed, is deleted.
//!
//! | host | files (user / project) | servers under | stdio entry | remote entry | on/off switch |
//! |---|---|---|---|---|---|
//! | `claude-code` | `~/.claude.json` / `.mcp.json`; `--scope local`: `~/.claude.json` `projects[<dir>]` | `mcpServers` | `type: "stdio"`, `command`, `args`, `env` | `type: "http"` or `"sse"`, `url`, `headers` | none in the file (Claude Code's `/mcp` keeps it): refused |
//! | `claude-desktop` | `claude_desktop_config.json` | `mcpServers` | `command`, `args`, `env` | refused: Claude Desktop's file takes local servers only | none: refused |
//! | `cursor` | `~/.cursor/mcp.json` / `.cursor/mcp.json` | `mcpServers` | `command`, `args`, `env` | `url`, `headers` | none in the file (Cursor's settings keep it): refused |
//! | `vscode` | the profile's `mcp.json` / `.vscode/mcp.json` (a new file gets `"inputs": []`, tabs) | `servers` | `type: "stdio"`, `command`, `args`, `env` (`${VAR}` written `${env:VAR}`) | `type: "http"` or `"sse"`, `url`, `headers` | none in the file: refused |
//! | `windsurf` | `~/.codeium/windsurf/mcp_config.json` | `mcpServers` | `command`, `args`, `env` | `serverUrl`, `headers` | `"disabled": true` |
//! | `zed` | Zed's `settings.json` / `.zed/settings.json` | `context_servers` | `source: "custom"`, `command`, `args`, `env` | `url`, `headers` (no SSE) | `"enabled": false` |
//! | `gemini` | `~/.gemini/settings.json` / `.gemini/settings.json` | `mcpServers` | `command`, `args`, `env` | `httpUrl` (SSE: `url`), `headers` | none per entry: refused |
//! | `codex` | `$CODEX_HOME/config.toml` / `.codex/config.toml` | `[mcp_servers.NAME]` | `command`, `args`, `env = {…}` | `url`, `bearer_token_env_var` (`Authorization: Bearer ${VAR}`), `env_http_headers` (`${VAR}`), `http_headers` (no SSE) | `enabled = false` |
//! | `goose` | Goose's `config.yaml` | `extensions` | `type: stdio`, `cmd`, `args`, `envs` (`${KEY}` as `env_keys`), `name`, `enabled`, `timeout: 300`, … (keys sorted, as Goose writes them) | `type: streamable_http` or `sse`, `uri`, `headers` | `enabled: false` |
//! | `copilot` | `$COPILOT_HOME/mcp-config.json` / `.github/mcp.json` | `mcpServers` | `type: "local"`, `command`, `args`, `env`, `tools: ["*"]` | `type: "http"` or `"sse"`, `url`, `headers`, `tools: ["*"]` | none: refused |

pub(crate) mod json;
mod node;
mod toml;
pub(crate) mod yaml;

use std::path::{Path, PathBuf};

use mcpwire::config::{ServerConfig, TransportKind};
use serde_json::{Map, Value};

use crate::discovery::{self, Format, Source};
use crate::paths::{self, Env};
use node::Node;

/// A host whose config files mcpwire writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Host {
    /// Claude Code (`~/.claude.json`, `.mcp.json`).
    ClaudeCode,
    /// Claude Desktop (`claude_desktop_config.json`).
    ClaudeDesktop,
    /// Cursor (`~/.cursor/mcp.json`, `.cursor/mcp.json`).
    Cursor,
    /// VS Code (the profile's `mcp.json`, `.vscode/mcp.json`).
    VsCode,
    /// Windsurf (`~/.codeium/windsurf/mcp_config.json`).
    Windsurf,
    /// Zed (`settings.json`, `.zed/settings.json`).
    Zed,
    /// Gemini CLI (`~/.gemini/settings.json`, `.gemini/settings.json`).
    Gemini,
    /// Codex (`config.toml`).
    Codex,
    /// Goose (`config.yaml`).
    Goose,
    /// GitHub Copilot CLI (`mcp-config.json`, `.github/mcp.json`).
    Copilot,
}

/// Which of a host's files an edit goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileScope {
    /// The user's file (the default).
    User,
    /// The project's file (in the project directory).
    Project,
    /// Claude Code's servers of one project kept in `~/.claude.json`
    /// (`claude mcp add --scope local`).
    Local,
}

impl FileScope {
    /// `user`, `project` or `local`.
    pub fn parse(s: &str) -> Option<FileScope> {
        match s {
            "user" => Some(FileScope::User),
            "project" => Some(FileScope::Project),
            "local" => Some(FileScope::Local),
            _ => None,
        }
    }

    /// `user`, `project` or `local`.
    pub fn label(self) -> &'static str {
        match self {
            FileScope::User => "user",
            FileScope::Project => "project",
            FileScope::Local => "local",
        }
    }
}

/// Why an edit cannot be planned or made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file does not parse: it is not touched.
    #[error("{path}: {message}: not edited")]
    Unparsable {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The file parses, but its shape is not one an edit can keep as it
    /// is (a flow-style YAML mapping, servers under something that is not
    /// an object, …).
    #[error("{path}: {message}: not edited (edit it by hand)")]
    NotEditable {
        /// The file.
        path: PathBuf,
        /// What is in the way.
        message: String,
    },
    /// The file already defines the name.
    #[error("{path} already defines server `{name}`")]
    Exists {
        /// The server.
        name: String,
        /// The file.
        path: PathBuf,
    },
    /// The file does not define the name.
    #[error("{path} does not define server `{name}`")]
    Missing {
        /// The server.
        name: String,
        /// The file.
        path: PathBuf,
    },
    /// The host cannot do this (a remote server in Claude Desktop's file,
    /// an on/off switch a host does not have, a scope it does not have).
    #[error("{host}: {what}")]
    Unsupported {
        /// The host.
        host: &'static str,
        /// What it cannot do.
        what: String,
    },
    /// The definition is not valid.
    #[error("invalid definition: {0}")]
    Invalid(String),
    /// No home directory to find the host's file in.
    #[error("{0}: no home directory (set HOME)")]
    NoHome(&'static str),
    /// The file changed between reading and writing: nothing written.
    #[error("{0} changed while it was being edited: nothing written, try again")]
    Changed(PathBuf),
    /// The planned text did not read back as intended: nothing written.
    /// (A bug: please report it with the file.)
    #[error("{path}: the edited text does not read back as intended ({message}): nothing written")]
    Verify {
        /// The file.
        path: PathBuf,
        /// What differed.
        message: String,
    },
}

/// How a file holds its servers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Container {
    /// A JSON object at this path of keys.
    Json(Vec<String>),
    /// Codex's `[mcp_servers]`.
    Codex,
    /// Goose's `extensions`.
    Goose,
}

impl Host {
    /// Every host, in the order `mcpwire --help` lists them.
    pub const ALL: [Host; 10] = [
        Host::ClaudeCode,
        Host::ClaudeDesktop,
        Host::Cursor,
        Host::VsCode,
        Host::Windsurf,
        Host::Zed,
        Host::Gemini,
        Host::Codex,
        Host::Goose,
        Host::Copilot,
    ];

    /// A host by its name (`claude-code`, `claude-desktop`, `cursor`,
    /// `vscode`, `windsurf`, `zed`, `gemini`, `codex`, `goose`, `copilot`).
    pub fn parse(name: &str) -> Option<Host> {
        Host::ALL.into_iter().find(|h| h.name() == name)
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::ClaudeDesktop => "claude-desktop",
            Host::Cursor => "cursor",
            Host::VsCode => "vscode",
            Host::Windsurf => "windsurf",
            Host::Zed => "zed",
            Host::Gemini => "gemini",
            Host::Codex => "codex",
            Host::Goose => "goose",
            Host::Copilot => "copilot",
        }
    }

    /// The host's file for `scope` (`project`: the project directory's).
    pub fn file(self, scope: FileScope, env: &Env, project: &Path) -> Result<PathBuf, EditError> {
        let home = || paths::home_dir(env).ok_or(EditError::NoHome(self.name()));
        let none = |what: &str| EditError::Unsupported {
            host: self.name(),
            what: format!("has no {what} file"),
        };
        let user = |p: Option<PathBuf>| p.ok_or(EditError::NoHome(self.name()));
        match (self, scope) {
            (Host::ClaudeCode, FileScope::User | FileScope::Local) => {
                Ok(home()?.join(".claude.json"))
            }
            (_, FileScope::Local) => Err(EditError::Unsupported {
                host: self.name(),
                what: "`--scope local` is Claude Code's (its servers of one project in \
                       ~/.claude.json)"
                    .into(),
            }),
            (Host::ClaudeCode, FileScope::Project) => Ok(project.join(".mcp.json")),
            (Host::ClaudeDesktop, FileScope::User) => user(paths::claude_desktop_config(env)),
            (Host::Cursor, FileScope::User) => Ok(home()?.join(".cursor/mcp.json")),
            (Host::Cursor, FileScope::Project) => Ok(project.join(".cursor/mcp.json")),
            (Host::VsCode, FileScope::User) => user(paths::vscode_user_mcp(env)),
            (Host::VsCode, FileScope::Project) => Ok(project.join(".vscode/mcp.json")),
            (Host::Windsurf, FileScope::User) => user(paths::windsurf_config(env)),
            (Host::Zed, FileScope::User) => user(paths::zed_settings(env)),
            (Host::Zed, FileScope::Project) => Ok(project.join(".zed/settings.json")),
            (Host::Gemini, FileScope::User) => user(paths::gemini_settings(env)),
            (Host::Gemini, FileScope::Project) => Ok(project.join(".gemini/settings.json")),
            (Host::Codex, FileScope::User) => user(paths::codex_config(env)),
            (Host::Codex, FileScope::Project) => Ok(project.join(".codex/config.toml")),
            (Host::Goose, FileScope::User) => user(paths::goose_config(env)),
            (Host::Copilot, FileScope::User) => user(paths::copilot_config(env)),
            (Host::Copilot, FileScope::Project) => Ok(project.join(".github/mcp.json")),
            (Host::ClaudeDesktop | Host::Windsurf | Host::Goose, FileScope::Project) => {
                Err(none("project"))
            }
        }
    }

    /// Whether the host looks installed for this user: its user file, or
    /// the folder it goes in, exists.
    pub fn detected(self, env: &Env) -> bool {
        let Ok(file) = self.file(FileScope::User, env, Path::new(".")) else {
            return false;
        };
        if file.exists() {
            return true;
        }
        match self {
            // The home directory always exists: only the file counts.
            Host::ClaudeCode => false,
            _ => file.parent().is_some_and(Path::is_dir),
        }
    }

    fn container(self, scope: FileScope, project: &Path) -> Container {
        let json = |keys: &[&str]| Container::Json(keys.iter().map(|k| k.to_string()).collect());
        match self {
            Host::ClaudeCode if scope == FileScope::Local => Container::Json(vec![
                "projects".into(),
                project.to_string_lossy().into_owned(),
                "mcpServers".into(),
            ]),
            Host::VsCode => json(&["servers"]),
            Host::Zed => json(&["context_servers"]),
            Host::Codex => Container::Codex,
            Host::Goose => Container::Goose,
            _ => json(&["mcpServers"]),
        }
    }

    /// The entry for `config` in this host's shape.
    fn entry(self, name: &str, c: &ServerConfig) -> Result<Node, EditError> {
        let t = c
            .transport()
            .map_err(|e| EditError::Invalid(e.to_string()))?;
        let unsupported = |what: &str| EditError::Unsupported {
            host: self.name(),
            what: what.to_string(),
        };
        let s = |v: &str| Node::Str(v.to_string());
        let mut m: Vec<(String, Node)> = Vec::new();
        let mut put = |k: &str, v: Node| m.push((k.to_string(), v));
        let command = c.command.clone().unwrap_or_default();
        let url = c.url.clone().unwrap_or_default();
        let args = Node::strings(&c.args);
        let env = Node::string_map(&c.env);
        let headers = Node::string_map(&c.headers);
        let kind = match t {
            TransportKind::Stdio => "stdio",
            TransportKind::StreamableHttp => "http",
            TransportKind::LegacySse => "sse",
        };
        let stdio = t == TransportKind::Stdio;
        match self {
            Host::ClaudeCode | Host::VsCode => {
                put("type", s(kind));
                if stdio {
                    put("command", s(&command));
                    put("args", args);
                    put("env", env);
                } else {
                    put("url", s(&url));
                    if !c.headers.is_empty() {
                        put("headers", headers);
                    }
                }
            }
            Host::ClaudeDesktop | Host::Cursor | Host::Windsurf | Host::Gemini => {
                if stdio {
                    put("command", s(&command));
                    put("args", args);
                    put("env", env);
                } else {
                    if self == Host::ClaudeDesktop {
                        return Err(unsupported(
                            "its config file takes local (stdio) servers only; add a remote \
                             server in its Connectors settings, or through a local bridge \
                             (`-- npx -y mcp-remote URL`)",
                        ));
                    }
                    let key = match (self, t) {
                        (Host::Windsurf, _) => "serverUrl",
                        (Host::Gemini, TransportKind::StreamableHttp) => "httpUrl",
                        _ => "url",
                    };
                    put(key, s(&url));
                    if !c.headers.is_empty() {
                        put("headers", headers);
                    }
                }
            }
            Host::Zed => {
                if stdio {
                    put("source", s("custom"));
                    put("command", s(&command));
                    put("args", args);
                    put("env", env);
                } else if t == TransportKind::LegacySse {
                    return Err(unsupported(
                        "Zed connects to Streamable HTTP servers, not SSE",
                    ));
                } else {
                    put("url", s(&url));
                    if !c.headers.is_empty() {
                        put("headers", headers);
                    }
                }
            }
            Host::Copilot => {
                put("type", s(if stdio { "local" } else { kind }));
                if stdio {
                    put("command", s(&command));
                    put("args", args);
                    put("env", env);
                } else {
                    put("url", s(&url));
                    if !c.headers.is_empty() {
                        put("headers", headers);
                    }
                }
                put("tools", Node::List(vec![s("*")]));
            }
            Host::Codex => {
                if stdio {
                    put("command", s(&command));
                    put("args", args);
                    if !c.env.is_empty() {
                        put("env", env);
                    }
                } else if t == TransportKind::LegacySse {
                    return Err(unsupported(
                        "Codex connects to Streamable HTTP servers, not SSE",
                    ));
                } else {
                    put("url", s(&url));
                    let mut plain = Vec::new();
                    let mut from_env = Vec::new();
                    for (k, v) in &c.headers {
                        if k.eq_ignore_ascii_case("authorization") {
                            if let Some(var) = v.strip_prefix("Bearer ").and_then(whole_var) {
                                put("bearer_token_env_var", s(var));
                                continue;
                            }
                        }
                        match whole_var(v) {
                            Some(var) => from_env.push((k.clone(), s(var))),
                            None => plain.push((k.clone(), s(v))),
                        }
                    }
                    if !plain.is_empty() {
                        put("http_headers", Node::Map(plain));
                    }
                    if !from_env.is_empty() {
                        put("env_http_headers", Node::Map(from_env));
                    }
                }
            }
            Host::Goose => {
                // Goose keeps its config as a sorted map: keys in order.
                let mut envs = Vec::new();
                let mut keys = Vec::new();
                for (k, v) in &c.env {
                    if whole_var(v) == Some(k.as_str()) {
                        keys.push(s(k));
                    } else {
                        envs.push((k.clone(), s(v)));
                    }
                }
                if stdio {
                    put("args", args);
                }
                put("bundled", Node::Null);
                if stdio {
                    put("cmd", s(&command));
                }
                put("description", s(""));
                put("enabled", Node::Bool(true));
                put("env_keys", Node::List(keys));
                put("envs", Node::Map(envs));
                if !stdio {
                    put("headers", headers);
                }
                put("name", s(name));
                put("timeout", Node::Num(300));
                put(
                    "type",
                    s(match t {
                        TransportKind::Stdio => "stdio",
                        TransportKind::StreamableHttp => "streamable_http",
                        TransportKind::LegacySse => "sse",
                    }),
                );
                if !stdio {
                    put("uri", s(&url));
                }
            }
        }
        if let (Some(cwd), true) = (
            &c.cwd,
            matches!(
                self,
                Host::ClaudeCode | Host::Cursor | Host::VsCode | Host::Gemini | Host::Codex
            ),
        ) {
            m.push(("cwd".into(), s(cwd)));
        }
        let mut node = Node::Map(m);
        if self == Host::VsCode {
            node = vscode_variables(node)?;
        }
        Ok(node)
    }

    /// The switch a host keeps in an entry: the key and its "off" value.
    fn switch(self) -> Result<(&'static str, bool), EditError> {
        match self {
            Host::Windsurf => Ok(("disabled", true)),
            Host::Zed => Ok(("enabled", false)),
            Host::Codex | Host::Goose => Ok(("enabled", false)),
            Host::ClaudeCode => Err(EditError::Unsupported {
                host: self.name(),
                what: "has no on/off switch in its config file (Claude Code keeps it in its \
                       own state, `/mcp`); remove the server instead"
                    .into(),
            }),
            Host::Cursor | Host::VsCode => Err(EditError::Unsupported {
                host: self.name(),
                what: "has no on/off switch in its config file (the editor's MCP settings \
                       keep it); remove the server instead"
                    .into(),
            }),
            Host::ClaudeDesktop => Err(EditError::Unsupported {
                host: self.name(),
                what: "has no per-server on/off switch in its config file; remove the \
                       server instead"
                    .into(),
            }),
            // Gemini CLI keeps a server's enablement in a store of its own
            // (McpServerEnablementManager); `mcp.excluded` in settings.json
            // is a blocklist it shows as blocked.
            Host::Gemini => Err(EditError::Unsupported {
                host: self.name(),
                what: "keeps its per-server on/off outside settings.json (its `mcp.excluded` \
                       list blocks a server instead); remove the server instead"
                    .into(),
            }),
            // Copilot CLI does not honour `"disabled": true` in its file
            // (github/copilot-cli#3582).
            Host::Copilot => Err(EditError::Unsupported {
                host: self.name(),
                what: "has no on/off switch it reads in mcp-config.json; remove the server \
                       instead"
                    .into(),
            }),
        }
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `${NAME}` alone: `NAME`.
fn whole_var(v: &str) -> Option<&str> {
    let name = v.strip_prefix("${")?.strip_suffix('}')?;
    let mut c = name.chars();
    (c.next()?.is_ascii_alphabetic() || name.starts_with('_'))
        .then_some(())
        .filter(|()| c.all(|x| x.is_ascii_alphanumeric() || x == '_'))
        .map(|()| name)
}

/// mcpwire's `${VAR}` in VS Code's words, `${env:VAR}`; a default
/// (`${VAR:-x}`) VS Code has no way to say.
fn vscode_variables(node: Node) -> Result<Node, EditError> {
    fn text(s: &str) -> Result<String, EditError> {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            if rest[..i].ends_with('$') {
                out.push_str(&rest[..i + 2]);
                rest = &rest[i + 2..];
                continue;
            }
            out.push_str(&rest[..i]);
            let after = &rest[i..];
            let Some(end) = after.find('}') else {
                out.push_str(after);
                return Ok(out);
            };
            match whole_var(&after[..=end]) {
                Some(var) => out.push_str(&format!("${{env:{var}}}")),
                None => {
                    return Err(EditError::Unsupported {
                        host: "vscode",
                        what: format!(
                            "`{}` has no VS Code equivalent (VS Code has `${{env:NAME}}`, \
                             without a default)",
                            &after[..=end]
                        ),
                    })
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
    Ok(match node {
        Node::Str(s) => Node::Str(text(&s)?),
        Node::List(l) => Node::List(
            l.into_iter()
                .map(vscode_variables)
                .collect::<Result<_, _>>()?,
        ),
        Node::Map(m) => Node::Map(
            m.into_iter()
                .map(|(k, v)| Ok((k, vscode_variables(v)?)))
                .collect::<Result<_, EditError>>()?,
        ),
        other => other,
    })
}

/// The host a discovered file belongs to, when mcpwire can tell.
pub fn host_of(source: &Source) -> Option<Host> {
    match source.format {
        Format::ClaudeCode => Some(Host::ClaudeCode),
        Format::CodexToml => Some(Host::Codex),
        Format::VsCode => Some(Host::VsCode),
        Format::Copilot => Some(Host::Copilot),
        Format::Windsurf => Some(Host::Windsurf),
        Format::Gemini => Some(Host::Gemini),
        Format::Zed => Some(Host::Zed),
        Format::Goose => Some(Host::Goose),
        Format::McpJson => {
            let p = &source.path;
            let name = p.file_name()?.to_str()?;
            let parent = p
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str());
            match (parent, name) {
                (Some(".cursor"), "mcp.json") => Some(Host::Cursor),
                (_, "claude_desktop_config.json") => Some(Host::ClaudeDesktop),
                (_, ".mcp.json") if source.scope == discovery::Scope::Project => {
                    Some(Host::ClaudeCode)
                }
                _ => None,
            }
        }
    }
}

/// A planned change of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    /// The file (as named; a symlink is written through).
    pub path: PathBuf,
    /// Its text now (`None`: it does not exist).
    pub before: Option<String>,
    /// Its text after the edit (`None`: it is deleted).
    pub after: Option<String>,
}

fn read(path: &Path) -> Result<Option<String>, EditError> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| EditError::Unparsable {
                path: path.to_path_buf(),
                message: format!("not UTF-8: {e}"),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(EditError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

impl FileEdit {
    /// Whether the edit changes nothing.
    pub fn is_noop(&self) -> bool {
        self.before == self.after
    }

    /// A unified diff of the edit (`--- /dev/null` for a new file,
    /// `+++ /dev/null` for a deleted one).
    pub fn diff(&self) -> String {
        let name = self.path.display().to_string();
        let old_name = if self.before.is_some() {
            name.as_str()
        } else {
            "/dev/null"
        };
        let new_name = if self.after.is_some() {
            name.as_str()
        } else {
            "/dev/null"
        };
        unified_diff(
            old_name,
            new_name,
            self.before.as_deref().unwrap_or(""),
            self.after.as_deref().unwrap_or(""),
        )
    }

    /// Writes the edit: only if the file is still as it was read; the new
    /// text atomically (temporary file beside it, synced, renamed), with
    /// the file's mode; a symlink's target is written. A deletion removes
    /// the file.
    pub fn apply(&self) -> Result<(), EditError> {
        if self.is_noop() {
            return Ok(());
        }
        let io = |source| EditError::Io {
            path: self.path.clone(),
            source,
        };
        if read(&self.path)? != self.before {
            return Err(EditError::Changed(self.path.clone()));
        }
        let target = if self.before.is_some() {
            std::fs::canonicalize(&self.path).map_err(io)?
        } else {
            self.path.clone()
        };
        let Some(text) = &self.after else {
            return std::fs::remove_file(&target).map_err(io);
        };
        match std::fs::metadata(&target) {
            Ok(meta) => {
                // Private while written, then the file's own mode.
                mcpwire_adapter::files::write_atomic(&target, text.as_bytes(), true).map_err(io)?;
                std::fs::set_permissions(&target, meta.permissions()).map_err(io)
            }
            Err(_) => {
                mcpwire_adapter::files::write_atomic(&target, text.as_bytes(), false).map_err(io)
            }
        }
    }

    /// Adds server `name` to the text this edit leaves (to plan several
    /// additions to one file).
    pub fn and_add(
        self,
        host: Host,
        scope: FileScope,
        name: &str,
        config: &ServerConfig,
        project: &Path,
    ) -> Result<FileEdit, EditError> {
        let after = add_text(
            &self.path,
            host,
            scope,
            name,
            config,
            project,
            self.after.as_deref(),
        )?;
        Ok(FileEdit {
            after: Some(after),
            ..self
        })
    }
}

/// Plans adding server `name` to `host`'s file of `scope`. The file must
/// not define `name` yet.
pub fn add(
    host: Host,
    scope: FileScope,
    name: &str,
    config: &ServerConfig,
    env: &Env,
    project: &Path,
) -> Result<FileEdit, EditError> {
    let path = host.file(scope, env, project)?;
    let before = read(&path)?;
    let after = add_text(&path, host, scope, name, config, project, before.as_deref())?;
    Ok(FileEdit {
        path,
        before,
        after: Some(after),
    })
}

fn check_name(name: &str) -> Result<(), EditError> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(EditError::Invalid(format!(
            "{name:?} is not a server name (empty, or a control character)"
        )));
    }
    Ok(())
}

fn add_text(
    path: &Path,
    host: Host,
    scope: FileScope,
    name: &str,
    config: &ServerConfig,
    project: &Path,
    before: Option<&str>,
) -> Result<String, EditError> {
    check_name(name)?;
    let node = host.entry(name, config)?;
    let container = host.container(scope, project);
    insert_entry(path, host, &container, name, &node, before)
}

/// The text with `name` → `node` added to `container`; checked.
fn insert_entry(
    path: &Path,
    host: Host,
    container: &Container,
    name: &str,
    node: &Node,
    before: Option<&str>,
) -> Result<String, EditError> {
    let unparsable = |message: String| EditError::Unparsable {
        path: path.to_path_buf(),
        message,
    };
    let not_editable = |message: String| EditError::NotEditable {
        path: path.to_path_buf(),
        message,
    };
    let exists = || EditError::Exists {
        name: name.to_string(),
        path: path.to_path_buf(),
    };
    let after = match container {
        Container::Codex => toml::add(before.unwrap_or(""), name, node).map_err(|e| match e {
            toml::TomlError::Parse(m) => unparsable(m),
            toml::TomlError::NotATable(k) => not_editable(format!("`{k}` is not a table")),
            toml::TomlError::Exists => exists(),
            toml::TomlError::Missing => not_editable("no `mcp_servers`".into()),
        })?,
        Container::Goose => yaml::add(before.unwrap_or(""), name, node).map_err(|e| match e {
            yaml::YamlError::NotEditable(m) => not_editable(m),
            yaml::YamlError::Exists => exists(),
            yaml::YamlError::Missing => not_editable("no `extensions`".into()),
        })?,
        Container::Json(keys) => {
            let fresh = before.is_none();
            let mut text = before.unwrap_or("{}\n").to_string();
            let unit = if host == Host::VsCode { "\t" } else { "  " };
            let mut style = json::Style::of(&text, unit);
            if fresh {
                style.compact = false;
            }
            let root = json::parse(&text).map_err(unparsable)?;
            if root.members().is_none() {
                return Err(unparsable("not a JSON object".into()));
            }
            // The deepest object of the path that exists; the rest is
            // created in one insertion.
            let mut at = &root;
            let mut depth = 0;
            while depth < keys.len() {
                match at.member(&keys[depth]) {
                    Some(m) if m.value.members().is_some() => {
                        at = &m.value;
                        depth += 1;
                    }
                    Some(_) => {
                        return Err(not_editable(format!(
                            "`{}` is not an object",
                            keys[..=depth].join(".")
                        )))
                    }
                    None => break,
                }
            }
            let (key, value) = if depth == keys.len() {
                if at.member(name).is_some() {
                    return Err(exists());
                }
                (name.to_string(), node.clone())
            } else {
                let mut value = Node::Map(vec![(name.to_string(), node.clone())]);
                for k in keys[depth + 1..].iter().rev() {
                    value = Node::Map(vec![(k.clone(), value)]);
                }
                (keys[depth].clone(), value)
            };
            text = json::apply(&text, json::insert(&text, at, &key, &value, &style));
            if fresh && host == Host::VsCode {
                // VS Code's own new file: `servers`, then `inputs`.
                let root = json::parse(&text).map_err(unparsable)?;
                text = json::apply(
                    &text,
                    json::insert(&text, &root, "inputs", &Node::List(vec![]), &style),
                );
            }
            text
        }
    };
    let mut expected = document(path, container, before)?;
    set_at(&mut expected, container, |servers| {
        servers.insert(name.to_string(), node.to_json());
    });
    if fresh_vscode(host, container, before) {
        if let Value::Object(m) = &mut expected {
            m.insert("inputs".into(), Value::Array(vec![]));
        }
    }
    verify(path, container, &after, &expected)?;
    Ok(after)
}

fn fresh_vscode(host: Host, container: &Container, before: Option<&str>) -> bool {
    host == Host::VsCode && before.is_none() && matches!(container, Container::Json(_))
}

/// The file's document as JSON (TOML and YAML converted), `{}` when
/// absent.
fn document(path: &Path, container: &Container, text: Option<&str>) -> Result<Value, EditError> {
    let unparsable = |message: String| EditError::Unparsable {
        path: path.to_path_buf(),
        message,
    };
    let Some(text) = text else {
        return Ok(Value::Object(Map::new()));
    };
    match container {
        Container::Json(_) => discovery::json_object(text.as_bytes())
            .map(Value::Object)
            .map_err(unparsable),
        Container::Codex => {
            let t: ::toml::Table =
                ::toml::from_str(text).map_err(|e| unparsable(format!("not valid TOML: {e}")))?;
            serde_json::to_value(t).map_err(|e| unparsable(e.to_string()))
        }
        Container::Goose => discovery::goose::yaml_object(text.as_bytes())
            .map(|m| Value::Object(m.unwrap_or_default()))
            .map_err(unparsable),
    }
}

/// Runs `f` on the servers object of `doc` (created as needed).
fn set_at(doc: &mut Value, container: &Container, f: impl FnOnce(&mut Map<String, Value>)) {
    let keys: Vec<String> = match container {
        Container::Json(keys) => keys.clone(),
        Container::Codex => vec!["mcp_servers".into()],
        Container::Goose => vec!["extensions".into()],
    };
    let mut at = doc;
    for k in &keys {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        let Value::Object(m) = at else { unreachable!() };
        let next = m
            .entry(k.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if next.is_null() {
            *next = Value::Object(Map::new());
        }
        at = next;
    }
    if let Value::Object(m) = at {
        f(m);
    }
}

/// The planned text parses to `expected`.
fn verify(
    path: &Path,
    container: &Container,
    after: &str,
    expected: &Value,
) -> Result<(), EditError> {
    let got = document(path, container, Some(after)).map_err(|e| EditError::Verify {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut got = got;
    if matches!(container, Container::Codex | Container::Goose) {
        // An emptied `mcp_servers` / `extensions` reads as absent or empty.
        let key = if *container == Container::Codex {
            "mcp_servers"
        } else {
            "extensions"
        };
        let mut want = expected.clone();
        for v in [&mut got, &mut want] {
            if let Value::Object(m) = v {
                if m.get(key)
                    .is_some_and(|s| s.as_object().is_some_and(Map::is_empty) || s.is_null())
                {
                    m.remove(key);
                }
            }
        }
        if got == want {
            return Ok(());
        }
    } else if &got == expected {
        return Ok(());
    }
    Err(EditError::Verify {
        path: path.to_path_buf(),
        message: format!("expected {expected}, got {got}"),
    })
}

/// The containers of a discovered file that may hold servers, in the
/// order discovery reads them.
fn containers(source: &Source, project: &Path) -> Vec<Container> {
    let json = |keys: &[&str]| Container::Json(keys.iter().map(|k| k.to_string()).collect());
    match source.format {
        Format::CodexToml => vec![Container::Codex],
        Format::Goose => vec![Container::Goose],
        Format::Zed => vec![json(&["context_servers"])],
        Format::VsCode => vec![json(&["servers"]), json(&["mcpServers"])],
        Format::McpJson => vec![json(&["mcpServers"]), json(&["servers"])],
        Format::Copilot | Format::Windsurf | Format::Gemini => vec![json(&["mcpServers"])],
        Format::ClaudeCode => {
            let mut out = Vec::new();
            let mut keys = vec![project.to_string_lossy().into_owned()];
            if let Ok(c) = project.canonicalize() {
                let c = c.to_string_lossy().into_owned();
                if !keys.contains(&c) {
                    keys.push(c);
                }
            }
            for k in keys {
                out.push(Container::Json(vec![
                    "projects".into(),
                    k,
                    "mcpServers".into(),
                ]));
            }
            out.push(json(&["mcpServers"]));
            out
        }
    }
}

/// Whether `container` of `text` defines `name`.
fn holds(path: &Path, container: &Container, text: &str, name: &str) -> Result<bool, EditError> {
    let unparsable = |message: String| EditError::Unparsable {
        path: path.to_path_buf(),
        message,
    };
    match container {
        Container::Codex => toml::names(text)
            .map(|n| n.iter().any(|x| x == name))
            .map_err(|e| match e {
                toml::TomlError::Parse(m) => unparsable(m),
                _ => unparsable("`mcp_servers` is not a table".into()),
            }),
        Container::Goose => yaml::names(text)
            .map(|n| n.iter().any(|x| x == name))
            .map_err(|e| match e {
                yaml::YamlError::NotEditable(m) => EditError::NotEditable {
                    path: path.to_path_buf(),
                    message: m,
                },
                _ => unparsable("no extensions".into()),
            }),
        Container::Json(keys) => {
            let root = json::parse(text).map_err(unparsable)?;
            let mut at = &root;
            for k in keys {
                match at.member(k) {
                    Some(m) => at = &m.value,
                    None => return Ok(false),
                }
            }
            Ok(at.member(name).is_some())
        }
    }
}

/// Plans removing server `name` from the discovered file `source`
/// (every place of the file that defines it: Claude Code's
/// `~/.claude.json` may hold a project's and the user's). A file that is
/// left as nothing but the skeleton an add would have created around the
/// entry is deleted.
pub fn remove(source: &Source, name: &str, project: &Path) -> Result<FileEdit, EditError> {
    let path = source.path.clone();
    let before = read(&path)?.ok_or_else(|| EditError::Missing {
        name: name.to_string(),
        path: path.clone(),
    })?;
    let mut text = before.clone();
    let mut found = false;
    for container in containers(source, project) {
        if !holds(&path, &container, &text, name)? {
            continue;
        }
        found = true;
        text = remove_entry(&path, &container, name, &text)?;
    }
    if !found {
        return Err(EditError::Missing {
            name: name.to_string(),
            path,
        });
    }
    let after = match host_of(source) {
        Some(host) if is_skeleton(host, source, &text, project) => None,
        _ => Some(text),
    };
    Ok(FileEdit {
        path,
        before: Some(before),
        after,
    })
}

/// Whether `text` is what adding and removing a server leaves of a file
/// that did not exist (`{"mcpServers": {}}`, an empty TOML file, …).
fn is_skeleton(host: Host, source: &Source, text: &str, project: &Path) -> bool {
    let scopes = [FileScope::User, FileScope::Project, FileScope::Local];
    let probe = ServerConfig::stdio("x");
    scopes.into_iter().any(|scope| {
        let container = host.container(scope, project);
        if !containers(source, project).contains(&container) {
            return false;
        }
        let Ok(node) = host.entry("x", &probe) else {
            return false;
        };
        let Ok(added) = insert_entry(&source.path, host, &container, "x", &node, None) else {
            return false;
        };
        remove_entry(&source.path, &container, "x", &added)
            .is_ok_and(|left| left == text || (left.trim().is_empty() && text.trim().is_empty()))
    })
}

fn remove_entry(
    path: &Path,
    container: &Container,
    name: &str,
    before: &str,
) -> Result<String, EditError> {
    let unparsable = |message: String| EditError::Unparsable {
        path: path.to_path_buf(),
        message,
    };
    let missing = || EditError::Missing {
        name: name.to_string(),
        path: path.to_path_buf(),
    };
    let after = match container {
        Container::Codex => toml::remove(before, name).map_err(|e| match e {
            toml::TomlError::Parse(m) => unparsable(m),
            _ => missing(),
        })?,
        Container::Goose => yaml::remove(before, name).map_err(|e| match e {
            yaml::YamlError::NotEditable(m) => EditError::NotEditable {
                path: path.to_path_buf(),
                message: m,
            },
            _ => missing(),
        })?,
        Container::Json(keys) => {
            let root = json::parse(before).map_err(unparsable)?;
            let mut objects = vec![&root];
            for k in keys {
                let at = objects[objects.len() - 1];
                objects.push(&at.member(k).ok_or_else(missing)?.value);
            }
            let mut level = keys.len();
            let mut index = objects[level]
                .members()
                .and_then(|m| m.iter().position(|m| m.key == name))
                .ok_or_else(missing)?;
            // A server list left empty goes too when it is its object's
            // last member (where an add that created it put it), and so
            // on up: adding to a file without the list and removing again
            // gives the file back.
            while level > 0
                && objects[level].members().is_some_and(|m| m.len() == 1)
                && objects[level - 1]
                    .members()
                    .and_then(<[json::Member]>::last)
                    .is_some_and(|m| m.key == keys[level - 1])
            {
                level -= 1;
                index = objects[level].members().map_or(0, |m| m.len() - 1);
            }
            let after = json::apply(before, json::remove(before, objects[level], index));
            let mut expected = document(path, container, Some(before))?;
            let mut at = &mut expected;
            for k in &keys[..level] {
                at = &mut at[k.as_str()];
            }
            if let Value::Object(m) = at {
                m.remove(keys.get(level).map_or(name, String::as_str));
            }
            verify(path, container, &after, &expected)?;
            return Ok(after);
        }
    };
    let mut expected = document(path, container, Some(before))?;
    set_at(&mut expected, container, |servers| {
        servers.remove(name);
    });
    verify(path, container, &after, &expected)?;
    Ok(after)
}

/// Plans turning server `name` of the discovered file `source` on or off
/// with its host's own switch (see the module's table); a host without
/// one is [`EditError::Unsupported`].
pub fn set_enabled(
    source: &Source,
    name: &str,
    on: bool,
    project: &Path,
) -> Result<FileEdit, EditError> {
    let host = host_of(source).ok_or_else(|| EditError::Unsupported {
        host: "mcp.json",
        what: format!(
            "{}: a generic mcpServers file has no on/off switch mcpwire knows a host to read",
            source.path.display()
        ),
    })?;
    let (key, off) = host.switch()?;
    let path = source.path.clone();
    let missing = || EditError::Missing {
        name: name.to_string(),
        path: path.clone(),
    };
    let before = read(&path)?.ok_or_else(missing)?;
    let container = containers(source, project)
        .into_iter()
        .find(|c| holds(&path, c, &before, name).unwrap_or(false))
        .ok_or_else(missing)?;
    let not_editable = |message: String| EditError::NotEditable {
        path: path.clone(),
        message,
    };
    let after = match &container {
        Container::Codex => toml::set_enabled(&before, name, on).map_err(|e| match e {
            toml::TomlError::NotATable(k) => not_editable(format!("`{k}` is not a table")),
            _ => missing(),
        })?,
        Container::Goose => yaml::set_enabled(&before, name, on).map_err(|e| match e {
            yaml::YamlError::NotEditable(m) => not_editable(m),
            _ => missing(),
        })?,
        Container::Json(keys) => {
            let root = json::parse(&before).map_err(|m| EditError::Unparsable {
                path: path.clone(),
                message: m,
            })?;
            let mut at = &root;
            for k in keys {
                at = &at.member(k).ok_or_else(missing)?.value;
            }
            let entry = &at.member(name).ok_or_else(missing)?.value;
            if entry.members().is_none() {
                return Err(not_editable(format!("`{name}` is not an object")));
            }
            let style = json::Style::of(&before, "  ");
            let splices = match (entry.member(key), on) {
                // On: the switch goes (the host's default is on).
                (Some(_), true) => {
                    let i = entry
                        .members()
                        .and_then(|m| m.iter().position(|m| m.key == key))
                        .unwrap_or(0);
                    json::remove(&before, entry, i)
                }
                (None, true) => Vec::new(),
                (Some(m), false) => json::replace(&before, m, &Node::Bool(off), &style),
                (None, false) => json::insert(&before, entry, key, &Node::Bool(off), &style),
            };
            json::apply(&before, splices)
        }
    };
    let mut expected = document(&path, &container, Some(&before))?;
    set_at(&mut expected, &container, |servers| {
        if let Some(Value::Object(e)) = servers.get_mut(name) {
            match (&container, on) {
                (Container::Goose, _) => {
                    e.insert(key.into(), Value::Bool(on));
                }
                (_, true) => {
                    e.remove(key);
                }
                (_, false) => {
                    e.insert(key.into(), Value::Bool(off));
                }
            }
        }
    });
    verify(&path, &container, &after, &expected)?;
    Ok(FileEdit {
        path,
        before: Some(before),
        after: Some(after),
    })
}

/// A unified diff of two texts: one hunk around the lines that differ
/// (an edit changes one place of a file), three lines of context.
fn unified_diff(old_name: &str, new_name: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    if a == b {
        return String::new();
    }
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    const CONTEXT: usize = 3;
    let start = prefix.saturating_sub(CONTEXT);
    let a_end = (a.len() - suffix + CONTEXT).min(a.len());
    let b_end = (b.len() - suffix + CONTEXT).min(b.len());
    let range = |from: usize, to: usize| {
        let n = to - from;
        let first = if n == 0 { from } else { from + 1 };
        format!("{first},{n}")
    };
    let mut out = format!(
        "--- {old_name}\n+++ {new_name}\n@@ -{} +{} @@\n",
        range(start, a_end),
        range(start, b_end)
    );
    let line = |out: &mut String, mark: char, l: &str| {
        out.push(mark);
        out.push_str(l.trim_end_matches(['\n', '\r']));
        out.push('\n');
        if !l.ends_with('\n') {
            out.push_str("\\ No newline at end of file\n");
        }
    };
    for l in &a[start..prefix] {
        line(&mut out, ' ', l);
    }
    for l in &a[prefix..a.len() - suffix] {
        line(&mut out, '-', l);
    }
    for l in &b[prefix..b.len() - suffix] {
        line(&mut out, '+', l);
    }
    for l in &a[a.len() - suffix..a_end] {
        line(&mut out, ' ', l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_show_one_hunk_with_context() {
        let d = unified_diff(
            "a",
            "a",
            "1\n2\n3\n4\n5\n6\n7\n8\n",
            "1\n2\n3\n4\nx\n5\n6\n7\n8\n",
        );
        assert_eq!(
            d,
            "--- a\n+++ a\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+x\n 5\n 6\n 7\n"
        );
        let d = unified_diff("/dev/null", "b", "", "x\ny");
        assert_eq!(
            d,
            "--- /dev/null\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n"
        );
        assert_eq!(unified_diff("a", "a", "same\n", "same\n"), "");
    }

    #[test]
    fn variables_in_vscode_words() {
        let n = vscode_variables(Node::Str("Bearer ${TOKEN} $${lit} ${A}".into())).unwrap();
        assert_eq!(n, Node::Str("Bearer ${env:TOKEN} $${lit} ${env:A}".into()));
        assert!(vscode_variables(Node::Str("${A:-x}".into())).is_err());
        assert_eq!(whole_var("${A_1}"), Some("A_1"));
        assert_eq!(whole_var("${1A}"), None);
        assert_eq!(whole_var("x${A}"), None);
    }
}
