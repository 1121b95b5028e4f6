//! The cases of corporate networks: a forward proxy (`mcpwire-test-proxy`)
//! and TLS with a private CA made at test time ([`Pki`]), on loopback.
//! They do not depend on the protocol era; they run in 2026-07-28 only.
//!
//! The test proxy resolves `mcp.test` and nothing else resolves it: a call
//! that reaches a server by that name went through the proxy.

use std::time::{Duration, Instant};

use mcpwire_adapter::options::ConnectOptions;
use mcpwire_adapter::{ProxyEnv, ServerConfig, TlsSettings};
use serde_json::{json, Value};

use super::support::{http_server_in, https_server_in, Era, TestProxy};
use super::Adapter;
use crate::pki::{Pki, OTHER_NAME};

fn path(p: &std::path::Path) -> String {
    p.to_str().expect("UTF-8 temp path").to_owned()
}

fn trusting<A: Adapter>(pki: &Pki) -> ConnectOptions<A::Flavor> {
    ConnectOptions::<A::Flavor>::new()
        .timeout(Duration::from_secs(20))
        .tls(TlsSettings::new().ca(path(&pki.ca)))
}

async fn echo<A: Adapter>(client: &A, message: &str) {
    let r = client
        .call_tool("echo", json!({ "message": message }))
        .await
        .unwrap_or_else(|e| panic!("echo {message}: {e}"));
    assert_eq!(r.text(), format!("Echo: {message}"));
}

fn connects_to(requests: &[Value], target: &str) -> usize {
    requests
        .iter()
        .filter(|r| r["method"] == "CONNECT" && r["target"] == target && r["status"] == 200)
        .count()
}

/// `https://mcp.test:PORT` through an explicit proxy, the server's private
/// CA given as `tls.ca`: the name is resolved by the proxy (nothing else
/// can), in a `CONNECT` tunnel, and the call answers.
pub async fn net_https_through_a_proxy_to_a_name_only_it_resolves<A: Adapter>(era: Era) {
    let pki = Pki::new();
    let server = https_server_in(era, &pki, &[]);
    let proxy = TestProxy::start(&["--map", "mcp.test=127.0.0.1"]);
    let url = server.url_named("mcp.test");
    let client = A::connect_with(
        ServerConfig::http(&url),
        trusting::<A>(&pki).proxy(&proxy.url),
    )
    .await
    .unwrap_or_else(|e| panic!("through {}: {e}", proxy.url));
    echo(&client, "through the proxy").await;
    client.close().await.unwrap();
    let requests = proxy.requests();
    let target = format!("mcp.test:{}", server.port());
    assert!(connects_to(&requests, &target) >= 1, "{requests:#?}");
    assert!(
        requests
            .iter()
            .all(|r| r["method"] == "CONNECT" && r["target"] == target.as_str()),
        "every exchange went in a tunnel to {target}: {requests:#?}"
    );
}

/// The same with the server entry's own `proxy` and `tls` fields.
pub async fn net_a_server_entry_with_proxy_and_tls<A: Adapter>(era: Era) {
    let pki = Pki::new();
    let server = https_server_in(era, &pki, &[]);
    let proxy = TestProxy::start(&["--map", "mcp.test=127.0.0.1"]);
    let entry: ServerConfig = serde_json::from_value(json!({
        "type": "http",
        "url": server.url_named("mcp.test"),
        "proxy": proxy.url,
        "tls": {"ca": path(&pki.ca)},
    }))
    .unwrap();
    let client = A::connect(entry).await.unwrap();
    echo(&client, "from the entry").await;
    client.close().await.unwrap();
    assert!(connects_to(&proxy.requests(), &format!("mcp.test:{}", server.port())) >= 1);
}

