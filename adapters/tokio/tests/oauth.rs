//! OAuth 2.1 end to end: `mcpwire-test-server --http --oauth` is both the MCP
//! server and its authorization server, reached over real loopback sockets.
//! The "browser" is a redirect handler that GETs the authorization URL and
//! hands back the `Location` of the 302 (the server approves at once).
//!
//! The test server binary must be current: `cargo build -p mcpwire-tests
//! --bin mcpwire-test-server` after changing it (a stale one refuses
//! `--oauth`, and these tests say so).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcpwire_tests::oauth::{fetch_redirect, get_head};
use mcpwire_tokio::auth::{AuthorizeError, FnRedirect};
use mcpwire_tokio::{
    AuthOptions, Client, ConnectOptions, FileStore, LoopbackRedirect, MemoryStore, RedirectHandler,
    ServerConfig,
};
use serde_json::{json, Value};

/// Not a listener: the handlers below never follow the redirect to it.
const REDIRECT_URI: &str = "http://127.0.0.1:9/callback";

/// An `--http --oauth` test server, killed on drop.
struct Server {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path, args: &[&str]) -> Server {
        let log = dir.join("server.log");
        let mut child = Command::new(mcpwire_tests::test_server_binary())
            .args(["--http", "--oauth", "--log-file"])
            .arg(&log)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the test server");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut first)
            .expect("read the server's address");
        let Some(url) = first.trim_end().strip_prefix("listening on ") else {
            let mut err = String::new();
            let _ = child.stderr.take().expect("piped").read_to_string(&mut err);
            panic!(
                "the test server did not start (a stale binary without --oauth? \
                 run `cargo build -p mcpwire-tests --bin mcpwire-test-server`):\n{err}"
            );
        };
        Server {
            url: url.to_owned(),
            child,
            log,
        }
    }

    /// The `oauth` events of the server's log.
    fn oauth_events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == "oauth")
            .collect()
    }

    /// How many logged `oauth` events match `filter` (every key equal).
    fn count(&self, filter: Value) -> usize {
        let filter = filter.as_object().expect("an object").clone();
        self.oauth_events()
            .iter()
            .filter(|e| filter.iter().all(|(k, v)| &e[k] == v))
            .count()
    }
}

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcpwire-oauth-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A handler that approves through [`fetch_redirect`] and counts its calls.
fn approving(calls: &Arc<AtomicUsize>) -> impl RedirectHandler + 'static {
    let calls = calls.clone();
    FnRedirect::new(REDIRECT_URI, move |url: &str| {
        calls.fetch_add(1, Ordering::SeqCst);
        fetch_redirect(url).map_err(Into::into)
    })
}

/// A handler that must not be used.
fn refusing(calls: &Arc<AtomicUsize>) -> impl RedirectHandler + 'static {
    let calls = calls.clone();
    FnRedirect::new(REDIRECT_URI, move |url: &str| {
        calls.fetch_add(1, Ordering::SeqCst);
        Err(format!("the redirect handler was called for {url}").into())
    })
}

fn options(auth: AuthOptions) -> ConnectOptions {
    ConnectOptions::new()
        .timeout(Duration::from_secs(20))
        .auth(auth)
}

fn run(case: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(case);
}

async fn echo(client: &Client, message: &str) {
    let r = client
        .call_tool("echo", json!({ "message": message }))
        .await
        .unwrap_or_else(|e| panic!("echo {message}: {e}"));
    assert_eq!(r.text(), format!("Echo: {message}"));
}

