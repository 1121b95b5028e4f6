//! Embedding without an adapter: a complete run loop that drives a
//! [`Connection`] over a child process with only std — a reader thread for
//! stdout, one for stderr and a waiter for the exit, all sending to one
//! channel; the loop drains `poll_output`, feeds every input, and sleeps
//! with `recv_timeout` until `poll_timeout`. When the connection asks for
//! the server again (`Output::Spawn`: the era probe killed a server of the
//! handshake era, or met its silence), it starts a new child; the old
//! child's threads are told apart by a generation number.
//!
//! ```text
//! cargo run -p mcpwire --example std_child -- <server command> [args…]
//! ```
//!
//! It connects, lists the server's tools (following `nextCursor`), prints
//! them, closes gracefully and exits.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mcpwire::connection::{Connection, ConnectionConfig, Input, Output, TransportSpec};
use mcpwire::mcp::methods::{ListTools, Method, Paged};
use mcpwire::mcp::types::Tool;
use mcpwire::mcp::{parse_result, Paginator};
use mcpwire::rpc::{ErrorObject, RequestOptions};
use mcpwire::transport::stdio::{ExitStatus, Signal};

#[allow(dead_code)] // a test includes this file and calls `list_tools` only
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((program, args)) = args.split_first() else {
        eprintln!("usage: std_child <server command> [args…]");
        return ExitCode::from(2);
    };
    match list_tools(program, args) {
        Ok(tools) => {
            for tool in tools {
                let about = tool.description.as_deref().unwrap_or("");
                println!("{:<24} {about}", tool.name);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("std_child: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Spawns `program args…`, connects to it, lists its tools and closes the
/// connection gracefully (the child has exited when this returns).
pub fn list_tools(program: &str, args: &[String]) -> Result<Vec<Tool>, String> {
    let mut driver = Driver::spawn(program, args)?;
    let result = list(&mut driver);
    // Close whatever happened: close stdin, then SIGTERM, then SIGKILL, as
    // the connection decides; it ends when the exit is known.
    driver.conn.close(Instant::now());
    while let Some(output) = driver.next() {
        if let Output::Closed(_) = output {
            break;
        }
    }
    result
}

/// Waits for the handshake, then fetches every page of `tools/list`.
fn list(driver: &mut Driver) -> Result<Vec<Tool>, String> {
    loop {
        match driver.next() {
            Some(Output::Ready) => break,
            Some(Output::Closed(reason)) => return Err(format!("could not connect: {reason}")),
            Some(_) => {}
            None => return Err("the connection stalled".into()),
        }
    }
    let mut tools = Vec::new();
    let mut pages = Paginator::new(100);
    loop {
        let request = ListTools::page(pages.cursor().map(str::to_owned));
        let id = driver
            .conn
            .send(Instant::now(), &request, RequestOptions::default())
            .map_err(|e| e.to_string())?;
        let raw = loop {
            match driver.next() {
                Some(Output::Complete { id: done, outcome }) if done == id => {
                    break outcome.map_err(|e| format!("tools/list: {e}"))?;
                }
                Some(Output::Closed(reason)) => return Err(format!("closed: {reason}")),
                Some(_) => {}
                None => return Err("the connection stalled".into()),
            }
        };
        let page: <ListTools as Method>::Result =
            parse_result(&raw).map_err(|e| format!("tools/list result: {e}"))?;
        let (items, next) = ListTools::split(page);
        tools.extend(items);
        if !pages.advance(next).map_err(|e| e.to_string())? {
            return Ok(tools);
        }
    }
}

/// What the helper threads saw, in the order they saw it.
enum Event {
    Stdout(Vec<u8>),
    StdoutEof,
    Stderr(Vec<u8>),
    StderrEof,
    Exited(ExitStatus),
}

/// A connection to a child process and the threads that watch it.
struct Driver {
    conn: Connection,
    /// How to start the server (again).
    program: String,
    args: Vec<String>,
    /// `None` once the connection asked to close it (or it broke).
    stdin: Option<ChildStdin>,
    /// Shared with the waiter, which reaps the child under this lock.
    child: Arc<Mutex<Child>>,
    /// Which child the events are about (the threads of a replaced one
    /// may still send).
    generation: u32,
    tx: Sender<(u32, Event)>,
    events: Receiver<(u32, Event)>,
}

/// A started child, its stdin, and its threads sending to `tx`.
fn start(
    program: &str,
    args: &[String],
    generation: u32,
    tx: &Sender<(u32, Event)>,
) -> Result<(Arc<Mutex<Child>>, Option<ChildStdin>), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    read_pipe(
        stdout,
        generation,
        tx.clone(),
        Event::Stdout,
        Event::StdoutEof,
    );
    read_pipe(
        stderr,
        generation,
        tx.clone(),
        Event::Stderr,
        Event::StderrEof,
    );
    let stdin = child.stdin.take();
    let child = Arc::new(Mutex::new(child));
    wait_for_exit(Arc::clone(&child), generation, tx.clone());
    Ok((child, stdin))
}

impl Driver {
    fn spawn(program: &str, args: &[String]) -> Result<Driver, String> {
        let (tx, events) = mpsc::channel();
        let (child, stdin) = start(program, args, 0, &tx)?;
        // The child is running: the connection may start.
        let conn = Connection::new(
            ConnectionConfig::default(),
            TransportSpec::Stdio,
            Instant::now(),
        );
        Ok(Driver {
            conn,
            program: program.to_owned(),
            args: args.to_vec(),
            stdin,
            child,
            generation: 0,
            tx,
            events,
        })
    }

    /// Starts the server again (`Output::Spawn`): the old child has
    /// exited; from now on only the new one's events count.
    fn respawn(&mut self) {
        self.generation += 1;
        match start(&self.program, &self.args, self.generation, &self.tx) {
            Ok((child, stdin)) => {
                self.child = child;
                self.stdin = stdin;
                self.conn.handle_input(Instant::now(), Input::Spawned);
            }
            Err(e) => self
                .conn
                .handle_input(Instant::now(), Input::SpawnFailed(&e)),
        }
    }

    /// The next output meant for the application, after performing every
    /// output meant for the driver and feeding inputs as they come; `None`
    /// when the connection has closed (after its `Closed`) or stalled.
    fn next(&mut self) -> Option<Output> {
        loop {
            while let Some(output) = self.conn.poll_output() {
                match output {
                    Output::Write(bytes) => self.write(&bytes),
                    Output::CloseStdin => self.stdin = None,
                    Output::Signal(signal) => send_signal(&self.child, signal),
                    // std starts the child in no group of its own, and
                    // cannot ask the pipe what is unread.
                    Output::CheckGroup => self.conn.handle_input(Instant::now(), Input::GroupEmpty),
                    Output::CheckStdin => self
                        .conn
                        .handle_input(Instant::now(), Input::StdinUnread(None)),
                    Output::Spawn => self.respawn(),
                    Output::Log(line) => eprintln!("server: {line}"),
                    Output::Diagnostic(d) => eprintln!("warning: {d}"),
                    // This client declares no handlers, so no server request
                    // is expected; one must still be answered exactly once.
                    Output::ServerRequest { id, method, .. } => {
                        let error = ErrorObject::new(-32601, format!("{method} is not handled"));
                        let _ = self.conn.respond(Instant::now(), id, Err(error));
                    }
                    other => return Some(other),
                }
            }
            if self.conn.is_closed() || !self.wait() {
                return None;
            }
        }
    }

    /// Sleeps until the next event or timer and feeds it; false when
    /// there is neither (every thread is done and no timer is set).
    fn wait(&mut self) -> bool {
        let event = match self.conn.poll_timeout() {
            Some(at) => self
                .events
                .recv_timeout(at.saturating_duration_since(Instant::now())),
            None => self
                .events
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected),
        };
        let now = Instant::now();
        let event = match event {
            // A replaced child's thread: nothing of it is read any more.
            Ok((generation, _)) if generation != self.generation => return true,
            Ok((_, event)) => Ok(event),
            Err(e) => Err(e),
        };
        match event {
            Ok(Event::Stdout(bytes)) => self.conn.handle_input(now, Input::Stdout(&bytes)),
            Ok(Event::StdoutEof) => self.conn.handle_input(now, Input::StdoutEof),
            Ok(Event::Stderr(bytes)) => self.conn.handle_input(now, Input::Stderr(&bytes)),
            Ok(Event::StderrEof) => self.conn.handle_input(now, Input::StderrEof),
            Ok(Event::Exited(status)) => self.conn.handle_input(now, Input::Exited(status)),
            Err(RecvTimeoutError::Timeout) => self.conn.handle_timeout(now),
            Err(RecvTimeoutError::Disconnected) => match self.conn.poll_timeout() {
                Some(at) => {
                    thread::sleep(at.saturating_duration_since(now));
                    self.conn.handle_timeout(Instant::now());
                }
                None => return false,
            },
        }
        true
    }

    /// Writes to stdin, waiting as long as the child does not read (that
    /// wait is the backpressure); a failure is an input.
    fn write(&mut self, bytes: &[u8]) {
        let Some(stdin) = self.stdin.as_mut() else {
            return;
        };
        if let Err(e) = stdin.write_all(bytes).and_then(|()| stdin.flush()) {
            self.stdin = None;
            let error = e.to_string();
            self.conn
                .handle_input(Instant::now(), Input::WriteFailed(&error));
        }
    }
}

/// Reads a pipe on its own thread until EOF (a read error counts as EOF).
fn read_pipe(
    mut pipe: impl Read + Send + 'static,
    generation: u32,
    tx: Sender<(u32, Event)>,
    data: fn(Vec<u8>) -> Event,
    eof: Event,
) {
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send((generation, data(buf[..n].to_vec()))).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send((generation, eof));
    });
}

