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
//! `stdio.rs` and `http.rs` are the clients, each over either set. Every frame a bridge
//! sends is checked against the MCP schema. Tokens are RS256 JWTs
//! signed with the fixture key `tests/fixtures/keys/rsa.key`, verified by the bridge's own
//! verifier in both sets.

mod http;
mod in_memory;
mod real;
mod stdio;

pub use http::Http;
pub use stdio::Stdio;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fakes::Behaviour;
use crate::support::fixtures;

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
        // The database is made on a runtime of its own, so off this one, on a thread
        // named as the test (the gate names it when it skips).
        let test = std::thread::current().name().map(str::to_owned);
        let url = tokio::task::block_in_place(|| {
            let mut thread = std::thread::Builder::new();
            if let Some(name) = test {
                thread = thread.name(name);
            }
            let made = thread.spawn(crate::support::pg::database_url).unwrap();
            made.join().expect("the Postgres test database")
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
        let mut stdio = match &self.stack.parts {
            Parts::InMemory(w) => Stdio::new(stdio::Conn::InMemory(w.stdio(token))),
            Parts::Real(w) => Stdio::new(stdio::Conn::Real(w.stdio(&token))),
        };
        if self.initialized {
            stdio.initialize().await;
        }
        stdio
    }

    /// The bridge over HTTP; its token is [`Http::token`].
    pub async fn http(self) -> Http {
        let token = self.stack.token(&self.tenant, &self.scopes);
        let server = match (&self.stack.parts, &self.listen) {
            (Parts::InMemory(w), None) => http::Server::InMemory(w.http()),
            (Parts::InMemory(_), Some(_)) => panic!("an in-memory bridge binds no address"),
            (Parts::Real(w), listen) => http::Server::Real(w.http(listen.as_deref())),
        };
        Http::new(server, token)
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
