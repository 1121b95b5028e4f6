//! An MCP server on rmcp 0.8.5 over stdio, shaped as rmcp's README shows
//! (and as most deployed Rust servers are): an `echo` tool and one text
//! resource. Like every server of that version it ends with status 1 on
//! any request before `initialize` (`server/discover` included).
//!
//! It stops at stdin EOF, or after `MAX_LIFETIME` whatever happens.

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    AnnotateAble, ListResourcesResult, PaginatedRequestParam, RawResource,
    ReadResourceRequestParam, ReadResourceResult, ResourceContents, ServerCapabilities, ServerInfo,
};
use rmcp::service::RequestContext;
use rmcp::{
    schemars, tool, tool_handler, tool_router, transport::stdio, ErrorData, RoleServer,
    ServerHandler, ServiceExt,
};

/// The longest the process lives, should its client never close stdin.
const MAX_LIFETIME: Duration = Duration::from_secs(300);

const RESOURCE_URI: &str = "memo://interop/greeting";

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    message: String,
}

#[derive(Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Echoes the message back")]
    async fn echo(&self, Parameters(EchoArgs { message }): Parameters<EchoArgs>) -> String {
        format!("Echo: {message}")
    }
}

#[tool_handler]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerInfo {
        ServerInfo {
            capabilities: ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
            ..Default::default()
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParam>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut greeting = RawResource::new(RESOURCE_URI, "greeting");
        greeting.mime_type = Some("text/plain".into());
        Ok(ListResourcesResult {
            resources: vec![greeting.no_annotation()],
            next_cursor: None,
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParam,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, ErrorData> {
        if request.uri != RESOURCE_URI {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        Ok(ReadResourceResult {
            contents: vec![ResourceContents::text(
                "hello from rmcp 0.8.5",
                RESOURCE_URI,
            )],
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = Echo::new().serve(stdio()).await?;
    tokio::select! {
        done = service.waiting() => { done?; }
        _ = tokio::time::sleep(MAX_LIFETIME) => {}
    }
    Ok(())
}
