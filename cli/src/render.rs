//! What the commands print: results, contents, progress, the server's
//! log messages, JSON.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use mcpwire_tokio::types::{CallToolResult, Content, ResourceContents};
use mcpwire_tokio::{Client, ServerNotification};
use serde_json::Value;

pub(crate) async fn print_server_logs(client: Client, quiet: bool) {
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

pub(crate) fn print_json(v: &impl serde::Serialize) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut out, v);
    let _ = writeln!(out);
}

pub(crate) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

pub(crate) fn print_call(result: &CallToolResult) {
    for c in &result.content {
        print_content(c);
    }
    if result.content.is_empty() {
        if let Some(s) = &result.structured_content {
            println!("{}", serde_json::to_string_pretty(s).unwrap_or_default());
        }
    }
}

pub(crate) fn print_content(c: &Content) {
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

pub(crate) fn print_contents(c: &ResourceContents) {
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
pub(crate) struct Progress {
    pub(crate) tty: bool,
    pub(crate) quiet: bool,
    pub(crate) shown: Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    pub(crate) fn new(quiet: bool) -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            quiet,
            shown: Default::default(),
        }
    }

    pub(crate) fn show(&self, p: &mcpwire_tokio::Progress) {
        if self.quiet {
            return;
        }
        self.shown.store(true, std::sync::atomic::Ordering::Relaxed);
        let msg = p.message.as_deref().unwrap_or("");
        let mut err = std::io::stderr().lock();
        if p.task.is_some() {
            // A task's status change: its own line (`task ID: working: …`).
            let _ = writeln!(err, "{msg}");
            let _ = err.flush();
            return;
        }
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

    pub(crate) fn done(&self) {
        if self.tty && self.shown.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!();
        }
    }
}

/// Colours only for a person: stderr is a terminal and `NO_COLOR` is
/// unset or empty (<https://no-color.org>).
pub(crate) fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && no_color_unset()
}

pub(crate) fn no_color_unset() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
