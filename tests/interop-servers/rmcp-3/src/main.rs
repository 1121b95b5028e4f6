//! An MCP server on rmcp 3.11.0, which serves both protocol eras on one
//! process: an `echo` tool and one text resource.
//!
//! Usage: rmcp3-server stdio
//!        rmcp3-server http PORT   (Streamable HTTP at http://127.0.0.1:PORT/mcp)
//!
//! Over stdio it stops at stdin EOF; in both modes after `MAX_LIFETIME`
//! whatever happens (the tests kill the HTTP one).

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{
    schemars, tool, tool_handler, tool_router, transport::stdio, ErrorData, RoleServer,
    ServerHandler, ServiceExt,
};

/// The longest the process lives, should nobody stop it.
const MAX_LIFETIME: Duration = Duration::from_secs(300);

const RESOURCE_URI: &str = "memo://interop/greeting";

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    message: String,
}

/// No state: in rmcp 3 `#[tool_handler]` builds the tool router per
/// request (`Self::tool_router()`).
#[derive(Clone)]
struct Echo;

#[tool_router]
impl Echo {
    #[tool(description = "Echoes the message back")]
    async fn echo(&self, Parameters(EchoArgs { message }): Parameters<EchoArgs>) -> String {
        format!("Echo: {message}")
    }
}

#[tool_handler]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let greeting = Resource::new(RESOURCE_URI, "greeting").with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![greeting]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != RESOURCE_URI {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            "hello from rmcp 3.11.0",
            RESOURCE_URI,
        )])
        .into())
    }
}

async fn serve_stdio() -> Result<(), Box<dyn std::error::Error>> {
    let service = Echo.serve(stdio()).await?;
    service.waiting().await?;
    Ok(())
}

async fn serve_http(port: u16) -> Result<(), Box<dyn std::error::Error>> {
    let service = StreamableHttpService::new(
        || Ok(Echo),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    // Loopback only.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, router).await?;
    Ok(())
}

fn usage() -> ! {
    eprintln!("usage: rmcp3-server stdio | rmcp3-server http PORT");
    std::process::exit(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = async {
        match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["stdio"] => serve_stdio().await,
            ["http", port] => serve_http(port.parse().unwrap_or_else(|_| usage())).await,
            _ => usage(),
        }
    };
    tokio::select! {
        done = run => done,
        _ = tokio::time::sleep(MAX_LIFETIME) => Ok(()),
    }
}
