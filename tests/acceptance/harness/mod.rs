//! The harness the criteria are written against, in the spirit of the seed's `TestBridge`
//! (§5): a [`Stack`] (the adapters and what they hold: tasks, the audit log, the CUO), and
//! bridges on it, each for a tenant with a token's scopes, over stdio ([`Stdio`]) or HTTP
//! ([`Http`]). The same criterion runs over either adapter set:
//!
//! - [`Adapters::InMemory`]: the library's `App` in this process over fakes
//!   (`in_memory.rs`, the one file that wires it): no child, no store, no network;
//! - [`Adapters::Real`]: the built binary over its real stdin/stdout or HTTP on
//!   127.0.0.1:0, with SQLite in a temp data dir or Postgres (`real.rs`).
//!
//! Every frame a bridge sends is checked against the MCP schema. Tokens are RS256 JWTs
//! signed with the fixture key `tests/fixtures/keys/rsa.key`, verified by the bridge's own
//! verifier in both sets.

mod in_memory;
mod real;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fakes::Behaviour;
use crate::support::http_server::Reply;
use crate::support::{fixtures, init_params};

/// The issuer of the suite's tokens.
pub const ISSUER: &str = "https://idp.test";
/// Every scope the bridge knows.
pub const ALL_SCOPES: &str = "cyberos:cuo:read cyberos:cuo:execute cyberos:memory:read \
     cyberos:memory:write cyberos:skill:read cyberos:skill:invoke";
/// The read scopes only: the seed's "read-only token".
pub const READ_ONLY: &str = "cyberos:cuo:read cyberos:memory:read cyberos:skill:read";
/// How long a criterion waits for a state it expects.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Which adapters a criterion runs over.
#[derive(Debug, Clone)]
pub enum Adapters {
    /// Fakes behind the ports, in this process.
    InMemory,
    /// The built binary with its real adapters on `Store`.
    Real(Store),
}

/// The task store of the real adapters.
#[derive(Debug, Clone)]
pub enum Store {
    /// The embedded SQLite file in the stack's data dir.
    Sqlite,
    /// Postgres: the run's migrated database, as its app login role.
    Postgres(String),
}

impl Store {
    /// Postgres, when the Postgres tests run (`support::pg::admin_url` decides: without
    /// `DATABASE_URL` it prints a `SKIPPED` line, and fails the test when `CI` is true).
    pub fn postgres() -> Option<Store> {
        // The database is made on a runtime of its own, so off this one.
        let url = tokio::task::block_in_place(|| {
            std::thread::spawn(crate::support::pg::database_url)
                .join()
                .expect("the Postgres test database")
        });
        url.map(Store::Postgres)
    }
}

/// Where the audit log is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// The default: the embedded log (real), an in-memory log (in memory).
    Embedded,
    /// The memory REST service: a real HTTP server in this process (real), an in-memory
    /// log (in memory).
    Service,
    /// Unreachable: a `--memory-url` where nothing listens (real), a log that answers as
    /// unreachable (in memory).
    Down,
}

/// How a stack is built.
#[derive(Debug, Clone)]
pub struct Setup {
    adapters: Adapters,
    pace_ms: u64,
    memory: Memory,
    cors: Vec<String>,
    spans: bool,
    skills: Behaviour,
}

impl Setup {
    /// Workflow runs take three steps of `ms` each (default 0).
    pub fn paced(mut self, ms: u64) -> Setup {
        self.pace_ms = ms;
        self
    }

    /// Where the audit log is (default [`Memory::Embedded`]).
    pub fn memory(mut self, memory: Memory) -> Setup {
        self.memory = memory;
        self
    }

    /// HTTP bridges grant CORS to `origin` (`--cors-origin`).
    pub fn cors_origin(mut self, origin: &str) -> Setup {
        self.cors.push(origin.to_owned());
        self
    }

    /// Spans are exported where the test can read them ([`Stack::wait_span`]).
    pub fn exporting_spans(mut self) -> Setup {
        self.spans = true;
        self
    }

    /// The skill index behaves as `skills` on every call: a scripted fault, which only a
    /// fake can stage, so in memory only.
    pub fn skills(mut self, skills: Behaviour) -> Setup {
        assert!(
            matches!(self.adapters, Adapters::InMemory),
            "a scripted skill index exists in memory only"
        );
        self.skills = skills;
        self
    }

    /// Builds the stack.
    pub fn up(self) -> Stack {
        let parts = match &self.adapters {
            Adapters::InMemory => Parts::InMemory(in_memory::World::new(&self)),
            Adapters::Real(store) => Parts::Real(real::World::new(&self, store)),
        };
        Stack {
            tenants: HashMap::new().into(),
            parts,
        }
    }
}

/// The adapters and what they hold, shared by the bridges built on it.
pub struct Stack {
    tenants: std::sync::Mutex<HashMap<String, String>>,
    parts: Parts,
}

enum Parts {
    InMemory(in_memory::World),
    Real(real::World),
}

