//! What a server asks a client, typed: elicitation (form and URL modes,
//! MCP 2025-11-25) and sampling (with tools, SEP-1577), and the tool
//! metadata a host shows (annotations, icons).
//!
//! Every type keeps the members it does not know in `extra`, so nothing a
//! newer server sends is lost on the way to the application or back.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Content, Extra};
use crate::mcp::ServerRequestKind;

/// A server request's params do not parse: what a handler answers the
/// server, as a -32602 (invalid params)
/// [`ErrorObject`](crate::rpc::ErrorObject) with this message
/// (`From`, so `?` in a handler returning `Result<_, ErrorObject>` does
/// it).
#[derive(Debug, thiserror::Error)]
#[error("invalid {} params: {source}", kind.method())]
pub struct InvalidParams {
    /// The request (its method).
    pub kind: ServerRequestKind,
    /// What is wrong.
    pub source: serde_json::Error,
}

impl InvalidParams {
    fn new(kind: ServerRequestKind, source: serde_json::Error) -> Self {
        InvalidParams { kind, source }
    }
}

// ---------------------------------------------------------------- elicitation

/// The params of `elicitation/create`, by mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitRequest {
    /// Fill in a form (`requestedSchema`: a flat object of primitive
    /// properties). Also the mode of a request that names none.
    Form(ElicitForm),
    /// Visit a URL (an authorization, a payment, a secret that must not
    /// pass through the client).
    Url(ElicitUrl),
}

impl ElicitRequest {
    /// Parses `elicitation/create` params: a request without `mode` is a
    /// form (as before 2025-11-25).
    pub fn parse(params: &Value) -> Result<Self, serde_json::Error> {
        if params.get("mode").is_none() {
            return serde_json::from_value(params.clone()).map(ElicitRequest::Form);
        }
        serde_json::from_value(params.clone())
    }

    /// [`ElicitRequest::parse`] for a handler: when they do not parse, the
    /// -32602 (invalid params) the server gets ([`InvalidParams`], an
    /// [`ErrorObject`](crate::rpc::ErrorObject) by `From`).
    pub fn from_params(params: Value) -> Result<Self, InvalidParams> {
        Self::parse(&params).map_err(|e| InvalidParams::new(ServerRequestKind::Elicit, e))
    }

    /// The message to show the user.
    pub fn message(&self) -> &str {
        match self {
            ElicitRequest::Form(f) => &f.message,
            ElicitRequest::Url(u) => &u.message,
        }
    }
}

/// A form elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitForm {
    /// Why the input is needed.
    pub message: String,
    /// The restricted JSON Schema of the answer's `content`.
    #[serde(default)]
    pub requested_schema: Value,
    /// Unknown members (`_meta`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A URL elicitation (also an item of a -32042 error's `elicitations`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitUrl {
    /// Why the user should go there and what to do.
    pub message: String,
    /// Where.
    pub url: String,
    /// The server's id of this elicitation: its
    /// `notifications/elicitation/complete` names it.
    pub elicitation_id: String,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted (a form's `content` goes with it; for a URL: agreed to go).
    Accept,
    /// Said no.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// The result of `elicitation/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The form's values (accept, form mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ElicitResult {
    /// Accepted with these values (form mode).
    pub fn accept(content: Map<String, Value>) -> Self {
        ElicitResult {
            action: ElicitAction::Accept,
            content: Some(content),
            extra: Extra::new(),
        }
    }

    /// Accepted without values (URL mode: the user went).
    pub fn accept_url() -> Self {
        ElicitResult {
            action: ElicitAction::Accept,
            content: None,
            extra: Extra::new(),
        }
    }

    /// Declined.
    pub fn decline() -> Self {
        ElicitResult {
            action: ElicitAction::Decline,
            content: None,
            extra: Extra::new(),
        }
    }

    /// Cancelled.
    pub fn cancel() -> Self {
        ElicitResult {
            action: ElicitAction::Cancel,
            content: None,
            extra: Extra::new(),
        }
    }
}

/// `notifications/elicitation/complete`: a URL elicitation finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationComplete {
    /// The [`ElicitUrl::elicitation_id`] it completes.
    pub elicitation_id: String,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The JSON-RPC error code of "the user must first complete these URL
/// elicitations" (`URLElicitationRequiredError`).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The `data` of a -32042 error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrlElicitationRequired {
    /// The URL elicitations to complete before asking again.
    pub elicitations: Vec<ElicitUrl>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------- sampling

