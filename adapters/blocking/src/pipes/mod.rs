//! A stdio server's process for the blocking executor: its pipes, the
//! wait that a leader does on them (interruptible), its process group,
//! and a thread that waits for the exit.
//!
//! Two ways to wait on the pipes, one interface for [`crate::exec`]:
//!
//! - `poll(2)` (Unix, [`poll`]): the pipes are made non-blocking; the
//!   leader polls them unlocked and reads what is there under the lock.
//!   No thread per pipe, and the caller that waits reads its own answer.
//! - a thread per pipe ([`threads`], everywhere else, Windows included):
//!   a reader for stdout and one for stderr hand what they read to a
//!   bounded inbox, a writer takes stdin's backlog; the leader waits on a
//!   condition variable instead of `poll(2)`, then takes what the inbox
//!   holds under the lock. On Unix it runs when `MCPWIRE_BLOCKING_PIPES`
//!   is `threads` (read once per process), which is for tests:
//!   `scripts/test` runs the whole blocking suite a second time with it,
//!   so that the wait Windows uses is run here too.

#[cfg(unix)]
mod poll;
mod threads;

use std::io;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mcpwire::config::ServerConfig;
use mcpwire::transport::stdio::{ExitStatus, Signal};
use mcpwire::Input;
use mcpwire_adapter::process::Group;

/// Reads of one pipe per service round (a flood must not keep a leader
/// from its own outcome).
const MAX_READS: usize = 16;

/// The environment variable that selects the thread-per-pipe wait on Unix
/// (`threads`), for tests; read once per process.
#[cfg(unix)]
const PIPES_VAR: &str = "MCPWIRE_BLOCKING_PIPES";

