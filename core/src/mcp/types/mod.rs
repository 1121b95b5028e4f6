//! Typed MCP requests, results and notifications (protocol 2025-11-25, read
//! leniently back to 2024-11-05).
//!
//! Every struct keeps the fields it does not know in `extra`, so a newer
//! server's additions survive a round trip and reach the application.
//! Names follow the schema (`schema/2025-11-25/schema.ts`) in Rust case.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod client;
mod tasks;
pub use client::{
    CreateMessageRequest, CreateMessageResult, ElicitAction, ElicitForm, ElicitRequest,
    ElicitResult, ElicitUrl, ElicitationComplete, Icon, InvalidParams, SamplingContent,
    SamplingContentList, SamplingMessage, ToolAnnotations, ToolChoice, UrlElicitationRequired,
    URL_ELICITATION_REQUIRED,
};
pub use tasks::{
    ListTasksResult, Task, TaskStarted, TaskStatus, TaskSupport, RELATED_TASK_META_KEY,
    TASKS_EXTENSION,
};

/// Fields a newer revision added that this crate does not model.
pub type Extra = Map<String, Value>;

/// The name and version of an MCP implementation (`clientInfo`, `serverInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Everything else (icons, websiteUrl, description, …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl Implementation {
    /// An implementation with just a name and a version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Implementation {
            name: name.into(),
            version: version.into(),
            title: None,
            extra: Extra::new(),
        }
    }
}

/// A `{ listChanged?: bool }` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListChanged {
    /// Whether the peer sends `…/list_changed` notifications.
    #[serde(
        default,
        rename = "listChanged",
        skip_serializing_if = "Option::is_none"
    )]
    pub list_changed: Option<bool>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The server's `resources` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourcesCapability {
    /// Whether `resources/subscribe` is supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// Whether `notifications/resources/list_changed` is sent.
    #[serde(
        default,
        rename = "listChanged",
        skip_serializing_if = "Option::is_none"
    )]
    pub list_changed: Option<bool>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a server offers (`InitializeResult.capabilities`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCapabilities {
    /// `tools/*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListChanged>,
    /// `resources/*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// `prompts/*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListChanged>,
    /// `logging/setLevel` and log notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<Value>,
    /// `completion/complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<Value>,
    /// Non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<Map<String, Value>>,
    /// Unknown members (e.g. `tasks`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a client offers (`InitializeRequest.capabilities`).
///
/// Declare only what the application really handles: a server that sees
/// `sampling` will send `sampling/createMessage` and wait for the answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCapabilities {
    /// `roots/list`; `listChanged` when the app sends
    /// `notifications/roots/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<ListChanged>,
    /// `sampling/createMessage` (members such as `tools`, `context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Map<String, Value>>,
    /// `elicitation/create`, with the modes handled (`form`, `url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<Map<String, Value>>,
    /// Non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<Map<String, Value>>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The `initialize` request's params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The newest version the client speaks.
    pub protocol_version: String,
    /// What the client offers.
    pub capabilities: ClientCapabilities,
    /// Who the client is.
    pub client_info: Implementation,
}

/// The `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The version the server chose.
    pub protocol_version: String,
    /// What the server offers.
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// Who the server is.
    pub server_info: Implementation,
    /// How to use the server, for the model's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One tool (`tools/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Programmatic name, used in `tools/call`.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of `arguments`.
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Behaviour hints (`readOnlyHint`, `destructiveHint`, …). Hints of
    /// the wrong type are dropped, never the tool.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "client::lenient"
    )]
    pub annotations: Option<ToolAnnotations>,
    /// Icons a host may show (left out when malformed, never the tool).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "client::lenient"
    )]
    pub icons: Option<Vec<Icon>>,
    /// Unknown members (`execution`, `_meta`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl Tool {
    /// Its MCP App link (`_meta.ui`: the `ui://` resource to render, and
    /// who may see it), if it has one (see [`crate::mcp::ext`]).
    pub fn ui(&self) -> Option<crate::mcp::ext::ToolUi> {
        crate::mcp::ext::tool_ui(self)
    }
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// One page of `tools/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// The tools on this page.
    pub tools: Vec<Tool>,
    /// Cursor of the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ListToolsResult {
    /// How long the server said this page stays fresh (`ttlMs`,
    /// 2026-07-28, SEP-2549); `None` when it said nothing or zero.
    pub fn ttl(&self) -> Option<std::time::Duration> {
        self.extra
            .get("ttlMs")
            .and_then(Value::as_u64)
            .filter(|ms| *ms > 0)
            .map(std::time::Duration::from_millis)
    }
}

