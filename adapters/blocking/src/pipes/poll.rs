//! The child's pipes on Unix: made non-blocking, so that whichever thread
//! leads can `poll(2)` them and read what is there (the caller that waits,
//! most of the time), with a wake-up socket to interrupt that poll.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::Arc;
use std::time::Instant;

use rustix::event::{PollFd, PollFlags, Timespec};

use mcpwire::Input;

use super::{Ready, MAX_READS};

fn nonblocking(file: &File) -> io::Result<()> {
    rustix::io::ioctl_fionbio(file, true).map_err(io::Error::from)
}

/// The pipes and what is waiting to be written.
pub(super) struct PollIo {
    stdin: Option<Arc<File>>,
    /// Bytes for stdin not written yet (from `written` on).
    backlog: Vec<u8>,
    written: usize,
    close_stdin: bool,
    stdout: Option<Arc<File>>,
    stderr: Option<Arc<File>>,
    wake_rx: Arc<UnixStream>,
    wake_tx: Arc<UnixStream>,
    /// Bytes went to stdin since the leader last looked after a write.
    wrote: bool,
    after_write: mcpwire_adapter::process::AfterWrite,
}

/// What a leader polls, taken out of the lock.
pub(crate) struct PollSet {
    stdin: Option<Arc<File>>,
    stdout: Option<Arc<File>>,
    stderr: Option<Arc<File>>,
    wake: Arc<UnixStream>,
}

impl PollIo {
    /// Takes `child`'s pipes.
    pub(super) fn start(child: &mut Child) -> io::Result<PollIo> {
        let to_file = |fd: std::os::fd::OwnedFd| -> io::Result<Arc<File>> {
            let f = File::from(fd);
            nonblocking(&f)?;
            Ok(Arc::new(f))
        };
        let stdin = child.stdin.take().map(|p| to_file(p.into())).transpose()?;
        let stdout = child.stdout.take().map(|p| to_file(p.into())).transpose()?;
        let stderr = child.stderr.take().map(|p| to_file(p.into())).transpose()?;
        let (rx, tx) = UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok(PollIo {
            stdin,
            backlog: Vec::new(),
            written: 0,
            close_stdin: false,
            stdout,
            stderr,
            wake_rx: Arc::new(rx),
            wake_tx: Arc::new(tx),
            wrote: false,
            after_write: Default::default(),
        })
    }

    pub(super) fn write(&mut self, bytes: &[u8]) -> Option<String> {
        if self.stdin.is_none() || self.close_stdin {
            return None;
        }
        if self.backlog.is_empty() {
            // The common case: straight from the message, no copy.
            let written = self.write_now(bytes);
            self.wrote |= matches!(written, Ok(n) if n > 0);
            match written {
                Ok(n) if n == bytes.len() => return None,
                Ok(n) => self.backlog.extend_from_slice(&bytes[n..]),
                Err(e) => return Some(self.broken(e)),
            }
            return None;
        }
        self.backlog.extend_from_slice(bytes);
        self.flush()
    }

    pub(super) fn close_stdin(&mut self) {
        self.close_stdin = true;
        if self.backlog.is_empty() {
            self.stdin = None;
        }
    }

    /// Writes what the pipe takes of the backlog; the error of a write
    /// that failed (the pipe is then dropped).
    fn flush(&mut self) -> Option<String> {
        while self.written < self.backlog.len() {
            match self.write_now(&self.backlog[self.written..]) {
                Ok(0) => break,
                Ok(n) => {
                    self.written += n;
                    self.wrote = true;
                }
                Err(e) => return Some(self.broken(e)),
            }
        }
        if self.written == self.backlog.len() {
            self.backlog.clear();
            self.written = 0;
            if self.close_stdin {
                self.stdin = None;
            }
        }
        None
    }

