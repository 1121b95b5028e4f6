//! `mcpwire`: inspect and call any MCP server.
//!
//! ```text
//! mcpwire [OPTIONS] <COMMAND> [TARGET]
//! COMMAND:  tools | call <tool> [--args JSON] | resources | read <uri> | prompts
//!           | prompt <name> [--args JSON] | ping | info | demo | serve --demo
//!           | servers [--sources] [--config F] [--no-project-config] | approve <name>
//! TARGET:   -- <command> [args...] | --url <URL> | --sse <URL> | --server <NAME> [--config F]
//! ```
//!
//! `--server NAME` finds NAME with the manager's discovery (explicit
//! `--config F` only, else project files then user files; see
//! `mcpwire_manager::discovery`), expanding `${VAR}` and
//! `${VAR:-default}`. `servers` starts every discovered server and lists
//! it with its status and tool count (a host entry's tool list, such as
//! Gemini's `includeTools`, is applied); `servers --sources` starts
//! nothing and lists every file searched with what it contributed.
//!
//! A server of a project's file (`.mcp.json`, `.cursor/mcp.json`, …) runs
//! only once the user approved it (`mcpwire_manager::consent`): `servers`
//! lists it as `needs approval` without starting it; `approve NAME` (or
//! `--approve` with `--server NAME` or `servers`) records the approval; on
//! a terminal `--server NAME` asks once (y/N), without one it fails with
//! exit 2 naming the command that approves.
//!
//! OAuth (HTTP servers): `--login` runs the authorization in the browser
//! (`--no-browser`: print the URL) when the server asks for it, and keeps
//! the tokens in `~/.config/mcpwire/tokens.json` (0600; `--token-store F`);
//! later runs use them, refreshing when needed, and fail with a hint to log
//! in when a user is needed.
//!
//! Exit codes: 0 ok; 1 the tool returned `isError: true`; 2 usage error;
//! 3 connection, protocol or server error; 4 timeout; 130 interrupted.

mod demo_server;

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use mcpwire::manager::expand::expand_config;
use mcpwire_manager::{
    consent, discovery, Approvals, Discovered, Discovery, Env, Input, Manager, ManagerOptions,
    ServerEntry, ServerState,
};
use mcpwire_tokio::auth::{ClientCredentials, FnRedirect};
use mcpwire_tokio::types::{CallToolResult, Content, ResourceContents};
use mcpwire_tokio::{
    AuthOptions, CallOptions, CancelToken, Client, ConnectOptions, Error, FileStore,
    LoopbackRedirect, MemoryStore, RequestError, ServerConfig, ServerNotification,
};
use serde_json::{json, Map, Value};

