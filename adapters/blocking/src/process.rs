//! A stdio server's process: spawning it with `std::process`, and the
//! threads around it (stdout and stderr readers, the exit waiter, the stdin
//! writer), all reporting to the owner's channel.

use std::io::{self, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender, SyncSender};
use std::sync::Arc;

use mcpwire::config::ServerConfig;
use mcpwire::transport::stdio::{ExitStatus, Signal};

use mcpwire_adapter::process::{exit_status, signal};

use crate::owner::{Credits, Event};

/// Operations queued for the stdin writer thread (its capacity is the
/// backpressure).
pub(crate) enum WriteOp {
    Bytes(Vec<u8>),
    Close,
}

/// Capacity of the writer's queue.
const WRITE_QUEUE: usize = 16;

/// Starts the process of a stdio server (`command`, `args`, `env`, `cwd`)
/// with piped stdin, stdout and stderr.
pub(crate) fn spawn_child(server: &ServerConfig) -> io::Result<Child> {
    let mut cmd = Command::new(server.command.as_deref().unwrap_or_default());
    cmd.args(&server.args)
        .envs(&server.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = &server.cwd {
        cmd.current_dir(cwd);
    }
    cmd.spawn()
}

/// The owner's handle on the child: enough to signal it, never after it
/// was reaped (its pid may have been reused by then).
pub(crate) struct ChildProcess {
    pid: u32,
    reaped: Arc<AtomicBool>,
}

impl ChildProcess {
    /// Sends `sig` (best effort: it may have exited).
    pub(crate) fn signal(&self, sig: Signal) {
        if !self.reaped.load(Ordering::SeqCst) {
            signal(self.pid, sig);
        }
    }
}

/// Starts the threads around `child`; returns the handle and the writer's
/// queue. If a thread cannot be started, the child is killed and its
/// events say so (the core then closes the connection).
pub(crate) fn start(
    mut child: Child,
    tx: &Sender<Event>,
    credits: &Arc<Credits>,
) -> (ChildProcess, SyncSender<WriteOp>) {
    let pid = child.id();
    let reaped = Arc::new(AtomicBool::new(false));
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();

    let reader = |pipe: Option<Box<dyn Read + Send>>,
                  size: usize,
                  data: fn(Vec<u8>) -> Event,
                  eof: Event| {
        let tx = tx.clone();
        let credits = credits.clone();
        move || {
            if let Some(mut pipe) = pipe {
                let mut buf = vec![0u8; size];
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if !credits.acquire() || tx.send(data(buf[..n].to_vec())).is_err() {
                                return;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            }
            let _ = tx.send(eof);
        }
    };
    let out = reader(
        stdout.map(|p| Box::new(p) as Box<dyn Read + Send>),
        64 * 1024,
        Event::Stdout,
        Event::StdoutEof,
    );
    let err = reader(
        stderr.map(|p| Box::new(p) as Box<dyn Read + Send>),
        8 * 1024,
        Event::Stderr,
        Event::StderrEof,
    );
    let mut ok = spawn("mcpwire-stdout", out) & spawn("mcpwire-stderr", err);

    let (writes, write_rx) = mpsc::sync_channel::<WriteOp>(WRITE_QUEUE);
    let wtx = tx.clone();
    ok &= spawn("mcpwire-stdin", move || writer(stdin, write_rx, wtx));

    if !ok {
        let _ = child.kill();
    }
    let wtx = tx.clone();
    let r = reaped.clone();
    let waiter = move || {
        let status = match child.wait() {
            Ok(s) => exit_status(s),
            Err(_) => ExitStatus {
                code: None,
                signal: None,
            },
        };
        r.store(true, Ordering::SeqCst);
        let _ = wtx.send(Event::Exited(status));
    };
    if let Err(e) = std::thread::Builder::new()
        .name("mcpwire-wait".into())
        .spawn(waiter)
    {
        // Without a waiter nobody would reap the child: report a death.
        tracing::error!("cannot start the process waiter thread: {e}");
        let _ = tx.send(Event::Exited(ExitStatus {
            code: None,
            signal: None,
        }));
    }
    (ChildProcess { pid, reaped }, writes)
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    match std::thread::Builder::new().name(name.into()).spawn(f) {
        Ok(_) => true,
        Err(e) => {
            tracing::error!("cannot start thread {name}: {e}");
            false
        }
    }
}

/// The stdin writer: one operation at a time, in order; reports each one
/// done (room in the queue) and the first failure.
fn writer(stdin: Option<ChildStdin>, ops: mpsc::Receiver<WriteOp>, tx: Sender<Event>) {
    // Dropped (the pipe closed) on `Close` or after a failed write.
    let mut stdin = stdin;
    while let Ok(op) = ops.recv() {
        match op {
            WriteOp::Bytes(b) => {
                if let Some(w) = stdin.as_mut() {
                    if let Err(e) = w.write_all(&b).and_then(|()| w.flush()) {
                        let _ = tx.send(Event::WriteFailed(e.to_string()));
                        stdin = None;
                    }
                }
            }
            WriteOp::Close => stdin = None,
        }
        if tx.send(Event::Wrote).is_err() {
            return;
        }
    }
}
