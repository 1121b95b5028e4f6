//! `mcpwire-bench profile`: instructions and syscalls per call, for every
//! client, measured the same way: each client process runs the variant's
//! calls twice over, once with `N` calls and once with `2N` (no warm-up,
//! one run), under `valgrind --tool=callgrind` (instructions of the client
//! process only, every thread) and under `strace -f -ff` (system calls of
//! the client's threads only: the server's are told apart by its `execve`
//! and the threads it clones). Per call = (2N − N runs) / N, so start-up,
//! connect and close cancel out. Counts, not times: repeatable whatever
//! else the machine does.
//!
//! ```text
//! cargo run --release -p mcpwire-bench -- profile seq http [--clients a,b] [--calls N] [--exe OTHER-BUILD]
//! ```

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::scenario::{self, Job, Variant, Workload};

/// What one client costs per call in one variant.
struct PerCall {
    instructions: Option<f64>,
    syscalls: Option<(f64, Vec<(String, f64)>)>,
}

pub fn run(
    exe: &Path,
    server: &Path,
    scenarios: &[u8],
    clients: &[&'static str],
    calls: usize,
) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("mcpwire-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    println!("| scenario | client | instructions / call | syscalls / call | most frequent syscalls / call |");
    println!("|---|---|--:|--:|---|");
    for variant in scenarios.iter().flat_map(|&n| scenario::variants(n, false)) {
        let Workload::Calls { .. } = variant.workload else {
            continue;
        };
        for &client in clients {
            if !crate::clients::runs(client, &variant) {
                continue;
            }
            eprint!("{} · {client} … ", variant.label);
            let p = per_call(exe, server, &dir, &variant, client, calls);
            let instructions = p.instructions.map_or("–".into(), |i| format!("{i:.0}"));
            let (syscalls, top) = match &p.syscalls {
                Some((total, top)) => (
                    format!("{total:.2}"),
                    top.iter()
                        .take(6)
                        .map(|(n, c)| format!("{n} {c:.2}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                None => ("–".into(), String::new()),
            };
            eprintln!("{instructions} instructions, {syscalls} syscalls");
            println!(
                "| {} | {client} | {instructions} | {syscalls} | {top} |",
                variant.label
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn per_call(
    exe: &Path,
    server: &Path,
    dir: &Path,
    variant: &Variant,
    client: &str,
    calls: usize,
) -> PerCall {
    let job = |n: usize| {
        let mut v = variant.clone();
        if let Workload::Calls { calls, .. } = &mut v.workload {
            *calls = n;
        }
        v.warmup = 0;
        v.runs = 1;
        let job = Job {
            variant: v,
            server: server.display().to_string(),
            limit_secs: 1200,
        };
        serde_json::to_string(&job).expect("a job serializes")
    };
    let (small, large) = (job(calls), job(2 * calls));
    let instructions = (|| {
        let a = callgrind(exe, dir, client, &small)?;
        let b = callgrind(exe, dir, client, &large)?;
        Some((b as f64 - a as f64) / calls as f64)
    })();
    let syscalls = (|| {
        let a = strace(exe, dir, client, &small)?;
        let b = strace(exe, dir, client, &large)?;
        let mut names: HashSet<&String> = a.keys().collect();
        names.extend(b.keys());
        let mut per: Vec<(String, f64)> = names
            .into_iter()
            .map(|n| {
                let d = *b.get(n).unwrap_or(&0) as f64 - *a.get(n).unwrap_or(&0) as f64;
                (n.clone(), d / calls as f64)
            })
            .filter(|(_, c)| *c > 0.005)
            .collect();
        per.sort_by(|x, y| y.1.total_cmp(&x.1));
        let total = per.iter().map(|(_, c)| c).sum();
        Some((total, per))
    })();
    PerCall {
        instructions,
        syscalls,
    }
}

/// Runs `exe __client <client> <job>` under `tool` (its command and
/// options so far); `None` if it could not run or failed.
fn run_client_under(mut tool: Command, exe: &Path, client: &str, job: &str) -> Option<()> {
    let status = tool
        .arg(exe)
        .args(["__client", client, job])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    status.success().then_some(())
}

/// The client process's instructions (every thread, not the server).
fn callgrind(exe: &Path, dir: &Path, client: &str, job: &str) -> Option<u64> {
    let out = dir.join("callgrind.out");
    let _ = std::fs::remove_file(&out);
    let mut valgrind = Command::new("valgrind");
    valgrind
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .args(["--trace-children=no", "-q"]);
    run_client_under(valgrind, exe, client, job)?;
    let text = std::fs::read_to_string(&out).ok()?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The client process's system calls by name (its threads only).
fn strace(exe: &Path, dir: &Path, client: &str, job: &str) -> Option<HashMap<String, u64>> {
    let sub = dir.join("strace");
    let _ = std::fs::remove_dir_all(&sub);
    std::fs::create_dir_all(&sub).ok()?;
    let prefix = sub.join("t");
    let mut strace = Command::new("strace");
    strace.args(["-f", "-ff", "-qq", "-o"]).arg(&prefix);
    run_client_under(strace, exe, client, job)?;
    // One file per thread: t.<tid>.
    let mut files: HashMap<u32, PathBuf> = HashMap::new();
    for entry in std::fs::read_dir(&sub).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(tid) = name.strip_prefix("t.").and_then(|t| t.parse().ok()) {
            files.insert(tid, entry.path());
        }
    }
    let texts: HashMap<u32, String> = files
        .iter()
        .filter_map(|(tid, p)| Some((*tid, std::fs::read_to_string(p).ok()?)))
        .collect();
    // The server: the thread that exec'd the echo server, and every thread
    // or process cloned from it.
    let clones = |text: &str| -> Vec<u32> {
        text.lines()
            .filter(|l| l.starts_with("clone") || l.starts_with("fork") || l.starts_with("vfork"))
            .filter_map(|l| l.rsplit("= ").next()?.trim().parse().ok())
            .collect()
    };
    let mut server: HashSet<u32> = texts
        .iter()
        .filter(|(_, t)| {
            t.lines()
                .any(|l| l.starts_with("execve(") && l.contains("bench-echo-server"))
        })
        .map(|(tid, _)| *tid)
        .collect();
    loop {
        let more: Vec<u32> = server
            .iter()
            .filter_map(|tid| texts.get(tid))
            .flat_map(|t| clones(t))
            .filter(|tid| !server.contains(tid))
            .collect();
        if more.is_empty() {
            break;
        }
        server.extend(more);
    }
    let mut counts: HashMap<String, u64> = HashMap::new();
    for (tid, text) in &texts {
        if server.contains(tid) {
            continue;
        }
        for line in text.lines() {
            let Some(paren) = line.find('(') else {
                continue;
            };
            let name = &line[..paren];
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                continue;
            }
            // The exec of the client itself, and the child's side of
            // the fork that becomes the server, are not the client's work.
            if name == "execve" {
                continue;
            }
            *counts.entry(name.to_string()).or_default() += 1;
        }
    }
    Some(counts)
}
