//! The child's pipes where `poll(2)` does not exist: a thread per pipe.
//!
//! ```text
//!  stdout ─► reader ─┐                      ┌─ writer ─► stdin
//!  stderr ─► reader ─┤  State (one mutex):  │
//!                    ├► inboxes ≤ INBOX B ──┤◄ outbox  ◄── Pipes::write
//!                    │  wrote / failed,     │
//!                    │  wake                │
//!  leader: Waiter::poll waits on `leader` ◄─┘  (a chunk, an EOF, a write
//!          done or failed, an interrupt, its deadline), then
//!          ThreadIo::service takes the chunks under the executor's lock
//! ```
//!
//! The same contract as the `poll(2)` wait: a leader waits unlocked for
//! anything that changes its wait and is woken by [`ThreadIo::interrupt`]
//! (the flag stays set until a wait consumes it, so no wake-up is lost);
//! what is read is bounded (a reader stops reading while its inbox holds
//! [`INBOX`] bytes, as a full pipe stops the child); EOF comes after the
//! last chunk; a write that failed is reported once, by the next write or
//! service; stdin is closed once the backlog is written. The OS cannot
//! tell here what the child has not read of its stdin: `unread` is
//! `None`.
//!
//! The threads end with their pipe (EOF, a write error, stdin closed) or
//! once the executor lets go ([`Drop`]) and the pipe next returns.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use mcpwire::Input;

use super::{Ready, MAX_READS};

/// Bytes a reader reads at a time.
const CHUNK: usize = 32 * 1024;

/// Bytes an inbox holds before its reader waits for room (a Linux pipe's
/// own buffer is 64 KiB).
const INBOX: usize = 64 * 1024;

/// The executor's side of the pipes.
pub(super) struct ThreadIo {
    shared: Arc<Shared>,
    stdout_open: bool,
    stderr_open: bool,
    /// stdin takes bytes (not closed, no write failed).
    stdin_open: bool,
}

/// What the leader waits on, taken out of the executor's lock.
pub(crate) struct Waiter {
    shared: Arc<Shared>,
    stdout: bool,
    stderr: bool,
    stdin: bool,
}

struct Shared {
    state: Mutex<State>,
    /// The leader waits here.
    leader: Condvar,
    /// The readers wait here for room, the writer for bytes.
    workers: Condvar,
}

#[derive(Default)]
struct State {
    stdout: Inbox,
    stderr: Inbox,
    /// Bytes for stdin the writer has not taken yet.
    outbox: Vec<u8>,
    /// Bytes the writer is writing now.
    writing: usize,
    /// Close stdin once the outbox is written.
    close: bool,
    /// A write finished since the leader last looked.
    wrote: bool,
    /// The write that failed (the writer has ended), not yet reported.
    failed: Option<String>,
    /// The leader is asked to look again.
    wake: bool,
    /// The executor let go: the threads end.
    dropped: bool,
}

/// What a reader read and the leader has not taken.
#[derive(Default)]
struct Inbox {
    chunks: VecDeque<Vec<u8>>,
    bytes: usize,
    /// The pipe ended (EOF or an error), after the chunks.
    ended: bool,
}

