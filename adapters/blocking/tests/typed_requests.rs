//! The blocking client's typed server-request handlers against
//! `mcpwire-test-server` (`ask` sends the request we give it and returns
//! our answer).

use mcpwire_blocking::types::{CreateMessageResult, ElicitRequest, ElicitResult};
use mcpwire_blocking::{Client, ConnectOptions, ServerConfig};
use serde_json::{json, Value};

#[test]
fn typed_elicitation_and_sampling_on_threads() {
    let options = ConnectOptions::new()
        .on_elicit(|request| match request {
            ElicitRequest::Url(u) if u.url.starts_with("https://") => ElicitResult::accept_url(),
            ElicitRequest::Form(_) => ElicitResult::decline(),
            _ => ElicitResult::cancel(),
        })
        .on_sampling(|request| {
            assert!(request.tools.is_none());
            Ok(CreateMessageResult::text(
                "m-2",
                format!("{} messages", request.messages.len()),
            ))
        });
    let server = ServerConfig::stdio(
        mcpwire_tests::test_server_binary()
            .to_string_lossy()
            .into_owned(),
    );
    let client = Client::connect_with(server, options).unwrap();
    let ask = |method: &str, params: Value| -> Value {
        let r = client
            .call_tool("ask", json!({"method": method, "params": params}))
            .unwrap();
        assert!(!r.is_error(), "{}", r.text());
        serde_json::from_str(&r.text()).unwrap()
    };
    assert_eq!(
        ask(
            "elicitation/create",
            json!({"mode": "url", "message": "Go", "url": "https://a.example", "elicitationId": "x"})
        ),
        json!({"action": "accept"})
    );
    assert_eq!(
        ask(
            "elicitation/create",
            json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}})
        ),
        json!({"action": "decline"})
    );
    let r = ask(
        "sampling/createMessage",
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}),
    );
    assert_eq!(r["content"]["text"], "1 messages");
    client.close().unwrap();
}
