//! Goose's `config.yaml`: servers are the `extensions` map.
//!
//! | Goose                     | becomes                                        |
//! |---------------------------|------------------------------------------------|
//! | `type: stdio`, `cmd`, `args`, `envs` | `command`, `args`, `env`            |
//! | `type: sse`, `uri`        | `type: sse`, `url`                             |
//! | `type: streamable_http`, `uri`, `headers` | `type: http`, `url`, `headers` |
//! | `enabled`                 | `enabled`                                      |
//! | `timeout` (seconds)       | `timeout` (ms)                                 |
//! | `available_tools` (non-empty) | [`ToolFilter::include`](super::ToolFilter::include) |
//! | `env_keys`                | each key's value, as Goose finds it with its keyring disabled: the environment (`KEY` → `${KEY}`, expanded when the server starts), else Goose's `secrets.yaml` next to `config.yaml` (taken literally); a key found in neither fails that server, naming the key (the system keyring is not read); a key also in `envs` keeps its `envs` value |
//! | `type: builtin`, `platform`, `frontend`, `inline_python` | skipped with a note: they run inside Goose |
//!
//! YAML anchors and aliases (`&defaults` … `*defaults`) are resolved by
//! the parser (yaml-rust2): an alias reads as a copy of its anchored
//! value. Merge keys (`<<: *defaults`, `<<: [*a, *b]`: YAML 1.1's
//! <https://yaml.org/type/merge.html>, which yaml-rust2, a YAML 1.2
//! parser, leaves as a key named `<<`) are applied here, in any mapping:
//! the mapping gets the keys of the merged mapping it does not have; its
//! own keys win wherever they stand, and in a list an earlier mapping wins
//! over a later one; a merged mapping's own merge key is applied first. A
//! `<<` whose value is not a mapping or a list of mappings fails its
//! extension (above `extensions`: the file), naming the field. A quoted
//! `"<<"` key is a merge key too (the parser does not keep the quotes).
//!
//! Goose itself does not apply merge keys: it parses `config.yaml` with
//! serde_yaml into a `Mapping` and then each extension with
//! `serde_yaml::from_value` (goose `crates/goose/src/config/extensions.rs`,
//! `config/base`), and serde_yaml merges only when `Value::apply_merge` is
//! called (dtolnay/serde-yaml#317), which Goose does not. So `<<` is an
//! unknown field to Goose: an extension whose `type` or `enabled` comes
//! only from a merge is skipped by Goose as malformed, and merged fields
//! are ignored. mcpwire applies them as the file's author meant, and
//! differs from Goose there.

use std::path::Path;

use serde_json::{Map, Number, Value};
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlLoader};

use crate::paths::Env;

use super::hosts::{self, Dialect, FileServers};

/// YAML 1.1's merge key.
const MERGE: &str = "<<";

/// The name of `key` under the mapping at `at` (`""`: the top), for errors.
fn field(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

/// A mapping key as a string.
fn key_string(k: &Yaml) -> Result<String, String> {
    Ok(match k {
        Yaml::String(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Real(r) => r.clone(),
        Yaml::Boolean(b) => b.to_string(),
        _ => return Err("a mapping key is not a scalar".into()),
    })
}

/// The entries of the mapping `h` (at `at`, for errors) with its merge
/// key applied, in the file's order: its own keys, then each merged key
/// it does not have, from the first merged mapping to the last.
fn merged<'a>(h: &'a Hash, at: &str) -> Result<Vec<(String, &'a Yaml)>, String> {
    let mut out: Vec<(String, &'a Yaml)> = Vec::new();
    let mut merge = None;
    for (k, v) in h {
        if matches!(k, Yaml::String(s) if s == MERGE) {
            merge = Some(v);
        } else {
            out.push((key_string(k)?, v));
        }
    }
    let Some(merge) = merge else {
        return Ok(out);
    };
    let bad = || {
        format!(
            "`{}` (a YAML merge key) must be a mapping or a list of mappings",
            field(at, MERGE)
        )
    };
    let sources: &[Yaml] = match merge {
        Yaml::Hash(_) => std::slice::from_ref(merge),
        Yaml::Array(list) => list,
        _ => return Err(bad()),
    };
    for source in sources {
        let Yaml::Hash(source) = source else {
            return Err(bad());
        };
        for (k, v) in merged(source, at)? {
            if !out.iter().any(|(have, _)| *have == k) {
                out.push((k, v));
            }
        }
    }
    Ok(out)
}

/// A YAML value (at `at`, for errors) as JSON, merge keys applied;
/// mapping keys become strings.
fn to_json(y: &Yaml, at: &str) -> Result<Value, String> {
    Ok(match y {
        Yaml::Null | Yaml::BadValue => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::Number((*i).into()),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, v)| to_json(v, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(h) => {
            let mut m = Map::new();
            for (k, v) in merged(h, at)? {
                let value = to_json(v, &field(at, &k))?;
                m.insert(k, value);
            }
            Value::Object(m)
        }
        Yaml::Alias(_) => return Err("a YAML alias the parser left unresolved".into()),
    })
}

/// A YAML file's first document (`None`: empty file).
fn first_document(bytes: &[u8]) -> Result<Option<Yaml>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    Ok(docs.into_iter().next())
}

/// A YAML file's first document as a JSON object (`None`: empty file).
pub(crate) fn yaml_object(bytes: &[u8]) -> Result<Option<Map<String, Value>>, String> {
    let Some(doc) = first_document(bytes)? else {
        return Ok(None);
    };
    match to_json(&doc, "")? {
        Value::Object(m) => Ok(Some(m)),
        Value::Null => Ok(None),
        _ => Err("not a YAML mapping".into()),
    }
}

/// Goose's `secrets.yaml` (`KEY: value`), read when a key is not in the
/// environment; a missing file has no keys.
struct Secrets<'a> {
    path: &'a Path,
    loaded: Option<Result<Map<String, Value>, String>>,
}