#[derive(Parser, Debug)]
#[command(
    name = "mcpwire",
    version,
    about = "Inspect and call any MCP server (stdio, Streamable HTTP, legacy SSE)",
    after_help = "TARGET: `-- <command> [args...]` (stdio), --url <URL>, --sse <URL>, or --server <NAME> [--config F].\n\
                  --server without --config searches the project's .mcp.json, mcp.json, .cursor/mcp.json, .vscode/mcp.json,\n\
                  .gemini/settings.json, .codex/config.toml, then the user's ~/.cursor/mcp.json, Claude Desktop's config,\n\
                  ~/.claude.json, ~/.codex/config.toml, ~/.copilot/mcp-config.json, Windsurf's, Gemini CLI's and Zed's\n\
                  settings, VS Code's user mcp.json and Goose's config.yaml (first definition wins;\n\
                  `mcpwire servers --sources` lists them).\n\
                  Exit codes: 0 ok, 1 tool error (isError), 2 usage, 3 connection/protocol/server error, 4 timeout, 130 interrupted.\n\
                  Try: mcpwire demo"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Streamable HTTP endpoint (falls back to legacy SSE per the spec).
    #[arg(long, global = true, value_name = "URL")]
    url: Option<String>,
    /// Legacy HTTP+SSE endpoint.
    #[arg(long, global = true, value_name = "URL")]
    sse: Option<String>,
    /// A server by name from the MCP config files (see --config).
    #[arg(long, global = true, value_name = "NAME")]
    server: Option<String>,
    /// The only mcpServers file for --server and `servers` (default: discover
    /// the project's and the user's config files).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Ignore the project's config files (.mcp.json, mcp.json, .cursor/,
    /// .vscode/, .gemini/, .codex/): for checkouts you do not trust to
    /// start programs.
    #[arg(long, global = true)]
    no_project_config: bool,
    /// Approve the project's servers this command starts (--server NAME:
    /// that one; `servers`: every one listed), as `mcpwire approve` does.
    #[arg(long, global = true)]
    approve: bool,
    /// Machine-readable result on stdout.
    #[arg(long, global = true)]
    json: bool,
    /// Per-request timeout in milliseconds.
    #[arg(long, global = true, value_name = "MS")]
    timeout: Option<u64>,
    /// Follow an HTTP redirect to another origin (scheme, host or port);
    /// Authorization, Cookie and Mcp-Session-Id are not sent there.
    /// Without it such a redirect is an error.
    #[arg(long, global = true)]
    allow_cross_origin_redirect: bool,
    /// Extra HTTP header 'Name: value' (repeatable; HTTP only).
    #[arg(long = "header", global = true, value_name = "K: V")]
    headers: Vec<String>,
    /// Environment variable K=V for a stdio server (repeatable).
    #[arg(long = "env", global = true, value_name = "K=V")]
    envs: Vec<String>,
    /// More logging on stderr (-v: server stderr and protocol notes; -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Less logging on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Log in (OAuth) if the HTTP server asks for it: opens the browser and
    /// stores the tokens for later runs. Without a command: log in and show
    /// `info`.
    #[arg(long, global = true)]
    login: bool,
    /// With --login: print the authorization URL instead of opening a
    /// browser (the redirect still comes back to 127.0.0.1).
    #[arg(long, global = true)]
    no_browser: bool,
    /// Where OAuth tokens are kept (default ~/.config/mcpwire/tokens.json).
    #[arg(long, global = true, value_name = "FILE")]
    token_store: Option<PathBuf>,
    /// A pre-registered OAuth client id (else the client registers itself).
    #[arg(long, global = true, value_name = "ID")]
    client_id: Option<String>,
    /// The secret of --client-id, for a confidential client.
    #[arg(long, global = true, value_name = "SECRET")]
    client_secret: Option<String>,
    /// The OAuth scope to ask for (else the server's challenge decides).
    #[arg(long, global = true, value_name = "SCOPE")]
    scope: Option<String>,
    /// Protocol era: auto (probe for 2026-07-28, fall back to the
    /// 2025-11-25 handshake), legacy, or modern.
    #[arg(long, global = true, value_name = "ERA", value_parser = ["auto", "legacy", "modern"])]
    era: Option<String>,
}