#[test]
fn login_then_the_stored_token_is_used() {
    run(async {
        let dir = TempDir::new("login");
        let server = Server::start(&dir.0, &[]);
        let store = FileStore::new(dir.0.join("tokens.json"));
        let calls = Arc::new(AtomicUsize::new(0));

        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            options(AuthOptions::new(approving(&calls)).store(store.clone())),
        )
        .await
        .expect("connect with a login");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one login");
        let tools = client.list_tools().await.expect("tools/list");
        assert!(tools.iter().any(|t| t.name == "echo"));
        echo(&client, "after login").await;
        client.close().await.expect("close");

        // The flow as the server saw it.
        for (path, status) in [
            ("/.well-known/oauth-protected-resource/mcp", 200),
            ("/.well-known/oauth-authorization-server", 200),
            ("/register", 201),
            ("/authorize", 302),
        ] {
            assert_eq!(
                server.count(json!({"path": path, "status": status})),
                1,
                "{path}: {:#?}",
                server.oauth_events()
            );
        }
        assert_eq!(
            server.count(
                json!({"path": "/token", "grant_type": "authorization_code", "status": 200})
            ),
            1
        );

        // The token file: private, with the state for this endpoint.
        let path = dir.0.join("tokens.json");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("the token file exists")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
        }
        let saved: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read tokens")).unwrap();
        let state = &saved["states"][0];
        assert_eq!(state["resource"], server.url.as_str());
        let origin = server.url.trim_end_matches("/mcp");
        assert_eq!(state["issuer"], origin);
        assert_eq!(state["token_endpoint"], format!("{origin}/token"));
        assert!(state["tokens"]["access_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("at-")));
        assert!(state["tokens"]["refresh_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("rt-")));
        assert!(state["client"]["client_id"]
            .as_str()
            .is_some_and(|c| c.starts_with("client-")));

        // A second connection with the same store: the stored token is sent
        // from the first request, nobody logs in, nothing is refused.
        let refused_before = server.count(json!({"path": "/mcp", "status": 401}));
        let again = Arc::new(AtomicUsize::new(0));
        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            options(AuthOptions::new(refusing(&again)).store(store)),
        )
        .await
        .expect("connect with the stored token");
        echo(&client, "stored token").await;
        client.close().await.expect("close");
        assert_eq!(again.load(Ordering::SeqCst), 0, "no login the second time");
        assert_eq!(server.count(json!({"path": "/authorize"})), 1);
        assert_eq!(server.count(json!({"path": "/token"})), 1);
        assert_eq!(
            server.count(json!({"path": "/mcp", "status": 401})),
            refused_before
        );
    });
}

/// Six calls and a listing with access tokens that each serve two
/// requests: the client refreshes, the user is asked once, and the store
/// keeps the latest tokens.
async fn refresh_case(args: &[&str]) {
    let dir = TempDir::new("refresh");
    let mut all = vec!["--oauth-expire-after", "2"];
    all.extend_from_slice(args);
    let server = Server::start(&dir.0, &all);
    let store = FileStore::new(dir.0.join("tokens.json"));
    let calls = Arc::new(AtomicUsize::new(0));
    let client = Client::connect_with(
        ServerConfig::http(&server.url),
        options(AuthOptions::new(approving(&calls)).store(store.clone())),
    )
    .await
    .expect("connect with a login");
    for i in 0..6 {
        echo(&client, &format!("call {i}")).await;
    }
    client.list_tools().await.expect("tools/list");
    client.close().await.expect("close");

    let events = server.oauth_events();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one login: {events:#?}");
    assert_eq!(
        server.count(json!({"path": "/authorize"})),
        1,
        "{events:#?}"
    );
    assert!(
        server.count(json!({"path": "/mcp", "status": 401, "error": "expired"})) >= 1,
        "{events:#?}"
    );
    assert!(
        server.count(json!({"path": "/token", "grant_type": "refresh_token", "status": 200})) >= 1,
        "{events:#?}"
    );
    assert_eq!(
        server.count(json!({"path": "/token", "grant_type": "refresh_token", "status": 400})),
        0,
        "no spent refresh token is sent again: {events:#?}"
    );
    // The store has the token of the last request (refresh tokens rotate:
    // an older one would be spent).
    let last_bearer = std::fs::read_to_string(&server.log)
        .unwrap_or_default()
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| {
            v["http"]["headers"]["authorization"]
                .as_str()
                .map(str::to_owned)
        })
        .expect("bearer requests were logged");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(store.path()).expect("read tokens")).unwrap();
    assert_eq!(
        format!(
            "Bearer {}",
            saved["states"][0]["tokens"]["access_token"]
                .as_str()
                .unwrap()
        ),
        last_bearer
    );
}