impl Secrets<'_> {
    fn get(&mut self, key: &str) -> Result<Option<String>, String> {
        let path = self.path;
        let map = self
            .loaded
            .get_or_insert_with(|| match std::fs::read(path) {
                Ok(bytes) => yaml_object(&bytes)
                    .map(Option::unwrap_or_default)
                    .map_err(|e| format!("{}: {e}", path.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
                Err(e) => Err(format!("{}: cannot read: {e}", path.display())),
            });
        let map = map.as_ref().map_err(Clone::clone)?;
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(_) => Err(format!("`{key}` in {} is not a string", path.display())),
        }
    }
}

/// The servers of a Goose `config.yaml`; `env` and `secrets` (its
/// `secrets.yaml`) give the values of `env_keys`. Each extension is read
/// on its own: a bad merge key in one fails that one.
pub(crate) fn servers(bytes: &[u8], env: &Env, secrets: &Path) -> Result<FileServers, String> {
    let top = match first_document(bytes)? {
        None | Some(Yaml::Null) => return Ok(FileServers::default()),
        Some(Yaml::Hash(h)) => h,
        Some(_) => return Err("not a YAML mapping".into()),
    };
    let top = merged(&top, "")?;
    let extensions = match top.iter().find(|(k, _)| k == "extensions") {
        None | Some((_, Yaml::Null)) => return Ok(FileServers::default()),
        Some((_, Yaml::Hash(h))) => h,
        Some(_) => return Err("`extensions` is not a mapping".into()),
    };
    let mut extensions = merged(extensions, "extensions")?;
    extensions.sort_by(|a, b| a.0.cmp(&b.0));
    let mut secrets = Secrets {
        path: secrets,
        loaded: None,
    };
    let mut out = FileServers::default();
    for (name, y) in extensions {
        let v = match to_json(y, "") {
            Ok(v) => v,
            Err(e) => {
                out.entries.push((name, Err(format!("invalid entry: {e}"))));
                continue;
            }
        };
        match entry(&v, env, &mut secrets) {
            Ok(Some(e)) => out.entries.push((name, Ok(e))),
            Ok(None) => out.notes.push(format!(
                "`extensions.{name}`: a Goose {} extension (it runs inside Goose): skipped",
                v.get("type").and_then(Value::as_str).unwrap_or("?")
            )),
            Err(e) => out.entries.push((name, Err(e))),
        }
    }
    Ok(out)
}

