//! `mcpwire` behind a proxy and with private CAs, end to end: the real
//! binary, the real environment variables, `mcpwire-test-proxy` and the
//! test server with `--tls`, certificates made at test time. Only
//! loopback; `mcp.test` is a name only the test proxy resolves.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mcpwire_tests::pki::Pki;
use mcpwire_tests::suite::support::{fresh_cache_home, https_server_in, Era, TestProxy};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

/// Variables that would change where the binary connects or what it
/// trusts: none of the caller's reach it.
const NETWORK_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUEST_METHOD",
];

/// Runs `mcpwire` with `args` and exactly `env` of the network variables.
fn mcpwire(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    for var in NETWORK_VARS {
        cmd.env_remove(var);
    }
    cmd.env("XDG_CACHE_HOME", fresh_cache_home())
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run mcpwire")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

fn echoed(o: &Output, message: &str) {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("Echo: {message}")),
        "{}",
        text(o)
    );
}

fn tunnels_to(proxy: &TestProxy, target: &str) -> usize {
    proxy
        .requests()
        .iter()
        .filter(|r| r["method"] == "CONNECT" && r["target"] == target && r["status"] == 200)
        .count()
}

/// `HTTPS_PROXY` and `SSL_CERT_FILE` from the environment: a server whose
/// name only the proxy resolves answers `mcpwire call` with exit 0.
#[test]
fn https_proxy_and_ssl_cert_file_from_the_environment() {
    let pki = Pki::new();
    let server = https_server_in(Era::Modern, &pki, &[]);
    let proxy = TestProxy::start(&["--map", "mcp.test=127.0.0.1"]);
    let url = server.url_named("mcp.test");
    for proxy_var in ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"] {
        let o = mcpwire(
            &["call", "echo", "message=env", "--url", &url],
            &[(proxy_var, &proxy.url), ("SSL_CERT_FILE", path(&pki.ca))],
        );
        echoed(&o, "env");
    }
    assert!(tunnels_to(&proxy, &format!("mcp.test:{}", server.port())) >= 3);
}

/// `--proxy` with credentials and `--cacert`; a wrong password is exit 3
/// within 5 s, naming the proxy and not the password; no password at all
/// says that one is needed.
#[test]
fn proxy_flag_with_credentials_and_cacert() {
    let pki = Pki::new();
    let server = https_server_in(Era::Modern, &pki, &[]);
    let proxy = TestProxy::start(&[
        "--map",
        "mcp.test=127.0.0.1",
        "--require-auth",
        "ada:lovelace",
    ]);
    let url = server.url_named("mcp.test");
    let good = proxy.url_with("ada", "lovelace");
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=flag",
            "--url",
            &url,
            "--proxy",
            &good,
            "--cacert",
            path(&pki.ca),
        ],
        &[],
    );
    echoed(&o, "flag");

    let bad = proxy.url_with("ada", "wrong-horse");
    let started = Instant::now();
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=x",
            "--url",
            &url,
            "--proxy",
            &bad,
            "--cacert",
            path(&pki.ca),
        ],
        &[],
    );
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(took < Duration::from_secs(5), "{took:?}");
    let err = stderr(&o);
    assert!(
        err.contains(&format!("proxy http://ada@127.0.0.1:{}", proxy.port))
            && err.contains("refused the credentials"),
        "{err}"
    );
    assert!(!err.contains("wrong-horse"), "{err}");

    let o = mcpwire(
        &[
            "ping",
            "--url",
            &url,
            "--proxy",
            &proxy.url,
            "--cacert",
            path(&pki.ca),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        stderr(&o).contains("requires authentication"),
        "{}",
        text(&o)
    );
}

/// A certificate from a CA the client does not know: exit 3 naming the
/// certificate and the problem, and how to add the CA.
#[test]
fn an_unknown_ca_is_exit_3_naming_the_problem() {
    let pki = Pki::new();
    let server = https_server_in(Era::Modern, &pki, &[]);
    let o = mcpwire(&["call", "echo", "message=x", "--url", &server.url], &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains("the certificate of 127.0.0.1")
            && err.contains("unknown issuer")
            && err.contains("--cacert"),
        "{err}"
    );
    // SSL_CERT_FILE with another CA replaces the system's store: the same.
    let o = mcpwire(
        &["ping", "--url", &server.url],
        &[("SSL_CERT_FILE", path(&pki.stranger_ca))],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(stderr(&o).contains("unknown issuer"), "{}", text(&o));
    // --insecure: it answers, with a warning.
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=unsafe",
            "--url",
            &server.url,
            "--insecure",
        ],
        &[],
    );
    echoed(&o, "unsafe");
    assert!(stderr(&o).contains("verification is OFF"), "{}", text(&o));
}