#[test]
fn an_expired_token_is_refreshed_without_the_user() {
    run(refresh_case(&[]));
}

/// The protected resource is the origin, a parent of the endpoint (which
/// RFC 9728 allows and `resource_covers` accepts).
#[test]
fn an_expired_token_for_a_parent_resource_is_refreshed_without_the_user() {
    run(refresh_case(&["--oauth-resource-root"]));
}

#[test]
fn without_auth_options_a_401_is_an_error() {
    run(async {
        let dir = TempDir::new("noauth");
        let server = Server::start(&dir.0, &["--oauth-scope", "mcp:tools"]);
        let e = Client::connect_with(
            ServerConfig::http(&server.url),
            ConnectOptions::new().timeout(Duration::from_secs(20)),
        )
        .await
        .expect_err("the connection is refused");
        let text = e.to_string();
        assert!(text.contains("401"), "{text}");
        assert!(text.contains("WWW-Authenticate"), "{text}");
        assert_eq!(server.count(json!({"path": "/authorize"})), 0);
    });
}

#[test]
fn non_interactive_without_a_stored_token_asks_for_a_login() {
    run(async {
        let dir = TempDir::new("noninteractive");
        let server = Server::start(&dir.0, &[]);
        let calls = Arc::new(AtomicUsize::new(0));
        let e = Client::connect_with(
            ServerConfig::http(&server.url),
            options(
                AuthOptions::new(refusing(&calls))
                    .store(MemoryStore::default())
                    .interactive(false),
            ),
        )
        .await
        .expect_err("no token, no user: refused");
        let text = e.to_string();
        assert!(text.contains("log in"), "{text}");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(server.count(json!({"path": "/authorize"})), 0);
    });
}

#[test]
fn a_scope_in_the_challenge_is_asked_for() {
    run(async {
        let dir = TempDir::new("scope");
        let server = Server::start(&dir.0, &["--oauth-scope", "mcp:tools mcp:read"]);
        let calls = Arc::new(AtomicUsize::new(0));
        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            options(AuthOptions::new(approving(&calls))),
        )
        .await
        .expect("connect with a login");
        echo(&client, "scoped").await;
        client.close().await.expect("close");
        assert_eq!(
            server.count(json!({"path": "/authorize", "status": 302})),
            1,
            "{:#?}",
            server.oauth_events()
        );
        assert_eq!(server.count(json!({"error": "invalid_scope"})), 0);
    });
}

/// [`LoopbackRedirect`] with a scripted browser: a thread follows the
/// authorization URL to the server's 302, then to the loopback listener.
struct ScriptedBrowser(LoopbackRedirect);

impl RedirectHandler for ScriptedBrowser {
    fn redirect_uri(&self) -> String {
        self.0.redirect_uri()
    }

    fn authorize(&self, url: &str) -> Result<String, AuthorizeError> {
        let target = url.to_owned();
        let browser = std::thread::spawn(move || -> Result<(), String> {
            let location = fetch_redirect(&target)?;
            let (status, _) = get_head(&location)?;
            if status.contains(" 200 ") {
                Ok(())
            } else {
                Err(format!("the loopback listener answered {status:?}"))
            }
        });
        // Prints the URL on stderr, then waits for the redirect.
        let got = self.0.authorize(url);
        browser
            .join()
            .map_err(|_| AuthorizeError::other("the browser thread panicked"))?
            .map_err(AuthorizeError::other)?;
        got
    }
}

