//! The commands on the config files: `servers` (and `--sources`) and
//! `approve`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpwire_manager::tokio::Manager;
use mcpwire_manager::{consent, Discovered, ManagerOptions, PinStore, ServerState};
use mcpwire_tokio::ConnectOptions;
use serde_json::{json, Value};

use mcpwire_manager::Scope;

use crate::args::*;
use crate::render::*;
use crate::target::*;

/// `mcpwire approve NAME`: records the user's approval of a project's
/// server (this project, this definition).
pub(crate) fn approve(cli: &Cli, name: &str) -> Result<u8, Fail> {
    let found = discovery(cli).discover();
    let Some(entry) = found.get(name) else {
        return Err(Fail::usage(format!(
            "no server named {name:?} in the discovered config files (it has: {})",
            server_names(&found)
        )));
    };
    // What its tools say now, if that differs from what was pinned.
    let pending = match (
        mcpwire_manager::paths::tool_pins(&mcpwire_manager::Env::process()),
        consent::pin_key(entry),
    ) {
        (Some(store), Some(key)) => {
            let pending = store
                .pending(&key)
                .map_err(|e| Fail::usage(format!("cannot read the tool pins: {e}")))?;
            Some((store, key, pending)).filter(|p| !p.2.is_empty())
        }
        _ => None,
    };
    if let Some((_, _, changes)) = &pending {
        println!("the tools of {name:?} changed since they were pinned:");
        for c in changes {
            print!("{}", c.details());
        }
    }
    let accept = |pending: Option<(PinStore, String, Vec<_>)>| -> Result<(), Fail> {
        if let Some((store, key, _)) = pending {
            store
                .accept(&key)
                .map_err(|e| Fail::usage(format!("cannot record the tool pins: {e}")))?;
            println!("accepted the tool changes of {name:?}: they are pinned now");
        }
        Ok(())
    };
    if !consent::needs_consent(entry) {
        if pending.is_none() {
            println!(
                "server {name:?} comes from {} ({} scope): it needs no approval",
                entry.origin(),
                entry.scope.label()
            );
        }
        accept(pending)?;
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
    accept(pending)?;
    Ok(0)
}

/// `mcpwire servers`: discovers, starts every server, waits until each has
/// connected or failed, and lists them. Failed servers are listed, not an
/// error (exit 0); an unusable `--config` file is a usage error.
pub(crate) async fn servers(cli: &Cli, server_cmd: &[String], sources: bool) -> Result<u8, Fail> {
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
    let options = match mcpwire_manager::paths::tool_pins(&mcpwire_manager::Env::process()) {
        Some(store) => options.tool_pins(store),
        None => options,
    };
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
                    "toolChanges": s.tool_changes,
                    "toolsWithheld": s.scope == Scope::Project && !s.tool_changes.is_empty(),
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
            searched_files(&found)
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
            if !s.tool_changes.is_empty() {
                let what: Vec<String> = s.tool_changes.iter().map(|c| c.summary()).collect();
                println!("    tools changed since pinned: {}", what.join("; "));
                if s.scope == Scope::Project {
                    println!(
                        "    withheld until you review them: `mcpwire approve {}`",
                        s.name
                    );
                } else {
                    println!("    review and accept them: `mcpwire approve {}`", s.name);
                }
            }
        }
    }
    manager.close().await;
    Ok(0)
}

/// `mcpwire servers --sources`: every file discovery looked at, in order,
/// and what it contributed.
pub(crate) fn print_sources(cli: &Cli, found: &Discovered) {
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
            println!("    note: {note}");
        }
    }
}