/// A server that demands a client certificate answers with `--cert` and
/// `--key`, and refuses cleanly without them (exit 3, saying so).
#[test]
fn client_certificates() {
    let pki = Pki::new();
    let server = https_server_in(Era::Modern, &pki, &["--client-ca", path(&pki.ca)]);
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=mtls",
            "--url",
            &server.url,
            "--cacert",
            path(&pki.ca),
            "--cert",
            path(&pki.client_cert),
            "--key",
            path(&pki.client_key),
        ],
        &[],
    );
    echoed(&o, "mtls");
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=x",
            "--url",
            &server.url,
            "--cacert",
            path(&pki.ca),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        stderr(&o).contains("demands a client certificate") && stderr(&o).contains("--cert"),
        "{}",
        text(&o)
    );
}

/// `NO_PROXY` (a CIDR range) and `--no-proxy` send the client directly;
/// the proxy sees nothing.
#[test]
fn no_proxy_variable_and_flag() {
    let pki = Pki::new();
    let server = https_server_in(Era::Modern, &pki, &[]);
    let proxy = TestProxy::start(&[]);
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=direct",
            "--url",
            &server.url,
            "--cacert",
            path(&pki.ca),
        ],
        &[
            ("HTTPS_PROXY", &proxy.url),
            ("no_proxy", "localhost,127.0.0.0/8"),
        ],
    );
    echoed(&o, "direct");
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=flag",
            "--url",
            &server.url,
            "--cacert",
            path(&pki.ca),
            "--no-proxy",
        ],
        &[("HTTPS_PROXY", &proxy.url)],
    );
    echoed(&o, "flag");
    assert!(proxy.requests().is_empty(), "{:#?}", proxy.requests());
    // Without either, the same URL goes through it.
    let o = mcpwire(
        &["ping", "--url", &server.url, "--cacert", path(&pki.ca)],
        &[("HTTPS_PROXY", &proxy.url)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(tunnels_to(&proxy, &format!("127.0.0.1:{}", server.port())) >= 1);
}

/// A server entry with `proxy` and `tls` (client certificate included),
/// by `--server NAME --config FILE`.
#[test]
fn a_server_entry_with_proxy_and_tls() {
    let pki = Pki::new();
    let server = https_server_in(Era::Modern, &pki, &["--client-ca", path(&pki.ca)]);
    let proxy = TestProxy::start(&["--map", "mcp.test=127.0.0.1", "--require-auth", "ada:pw"]);
    let config = pki.dir().join("mcp.json");
    let entry = json!({"mcpServers": {"corp": {
        "type": "http",
        "url": server.url_named("mcp.test"),
        "proxy": proxy.url_with("ada", "pw"),
        "tls": {
            "ca": path(&pki.ca),
            "cert": path(&pki.client_cert),
            "key": path(&pki.client_key_sec1),
        },
    }}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let o = mcpwire(
        &[
            "call",
            "echo",
            "message=entry",
            "--server",
            "corp",
            "--config",
            path(&config),
        ],
        &[],
    );
    echoed(&o, "entry");
    assert!(tunnels_to(&proxy, &format!("mcp.test:{}", server.port())) >= 1);
}

/// Flags that cannot work are usage errors (exit 2), before anything
/// starts.
#[test]
fn network_usage_errors() {
    for (args, expected) in [
        (
            &[
                "ping",
                "--url",
                "https://h/mcp",
                "--proxy",
                "socks5://127.0.0.1:1080",
            ][..],
            "socks5:// proxies are not supported",
        ),
        (
            &[
                "ping",
                "--url",
                "https://h/mcp",
                "--proxy",
                "http://u:pw@h:99999",
            ][..],
            "invalid proxy URL",
        ),
        (
            &["ping", "--url", "https://h/mcp", "--cert", "c.pem"][..],
            "--key",
        ),
        (
            &["ping", "--proxy", "http://h:1", "--", "true"][..],
            "are for HTTP servers",
        ),
        (
            &[
                "ping",
                "--url",
                "https://h/mcp",
                "--cacert",
                "/nonexistent/ca.pem",
            ][..],
            "tls.ca `/nonexistent/ca.pem`: cannot read it",
        ),
    ] {
        let o = mcpwire(args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(stderr(&o).contains(expected), "{args:?}: {}", text(&o));
        assert!(!stderr(&o).contains(":pw@"), "{}", text(&o));
    }
}
