//! The in-memory adapter set: the library's `App` in this process, over fakes, served by
//! the library's own transports: `stdio::serve` over an in-memory pipe, and the HTTP
//! `router` answering requests handed to it directly (`oneshot`). No child, no store, no
//! network. This file is the only one that wires the library; what each port gets:
//!
//! - tasks: `InMemoryTasks`; CUO: `PacedCuo` (a scripted CUO whose runs take time);
//! - memory: `InMemoryAudit` (reachable or down); skills: `StaticSkills`;
//! - confirmation ledger: `InMemoryLedger`; clients' answers and approvals: none
//!   (`Unavailable`, as when the product's store cannot be opened);
//! - tokens: the product's `JwtVerifier` with the fixture public key; clock: the system's;
//! - spans: the SDK's in-memory exporter behind the product's OpenTelemetry layer.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;

use cyberos_mcp_bridge::adapters::jwt::{Issuer, JwtVerifier, VerifyingKey};
use cyberos_mcp_bridge::adapters::system_clock::SystemClock;
use cyberos_mcp_bridge::adapters::unavailable::Unavailable;
use cyberos_mcp_bridge::app::edge::http::{
    HttpSettings, Limits, OriginPattern, OriginPolicy, PageTrust, Routes, SessionKey, router,
};
use cyberos_mcp_bridge::app::service::identity::{Identity, StdioToken};
use cyberos_mcp_bridge::app::telemetry::otel_layer;
use cyberos_mcp_bridge::app::{App, Settings};
use cyberos_mcp_bridge::domain::Upstream;
use cyberos_mcp_bridge::ports::{Clock, Ports, TokenVerifier};

use super::{ISSUER, Memory, PATIENCE, Setup, Span};
use crate::support::fakes::{InMemoryAudit, InMemoryLedger, InMemoryTasks, PacedCuo, StaticSkills};
use crate::support::fixtures;
use crate::support::http_server::Reply;
use crate::support::in_process::Client;

/// The address HTTP requests are made out to: a loopback bind, as a local bridge has.
const HOST: &str = "127.0.0.1:3000";

/// The fakes, shared by every bridge on the stack.
pub struct World {
    ports: Ports,
    cuo: Arc<PacedCuo>,
    verifier: Arc<dyn TokenVerifier>,
    cors: Vec<OriginPattern>,
    spans: Option<Spans>,
}

/// Spans exported to memory, from the subscriber this thread uses while the stack lives
/// (the in-memory criteria run on a single-threaded runtime, so every handler does).
///
/// `tracing` caches whether a callsite is wanted when the callsite is first hit, and with
/// a single dispatcher registered it asks only the hitting thread's own: a span first hit
/// by another test's thread would be cached as unwanted. A second registered dispatcher
/// (`_second`) makes it ask every one; the cache is rebuilt as each bridge starts.
struct Spans {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _default: tracing::subscriber::DefaultGuard,
    _second: tracing::Dispatch,
}

impl World {
    pub fn new(setup: &Setup) -> World {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let cuo = Arc::new(PacedCuo::new(
            Duration::from_millis(setup.pace_ms),
            Arc::clone(&clock),
        ));
        let memory = match setup.memory {
            Memory::Embedded | Memory::Service => InMemoryAudit::default(),
            Memory::Down => InMemoryAudit::unreachable(),
        };
        let none = |what: &str| Unavailable::new(Upstream::TaskStore, what);
        let ports = Ports {
            tasks: Arc::new(InMemoryTasks::default()),
            cuo: Arc::clone(&cuo) as _,
            memory: Arc::new(memory),
            skills: Arc::new(StaticSkills::new(setup.skills)),
            clock: Arc::clone(&clock),
            ledger: Arc::new(InMemoryLedger::default()),
            answers: Arc::new(none("no clients' answers in memory")),
            approvals: Arc::new(none("no approvals in memory")),
        };
        let pem = std::fs::read(fixtures().join("keys/rsa.pub")).unwrap();
        let issuer = Issuer::with_keys(ISSUER, vec![VerifyingKey::from_pem(&pem).unwrap()]);
        let verifier = Arc::new(JwtVerifier::new(vec![issuer], "cyberos-mcp-bridge", clock));
        let cors = setup
            .cors
            .iter()
            .map(|o| OriginPattern::parse(o).unwrap())
            .collect();
        let spans = setup.spans.then(|| {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            let subscriber =
                tracing_subscriber::registry().with(otel_layer(provider.tracer("acceptance")));
            let second = tracing::Dispatch::new(tracing_subscriber::registry());
            Spans {
                exporter,
                provider,
                _default: tracing::subscriber::set_default(subscriber),
                _second: second,
            }
        });
        World {
            ports,
            cuo,
            verifier,
            cors,
            spans,
        }
    }

