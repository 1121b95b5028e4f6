//! The raw loop on each async runtime: `raw`'s loop (the same request bytes
//! every time, the reply's text found by scanning, no MCP library) on
//! tokio's and on smol's process pipes, from the same `block_on` the
//! mcpwire clients are measured from. What a call costs the runtime
//! itself (its reactor's wait, its readiness bookkeeping, its system calls):
//! the floor under mcpwire-tokio and mcpwire-smol. stdio, one call at a
//! time.

use std::cell::{Cell, OnceCell};
use std::process::Stdio;

use mcpwire_bench::proto::{self, Call};

use crate::drive::{self, AsyncClient, Error, Target};
use crate::scenario::{Job, Measured};

pub fn run_tokio(job: &Job, target: &Target) -> Result<Measured, Error> {
    crate::clients::tokio_runtime()?.block_on(drive::run_async::<RawTokio>(job, target))
}

pub fn run_smol(job: &Job, target: &Target) -> Result<Measured, Error> {
    smol::block_on(drive::run_async::<RawSmol>(job, target))
}

/// One runtime's raw client: `$rt` the module of its process and I/O
/// types, `$wait` how its child is awaited.
macro_rules! raw_client {
    ($name:ident, $rt:ident, |$child:ident| $wait:expr) => {
        pub struct $name {
            child: $rt::Child,
            pipes: Cell<Option<Pipes<$rt::ChildStdin, $rt::BufReader<$rt::ChildStdout>>>>,
            request: OnceCell<Vec<u8>>,
        }

        impl $name {
            async fn read_line(
                p: &mut Pipes<$rt::ChildStdin, $rt::BufReader<$rt::ChildStdout>>,
            ) -> Result<(), Error> {
                use $rt::AsyncBufReadExt;
                p.line.clear();
                if p.stdout.read_until(b'\n', &mut p.line).await? == 0 {
                    return Err("server closed stdout".into());
                }
                Ok(())
            }
        }

        impl AsyncClient for $name {
            async fn connect(target: &Target) -> Result<Self, Error> {
                use $rt::AsyncWriteExt;
                let Target::Stdio { command, args, .. } = target else {
                    return Err("stdio only".into());
                };
                let mut child = $rt::Command::new(command)
                    .args(args)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err("no pipes".into());
                };
                let mut pipes = Pipes {
                    stdin,
                    stdout: $rt::BufReader::with_capacity(64 * 1024, stdout),
                    line: Vec::with_capacity(64 * 1024),
                };
                pipes.stdin.write_all(&proto::initialize_line(0)).await?;
                Self::read_line(&mut pipes).await?;
                pipes.stdin.write_all(proto::INITIALIZED_LINE).await?;
                Ok($name {
                    child,
                    pipes: Cell::new(Some(pipes)),
                    request: OnceCell::new(),
                })
            }

            async fn call(&self, call: &Call) -> Result<usize, Error> {
                use $rt::AsyncWriteExt;
                // One call at a time: the pipes are taken for the call
                // (lost on an error, which ends the run).
                let mut p = self.pipes.take().ok_or("one call at a time")?;
                let request = self.request.get_or_init(|| call.request_line(1));
                p.stdin.write_all(request).await?;
                Self::read_line(&mut p).await?;
                let len = proto::find_text(&p.line).map(<[u8]>::len);
                self.pipes.set(Some(p));
                len.ok_or_else(|| "no text in the reply".into())
            }

            async fn close(self) -> Result<(), Error> {
                // Closing stdin ends the server.
                drop(self.pipes.take());
                let mut $child = self.child;
                $wait.await?;
                Ok(())
            }
        }
    };
}

struct Pipes<W, R> {
    stdin: W,
    stdout: R,
    line: Vec<u8>,
}

mod tk {
    pub use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    pub use tokio::process::{Child, ChildStdin, ChildStdout, Command};
}

mod sm {
    pub use smol::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    pub use smol::process::{Child, ChildStdin, ChildStdout, Command};
}

raw_client!(RawTokio, tk, |child| child.wait());
raw_client!(RawSmol, sm, |child| child.status());