/// The contents of a resource: text or base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64 binary contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One block of content in a tool result, prompt message or sampling
/// message.
///
/// Read by a hand-written visitor (`types/fast.rs`): the `type` member comes
/// first in practice, and then every field goes straight to its place
/// (serde's derive for an internally tagged enum with unknown members
/// kept would first copy the whole object into a buffer). Any other order,
/// or a known type whose fields do not fit, takes the derived path, with
/// the same result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum Content {
    /// Plain text.
    #[serde(rename = "text")]
    Text {
        /// The text.
        text: String,
        /// Unknown members (`annotations`, `_meta`).
        #[serde(flatten)]
        extra: Extra,
    },
    /// A base64 image.
    #[serde(rename = "image")]
    Image {
        /// Base64 data.
        data: String,
        /// MIME type, e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Unknown members.
        #[serde(flatten)]
        extra: Extra,
    },
    /// Base64 audio.
    #[serde(rename = "audio")]
    Audio {
        /// Base64 data.
        data: String,
        /// MIME type, e.g. `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Unknown members.
        #[serde(flatten)]
        extra: Extra,
    },
    /// A link to a resource the client may read.
    #[serde(rename = "resource_link")]
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// Its name.
        name: String,
        /// Unknown members (`title`, `description`, `mimeType`, `size`, …).
        #[serde(flatten)]
        extra: Extra,
    },
    /// A resource embedded in full.
    #[serde(rename = "resource")]
    Resource {
        /// The contents.
        resource: ResourceContents,
        /// Unknown members.
        #[serde(flatten)]
        extra: Extra,
    },
    /// A content type newer than this crate, kept as JSON.
    #[serde(untagged)]
    Other(Value),
}

/// The result of `tools/call` (read by a hand-written visitor, see
/// `types/fast.rs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// Unstructured content.
    #[serde(default)]
    pub content: Vec<Content>,
    /// Structured content matching the tool's `outputSchema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// True when the tool failed (the failure is in `content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Unknown members (`_meta`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl CallToolResult {
    /// `isError: true`.
    pub fn is_error(&self) -> bool {
        self.is_error == Some(true)
    }

    /// The text blocks joined with newlines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.content {
            if let Content::Text { text, .. } = c {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

/// One resource (`resources/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Unknown members (`size`, `annotations`, `icons`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// One page of `resources/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourcesResult {
    /// The resources on this page.
    pub resources: Vec<Resource>,
    /// Cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One resource template (`resources/templates/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// RFC 6570 URI template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One page of `resources/templates/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourceTemplatesResult {
    /// The templates on this page.
    pub resource_templates: Vec<ResourceTemplate>,
    /// Cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The result of `resources/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    /// One or more contents.
    pub contents: Vec<ResourceContents>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One prompt (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// Its name, used in `prompts/get`.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Arguments it takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One page of `prompts/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPromptsResult {
    /// The prompts on this page.
    pub prompts: Vec<Prompt>,
    /// Cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The content.
    pub content: Content,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The result of `prompts/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetPromptResult {
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<PromptMessage>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The `completion` member of a `completion/complete` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// Suggested values (at most 100).
    pub values: Vec<String>,
    /// Total number of matches, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether more exist beyond `values`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The result of `completion/complete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteResult {
    /// The completion.
    pub completion: Completion,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Log levels of `logging/setLevel` and `notifications/message` (RFC 5424).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum LoggingLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// `notifications/message` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggingMessage {
    /// Severity.
    pub level: LoggingLevel,
    /// Logger name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// Any JSON.
    pub data: Value,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `notifications/resources/updated` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceUpdated {
    /// The resource that changed.
    pub uri: String,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One root (`roots/list` answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

mod fast;
pub(crate) mod read;

/// The engine's check of a `tools/call` answer (where the common tool
/// result at the start of `text` ends, checked as JSON; `None`: not that
/// shape): public for the fuzz target that holds it to serde_json.
#[doc(hidden)]
pub fn tool_result_end(text: &str) -> Option<usize> {
    read::common_end(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_kinds_and_unknown_fields_round_trip() {
        let v = json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"priority": 1}},
                {"type": "image", "data": "AAA=", "mimeType": "image/png"},
                {"type": "audio", "data": "AAA=", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "size": 3},
                {"type": "resource", "resource": {"uri": "test://x", "text": "t", "mimeType": "text/plain"}},
                {"type": "hologram", "frames": 3}
            ],
            "structuredContent": {"sum": 3},
            "isError": false,
            "_meta": {"x": 1}
        });
        let r: CallToolResult = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(r.content.len(), 6);
        assert!(matches!(&r.content[3], Content::ResourceLink { extra, .. } if extra["size"] == 3));
        assert!(matches!(&r.content[5], Content::Other(o) if o["type"] == "hologram"));
        assert_eq!(r.text(), "hi");
        assert!(!r.is_error());
        assert_eq!(serde_json::to_value(&r).unwrap(), v);
    }

    #[test]
    fn initialize_result_keeps_what_it_does_not_know() {
        let v = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}, "tasks": {"list": {}}},
            "serverInfo": {"name": "s", "version": "1", "icons": []},
            "instructions": "be nice",
            "future": 1
        });
        let r: InitializeResult = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            r.capabilities.tools.as_ref().unwrap().list_changed,
            Some(true)
        );
        assert!(r.capabilities.extra.contains_key("tasks"));
        assert_eq!(serde_json::to_value(&r).unwrap(), v);
    }
}
