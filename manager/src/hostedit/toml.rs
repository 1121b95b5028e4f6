//! Codex's `config.toml` with `toml_edit`: `[mcp_servers.NAME]` tables
//! added and removed, every other table, comment and blank line kept.

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

use super::node::Node;

/// Why a TOML edit cannot be made (the caller adds the path).
#[derive(Debug)]
pub(crate) enum TomlError {
    Parse(String),
    NotATable(String),
    Exists,
    Missing,
}

fn parse(text: &str) -> Result<DocumentMut, TomlError> {
    text.parse::<DocumentMut>()
        .map_err(|e| TomlError::Parse(format!("not valid TOML: {e}")))
}

fn value(node: &Node) -> Value {
    match node {
        Node::Null => Value::from(""),
        Node::Bool(b) => Value::from(*b),
        Node::Num(n) => Value::from(i64::try_from(*n).unwrap_or(i64::MAX)),
        Node::Str(s) => Value::from(s.as_str()),
        Node::List(items) => {
            let mut a = Array::new();
            for i in items {
                a.push(value(i));
            }
            Value::Array(a)
        }
        Node::Map(items) => {
            let mut t = InlineTable::new();
            for (k, v) in items {
                t.insert(k, value(v));
            }
            Value::InlineTable(t)
        }
    }
}

/// Adds `[mcp_servers.NAME]` with the fields of `entry` (a map) at the
/// end of the file.
pub(crate) fn add(text: &str, name: &str, entry: &Node) -> Result<String, TomlError> {
    let mut doc = parse(text)?;
    let fresh = doc.as_table().is_empty();
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let Some(servers) = servers.as_table_like_mut() else {
        return Err(TomlError::NotATable("mcp_servers".into()));
    };
    if servers.contains_key(name) {
        return Err(TomlError::Exists);
    }
    let mut t = Table::new();
    if let Node::Map(fields) = entry {
        for (k, v) in fields {
            t.insert(k, Item::Value(value(v)));
        }
    }
    if !fresh {
        t.decor_mut().set_prefix("\n");
    }
    servers.insert(name, Item::Table(t));
    Ok(doc.to_string())
}

/// Removes `mcp_servers.NAME`; an implicit `mcp_servers` left empty goes
/// with it.
pub(crate) fn remove(text: &str, name: &str) -> Result<String, TomlError> {
    let mut doc = parse(text)?;
    let Some(servers) = doc.get_mut("mcp_servers") else {
        return Err(TomlError::Missing);
    };
    let implicit = servers.as_table().is_some_and(Table::is_implicit);
    let Some(servers) = servers.as_table_like_mut() else {
        return Err(TomlError::NotATable("mcp_servers".into()));
    };
    if servers.remove(name).is_none() {
        return Err(TomlError::Missing);
    }
    if implicit && servers.is_empty() {
        doc.remove("mcp_servers");
    }
    Ok(doc.to_string())
}

/// Sets `enabled` of `mcp_servers.NAME`: `enabled = false`, or no key
/// (Codex's default is enabled).
pub(crate) fn set_enabled(text: &str, name: &str, on: bool) -> Result<String, TomlError> {
    let mut doc = parse(text)?;
    let Some(server) = doc
        .get_mut("mcp_servers")
        .and_then(Item::as_table_like_mut)
        .and_then(|s| s.get_mut(name))
    else {
        return Err(TomlError::Missing);
    };
    let Some(server) = server.as_table_like_mut() else {
        return Err(TomlError::NotATable(format!("mcp_servers.{name}")));
    };
    if on {
        server.remove("enabled");
    } else if let Some(v) = server.get_mut("enabled") {
        *v = Item::Value(Value::from(false));
    } else {
        server.insert("enabled", Item::Value(Value::from(false)));
    }
    Ok(doc.to_string())
}

/// The names under `mcp_servers`.
pub(crate) fn names(text: &str) -> Result<Vec<String>, TomlError> {
    let doc = parse(text)?;
    Ok(doc
        .get("mcp_servers")
        .and_then(Item::as_table_like)
        .map(|t| t.iter().map(|(k, _)| k.to_string()).collect())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> Node {
        Node::Map(vec![
            ("command".into(), Node::Str("mcpwire".into())),
            (
                "args".into(),
                Node::List(vec![Node::Str("serve".into()), Node::Str("--demo".into())]),
            ),
            (
                "env".into(),
                Node::Map(vec![("K".into(), Node::Str("v".into()))]),
            ),
        ])
    }

    #[test]
    fn add_then_remove_is_byte_identical() {
        for before in [
            "",
            "model = \"o3\" # the model\n",
            "model = \"o3\"\n\n# servers\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs\"]\n\n[profiles.fast]\nmodel = \"o4-mini\"\n",
            "[mcp_servers]\n",
        ] {
            let added = add(before, "demo", &demo()).unwrap();
            assert!(
                added.contains("[mcp_servers.demo]\ncommand = \"mcpwire\"\nargs = [\"serve\", \"--demo\"]\nenv = { K = \"v\" }\n"),
                "{added}"
            );
            let table: toml::Table = toml::from_str(&added).unwrap();
            assert_eq!(table["mcp_servers"]["demo"]["args"][1].as_str(), Some("--demo"));
            assert_eq!(remove(&added, "demo").unwrap(), before, "{added}");
            let off = set_enabled(&added, "demo", false).unwrap();
            assert!(off.contains("enabled = false\n"), "{off}");
            assert_eq!(set_enabled(&off, "demo", true).unwrap(), added);
        }
        assert!(matches!(
            add("[mcp_servers.demo]\n", "demo", &demo()),
            Err(TomlError::Exists)
        ));
        assert!(matches!(remove("x = 1\n", "demo"), Err(TomlError::Missing)));
        assert!(matches!(
            add("[x\n", "demo", &demo()),
            Err(TomlError::Parse(_))
        ));
        assert!(matches!(
            add("mcp_servers = 1\n", "demo", &demo()),
            Err(TomlError::NotATable(_))
        ));
    }
}
