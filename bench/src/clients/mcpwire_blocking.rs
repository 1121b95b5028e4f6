//! mcpwire-blocking, through its public API only; N calls in flight are N
//! threads sharing one `Client`.

use mcpwire_bench::proto::Call;
use mcpwire_blocking::types::Content;
use mcpwire_blocking::{Client, ConnectOptions, ServerConfig};

use crate::drive::{self, BlockingClient, Error, Target};
use crate::scenario::{Job, Measured};

pub fn run(job: &Job, target: &Target) -> Result<Measured, Error> {
    drive::run_blocking::<McpwireBlocking>(job, target)
}

struct McpwireBlocking(Client);

impl BlockingClient for McpwireBlocking {
    fn connect(target: &Target) -> Result<Self, Error> {
        let server = match target {
            Target::Stdio { command, args, .. } => ServerConfig::stdio(command).args(args),
            Target::Http { url } => ServerConfig::http(url),
        };
        let fresh = matches!(target, Target::Stdio { fresh: true, .. });
        let options = ConnectOptions::new().remember_era(!fresh);
        Ok(McpwireBlocking(Client::connect_with(server, options)?))
    }

    fn call(&self, call: &Call) -> Result<usize, Error> {
        let result = self.0.call_tool(call.tool, &call.args)?;
        match result.content.first() {
            Some(Content::Text { text, .. }) => Ok(text.len()),
            _ => Err("no text content".into()),
        }
    }

    fn close(self) -> Result<(), Error> {
        Ok(self.0.close()?)
    }
}