impl Inbox {
    fn ready(&self) -> bool {
        !self.chunks.is_empty() || self.ended
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ThreadIo {
    /// Takes `child`'s pipes and starts their threads.
    pub(super) fn start(child: &mut Child) -> io::Result<ThreadIo> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            leader: Condvar::new(),
            workers: Condvar::new(),
        });
        let mut io = ThreadIo {
            shared: shared.clone(),
            stdout_open: false,
            stderr_open: false,
            stdin_open: false,
        };
        if let Some(pipe) = child.stdout.take() {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("mcpwire-stdout".into())
                .spawn(move || read_loop(pipe, &shared, |s| &mut s.stdout))?;
            io.stdout_open = true;
        }
        if let Some(pipe) = child.stderr.take() {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("mcpwire-stderr".into())
                .spawn(move || read_loop(pipe, &shared, |s| &mut s.stderr))?;
            io.stderr_open = true;
        }
        if let Some(pipe) = child.stdin.take() {
            std::thread::Builder::new()
                .name("mcpwire-stdin".into())
                .spawn(move || write_loop(pipe, &shared))?;
            io.stdin_open = true;
        }
        Ok(io)
    }

    pub(super) fn write(&mut self, bytes: &[u8]) -> Option<String> {
        if !self.stdin_open {
            return None;
        }
        let mut state = self.shared.lock();
        if let Some(e) = state.failed.take() {
            self.stdin_open = false;
            return Some(e);
        }
        if state.close {
            return None;
        }
        state.outbox.extend_from_slice(bytes);
        drop(state);
        self.shared.workers.notify_all();
        None
    }

    pub(super) fn close_stdin(&mut self) {
        self.shared.lock().close = true;
        self.shared.workers.notify_all();
    }

    pub(super) fn backlog(&self) -> usize {
        let state = self.shared.lock();
        state.outbox.len() + state.writing
    }

    /// Never: the pipes' own threads read as soon as bytes come.
    pub(super) fn read_after_write(
        &mut self,
        _: &mut [u8],
        _: usize,
        _: impl FnMut(Input<'_>),
    ) -> bool {
        false
    }

    pub(super) fn open(&self) -> bool {
        self.stdout_open || self.stderr_open
    }

    /// Not told: no `FIONREAD` for a pipe a thread writes (nor on
    /// Windows).
    pub(super) fn unread(&self) -> Option<usize> {
        None
    }

    pub(super) fn interrupt(&self) {
        self.shared.lock().wake = true;
        self.shared.leader.notify_all();
    }

    /// The writer reports each write it finishes: a leader always hears
    /// of stdin.
    pub(super) fn watches_stdin(&self) -> bool {
        true
    }

    pub(super) fn waiter(&self) -> Waiter {
        Waiter {
            shared: self.shared.clone(),
            stdout: self.stdout_open,
            stderr: self.stderr_open,
            stdin: self.stdin_open,
        }
    }

    /// Reports a write that failed, then gives `on` what the inboxes hold
    /// (at most [`MAX_READS`] chunks of each) and their EOF after the last
    /// chunk. The chunks are taken under the lock and handed out after it.
    pub(super) fn service(
        &mut self,
        _ready: Ready,
        _buf: &mut [u8],
        mut on: impl FnMut(Input<'_>),
    ) {
        let mut state = self.shared.lock();
        state.wrote = false;
        let failed = if self.stdin_open {
            state.failed.take()
        } else {
            None
        };
        let (stdout, stdout_eof) = take(&mut state.stdout, self.stdout_open);
        let (stderr, stderr_eof) = take(&mut state.stderr, self.stderr_open);
        drop(state);
        if !stdout.is_empty() || !stderr.is_empty() {
            // Room for the readers.
            self.shared.workers.notify_all();
        }
        if let Some(e) = failed {
            self.stdin_open = false;
            on(Input::WriteFailed(&e));
        }
        for chunk in &stdout {
            on(Input::Stdout(chunk));
        }
        if stdout_eof {
            self.stdout_open = false;
            on(Input::StdoutEof);
        }
        for chunk in &stderr {
            on(Input::Stderr(chunk));
        }
        if stderr_eof {
            self.stderr_open = false;
            on(Input::StderrEof);
        }
    }
}

/// Up to [`MAX_READS`] chunks of `inbox` (if `open`), and whether its EOF
/// follows them.
fn take(inbox: &mut Inbox, open: bool) -> (Vec<Vec<u8>>, bool) {
    if !open {
        return (Vec::new(), false);
    }
    let n = inbox.chunks.len().min(MAX_READS);
    let chunks: Vec<Vec<u8>> = inbox.chunks.drain(..n).collect();
    inbox.bytes -= chunks.iter().map(Vec::len).sum::<usize>();
    (chunks, inbox.chunks.is_empty() && inbox.ended)
}

impl Drop for ThreadIo {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.dropped = true;
        // A leader still waiting on these pipes looks again (at new ones).
        state.wake = true;
        drop(state);
        self.shared.workers.notify_all();
        self.shared.leader.notify_all();
    }
}

impl Waiter {
    /// Waits until a chunk or an EOF is there (of a pipe still open), a
    /// write finished or failed (while stdin takes bytes), an interrupt
    /// came (consumed here), or `deadline` passed.
    pub(crate) fn poll(&self, deadline: Option<Instant>) -> Ready {
        let mut state = self.shared.lock();
        loop {
            let ready = Ready {
                stdin: self.stdin && (state.wrote || state.failed.is_some()),
                stdout: self.stdout && state.stdout.ready(),
                stderr: self.stderr && state.stderr.ready(),
                wake: state.wake,
            };
            if ready.stdin || ready.stdout || ready.stderr || ready.wake {
                state.wake = false;
                return ready;
            }
            state = match deadline {
                None => self
                    .shared
                    .leader
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ready::default();
                    }
                    self.shared
                        .leader
                        .wait_timeout(state, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }
}

/// A reader: reads `pipe` into its inbox (`inbox` picks it) while there
/// is room, until the pipe ends or the executor lets go.
fn read_loop(mut pipe: impl Read, shared: &Shared, inbox: fn(&mut State) -> &mut Inbox) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let mut state = shared.lock();
        while inbox(&mut state).bytes >= INBOX && !state.dropped {
            state = shared
                .workers
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.dropped {
            return;
        }
        drop(state);
        let read = loop {
            match pipe.read(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other,
            }
        };
        let mut state = shared.lock();
        let ended = !matches!(read, Ok(n) if n > 0);
        let to = inbox(&mut state);
        match read {
            Ok(n) if n > 0 => {
                to.chunks.push_back(buf[..n].to_vec());
                to.bytes += n;
            }
            // EOF, or an error: the pipe is done either way.
            _ => to.ended = true,
        }
        drop(state);
        shared.leader.notify_all();
        if ended {
            return;
        }
    }
}

/// The writer: writes what the outbox holds, in order, until stdin is to
/// be closed and the outbox is empty, a write fails, or the executor lets
/// go; then the pipe is dropped (closed).
fn write_loop(mut pipe: impl Write, shared: &Shared) {
    let mut bytes = Vec::new();
    loop {
        let mut state = shared.lock();
        while state.outbox.is_empty() && !state.close && !state.dropped {
            state = shared
                .workers
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.dropped || state.outbox.is_empty() {
            return;
        }
        std::mem::swap(&mut bytes, &mut state.outbox);
        state.writing = bytes.len();
        drop(state);
        let written = pipe.write_all(&bytes).and_then(|()| pipe.flush());
        bytes.clear();
        let mut state = shared.lock();
        state.writing = 0;
        state.wrote = true;
        let failed = written.is_err();
        if let Err(e) = written {
            state.failed = Some(e.to_string());
            state.outbox.clear();
        }
        drop(state);
        shared.leader.notify_all();
        if failed {
            return;
        }
    }
}
