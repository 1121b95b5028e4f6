//! Which server a command talks to: `-- cmd`, `--url`, `--sse` or
//! `--server NAME` (discovery, consent, VS Code inputs, `${VAR}`), and the
//! connection to it.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use mcpwire_manager::pins::ToolPins;
use mcpwire_manager::policy::expand::expand_config;
use mcpwire_manager::{
    consent, discovery, Approvals, Discovered, Discovery, Env, Input, ServerEntry, ToolFilter,
};
use mcpwire_tokio::auth::{ClientCredentials, FnRedirect};
use mcpwire_tokio::{
    AuthOptions, Client, ConnectOptions, EnterpriseIdpOptions, EraCache, FileStore,
    LoopbackRedirect, MemoryStore, NetworkOptions, ProxyChoice, ServerConfig, TokenSource,
    TokenStore,
};
use serde_json::{Map, Value};

use crate::args::*;

/// The server a command talks to, and which of its tools it may see and
/// call (`--server NAME`: the entry's tool list, as in the manager; every
/// tool otherwise).
pub(crate) struct Target {
    pub(crate) config: ServerConfig,
    pub(crate) tools: ToolFilter,
    /// `server "NAME" (FILE)` for a discovered server, for messages.
    pub(crate) label: Option<String>,
    /// A discovered server's tool pins (a project's withhold changes).
    pub(crate) pins: Option<ToolPins>,
}

