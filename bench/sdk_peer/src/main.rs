//! `sdk-peer ADDR TEXT_FILE`: one tool, `list_skills`, whose result is the text in
//! TEXT_FILE (the bridge's own `list_skills` answer, so both send the same bytes), served
//! by the official Rust SDK's Streamable HTTP service in stateless JSON mode on ADDR.
//! Logs `listening on ADDR`.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerInfo};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use std::sync::Arc;

#[derive(Clone)]
struct Peer {
    text: Arc<str>,
    tool_router: ToolRouter<Peer>,
}

#[tool_router]
impl Peer {
    #[tool(description = "The skills listing")]
    fn list_skills(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(
            self.text.to_string(),
        )]))
    }
}

#[tool_handler]
impl ServerHandler for Peer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".into());
    let text: Arc<str> = match args.next() {
        Some(path) => std::fs::read_to_string(path)?.into(),
        None => "{}".into(),
    };
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    let service = StreamableHttpService::new(
        move || {
            Ok(Peer {
                text: Arc::clone(&text),
                tool_router: Peer::tool_router(),
            })
        },
        LocalSessionManager::default().into(),
        config,
    );
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await
}
