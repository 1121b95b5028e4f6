//! The command line: arguments, commands and the failure every command
//! ends with (its exit code).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use mcpwire_tokio::{Error, RequestError};

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
                  Exit codes: 0 ok, 1 tool error (isError), 2 usage, 3 connection/protocol/server error, 4 timeout or a task given up, 130 interrupted.\n\
                  Try: mcpwire demo"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Cmd>,
    /// Streamable HTTP endpoint (falls back to legacy SSE per the spec).
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// Legacy HTTP+SSE endpoint.
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) sse: Option<String>,
    /// A server by name from the MCP config files (see --config).
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) server: Option<String>,
    /// The only mcpServers file for --server and `servers` (default: discover
    /// the project's and the user's config files).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Ignore the project's config files (.mcp.json, mcp.json, .cursor/,
    /// .vscode/, .gemini/, .codex/): for checkouts you do not trust to
    /// start programs.
    #[arg(long, global = true)]
    pub(crate) no_project_config: bool,
    /// Approve the project's servers this command starts (--server NAME:
    /// that one; `servers`: every one listed), as `mcpwire approve` does.
    #[arg(long, global = true)]
    pub(crate) approve: bool,
    /// Machine-readable result on stdout.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Per-request timeout in milliseconds.
    #[arg(long, global = true, value_name = "MS")]
    pub(crate) timeout: Option<u64>,
    /// The longest a call waits for the task it became, in seconds
    /// (default 86400; 0: as long as the task's ttl). Past it, or past the
    /// task's ttl, the task is cancelled and the command exits 4.
    #[arg(long, global = true, value_name = "SECS")]
    pub(crate) max_task_wait: Option<u64>,
    /// Follow an HTTP redirect to another origin (scheme, host or port);
    /// Authorization, Cookie and Mcp-Session-Id are not sent there.
    /// Without it such a redirect is an error.
    #[arg(long, global = true)]
    pub(crate) allow_cross_origin_redirect: bool,
    /// Don't check a tool's structuredContent against its outputSchema
    /// (checked by default; a mismatch exits 3 naming the JSON pointer).
    #[arg(long, global = true)]
    pub(crate) no_validate: bool,
    /// HTTP proxy for this server and its OAuth exchanges:
    /// http://[USER:PASSWORD@]HOST[:PORT] (https through a CONNECT tunnel).
    /// Without it: the entry's `proxy`, else HTTPS_PROXY, HTTP_PROXY,
    /// ALL_PROXY and NO_PROXY (lower case too).
    #[arg(long, global = true, value_name = "URL", conflicts_with = "no_proxy")]
    pub(crate) proxy: Option<String>,
    /// Connect directly, whatever the entry and the *_PROXY variables say.
    #[arg(long, global = true)]
    pub(crate) no_proxy: bool,
    /// Trust the CA certificates of this PEM file too (a private or
    /// corporate CA), besides the system's store (or SSL_CERT_FILE /
    /// SSL_CERT_DIR).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) cacert: Option<String>,
    /// Client certificate (PEM chain) for servers that demand one; needs --key.
    #[arg(long, global = true, value_name = "FILE", requires = "key")]
    pub(crate) cert: Option<String>,
    /// The private key of --cert (PEM: PKCS#8, RSA or EC).
    #[arg(long, global = true, value_name = "FILE", requires = "cert")]
    pub(crate) key: Option<String>,
    /// Do not verify the server's TLS certificate (a warning on every
    /// connect). Only for a test server you cannot get a CA for.
    #[arg(long, global = true)]
    pub(crate) insecure: bool,
    /// Extra HTTP header 'Name: value' (repeatable; HTTP only).
    #[arg(long = "header", global = true, value_name = "K: V")]
    pub(crate) headers: Vec<String>,
    /// Environment variable K=V for a stdio server (repeatable).
    #[arg(long = "env", global = true, value_name = "K=V")]
    pub(crate) envs: Vec<String>,
    /// More logging on stderr (-v: server stderr and protocol notes; -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Less logging on stderr.
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
    /// Log in (OAuth) if the HTTP server asks for it: opens the browser and
    /// stores the tokens for later runs. Without a command: log in and show
    /// `info`.
    #[arg(long, global = true)]
    pub(crate) login: bool,
    /// With --login: print the authorization URL instead of opening a
    /// browser (the redirect still comes back to 127.0.0.1).
    #[arg(long, global = true)]
    pub(crate) no_browser: bool,
    /// Where OAuth tokens are kept: a file (default
    /// ~/.config/mcpwire/tokens.json), or `keychain` for the OS credential
    /// store (Secret Service, macOS Keychain, Windows Credential Manager).
    /// Processes sharing a store refresh one at a time.
    #[arg(long, global = true, value_name = "FILE|keychain")]
    pub(crate) token_store: Option<PathBuf>,
    /// A pre-registered OAuth client id (else the client registers itself).
    #[arg(long, global = true, value_name = "ID")]
    pub(crate) client_id: Option<String>,
    /// The secret of --client-id, for a confidential client.
    #[arg(long, global = true, value_name = "SECRET")]
    pub(crate) client_secret: Option<String>,
    /// The OAuth scope to ask for (else the server's challenge decides).
    /// With add, remove, enable, disable and import: which of a host's
    /// files, `user` (add's default), `project` or `local` (Claude Code's
    /// servers of this project in ~/.claude.json).
    #[arg(long, global = true, value_name = "SCOPE")]
    pub(crate) scope: Option<String>,
    /// Ask for bearer tokens even where the authorization server offers
    /// DPoP-bound ones (RFC 9449; by default mcpwire proves a key it keeps
    /// in the token store).
    #[arg(long, global = true)]
    pub(crate) no_dpop: bool,
    /// Workload identity federation (RFC 7523 JWT bearer grant, needs
    /// --client-id): where the workload's JWT is read at each token
    /// request: file:PATH, env:VAR, cmd:COMMAND ARGS or value:JWT.
    #[arg(long, global = true, value_name = "SOURCE")]
    pub(crate) workload_identity: Option<String>,
    /// Enterprise-managed authorization (SEP-990, needs --client-id and
    /// --idp-token-endpoint): where the user's ID token from the
    /// enterprise IdP is read (file:PATH, env:VAR, cmd:COMMAND, value:JWT).
    #[arg(long, global = true, value_name = "SOURCE")]
    pub(crate) idp_id_token: Option<String>,
    /// The enterprise IdP's token endpoint (RFC 8693 token exchange).
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) idp_token_endpoint: Option<String>,
    /// This client's id at the enterprise IdP.
    #[arg(long, global = true, value_name = "ID")]
    pub(crate) idp_client_id: Option<String>,
    /// This client's secret at the enterprise IdP.
    #[arg(long, global = true, value_name = "SECRET")]
    pub(crate) idp_client_secret: Option<String>,
    /// Protocol era: auto (probe for 2026-07-28, fall back to the
    /// 2025-11-25 handshake), legacy, or modern.
    #[arg(long, global = true, value_name = "ERA", value_parser = ["auto", "legacy", "modern"])]
    pub(crate) era: Option<String>,
}