impl Cli {
    /// The command (`info` when only `--login` was given).
    fn cmd(&self) -> &Cmd {
        self.command.as_ref().unwrap_or(&Cmd::Info)
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List the server's tools.
    Tools,
    /// Call a tool: `call echo --args '{"message":"hi"}'` or `call echo message=hi`.
    Call {
        /// The tool.
        tool: String,
        /// Arguments as a JSON object.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        /// Arguments as key=value pairs (values parsed as JSON when they can be).
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// List the server's resources.
    Resources,
    /// Read a resource.
    Read {
        /// Its URI.
        uri: String,
    },
    /// List the server's prompts.
    Prompts,
    /// Get a prompt.
    Prompt {
        /// The prompt.
        name: String,
        /// Arguments as a JSON object.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        /// Arguments as key=value pairs.
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// Check the server answers.
    Ping,
    /// Server name, version, protocol, transport, capabilities, instructions.
    Info,
    /// Walk through a session with the built-in demo server.
    Demo,
    /// List the configured servers with their status and tool counts.
    Servers {
        /// List the config files instead (nothing is started): every file
        /// searched, whether it is there, its scope and host, the servers
        /// it defines, the ones an earlier file defined, and its errors.
        #[arg(long)]
        sources: bool,
    },
    /// Approve a server of the project's config files, so that it may run
    /// (kept per user, for this project and this definition).
    Approve {
        /// The server's name.
        name: String,
    },
    /// Run a server on stdio.
    Serve {
        /// The built-in demo server.
        #[arg(long)]
        demo: bool,
    },
}

/// A failure with its exit code.
struct Fail {
    code: u8,
    message: String,
}

impl Fail {
    fn usage(message: impl Into<String>) -> Fail {
        Fail {
            code: 2,
            message: message.into(),
        }
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        let code = match &e {
            Error::Request(RequestError::Timeout { .. }) => 4,
            Error::Request(RequestError::Cancelled { .. }) => 130,
            Error::Config(_) => 2,
            _ => 3,
        };
        Fail {
            code,
            message: e.to_string(),
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    // Everything after the first `--` is the server command.
    let (front, server_cmd) = match argv.iter().position(|a| a == "--") {
        Some(i) => (argv[..i].to_vec(), argv[i + 1..].to_vec()),
        None => (argv, Vec::new()),
    };
    let cli = match Cli::try_parse_from(front) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if cli.command.is_none() && !cli.login {
        eprintln!("mcpwire: a command is required (try `mcpwire --help` or `mcpwire demo`)");
        return ExitCode::from(2);
    }
    if let Cmd::Serve { demo } = *cli.cmd() {
        if !demo {
            eprintln!("mcpwire: `serve` needs --demo (the only built-in server)");
            return ExitCode::from(2);
        }
        demo_server::run();
        return ExitCode::SUCCESS;
    }
    init_logging(cli.verbose, cli.quiet);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpwire: cannot start the runtime: {e}");
            return ExitCode::from(3);
        }
    };
    match runtime.block_on(run(cli, server_cmd)) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            if !f.message.is_empty() {
                eprintln!("mcpwire: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

/// Colours only for a person: stderr is a terminal and `NO_COLOR` is
/// unset or empty (<https://no-color.org>).
fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && no_color_unset()
}

fn no_color_unset() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => tracing::Level::ERROR,
        (false, 0) => tracing::Level::WARN,
        (false, 1) => tracing::Level::DEBUG,
        (false, _) => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(colour_on_stderr())
        .with_writer(std::io::stderr)
        .with_target(verbose > 0)
        .without_time()
        .init();
}

fn target(cli: &Cli, server_cmd: &[String]) -> Result<ServerConfig, Fail> {
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
    let mut config = if let Some((cmd, args)) = server_cmd.split_first() {
        ServerConfig::stdio(cmd.clone()).args(args.iter().cloned())
    } else if let Some(url) = &cli.url {
        ServerConfig::http(url.clone())
    } else if let Some(url) = &cli.sse {
        ServerConfig::sse(url.clone())
    } else {
        let name = cli.server.as_deref().unwrap_or_default();
        load_named(cli, name)?
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
    if !cli.envs.is_empty() && config.url.is_some() {
        return Err(Fail::usage("--env is for stdio servers"));
    }
    Ok(config)
}

/// A `--header 'Name: value'`, checked before anything is started: the
/// name a token (RFC 9110), the value free of control characters.
fn parse_header(h: &str) -> Result<(String, String), Fail> {
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
fn discovery(cli: &Cli) -> Discovery {
    match &cli.config {
        Some(f) => Discovery::only_files([f]),
        None => Discovery::new().project_files(!cli.no_project_config),
    }
}

fn load_named(cli: &Cli, name: &str) -> Result<ServerConfig, Fail> {
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
                    found
                        .searched
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
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
                "server {name:?} in {origin} asks for input `{}`{}: run it on a terminal",
                input.id,
                input
                    .description
                    .as_ref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ))
        })?;
        values.insert(input.id.clone(), value);
    }
    let raw = discovery::resolve_inputs(&raw, &|id| values.get(id).cloned())
        .map_err(|e| Fail::usage(format!("server {name:?} in {origin}: {e}")))?;
    expand_config(&raw, &|var| std::env::var(var).ok())
        .map_err(|e| Fail::usage(format!("server {name:?} in {origin}: {e}")))
}

/// Asks for a VS Code input on the terminal (a password without echo);
/// `None` without a terminal.
fn ask_input(entry: &ServerEntry, input: &Input) -> Option<String> {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
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
fn input_prompt(entry: &ServerEntry, input: &Input) -> String {
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

/// The typed line without its line end; empty means the default.
fn input_answer(input: &Input, typed: &str) -> String {
    let typed = typed.trim_end_matches(['\r', '\n']);
    match (&input.default, typed.is_empty()) {
        (Some(d), true) => d.clone(),
        _ => typed.to_string(),
    }
}

/// A project's server runs only once approved: already, by `--approve`,
/// or by the user's answer on a terminal; else exit 2 naming the command
/// that approves.
fn consent_to(cli: &Cli, entry: &ServerEntry, raw: &ServerConfig) -> Result<(), Fail> {
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

fn user_approvals() -> Result<Approvals, Fail> {
    Approvals::load_user(&Env::process()).map_err(|e| Fail::usage(e.to_string()))
}

/// What a definition runs, for the question: the command line or the URL.
fn describe_definition(config: &ServerConfig) -> String {
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

fn shell_words<'a>(words: impl Iterator<Item = &'a String>) -> String {
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

/// The names discovery found, for messages.
fn server_names(found: &Discovered) -> String {
    found
        .servers
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `mcpwire approve NAME`: records the user's approval of a project's
/// server (this project, this definition).
fn approve(cli: &Cli, name: &str) -> Result<u8, Fail> {
    let found = discovery(cli).discover();
    let Some(entry) = found.get(name) else {
        return Err(Fail::usage(format!(
            "no server named {name:?} in the discovered config files (it has: {})",
            server_names(&found)
        )));
    };
    if !consent::needs_consent(entry) {
        println!(
            "server {name:?} comes from {} ({} scope): it needs no approval",
            entry.origin(),
            entry.scope.label()
        );
        return Ok(0);
    }
    let raw = entry
        .config
        .as_ref()
        .map_err(|e| Fail::usage(format!("server {name:?} in {}: {e}", entry.origin())))?;
    let mut approvals = user_approvals()?;
    approvals
        .approve(entry)
        .map_err(|e| Fail::usage(format!("cannot record the approval: {e}")))?;
    println!(
        "approved {name:?} of {} — it runs {}",
        entry.origin(),
        describe_definition(raw)
    );
    Ok(0)
}

fn parse_args(json_args: Option<&str>, pairs: &[String]) -> Result<Value, Fail> {
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

/// OAuth for an HTTP server: stored tokens always; the browser only with
/// `--login`.
fn auth_options(cli: &Cli) -> Result<AuthOptions, Fail> {
    let mut auth = if cli.login {
        let redirect = LoopbackRedirect::bind(!cli.no_browser).map_err(|e| Fail {
            code: 3,
            message: format!("cannot listen on 127.0.0.1 for the login redirect: {e}"),
        })?;
        AuthOptions::new(redirect)
    } else {
        AuthOptions::new(FnRedirect::new("http://127.0.0.1/callback", |_: &str| {
            Err("log in first with --login".to_string())
        }))
        .interactive(false)
    };
    auth = match cli.token_store.clone().or_else(FileStore::default_path) {
        Some(path) => auth.store(FileStore::new(path)),
        None => auth.store(MemoryStore::default()),
    };
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
    Ok(auth.config(|c| c.client_name = "mcpwire-cli".into()))
}

async fn connect(cli: &Cli, config: ServerConfig) -> Result<Client, Fail> {
    let mut options = ConnectOptions::new()
        .client_info("mcpwire-cli", env!("CARGO_PKG_VERSION"))
        .allow_cross_origin_redirects(cli.allow_cross_origin_redirect);
    if let Some(ms) = cli.timeout {
        options = options.timeout(Duration::from_millis(ms));
    }
    if config.url.is_some() {
        options = options.auth(auth_options(cli)?);
    } else if cli.login {
        return Err(Fail::usage("--login is for HTTP servers (--url, --sse)"));
    }
    Client::connect_with(config, options)
        .await
        .map_err(Fail::from)
}

async fn run(cli: Cli, server_cmd: Vec<String>) -> Result<u8, Fail> {
    if let Cmd::Demo = cli.cmd() {
        return demo(&cli).await;
    }
    if let Cmd::Servers { sources } = cli.cmd() {
        return servers(&cli, &server_cmd, *sources).await;
    }
    if let Cmd::Approve { name } = cli.cmd() {
        return approve(&cli, name);
    }
    let config = target(&cli, &server_cmd)?;
    // Usage errors come before any connection is made.
    match cli.cmd() {
        Cmd::Call { args, pairs, .. } | Cmd::Prompt { args, pairs, .. } => {
            parse_args(args.as_deref(), pairs)?;
        }
        _ => {}
    }
    let quiet = cli.quiet;
    let client = connect(&cli, config).await?;
    let logs = tokio::spawn(print_server_logs(client.clone(), quiet));
    let cancel = CancelToken::new();
    let outcome = {
        let work = command(&cli, &client, cancel.clone());
        tokio::pin!(work);
        tokio::select! {
            r = &mut work => r,
            _ = tokio::signal::ctrl_c() => {
                // Cancel the call in flight (the server is told), then leave.
                cancel.cancel();
                let _ = tokio::time::timeout(Duration::from_millis(500), &mut work).await;
                Err(Fail { code: 130, message: "interrupted".into() })
            }
        }
    };
    logs.abort();
    let _ = client.close_timeout(Duration::from_secs(5)).await;
    outcome
}

async fn print_server_logs(client: Client, quiet: bool) {
    let mut n = client.notifications();
    drop(client);
    while let Some(note) = n.recv().await {
        if let ServerNotification::LoggingMessage(m) = note {
            if !quiet {
                let text = match &m.data {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let logger = m.logger.map(|l| format!(" {l}")).unwrap_or_default();
                eprintln!("[server {:?}{logger}] {text}", m.level);
            }
        }
    }
}

fn print_json(v: &impl serde::Serialize) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut out, v);
    let _ = writeln!(out);
}

async fn command(cli: &Cli, client: &Client, cancel: CancelToken) -> Result<u8, Fail> {
    let mut call_opts = CallOptions::new().cancel_token(cancel);
    if let Some(ms) = cli.timeout {
        call_opts = call_opts.timeout(Duration::from_millis(ms));
    }
    match cli.cmd() {
        Cmd::Tools => {
            let tools = client.list_tools().await?;
            if cli.json {
                print_json(&json!({ "tools": tools }));
            } else {
                for t in tools {
                    let desc = t.description.as_deref().unwrap_or("");
                    println!("{:<28} {}", t.name, first_line(desc));
                }
            }
            Ok(0)
        }
        Cmd::Call { tool, args, pairs } => {
            let arguments = parse_args(args.as_deref(), pairs)?;
            let progress = Progress::new(cli.quiet);
            let p = progress.clone();
            let result = client
                .call_tool_with(tool, arguments, call_opts.on_progress(move |pr| p.show(pr)))
                .await;
            progress.done();
            let result = result?;
            if cli.json {
                print_json(&result);
            } else {
                print_call(&result);
            }
            Ok(if result.is_error() { 1 } else { 0 })
        }
        Cmd::Resources => {
            let resources = client.list_resources().await?;
            if cli.json {
                print_json(&json!({ "resources": resources }));
            } else {
                for r in resources {
                    println!("{:<40} {}", r.uri, r.title.as_deref().unwrap_or(&r.name));
                }
            }
            Ok(0)
        }
        Cmd::Read { uri } => {
            let result = client.read_resource(uri).await?;
            if cli.json {
                print_json(&result);
            } else {
                for c in &result.contents {
                    print_contents(c);
                }
            }
            Ok(0)
        }
        Cmd::Prompts => {
            let prompts = client.list_prompts().await?;
            if cli.json {
                print_json(&json!({ "prompts": prompts }));
            } else {
                for p in prompts {
                    let args: Vec<String> = p
                        .arguments
                        .iter()
                        .map(|a| {
                            if a.required == Some(true) {
                                a.name.clone()
                            } else {
                                format!("[{}]", a.name)
                            }
                        })
                        .collect();
                    println!(
                        "{:<24} {:<24} {}",
                        p.name,
                        args.join(" "),
                        first_line(p.description.as_deref().unwrap_or(""))
                    );
                }
            }
            Ok(0)
        }
        Cmd::Prompt { name, args, pairs } => {
            let arguments = parse_args(args.as_deref(), pairs)?;
            let result = client.get_prompt(name, arguments).await?;
            if cli.json {
                print_json(&result);
            } else {
                for m in &result.messages {
                    print!("{}: ", m.role);
                    print_content(&m.content);
                }
            }
            Ok(0)
        }
        Cmd::Ping => {
            let t = Instant::now();
            client.ping().await?;
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if cli.json {
                print_json(&json!({ "ok": true, "ms": ms }));
            } else {
                println!("pong ({ms:.1} ms)");
            }
            Ok(0)
        }
        Cmd::Info => {
            let s = client.server();
            if cli.json {
                print_json(&json!({
                    "serverInfo": s.server_info,
                    "protocolVersion": s.protocol_version,
                    "transport": client.transport(),
                    "capabilities": s.capabilities,
                    "instructions": s.instructions,
                }));
            } else {
                println!(
                    "server:       {} {}",
                    s.server_info.name, s.server_info.version
                );
                println!("protocol:     {}", s.protocol_version);
                println!("transport:    {}", client.transport());
                let caps = serde_json::to_value(&s.capabilities).unwrap_or_default();
                let names: Vec<&String> = caps
                    .as_object()
                    .map(|m| m.keys().collect())
                    .unwrap_or_default();
                println!(
                    "capabilities: {}",
                    names
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if let Some(i) = &s.instructions {
                    println!("instructions: {i}");
                }
            }
            Ok(0)
        }
        Cmd::Demo | Cmd::Serve { .. } | Cmd::Servers { .. } | Cmd::Approve { .. } => {
            unreachable!("handled before connecting")
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn print_call(result: &CallToolResult) {
    for c in &result.content {
        print_content(c);
    }
    if result.content.is_empty() {
        if let Some(s) = &result.structured_content {
            println!("{}", serde_json::to_string_pretty(s).unwrap_or_default());
        }
    }
}

fn print_content(c: &Content) {
    match c {
        Content::Text { text, .. } => println!("{text}"),
        Content::Image {
            data, mime_type, ..
        } => {
            println!("[image {mime_type}, {} bytes base64]", data.len())
        }
        Content::Audio {
            data, mime_type, ..
        } => {
            println!("[audio {mime_type}, {} bytes base64]", data.len())
        }
        Content::ResourceLink { uri, name, .. } => println!("[resource link {name}: {uri}]"),
        Content::Resource { resource, .. } => print_contents(resource),
        other => println!("{}", serde_json::to_string(other).unwrap_or_default()),
    }
}

fn print_contents(c: &ResourceContents) {
    match (&c.text, &c.blob) {
        (Some(text), _) => println!("{text}"),
        (None, Some(blob)) => println!(
            "[{} {}, {} bytes base64]",
            c.uri,
            c.mime_type.as_deref().unwrap_or("application/octet-stream"),
            blob.len()
        ),
        (None, None) => println!("[{} (empty)]", c.uri),
    }
}

/// Progress of a long call on stderr: a redrawn bar on a terminal, plain
/// lines otherwise.
#[derive(Clone)]
struct Progress {
    tty: bool,
    quiet: bool,
    shown: Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    fn new(quiet: bool) -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            quiet,
            shown: Default::default(),
        }
    }

    fn show(&self, p: &mcpwire_tokio::Progress) {
        if self.quiet {
            return;
        }
        self.shown.store(true, std::sync::atomic::Ordering::Relaxed);
        let msg = p.message.as_deref().unwrap_or("");
        let mut err = std::io::stderr().lock();
        match p.total {
            Some(total) if total > 0.0 && self.tty => {
                let frac = (p.progress / total).clamp(0.0, 1.0);
                let filled = (frac * 30.0).round() as usize;
                let _ = write!(
                    err,
                    "\r[{}{}] {:>3.0}% {msg}\x1b[K",
                    "#".repeat(filled),
                    "-".repeat(30 - filled),
                    frac * 100.0
                );
            }
            Some(total) => {
                let _ = writeln!(err, "progress {}/{} {msg}", p.progress, total);
            }
            None => {
                let _ = writeln!(err, "progress {} {msg}", p.progress);
            }
        }
        let _ = err.flush();
    }

    fn done(&self) {
        if self.tty && self.shown.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!();
        }
    }
}

/// `mcpwire servers`: discovers, starts every server, waits until each has
/// connected or failed, and lists them. Failed servers are listed, not an
/// error (exit 0); an unusable `--config` file is a usage error.
async fn servers(cli: &Cli, server_cmd: &[String], sources: bool) -> Result<u8, Fail> {
    if !server_cmd.is_empty() || cli.url.is_some() || cli.sse.is_some() || cli.server.is_some() {
        return Err(Fail::usage(
            "`servers` lists the configured servers: it takes --config <FILE> and \
             --no-project-config, not a target",
        ));
    }
    let found = discovery(cli).discover();
    if sources {
        print_sources(cli, &found);
        return Ok(0);
    }
    if cli.config.is_some() {
        if let Some(e) = found.errors.first() {
            return Err(Fail::usage(e.to_string()));
        }
    }
    if !cli.quiet {
        for e in &found.errors {
            eprintln!("mcpwire: skipped {e}");
        }
    }
    if cli.approve {
        let mut approvals = user_approvals()?;
        for entry in &found.servers {
            if consent::needs_consent(entry)
                && entry.config.is_ok()
                && !approvals.is_approved(entry)
            {
                approvals
                    .approve(entry)
                    .map_err(|e| Fail::usage(format!("cannot record the approval: {e}")))?;
            }
        }
    }
    // VS Code inputs of the servers that will start, asked once per file
    // and id; without a terminal they stay unset and the server fails
    // naming its input.
    let mut values: HashMap<(Option<PathBuf>, String), String> = HashMap::new();
    let approvals = user_approvals()?;
    for entry in &found.servers {
        let starts = matches!(&entry.config, Ok(c) if c.is_enabled())
            && (!consent::needs_consent(entry) || approvals.is_approved(entry));
        for input in entry.inputs.iter().filter(|_| starts) {
            let key = (entry.source.clone(), input.id.clone());
            if let std::collections::hash_map::Entry::Vacant(slot) = values.entry(key) {
                if let Some(v) = ask_input(entry, input) {
                    slot.insert(v);
                }
            }
        }
    }
    let wait = Duration::from_millis(cli.timeout.unwrap_or(30_000));
    let options = ManagerOptions::new()
        .inputs(move |e, i| values.get(&(e.source.clone(), i.id.clone())).cloned())
        .connect_options(
            ConnectOptions::new()
                .client_info("mcpwire-cli", env!("CARGO_PKG_VERSION"))
                .allow_cross_origin_redirects(cli.allow_cross_origin_redirect),
        )
        .connect_timeout(wait);
    let manager = Manager::start(found.servers.clone(), options).await;
    manager.wait_settled(wait + Duration::from_secs(1)).await;
    let now = Instant::now();
    let status = manager.status();
    if cli.json {
        let servers: Vec<Value> = status
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "status": s.state.label(),
                    "error": match &s.state {
                        ServerState::Failed { error } => Some(error),
                        _ => None,
                    },
                    "tools": s.tools,
                    "toolsFromCache": s.tools_from_cache,
                    "transport": s.transport,
                    "source": s.source.as_ref().map(|p| p.display().to_string()),
                    "scope": s.scope.label(),
                })
            })
            .collect();
        let shadowed: Vec<Value> = found
            .shadowed
            .iter()
            .map(|s| json!({"name": s.name, "source": s.origin()}))
            .collect();
        let errors: Vec<Value> = found
            .errors
            .iter()
            .map(|e| json!({"path": e.path.display().to_string(), "message": e.message}))
            .collect();
        print_json(&json!({"servers": servers, "shadowed": shadowed, "errors": errors}));
    } else if status.is_empty() {
        println!(
            "no MCP servers configured (searched {})",
            found
                .searched
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else {
        println!(
            "{:<20} {:<13} {:>5}  {:<15} SOURCE",
            "NAME", "STATUS", "TOOLS", "TRANSPORT"
        );
        for s in &status {
            let source = s
                .source
                .as_ref()
                .map_or_else(|| "-".to_string(), |p| p.display().to_string());
            println!(
                "{:<20} {:<13} {:>5}  {:<15} {source}",
                s.name,
                s.state.label(),
                s.tools,
                s.transport.unwrap_or("-"),
            );
            match &s.state {
                ServerState::Failed { error } => println!("    error: {error}"),
                ServerState::NeedsApproval => {
                    println!(
                        "    not started: approve it with `mcpwire approve {}`",
                        s.name
                    )
                }
                ServerState::Reconnecting { .. } => println!("    {}", s.describe(now)),
                _ => {}
            }
        }
    }
    manager.close().await;
    Ok(0)
}

/// `mcpwire servers --sources`: every file discovery looked at, in order,
/// and what it contributed.
fn print_sources(cli: &Cli, found: &Discovered) {
    let bad_entry = |name: &str| -> Option<&str> {
        found
            .get(name)
            .and_then(|e| e.config.as_ref().err())
            .map(String::as_str)
    };
    if cli.json {
        let files: Vec<Value> = found
            .files
            .iter()
            .map(|f| {
                let servers: Vec<Value> = f
                    .servers
                    .iter()
                    .map(|n| json!({"name": n, "error": bad_entry(n)}))
                    .collect();
                json!({
                    "path": f.source.path.display().to_string(),
                    "scope": f.source.scope.label(),
                    "format": f.source.format.label(),
                    "present": f.present,
                    "servers": servers,
                    "shadowed": f.shadowed,
                    "error": f.error,
                    "notes": f.notes,
                })
            })
            .collect();
        print_json(&json!({ "sources": files }));
        return;
    }
    for f in &found.files {
        let state = if f.error.is_some() {
            "error"
        } else if f.present {
            "read"
        } else {
            "absent"
        };
        println!(
            "{:<8} {:<8} {:<11} {}",
            state,
            f.source.scope.label(),
            f.source.format.label(),
            f.source.path.display()
        );
        if let Some(e) = &f.error {
            println!("    error: {e}");
        }
        for n in &f.servers {
            match bad_entry(n) {
                Some(e) => println!("    server {n}: {e}"),
                None => println!("    server {n}"),
            }
        }
        for n in &f.shadowed {
            println!("    shadowed {n} (defined by an earlier file)");
        }
        for note in &f.notes {
            println!("    skipped {note}");
        }
    }
}

/// `mcpwire demo`: runs this binary's demo server as a child and walks
/// through a session with it.
async fn demo(cli: &Cli) -> Result<u8, Fail> {
    let exe = std::env::current_exe().map_err(|e| Fail {
        code: 3,
        message: format!("cannot find this program: {e}"),
    })?;
    let config = ServerConfig::stdio(exe.to_string_lossy().into_owned()).args(["serve", "--demo"]);
    let bold = std::io::stdout().is_terminal() && no_color_unset();
    let say = |s: &str| {
        if bold {
            println!("\n\x1b[1m▸ {s}\x1b[0m");
        } else {
            println!("\n▸ {s}");
        }
    };
    say(&format!(
        "spawning `{} serve --demo` and initializing (stdio)",
        exe.display()
    ));
    let t = Instant::now();
    let client = connect(cli, config).await?;
    let s = client.server();
    println!(
        "connected to {} {} in {:.1} ms, protocol {}",
        s.server_info.name,
        s.server_info.version,
        t.elapsed().as_secs_f64() * 1000.0,
        s.protocol_version
    );
    if let Some(i) = &s.instructions {
        println!("instructions: {i}");
    }

    say("tools/list");
    for tool in client.list_tools().await? {
        println!(
            "  {:<10} {}",
            tool.name,
            tool.description.unwrap_or_default()
        );
    }

    say("tools/call echo {\"message\": \"hello from mcpwire\"}");
    let r = client
        .call_tool("echo", json!({"message": "hello from mcpwire"}))
        .await?;
    print_call(&r);

    say("tools/call add {\"a\": 2, \"b\": 40}  (structured content)");
    let r = client.call_tool("add", json!({"a": 2, "b": 40})).await?;
    println!(
        "  text: {}  structuredContent: {}",
        r.text(),
        r.structured_content.unwrap_or_default()
    );

    say("tools/call countdown {\"steps\": 5, \"ms\": 150}  (with progress)");
    let progress = Progress::new(false);
    let p = progress.clone();
    let r = client
        .call_tool_with(
            "countdown",
            json!({"steps": 5, "ms": 150}),
            CallOptions::new().on_progress(move |pr| p.show(pr)),
        )
        .await?;
    progress.done();
    print_call(&r);

    say("tools/call countdown {\"steps\": 50, \"ms\": 100} with a 300 ms timeout");
    let started = Instant::now();
    match client
        .call_tool_with(
            "countdown",
            json!({"steps": 50, "ms": 100}),
            CallOptions::new().timeout(Duration::from_millis(300)),
        )
        .await
    {
        Err(e) if e.is_timeout() => println!(
            "  {e} (after {:.0} ms; the server was sent notifications/cancelled)",
            started.elapsed().as_secs_f64() * 1000.0
        ),
        other => println!("  unexpected: {other:?}"),
    }

    say("resources/list and resources/read");
    for r in client.list_resources().await? {
        println!("  {} ({})", r.uri, r.name);
        for c in client.read_resource(&r.uri).await?.contents {
            for line in c.text.unwrap_or_default().lines() {
                println!("    | {line}");
            }
        }
    }

    say("prompts/get greet {\"name\": \"Ada\"}");
    let p = client.get_prompt("greet", json!({"name": "Ada"})).await?;
    for m in p.messages {
        print!("  {}: ", m.role);
        print_content(&m.content);
    }

    say("ping, then close (stdin closed; the server exits)");
    let t = Instant::now();
    client.ping().await?;
    println!("  pong in {:.2} ms", t.elapsed().as_secs_f64() * 1000.0);
    client.close().await?;
    println!("  closed.\n\nNext: `mcpwire tools -- <your server command>` or `mcpwire info --url <URL>`.");
    Ok(0)
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
        }
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
