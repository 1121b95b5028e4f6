//! `mcpwire doctor`: every configured server started once, through the
//! manager (consent applies: a project's server not approved is reported,
//! not started), each within its timeout, and reported in one place:
//! whether it starts, its era, how long it took, its tools, its login,
//! the network route, and the first error with a hint.

use std::time::{Duration, SystemTime};

use mcpwire::exchange::proxy::Route;
use mcpwire::exchange::HttpUrl;
use mcpwire_manager::tokio::Manager;
use mcpwire_manager::{ManagerOptions, RetryPolicy, ServerState, ServerStatus};
use mcpwire_tokio::auth::AuthState;
use mcpwire_tokio::{ConnectOptions, FileStore, Network, NetworkOptions, ServerConfig, TokenStore};
use serde_json::{json, Value};

use crate::args::*;
use crate::render::print_json;
use crate::target::{auth_options, discovery, searched_files};

/// What a person can do about an error, when mcpwire can tell.
pub(crate) fn hint(name: &str, state: &ServerState, error: Option<&str>) -> Option<String> {
    match state {
        ServerState::NeedsApproval => {
            return Some(format!(
                "a project's server: approve it with `mcpwire approve {name}`"
            ))
        }
        ServerState::Disabled => {
            return Some(format!("turned off in its file: `mcpwire enable {name}`"))
        }
        _ => {}
    }
    let e = error?.to_ascii_lowercase();
    let h = if e.contains("cannot start") || e.contains("no such file") {
        "the command could not be started: is it installed and on PATH?".to_string()
    } else if e.contains("401")
        || e.contains("unauthorized")
        || e.contains("log in")
        || e.contains("authoriz")
    {
        format!("the server wants a login: `mcpwire --server {name} --login info`")
    } else if e.contains("timed out") || e.contains("timeout") {
        "no answer in time: run its command by hand to see it start, or raise --timeout".to_string()
    } else if e.contains("connection refused") || e.contains("dns") || e.contains("resolve") {
        "nothing answers at that address: is the server running, is the URL right?".to_string()
    } else if e.contains("certificate") || e.contains("tls") {
        "the TLS handshake failed: check the server's certificate (and any CA it needs)".to_string()
    } else if e.contains("input `") {
        format!("it asks for a VS Code input: run `mcpwire tools --server {name}` on a terminal")
    } else if e.contains("not set") || e.contains("${") {
        "a variable it uses is not set in the environment".to_string()
    } else if e.contains("invalid entry") {
        format!("its definition is invalid: see `mcpwire get {name}`")
    } else if e.contains("exited") || e.contains("closed") {
        "the process ended before it answered: run its command by hand to see why".to_string()
    } else {
        return None;
    };
    Some(h)
}