impl Cli {
    /// The command (`info` when only `--login` was given).
    pub(crate) fn cmd(&self) -> &Cmd {
        self.command.as_ref().unwrap_or(&Cmd::Info)
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
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
    /// Tasks (long-running tool calls): start, list, get, wait for, cancel.
    Tasks {
        #[command(subcommand)]
        action: TaskCmd,
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
    /// Serve MCP on stdin/stdout to a host and relay it to the target
    /// (a stdio-only host in front of an HTTP server, with the CLI's
    /// proxies, CAs and login; or in front of any other target).
    Bridge {
        /// Only tools matching one of these globs (`*`, `?`) are listed
        /// and callable (repeatable).
        #[arg(long = "allow-tool", value_name = "GLOB")]
        allow_tool: Vec<String>,
        /// Tools matching one of these globs are neither listed nor
        /// callable (repeatable; wins over --allow-tool).
        #[arg(long = "deny-tool", value_name = "GLOB")]
        deny_tool: Vec<String>,
        /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g.
        /// 127.0.0.1:8080; a stdio target is started per client session).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// With --listen: require `Authorization: Bearer TOKEN` (needed to
        /// listen on an address that is not loopback).
        #[arg(long, value_name = "TOKEN")]
        bearer: Option<String>,
        /// With --listen: client sessions at once (each has its own target
        /// session; a stdio target its own process).
        #[arg(long, value_name = "N", default_value_t = 16)]
        max_sessions: usize,
        /// With --listen: a session idle this long is closed (seconds).
        #[arg(long, value_name = "SECS", default_value_t = 1800)]
        idle_timeout: u64,
    },
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
    /// Add a server to hosts' config files, in each host's own format:
    /// `add NAME -- cmd args` or `add NAME --url URL` (--sse URL), with
    /// --env K=V, --header 'K: V', --scope user|project|local. Without
    /// --host: every host installed for this user.
    Add {
        /// The server's name.
        name: String,
        /// A host to write to (repeatable): claude-code, claude-desktop,
        /// cursor, vscode, windsurf, zed, gemini, codex, goose, copilot.
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
        /// Print the diff of each file instead of writing it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove a server from every config file that defines it (--host,
    /// --scope: only those), leaving every other byte of each file.
    Remove {
        /// The server's name.
        name: String,
        /// Only this host's files (repeatable).
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
        /// Print the diffs instead of writing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Turn a server on with its host's own switch (Codex `enabled`,
    /// Goose `enabled`, Windsurf `disabled`, Zed `enabled`).
    Enable {
        /// The server's name.
        name: String,
        /// Its definition in this host's files (default: the one used).
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
        /// Print the diff instead of writing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Turn a server off with its host's own switch (see `enable`).
    Disable {
        /// The server's name.
        name: String,
        /// Its definition in this host's files (default: the one used).
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
        /// Print the diff instead of writing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Show a server's effective definition and the file it comes from
    /// (and the files whose definitions it shadows).
    Get {
        /// The server's name.
        name: String,
    },
    /// Copy servers from one host's files to another's, in the target's
    /// format (all of them, or the NAMEs given).
    Import {
        /// The host to read.
        #[arg(long, value_name = "HOST")]
        from: String,
        /// The host to write.
        #[arg(long, value_name = "HOST")]
        to: String,
        /// Only these servers.
        names: Vec<String>,
        /// Print the diff instead of writing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Start every configured server once and report each: whether it
    /// starts, its era, connect time, tools, login (auth), network route,
    /// and the first error with a hint (--json for a program; --timeout
    /// MS per server, default 10 s). Consent applies: a project's server
    /// not approved is reported, not started.
    Doctor,
    /// Run a server on stdio.
    Serve {
        /// The built-in demo server.
        #[arg(long)]
        demo: bool,
    },
}

/// What `mcpwire tasks` does.
#[derive(Subcommand, Debug)]
pub(crate) enum TaskCmd {
    /// Start a tool call as a task and print the task without waiting
    /// (the result instead, when the server answers at once).
    Start {
        /// The tool.
        tool: String,
        /// Arguments as a JSON object.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        /// Arguments as key=value pairs.
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// List the server's tasks (2025-11-25 servers; 2026-07-28 has no list).
    List,
    /// A task's state now.
    Get {
        /// The task's id.
        id: String,
    },
    /// Wait for a task's end (status as progress) and print its result.
    Result {
        /// The task's id.
        id: String,
    },
    /// Ask the server to cancel a task.
    Cancel {
        /// The task's id.
        id: String,
    },
}

/// A failure with its exit code.
pub(crate) struct Fail {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Fail {
    pub(crate) fn usage(message: impl Into<String>) -> Fail {
        Fail {
            code: 2,
            message: message.into(),
        }
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        let code = match &e {
            Error::Request(RequestError::Timeout { .. } | RequestError::TaskExpired { .. }) => 4,
            Error::Request(RequestError::Cancelled { .. }) => 130,
            Error::Config(_) | Error::Network(_) => 2,
            _ => 3,
        };
        Fail {
            code,
            message: e.to_string(),
        }
    }
}
