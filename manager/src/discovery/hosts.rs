//! Each host's way of writing a server entry, mapped to a
//! [`ServerConfig`] plus the host's tool list and startup timeout.
//!
//! Errors name the field (`` `args` must be an array of strings ``); the
//! caller adds the file and the server's name.

use std::collections::BTreeMap;
use std::time::Duration;

use mcpwire::config::{ServerConfig, TlsSettings};
use serde_json::{Map, Value};

use super::{Input, ToolFilter};

/// One entry read from a file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    pub(crate) config: ServerConfig,
    pub(crate) tools: ToolFilter,
    pub(crate) startup_timeout: Option<Duration>,
    pub(crate) inputs: Vec<Input>,
}

impl Parsed {
    fn new(config: ServerConfig) -> Self {
        Parsed {
            config,
            tools: ToolFilter::default(),
            startup_timeout: None,
            inputs: Vec::new(),
        }
    }
}

/// What a file holds: its entries (each read on its own) and notes on
/// entries it skipped on purpose.
#[derive(Debug, Default)]
pub(crate) struct FileServers {
    pub(crate) entries: Vec<(String, Result<Parsed, String>)>,
    pub(crate) notes: Vec<String>,
}

/// The JSON hosts' entry shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// Claude Desktop, Claude Code, Cursor, VS Code: `command`, `args`,
    /// `env`, `cwd`, `type`, `url`, `headers`, `timeout` (ms),
    /// `enabled` / `disabled`, `protocolEra`, and mcpwire's `proxy` and
    /// `tls`.
    Standard,
    /// Windsurf: as standard, remote servers as `serverUrl`,
    /// `disabledTools`.
    Windsurf,
    /// GitHub Copilot CLI: as standard, `type` `local` = `stdio`, `tools`
    /// (`["*"]` = all).
    Copilot,
    /// Gemini CLI: `httpUrl` (Streamable HTTP) or `url` (SSE), `timeout`
    /// (ms), `includeTools` / `excludeTools`.
    Gemini,
    /// Zed's `context_servers`: `command` a string (with `args`, `env`)
    /// or `{path, args, env}`, or `url` with `headers`; extension servers
    /// are skipped.
    Zed,
}

/// A JSON object's fields, read with errors that name them.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    prefix: &'a str,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn bad(&self, key: &str, what: &str) -> String {
        format!("invalid entry: `{}{key}` must be {what}", self.prefix)
    }

    fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.bad(key, "a string")),
        }
    }

    fn list(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.bad(key, "an array of strings")),
            Some(_) => Err(self.bad(key, "an array of strings")),
        }
    }

    fn map(&self, key: &str) -> Result<BTreeMap<String, String>, String> {
        match self.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(self.bad(&format!("{key}.{k}"), "a string")),
                })
                .collect(),
            Some(_) => Err(self.bad(key, "an object of strings")),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.bad(key, "true or false")),
        }
    }

    /// The `tls` object: `ca`, `cert`, `key` (strings), `insecure` (a
    /// boolean).
    fn tls(&self, key: &str) -> Result<Option<TlsSettings>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(obj)) => {
                let prefix = format!("{}{key}.", self.prefix);
                let inner = Fields {
                    obj,
                    prefix: &prefix,
                };
                if let Some(k) = obj
                    .keys()
                    .find(|k| !["ca", "cert", "key", "insecure"].contains(&k.as_str()))
                {
                    return Err(inner.bad(k, "one of `ca`, `cert`, `key`, `insecure`"));
                }
                Ok(Some(TlsSettings {
                    ca: inner.string("ca")?,
                    cert: inner.string("cert")?,
                    key: inner.string("key")?,
                    insecure: inner.bool("insecure")?.unwrap_or(false),
                }))
            }
            Some(_) => Err(self.bad(key, "an object (`ca`, `cert`, `key`, `insecure`)")),
        }
    }

    fn millis(&self, key: &str) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
                (Some(ms), _) => Ok(Some(ms)),
                (None, Some(f)) if f >= 0.0 => Ok(Some(f as u64)),
                _ => Err(self.bad(key, "a number of milliseconds")),
            },
            Some(_) => Err(self.bad(key, "a number of milliseconds")),
        }
    }
}

/// The fields every JSON host shares.
fn standard(f: &Fields<'_>) -> Result<ServerConfig, String> {
    let mut c = ServerConfig {
        kind: f.string("type")?,
        command: f.string("command")?,
        args: f.list("args")?.unwrap_or_default(),
        env: f.map("env")?,
        cwd: f.string("cwd")?,
        url: f.string("url")?,
        headers: f.map("headers")?,
        timeout: f.millis("timeout")?,
        enabled: f.bool("enabled")?,
        protocol_era: f.string("protocolEra")?,
        proxy: f.string("proxy")?,
        tls: f.tls("tls")?,
    };
    // Cline and Roo write `"disabled": true`; Windsurf writes it too.
    if c.enabled.is_none() && f.bool("disabled")? == Some(true) {
        c.enabled = Some(false);
    }
    Ok(c)
}

