//! VS Code's `mcp.json`: its variables, `envFile` and `inputs`.
//!
//! | in the file               | becomes                                         |
//! |---------------------------|-------------------------------------------------|
//! | `${workspaceFolder}`      | the project directory                           |
//! | `${workspaceFolderBasename}` | its last component                           |
//! | `${userHome}`             | the home directory                              |
//! | `${pathSeparator}`, `${/}` | the platform's path separator                  |
//! | `${env:NAME}`             | `${NAME:-}`: the variable when the server starts, empty when unset (as VS Code) |
//! | `${input:ID}`             | kept; the entry lists the input in [`ServerEntry::inputs`](super::ServerEntry::inputs) and the host supplies its value ([`crate::ManagerOptions::inputs`]) |
//! | `${VAR}`, `${VAR:-x}`, `$${` | kept: mcpwire's own expansion                 |
//! | any other `${a:b}` (`config:`, `command:`) | an error naming the field      |
//!
//! Substitution applies to `command`, `args`, `env` values, `cwd`, `url`,
//! `headers` values and `envFile`. `envFile` (a dotenv file, relative
//! paths from the project directory) is read at discovery; `env` wins
//! over it. Only `promptString` inputs are supported.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use mcpwire::config::ServerConfig;
use serde_json::{Map, Value};

use super::hosts::{self, Dialect, FileServers};

/// A value VS Code asks the user for: an entry of `inputs` with
/// `"type": "promptString"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// Its id, as in `${input:ID}`.
    pub id: String,
    /// The question shown to the user.
    pub description: Option<String>,
    /// Whether the answer is a secret (typed without echo).
    pub password: bool,
    /// The answer when the user gives none.
    pub default: Option<String>,
}

/// Where VS Code's variables point.
pub(crate) struct Context<'a> {
    pub(crate) workspace: &'a Path,
    pub(crate) home: Option<&'a Path>,
}

/// The declared `inputs`, by id; other kinds are kept as an error.
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
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let input = match v.get("type").and_then(Value::as_str) {
            Some("promptString") => Ok(Input {
                id: id.to_string(),
                description: text("description"),
                password: v.get("password").and_then(Value::as_bool) == Some(true),
                default: text("default"),
            }),
            Some(other) => Err(format!(
                "input `{id}` is a {other}: only promptString inputs are supported"
            )),
            None => Err(format!("`inputs[{i}].type` must be a string")),
        };
        out.insert(id.to_string(), input);
    }
    Ok(out)
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
                } else if body.contains(':') && !body.contains(":-") {
                    return Err(format!("`{field}`: VS Code's `{whole}` is not supported"));
                } else {
                    out.push_str(whole);
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
        assert_eq!(
            s("${HOME} ${A:-${B}} $${lit} $x $"),
            "${HOME} ${A:-${B}} $${lit} $x $"
        );
        let (t, used) = sub("Bearer ${input:tok} ${input:tok} ${input:b}").unwrap();
        assert_eq!(t, "Bearer ${input:tok} ${input:tok} ${input:b}");
        assert_eq!(used.into_iter().collect::<Vec<_>>(), ["b", "tok"]);
        assert!(sub("${command:pick}")
            .unwrap_err()
            .contains("`args[0]`: VS Code's `${command:pick}`"));
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