pub(crate) fn target(cli: &Cli, server_cmd: &[String]) -> Result<Target, Fail> {
    let chosen = [
        !server_cmd.is_empty(),
        cli.url.is_some(),
        cli.sse.is_some(),
        cli.server.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if chosen == 0 {
        return Err(Fail::usage(
            "no server given: add `-- <command> [args...]`, --url <URL>, --sse <URL> or --server <NAME> (try `mcpwire demo`)",
        ));
    }
    if chosen > 1 {
        return Err(Fail::usage(
            "give only one of `-- <command>`, --url, --sse and --server",
        ));
    }
    let mut tools = ToolFilter::default();
    let mut label = None;
    let mut pins = None;
    let mut config = if let Some((cmd, args)) = server_cmd.split_first() {
        ServerConfig::stdio(cmd.clone()).args(args.iter().cloned())
    } else if let Some(url) = &cli.url {
        ServerConfig::http(url.clone())
    } else if let Some(url) = &cli.sse {
        ServerConfig::sse(url.clone())
    } else {
        let name = cli.server.as_deref().unwrap_or_default();
        let (config, entry) = load_named(cli, name)?;
        label = Some(format!("server {name:?} ({})", entry.origin()));
        pins = mcpwire_manager::paths::tool_pins(&mcpwire_manager::Env::process())
            .zip(consent::pin_key(&entry))
            .map(|(store, key)| ToolPins::new(store, key).withhold(consent::needs_consent(&entry)));
        tools = entry.tools;
        config
    };
    for h in &cli.headers {
        let (k, v) = parse_header(h)?;
        config.headers.insert(k, v);
    }
    if let Some(era) = &cli.era {
        config.protocol_era = Some(era.clone());
    }
    for e in &cli.envs {
        let (k, v) = e
            .split_once('=')
            .ok_or_else(|| Fail::usage(format!("--env needs K=V, got {e:?}")))?;
        config.env.insert(k.to_string(), v.to_string());
    }
    if !cli.headers.is_empty() && config.command.is_some() {
        return Err(Fail::usage("--header is for HTTP servers"));
    }
    network_flags(cli, &mut config)?;
    if !cli.envs.is_empty() && config.url.is_some() {
        return Err(Fail::usage("--env is for stdio servers"));
    }
    Ok(Target {
        config,
        tools,
        label,
        pins,
    })
}

impl Target {
    /// A tool the entry's tool list hides is refused as unknown, before
    /// anything is sent (as the manager refuses it).
    pub(crate) fn check_tool(&self, tool: &str) -> Result<(), Fail> {
        if self.tools.allows(tool) {
            return Ok(());
        }
        let whose = self.label.as_deref().unwrap_or("the server");
        Err(Fail::usage(format!(
            "unknown tool `{tool}`: the entry of {whose} does not expose it"
        )))
    }
}

/// `--proxy`, `--no-proxy`, `--cacert`, `--cert`/`--key` and `--insecure`
/// as network options over every entry's (for `doctor`, which reports the
/// route each server takes).
pub(crate) fn network_options(cli: &Cli) -> Result<NetworkOptions, Fail> {
    let mut options = NetworkOptions::default();
    if let Some(url) = &cli.proxy {
        mcpwire::exchange::proxy::ProxyUrl::parse(url, "--proxy")
            .map_err(|e| Fail::usage(e.to_string()))?;
        options.proxy = Some(ProxyChoice::Url(url.clone()));
    }
    if cli.no_proxy {
        options.proxy = Some(ProxyChoice::Direct);
    }
    options.tls.ca = cli.cacert.clone();
    if let (Some(cert), Some(key)) = (&cli.cert, &cli.key) {
        options.tls.cert = Some(cert.clone());
        options.tls.key = Some(key.clone());
    }
    options.tls.insecure = cli.insecure;
    Ok(options)
}

/// `--proxy`, `--no-proxy`, `--cacert`, `--cert`/`--key` and `--insecure`
/// over the entry's `proxy` and `tls` (checked before anything starts).
fn network_flags(cli: &Cli, config: &mut ServerConfig) -> Result<(), Fail> {
    let any_tls = cli.cacert.is_some() || cli.cert.is_some() || cli.insecure;
    if config.command.is_some() && (cli.proxy.is_some() || cli.no_proxy || any_tls) {
        return Err(Fail::usage(
            "--proxy, --no-proxy, --cacert, --cert, --key and --insecure are for HTTP servers",
        ));
    }
    if let Some(url) = &cli.proxy {
        mcpwire::exchange::proxy::ProxyUrl::parse(url, "--proxy")
            .map_err(|e| Fail::usage(e.to_string()))?;
        config.proxy = Some(url.clone());
    }
    if cli.no_proxy {
        config.proxy = Some(String::new());
    }
    if any_tls {
        let tls = config.tls.get_or_insert_with(Default::default);
        if let Some(ca) = &cli.cacert {
            tls.ca = Some(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&cli.cert, &cli.key) {
            tls.cert = Some(cert.clone());
            tls.key = Some(key.clone());
        }
        tls.insecure |= cli.insecure;
    }
    Ok(())
}

/// A `--header 'Name: value'`, checked before anything is started: the
/// name a token (RFC 9110), the value free of control characters.
pub(crate) fn parse_header(h: &str) -> Result<(String, String), Fail> {
    let bad = |why: &str| {
        Fail::usage(format!(
            "invalid --header {h:?}: {why} (expected 'Name: value')"
        ))
    };
    let (k, v) = h.split_once(':').ok_or_else(|| bad("no ':'"))?;
    let (k, v) = (k.trim(), v.trim());
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if k.is_empty() || !k.chars().all(token) {
        return Err(bad(
            "the name must be a token (letters, digits, !#$%&'*+-.^_`|~)",
        ));
    }
    if v.chars().any(|c| c.is_control() && c != '\t') {
        return Err(bad("the value has a control character"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// The discovery `--server` and `servers` use: `--config F` alone, or the
/// project's and the user's files.
pub(crate) fn discovery(cli: &Cli) -> Discovery {
    match &cli.config {
        Some(f) => Discovery::only_files([f]),
        None => Discovery::new().project_files(!cli.no_project_config),
    }
}

/// The named server's config, ready to start, and its entry.
pub(crate) fn load_named(cli: &Cli, name: &str) -> Result<(ServerConfig, ServerEntry), Fail> {
    let found = discovery(cli).discover();
    if cli.config.is_some() {
        if let Some(e) = found.errors.first() {
            return Err(Fail::usage(e.to_string()));
        }
    }
    let Some(entry) = found.get(name) else {
        for e in &found.errors {
            tracing::warn!("skipped {e}");
        }
        let place = match &cli.config {
            Some(f) => f.display().to_string(),
            None if found.servers.is_empty() => {
                return Err(Fail::usage(format!(
                    "no server named {name:?}: no MCP config file defines any (searched {}); \
                     add --config <FILE>",
                    searched_files(&found)
                )))
            }
            None => "the discovered config files".to_string(),
        };
        return Err(Fail::usage(format!(
            "no server named {name:?} in {place} (it has: {})",
            server_names(&found)
        )));
    };
    let origin = entry.origin();
    let raw = entry
        .config
        .clone()
        .map_err(|e| Fail::usage(format!("server {name:?} in {origin}: {e}")))?;
    consent_to(cli, entry, &raw)?;
    let mut values = HashMap::new();
    for input in &entry.inputs {
        let value = ask_input(entry, input).ok_or_else(|| {
            Fail::usage(format!(
                "server {name:?} in {origin} asks for input `{}`{}{}: run it on a terminal",
                input.id,
                input
                    .description
                    .as_ref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default(),
                if input.options.is_empty() {
                    ""
                } else {
                    ", a choice without a default"
                }
            ))
        })?;
        values.insert(input.id.clone(), value);
    }
    let raw = discovery::resolve_inputs(&raw, &|id| values.get(id).cloned())
        .map_err(|e| Fail::usage(format!("server {name:?} in {origin}: {e}")))?;
    let config = expand_config(&raw, &|var| std::env::var(var).ok())
        .map_err(|e| Fail::usage(format!("server {name:?} in {origin}: {e}")))?;
    Ok((config, entry.clone()))
}

/// Asks for a VS Code input on the terminal (a password without echo; a
/// `pickString` as a numbered choice, Enter for the default); `None`
/// without a terminal, except a choice with a default, which is the
/// default.
pub(crate) fn ask_input(entry: &ServerEntry, input: &Input) -> Option<String> {
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !input.options.is_empty() {
        if !terminal {
            return input.default.clone();
        }
        eprint!("{}", pick_prompt(entry, input));
        loop {
            let mut line = String::new();
            if std::io::stdin().read_line(&mut line).ok()? == 0 {
                return None;
            }
            match pick_answer(input, &line) {
                Ok(v) => return Some(v),
                Err(e) => eprint!("mcpwire: {e}; choose again: "),
            }
        }
    }
    if !terminal {
        return None;
    }
    let prompt = input_prompt(entry, input);
    let answer = if input.password {
        rpassword::prompt_password(prompt).ok()?
    } else {
        eprint!("{prompt}");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).ok()?;
        line
    };
    Some(input_answer(input, &answer))
}

/// `mcpwire: server "x" (file) asks for API key [default: d]: `
pub(crate) fn input_prompt(entry: &ServerEntry, input: &Input) -> String {
    let what = input.description.as_deref().unwrap_or(&input.id);
    let default = match (&input.default, input.password) {
        (Some(d), false) => format!(" [default: {d}]"),
        (Some(_), true) => " [default: the configured one]".to_string(),
        (None, _) => String::new(),
    };
    format!(
        "mcpwire: server {:?} ({}) asks for {what}{default}: ",
        entry.name,
        entry.origin()
    )
}

/// The question of a `pickString` input: its options numbered from 1.
///
/// ```text
/// mcpwire: server "x" (file) asks for Region:
///   1) eu-west-1
///   2) US East [default]
/// choose 1-2 (Enter: 2):
/// ```
pub(crate) fn pick_prompt(entry: &ServerEntry, input: &Input) -> String {
    let what = input.description.as_deref().unwrap_or(&input.id);
    let mut out = format!(
        "mcpwire: server {:?} ({}) asks for {what}:\n",
        entry.name,
        entry.origin()
    );
    let mut default = None;
    for (i, o) in input.options.iter().enumerate() {
        let is_default = input.default.as_deref() == Some(o.value.as_str());
        if is_default {
            default = Some(i + 1);
        }
        out.push_str(&format!(
            "  {}) {}{}\n",
            i + 1,
            o.shown(),
            if is_default { " [default]" } else { "" }
        ));
    }
    let n = input.options.len();
    match default {
        Some(d) => out.push_str(&format!("choose 1-{n} (Enter: {d}): ")),
        None => out.push_str(&format!("choose 1-{n}: ")),
    }
    out
}

/// The value a typed answer to a `pickString` chooses: a number from 1,
/// an option's value or label, or nothing for the default.
pub(crate) fn pick_answer(input: &Input, typed: &str) -> Result<String, String> {
    let typed = typed.trim();
    let n = input.options.len();
    if typed.is_empty() {
        return input
            .default
            .clone()
            .ok_or_else(|| format!("there is no default: type a number from 1 to {n}"));
    }
    if let Ok(k) = typed.parse::<usize>() {
        if (1..=n).contains(&k) {
            return Ok(input.options[k - 1].value.clone());
        }
    }
    input
        .options
        .iter()
        .find(|o| o.value == typed || o.label.as_deref() == Some(typed))
        .map(|o| o.value.clone())
        .ok_or_else(|| format!("{typed:?} is not one of the choices 1 to {n}"))
}

/// The typed line without its line end; empty means the default.
pub(crate) fn input_answer(input: &Input, typed: &str) -> String {
    let typed = typed.trim_end_matches(['\r', '\n']);
    match (&input.default, typed.is_empty()) {
        (Some(d), true) => d.clone(),
        _ => typed.to_string(),
    }
}

/// A project's server runs only once approved: already, by `--approve`,
/// or by the user's answer on a terminal; else exit 2 naming the command
/// that approves.
pub(crate) fn consent_to(cli: &Cli, entry: &ServerEntry, raw: &ServerConfig) -> Result<(), Fail> {
    if !consent::needs_consent(entry) {
        return Ok(());
    }
    let mut approvals = user_approvals()?;
    if approvals.is_approved(entry) {
        return Ok(());
    }
    let name = &entry.name;
    let asked = !cli.approve && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !cli.approve && !asked {
        return Err(Fail::usage(format!(
            "server {name:?} is defined by this project ({}) and not approved: it runs {}.              Approve it with `mcpwire approve {name}` (or add --approve)",
            entry.origin(),
            describe_definition(raw)
        )));
    }
    if asked {
        eprint!(
            "mcpwire: {} defines server {name:?}, which runs {}.
Start it? [y/N] ",
            entry.origin(),
            describe_definition(raw)
        );
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
            return Err(Fail::usage(format!("server {name:?} not approved")));
        }
    }
    approvals
        .approve(entry)
        .map_err(|e| Fail::usage(format!("cannot record the approval: {e}")))
}

pub(crate) fn user_approvals() -> Result<Approvals, Fail> {
    Approvals::load_user(&Env::process()).map_err(|e| Fail::usage(e.to_string()))
}

/// What a definition runs, for the question: the command line or the URL.
pub(crate) fn describe_definition(config: &ServerConfig) -> String {
    match (&config.command, &config.url) {
        (Some(cmd), _) => {
            let mut line = shell_words(std::iter::once(cmd).chain(&config.args));
            if !config.env.is_empty() {
                let keys: Vec<&str> = config.env.keys().map(String::as_str).collect();
                line.push_str(&format!(" (env: {})", keys.join(", ")));
            }
            format!("`{line}`")
        }
        (None, Some(url)) => format!("nothing locally; it connects to {url}"),
        (None, None) => "nothing".to_string(),
    }
}

pub(crate) fn shell_words<'a>(words: impl Iterator<Item = &'a String>) -> String {
    words
        .map(|w| {
            if !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The files discovery looked at, for messages.
pub(crate) fn searched_files(found: &Discovered) -> String {
    found
        .searched
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names discovery found, for messages.
pub(crate) fn server_names(found: &Discovered) -> String {
    found
        .servers
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn parse_args(json_args: Option<&str>, pairs: &[String]) -> Result<Value, Fail> {
    let mut map = match json_args {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(Fail::usage("--args must be a JSON object")),
            Err(e) => return Err(Fail::usage(format!("--args is not JSON: {e}"))),
        },
        None => Map::new(),
    };
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| Fail::usage(format!("expected key=value, got {p:?}")))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        map.insert(k.to_string(), value);
    }
    Ok(Value::Object(map))
}

/// `--token-store`: `keychain` (the OS credential store), a file, or by
/// default `~/.config/mcpwire/tokens.json`.
fn token_store(cli: &Cli, auth: AuthOptions) -> Result<AuthOptions, Fail> {
    let keychain = cli
        .token_store
        .as_deref()
        .is_some_and(|p| p.as_os_str() == "keychain");
    if keychain {
        #[cfg(feature = "keychain")]
        return Ok(with_store(auth, mcpwire_tokio::KeychainStore::new()));
        #[cfg(not(feature = "keychain"))]
        return Err(Fail::usage(
            "--token-store keychain: this mcpwire was built without the `keychain` feature",
        ));
    }
    Ok(
        match cli.token_store.clone().or_else(FileStore::default_path) {
            Some(path) => with_store(auth, FileStore::new(path)),
            None => auth.store(MemoryStore::default()),
        },
    )
}

/// `auth` with `store`. For measurements only, `MCPWIRE_TEST_UNLOCKED_TOKEN_STORE=1`
/// leaves out the store's lock around a refresh (what every refresh did
/// before: cli/tests/token_race.rs counts the refreshes both ways).
fn with_store(auth: AuthOptions, store: impl TokenStore) -> AuthOptions {
    /// The store without its lock: `TokenStore::lock`'s default.
    struct Unlocked<S>(S);
    impl<S: TokenStore> TokenStore for Unlocked<S> {
        fn load(&self, endpoint: &str) -> Option<mcpwire_tokio::auth::AuthState> {
            self.0.load(endpoint)
        }
        fn save(
            &self,
            state: &mcpwire_tokio::auth::AuthState,
        ) -> Result<(), mcpwire_tokio::auth::StoreError> {
            self.0.save(state)
        }
    }
    if std::env::var_os("MCPWIRE_TEST_UNLOCKED_TOKEN_STORE").is_some_and(|v| v == "1") {
        auth.store(Unlocked(store))
    } else {
        auth.store(store)
    }
}

/// OAuth for an HTTP server: stored tokens always; the browser only with
/// `--login`.
pub(crate) fn auth_options(cli: &Cli) -> Result<AuthOptions, Fail> {
    let mut auth = if cli.login {
        let redirect = LoopbackRedirect::bind(!cli.no_browser).map_err(|e| Fail {
            code: 3,
            message: format!("cannot listen on 127.0.0.1 for the login redirect: {e}"),
        })?;
        AuthOptions::new(redirect)
    } else {
        AuthOptions::new(FnRedirect::new("http://127.0.0.1/callback", |_: &str| {
            Err("log in first with --login".into())
        }))
        .interactive(false)
    };
    auth = token_store(cli, auth)?;
    match (&cli.client_id, &cli.client_secret) {
        (Some(id), secret) => {
            let mut c = ClientCredentials::public(id.clone());
            c.client_secret = secret.clone();
            auth = auth.client(c);
        }
        (None, Some(_)) => return Err(Fail::usage("--client-secret needs --client-id")),
        (None, None) => {}
    }
    if let Some(scope) = &cli.scope {
        auth = auth.scope(scope.clone());
    }
    auth = auth.dpop(!cli.no_dpop);
    if let Some(spec) = &cli.workload_identity {
        if cli.client_id.is_none() {
            return Err(Fail::usage("--workload-identity needs --client-id"));
        }
        auth = auth
            .workload_identity(TokenSource::parse(spec).map_err(|e| Fail::usage(e.to_string()))?);
    }
    match (&cli.idp_id_token, &cli.idp_token_endpoint) {
        (Some(spec), Some(endpoint)) => {
            if cli.workload_identity.is_some() {
                return Err(Fail::usage(
                    "--workload-identity and --idp-id-token are two different grants",
                ));
            }
            if cli.client_id.is_none() {
                return Err(Fail::usage("--idp-id-token needs --client-id"));
            }
            let idp = EnterpriseIdpOptions {
                token_endpoint: endpoint.clone(),
                client_id: cli.idp_client_id.clone().unwrap_or_default(),
                client_secret: cli.idp_client_secret.clone(),
            };
            auth = auth.enterprise(
                idp,
                TokenSource::parse(spec).map_err(|e| Fail::usage(e.to_string()))?,
            );
        }
        (None, None) => {}
        _ => {
            return Err(Fail::usage(
                "--idp-id-token and --idp-token-endpoint go together",
            ))
        }
    }
    Ok(auth.config(|c| c.client_name = "mcpwire-cli".into()))
}

pub(crate) async fn connect(
    cli: &Cli,
    config: ServerConfig,
    pins: Option<ToolPins>,
) -> Result<Client, Fail> {
    let options = connect_options(cli, &config, pins)?;
    Client::connect_with(config, options)
        .await
        .map_err(Fail::from)
}

/// The options every command connects with: the CLI's name, the era
/// cache, timeouts, authorization for HTTP servers, the entry's pins.
pub(crate) fn connect_options(
    cli: &Cli,
    config: &ServerConfig,
    pins: Option<ToolPins>,
) -> Result<ConnectOptions, Fail> {
    let mut options = ConnectOptions::new()
        .client_info("mcpwire-cli", env!("CARGO_PKG_VERSION"))
        .allow_cross_origin_redirects(cli.allow_cross_origin_redirect)
        .validate_output(!cli.no_validate);
    // A server of the handshake era is probed once per user, not at every
    // command.
    if let Some(cache) = EraCache::user() {
        options = options.era_cache(cache);
    }
    if let Some(ms) = cli.timeout {
        options = options.timeout(Duration::from_millis(ms));
    }
    if let Some(secs) = cli.max_task_wait {
        options = options.max_task_wait((secs > 0).then(|| Duration::from_secs(secs)));
    }
    if config.url.is_some() {
        options = options.auth(auth_options(cli)?);
    } else if cli.login {
        return Err(Fail::usage("--login is for HTTP servers (--url, --sse)"));
    }
    if let Some(pins) = pins {
        options = options.pin_tools(pins);
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(password: bool, default: Option<&str>) -> Input {
        Input {
            id: "api-key".into(),
            description: Some("API Key".into()),
            password,
            default: default.map(str::to_string),
            options: Vec::new(),
        }
    }

    #[test]
    fn pick_prompts_and_answers() {
        use mcpwire_manager::discovery::PickOption;
        let entry = ServerEntry::new("srv", ServerConfig::stdio("x"));
        let mut pick = Input {
            id: "region".into(),
            description: Some("Region".into()),
            default: Some("us-east-1".into()),
            options: vec![
                PickOption {
                    label: None,
                    value: "eu-west-1".into(),
                },
                PickOption {
                    label: Some("US East".into()),
                    value: "us-east-1".into(),
                },
            ],
            ..Input::default()
        };
        assert_eq!(
            pick_prompt(&entry, &pick),
            "mcpwire: server \"srv\" (code) asks for Region:\n  1) eu-west-1\n  2) US East [default]\nchoose 1-2 (Enter: 2): "
        );
        assert_eq!(pick_answer(&pick, "\n").unwrap(), "us-east-1");
        assert_eq!(pick_answer(&pick, " 1 \r\n").unwrap(), "eu-west-1");
        assert_eq!(pick_answer(&pick, "US East\n").unwrap(), "us-east-1");
        assert_eq!(pick_answer(&pick, "eu-west-1").unwrap(), "eu-west-1");
        assert!(pick_answer(&pick, "3").unwrap_err().contains("1 to 2"));
        assert!(pick_answer(&pick, "0").is_err());
        assert!(pick_answer(&pick, "mars").unwrap_err().contains("\"mars\""));
        pick.default = None;
        assert!(pick_prompt(&entry, &pick).ends_with("choose 1-2: "));
        assert!(pick_answer(&pick, "").unwrap_err().contains("no default"));
    }

    #[test]
    fn input_prompts_and_answers() {
        let entry = ServerEntry::new("srv", ServerConfig::stdio("x"));
        assert_eq!(
            input_prompt(&entry, &input(false, Some("ada"))),
            "mcpwire: server \"srv\" (code) asks for API Key [default: ada]: "
        );
        // A secret default is never shown.
        let p = input_prompt(&entry, &input(true, Some("s3cret")));
        assert!(!p.contains("s3cret"), "{p}");
        let mut bare = input(false, None);
        bare.description = None;
        assert!(input_prompt(&entry, &bare).contains("asks for api-key: "));

        assert_eq!(input_answer(&input(false, Some("ada")), "\n"), "ada");
        assert_eq!(input_answer(&input(false, Some("ada")), "bob\r\n"), "bob");
        assert_eq!(input_answer(&input(true, None), ""), "");
        assert_eq!(input_answer(&input(true, None), " x y \n"), " x y ");
    }
}
