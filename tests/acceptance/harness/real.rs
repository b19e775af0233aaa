//! The real adapter set: the built binary, started as an operator would (a key source, a
//! data dir, flags), over its real stdin/stdout or Streamable HTTP on 127.0.0.1:0. The
//! store is the embedded SQLite file of the stack's data dir, or Postgres; the CUO is the
//! bundled runner as child processes (each recording its pid, so the criteria can see
//! them start and die); the memory service a real HTTP server in this process, or none
//! (the embedded log). The drivers are the integration suite's (`support::binary`,
//! `support::http_server`), which wait on threads: each call is made in
//! `block_in_place`, on the criteria's multi-threaded runtime.

use std::time::Duration;

use serde_json::Value;

use super::{ISSUER, Memory, PATIENCE, Setup, Span, Store};
use crate::support::binary::Bridge;
use crate::support::collector::{Collector, attr, hex};
use crate::support::cuo_children::{child_pids, recording_runner};
use crate::support::http_server::{self, Reply, Server};
use crate::support::memory_server::{Break, ERROR_BODY_SECRETS, MemoryServer, refused_url};
use crate::support::{alive, fixtures};

/// The data dir, the upstreams and the flags every bridge of the stack starts with.
pub struct World {
    dir: tempfile::TempDir,
    args: Vec<String>,
    cors: Vec<String>,
    memory: Memory,
    _memory_service: Option<MemoryServer>,
    collector: Option<Collector>,
}

impl World {
    pub fn new(setup: &Setup, store: &Store) -> World {
        let dir = tempfile::tempdir().unwrap();
        let key = fixtures().join("keys/rsa.pub");
        let mut args: Vec<String> = [
            "--jwt-public-key",
            key.to_str().unwrap(),
            "--jwt-issuer",
            ISSUER,
            "--cuo-command",
            &recording_runner(setup.pace_ms, &dir.path().join("pids")),
        ]
        .map(str::to_owned)
        .to_vec();
        if let Store::Postgres(url) = store {
            args.extend(["--database-url".to_owned(), url.clone()]);
        }
        // A memory service whose error bodies carry internals and secrets: the bridge
        // must pass none of them on.
        let memory_service = (setup.memory == Memory::Service).then(|| {
            let service = MemoryServer::start();
            service.break_rule(Break::InternalsInErrors);
            service
        });
        let memory_url = match (&memory_service, setup.memory) {
            (Some(service), _) => Some(service.url.clone()),
            (None, Memory::Down) => Some(refused_url()),
            (None, _) => None,
        };
        if let Some(url) = memory_url {
            args.extend(["--memory-url".to_owned(), url]);
        }
        let collector = setup.spans.then(Collector::start);
        if let Some(c) = &collector {
            args.extend(["--otlp-endpoint".to_owned(), c.endpoint.clone()]);
        }
        World {
            dir,
            args,
            cors: setup.cors.clone(),
            memory: setup.memory,
            _memory_service: memory_service,
            collector,
        }
    }

    /// The binary on stdio, its token in `CYBEROS_TOKEN`.
    pub fn stdio(&self, token: &str) -> Stdio {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let bridge = tokio::task::block_in_place(|| {
            Bridge::spawn_at(self.dir.path(), &args, &[("CYBEROS_TOKEN", token)])
        });
        Stdio { bridge }
    }

    /// The binary serving HTTP on `listen` (default 127.0.0.1:0), with the stack's
    /// `--cors-origin`s.
    pub fn http(&self, listen: Option<&str>) -> Http {
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        for origin in &self.cors {
            args.extend(["--cors-origin", origin]);
        }
        if let Some(addr) = listen {
            args.extend(["--listen", addr]);
        }
        let server = tokio::task::block_in_place(|| Server::launch(self.dir.path(), &args, &[]));
        Http { server }
    }

    fn pids(&self) -> Vec<i32> {
        child_pids(&self.dir.path().join("pids"))
    }

    pub fn cuo_alive(&self) -> usize {
        self.pids().into_iter().filter(|p| alive(*p)).count()
    }

    pub fn cuo_touched(&self) -> bool {
        !self.pids().is_empty()
    }

    pub fn upstream_secrets(&self) -> Vec<&'static str> {
        match self.memory {
            Memory::Service => [&ERROR_BODY_SECRETS[..], &["127.0.0.1"]].concat(),
            Memory::Down => vec!["127.0.0.1"],
            Memory::Embedded => Vec::new(),
        }
    }

    pub fn wait_span(&self, what: impl Fn(&Span) -> bool) -> Span {
        let collector = self
            .collector
            .as_ref()
            .expect("a stack set up with exporting_spans");
        let span = |s: &opentelemetry_proto::tonic::trace::v1::Span| Span {
            name: s.name.clone(),
            trace_id: hex(&s.trace_id),
            attributes: s
                .attributes
                .iter()
                .filter_map(|kv| Some((kv.key.clone(), attr(s, &kv.key)?)))
                .collect(),
        };
        span(&collector.wait_for(PATIENCE, |s| what(&span(s))).span)
    }
}

/// The binary on stdio.
pub struct Stdio {
    bridge: Bridge,
}

impl Stdio {
    pub fn send(&mut self, message: &Value) {
        tokio::task::block_in_place(|| self.bridge.send(message));
    }

    pub fn recv(&mut self) -> Value {
        tokio::task::block_in_place(|| self.bridge.recv())
    }

    /// Closes stdin and waits for the exit, which must be clean.
    pub fn disconnect(self) {
        let status = tokio::task::block_in_place(|| self.bridge.close());
        assert!(status.success(), "the bridge exited with {status}");
    }

    pub fn process_id(&self) -> i32 {
        self.bridge.pid()
    }
}

/// The binary serving HTTP.
pub struct Http {
    server: Server,
}

impl Http {
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .server
            .client
            .request(method, self.server.url(path))
            .timeout(Duration::from_secs(30));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(body) = body {
            req = req.body(body);
        }
        http_server::read(req.send().await.expect("a response")).await
    }

    pub fn process_id(&self) -> i32 {
        self.server.pid()
    }

    pub fn address(&self) -> std::net::SocketAddr {
        self.server
            .base
            .trim_start_matches("http://")
            .parse()
            .unwrap()
    }
}