/// `user:password@` in the proxy URL becomes `Proxy-Authorization: Basic`;
/// a wrong password (or none) is an error at once naming the proxy, never
/// the password.
pub async fn net_proxy_credentials_and_a_wrong_password<A: Adapter>(era: Era) {
    let pki = Pki::new();
    let server = https_server_in(era, &pki, &[]);
    let proxy = TestProxy::start(&[
        "--map",
        "mcp.test=127.0.0.1",
        "--require-auth",
        "ada:lovelace",
    ]);
    let url = server.url_named("mcp.test");
    let client = A::connect_with(
        ServerConfig::http(&url),
        trusting::<A>(&pki).proxy(proxy.url_with("ada", "lovelace")),
    )
    .await
    .unwrap();
    echo(&client, "with credentials").await;
    client.close().await.unwrap();

    let started = Instant::now();
    let e = A::connect_with(
        ServerConfig::http(&url),
        trusting::<A>(&pki).proxy(proxy.url_with("ada", "wrong-horse")),
    )
    .await
    .unwrap_err();
    let took = started.elapsed();
    let text = e.to_string();
    assert!(took < Duration::from_secs(5), "{took:?}: {text}");
    assert!(
        text.contains(&format!("proxy http://ada@127.0.0.1:{}", proxy.port)),
        "{text}"
    );
    assert!(
        text.contains("407") && text.contains("refused the credentials"),
        "{text}"
    );
    assert!(!text.contains("wrong-horse"), "{text}");

    let e = A::connect_with(
        ServerConfig::http(&url),
        trusting::<A>(&pki).proxy(&proxy.url),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("requires authentication"), "{e}");
    let auth: Vec<Value> = proxy.requests().iter().map(|r| r["auth"].clone()).collect();
    assert!(
        auth.contains(&json!("ok")) && auth.contains(&json!("wrong")),
        "{auth:?}"
    );
    assert!(auth.contains(&json!("none")), "{auth:?}");
}

/// A proxy that refuses the tunnel: the error names the proxy, the
/// target and the status.
pub async fn net_a_refused_tunnel_names_the_proxy<A: Adapter>(era: Era) {
    let pki = Pki::new();
    let server = https_server_in(era, &pki, &[]);
    let proxy = TestProxy::start(&["--refuse", "403"]);
    let e = A::connect_with(
        ServerConfig::http(&server.url),
        trusting::<A>(&pki).proxy(&proxy.url),
    )
    .await
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("proxy http://127.0.0.1:{}", proxy.port))
            && text.contains("403")
            && text.contains(&format!("127.0.0.1:{}", server.port())),
        "{text}"
    );
}