/// The params of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageRequest {
    /// The conversation.
    pub messages: Vec<SamplingMessage>,
    /// Most tokens to generate.
    pub max_tokens: u64,
    /// A system prompt the server asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// `none`, `thisServer` or `allServers` (soft-deprecated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Where to stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Model hints and priorities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<Value>,
    /// Provider-specific metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Tools the model may call (only sent to a client that declared
    /// `sampling.tools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<super::Tool>>,
    /// How the model may use them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Unknown members (`_meta`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl CreateMessageRequest {
    /// Typed `sampling/createMessage` params for a handler: when they do
    /// not parse, the -32602 (invalid params) the server gets
    /// ([`InvalidParams`], an [`ErrorObject`](crate::rpc::ErrorObject) by
    /// `From`).
    pub fn from_params(params: Value) -> Result<Self, InvalidParams> {
        serde_json::from_value(params)
            .map_err(|e| InvalidParams::new(ServerRequestKind::CreateMessage, e))
    }
}

/// How a sampled model may use the tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChoice {
    /// `auto`, `required` or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One message of a sampled conversation: one block or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Its content.
    pub content: SamplingContentList,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A message's content: one block, or (with tools) a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SamplingContentList {
    /// One block.
    One(SamplingContent),
    /// Several (tool uses, tool results beside text).
    Many(Vec<SamplingContent>),
}

impl SamplingContentList {
    /// The blocks, one or many.
    pub fn blocks(&self) -> &[SamplingContent] {
        match self {
            SamplingContentList::One(b) => std::slice::from_ref(b),
            SamplingContentList::Many(v) => v,
        }
    }
}

/// A block of a sampled message: a tool use, a tool result, or content
/// as in a tool's result (text, image, audio).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum SamplingContent {
    /// The model calls a tool.
    #[serde(rename = "tool_use")]
    ToolUse {
        /// The call's id (a tool result names it).
        id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        #[serde(default)]
        input: Value,
        /// Unknown members.
        #[serde(flatten)]
        extra: Extra,
    },
    /// A tool call's result, given back to the model.
    #[serde(rename = "tool_result")]
    ToolResult {
        /// The [`SamplingContent::ToolUse`] id it answers.
        #[serde(rename = "toolUseId")]
        tool_use_id: String,
        /// The result's content.
        #[serde(default)]
        content: Vec<Content>,
        /// Its structured result.
        #[serde(
            rename = "structuredContent",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        structured_content: Option<Value>,
        /// Whether the tool failed.
        #[serde(rename = "isError", default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        /// Unknown members.
        #[serde(flatten)]
        extra: Extra,
    },
    /// Text, an image or audio (the shapes of [`Content`]).
    #[serde(untagged)]
    Content(Content),
}

/// The result of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Normally `assistant`.
    pub role: String,
    /// What the model produced (tool uses included).
    pub content: SamplingContentList,
    /// The model that produced it.
    pub model: String,
    /// `endTurn`, `stopSequence`, `maxTokens`, `toolUse`, or the
    /// provider's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

impl CreateMessageResult {
    /// An assistant's text.
    pub fn text(model: impl Into<String>, text: impl Into<String>) -> Self {
        CreateMessageResult {
            role: "assistant".into(),
            content: SamplingContentList::One(SamplingContent::Content(Content::Text {
                text: text.into(),
                extra: Extra::new(),
            })),
            model: model.into(),
            stop_reason: Some("endTurn".into()),
            extra: Extra::new(),
        }
    }
}

// ---------------------------------------------------------------- tool metadata

/// Deserializes an optional member that must not sink its parent: a value
/// of the wrong shape reads as absent (what a server sends is not ours to
/// refuse wholesale for a display hint).
pub(super) fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