/// The login state of an HTTP server, from the token store: `logged in`,
/// `expired` (with or without a refresh token), `none`.
fn auth_state(state: Option<AuthState>) -> String {
    let Some(state) = state else {
        return "none".into();
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match (state.tokens.expired(now, 0), &state.tokens.refresh_token) {
        (false, _) => "logged in".into(),
        (true, Some(_)) => "expired (refreshable)".into(),
        (true, None) => "expired".into(),
    }
}

/// The network route of a server. Proxies and extra CAs per server are
/// coming (the `proxy` and `tls` fields of `ServerConfig`, on another
/// branch): until they are there every HTTP server goes direct.
/// How the client reaches `config`'s server: a local process, directly,
/// or through which proxy (never its password), and with which trust
/// (the system's store, an extra CA, a client certificate, verification
/// off), as `connect` would decide for it with this command's flags.
fn route(config: Option<&ServerConfig>, options: &NetworkOptions) -> String {
    let Some(config) = config else {
        return "-".into();
    };
    let Some(url) = config.url.as_deref() else {
        return "local process".into();
    };
    let network = match Network::resolve(config, options) {
        Ok(n) => n,
        Err(e) => return format!("unusable: {e}"),
    };
    let mut parts = Vec::new();
    match HttpUrl::parse(url)
        .map_err(|e| e.to_string())
        .and_then(|u| {
            network
                .route(&u)
                .map(|r| match r {
                    Route::Direct => "direct".to_owned(),
                    Route::Via(p) => format!("proxy {}:{}", p.host(), p.port()),
                })
                .map_err(|e| e.to_string())
        }) {
        Ok(r) => parts.push(r),
        Err(e) => parts.push(format!("unusable: {e}")),
    }
    if url.starts_with("https:") {
        let tls = config.tls.clone().unwrap_or_default();
        let given = &options.tls;
        if given.insecure || tls.insecure {
            parts.push("TLS verification OFF".into());
        } else if let Some(ca) = given.ca.as_ref().or(tls.ca.as_ref()) {
            parts.push(format!("CA {ca} + system"));
        } else {
            parts.push("system CA".into());
        }
        if given.cert.is_some() || tls.cert.is_some() {
            parts.push("client certificate".into());
        }
    }
    parts.join(", ")
}

/// One server's row.
struct Row {
    status: ServerStatus,
    url: Option<String>,
    protocol: Option<String>,
    finding: Option<String>,
    connect_ms: Option<f64>,
    auth: String,
    route: String,
    error: Option<String>,
    hint: Option<String>,
}

pub(crate) async fn doctor(cli: &Cli, server_cmd: &[String]) -> Result<u8, Fail> {
    if !server_cmd.is_empty() || cli.url.is_some() || cli.sse.is_some() || cli.server.is_some() {
        return Err(Fail::usage(
            "`doctor` checks the configured servers: it takes --config <FILE> and \
             --no-project-config, not a target",
        ));
    }
    let found = discovery(cli).discover();
    if cli.config.is_some() {
        if let Some(e) = found.errors.first() {
            return Err(Fail::usage(e.to_string()));
        }
    }
    let timeout = Duration::from_millis(cli.timeout.unwrap_or(10_000));
    let mut connect = ConnectOptions::new()
        .client_info("mcpwire-cli", env!("CARGO_PKG_VERSION"))
        .allow_cross_origin_redirects(cli.allow_cross_origin_redirect);
    if !cli.login {
        // Stored tokens are used; nothing interactive.
        connect = connect.auth(auth_options(cli)?);
    }
    let retry = RetryPolicy {
        max_attempts: 1,
        retry_initial_connect: false,
        ..RetryPolicy::default()
    };
    let mut options = ManagerOptions::new()
        .no_cache()
        .connect_options(connect)
        .connect_timeout(timeout)
        .retry(retry);
    if let Some(store) = mcpwire_manager::paths::tool_pins(&mcpwire_manager::Env::process()) {
        options = options.tool_pins(store);
    }
    let configs: Vec<_> = found
        .servers
        .iter()
        .map(|e| (e.name.clone(), e.config.clone().ok()))
        .collect();
    let manager = Manager::start(found.servers.clone(), options).await;
    manager.wait_settled(timeout + Duration::from_secs(2)).await;
    let tokens: Option<FileStore> = FileStore::default_path()
        .map(FileStore::new)
        .filter(|_| cli.token_store.is_none());
    let tokens = match &cli.token_store {
        Some(p) if p.as_os_str() != "keychain" => Some(FileStore::new(p.clone())),
        _ => tokens,
    };
    let network = crate::target::network_options(cli)?;
    let mut rows = Vec::new();
    for status in manager.status() {
        let config = configs
            .iter()
            .find(|(n, _)| *n == status.name)
            .and_then(|(_, c)| c.clone());
        let url = config.as_ref().and_then(|c| c.url.clone());
        let client = manager.client(&status.name);
        let error = match &status.state {
            ServerState::Failed { error } => Some(error.clone()),
            ServerState::Connected => None,
            _ => status.last_error.clone(),
        };
        let auth = match (&url, &tokens) {
            (None, _) => "-".into(),
            (Some(u), Some(store)) => auth_state(store.load(u)),
            (Some(_), None) => "unknown (keychain)".into(),
        };
        rows.push(Row {
            hint: hint(&status.name, &status.state, error.as_deref()),
            protocol: client.as_ref().map(|c| c.server().protocol_version.clone()),
            finding: client
                .as_ref()
                .and_then(|c| c.era_finding().map(|f| f.to_string())),
            connect_ms: client
                .as_ref()
                .and_then(|c| c.connect_time())
                .map(|d| d.as_secs_f64() * 1000.0),
            route: route(config.as_ref(), &network),
            url,
            auth,
            error,
            status,
        });
    }
    manager.close().await;
    if cli.json {
        let servers: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "name": r.status.name,
                    "state": r.status.state.label(),
                    "starts": r.status.state == ServerState::Connected,
                    "transport": r.status.transport,
                    "protocolVersion": r.protocol,
                    "eraFinding": r.finding,
                    "connectMs": r.connect_ms,
                    "tools": r.status.tools,
                    "toolChanges": r.status.tool_changes,
                    "auth": r.auth,
                    "route": r.route,
                    "url": r.url,
                    "error": r.error,
                    "hint": r.hint,
                    "source": r.status.source.as_ref().map(|p| p.display().to_string()),
                    "scope": r.status.scope.label(),
                })
            })
            .collect();
        let errors: Vec<Value> = found
            .errors
            .iter()
            .map(|e| json!({"path": e.path.display().to_string(), "message": e.message}))
            .collect();
        print_json(&json!({"servers": servers, "errors": errors}));
        return Ok(0);
    }
    if rows.is_empty() {
        println!(
            "no MCP servers configured (searched {})",
            searched_files(&found)
        );
    } else {
        println!(
            "{:<18} {:<14} {:<11} {:>8} {:>5}  {:<16} {:<13} SOURCE",
            "NAME", "STATE", "ERA", "CONNECT", "TOOLS", "AUTH", "ROUTE"
        );
        for r in &rows {
            let source = r
                .status
                .source
                .as_ref()
                .map_or_else(|| "-".to_string(), |p| p.display().to_string());
            println!(
                "{:<18} {:<14} {:<11} {:>8} {:>5}  {:<16} {:<13} {source}",
                r.status.name,
                r.status.state.label(),
                r.protocol.as_deref().unwrap_or("-"),
                r.connect_ms
                    .map_or_else(|| "-".to_string(), |ms| format!("{ms:.0} ms")),
                r.status.tools,
                r.auth,
                r.route,
            );
            if let Some(f) = &r.finding {
                println!("    era: {f}");
            }
            if let Some(e) = &r.error {
                println!("    error: {e}");
            }
            if let Some(h) = &r.hint {
                println!("    hint: {h}");
            }
            if !r.status.tool_changes.is_empty() {
                let what: Vec<String> = r.status.tool_changes.iter().map(|c| c.summary()).collect();
                println!("    tools changed since pinned: {}", what.join("; "));
            }
        }
    }
    for e in &found.errors {
        println!("file {}: {}", e.path.display(), e.message);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpwire_tokio::ProxyChoice;

    #[test]
    fn hints_name_what_to_do() {
        let failed = ServerState::Failed {
            error: String::new(),
        };
        let h = |e: &str| hint("s", &failed, Some(e)).unwrap_or_default();
        assert!(h("cannot start `x`: No such file or directory").contains("PATH"));
        assert!(h("HTTP 401 Unauthorized").contains("--login"));
        assert!(h("request timed out after 10000 ms").contains("--timeout"));
        assert!(h("connect to 127.0.0.1:9: Connection refused").contains("running"));
        assert!(h("invalid peer certificate: UnknownIssuer").contains("certificate"));
        assert!(h("input `key` (API key) has no value").contains("on a terminal"));
        assert_eq!(hint("s", &failed, Some("something else")), None);
        assert!(hint("s", &ServerState::NeedsApproval, None)
            .unwrap()
            .contains("mcpwire approve s"));
        assert_eq!(hint("s", &ServerState::Connected, None), None);
        let none = NetworkOptions::default();
        assert_eq!(route(None, &none), "-");
        assert_eq!(
            route(Some(&ServerConfig::stdio("srv")), &none),
            "local process"
        );
        let direct = NetworkOptions {
            proxy: Some(ProxyChoice::Direct),
            ..NetworkOptions::default()
        };
        let https = ServerConfig::http("https://h.example/mcp");
        assert_eq!(route(Some(&https), &direct), "direct, system CA");
        let proxied = NetworkOptions {
            proxy: Some(ProxyChoice::Url("http://u:secret@proxy.corp:3128".into())),
            ..NetworkOptions::default()
        };
        let r = route(Some(&https), &proxied);
        assert_eq!(r, "proxy proxy.corp:3128, system CA");
        assert!(!r.contains("secret"));
        assert_eq!(auth_state(None), "none");
        let state = |expires_at: u64, refresh: bool| -> AuthState {
            let mut tokens = json!({"access_token": "a", "expires_at": expires_at});
            if refresh {
                tokens["refresh_token"] = json!("r");
            }
            serde_json::from_value(json!({
                "resource": "https://h/mcp",
                "token_endpoint": "https://h/token",
                "client": {"client_id": "c"},
                "tokens": tokens,
            }))
            .unwrap()
        };
        assert_eq!(auth_state(Some(state(u64::MAX / 2, false))), "logged in");
        assert_eq!(auth_state(Some(state(1, true))), "expired (refreshable)");
        assert_eq!(auth_state(Some(state(1, false))), "expired");
    }
}