    fn app(&self, stdio: StdioToken) -> App {
        if self.spans.is_some() {
            tracing::callsite::rebuild_interest_cache();
        }
        let identity = Identity::new(Arc::clone(&self.verifier), stdio);
        App::new(self.ports.clone(), Settings::default(), identity)
    }

    /// A bridge over an in-memory pipe whose stdio token is `token`, its background work
    /// (leases, sweeps) started as the binary starts it.
    pub fn stdio(&self, token: String) -> Stdio {
        let app = self.app(StdioToken::Literal(token));
        let stop = CancellationToken::new();
        app.start_background(stop.clone());
        Stdio {
            client: Client::connect(app.clone()),
            app,
            stop,
        }
    }

    /// The HTTP routes of a bridge on a loopback bind.
    pub fn http(&self) -> Http {
        let settings = HttpSettings {
            public_url: format!("http://{HOST}/mcp"),
            policy: OriginPolicy {
                loopback: true,
                public_origin: format!("http://{HOST}"),
                cors: self.cors.clone(),
            },
            authorization_servers: vec![ISSUER.into()],
            limits: Limits::default(),
            sessions: SessionKey::new(&[7; 32]),
            approval_trust: PageTrust::None,
        };
        let app = self.app(StdioToken::None);
        Http {
            routes: router(app, settings, CancellationToken::new()),
        }
    }

    pub fn cuo_alive(&self) -> usize {
        self.cuo.live_runs()
    }

    pub fn cuo_touched(&self) -> bool {
        self.cuo.calls() > 0
    }

    pub async fn wait_span(&self, what: impl Fn(&Span) -> bool) -> Span {
        let spans = self
            .spans
            .as_ref()
            .expect("a stack set up with exporting_spans");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            spans.provider.force_flush().unwrap();
            let found = spans
                .exporter
                .get_finished_spans()
                .unwrap()
                .into_iter()
                .map(|s| Span {
                    name: s.name.to_string(),
                    trace_id: s.span_context.trace_id().to_string(),
                    attributes: s
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.as_str().to_owned(), kv.value.as_str().into_owned()))
                        .collect(),
                })
                .find(&what);
            if let Some(span) = found {
                return span;
            }
            assert!(tokio::time::Instant::now() < deadline, "no such span");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A bridge on the library's stdio transport.
pub struct Stdio {
    client: Client,
    app: App,
    stop: CancellationToken,
}

impl Stdio {
    pub async fn send(&mut self, message: Value) {
        self.client.send(message).await;
    }

    pub async fn recv(&mut self) -> Value {
        self.client.recv().await
    }

    /// Closes the pipe; once the transport has stopped, waits for the runs to end, as the
    /// binary does at EOF.
    pub async fn disconnect(self) {
        self.client.finish().await;
        self.app.runner().drain().await;
        self.stop.cancel();
    }
}

/// A bridge's HTTP routes.
pub struct Http {
    routes: Routes,
}

impl Http {
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Reply {
        let mut req = axum::http::Request::builder().method(method).uri(path);
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req = req.header("host", HOST);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(axum::body::Body::from(body.unwrap_or_default()))
            .unwrap();
        let resp = self.routes.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        Reply {
            status,
            headers,
            text: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}