/// A tool's behaviour hints (untrusted unless the server is).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// A display name.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub title: Option<String>,
    /// It changes nothing.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub read_only_hint: Option<bool>,
    /// It may destroy (when not read-only).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub destructive_hint: Option<bool>,
    /// Calling it twice with the same arguments does no more.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub idempotent_hint: Option<bool>,
    /// It reaches the world outside (the web, …).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub open_world_hint: Option<bool>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An icon of a tool, prompt, resource or server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// A URL (`https:` or `data:`).
    pub src: String,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes, e.g. `48x48` or `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// `light` or `dark`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Params that do not parse: an `InvalidParams` naming the method,
    /// which is the -32602 the server gets.
    #[test]
    fn params_that_do_not_parse_are_invalid_params() {
        let e = ElicitRequest::from_params(json!({"mode": "url"})).unwrap_err();
        assert_eq!(e.kind, ServerRequestKind::Elicit);
        let text = e.to_string();
        assert!(
            text.starts_with("invalid elicitation/create params: "),
            "{text}"
        );
        let object = crate::rpc::ErrorObject::from(e);
        assert_eq!((object.code, object.message), (-32602, text));
        let e = CreateMessageRequest::from_params(json!([])).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("invalid sampling/createMessage params: "));
    }

    #[test]
    fn elicitation_modes_round_trip() {
        let form = ElicitRequest::parse(
            &json!({"message": "Who?", "requestedSchema": {"type": "object", "properties": {}}}),
        )
        .unwrap();
        assert!(matches!(&form, ElicitRequest::Form(f) if f.message == "Who?"));
        let url = ElicitRequest::parse(&json!({"mode": "url", "message": "Pay", "url": "https://pay.example/x", "elicitationId": "e1", "_meta": {"k": 1}})).unwrap();
        let ElicitRequest::Url(u) = &url else {
            panic!("{url:?}")
        };
        assert_eq!(
            (u.url.as_str(), u.elicitation_id.as_str()),
            ("https://pay.example/x", "e1")
        );
        assert_eq!(u.extra["_meta"], json!({"k": 1}));
        assert_eq!(serde_json::to_value(&url).unwrap()["mode"], "url");
        assert!(ElicitRequest::parse(&json!({"mode": "url", "message": "no url"})).is_err());
        let r = serde_json::to_value(ElicitResult::accept(
            json!({"name": "Ada"}).as_object().unwrap().clone(),
        ))
        .unwrap();
        assert_eq!(r, json!({"action": "accept", "content": {"name": "Ada"}}));
        assert_eq!(
            serde_json::to_value(ElicitResult::decline()).unwrap(),
            json!({"action": "decline"})
        );
        let data: UrlElicitationRequired = serde_json::from_value(json!({"elicitations": [{"mode": "url", "message": "m", "url": "https://a", "elicitationId": "e2"}]})).unwrap();
        assert_eq!(data.elicitations[0].elicitation_id, "e2");
    }

    #[test]
    fn elicitation_complete_is_a_typed_notification() {
        use crate::mcp::ServerNotification;
        let params = serde_json::value::to_raw_value(&json!({"elicitationId": "e-3"})).unwrap();
        let n =
            ServerNotification::parse("notifications/elicitation/complete".into(), Some(params));
        assert!(
            matches!(&n, ServerNotification::ElicitationComplete(c) if c.elicitation_id == "e-3")
        );
        assert_eq!(n.method(), "notifications/elicitation/complete");
        // Without its id it stays raw.
        let n = ServerNotification::parse("notifications/elicitation/complete".into(), None);
        assert!(matches!(n, ServerNotification::Other { .. }));
    }

    #[test]
    fn sampling_with_tools() {
        let req: CreateMessageRequest = serde_json::from_value(json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "weather?"}},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [{"type": "tool_result", "toolUseId": "c1", "content": [{"type": "text", "text": "3 C"}]}]}
            ],
            "maxTokens": 100,
            "tools": [{"name": "get_weather", "inputSchema": {"type": "object"}}],
            "toolChoice": {"mode": "auto"}
        }))
        .unwrap();
        assert_eq!(req.tools.as_ref().unwrap()[0].name, "get_weather");
        assert_eq!(
            req.tool_choice.as_ref().unwrap().mode.as_deref(),
            Some("auto")
        );
        assert!(
            matches!(&req.messages[1].content.blocks()[0], SamplingContent::ToolUse { name, .. } if name == "get_weather")
        );
        assert!(
            matches!(&req.messages[2].content.blocks()[0], SamplingContent::ToolResult { tool_use_id, content, .. } if tool_use_id == "c1" && content.len() == 1)
        );
        let out = serde_json::to_value(CreateMessageResult::text("m", "hi")).unwrap();
        assert_eq!(
            out,
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "stopReason": "endTurn"})
        );
    }

    #[test]
    fn tool_metadata() {
        let t: super::super::Tool = serde_json::from_value(json!({
            "name": "rm", "inputSchema": {"type": "object"},
            "annotations": {"destructiveHint": true, "title": "Remove", "x": 1},
            "icons": [{"src": "https://a/i.png", "mimeType": "image/png", "sizes": ["48x48"]}]
        }))
        .unwrap();
        let a = t.annotations.as_ref().unwrap();
        assert_eq!(a.destructive_hint, Some(true));
        assert_eq!(a.extra["x"], 1);
        assert_eq!(
            t.icons.as_ref().unwrap()[0].sizes.as_deref(),
            Some(&["48x48".to_owned()][..])
        );
        let back = serde_json::to_value(&t).unwrap();
        assert_eq!(back["annotations"]["x"], 1);
        assert_eq!(back["icons"][0]["src"], "https://a/i.png");
        // Hints and icons of the wrong shape never sink the tool.
        let t: super::super::Tool = serde_json::from_value(json!({
            "name": "odd", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": "yes", "title": 3, "idempotentHint": true},
            "icons": ["not-an-icon"]
        }))
        .unwrap();
        let a = t.annotations.unwrap();
        assert_eq!(
            (a.read_only_hint, a.title, a.idempotent_hint),
            (None, None, Some(true))
        );
        assert!(t.icons.is_none());
        let t: super::super::Tool = serde_json::from_value(json!({
            "name": "odder", "annotations": [1, 2], "icons": {"src": 1}
        }))
        .unwrap();
        assert!(t.annotations.is_none() && t.icons.is_none());
    }
}