/// Reports the child's exit. std can only wait for a child by blocking
/// with `&mut Child`, which the loop needs too (to kill it), so the waiter
/// polls `try_wait` every few milliseconds under the shared lock.
fn wait_for_exit(child: Arc<Mutex<Child>>, generation: u32, tx: Sender<(u32, Event)>) {
    thread::spawn(move || loop {
        let status = child.lock().expect("not poisoned").try_wait();
        match status {
            Ok(Some(status)) => {
                let _ = tx.send((generation, Event::Exited(exit_status(status))));
                return;
            }
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(_) => {
                let unknown = ExitStatus {
                    code: None,
                    signal: None,
                };
                let _ = tx.send((generation, Event::Exited(unknown)));
                return;
            }
        }
    });
}

fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    ExitStatus {
        code: status.code(),
        signal,
    }
}

/// Sends `signal` to the child itself (the adapters signal its whole
/// process group; std has no way to). Only while it has not been reaped:
/// the check and the signal happen under the lock the waiter reaps under,
/// so a reused pid is never signalled.
fn send_signal(child: &Mutex<Child>, signal: Signal) {
    let mut child = child.lock().expect("not poisoned");
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    match signal {
        Signal::Kill => {
            let _ = child.kill();
        }
        Signal::Terminate => terminate(&mut child),
    }
}

/// SIGTERM: std has no call for it, so the `kill` utility sends it; if that
/// fails, the child is killed outright.
#[cfg(unix)]
fn terminate(child: &mut Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !sent {
        let _ = child.kill();
    }
}

/// Elsewhere std only knows how to end a process outright.
#[cfg(not(unix))]
fn terminate(child: &mut Child) {
    let _ = child.kill();
}
