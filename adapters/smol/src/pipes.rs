//! A stdio server's process on smol (Unix): its pipes as `async-io`
//! sources read with one system call per wake-up. A plain `Async` pipe
//! tries a read before it waits, so every wake-up costs the read that
//! empties the pipe and then one that finds it empty; [`Pipe`] remembers
//! that a short read emptied the pipe and goes straight to waiting for
//! readability next time (the reactor then arms the interest, and reports
//! at once if bytes came meanwhile).
//!
//! Except when the driver says so ([`ReadNow`], right after it wrote a
//! lone call): the server, woken by the write, has often answered by then
//! (on a shared CPU it runs before the writer does again), and one read
//! finds the answer where async-io's wait would cost five system calls to
//! report it.
//!
//! ```text
//!  lone call written ──► ReadNow ──► stdout reads once
//!                                      ├► the answer: read, no wait
//!                                      └► EAGAIN: wait for readability as before
//! ```

use std::io::{self, Read};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{ready, Context, Poll};

use mcpwire_adapter::process::{KillOnDrop, ReadNow};
use mcpwire_adapter::runtime::Child;
use mcpwire_adapter::ServerConfig;
use smol::io::AsyncRead;
use smol::Async;

/// A pipe read end.
pub(crate) struct Pipe<T> {
    io: Async<T>,
    /// The last read emptied the pipe.
    drained: bool,
    /// The driver's word to read before waiting (stdout only).
    read_now: Option<ReadNow>,
}

impl<T: std::os::fd::AsFd> Pipe<T> {
    fn new(io: T, read_now: Option<ReadNow>) -> io::Result<Self> {
        Ok(Pipe {
            io: Async::new(io)?,
            drained: false,
            read_now,
        })
    }
}

impl<T> AsyncRead for Pipe<T>
where
    T: std::os::fd::AsFd + Unpin,
    for<'a> &'a T: Read,
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let now = this.read_now.as_ref().is_some_and(ReadNow::take);
        if this.drained && !now {
            ready!(this.io.poll_readable(cx))?;
        }
        this.drained = false;
        loop {
            match this.io.get_ref().read(buf) {
                Ok(n) => {
                    this.drained = n > 0 && n < buf.len();
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(this.io.poll_readable(cx))?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// Starts the process of a stdio server with piped stdio.
pub(crate) fn spawn_child(server: &ServerConfig) -> io::Result<Child> {
    let mut child = mcpwire_adapter::process::command(server)?.spawn()?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(io::Error::other("child pipes missing"));
    };
    let pid = child.id();
    let (guard, exited) = KillOnDrop::new(pid);
    let read_now = ReadNow::default();
    let stdin = Async::new(stdin)?;
    let stdin_probe = mcpwire_adapter::process::StdinProbe::of(stdin.get_ref());
    let file = |fd: std::os::fd::OwnedFd| std::fs::File::from(fd);
    let stdout = Pipe::new(file(stdout.into()), Some(read_now.clone()))?;
    let stderr = Pipe::new(file(stderr.into()), None)?;
    // Reaped on a thread of smol's blocking pool.
    let wait = smol::unblock(move || {
        let status = child.wait();
        exited.store(true, Ordering::SeqCst);
        status
    });
    Ok(Child {
        pid: Some(pid),
        group: mcpwire_adapter::process::group_of(Some(pid)),
        stdin_probe,
        stdin: Box::new(stdin),
        stdout: Box::new(stdout),
        stderr: Box::new(stderr),
        read_now: Some(read_now),
        wait: Box::pin(async move {
            let _guard = guard;
            wait.await
        }),
    })
}
