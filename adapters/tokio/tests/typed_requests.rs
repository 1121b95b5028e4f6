//! Typed server-to-client requests against `mcpwire-test-server` (its
//! `ask` tool sends the request we give it and returns our answer):
//! elicitation in form and URL modes, sampling with tools, the
//! capabilities the typed handlers declare, and -32602 for params that do
//! not parse.

use std::sync::atomic::{AtomicU32, Ordering};

use mcpwire_tokio::types::{
    CreateMessageResult, ElicitRequest, ElicitResult, SamplingContent, SamplingContentList,
};
use mcpwire_tokio::{Client, ConnectOptions, ErrorObject, ServerConfig};
use serde_json::{json, Value};

fn server(log: &std::path::Path, era: &str) -> ServerConfig {
    ServerConfig::stdio(
        mcpwire_tests::test_server_binary()
            .to_string_lossy()
            .into_owned(),
    )
    .args(["--log-file", &log.to_string_lossy(), "--era", era])
}

/// The client capabilities the server received: the `initialize` params'
/// (2025-11-25), or the `_meta` envelope's (2026-07-28).
fn client_capabilities(log: &std::path::Path) -> Value {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| {
            let params = &v["message"]["params"];
            if v["message"]["method"] == "initialize" {
                return Some(params["capabilities"].clone());
            }
            let meta = &params["_meta"]["io.modelcontextprotocol/clientCapabilities"];
            (!meta.is_null()).then(|| meta.clone())
        })
        .expect("the client's capabilities in the log")
}

async fn ask(client: &Client, method: &str, params: Value) -> Value {
    let r = client
        .call_tool("ask", json!({"method": method, "params": params}))
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", r.text());
    serde_json::from_str(&r.text()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_elicitation_and_sampling_with_tools_2025() {
    typed_elicitation_and_sampling_with_tools("legacy", "2025-11-25").await;
}

/// The same through 2026-07-28's `input_required` rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_elicitation_and_sampling_with_tools_2026() {
    typed_elicitation_and_sampling_with_tools("modern", "2026-07-28").await;
}

async fn typed_elicitation_and_sampling_with_tools(era: &str, version: &str) {
    static N: AtomicU32 = AtomicU32::new(0);
    let log = std::env::temp_dir().join(format!(
        "mcpwire-typed-{}-{}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let options = ConnectOptions::new()
        .on_elicit(|request| async move {
            match request {
                ElicitRequest::Form(form) => {
                    assert_eq!(form.message, "What is your name?");
                    ElicitResult::accept(json!({"name": "Ada"}).as_object().unwrap().clone())
                }
                ElicitRequest::Url(url) => {
                    assert_eq!(url.url, "https://pay.example/checkout");
                    assert_eq!(url.elicitation_id, "e-1");
                    ElicitResult::accept_url()
                }
                _ => ElicitResult::cancel(),
            }
        })
        .on_sampling_with_tools(|request| async move {
            let tools = request.tools.unwrap_or_default();
            if tools.is_empty() {
                return Err(ErrorObject::new(-1, "no tools"));
            }
            let last = request.messages.last().unwrap();
            // After a tool result, the model answers in text.
            if let Some(SamplingContent::ToolResult { content, .. }) = last.content.blocks().first()
            {
                let text = match content.first() {
                    Some(mcpwire_tokio::types::Content::Text { text, .. }) => text.clone(),
                    _ => String::new(),
                };
                return Ok(CreateMessageResult::text("m-1", format!("It is {text}.")));
            }
            let mut result = CreateMessageResult::text("m-1", "");
            result.content = SamplingContentList::Many(vec![SamplingContent::ToolUse {
                id: "call-1".into(),
                name: tools[0].name.clone(),
                input: json!({"city": "Oslo"}),
                extra: Default::default(),
            }]);
            result.stop_reason = Some("toolUse".into());
            Ok(result)
        });
    let client = Client::connect_with(server(&log, era), options)
        .await
        .unwrap();
    assert_eq!(client.protocol_version(), version);

    // The capabilities follow the handlers: both elicitation modes,
    // sampling with tools.
    let caps = &client_capabilities(&log);
    assert_eq!(
        caps["elicitation"],
        json!({"form": {}, "url": {}}),
        "{caps}"
    );
    assert_eq!(caps["sampling"], json!({"tools": {}}), "{caps}");

    // Form mode (the test server's default elicitation).
    let r = client
        .call_tool("ask", json!({"method": "elicitation/create"}))
        .await
        .unwrap();
    let r: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(r, json!({"action": "accept", "content": {"name": "Ada"}}));
    // URL mode.
    let r = ask(
        &client,
        "elicitation/create",
        json!({"mode": "url", "message": "Pay here", "url": "https://pay.example/checkout",
               "elicitationId": "e-1"}),
    )
    .await;
    assert_eq!(r, json!({"action": "accept"}));
    // A URL elicitation without a URL: the handler never sees it. In
    // 2025-11-25 the server gets -32602 (and the test server says so in its
    // tool result); in 2026-07-28 the input round cannot be answered, so
    // the call fails.
    let r = client
        .call_tool(
            "ask",
            json!({"method": "elicitation/create", "params": {"mode": "url", "message": "?"}}),
        )
        .await;
    match era {
        "legacy" => {
            let r = r.unwrap();
            assert!(r.is_error(), "{}", r.text());
            assert!(r.text().contains("-32602"), "{}", r.text());
        }
        _ => {
            let e = r.unwrap_err();
            assert!(
                e.to_string()
                    .contains("invalid elicitation/create params: missing field `url`"),
                "{e}"
            );
        }
    }

    // Sampling with tools: a tool use, then text after the tool result.
    let tools = json!([{"name": "get_weather", "inputSchema": {"type": "object"}}]);
    let r = ask(
        &client,
        "sampling/createMessage",
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Weather?"}}],
               "maxTokens": 50, "tools": tools, "toolChoice": {"mode": "auto"}}),
    )
    .await;
    assert_eq!(r["stopReason"], "toolUse");
    assert_eq!(
        r["content"],
        json!([{"type": "tool_use", "id": "call-1", "name": "get_weather", "input": {"city": "Oslo"}}])
    );
    let r = ask(
        &client,
        "sampling/createMessage",
        json!({"messages": [
                  {"role": "user", "content": {"type": "text", "text": "Weather?"}},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "call-1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                  {"role": "user", "content": [{"type": "tool_result", "toolUseId": "call-1", "content": [{"type": "text", "text": "3 C"}]}]}],
               "maxTokens": 50, "tools": tools}),
    )
    .await;
    assert_eq!(r["content"]["text"], "It is 3 C.");
    assert_eq!(r["model"], "m-1");
    client.close().await.unwrap();
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_url_elicitation_required_error_is_typed() {
    use mcpwire_tokio::{Error, RequestError};
    let data = serde_json::value::to_raw_value(&json!({"elicitations": [
        {"mode": "url", "message": "Sign in", "url": "https://idp.example/a", "elicitationId": "e-9"}
    ]}))
    .unwrap();
    let e = Error::Request(RequestError::Remote(
        ErrorObject::new(-32042, "URL elicitation required").with_data(data),
    ));
    let urls = e.url_elicitations().expect("typed");
    assert_eq!(urls[0].url, "https://idp.example/a");
    assert_eq!(urls[0].elicitation_id, "e-9");
    let other = Error::Request(RequestError::Remote(ErrorObject::new(-32000, "x")));
    assert!(other.url_elicitations().is_none());
}