/// Reads one JSON entry; `Ok(Err(note))` is an entry skipped on purpose.
pub(crate) fn json_entry(v: &Value, dialect: Dialect) -> Result<Result<Parsed, String>, String> {
    let Value::Object(obj) = v else {
        return Err("invalid entry: not an object".into());
    };
    let f = Fields { obj, prefix: "" };
    match dialect {
        Dialect::Standard => Ok(Ok(Parsed::new(standard(&f)?))),
        Dialect::Windsurf => {
            let mut c = standard(&f)?;
            if let Some(url) = f.string("serverUrl")? {
                if c.url.is_some() {
                    return Err("invalid entry: both `serverUrl` and `url` are set".into());
                }
                c.url = Some(url);
            }
            let mut p = Parsed::new(c);
            p.tools.exclude = f.list("disabledTools")?.unwrap_or_default();
            Ok(Ok(p))
        }
        Dialect::Copilot => {
            let mut c = standard(&f)?;
            if c.kind.as_deref() == Some("local") {
                c.kind = Some("stdio".into());
            }
            let mut p = Parsed::new(c);
            if let Some(tools) = f.list("tools")? {
                if !tools.iter().any(|t| t == "*") {
                    p.tools.include = Some(tools);
                }
            }
            Ok(Ok(p))
        }
        Dialect::Gemini => {
            let mut c = standard(&f)?;
            if let Some(http) = f.string("httpUrl")? {
                if c.url.is_some() {
                    return Err("invalid entry: both `httpUrl` and `url` are set".into());
                }
                c.url = Some(http);
                c.kind.get_or_insert_with(|| "http".into());
            } else if c.url.is_some() {
                // Gemini CLI's `url` is the SSE transport unless `type` says.
                c.kind.get_or_insert_with(|| "sse".into());
            }
            // Gemini CLI expands `$NAME` as well as `${NAME}`.
            let c = super::vscode::map_fields(&c, &mut |text, _| Ok(dollar_names(text)))?;
            let mut p = Parsed::new(c);
            p.tools.include = f.list("includeTools")?;
            p.tools.exclude = f.list("excludeTools")?.unwrap_or_default();
            Ok(Ok(p))
        }
        Dialect::Zed => zed_entry(&f),
    }
}

/// `$NAME` written as `${NAME}`; everything else as it is.
fn dollar_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        out.push(c);
        if c != '$' {
            continue;
        }
        let starts_name = chars
            .peek()
            .is_some_and(|(_, n)| n.is_ascii_alphabetic() || *n == '_');
        if !starts_name {
            continue;
        }
        out.push('{');
        while let Some((_, n)) = chars.peek() {
            if !(n.is_ascii_alphanumeric() || *n == '_') {
                break;
            }
            out.push(*n);
            chars.next();
        }
        out.push('}');
    }
    out
}

fn zed_entry(f: &Fields<'_>) -> Result<Result<Parsed, String>, String> {
    if f.string("source")?.as_deref() == Some("extension")
        || (f.get("command").is_none() && f.get("url").is_none())
    {
        return Ok(Err(
            "a Zed extension's server (its command comes from the extension): skipped".into(),
        ));
    }
    let mut c = ServerConfig {
        url: f.string("url")?,
        headers: f.map("headers")?,
        enabled: f.bool("enabled")?,
        timeout: f.millis("timeout")?,
        ..ServerConfig::default()
    };
    match f.get("command") {
        None => {}
        Some(Value::Object(cmd)) => {
            // Zed before 0.193: `"command": {"path", "args", "env"}`.
            let inner = Fields {
                obj: cmd,
                prefix: "command.",
            };
            c.command = Some(
                inner
                    .string("path")?
                    .ok_or_else(|| "invalid entry: `command.path` is missing".to_string())?,
            );
            c.args = inner.list("args")?.unwrap_or_default();
            c.env = inner.map("env")?;
        }
        Some(Value::String(s)) => {
            c.command = Some(s.clone());
            c.args = f.list("args")?.unwrap_or_default();
            c.env = f.map("env")?;
        }
        Some(_) => return Err(f.bad("command", "a string or {path, args, env}")),
    }
    Ok(Ok(Parsed::new(c)))
}