/// The `*_PROXY` variables (given as an explicit environment here; the
/// CLI's tests use the real one): `NO_PROXY` with a CIDR range sends
/// loopback directly, another list sends it through the proxy.
pub async fn net_no_proxy_sends_listed_hosts_directly<A: Adapter>(era: Era) {
    let pki = Pki::new();
    let server = https_server_in(era, &pki, &[]);
    let proxy = TestProxy::start(&[]);
    let env = |no_proxy: &str| {
        let pairs = [
            ("HTTPS_PROXY".to_owned(), proxy.url.clone()),
            ("NO_PROXY".to_owned(), no_proxy.to_owned()),
        ];
        ProxyEnv::from_lookup(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    };
    let client = A::connect_with(
        ServerConfig::http(&server.url),
        trusting::<A>(&pki).proxy_env(env("localhost, 127.0.0.0/8")),
    )
    .await
    .unwrap();
    echo(&client, "direct").await;
    client.close().await.unwrap();
    assert!(proxy.requests().is_empty(), "{:#?}", proxy.requests());

    let client = A::connect_with(
        ServerConfig::http(&server.url),
        trusting::<A>(&pki).proxy_env(env("example.com,10.0.0.0/8")),
    )
    .await
    .unwrap();
    echo(&client, "proxied").await;
    client.close().await.unwrap();
    let target = format!("127.0.0.1:{}", server.port());
    assert!(
        connects_to(&proxy.requests(), &target) >= 1,
        "{:#?}",
        proxy.requests()
    );
}

/// A plain `http` URL through the proxy: in absolute form with the
/// async clients, in a tunnel with the blocking one (ureq's way).
pub async fn net_plain_http_through_the_proxy<A: Adapter>(era: Era) {
    let server = http_server_in(Some(era), &[]);
    let proxy = TestProxy::start(&["--map", "plain.test=127.0.0.1"]);
    let url = server.url_named("plain.test");
    let options = ConnectOptions::<A::Flavor>::new().proxy(proxy.url_with("ada", "pw"));
    let client = A::connect_with(ServerConfig::http(&url), options)
        .await
        .unwrap();
    echo(&client, "plain").await;
    client.close().await.unwrap();
    let requests = proxy.requests();
    if A::TUNNELS_PLAIN_HTTP {
        let target = format!("plain.test:{}", server.port());
        assert!(connects_to(&requests, &target) >= 1, "{requests:#?}");
    } else {
        let absolute = requests
            .iter()
            .filter(|r| {
                r["method"] == "POST"
                    && r["target"] == url.as_str()
                    && r["forwarded"] == true
                    && r["auth"] == "ok"
            })
            .count();
        assert!(absolute >= 1, "{requests:#?}");
        assert!(
            requests.iter().all(|r| r["method"] != "CONNECT"),
            "{requests:#?}"
        );
    }
}

/// A certificate the client cannot trust fails cleanly, saying which
/// certificate and why: an unknown issuer (no CA given, or the wrong
/// one), an expired certificate, a name it is not for.
pub async fn net_certificate_problems_are_named<A: Adapter>(era: Era) {
    let pki = Pki::new();
    let server = https_server_in(era, &pki, &[]);
    for options in [
        ConnectOptions::<A::Flavor>::new(),
        ConnectOptions::<A::Flavor>::new().tls(TlsSettings::new().ca(path(&pki.stranger_ca))),
    ] {
        let e = A::connect_with(ServerConfig::http(&server.url), options)
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("the certificate of 127.0.0.1")
                && text.contains("unknown issuer")
                && text.contains("--cacert"),
            "{text}"
        );
    }

    let expired = http_server_in(
        Some(era),
        &["--tls", &path(&pki.expired_cert), &path(&pki.expired_key)],
    );
    let e = A::connect_with(ServerConfig::http(&expired.url), trusting::<A>(&pki))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("has expired (on 2020-01-01)"), "{e}");

    let proxy = TestProxy::start(&["--map", &format!("{OTHER_NAME}=127.0.0.1")]);
    let e = A::connect_with(
        ServerConfig::http(server.url_named(OTHER_NAME)),
        trusting::<A>(&pki).proxy(&proxy.url),
    )
    .await
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("the certificate of {OTHER_NAME}"))
            && text.contains("name mismatch"),
        "{text}"
    );

    // Verification off: the same untrusted server answers.
    let client = A::connect_with(
        ServerConfig::http(&server.url),
        ConnectOptions::<A::Flavor>::new().tls(TlsSettings::new().insecure(true)),
    )
    .await
    .unwrap();
    echo(&client, "insecure").await;
    client.close().await.unwrap();
}

/// A server that demands a client certificate: refused cleanly without
/// one (the error says so), answered with one, whatever the key's format
/// (PKCS#8, SEC1, RSA).
pub async fn net_client_certificates<A: Adapter>(era: Era) {
    let pki = Pki::new();
    let server = https_server_in(era, &pki, &["--client-ca", &path(&pki.ca)]);
    let e = A::connect_with(ServerConfig::http(&server.url), trusting::<A>(&pki))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("127.0.0.1 demands a client certificate") && text.contains("--cert"),
        "{text}"
    );
    for (cert, key) in [
        (&pki.client_cert, &pki.client_key),
        (&pki.client_cert, &pki.client_key_sec1),
        (&pki.client_rsa_cert, &pki.client_rsa_key),
    ] {
        let tls = TlsSettings::new()
            .ca(path(&pki.ca))
            .client_cert(path(cert), path(key));
        let client = A::connect_with(
            ServerConfig::http(&server.url),
            ConnectOptions::<A::Flavor>::new().tls(tls),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", key.display()));
        echo(&client, "mutual").await;
        client.close().await.unwrap();
    }

    // Through the proxy, from the server entry.
    let proxy = TestProxy::start(&["--map", "mcp.test=127.0.0.1"]);
    let entry = ServerConfig::http(server.url_named("mcp.test"))
        .proxy(&proxy.url)
        .tls(
            TlsSettings::new()
                .ca(path(&pki.ca))
                .client_cert(path(&pki.client_cert), path(&pki.client_key)),
        );
    let client = A::connect(entry).await.unwrap();
    echo(&client, "mutual, proxied").await;
    client.close().await.unwrap();
}
