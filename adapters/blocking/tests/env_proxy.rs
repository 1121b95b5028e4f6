//! The process's own proxy variables, read once by the adapter layer, and
//! ureq made to follow that decision rather than its own: `NO_PROXY` with
//! a CIDR range (which ureq's own reading would ignore) sends loopback
//! directly, while a name only the proxy resolves goes through it. One
//! test in this binary: it sets the variables before any thread starts.

use std::time::Duration;

use mcpwire_blocking::{Client, ConnectOptions, ServerConfig, TlsSettings};
use mcpwire_tests::pki::Pki;
use mcpwire_tests::suite::support::{https_server_in, Era, TestProxy};
use serde_json::json;

#[test]
fn the_environment_decides_and_ureq_follows() {
    let pki = Pki::new();
    let server = https_server_in(Era::Modern, &pki, &[]);
    let proxy = TestProxy::start(&["--map", "mcp.test=127.0.0.1"]);
    std::env::set_var("HTTPS_PROXY", &proxy.url);
    std::env::set_var("NO_PROXY", "localhost,127.0.0.0/8");
    let options = || {
        ConnectOptions::new()
            .timeout(Duration::from_secs(20))
            .tls(TlsSettings::new().ca(pki.ca.to_str().unwrap()))
    };

    let direct = Client::connect_with(ServerConfig::http(&server.url), options()).unwrap();
    let r = direct
        .call_tool("echo", json!({"message": "direct"}))
        .unwrap();
    assert_eq!(r.text(), "Echo: direct");
    direct.close().unwrap();
    assert!(proxy.requests().is_empty(), "{:#?}", proxy.requests());

    let proxied =
        Client::connect_with(ServerConfig::http(server.url_named("mcp.test")), options()).unwrap();
    let r = proxied
        .call_tool("echo", json!({"message": "proxied"}))
        .unwrap();
    assert_eq!(r.text(), "Echo: proxied");
    proxied.close().unwrap();
    let target = format!("mcp.test:{}", server.port());
    assert!(
        proxy
            .requests()
            .iter()
            .all(|r| r["method"] == "CONNECT" && r["target"] == target.as_str()),
        "{:#?}",
        proxy.requests()
    );
    assert!(!proxy.requests().is_empty());
}
