//! mcpwire-tokio, through its public API only.

use mcpwire_bench::proto::Call;
use mcpwire_tokio::types::Content;
use mcpwire_tokio::{Client, ConnectOptions, ServerConfig};

use crate::drive::{self, AsyncClient, Error, Target};
use crate::scenario::{Job, Measured};

pub fn run(job: &Job, target: &Target) -> Result<Measured, Error> {
    super::tokio_runtime()?.block_on(drive::run_async::<McpwireTokio>(job, target))
}

struct McpwireTokio(Client);

impl AsyncClient for McpwireTokio {
    async fn connect(target: &Target) -> Result<Self, Error> {
        let server = match target {
            Target::Stdio { command, args, .. } => ServerConfig::stdio(command).args(args),
            Target::Http { url } => ServerConfig::http(url),
        };
        let fresh = matches!(target, Target::Stdio { fresh: true, .. });
        let options = ConnectOptions::new().remember_era(!fresh);
        Ok(McpwireTokio(Client::connect_with(server, options).await?))
    }

    async fn call(&self, call: &Call) -> Result<usize, Error> {
        let result = self.0.call_tool(call.tool, &call.args).await?;
        match result.content.first() {
            Some(Content::Text { text, .. }) => Ok(text.len()),
            _ => Err("no text content".into()),
        }
    }

    async fn close(self) -> Result<(), Error> {
        Ok(self.0.close().await?)
    }
}
