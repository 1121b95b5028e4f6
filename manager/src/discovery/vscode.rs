//! VS Code's `mcp.json`: its variables, `envFile` and `inputs` (also
//! VS Code Insiders' and VSCodium's, which share the format).
//!
//! | in the file               | becomes                                         |
//! |---------------------------|-------------------------------------------------|
//! | `${workspaceFolder}`      | the project directory                           |
//! | `${workspaceFolderBasename}` | its last component                           |
//! | `${userHome}`             | the home directory                              |
//! | `${pathSeparator}`, `${/}` | the platform's path separator                  |
//! | `${env:NAME}`             | `${NAME:-}`: the variable when the server starts, empty when unset (as VS Code) |
//! | `${config:NAME}`          | the setting `NAME` (a dotted key, or the same path through nested objects) of the first `settings.json` that has it, as VS Code reads a workspace folder's configuration (its settings over the user's): in a project's `.vscode/mcp.json`, the project's `.vscode/settings.json`, then the user settings of VS Code, VS Code Insiders and VSCodium, in that order; in a build's user-profile `mcp.json`, that build's `settings.json` next to it; an error naming the field when none has it |
//! | `${input:ID}`             | kept; the entry lists the input in [`ServerEntry::inputs`](super::ServerEntry::inputs) and the host supplies its value ([`crate::ManagerOptions::inputs`]) |
//! | `$${`                     | kept: a literal `${` for mcpwire's expansion     |
//! | `${command:ID}`, editor state (`${file}`, `${lineNumber}`, …) | an error naming the field: they need a running VS Code |
//! | anything else in `${…}` (`${HOME}`, `${VAR:-x}`) | an error naming the field: not VS Code's (an environment variable is `${env:NAME}`) |
//!
//! Substitution applies to `command`, `args`, `env` values, `cwd`, `url`,
//! `headers` values and `envFile`. `envFile` (a dotenv file, relative
//! paths from the project directory) is read at discovery; `env` wins
//! over it.
//!
//! `inputs`: `promptString` (`description`, `default`, `password`) and
//! `pickString` (`description`, `options` — strings or `{label, value}` —
//! and `default`, one of the values) become [`Input`]s. A `command` input
//! runs a VS Code command, which cannot happen outside VS Code: a server
//! that uses one fails with an error naming the input; the file's other
//! servers are not affected.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mcpwire::config::ServerConfig;
use serde_json::{Map, Value};

use super::hosts::{self, Dialect, FileServers};

/// A value VS Code asks the user for: an entry of `inputs` with
/// `"type": "promptString"` (typed) or `"type": "pickString"` (chosen
/// from [`Input::options`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Input {
    /// Its id, as in `${input:ID}`.
    pub id: String,
    /// The question shown to the user.
    pub description: Option<String>,
    /// Whether the answer is a secret (typed without echo).
    pub password: bool,
    /// The answer when the user gives none (for a `pickString`, one of
    /// the options' values).
    pub default: Option<String>,
    /// The choices of a `pickString` input, in order (empty for a
    /// `promptString`).
    pub options: Vec<PickOption>,
}

/// One choice of a `pickString` input: a string, or `{label, value}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PickOption {
    /// What the user is shown (`None`: the value).
    pub label: Option<String>,
    /// What `${input:ID}` becomes when it is chosen.
    pub value: String,
}

impl PickOption {
    /// The label, else the value.
    pub fn shown(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.value)
    }
}

/// Where VS Code's variables point.
pub(crate) struct Context<'a> {
    pub(crate) workspace: &'a Path,
    pub(crate) home: Option<&'a Path>,
    /// The `settings.json` files `${config:NAME}` reads, first found
    /// wins (the workspace's, then the profile's).
    pub(crate) settings: Vec<PathBuf>,
}

/// The declared `inputs`, by id; a bad one, or one that cannot be asked
/// for outside VS Code, is kept as an error, reported when a server uses
/// it.
fn declared_inputs(
    obj: &Map<String, Value>,
) -> Result<BTreeMap<String, Result<Input, String>>, String> {
    let mut out = BTreeMap::new();
    let Some(list) = obj.get("inputs") else {
        return Ok(out);
    };
    let Value::Array(list) = list else {
        return Err("`inputs` is not an array".into());
    };
    for (i, v) in list.iter().enumerate() {
        let id = v.get("id").and_then(Value::as_str);
        let Some(id) = id else {
            return Err(format!("`inputs[{i}].id` must be a string"));
        };
        out.insert(id.to_string(), declared_input(i, id, v));
    }
    Ok(out)
}

