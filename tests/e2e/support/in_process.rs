//! The library's stdio transport over an in-memory pipe, with fakes behind the ports: for
//! the cases the release binary must not be able to stage (a panicking handler, a slow
//! upstream under our control). Every frame is checked against the MCP schema.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio_util::sync::CancellationToken;

use cyberos_mcp_bridge::adapters::unavailable::Unavailable;
use cyberos_mcp_bridge::app::edge::stdio;
use cyberos_mcp_bridge::app::service::identity::{Identity, StdioToken};
use cyberos_mcp_bridge::app::{App, Settings};
use cyberos_mcp_bridge::domain::{Timestamp, Upstream};
use cyberos_mcp_bridge::ports::{Ports, TokenVerifier};

use crate::support::fakes::{
    Behaviour, FixedClock, InMemoryAudit, InMemoryLedger, Phase, ScriptedCuo, StaticSkills,
    StaticTokens,
};
use crate::support::init_params;
use crate::support::schema::Requests;

pub(crate) struct Client {
    pub(crate) write: tokio::io::WriteHalf<DuplexStream>,
    pub(crate) read: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    pub(crate) requests: Requests,
    pub(crate) server: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Where the skill index's latest call is.
    pub(crate) skills: Option<tokio::sync::watch::Receiver<Phase>>,
}

impl Client {
    pub(crate) async fn start(skills: Behaviour, settings: Settings) -> Client {
        Client::start_as(skills, settings, "full").await
    }

    /// A client whose stdio token is `token` (see `StaticTokens`).
    pub(crate) async fn start_as(skills: Behaviour, settings: Settings, token: &str) -> Client {
        let skills = Arc::new(StaticSkills::new(skills));
        let phase = skills.phase.subscribe();
        let ports = Ports {
            tasks: Arc::new(Unavailable::new(
                Upstream::TaskStore,
                "no task store in this test",
            )),
            cuo: Arc::new(ScriptedCuo),
            memory: Arc::new(InMemoryAudit::default()),
            skills,
            clock: Arc::new(FixedClock(Timestamp::from_unix_millis(0))),
            ledger: Arc::new(InMemoryLedger::default()),
            answers: Arc::new(Unavailable::new(
                Upstream::TaskStore,
                "stdio answers in memory",
            )),
            approvals: Arc::new(Unavailable::new(
                Upstream::TaskStore,
                "no approvals in this test",
            )),
        };
        let mut c = Client::start_on(
            ports,
            settings,
            Arc::new(StaticTokens),
            StdioToken::Literal(token.into()),
        )
        .await;
        c.skills = Some(phase);
        c
    }

    /// A client of an `App` over `ports`, its stdio token `token` checked by `verifier`;
    /// initialized.
    pub(crate) async fn start_on(
        ports: Ports,
        settings: Settings,
        verifier: Arc<dyn TokenVerifier>,
        token: StdioToken,
    ) -> Client {
        let identity = Identity::new(verifier, token);
        let mut c = Client::connect(App::new(ports, settings, identity));
        let init = c.request(1, "initialize", init_params("2025-11-25")).await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        c
    }

    /// A client of `app` served over a fresh pipe, not yet initialized.
    pub(crate) fn connect(app: App) -> Client {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let server = tokio::spawn(stdio::serve(
            app,
            server_read,
            server_write,
            CancellationToken::new(),
        ));
        let (read, write) = tokio::io::split(client);
        Client {
            write,
            read: BufReader::new(read).lines(),
            requests: Requests::default(),
            server,
            skills: None,
        }
    }

    /// Closes the pipe and awaits the server, which must end cleanly at EOF (a panic in
    /// its task fails here).
    pub(crate) async fn finish(self) {
        let Client {
            write,
            read,
            server,
            ..
        } = self;
        drop((write, read));
        let served = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server stops at EOF");
        match served {
            Ok(io) => io.expect("the server ends cleanly"),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    pub(crate) async fn send(&mut self, msg: Value) {
        self.requests.sent(&msg);
        self.write
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
    }

    /// Waits (up to 5 s) until the skill index's latest call is in a phase `until` accepts,
    /// and returns that phase.
    pub(crate) async fn skills_phase(&mut self, until: impl Fn(Phase) -> bool) -> Phase {
        let skills = self.skills.as_mut().expect("a client over StaticSkills");
        let seen = tokio::time::timeout(Duration::from_secs(5), skills.wait_for(|p| until(*p)))
            .await
            .map(|p| *p.unwrap());
        seen.unwrap_or_else(|_| panic!("the skill index stayed {:?}", *skills.borrow()))
    }

    pub(crate) async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.read.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let frame: Value = serde_json::from_str(&line).unwrap();
        self.requests.check(&frame);
        frame
    }

    pub(crate) async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.recv().await
    }

    pub(crate) async fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.request(id, "tools/call", json!({"name": tool, "arguments": args}))
            .await
    }
}
