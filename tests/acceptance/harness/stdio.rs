//! A bridge over stdio: the library's transport over an in-memory pipe, or the binary's
//! real stdin and stdout.

use std::time::Duration;

use serde_json::{Value, json};

use super::{PATIENCE, in_memory, real};
use crate::support::init_params;

/// A bridge over stdio.
pub struct Stdio {
    conn: Conn,
    next_id: i64,
}

pub(super) enum Conn {
    InMemory(in_memory::Stdio),
    Real(real::Stdio),
}

impl Stdio {
    pub(super) fn new(conn: Conn) -> Stdio {
        Stdio { conn, next_id: 1 }
    }

    /// Sends `message` as it is.
    pub async fn send(&mut self, message: Value) {
        match &mut self.conn {
            Conn::InMemory(c) => c.send(message).await,
            Conn::Real(c) => c.send(&message),
        }
    }

    /// The next frame the bridge sends.
    pub async fn recv(&mut self) -> Value {
        match &mut self.conn {
            Conn::InMemory(c) => c.recv().await,
            Conn::Real(c) => c.recv(),
        }
    }

    /// Sends a request with a fresh id and returns its response (frames in between, such
    /// as progress, are checked and passed over).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let frame = self.recv().await;
            if frame.get("id") == Some(&id) && frame.get("method").is_none() {
                return frame;
            }
        }
    }

    /// `initialize` as the suite's client (sampling declared, no elicitation, a name not
    /// among the hosts that never poll), then `notifications/initialized`; the result.
    pub async fn initialize(&mut self) -> Value {
        let resp = self.request("initialize", init_params("2025-11-25")).await;
        assert_eq!(resp["result"]["protocolVersion"], "2025-11-25", "{resp}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        resp["result"].clone()
    }

    /// `tools/call` of `name` with `arguments`; the response frame.
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// `tools/call` of `name` with `arguments`, confirmed by the seed's flag.
    pub async fn call_confirmed(&mut self, name: &str, arguments: Value) -> Value {
        self.request(
            "tools/call",
            json!({"name": name, "arguments": arguments,
                   "_meta": {"mcp/sampling/elicit_confirm": true}}),
        )
        .await
    }

    /// `tools/list`; the tools.
    pub async fn list_tools(&mut self) -> Vec<Value> {
        let resp = self.request("tools/list", json!({})).await;
        resp["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("a tool list: {resp}"))
            .clone()
    }

    /// `tasks/get` through the seed's door (`{id}`); the response frame.
    pub async fn tasks_get(&mut self, id: &str) -> Value {
        self.request("tasks/get", json!({"id": id})).await
    }

    /// Polls `tasks/get` until the task is `status`; the seed-shaped task.
    pub async fn wait_status(&mut self, id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let got = self.tasks_get(id).await;
            if got["result"]["status"] == status {
                return got["result"].clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} never became {status}: {got}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The host goes away: stdin closes, and the bridge finishes its running tasks (as
    /// the contract's EOF rule says) and stops.
    pub async fn disconnect(self) {
        match self.conn {
            Conn::InMemory(c) => c.disconnect().await,
            Conn::Real(c) => c.disconnect(),
        }
    }

    /// The bridge's process (real adapters only).
    pub fn process_id(&self) -> i32 {
        match &self.conn {
            Conn::Real(c) => c.process_id(),
            Conn::InMemory(_) => panic!("an in-memory bridge has no process of its own"),
        }
    }
}