/// One entry of `inputs`; an error names its field, or says why a server
/// cannot use it.
fn declared_input(i: usize, id: &str, v: &Value) -> Result<Input, String> {
    let text = |k: &str| -> Result<Option<String>, String> {
        match v.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`inputs[{i}].{k}` must be a string")),
        }
    };
    match v.get("type").and_then(Value::as_str) {
        Some("promptString") => Ok(Input {
            id: id.to_string(),
            description: text("description")?,
            password: v.get("password").and_then(Value::as_bool) == Some(true),
            default: text("default")?,
            options: Vec::new(),
        }),
        Some("pickString") => {
            let bad = || {
                format!(
                    "`inputs[{i}].options` must be a non-empty array of strings \
                     or {{\"label\", \"value\"}} objects"
                )
            };
            let Some(Value::Array(list)) = v.get("options") else {
                return Err(bad());
            };
            let options = list
                .iter()
                .map(|o| match o {
                    Value::String(s) => Some(PickOption {
                        label: None,
                        value: s.clone(),
                    }),
                    Value::Object(m) => Some(PickOption {
                        label: m.get("label").and_then(Value::as_str).map(str::to_string),
                        value: m.get("value")?.as_str()?.to_string(),
                    }),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .filter(|o| !o.is_empty())
                .ok_or_else(bad)?;
            let default = text("default")?;
            if let Some(d) = &default {
                if !options.iter().any(|o| &o.value == d) {
                    return Err(format!(
                        "`inputs[{i}].default` {d:?} is not one of its options"
                    ));
                }
            }
            Ok(Input {
                id: id.to_string(),
                description: text("description")?,
                password: false,
                default,
                options,
            })
        }
        Some("command") => Err(format!(
            "input `{id}` runs the VS Code command `{}`, and VS Code commands \
             cannot run outside VS Code",
            text("command")?.unwrap_or_default()
        )),
        Some(other) => Err(format!(
            "input `{id}` has the unknown type `{other}` (VS Code's are \
             promptString, pickString and command)"
        )),
        None => Err(format!("`inputs[{i}].type` must be a string")),
    }
}

/// VS Code's variables that stand for editor state mcpwire does not have.
const EDITOR_ONLY: &[&str] = &[
    "file",
    "fileWorkspaceFolder",
    "fileWorkspaceFolderBasename",
    "relativeFile",
    "relativeFileDirname",
    "fileBasename",
    "fileBasenameNoExtension",
    "fileExtname",
    "fileDirname",
    "fileDirnameBasename",
    "cwd",
    "lineNumber",
    "columnNumber",
    "selectedText",
    "execPath",
    "defaultBuildTask",
];

/// `${config:NAME}`: the setting from the first `settings.json` that has
/// it (a dotted key, or the same path through nested objects).
fn config_value(name: &str, field: &str, ctx: &Context<'_>) -> Result<String, String> {
    let whole = format!("${{config:{name}}}");
    let mut read = Vec::new();
    for path in &ctx.settings {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("`{field}`: `{whole}`: {}: {e}", path.display())),
        };
        let obj = super::json_object(&bytes)
            .map_err(|e| format!("`{field}`: `{whole}`: {}: {e}", path.display()))?;
        read.push(path.display().to_string());
        let found = obj.get(name).or_else(|| {
            let mut parts = name.split('.');
            let first = obj.get(parts.next()?)?;
            parts.try_fold(first, |v, k| v.get(k))
        });
        let Some(v) = found else { continue };
        return match v {
            Value::String(s) => Ok(s.replace("${", "$${")),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            _ => Err(format!(
                "`{field}`: `{whole}`: the setting in {} is not a string, number or boolean",
                path.display()
            )),
        };
    }
    if read.is_empty() {
        let looked: Vec<String> = ctx
            .settings
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        return Err(format!(
            "`{field}`: `{whole}` but there is no VS Code settings.json (looked for {})",
            if looked.is_empty() {
                "none".to_string()
            } else {
                looked.join(", ")
            }
        ));
    }
    Err(format!(
        "`{field}`: `{whole}` but `{name}` is not set in {}",
        read.join(", ")
    ))
}

