//! Extensions a client declares (`capabilities.extensions`, a map of
//! extension identifiers to settings objects: formal in 2026-07-28, sent
//! in `initialize` too, as SDKs do, for servers of 2025-11-25), and the
//! typed parts of MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865): the
//! declaration that makes capability-gated servers offer their UI, and a
//! tool's `_meta.ui` link to its `ui://` resource.

use serde_json::{Map, Value};

use super::types::{ClientCapabilities, Tool};

/// The MCP Apps extension's identifier.
pub const MCP_APPS: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an MCP App's HTML resource.
pub const MCP_APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// An extension identifier that does not follow the `_meta` key rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid extension identifier {0:?}: expected a prefix of dot-separated labels, a slash \
     and a name (e.g. io.modelcontextprotocol/ui)"
)]
pub struct ExtensionError(pub String);

/// Checks `id` against the `_meta` key naming rules with the mandatory
/// prefix: `label(.label)*/name`, labels starting with a letter and made of
/// letters, digits and hyphens; the name starting and ending with a letter
/// or digit, with `-`, `_` and `.` inside.
pub fn check_identifier(id: &str) -> Result<(), ExtensionError> {
    let bad = || ExtensionError(id.chars().take(100).collect());
    let (prefix, name) = id.split_once('/').ok_or_else(bad)?;
    let label_ok = |l: &str| {
        l.starts_with(|c: char| c.is_ascii_alphabetic())
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    let name_ok = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if prefix.split('.').all(label_ok) && name_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

/// Declares extension `id` with `settings` (an object; `{}` declares
/// support with no settings) in `capabilities`, replacing an earlier
/// declaration of it.
pub fn declare(
    capabilities: &mut ClientCapabilities,
    id: &str,
    settings: Map<String, Value>,
) -> Result<(), ExtensionError> {
    check_identifier(id)?;
    let extensions = capabilities
        .extra
        .entry("extensions")
        .or_insert_with(|| Value::Object(Map::new()));
    if !extensions.is_object() {
        *extensions = Value::Object(Map::new());
    }
    if let Value::Object(map) = extensions {
        map.insert(id.to_owned(), Value::Object(settings));
    }
    Ok(())
}

/// The settings of MCP Apps a host that renders HTML apps declares.
pub fn mcp_apps_settings() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("mimeTypes".into(), serde_json::json!([MCP_APP_MIME_TYPE]));
    m
}

/// Who may see and call a tool, as MCP Apps says (`_meta.ui.visibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// The model (the agent's tool list).
    Model,
    /// The app's UI.
    App,
}

/// A tool's link to its MCP App (`_meta.ui`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUi {
    /// The `ui://` resource to render for it.
    pub resource_uri: Option<String>,
    /// Who sees it (default: both).
    pub visibility: Vec<Visibility>,
}

impl ToolUi {
    /// Whether the agent's model may see the tool (MCP Apps: a host must
    /// leave it out of the model's list otherwise).
    pub fn for_model(&self) -> bool {
        self.visibility.contains(&Visibility::Model)
    }
}

/// The MCP App link of `tool` (`_meta.ui`, or the older flat
/// `_meta["ui/resourceUri"]`), if it has one. Malformed parts are left out,
/// never the tool.
pub fn tool_ui(tool: &Tool) -> Option<ToolUi> {
    let meta = tool.extra.get("_meta")?.as_object()?;
    let ui = meta.get("ui").and_then(Value::as_object);
    let resource_uri = ui
        .and_then(|u| u.get("resourceUri"))
        .or_else(|| meta.get("ui/resourceUri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let visibility = match ui
        .and_then(|u| u.get("visibility"))
        .and_then(Value::as_array)
    {
        Some(list) => list
            .iter()
            .filter_map(|v| match v.as_str()? {
                "model" => Some(Visibility::Model),
                "app" => Some(Visibility::App),
                _ => None,
            })
            .collect(),
        None => vec![Visibility::Model, Visibility::App],
    };
    if ui.is_none() && resource_uri.is_none() {
        return None;
    }
    Some(ToolUi {
        resource_uri,
        visibility,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers() {
        for ok in [
            "io.modelcontextprotocol/ui",
            "com.example/my-ext",
            "acme/x_1.2",
        ] {
            assert!(check_identifier(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ui",
            "/ui",
            "io.modelcontextprotocol/",
            "1io/ui",
            "io..x/ui",
            "io/-ui",
            "io/ui/x",
            "io/u i",
        ] {
            assert!(check_identifier(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn declared_in_capabilities() {
        let mut caps = ClientCapabilities::default();
        declare(&mut caps, MCP_APPS, mcp_apps_settings()).unwrap();
        declare(&mut caps, "com.example/x", Map::new()).unwrap();
        let v = serde_json::to_value(&caps).unwrap();
        assert_eq!(
            v["extensions"][MCP_APPS],
            json!({"mimeTypes": ["text/html;profile=mcp-app"]})
        );
        assert_eq!(v["extensions"]["com.example/x"], json!({}));
        assert!(declare(&mut caps, "nope", Map::new()).is_err());
    }

    #[test]
    fn tool_links() {
        let tool = |meta: Value| -> Tool {
            serde_json::from_value(json!({"name": "t", "inputSchema": {}, "_meta": meta})).unwrap()
        };
        let ui = tool_ui(&tool(json!({"ui": {"resourceUri": "ui://w/d"}}))).unwrap();
        assert_eq!(ui.resource_uri.as_deref(), Some("ui://w/d"));
        assert!(ui.for_model());
        let ui = tool_ui(&tool(
            json!({"ui": {"resourceUri": "ui://w/d", "visibility": ["app"]}}),
        ))
        .unwrap();
        assert!(!ui.for_model());
        let ui = tool_ui(&tool(json!({"ui/resourceUri": "ui://old"}))).unwrap();
        assert_eq!(ui.resource_uri.as_deref(), Some("ui://old"));
        assert!(tool_ui(&tool(json!({"other": 1}))).is_none());
        assert!(tool_ui(&tool(json!({"ui": {"resourceUri": 7}})))
            .unwrap()
            .resource_uri
            .is_none());
    }
}