impl Stack {
    /// A stack of `adapters`, to be set up.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(adapters: Adapters) -> Setup {
        Setup {
            adapters,
            pace_ms: 0,
            memory: Memory::Embedded,
            cors: Vec::new(),
            spans: false,
            skills: Behaviour::Answer,
        }
    }

    /// The tenant id of `label` on this stack: a fresh UUID per label, so stacks sharing
    /// one Postgres database never see each other's tasks.
    pub fn tenant(&self, label: &str) -> String {
        let mut tenants = self.tenants.lock().unwrap();
        tenants
            .entry(label.to_owned())
            .or_insert_with(random_tenant)
            .clone()
    }

    /// A bearer token for tenant `label` with `scopes`.
    pub fn token(&self, label: &str, scopes: &str) -> String {
        token(&self.tenant(label), scopes)
    }

    /// A bridge on this stack, for tenant `a` with every scope unless told otherwise.
    pub fn bridge(&self) -> BridgeSetup<'_> {
        BridgeSetup {
            stack: self,
            tenant: "a".into(),
            scopes: ALL_SCOPES.into(),
            initialized: true,
            listen: None,
        }
    }

    /// How many CUO workers are alive: the fake's unfinished runs (in memory), or the CUO
    /// children alive, the one for short calls included (real). Criteria compare counts
    /// before and after.
    pub fn cuo_alive(&self) -> usize {
        match &self.parts {
            Parts::InMemory(w) => w.cuo_alive(),
            Parts::Real(w) => w.cuo_alive(),
        }
    }

    /// Whether anything reached the CUO: a call to the fake (in memory), a child started
    /// (real).
    pub fn cuo_touched(&self) -> bool {
        match &self.parts {
            Parts::InMemory(w) => w.cuo_touched(),
            Parts::Real(w) => w.cuo_touched(),
        }
    }

    /// What the upstreams put in their error bodies that must never reach a client.
    pub fn upstream_secrets(&self) -> Vec<&'static str> {
        match &self.parts {
            Parts::InMemory(_) => Vec::new(),
            Parts::Real(w) => w.upstream_secrets(),
        }
    }

    /// The first exported span `what` accepts, waiting for it (the stack must be set up
    /// with [`Setup::exporting_spans`]; over the real adapters, spans are flushed when a
    /// bridge disconnects).
    pub async fn wait_span(&self, what: impl Fn(&Span) -> bool) -> Span {
        match &self.parts {
            Parts::InMemory(w) => w.wait_span(what).await,
            Parts::Real(w) => tokio::task::block_in_place(|| w.wait_span(what)),
        }
    }
}

/// A bridge about to start.
pub struct BridgeSetup<'s> {
    stack: &'s Stack,
    tenant: String,
    scopes: String,
    initialized: bool,
    listen: Option<String>,
}

impl BridgeSetup<'_> {
    /// Its token is for tenant `label` of the stack.
    pub fn tenant(mut self, label: &str) -> Self {
        self.tenant = label.to_owned();
        self
    }

    /// Its token carries `scopes` (space-separated).
    pub fn scopes(mut self, scopes: &str) -> Self {
        self.scopes = scopes.to_owned();
        self
    }

    /// The stdio bridge is left before `initialize`.
    pub fn uninitialized(mut self) -> Self {
        self.initialized = false;
        self
    }

    /// The HTTP bridge binds `addr` (`--listen`; real adapters only: in memory nothing
    /// binds).
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = Some(addr.to_owned());
        self
    }

    /// The bridge over stdio, its token the stdio token.
    pub async fn stdio(self) -> Stdio {
        let token = self.stack.token(&self.tenant, &self.scopes);
        let conn = match &self.stack.parts {
            Parts::InMemory(w) => Conn::InMemory(w.stdio(token)),
            Parts::Real(w) => Conn::Real(w.stdio(&token)),
        };
        let mut stdio = Stdio { conn, next_id: 1 };
        if self.initialized {
            stdio.initialize().await;
        }
        stdio
    }

    /// The bridge over HTTP; its token is [`Http::token`].
    pub async fn http(self) -> Http {
        let token = self.stack.token(&self.tenant, &self.scopes);
        let server = match (&self.stack.parts, &self.listen) {
            (Parts::InMemory(w), None) => Server::InMemory(w.http()),
            (Parts::InMemory(_), Some(_)) => panic!("an in-memory bridge binds no address"),
            (Parts::Real(w), listen) => Server::Real(w.http(listen.as_deref())),
        };
        Http { server, token }
    }
}

/// A bridge over stdio.
pub struct Stdio {
    conn: Conn,
    next_id: i64,
}

enum Conn {
    InMemory(in_memory::Stdio),
    Real(real::Stdio),
}

impl Stdio {
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

/// A bridge over HTTP.
pub struct Http {
    server: Server,
    token: String,
}

enum Server {
    InMemory(in_memory::Http),
    Real(real::Http),
}

impl Http {
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

    /// POSTs `message` to `/mcp` as an MCP client does, with `token` and more `headers`.
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
        self.send("POST", "/mcp", &all, Some(message.to_string()))
            .await
    }

    /// A request as `token`; its response frame, checked against the schema.
    pub async fn rpc(&self, token: &str, method: &str, params: Value) -> Value {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let reply = self.post(Some(token), &message, &[]).await;
        let frame = reply.frame();
        let mut requests = crate::support::schema::Requests::default();
        requests.sent(&message);
        requests.check(&frame);
        frame
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

/// An exported span: its name, trace id and attributes as text.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub trace_id: String,
    pub attributes: BTreeMap<String, String>,
}

impl Span {
    /// The attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// A bearer token for `tenant` with `scopes`, signed by the fixture key, valid ten minutes.
pub fn token(tenant: &str, scopes: &str) -> String {
    let now = chrono::Utc::now().timestamp();
    let claims = json!({"iss": ISSUER, "aud": "cyberos-mcp-bridge", "sub": "alice",
                        "tenant_id": tenant, "scope": scopes, "iat": now, "exp": now + 600});
    let key = std::fs::read(fixtures().join("keys/rsa.key")).unwrap();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_rsa_pem(&key).unwrap(),
    )
    .unwrap()
}

/// A random version-4 UUID, hyphenated.
fn random_tenant() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).unwrap();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = data_encoding::HEXLOWER.encode(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The text of a tool result's first content block, parsed as JSON.
pub fn text_json(frame: &Value) -> Value {
    let text = frame["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {frame}"));
    serde_json::from_str(text).unwrap_or_else(|_| panic!("JSON text: {text}"))
}
