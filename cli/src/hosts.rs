//! The commands that write the hosts' config files: `add`, `remove`,
//! `enable`, `disable`, `import`, and `get`, which shows where a
//! definition comes from. Every file is planned first and written only
//! when every plan succeeded (`--dry-run`: the diffs, nothing written).

use std::path::PathBuf;

use mcpwire_manager::discovery::{Discovered, Source};
use mcpwire_manager::hostedit::{self, EditError, FileEdit, FileScope, Host};
use mcpwire_manager::{Env, Scope, ServerConfig, ServerEntry};
use serde_json::json;

use crate::args::*;
use crate::render::print_json;
use crate::target::{discovery, parse_header, server_names};

fn edit_fail(e: EditError) -> Fail {
    Fail {
        code: if matches!(e, EditError::Io { .. }) {
            3
        } else {
            2
        },
        message: e.to_string(),
    }
}

fn host_names() -> String {
    Host::ALL.map(Host::name).join(", ")
}

fn parse_hosts(names: &[String]) -> Result<Vec<Host>, Fail> {
    names
        .iter()
        .map(|n| {
            Host::parse(n)
                .ok_or_else(|| Fail::usage(format!("unknown host {n:?} (one of {})", host_names())))
        })
        .collect()
}

/// `--scope` read as which files (`None`: not given).
fn file_scope(cli: &Cli) -> Result<Option<FileScope>, Fail> {
    cli.scope
        .as_deref()
        .map(|s| {
            FileScope::parse(s).ok_or_else(|| {
                Fail::usage(format!(
                    "--scope {s:?}: here it names the files to edit: user, project or local"
                ))
            })
        })
        .transpose()
}

/// The project directory: the current one, canonical.
fn project() -> PathBuf {
    let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    std::fs::canonicalize(&dir).unwrap_or(dir)
}

/// Prints the plans' diffs, or writes them; one line per file.
fn finish(cli: &Cli, edits: &[(FileEdit, String)], dry_run: bool) -> Result<u8, Fail> {
    if dry_run {
        for (e, _) in edits {
            print!("{}", e.diff());
        }
        if !cli.quiet {
            eprintln!("mcpwire: dry run: nothing written");
        }
        return Ok(0);
    }
    for (e, what) in edits {
        e.apply().map_err(edit_fail)?;
        if !cli.quiet {
            match &e.after {
                None => println!("{what} (the file held nothing else: removed it)"),
                Some(_) => println!("{what}"),
            }
        }
    }
    Ok(0)
}

/// `mcpwire add NAME [--host H]… [--scope S] (-- cmd args | --url URL |
/// --sse URL) [--env K=V] [--header 'K: V']`.
pub(crate) fn add(
    cli: &Cli,
    name: &str,
    hosts: &[String],
    dry_run: bool,
    server_cmd: &[String],
) -> Result<u8, Fail> {
    if cli.server.is_some() {
        return Err(Fail::usage(
            "`add` defines a server: give `-- <command> [args...]`, --url <URL> or --sse <URL>",
        ));
    }
    let mut config = match (server_cmd.split_first(), &cli.url, &cli.sse) {
        (Some((cmd, args)), None, None) => {
            ServerConfig::stdio(cmd.clone()).args(args.iter().cloned())
        }
        (None, Some(url), None) => ServerConfig::http(url.clone()),
        (None, None, Some(url)) => ServerConfig::sse(url.clone()),
        (None, None, None) => return Err(Fail::usage(
            "what does the server run? add `-- <command> [args...]`, --url <URL> or --sse <URL>",
        )),
        _ => {
            return Err(Fail::usage(
                "give only one of `-- <command>`, --url and --sse",
            ))
        }
    };
    for e in &cli.envs {
        let (k, v) = e
            .split_once('=')
            .ok_or_else(|| Fail::usage(format!("--env needs K=V, got {e:?}")))?;
        config.env.insert(k.to_string(), v.to_string());
    }
    for h in &cli.headers {
        let (k, v) = parse_header(h)?;
        config.headers.insert(k, v);
    }
    if !cli.headers.is_empty() && config.command.is_some() {
        return Err(Fail::usage("--header is for HTTP servers"));
    }
    if !cli.envs.is_empty() && config.url.is_some() {
        return Err(Fail::usage("--env is for stdio servers"));
    }
    let env = Env::process();
    let scope = file_scope(cli)?.unwrap_or(FileScope::User);
    let mut hosts = parse_hosts(hosts)?;
    if hosts.is_empty() {
        hosts = Host::ALL.into_iter().filter(|h| h.detected(&env)).collect();
        if hosts.is_empty() {
            return Err(Fail::usage(format!(
                "no MCP host's config found for this user: name one with --host ({})",
                host_names()
            )));
        }
    }
    let project = project();
    let mut edits = Vec::new();
    for host in hosts {
        let edit = hostedit::add(host, scope, name, &config, &env, &project).map_err(edit_fail)?;
        let what = format!("added {name:?} to {} ({host})", edit.path.display());
        edits.push((edit, what));
    }
    finish(cli, &edits, dry_run)
}