    fn write_now(&self, bytes: &[u8]) -> io::Result<usize> {
        let Some(stdin) = &self.stdin else {
            return Ok(0);
        };
        let mut total = 0;
        while total < bytes.len() {
            match (&**stdin).write(&bytes[total..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    fn broken(&mut self, e: io::Error) -> String {
        self.stdin = None;
        self.backlog.clear();
        self.written = 0;
        e.to_string()
    }

    pub(super) fn backlog(&self) -> usize {
        self.backlog.len() - self.written
    }

    /// After bytes went to stdin, reads stdout once when that has paid
    /// lately ([`AfterWrite`](mcpwire_adapter::process::AfterWrite));
    /// whether it read.
    pub(super) fn read_after_write(
        &mut self,
        buf: &mut [u8],
        in_flight: usize,
        mut on: impl FnMut(Input<'_>),
    ) -> bool {
        if !std::mem::take(&mut self.wrote) {
            return false;
        }
        let ready = self.backlog() == 0 && self.stdout.is_some();
        if !self.after_write.should_read(in_flight, ready) {
            return false;
        }
        let mut found = false;
        let ended = read_pipe(&mut self.stdout, buf, |d| {
            found = true;
            on(Input::Stdout(d));
        });
        if ended {
            on(Input::StdoutEof);
        }
        self.after_write.found(found || ended);
        true
    }

    pub(super) fn open(&self) -> bool {
        self.stdout.is_some() || self.stderr.is_some()
    }

    /// The pipe's unread bytes (`FIONREAD`) and the backlog.
    pub(super) fn unread(&self) -> Option<usize> {
        let stdin = self.stdin.as_ref()?;
        let pipe = rustix::io::ioctl_fionread(&**stdin).ok()? as usize;
        Some(pipe + self.backlog())
    }

    pub(super) fn interrupt(&self) {
        let _ = (&*self.wake_tx).write(&[1]);
    }

    /// stdin is polled (for room) only while bytes wait for it.
    pub(super) fn watches_stdin(&self) -> bool {
        self.backlog() > 0
    }

    pub(super) fn poll_set(&self) -> PollSet {
        PollSet {
            stdin: self.stdin.clone().filter(|_| self.backlog() > 0),
            stdout: self.stdout.clone(),
            stderr: self.stderr.clone(),
            wake: self.wake_rx.clone(),
        }
    }

    /// Drains the wake-up socket, writes the backlog, reads each ready
    /// pipe until it has nothing more.
    pub(super) fn service(&mut self, ready: Ready, buf: &mut [u8], mut on: impl FnMut(Input<'_>)) {
        if ready.wake {
            let mut sink = [0u8; 64];
            while matches!((&*self.wake_rx).read(&mut sink), Ok(n) if n > 0) {}
        }
        if ready.stdin {
            if let Some(e) = self.flush() {
                on(Input::WriteFailed(&e));
            }
        }
        if ready.stdout && read_pipe(&mut self.stdout, buf, |d| on(Input::Stdout(d))) {
            on(Input::StdoutEof);
        }
        if ready.stderr && read_pipe(&mut self.stderr, buf, |d| on(Input::Stderr(d))) {
            on(Input::StderrEof);
        }
    }
}

/// Reads `pipe` until it would block (at most [`MAX_READS`] times); true
/// when it ended (EOF or an error), and it is then dropped.
fn read_pipe(pipe: &mut Option<Arc<File>>, buf: &mut [u8], mut data: impl FnMut(&[u8])) -> bool {
    let Some(file) = pipe.clone() else {
        return false;
    };
    for _ in 0..MAX_READS {
        match (&*file).read(buf) {
            Ok(0) => {
                *pipe = None;
                return true;
            }
            Ok(n) => {
                data(&buf[..n]);
                // A short read emptied the pipe: poll(2) is level-triggered,
                // so asking again now would only cost an EAGAIN.
                if n < buf.len() {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => {
                *pipe = None;
                return true;
            }
        }
    }
    false
}

impl PollSet {
    /// Waits until something is ready or `deadline` passes (`now`: the
    /// time read last, microseconds ago).
    pub(crate) fn poll(&self, deadline: Option<Instant>, now: Instant) -> Ready {
        let read = PollFlags::IN;
        // On the stack (this runs once per wait): the wake-up socket last,
        // the pipes still open before it.
        let wake = PollFd::new(&*self.wake, read);
        let mut fds = [wake.clone(), wake.clone(), wake.clone(), wake];
        let mut slots = [usize::MAX; 4];
        let mut n = 0;
        let pipes = [
            (&self.stdin, PollFlags::OUT),
            (&self.stdout, read),
            (&self.stderr, read),
        ];
        for (slot, (pipe, flags)) in pipes.into_iter().enumerate() {
            if let Some(f) = pipe {
                slots[slot] = n;
                fds[n] = PollFd::new(&**f, flags);
                n += 1;
            }
        }
        slots[3] = n;
        let fds = &mut fds[..=n];
        let timeout = deadline.map(|d| {
            let left = d.saturating_duration_since(now);
            Timespec {
                tv_sec: left.as_secs() as _,
                tv_nsec: left.subsec_nanos() as _,
            }
        });
        if rustix::event::poll(fds, timeout.as_ref()).is_err() {
            // EINTR or a bad descriptor: report everything ready; the
            // reads and writes that follow are non-blocking.
            return Ready {
                stdin: self.stdin.is_some(),
                stdout: self.stdout.is_some(),
                stderr: self.stderr.is_some(),
                wake: true,
            };
        }
        let got = |slot: usize| slot != usize::MAX && !fds[slot].revents().is_empty();
        Ready {
            stdin: got(slots[0]),
            stdout: got(slots[1]),
            stderr: got(slots[2]),
            wake: got(slots[3]),
        }
    }
}
