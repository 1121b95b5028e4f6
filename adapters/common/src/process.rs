//! The two OS facts the stdio transport needs: sending a signal and
//! reading an exit status. Public so that `mcpwire-blocking`, which has no
//! async driver, uses the same two functions.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mcpwire::transport::stdio::{ExitStatus, Signal};
use mcpwire::ServerConfig;

/// The command of a stdio server (`command`, `args`, `env`, `cwd`) with
/// piped stdin, stdout and stderr, for every adapter to spawn its way
/// (tokio and async-process convert a `std::process::Command`).
pub fn command(server: &ServerConfig) -> Command {
    let mut cmd = Command::new(server.command.as_deref().unwrap_or_default());
    cmd.args(&server.args)
        .envs(&server.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = &server.cwd {
        cmd.current_dir(cwd);
    }
    cmd
}

/// Sends `sig` to process `pid` (best effort: it may have exited).
pub fn signal(pid: u32, sig: Signal) {
    #[cfg(unix)]
    {
        use rustix::process::{kill_process, Pid, Signal as S};
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return;
        };
        let s = match sig {
            Signal::Terminate => S::TERM,
            Signal::Kill => S::KILL,
        };
        if let Err(e) = kill_process(pid, s) {
            tracing::debug!("signal {sig:?} to {pid:?}: {e}");
        }
    }
    #[cfg(not(unix))]
    {
        // No SIGTERM elsewhere: both steps terminate the process.
        let _ = std::process::Command::new("taskkill")
            .args(["/F", "/PID", &pid.to_string()])
            .status();
        let _ = sig;
    }
}

/// The `Child::wait` contract for a `std::process::Child` reaped
/// elsewhere (a thread, a blocking pool): held by the wait future, it
/// kills the process when that future is dropped before the exit.
#[derive(Debug)]
pub struct KillOnDrop {
    pid: u32,
    exited: Arc<AtomicBool>,
}

impl KillOnDrop {
    /// A guard for process `pid`, and the flag its reaper sets to `true`
    /// once `wait` has returned.
    pub fn new(pid: u32) -> (KillOnDrop, Arc<AtomicBool>) {
        let exited = Arc::new(AtomicBool::new(false));
        let guard = KillOnDrop {
            pid,
            exited: exited.clone(),
        };
        (guard, exited)
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.exited.load(Ordering::SeqCst) {
            signal(self.pid, Signal::Kill);
        }
    }
}

/// The core's view of an exit status.
pub fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    ExitStatus {
        code: status.code(),
        signal,
    }
}