/// Every definition of `name` (the one used, then the ones it shadows),
/// each with its file's discovered source.
fn definitions<'a>(found: &'a Discovered, name: &str) -> Vec<(&'a ServerEntry, Source)> {
    found
        .servers
        .iter()
        .chain(&found.shadowed)
        .filter(|e| e.name == name)
        .filter_map(|e| {
            let path = e.source.as_ref()?;
            let source = found
                .files
                .iter()
                .find(|f| &f.source.path == path)?
                .source
                .clone();
            Some((e, source))
        })
        .collect()
}

/// The definitions an edit of `name` applies to: `--host` and `--scope`
/// filter; each file once.
fn chosen<'a>(
    cli: &Cli,
    found: &'a Discovered,
    name: &str,
    hosts: &[String],
    all: bool,
) -> Result<Vec<(&'a ServerEntry, Source)>, Fail> {
    let hosts = parse_hosts(hosts)?;
    let scope = file_scope(cli)?;
    let mut defs = definitions(found, name);
    if defs.is_empty() {
        return Err(Fail::usage(format!(
            "no config file defines a server named {name:?} (they define: {})",
            server_names(found)
        )));
    }
    if !hosts.is_empty() {
        defs.retain(|(_, s)| hostedit::host_of(s).is_some_and(|h| hosts.contains(&h)));
    }
    if let Some(scope) = scope {
        defs.retain(|(e, _)| (e.scope == Scope::Project) == (scope == FileScope::Project));
    }
    let mut seen: Vec<PathBuf> = Vec::new();
    defs.retain(|(_, s)| {
        if seen.contains(&s.path) {
            false
        } else {
            seen.push(s.path.clone());
            true
        }
    });
    if defs.is_empty() {
        return Err(Fail::usage(format!(
            "{name:?} is defined, but not in the files of the --host/--scope given"
        )));
    }
    if !all && hosts.is_empty() {
        defs.truncate(1);
    }
    Ok(defs)
}

fn host_label(source: &Source) -> String {
    hostedit::host_of(source).map_or_else(|| source.format.label().to_string(), |h| h.to_string())
}

/// `mcpwire remove NAME`: from every file that defines it.
pub(crate) fn remove(cli: &Cli, name: &str, hosts: &[String], dry_run: bool) -> Result<u8, Fail> {
    let found = discovery(cli).discover();
    let project = project();
    let mut edits = Vec::new();
    for (_, source) in chosen(cli, &found, name, hosts, true)? {
        let edit = hostedit::remove(&source, name, &project).map_err(edit_fail)?;
        let what = format!(
            "removed {name:?} from {} ({})",
            source.path.display(),
            host_label(&source)
        );
        edits.push((edit, what));
    }
    finish(cli, &edits, dry_run)
}

/// `mcpwire enable|disable NAME`: the definition used (or the --host's).
pub(crate) fn switch(
    cli: &Cli,
    name: &str,
    hosts: &[String],
    on: bool,
    dry_run: bool,
) -> Result<u8, Fail> {
    let found = discovery(cli).discover();
    let project = project();
    let mut edits = Vec::new();
    for (_, source) in chosen(cli, &found, name, hosts, false)? {
        let edit = hostedit::set_enabled(&source, name, on, &project).map_err(edit_fail)?;
        let what = format!(
            "{} {name:?} in {} ({})",
            if on { "enabled" } else { "disabled" },
            source.path.display(),
            host_label(&source)
        );
        edits.push((edit, what));
    }
    finish(cli, &edits, dry_run)
}

