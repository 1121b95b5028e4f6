//! The clients measured, one small module each.
//!
//! Adding a client = a type implementing [`AsyncClient`] or
//! [`BlockingClient`] (connect, call, close), a `run` function of one line
//! (`smol::block_on(drive::run_async::<T>(job, t))`,
//! `drive::run_blocking::<T>(job, t)`…), and one entry below.
//!
//! [`AsyncClient`]: crate::drive::AsyncClient
//! [`BlockingClient`]: crate::drive::BlockingClient

use crate::drive::{Error, Target};
use crate::scenario::{Job, Measured};

mod mcpwire_blocking;
mod mcpwire_smol;
mod mcpwire_tokio;
pub mod peers;
mod raw;
mod rmcp;

/// One measured client.
pub struct ClientDef {
    /// Its name in the table and on the command line.
    pub name: &'static str,
    /// Runs one job in this (client) process.
    pub run: fn(&Job, &Target) -> Result<Measured, Error>,
    /// Measured over HTTP only (a variant of another client's transport).
    pub http_only: bool,
}

/// Every client, in table order. `ts-sdk` and `py-sdk` are the official
/// TypeScript and Python SDKs' clients (see [`peers`]). `raw` and `rmcp` are the references the
/// ratio columns divide by. `rmcp-pooled` is rmcp over HTTP with a reqwest
/// client that keeps connections (its default client opens a new TCP
/// connection per POST, on purpose: see `default_http_client` in rmcp).
pub const CLIENTS: &[ClientDef] = &[
    ClientDef {
        name: "mcpwire-tokio",
        run: mcpwire_tokio::run,
        http_only: false,
    },
    ClientDef {
        name: "mcpwire-smol",
        run: mcpwire_smol::run,
        http_only: false,
    },
    ClientDef {
        name: "mcpwire-blocking",
        run: mcpwire_blocking::run,
        http_only: false,
    },
    ClientDef {
        name: "rmcp",
        run: rmcp::run,
        http_only: false,
    },
    ClientDef {
        name: "rmcp-pooled",
        run: rmcp::run_pooled,
        http_only: true,
    },
    ClientDef {
        name: "ts-sdk",
        run: peers::run_ts,
        http_only: false,
    },
    ClientDef {
        name: "py-sdk",
        run: peers::run_py,
        http_only: false,
    },
    ClientDef {
        name: "raw",
        run: raw::run,
        http_only: false,
    },
];

/// A current-thread tokio runtime: every tokio client is measured on the
/// same kind (one thread, as when pinned to one core).
pub fn tokio_runtime() -> Result<tokio::runtime::Runtime, Error> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}
