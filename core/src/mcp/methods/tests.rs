use super::*;
use crate::mcp::types::ClientCapabilities;
use serde_json::json;

/// The params, the same through `params` and `params_json`.
fn params<M: Method>(m: &M) -> Option<String> {
    let raw = m.params().unwrap().map(|p| p.get().to_string());
    let json = m.params_json().unwrap().map(|p| p.get().to_string());
    assert_eq!(raw, json, "params and params_json differ");
    raw
}

#[test]
fn params_are_the_spec_shapes() {
    assert_eq!(params(&Ping), None);
    assert_eq!(params(&ListTools::page(None)), None);
    assert_eq!(
        params(&ListPrompts::page(Some("c".into()))).as_deref(),
        Some(r#"{"cursor":"c"}"#)
    );
    assert_eq!(
        params(&CallTool::new("t", Value::Null)).as_deref(),
        Some(r#"{"name":"t"}"#)
    );
    assert_eq!(
        params(&ReadResource::new("file:///a")).as_deref(),
        Some(r#"{"uri":"file:///a"}"#)
    );
    assert_eq!(
        params(&GetPrompt::new("p", json!({"a": "1"}))).as_deref(),
        Some(r#"{"name":"p","arguments":{"a":"1"}}"#)
    );
    assert_eq!(
        params(&Complete::new(
            json!({"type": "ref/prompt", "name": "p"}),
            "a",
            "x"
        ))
        .as_deref(),
        Some(r#"{"ref":{"name":"p","type":"ref/prompt"},"argument":{"name":"a","value":"x"}}"#)
    );
    assert_eq!(
        params(&SetLoggingLevel {
            level: LoggingLevel::Warning
        })
        .as_deref(),
        Some(r#"{"level":"warning"}"#)
    );
    assert!(RootsListChanged.params().unwrap().is_none());
}

/// Each name as a request writes it: the JSON string serde_json writes.
#[test]
fn each_name_is_quoted_as_serde_json_writes_it() {
    for m in METHODS {
        assert_eq!(m.id.quoted(), serde_json::to_string(m.name).unwrap());
    }
}

#[test]
fn the_table_has_each_method_once_with_its_capability() {
    let mut names: Vec<_> = METHODS.iter().map(|m| m.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), METHODS.len());
    assert_eq!(info(ListTools::NAME).map(|m| m.paged), Some(true));
    assert_eq!(info(CallTool::NAME).map(|m| m.paged), Some(false));
    assert_eq!(info("ping").map(|m| m.capability), Some(None));
    assert_eq!(info("vendor/x"), None);
    for (i, m) in METHODS.iter().enumerate() {
        assert_eq!(m.id as usize, i, "{} out of MethodId's order", m.name);
        assert_eq!(MethodId::of(m.name), Some(m.id));
        assert_eq!(m.id.name(), m.name);
    }
    assert!(!MethodId::Ping.in_modern() && MethodId::Discover.in_modern());
}

#[test]
fn capability_checks() {
    let caps: ServerCapabilities =
        serde_json::from_str(r#"{"tools":{},"resources":{"subscribe":false}}"#).unwrap();
    assert_eq!(check_capability("tools/call", &caps), Ok(()));
    assert_eq!(check_capability("resources/read", &caps), Ok(()));
    assert_eq!(
        check_capability("resources/subscribe", &caps),
        Err(Capability::ResourcesSubscribe)
    );
    assert_eq!(
        check_capability("prompts/list", &caps),
        Err(Capability::Prompts)
    );
    assert_eq!(
        check_capability("logging/setLevel", &caps),
        Err(Capability::Logging)
    );
    assert_eq!(check_capability("ping", &caps), Ok(()));
    assert_eq!(check_capability("vendor/x", &caps), Ok(()));
    assert_eq!(Capability::ResourcesSubscribe.name(), "resources.subscribe");
}

#[test]
fn server_request_kinds_declare_their_capability() {
    let mut caps = ClientCapabilities::default();
    for kind in ServerRequestKind::HANDLED {
        assert!(!kind.declared_in(&caps));
        kind.declare(&mut caps);
        assert!(kind.declared_in(&caps));
        assert_eq!(ServerRequestKind::of(kind.method()), Some(kind));
    }
    assert_eq!(
        serde_json::to_value(&caps).unwrap(),
        json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {"form": {}}})
    );
    assert_eq!(ServerRequestKind::of("ping"), Some(ServerRequestKind::Ping));
    assert_eq!(ServerRequestKind::of("x/y"), None);
    // A mode the application declared itself is kept.
    let mut caps = ClientCapabilities {
        elicitation: Some(serde_json::from_str(r#"{"url":{}}"#).unwrap()),
        ..Default::default()
    };
    ServerRequestKind::Elicit.declare(&mut caps);
    assert_eq!(
        serde_json::to_value(&caps).unwrap(),
        json!({"elicitation": {"url": {}}})
    );
}

#[test]
fn typed_handlers_declare_both_modes_and_sampling_tools() {
    let mut caps = ClientCapabilities::default();
    ServerRequestKind::Elicit.declare_typed(&mut caps, false);
    ServerRequestKind::CreateMessage.declare_typed(&mut caps, true);
    assert_eq!(
        serde_json::to_value(&caps).unwrap(),
        json!({"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}}})
    );
    let mut caps = ClientCapabilities::default();
    ServerRequestKind::CreateMessage.declare_typed(&mut caps, false);
    assert_eq!(
        serde_json::to_value(&caps).unwrap(),
        json!({"sampling": {}})
    );
}