/// `mcpwire get NAME`: the effective definition, its file, and the
/// definitions it shadows.
pub(crate) fn get(cli: &Cli, name: &str) -> Result<u8, Fail> {
    let found = discovery(cli).discover();
    let defs = definitions(&found, name);
    let Some((entry, source)) = defs.first() else {
        return Err(Fail::usage(format!(
            "no config file defines a server named {name:?} (they define: {})",
            server_names(&found)
        )));
    };
    let shadowed: Vec<_> = defs[1..]
        .iter()
        .map(|(_, s)| json!({"source": s.path.display().to_string(), "host": host_label(s)}))
        .collect();
    if cli.json {
        print_json(&json!({
            "name": name,
            "source": source.path.display().to_string(),
            "host": host_label(source),
            "scope": entry.scope.label(),
            "definition": entry.config.as_ref().ok(),
            "error": entry.config.as_ref().err(),
            "tools": {
                "include": entry.tools.include,
                "exclude": entry.tools.exclude,
            },
            "shadowed": shadowed,
        }));
        return Ok(0);
    }
    println!("name:       {name}");
    println!(
        "file:       {} ({}, {} scope)",
        source.path.display(),
        host_label(source),
        entry.scope.label()
    );
    match &entry.config {
        Ok(c) => {
            let text = serde_json::to_string_pretty(c).unwrap_or_default();
            println!("definition: {}", text.replace('\n', "\n            "));
        }
        Err(e) => println!("error:      {e}"),
    }
    if let Some(include) = &entry.tools.include {
        println!("tools:      only {}", include.join(", "));
    }
    if !entry.tools.exclude.is_empty() {
        println!("tools:      not {}", entry.tools.exclude.join(", "));
    }
    for (_, s) in &defs[1..] {
        println!(
            "shadows:    {} ({}): an earlier file's definition wins",
            s.path.display(),
            host_label(s)
        );
    }
    Ok(0)
}

/// `mcpwire import --from H --to H [NAME…]`: each server of the first
/// host's files (as mcpwire reads it) written in the second host's
/// format; names the target already has are left as they are.
pub(crate) fn import(
    cli: &Cli,
    from: &str,
    to: &str,
    names: &[String],
    dry_run: bool,
) -> Result<u8, Fail> {
    let [from, to] = [from, to].map(|h| {
        Host::parse(h)
            .ok_or_else(|| Fail::usage(format!("unknown host {h:?} (one of {})", host_names())))
    });
    let (from, to) = (from?, to?);
    let found = discovery(cli).discover();
    let scope = file_scope(cli)?.unwrap_or(FileScope::User);
    let env = Env::process();
    let project = project();
    let mut picked: Vec<&ServerEntry> = Vec::new();
    for e in found.servers.iter().chain(&found.shadowed) {
        let from_host = e
            .source
            .as_ref()
            .and_then(|p| found.files.iter().find(|f| &f.source.path == p))
            .and_then(|f| hostedit::host_of(&f.source));
        if from_host == Some(from)
            && (names.is_empty() || names.contains(&e.name))
            && !picked.iter().any(|p| p.name == e.name)
        {
            picked.push(e);
        }
    }
    for n in names {
        if !picked.iter().any(|p| &p.name == n) {
            return Err(Fail::usage(format!("{from} defines no server named {n:?}")));
        }
    }
    if picked.is_empty() {
        return Err(Fail::usage(format!("{from}'s files define no server")));
    }
    let mut plan: Option<FileEdit> = None;
    let mut done = Vec::new();
    for e in picked {
        let config = match &e.config {
            Ok(c) => c,
            Err(err) => {
                eprintln!("mcpwire: skipped {:?}: {err}", e.name);
                continue;
            }
        };
        let next = match plan.take() {
            None => hostedit::add(to, scope, &e.name, config, &env, &project),
            Some(p) => {
                let kept = p.clone();
                match p.and_add(to, scope, &e.name, config, &project) {
                    Ok(p) => Ok(p),
                    Err(err) => {
                        plan = Some(kept);
                        Err(err)
                    }
                }
            }
        };
        match next {
            Ok(p) => {
                plan = Some(p);
                done.push(e.name.clone());
            }
            Err(
                err @ (EditError::Exists { .. }
                | EditError::Unsupported { .. }
                | EditError::Invalid(_)),
            ) => {
                eprintln!("mcpwire: skipped {:?}: {err}", e.name);
            }
            Err(err) => return Err(edit_fail(err)),
        }
    }
    let Some(plan) = plan else {
        return Err(Fail::usage(format!("nothing to import into {to}")));
    };
    let what = format!(
        "imported {} into {} ({to})",
        done.join(", "),
        plan.path.display()
    );
    finish(cli, &[(plan, what)], dry_run)
}