/// The servers of a JSON object under `key`; absent is none.
pub(crate) fn json_servers(
    obj: &Map<String, Value>,
    key: &str,
    dialect: Dialect,
) -> Result<FileServers, String> {
    let mut out = FileServers::default();
    let Some(servers) = obj.get(key) else {
        return Ok(out);
    };
    let Value::Object(map) = servers else {
        return Err(format!("`{key}` is not an object"));
    };
    for (name, v) in map {
        match json_entry(v, dialect) {
            Ok(Err(note)) => out.notes.push(format!("`{key}.{name}`: {note}")),
            Ok(Ok(p)) => out.entries.push((name.clone(), Ok(p))),
            Err(e) => out.entries.push((name.clone(), Err(e))),
        }
    }
    Ok(out)
}

/// Gemini CLI's server-name lists in the same settings file:
/// `mcp.allowed` / `mcp.excluded` (settings v2) or `allowMCPServers` /
/// `excludeMCPServers` (v1). A server not allowed or excluded (exclusion
/// wins) is kept, disabled, with a note: Gemini does not connect to it,
/// and its name still hides later files' definitions.
pub(crate) fn gemini_server_lists(
    obj: &Map<String, Value>,
    found: &mut FileServers,
) -> Result<(), String> {
    let list = |v: Option<&Value>, field: &str| -> Result<Option<Vec<String>>, String> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| format!("`{field}` must be an array of strings")),
            Some(_) => Err(format!("`{field}` must be an array of strings")),
        }
    };
    let mcp = match obj.get("mcp") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err("`mcp` must be an object".into()),
    };
    let allowed = match list(mcp.and_then(|m| m.get("allowed")), "mcp.allowed")? {
        Some(l) => Some((l, "mcp.allowed")),
        None => {
            list(obj.get("allowMCPServers"), "allowMCPServers")?.map(|l| (l, "allowMCPServers"))
        }
    };
    let excluded = match list(mcp.and_then(|m| m.get("excluded")), "mcp.excluded")? {
        Some(l) => Some((l, "mcp.excluded")),
        None => list(obj.get("excludeMCPServers"), "excludeMCPServers")?
            .map(|l| (l, "excludeMCPServers")),
    };
    for (name, parsed) in &mut found.entries {
        let why = if let Some((_, field)) = excluded
            .as_ref()
            .filter(|(l, _)| l.iter().any(|n| n == name))
        {
            format!("listed in `{field}`")
        } else if let Some((_, field)) = allowed
            .as_ref()
            .filter(|(l, _)| !l.iter().any(|n| n == name))
        {
            format!("not in `{field}`")
        } else {
            continue;
        };
        if let Ok(p) = parsed {
            p.config.enabled = Some(false);
        }
        found
            .notes
            .push(format!("`mcpServers.{name}`: {why}: disabled"));
    }
    Ok(())
}

/// Codex's `config.toml`: `[mcp_servers.NAME]`.
pub(crate) fn codex(bytes: &[u8]) -> Result<FileServers, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let table: toml::Table = toml::from_str(text).map_err(|e| format!("not valid TOML: {e}"))?;
    let mut out = FileServers::default();
    let Some(servers) = table.get("mcp_servers") else {
        return Ok(out);
    };
    let toml::Value::Table(servers) = servers else {
        return Err("`mcp_servers` is not a table".into());
    };
    out.entries = servers
        .iter()
        .map(|(name, v)| (name.clone(), codex_entry(v)))
        .collect();
    Ok(out)
}