/// Applies VS Code's variables to one value; `used` collects the input
/// ids it references.
fn substitute(
    text: &str,
    field: &str,
    ctx: &Context<'_>,
    used: &mut BTreeSet<String>,
) -> Result<String, String> {
    let literal = |s: &str| s.replace("${", "$${");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(escaped) = after.strip_prefix("$${") {
            out.push_str("$${");
            rest = escaped;
            continue;
        }
        let Some(body_and_rest) = after.strip_prefix("${") else {
            out.push('$');
            rest = &after[1..];
            continue;
        };
        // The body ends at the brace that closes this reference.
        let mut depth = 0usize;
        let mut end = None;
        let b = body_and_rest.as_bytes();
        let mut j = 0;
        while j < b.len() {
            match b[j] {
                b'$' if b.get(j + 1) == Some(&b'{') => {
                    depth += 1;
                    j += 1;
                }
                b'}' if depth == 0 => {
                    end = Some(j);
                    break;
                }
                b'}' => depth -= 1,
                _ => {}
            }
            j += 1;
        }
        let Some(end) = end else {
            // Left for mcpwire's expansion to report.
            out.push_str(after);
            return Ok(out);
        };
        let body = &body_and_rest[..end];
        let whole = &after[..end + 3];
        rest = &body_and_rest[end + 1..];
        let path = |p: &Path| literal(&p.to_string_lossy());
        match body {
            "workspaceFolder" => out.push_str(&path(ctx.workspace)),
            "workspaceFolderBasename" => out.push_str(&literal(
                &ctx.workspace
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )),
            "userHome" => match ctx.home {
                Some(h) => out.push_str(&path(h)),
                None => return Err(format!("`{field}`: `${{userHome}}` but no home directory")),
            },
            "pathSeparator" | "/" => out.push(std::path::MAIN_SEPARATOR),
            _ => {
                if let Some(name) = body.strip_prefix("env:") {
                    if !is_var_name(name) {
                        return Err(format!("`{field}`: `{whole}` is not a variable name"));
                    }
                    out.push_str(&format!("${{{name}:-}}"));
                } else if let Some(id) = body.strip_prefix("input:") {
                    used.insert(id.to_string());
                    out.push_str(whole);
                } else if let Some(name) = body.strip_prefix("config:") {
                    out.push_str(&config_value(name, field, ctx)?);
                } else if body.starts_with("command:") {
                    return Err(format!(
                        "`{field}`: `{whole}` runs a VS Code command, and VS Code commands \
                         cannot run outside VS Code"
                    ));
                } else if EDITOR_ONLY.contains(&body)
                    || body.starts_with("extensionInstallFolder:")
                    || body.starts_with("workspaceFolder:")
                {
                    return Err(format!(
                        "`{field}`: VS Code's `{whole}` is editor state mcpwire does not have"
                    ));
                } else {
                    return Err(format!(
                        "`{field}`: `{whole}` is not a VS Code variable (an environment \
                         variable is `${{env:NAME}}`)"
                    ));
                }
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Every string field of `config` through `f`, each with its name.
pub(super) fn map_fields(
    config: &ServerConfig,
    f: &mut dyn FnMut(&str, &str) -> Result<String, String>,
) -> Result<ServerConfig, String> {
    let mut c = config.clone();
    if let Some(v) = &config.command {
        c.command = Some(f(v, "command")?);
    }
    for (i, a) in config.args.iter().enumerate() {
        c.args[i] = f(a, &format!("args[{i}]"))?;
    }
    for (k, v) in &config.env {
        c.env.insert(k.clone(), f(v, &format!("env.{k}"))?);
    }
    if let Some(v) = &config.cwd {
        c.cwd = Some(f(v, "cwd")?);
    }
    if let Some(v) = &config.url {
        c.url = Some(f(v, "url")?);
    }
    for (k, v) in &config.headers {
        c.headers.insert(k.clone(), f(v, &format!("headers.{k}"))?);
    }
    Ok(c)
}

/// Replaces each `${input:ID}` with the value `value(ID)` gives (taken
/// literally: a `${` in it is not expanded later). An input without a
/// value is an error naming it.
pub fn resolve_inputs(
    config: &ServerConfig,
    value: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, String> {
    map_fields(config, &mut |text, field| {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find("${input:") {
            // `$${input:` is an escaped literal.
            if rest[..i].ends_with('$') {
                out.push_str(&rest[..i + 8]);
                rest = &rest[i + 8..];
                continue;
            }
            out.push_str(&rest[..i]);
            let after = &rest[i + 8..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[i..]);
                return Ok(out);
            };
            let id = &after[..end];
            let v = value(id).ok_or_else(|| format!("input `{id}` (in {field}) has no value"))?;
            out.push_str(&v.replace("${", "$${"));
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    })
}

/// A dotenv file: `KEY=value`, `export KEY=value`, `#` comments, values
/// in single quotes (literal) or double quotes (`\n`, `\"`, `\\`).
/// Values are literal for mcpwire's expansion.
pub(crate) fn dotenv(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: no `=`", n + 1));
        };
        let key = key.trim();
        if !is_var_name(key) {
            return Err(format!("line {}: `{key}` is not a variable name", n + 1));
        }
        let value = value.trim();
        let value = if let Some(q) = value.strip_prefix('\'') {
            q.strip_suffix('\'')
                .ok_or_else(|| format!("line {}: unterminated '", n + 1))?
                .to_string()
        } else if let Some(q) = value.strip_prefix('"') {
            let q = q
                .strip_suffix('"')
                .ok_or_else(|| format!("line {}: unterminated \"", n + 1))?;
            let mut s = String::new();
            let mut chars = q.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    s.push(c);
                    continue;
                }
                match chars.next() {
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some(o) => s.push(o),
                    None => s.push('\\'),
                }
            }
            s
        } else {
            // An unquoted value ends at ` #`.
            value
                .split(" #")
                .next()
                .unwrap_or("")
                .trim_end()
                .to_string()
        };
        out.insert(key.to_string(), value.replace("${", "$${"));
    }
    Ok(out)
}

