//! rmcp, the official Rust SDK, used as its README shows: `().serve(transport)`
//! with `TokioChildProcess` or `StreamableHttpClientTransport` (reqwest).

use mcpwire_bench::proto::Call;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};

use crate::drive::{self, AsyncClient, Error, Target};
use crate::scenario::{Job, Measured};

pub fn run(job: &Job, target: &Target) -> Result<Measured, Error> {
    super::tokio_runtime()?.block_on(drive::run_async::<Rmcp<false>>(job, target))
}

/// Over HTTP with a pooling reqwest client instead of rmcp's default one.
pub fn run_pooled(job: &Job, target: &Target) -> Result<Measured, Error> {
    super::tokio_runtime()?.block_on(drive::run_async::<Rmcp<true>>(job, target))
}

struct Rmcp<const POOLED: bool>(RunningService<RoleClient, ()>);

impl<const POOLED: bool> AsyncClient for Rmcp<POOLED> {
    async fn connect(target: &Target) -> Result<Self, Error> {
        let service = match target {
            Target::Stdio { command, args, .. } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args);
                let transport = TokioChildProcess::new(cmd)?;
                ().serve(transport).await?
            }
            Target::Http { url } => {
                // Its default of 16 concurrent POSTs would cap the
                // 64-in-flight scenario; lift it.
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .max_concurrent_requests(1024);
                let transport = if POOLED {
                    StreamableHttpClientTransport::with_client(reqwest::Client::new(), config)
                } else {
                    StreamableHttpClientTransport::from_config(config)
                };
                ().serve(transport).await?
            }
        };
        Ok(Rmcp(service))
    }

    async fn call(&self, call: &Call) -> Result<usize, Error> {
        let params = CallToolRequestParams::new(call.tool).with_arguments(call.args_object());
        let result = self.0.call_tool(params).await?;
        result
            .content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.len())
            .ok_or_else(|| "no text content".into())
    }

    async fn close(self) -> Result<(), Error> {
        self.0.cancel().await?;
        Ok(())
    }
}