fn codex_entry(v: &toml::Value) -> Result<Parsed, String> {
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
    let list = |key: &str| -> Result<Option<Vec<String>>, String> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| bad(key, "an array of strings")),
            Some(_) => Err(bad(key, "an array of strings")),
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
    let seconds = |key: &str| -> Result<Option<Duration>, String> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(s)) if *s >= 0 => Ok(Some(Duration::from_secs(*s as u64))),
            Some(toml::Value::Float(s)) if s.is_finite() && *s >= 0.0 => {
                Ok(Some(Duration::from_secs_f64(*s)))
            }
            Some(_) => Err(bad(key, "a number of seconds")),
        }
    };
    let mut c = ServerConfig {
        kind: string("type")?,
        command: string("command")?,
        args: list("args")?.unwrap_or_default(),
        cwd: string("cwd")?,
        url: string("url")?,
        env: strings("env")?,
        headers: strings("http_headers")?,
        ..ServerConfig::default()
    };
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
    c.timeout = seconds("tool_timeout_sec")?.map(|d| d.as_millis() as u64);
    // `env_vars` names variables Codex passes through from its own
    // environment; a child of the manager inherits the whole environment,
    // so they arrive without a mapping. Checked, so a typo is reported.
    list("env_vars")?;
    let mut p = Parsed::new(c);
    p.startup_timeout = seconds("startup_timeout_sec")?;
    if p.startup_timeout.is_none() {
        p.startup_timeout = match t.get("startup_timeout_ms") {
            None => None,
            Some(toml::Value::Integer(ms)) if *ms >= 0 => Some(Duration::from_millis(*ms as u64)),
            Some(_) => return Err(bad("startup_timeout_ms", "a number of milliseconds")),
        };
    }
    p.tools.include = list("enabled_tools")?;
    p.tools.exclude = list("disabled_tools")?.unwrap_or_default();
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(v: Value, d: Dialect) -> Result<Parsed, String> {
        json_entry(&v, d).map(|r| r.expect("not skipped"))
    }

    #[test]
    fn codex_mapping() {
        let f = codex(
            br#"
model = "o3"
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server"]
env = { "API_KEY" = "k" }
env_vars = ["HOME_TOKEN"]
tool_timeout_sec = 2.5
startup_timeout_sec = 20
enabled_tools = ["search", "fetch"]
disabled_tools = ["fetch"]

[mcp_servers.remote]
url = "https://h/mcp"
bearer_token_env_var = "TOKEN"
http_headers = { "X-A" = "a" }
env_http_headers = { "X-B" = "B_VAR" }
enabled = false
startup_timeout_ms = 1500

[mcp_servers.bad]
command = 5

[mcp_servers.badvars]
command = "x"
env_vars = "HOME"
"#,
        )
        .unwrap();
        let get = |n: &str| f.entries.iter().find(|e| e.0 == n).unwrap().1.clone();
        let docs = get("docs").unwrap();
        assert_eq!(docs.config.command.as_deref(), Some("npx"));
        assert_eq!(docs.config.args, ["-y", "docs-server"]);
        assert_eq!(docs.config.env["API_KEY"], "k");
        assert_eq!(docs.config.timeout, Some(2500));
        assert_eq!(docs.startup_timeout, Some(Duration::from_secs(20)));
        assert!(docs.tools.allows("search"));
        assert!(!docs.tools.allows("fetch"), "disabled wins over enabled");
        assert!(!docs.tools.allows("other"));
        let remote = get("remote").unwrap();
        assert_eq!(remote.config.url.as_deref(), Some("https://h/mcp"));
        assert_eq!(remote.config.headers["Authorization"], "Bearer ${TOKEN}");
        assert_eq!(remote.config.headers["X-A"], "a");
        assert_eq!(remote.config.headers["X-B"], "${B_VAR}");
        assert_eq!(remote.config.enabled, Some(false));
        assert_eq!(remote.startup_timeout, Some(Duration::from_millis(1500)));
        assert!(remote.tools.allows("anything"));
        assert!(get("bad")
            .unwrap_err()
            .contains("`command` must be a string"));
        assert!(get("badvars")
            .unwrap_err()
            .contains("`env_vars` must be an array of strings"));
        assert!(codex(b"model = \"x\"").unwrap().entries.is_empty());
        assert!(codex(b"[mcp_servers").unwrap_err().contains("TOML"));
    }

    #[test]
    fn json_errors_name_the_field() {
        let e = |v: Value, d| one(v, d).unwrap_err();
        assert!(e(json!({"command": "x", "args": 5}), Dialect::Standard)
            .contains("`args` must be an array of strings"));
        assert!(
            e(json!({"command": "x", "env": {"A": 1}}), Dialect::Standard)
                .contains("`env.A` must be a string")
        );
        assert!(e(json!({"url": "u", "timeout": "5s"}), Dialect::Standard)
            .contains("`timeout` must be a number"));
        assert!(e(json!({"httpUrl": "a", "url": "b"}), Dialect::Gemini).contains("`httpUrl`"));
        assert!(e(json!({"serverUrl": "a", "url": "b"}), Dialect::Windsurf).contains("`serverUrl`"));
        assert!(e(json!({"command": {"args": []}}), Dialect::Zed).contains("`command.path`"));
        assert!(e(
            json!({"command": {"path": "p", "env": {"K": []}}}),
            Dialect::Zed
        )
        .contains("`command.env.K` must be a string"));
        assert!(e(json!({"command": "x", "tools": "*"}), Dialect::Copilot).contains("`tools`"));
        assert!(e(json!("x"), Dialect::Standard).contains("not an object"));
        assert_eq!(
            dollar_names("$A-${B} $_c9x $ $1 $${D}"),
            "${A}-${B} ${_c9x} $ $1 $${D}"
        );
        let g = one(
            json!({"command": "$HOME/bin/s", "env": {"K": "$TOKEN"}}),
            Dialect::Gemini,
        )
        .unwrap();
        assert_eq!(g.config.command.as_deref(), Some("${HOME}/bin/s"));
        assert_eq!(g.config.env["K"], "${TOKEN}");
        // null reads as absent (some generators write it).
        assert!(one(json!({"command": "x", "env": null}), Dialect::Standard).is_ok());
    }
}