/// The servers of a VS Code `mcp.json` (`servers`, else `mcpServers`).
pub(crate) fn servers(obj: &Map<String, Value>, ctx: &Context<'_>) -> Result<FileServers, String> {
    let key = if obj.contains_key("servers") || !obj.contains_key("mcpServers") {
        "servers"
    } else {
        "mcpServers"
    };
    let declared = declared_inputs(obj)?;
    let mut out = hosts::json_servers(obj, key, Dialect::Standard)?;
    let raw = obj.get(key).and_then(Value::as_object);
    for (name, parsed) in &mut out.entries {
        let Ok(p) = parsed else { continue };
        let env_file = raw
            .and_then(|m| m.get(name))
            .and_then(|v| v.get("envFile"))
            .filter(|v| !v.is_null());
        let result = (|| {
            let mut used = BTreeSet::new();
            let mut config = map_fields(&p.config, &mut |text, field| {
                substitute(text, field, ctx, &mut used)
            })?;
            match env_file {
                None => {}
                Some(Value::String(f)) => {
                    let f = substitute(f, "envFile", ctx, &mut used)?;
                    if f.replace("$${", "").contains("${") {
                        return Err("invalid entry: `envFile` may use ${workspaceFolder}, \
                             ${userHome} and ${/} only"
                            .into());
                    }
                    let f = f.replace("$${", "${");
                    let path = ctx.workspace.join(&f);
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        format!(
                            "invalid entry: `envFile` {}: cannot read: {e}",
                            path.display()
                        )
                    })?;
                    let vars = dotenv(&text)
                        .map_err(|e| format!("invalid entry: `envFile` {}: {e}", path.display()))?;
                    for (k, v) in vars {
                        config.env.entry(k).or_insert(v);
                    }
                }
                Some(_) => return Err("invalid entry: `envFile` must be a string".into()),
            }
            let mut inputs = Vec::new();
            for id in used {
                match declared.get(&id) {
                    Some(Ok(i)) => inputs.push(i.clone()),
                    Some(Err(e)) => return Err(format!("invalid entry: {e}")),
                    None => {
                        return Err(format!(
                            "invalid entry: `${{input:{id}}}` but no input `{id}` in `inputs`"
                        ))
                    }
                }
            }
            Ok((config, inputs))
        })();
        match result {
            Ok((config, inputs)) => {
                p.config = config;
                p.inputs = inputs;
            }
            Err(e) => *parsed = Err(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn sub(text: &str) -> Result<(String, BTreeSet<String>), String> {
        let ws = PathBuf::from("/w/proj");
        let home = PathBuf::from("/home/ada");
        let ctx = Context {
            workspace: &ws,
            home: Some(&home),
            settings: Vec::new(),
        };
        let mut used = BTreeSet::new();
        substitute(text, "args[0]", &ctx, &mut used).map(|s| (s, used))
    }

    #[test]
    fn variables() {
        let s = |t: &str| sub(t).unwrap().0;
        assert_eq!(s("${workspaceFolder}/src"), "/w/proj/src");
        assert_eq!(s("${workspaceFolderBasename}"), "proj");
        assert_eq!(s("${userHome}${/}x${pathSeparator}y"), "/home/ada/x/y");
        assert_eq!(s("${env:API_KEY}"), "${API_KEY:-}");
        assert_eq!(s("$${lit} $x $ $HOME"), "$${lit} $x $ $HOME");
        let (t, used) = sub("Bearer ${input:tok} ${input:tok} ${input:b}").unwrap();
        assert_eq!(t, "Bearer ${input:tok} ${input:tok} ${input:b}");
        assert_eq!(used.into_iter().collect::<Vec<_>>(), ["b", "tok"]);
        let e = sub("${command:pick}").unwrap_err();
        assert!(
            e.contains("`args[0]`: `${command:pick}` runs a VS Code command"),
            "{e}"
        );
        for editor in [
            "${file}",
            "${lineNumber}",
            "${cwd}",
            "${workspaceFolder:api}",
        ] {
            let e = sub(&format!("x{editor}")).unwrap_err();
            assert!(e.contains("`args[0]`") && e.contains("editor state"), "{e}");
        }
        for unknown in ["${HOME}", "${A:-${B}}", "${nope}", "${foo:bar}"] {
            let e = sub(unknown).unwrap_err();
            assert!(
                e.contains("`args[0]`") && e.contains("is not a VS Code variable"),
                "{e}"
            );
        }
        let e = sub("${config:a.b}").unwrap_err();
        assert!(
            e.contains("`args[0]`: `${config:a.b}` but there is no VS Code settings.json"),
            "{e}"
        );
        assert!(sub("${env:1x}")
            .unwrap_err()
            .contains("not a variable name"));
        assert_eq!(s("${unclosed"), "${unclosed");
    }

    #[test]
    fn a_workspace_path_with_a_dollar_brace_stays_literal() {
        let ws = PathBuf::from("/w/${X}");
        let ctx = Context {
            workspace: &ws,
            home: None,
            settings: Vec::new(),
        };
        let t = substitute("${workspaceFolder}", "cwd", &ctx, &mut BTreeSet::new()).unwrap();
        assert_eq!(t, "/w/$${X}");
        let e = substitute("${userHome}", "cwd", &ctx, &mut BTreeSet::new()).unwrap_err();
        assert!(e.contains("no home"));
    }

    #[test]
    fn inputs_resolve_literally() {
        let c = ServerConfig::stdio("x")
            .arg("--key=${input:k}")
            .env("T", "${input:k}-${HOME}")
            .header("H", "$${input:k}");
        let r = resolve_inputs(&c, &|id| (id == "k").then(|| "s3${cr}t".to_string())).unwrap();
        assert_eq!(r.args, ["--key=s3$${cr}t"]);
        assert_eq!(r.env["T"], "s3$${cr}t-${HOME}");
        assert_eq!(r.headers["H"], "$${input:k}", "an escaped reference stays");
        let e = resolve_inputs(&c, &|_| None).unwrap_err();
        assert!(e.contains("input `k` (in args[0]) has no value"), "{e}");
    }

    #[test]
    fn dotenv_files() {
        let v = dotenv(
            "# comment\n\nA=1\nexport B = two words # note\nC='${lit} # kept'\nD=\"x\\ny \\\"q\\\"\"\nE=\n",
        )
        .unwrap();
        assert_eq!(v["A"], "1");
        assert_eq!(v["B"], "two words");
        assert_eq!(v["C"], "$${lit} # kept");
        assert_eq!(v["D"], "x\ny \"q\"");
        assert_eq!(v["E"], "");
        assert!(dotenv("NOEQUALS").unwrap_err().contains("line 1"));
        assert!(dotenv("A=1\n1B=2").unwrap_err().contains("line 2"));
        assert!(dotenv("A=\"open").unwrap_err().contains("unterminated"));
    }
}
