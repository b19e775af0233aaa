//! A bridge over HTTP: the library's routes answering requests handed to them, or the
//! binary serving on a port.

use serde_json::{Value, json};

use super::{in_memory, real};
use crate::support::http_server::Reply;
use crate::support::schema::Requests;

/// A bridge over HTTP.
pub struct Http {
    server: Server,
    token: String,
}

pub(super) enum Server {
    InMemory(in_memory::Http),
    Real(real::Http),
}

impl Http {
    pub(super) fn new(server: Server, token: String) -> Http {
        Http { server, token }
    }

    /// The token of the tenant and scopes the bridge was set up with.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Sends `method path` with `headers` and `body` as they are; the reply, read whole.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Reply {
        match &self.server {
            Server::InMemory(s) => s.send(method, path, headers, body).await,
            Server::Real(s) => s.send(method, path, headers, body).await,
        }
    }

    /// POSTs `message` to `/mcp` as an MCP client does, with `token` and more `headers`;
    /// the reply, its frame checked against the schema.
    pub async fn post(
        &self,
        token: Option<&str>,
        message: &Value,
        headers: &[(&str, &str)],
    ) -> Reply {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut all = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        if let Some(b) = &bearer {
            all.push(("authorization", b.as_str()));
        }
        all.extend_from_slice(headers);
        let reply = self
            .send("POST", "/mcp", &all, Some(message.to_string()))
            .await;
        // Every body but a 202's (a notification's) is a JSON-RPC frame.
        if reply.status != 202 {
            let mut requests = Requests::default();
            requests.sent(message);
            requests.check(&reply.frame());
        }
        reply
    }

    /// A request as `token`; its response frame.
    pub async fn rpc(&self, token: &str, method: &str, params: Value) -> Value {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.post(Some(token), &message, &[]).await.frame()
    }

    /// `tools/call` as `token`, confirmed by the seed's flag.
    pub async fn call_confirmed(&self, token: &str, name: &str, arguments: Value) -> Value {
        self.rpc(
            token,
            "tools/call",
            json!({"name": name, "arguments": arguments,
                   "_meta": {"mcp/sampling/elicit_confirm": true}}),
        )
        .await
    }

    /// `tools/call` as `token`.
    pub async fn call_tool(&self, token: &str, name: &str, arguments: Value) -> Value {
        self.rpc(
            token,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }

    /// The bridge's process (real adapters only).
    pub fn process_id(&self) -> i32 {
        match &self.server {
            Server::Real(s) => s.process_id(),
            Server::InMemory(_) => panic!("an in-memory bridge has no process of its own"),
        }
    }

    /// The address the bridge listens on (real adapters only).
    pub fn address(&self) -> std::net::SocketAddr {
        match &self.server {
            Server::Real(s) => s.address(),
            Server::InMemory(_) => panic!("an in-memory bridge listens nowhere"),
        }
    }

    /// A browser's CORS preflight of a POST to `/mcp` from `origin`.
    pub async fn preflight(&self, origin: &str) -> Reply {
        let headers = [
            ("origin", origin),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "authorization, content-type",
            ),
        ];
        self.send("OPTIONS", "/mcp", &headers, None).await
    }
}