/// Whether the pipes are served by a thread each.
fn use_threads() -> bool {
    #[cfg(unix)]
    {
        static THREADS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *THREADS.get_or_init(|| std::env::var_os(PIPES_VAR).is_some_and(|v| v == "threads"))
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Starts the process of a stdio server with piped stdin, stdout and
/// stderr.
pub(crate) fn spawn_child(server: &ServerConfig) -> io::Result<Child> {
    mcpwire_adapter::process::command(server)?.spawn()
}

/// The child's pipes, its group, and what a leader waits for.
pub(crate) struct Pipes {
    pid: u32,
    reaped: Arc<AtomicBool>,
    /// The child's process group (killed if dropped before found empty).
    group: Group,
    io: Io,
    /// A leader is inside `poll` (interrupt it to change what it waits for).
    pub(crate) polling: bool,
    /// What that poll waits for: its deadline, and whether stdin is in it.
    pub(crate) polled_deadline: Option<Instant>,
    pub(crate) polled_stdin: bool,
}

enum Io {
    #[cfg(unix)]
    Poll(poll::PollIo),
    Threads(threads::ThreadIo),
}

/// What a leader waits on, taken out of the lock.
pub(crate) enum PollSet {
    #[cfg(unix)]
    Poll(poll::PollSet),
    Threads(threads::Waiter),
}

/// What a poll found ready.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Ready {
    pub(crate) stdin: bool,
    pub(crate) stdout: bool,
    pub(crate) stderr: bool,
    pub(crate) wake: bool,
}

/// Each call goes to the backend.
macro_rules! io {
    ($self:expr, $io:ident => $e:expr) => {
        match $self {
            #[cfg(unix)]
            Io::Poll($io) => $e,
            Io::Threads($io) => $e,
        }
    };
}

impl Pipes {
    /// Takes `child`'s pipes; the exit is waited for on a thread of its
    /// own, which calls `exited` (once).
    pub(crate) fn start(
        mut child: Child,
        exited: impl FnOnce(ExitStatus) + Send + 'static,
    ) -> io::Result<Pipes> {
        let io = if use_threads() {
            Io::Threads(threads::ThreadIo::start(&mut child)?)
        } else {
            #[cfg(unix)]
            {
                Io::Poll(poll::PollIo::start(&mut child)?)
            }
            #[cfg(not(unix))]
            unreachable!("threads everywhere but Unix")
        };
        let pid = child.id();
        let reaped = Arc::new(AtomicBool::new(false));
        let flag = reaped.clone();
        let waiter = move || {
            let status = match child.wait() {
                Ok(s) => mcpwire_adapter::process::exit_status(s),
                Err(_) => ExitStatus {
                    code: None,
                    signal: None,
                },
            };
            flag.store(true, Ordering::SeqCst);
            exited(status);
        };
        std::thread::Builder::new()
            .name("mcpwire-wait".into())
            .spawn(waiter)?;
        Ok(Pipes {
            pid,
            reaped,
            group: Group::new(mcpwire_adapter::process::group_of(Some(pid))),
            io,
            polling: false,
            polled_deadline: None,
            polled_stdin: false,
        })
    }

    /// Sends `sig` to the child's group, or to the child unless it was
    /// reaped (its pid may be reused by then). Returns `false` when the
    /// group turned out empty.
    pub(crate) fn signal(&mut self, sig: Signal) -> bool {
        if self.group.is_known() {
            return self.group.signal(sig);
        }
        if !self.reaped.load(Ordering::SeqCst) {
            mcpwire_adapter::process::signal(self.pid, sig);
        }
        true
    }

    /// Whether anything of the child's group is left.
    pub(crate) fn check_group(&mut self) -> bool {
        self.group.check()
    }

    /// Queues bytes for stdin (and writes what the pipe takes now); the
    /// error of a write that failed.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Option<String> {
        io!(&mut self.io, io => io.write(bytes))
    }

    /// Closes stdin once the backlog is written.
    pub(crate) fn close_stdin(&mut self) {
        io!(&mut self.io, io => io.close_stdin())
    }

    /// Bytes for stdin not written yet.
    pub(crate) fn backlog(&self) -> usize {
        io!(&self.io, io => io.backlog())
    }

    /// After bytes went to stdin, one read of stdout, giving what it
    /// finds to `on`; whether it read. The server, woken by the write,
    /// has often answered before the writer runs again (at once on a
    /// shared CPU): the read then spares a poll(2).
    ///
    /// Only for the lone call of `in_flight` written whole
    /// ([`AfterWrite::should_read`](mcpwire_adapter::process::AfterWrite::should_read)).
    pub(crate) fn read_after_write(
        &mut self,
        buf: &mut [u8],
        in_flight: usize,
        on: impl FnMut(Input<'_>),
    ) -> bool {
        io!(&mut self.io, io => io.read_after_write(buf, in_flight, on))
    }

    /// Whether a pipe is left to read.
    pub(crate) fn open(&self) -> bool {
        io!(&self.io, io => io.open())
    }

    /// What the child has not read of its stdin: the pipe's unread bytes
    /// (`FIONREAD`) and the backlog not written yet. `None` once stdin is
    /// closed, or where the OS does not tell (the thread-per-pipe wait).
    pub(crate) fn unread(&self) -> Option<usize> {
        io!(&self.io, io => io.unread())
    }

    /// Whether a leader's wait hears of stdin now ([`Ready::stdin`]); if
    /// not, a leader must be interrupted when bytes wait for stdin.
    pub(crate) fn watches_stdin(&self) -> bool {
        io!(&self.io, io => io.watches_stdin())
    }

    /// Wakes a leader inside `poll`.
    pub(crate) fn interrupt(&self) {
        if self.polling {
            io!(&self.io, io => io.interrupt())
        }
    }

    /// What to wait on, to take out of the lock.
    pub(crate) fn poll_set(&self) -> PollSet {
        match &self.io {
            #[cfg(unix)]
            Io::Poll(io) => PollSet::Poll(io.poll_set()),
            Io::Threads(io) => PollSet::Threads(io.waiter()),
        }
    }

    /// Services what `ready` found: writes the backlog (or reports a
    /// write that failed), reads each pipe, giving every chunk and EOF to
    /// `on` as the core's [`Input`]s (`buf` is the read buffer).
    pub(crate) fn service(&mut self, ready: Ready, buf: &mut [u8], on: impl FnMut(Input<'_>)) {
        io!(&mut self.io, io => io.service(ready, buf, on))
    }
}

impl PollSet {
    /// Waits until something is ready or `deadline` passes (`now`: the
    /// time read last, microseconds ago).
    pub(crate) fn poll(&self, deadline: Option<Instant>, now: Instant) -> Ready {
        match self {
            #[cfg(unix)]
            PollSet::Poll(set) => set.poll(deadline, now),
            // The reader threads' wait reads the clock itself.
            PollSet::Threads(waiter) => {
                let _ = now;
                waiter.poll(deadline)
            }
        }
    }
}