#[test]
fn the_loopback_listener_receives_the_redirect() {
    run(async {
        let dir = TempDir::new("loopback");
        let server = Server::start(&dir.0, &[]);
        let handler = LoopbackRedirect::bind(false)
            .expect("bind a loopback listener")
            .timeout(Duration::from_secs(20));
        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            options(AuthOptions::new(ScriptedBrowser(handler))),
        )
        .await
        .expect("connect through the loopback redirect");
        echo(&client, "loopback").await;
        client.close().await.expect("close");
        assert_eq!(
            server.count(json!({"path": "/authorize", "status": 302})),
            1
        );
    });
}

/// The authorization server forgot the client and its tokens (restarted on
/// the same port): the refresh is refused with `invalid_client`, so the
/// client must register again before sending the user to log in.
#[test]
fn a_forgotten_client_registers_again() {
    run(async {
        let dir = TempDir::new("forgotten");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
            .to_string();
        let store = FileStore::new(dir.0.join("tokens.json"));
        let calls = Arc::new(AtomicUsize::new(0));
        {
            let first = TempDir::new("forgotten-first");
            let server = Server::start(&first.0, &["--port", &port]);
            let client = Client::connect_with(
                ServerConfig::http(&server.url),
                options(AuthOptions::new(approving(&calls)).store(store.clone())),
            )
            .await
            .expect("connect with a login");
            echo(&client, "first server").await;
            client.close().await.expect("close");
        }
        let server = Server::start(&dir.0, &["--port", &port]);
        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            options(AuthOptions::new(approving(&calls)).store(store)),
        )
        .await
        .unwrap_or_else(|e| panic!("connect again: {e}\n{:#?}", server.oauth_events()));
        echo(&client, "second server").await;
        client.close().await.expect("close");
        assert_eq!(calls.load(Ordering::SeqCst), 2, "a second login");
        assert_eq!(server.count(json!({"path": "/register", "status": 201})), 1);
    });
}

/// Behind a proxy, OAuth's own exchanges (metadata, registration, token)
/// take the same route as the MCP requests: every one reaches the proxy
/// (plain `http` here, so in absolute form), none goes around it.
#[test]
fn oauth_exchanges_go_through_the_proxy() {
    use mcpwire_tests::suite::support::TestProxy;

    run(async {
        let dir = TempDir::new("proxied");
        let server = Server::start(&dir.0, &[]);
        let proxy = TestProxy::start(&[]);
        let calls = Arc::new(AtomicUsize::new(0));
        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            options(AuthOptions::new(approving(&calls)).store(MemoryStore::default()))
                .proxy(&proxy.url),
        )
        .await
        .expect("connect with a login through the proxy");
        echo(&client, "proxied login").await;
        client.close().await.expect("close");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one login");

        let origin = server.url.trim_end_matches("/mcp");
        let forwarded: Vec<(String, String)> = proxy
            .requests()
            .iter()
            .filter(|r| r["forwarded"] == true)
            .map(|r| {
                let target = r["target"].as_str().unwrap_or_default();
                let path = target.strip_prefix(origin).unwrap_or(target).to_owned();
                (r["method"].as_str().unwrap_or_default().to_owned(), path)
            })
            .collect();
        for (method, path) in [
            ("GET", "/.well-known/oauth-protected-resource/mcp"),
            ("GET", "/.well-known/oauth-authorization-server"),
            ("POST", "/register"),
            ("POST", "/token"),
            ("POST", "/mcp"),
        ] {
            assert!(
                forwarded.iter().any(|(m, p)| m == method && p == path),
                "{method} {path} not through the proxy: {forwarded:#?}"
            );
        }
        // The server saw as many OAuth requests as the proxy forwarded
        // (the "browser" GETs /authorize itself, directly).
        let at_server = server
            .oauth_events()
            .iter()
            .filter(|e| e["path"] != "/authorize" && e["path"] != "/mcp")
            .count();
        let through = forwarded.iter().filter(|(_, p)| p != "/mcp").count();
        assert_eq!(
            at_server,
            through,
            "{forwarded:#?}\n{:#?}",
            server.oauth_events()
        );
    });
}
