//! `mcpwire`: inspect and call any MCP server.
//!
//! ```text
//! mcpwire [OPTIONS] <COMMAND> [TARGET]
//! COMMAND:  tools | call <tool> [--args JSON] | resources | read <uri> | prompts
//!           | prompt <name> [--args JSON] | ping | info | demo | serve --demo
//!           | bridge [--allow-tool GLOB] [--deny-tool GLOB]
//!           | servers [--sources] [--config F] [--no-project-config] | approve <name>
//!           | add <name> [--host H] [--scope S] (-- cmd args | --url URL) | remove <name>
//!           | enable <name> | disable <name> | get <name> | import --from H --to H [names]
//!           | doctor [--json]
//! TARGET:   -- <command> [args...] | --url <URL> | --sse <URL> | --server <NAME> [--config F]
//! ```
//!
//! `--server NAME` finds NAME with the manager's discovery (explicit
//! `--config F` only, else project files then user files; see
//! `mcpwire_manager::discovery`), expanding `${VAR}` and
//! `${VAR:-default}`, asking for VS Code's inputs on a terminal. The
//! entry's tool list (Gemini's `includeTools`, …) applies: `tools` leaves
//! hidden tools out and `call` refuses them as unknown before connecting.
//! `servers` starts every discovered server and lists it with its status
//! and tool count (the tool lists applied); `servers --sources` starts
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
//! the tokens in `~/.config/mcpwire/tokens.json` (0600; `--token-store F`,
//! or `--token-store keychain` for the OS credential store); later runs use
//! them, refreshing when needed (one process at a time: the others use its
//! tokens), and fail with a hint to log in when a user is needed.
//!
//! Exit codes: 0 ok; 1 the tool returned `isError: true`; 2 usage error;
//! 3 connection, protocol or server error; 4 timeout; 130 interrupted.

mod args;
mod bridge;
mod commands;
mod demo;
mod demo_server;
mod doctor;
mod hosts;
mod render;
mod servers;
mod target;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use mcpwire_tokio::CancelToken;

use crate::args::*;
use crate::commands::command;
use crate::demo::demo;
use crate::render::*;
use crate::servers::{approve, servers};
use crate::target::*;

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
    match cli.cmd() {
        Cmd::Add {
            name,
            hosts,
            dry_run,
        } => return hosts::add(&cli, name, hosts, *dry_run, &server_cmd),
        Cmd::Remove {
            name,
            hosts,
            dry_run,
        } => return hosts::remove(&cli, name, hosts, *dry_run),
        Cmd::Enable {
            name,
            hosts,
            dry_run,
        } => return hosts::switch(&cli, name, hosts, true, *dry_run),
        Cmd::Disable {
            name,
            hosts,
            dry_run,
        } => return hosts::switch(&cli, name, hosts, false, *dry_run),
        Cmd::Get { name } => return hosts::get(&cli, name),
        Cmd::Doctor => return doctor::doctor(&cli, &server_cmd).await,
        Cmd::Import {
            from,
            to,
            names,
            dry_run,
        } => return hosts::import(&cli, from, to, names, *dry_run),
        _ => {}
    }
    let target = target(&cli, &server_cmd)?;
    if let Cmd::Bridge {
        allow_tool,
        deny_tool,
        listen,
        bearer,
        max_sessions,
        idle_timeout,
    } = cli.cmd()
    {
        let tools = bridge::Tools::new(allow_tool, deny_tool, target.tools.clone());
        return match listen {
            Some(addr) => {
                let (addr, bearer) = (addr.clone(), bearer.clone());
                let idle = Duration::from_secs(*idle_timeout);
                let max = *max_sessions;
                bridge::listen(cli, target, tools, &addr, bearer, max, idle).await
            }
            None => bridge::bridge(&cli, target, tools).await,
        };
    }
    // Usage errors come before any connection is made; so does a call to
    // a tool the entry's tool list hides.
    match cli.cmd() {
        Cmd::Call { tool, args, pairs } => {
            target.check_tool(tool)?;
            parse_args(args.as_deref(), pairs)?;
        }
        Cmd::Prompt { args, pairs, .. } => {
            parse_args(args.as_deref(), pairs)?;
        }
        Cmd::Tasks {
            action: TaskCmd::Start { tool, args, pairs },
        } => {
            target.check_tool(tool)?;
            parse_args(args.as_deref(), pairs)?;
        }
        _ => {}
    }
    let quiet = cli.quiet;
    let client = connect(&cli, target.config.clone(), target.pins.clone()).await?;
    // A call to a configured server's tool goes through its pins: the
    // listing withholds a project's tool that changed since it was pinned.
    let calls = matches!(
        cli.cmd(),
        Cmd::Call { .. }
            | Cmd::Tasks {
                action: TaskCmd::Start { .. }
            }
    );
    if target.pins.is_some() && calls {
        if let Err(e) = client.list_tools().await {
            let _ = client.close_timeout(Duration::from_secs(5)).await;
            return Err(e.into());
        }
    }
    let logs = tokio::spawn(print_server_logs(client.clone(), quiet));
    let cancel = CancelToken::new();
    let outcome = {
        let work = command(&cli, &client, &target.tools, cancel.clone());
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