/// One extension in the standard shape, `None` for one that runs inside
/// Goose.
fn entry(v: &Value, env: &Env, secrets: &mut Secrets<'_>) -> Result<Option<hosts::Parsed>, String> {
    let Value::Object(g) = v else {
        return Err("invalid entry: not a mapping".into());
    };
    let kind = match g.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("invalid entry: `type` must be a string".into()),
        None => return Err("invalid entry: `type` is missing".into()),
    };
    let kind = match kind {
        "stdio" => "stdio",
        "sse" => "sse",
        "streamable_http" => "http",
        "builtin" | "platform" | "frontend" | "inline_python" => return Ok(None),
        other => return Err(format!("invalid entry: unknown `type` `{other}`")),
    };
    // Goose's keys under the standard names, then the shared reader.
    let mut m = Map::new();
    m.insert("type".into(), Value::String(kind.into()));
    for (from, to) in [
        ("cmd", "command"),
        ("args", "args"),
        ("envs", "env"),
        ("uri", "url"),
        ("headers", "headers"),
        ("enabled", "enabled"),
    ] {
        if let Some(x) = g.get(from) {
            m.insert(to.into(), x.clone());
        }
    }
    let rename = |e: String| {
        e.replace("`command`", "`cmd`")
            .replace("`env", "`envs")
            .replace("`url`", "`uri`")
    };
    let mut p = hosts::json_entry(&Value::Object(m), Dialect::Standard)
        .map_err(rename)?
        .map_err(rename)?;
    let secs = |key: &str| -> Result<Option<u64>, String> {
        match g.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(s) if s >= 0.0 => Ok(Some((s * 1000.0) as u64)),
                _ => Err(format!(
                    "invalid entry: `{key}` must be a number of seconds"
                )),
            },
            Some(_) => Err(format!(
                "invalid entry: `{key}` must be a number of seconds"
            )),
        }
    };
    p.config.timeout = secs("timeout")?;
    let list = |key: &str| -> Result<Vec<String>, String> {
        match g.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("invalid entry: `{key}` must be a list of strings")),
            Some(_) => Err(format!("invalid entry: `{key}` must be a list of strings")),
        }
    };
    for key in list("env_keys")? {
        if p.config.env.contains_key(&key) {
            continue;
        }
        if env.get(&key).is_some() {
            p.config.env.insert(key.clone(), format!("${{{key}}}"));
            continue;
        }
        match secrets.get(&key) {
            Ok(Some(value)) => {
                p.config.env.insert(key, value.replace("${", "$${"));
            }
            Ok(None) => {
                return Err(format!(
                    "invalid entry: `env_keys`: `{key}` is not set in the environment nor in {} \
                     (Goose's system keyring is not read)",
                    secrets.path.display()
                ))
            }
            Err(e) => return Err(format!("invalid entry: `env_keys`: {e}")),
        }
    }
    let tools = list("available_tools")?;
    if !tools.is_empty() {
        p.tools.include = Some(tools);
    }
    Ok(Some(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(bytes: &[u8]) -> Result<FileServers, String> {
        super::servers(
            bytes,
            &Env::from_pairs::<&str, &str>([]),
            Path::new("/nonexistent/secrets.yaml"),
        )
    }

    #[test]
    fn merge_keys_follow_yaml_1_1() {
        let f = servers(
            br#"
a: &a {type: stdio, cmd: from-a, timeout: 1, envs: {A: a}}
b: &b {cmd: from-b, timeout: 2, args: [from-b]}
extensions:
  after:
    <<: *a
    cmd: own
  list:
    <<: [*b, *a]
  nested:
    <<: *a
    envs: {<<: [{A: x, B: b}], C: c}
  badlist:
    <<: [*a, 3]
  badnested:
    <<: *a
    envs: {<<: text}
"#,
        )
        .unwrap();
        let get = |n: &str| f.entries.iter().find(|e| e.0 == n).unwrap().1.clone();
        let after = get("after").unwrap().config;
        assert_eq!(after.command.as_deref(), Some("own"), "own key after `<<`");
        assert_eq!(after.timeout, Some(1000));
        let list = get("list").unwrap().config;
        assert_eq!(list.command.as_deref(), Some("from-b"), "earlier wins");
        assert_eq!(list.timeout, Some(2000));
        assert_eq!(list.args, ["from-b"]);
        assert_eq!(list.env["A"], "a", "keys only the later one has");
        let nested = get("nested").unwrap().config;
        assert_eq!(nested.env.len(), 3);
        assert_eq!(
            (&nested.env["A"], &nested.env["B"], &nested.env["C"]),
            (&"x".to_string(), &"b".to_string(), &"c".to_string())
        );
        let e = get("badlist").unwrap_err();
        assert_eq!(
            e,
            "invalid entry: `<<` (a YAML merge key) must be a mapping or a list of mappings"
        );
        let e = get("badnested").unwrap_err();
        assert!(e.contains("`envs.<<` (a YAML merge key)"), "{e}");
        // Entries stay in name order, as before.
        let names: Vec<&str> = f.entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(names, ["after", "badlist", "badnested", "list", "nested"]);
    }

    #[test]
    fn goose_errors_name_goose_fields() {
        let f = servers(
            b"extensions:\n  a:\n    type: stdio\n    cmd: 5\n  b:\n    type: stdio\n    cmd: x\n    envs:\n      K: [1]\n  c:\n    type: websocket\n  d:\n    type: sse\n    uri: http://h/sse\n    timeout: ten\n  e:\n    cmd: x\n",
        )
        .unwrap();
        let err = |n: &str| {
            f.entries
                .iter()
                .find(|e| e.0 == n)
                .unwrap()
                .1
                .clone()
                .unwrap_err()
        };
        assert!(err("a").contains("`cmd` must be a string"), "{}", err("a"));
        assert!(
            err("b").contains("`envs.K` must be a string"),
            "{}",
            err("b")
        );
        assert!(err("c").contains("unknown `type` `websocket`"));
        assert!(err("d").contains("`timeout` must be a number of seconds"));
        assert!(err("e").contains("`type` is missing"));
        assert!(servers(b"extensions: [1]")
            .unwrap_err()
            .contains("`extensions`"));
        assert!(servers(b"a: [\n").unwrap_err().contains("not valid YAML"));
        assert!(servers(b"").unwrap().entries.is_empty());
        assert!(servers(b"GOOSE_MODEL: x\n").unwrap().entries.is_empty());
    }
}
