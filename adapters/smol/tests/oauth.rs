//! OAuth 2.1 end to end on smol: `mcpwire-test-server --http --oauth` is the
//! MCP server and its authorization server; the "browser" GETs the
//! authorization URL and hands back the `Location` of its 302. (The tokio
//! adapter's `tests/oauth.rs` has the other cases.)
//!
//! The test server binary must be current: `cargo build -p mcpwire-tests
//! --bin mcpwire-test-server` after changing it.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcpwire_smol::auth::FnRedirect;
use mcpwire_smol::{AuthOptions, Client, ConnectOptions, FileStore, ServerConfig};
use mcpwire_tests::oauth::fetch_redirect;
use serde_json::{json, Value};

/// An `--http --oauth` test server, killed on drop; its directory (log and
/// token file) removed.
struct Server {
    child: Child,
    url: String,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    fn start() -> Server {
        Server::start_with("login", &[])
    }

    fn start_with(tag: &str, args: &[&str]) -> Server {
        let dir =
            std::env::temp_dir().join(format!("mcpwire-smol-oauth-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        let mut child = Command::new(mcpwire_tests::test_server_binary())
            .args(["--http", "--oauth", "--log-file"])
            .arg(dir.join("server.log"))
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
            dir,
        }
    }

    /// How many log lines have this `event`.
    fn events(&self, event: &str) -> usize {
        std::fs::read_to_string(self.dir.join("server.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == event)
            .count()
    }

    /// How many logged `oauth` events have this path and status.
    fn count(&self, path: &str, status: u16) -> usize {
        std::fs::read_to_string(self.dir.join("server.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == "oauth" && v["path"] == path && v["status"] == status)
            .count()
    }
}

#[test]
fn login_then_the_stored_token_is_used() {
    smol::block_on(async {
        let server = Server::start();
        let store = FileStore::new(server.dir.join("tokens.json"));
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let auth = AuthOptions::new(FnRedirect::new(
            "http://127.0.0.1:9/callback",
            move |url: &str| {
                counted.fetch_add(1, Ordering::SeqCst);
                fetch_redirect(url).map_err(Into::into)
            },
        ))
        .store(store.clone());
        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            ConnectOptions::new()
                .timeout(Duration::from_secs(20))
                .auth(auth),
        )
        .await
        .expect("connect with a login");
        assert!(client
            .list_tools()
            .await
            .expect("tools/list")
            .iter()
            .any(|t| t.name == "echo"));
        let r = client
            .call_tool("echo", json!({"message": "smol"}))
            .await
            .expect("echo");
        assert_eq!(r.text(), "Echo: smol");
        client.close().await.expect("close");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(server.count("/authorize", 302), 1);
        assert_eq!(server.count("/token", 200), 1);

        let text = std::fs::read_to_string(store.path()).expect("the token file exists");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
        }
        let saved: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(saved["states"][0]["resource"], server.url.as_str());

        // Again with the stored token: no login.
        let refused = Arc::new(AtomicUsize::new(0));
        let counted = refused.clone();
        let auth = AuthOptions::new(FnRedirect::new(
            "http://127.0.0.1:9/callback",
            move |url: &str| {
                counted.fetch_add(1, Ordering::SeqCst);
                Err(format!("the redirect handler was called for {url}").into())
            },
        ))
        .store(store);
        let client = Client::connect_with(
            ServerConfig::http(&server.url),
            ConnectOptions::new()
                .timeout(Duration::from_secs(20))
                .auth(auth),
        )
        .await
        .expect("connect with the stored token");
        client.ping().await.expect("ping");
        client.close().await.expect("close");
        assert_eq!(refused.load(Ordering::SeqCst), 0);
        assert_eq!(server.count("/authorize", 302), 1);
        assert_eq!(server.count("/mcp", 401), 1, "only the first connection's");
    });
}

/// Two connections of one process sharing a store (a file, or memory)
/// meet the expired token together: one refresh (the server holds it, so
/// they overlap), and the other connection uses its tokens; a server that
/// revokes the grant on a reused refresh token sees no reuse.
#[test]
fn connections_sharing_a_store_refresh_once() {
    smol::block_on(async {
        for memory in [false, true] {
            let server = Server::start_with(
                if memory {
                    "shared-memory"
                } else {
                    "shared-file"
                },
                &["--oauth-reuse-revokes", "--oauth-refresh-delay", "300"],
            );
            let store: Arc<dyn mcpwire_smol::TokenStore> = if memory {
                Arc::new(mcpwire_smol::MemoryStore::default())
            } else {
                Arc::new(FileStore::new(server.dir.join("tokens.json")))
            };
            struct Shared(Arc<dyn mcpwire_smol::TokenStore>);
            impl mcpwire_smol::TokenStore for Shared {
                fn load(&self, e: &str) -> Option<mcpwire_smol::auth::AuthState> {
                    self.0.load(e)
                }
                fn save(
                    &self,
                    s: &mcpwire_smol::auth::AuthState,
                ) -> Result<(), mcpwire_smol::auth::StoreError> {
                    self.0.save(s)
                }
                fn lock(
                    self: Arc<Self>,
                ) -> Result<Box<dyn mcpwire_smol::StoreLock>, mcpwire_smol::auth::StoreError>
                {
                    self.0.clone().lock()
                }
            }
            let connect = |store: Arc<dyn mcpwire_smol::TokenStore>| {
                let url = server.url.clone();
                async move {
                    let auth = AuthOptions::new(FnRedirect::new(
                        "http://127.0.0.1:9/callback",
                        |url: &str| fetch_redirect(url).map_err(Into::into),
                    ))
                    .store(Shared(store));
                    Client::connect_with(
                        ServerConfig::http(&url),
                        ConnectOptions::new()
                            .timeout(Duration::from_secs(30))
                            .auth(auth),
                    )
                    .await
                }
            };
            // Log in once.
            connect(store.clone())
                .await
                .expect("login")
                .close()
                .await
                .expect("close");
            let origin = server.url.trim_end_matches("/mcp");
            let status =
                mcpwire_tests::oauth::post_empty(&format!("{origin}/oauth/expire")).unwrap();
            assert!(status.contains("200"), "{status}");
            let (a, b) = smol::future::zip(connect(store.clone()), connect(store.clone())).await;
            for c in [a.expect("first"), b.expect("second")] {
                let r = c
                    .call_tool("echo", json!({"message": "shared"}))
                    .await
                    .expect("echo");
                assert_eq!(r.text(), "Echo: shared");
                c.close().await.expect("close");
            }
            assert_eq!(
                server.count("/token", 200),
                2,
                "the login's and one refresh"
            );
            assert_eq!(server.events("grant_revoked"), 0);
            assert_eq!(server.count("/token", 400), 0);
        }
    });
}
