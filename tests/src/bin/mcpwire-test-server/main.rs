//! `mcpwire-test-server`: a scriptable MCP server that misbehaves on demand.
//!
//! Written without any MCP library (serde_json + std + httparse) so that it can
//! exercise the mcpwire client adapters from the outside. Two modes:
//!
//! * stdio (default): JSONL on stdin/stdout, diagnostics on stderr;
//! * `--http [--port N]`: Streamable HTTP on `127.0.0.1`, endpoint `/mcp`
//!   (with `--oauth`, also an OAuth 2.1 authorization server: `oauth.rs`;
//!   with `--tls`, behind a rustls front that can demand client
//!   certificates: `tls.rs`).
//!
//! Run with `--help` for the flags; see `protocol.rs` for the tools.

mod http;
mod log;
mod oauth;
mod opts;
mod protocol;
mod stdio;
mod tasks;
mod tls;

use std::sync::Arc;
use std::time::Duration;

fn main() {
    let opts = match opts::Options::parse(std::env::args().skip(1)) {
        Ok(opts) => opts,
        Err(opts::ParseError::Help) => {
            print!("{}", opts::USAGE);
            return;
        }
        Err(opts::ParseError::Bad(msg)) => {
            eprintln!("mcpwire-test-server: {msg}\n\n{}", opts::USAGE);
            std::process::exit(2);
        }
    };

    if let Some(limit) = opts.max_lifetime {
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            // Not eprintln!: with stderr gone (the test that captured it
            // ended) it panics, and this thread would die instead of the
            // process.
            note(&format!(
                "--max-lifetime of {}s reached, exiting",
                limit.as_secs()
            ));
            std::process::exit(0);
        });
    }

    let log = match log::Log::open(opts.log_file.as_deref()) {
        Ok(log) => log,
        Err(e) => {
            eprintln!("mcpwire-test-server: cannot open log file: {e}");
            std::process::exit(2);
        }
    };
    let ctx = Arc::new_cyclic(|me| protocol::Ctx::new(opts, log, me.clone()));
    if ctx.opts.http {
        http::run(ctx)
    } else {
        stdio::run(ctx)
    }
}

/// A line on stderr, if stderr is still there (never a panic: the paths
/// that end the process use it).
pub fn note(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "mcpwire-test-server: {line}");
}

/// Sleeps for `total`, waking every few milliseconds to look at `cancel`.
/// Returns `true` if the sleep was cut short by a cancellation.
pub fn sleep_cancellable(total: Duration, cancel: &std::sync::atomic::AtomicBool) -> bool {
    let deadline = std::time::Instant::now() + total;
    loop {
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return true;
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(5)));
    }
}
