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
use crate::scenario::{Job, Measured, Transport, Variant, Workload};

mod mcpwire_blocking;
mod mcpwire_smol;
mod mcpwire_tokio;
pub mod peers;
mod raw;
mod raw_async;
mod rmcp;

/// One measured client.
pub struct ClientDef {
    /// Its name in the table and on the command line.
    pub name: &'static str,
    /// Runs one job in this (client) process.
    pub run: fn(&Job, &Target) -> Result<Measured, Error>,
    /// The rows it runs.
    pub only: Only,
}

/// The rows a client runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Only {
    /// Every row.
    Any,
    /// HTTP only (a variant of another client's transport).
    Http,
    /// stdio, one call at a time (a runtime's floor).
    StdioSequential,
}

impl ClientDef {
    /// Whether it runs without being named (`--clients`): the runtimes'
    /// floors (`raw-tokio`, `raw-smol`) run when named.
    pub fn by_default(&self) -> bool {
        self.only != Only::StdioSequential
    }

    /// Whether it runs `variant`'s row.
    pub fn runs(&self, variant: &Variant) -> bool {
        match self.only {
            Only::Any => true,
            Only::Http => variant.transport != Transport::Stdio,
            Only::StdioSequential => {
                variant.transport == Transport::Stdio
                    && matches!(variant.workload, Workload::Calls { inflight: 1, .. })
            }
        }
    }
}

/// Whether the client named `client` runs `variant`'s row (a name not in
/// [`CLIENTS`] runs every row).
pub fn runs(client: &str, variant: &Variant) -> bool {
    CLIENTS
        .iter()
        .find(|c| c.name == client)
        .is_none_or(|c| c.runs(variant))
}

/// Every client, in table order. `ts-sdk` and `py-sdk` are the official
/// TypeScript and Python SDKs' clients (see [`peers`]). `raw` and `rmcp` are the references the
/// ratio columns divide by; `raw-tokio` and `raw-smol` are `raw`'s loop on
/// each async runtime (what the runtime alone costs a call). `rmcp-pooled` is rmcp over HTTP with a reqwest
/// client that keeps connections (its default client opens a new TCP
/// connection per POST, on purpose: see `default_http_client` in rmcp).
pub const CLIENTS: &[ClientDef] = &[
    ClientDef {
        name: "mcpwire-tokio",
        run: mcpwire_tokio::run,
        only: Only::Any,
    },
    ClientDef {
        name: "mcpwire-smol",
        run: mcpwire_smol::run,
        only: Only::Any,
    },
    ClientDef {
        name: "mcpwire-blocking",
        run: mcpwire_blocking::run,
        only: Only::Any,
    },
    ClientDef {
        name: "rmcp",
        run: rmcp::run,
        only: Only::Any,
    },
    ClientDef {
        name: "rmcp-pooled",
        run: rmcp::run_pooled,
        only: Only::Http,
    },
    ClientDef {
        name: "ts-sdk",
        run: peers::run_ts,
        only: Only::Any,
    },
    ClientDef {
        name: "py-sdk",
        run: peers::run_py,
        only: Only::Any,
    },
    ClientDef {
        name: "raw",
        run: raw::run,
        only: Only::Any,
    },
    ClientDef {
        name: "raw-tokio",
        run: raw_async::run_tokio,
        only: Only::StdioSequential,
    },
    ClientDef {
        name: "raw-smol",
        run: raw_async::run_smol,
        only: Only::StdioSequential,
    },
];

/// A current-thread tokio runtime: every tokio client is measured on the
/// same kind (one thread, as when pinned to one core).
pub fn tokio_runtime() -> Result<tokio::runtime::Runtime, Error> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}
