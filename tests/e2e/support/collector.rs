//! A real OTLP/gRPC trace receiver for the export tests (the generated collector service
//! on a tonic server), on a thread and runtime of its own, bound to 127.0.0.1:0; and a
//! "collector" that accepts connections and never answers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;

/// A span as received, with its resource's `service.name`.
#[derive(Clone, Debug)]
pub struct Received {
    pub span: Span,
    pub service: String,
}

#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<Received>>>);

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut got = self.0.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| value_text(kv.value.as_ref()?.value.as_ref()?))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    got.push(Received {
                        span,
                        service: service.clone(),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A running receiver.
pub struct Collector {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    sink: Sink,
}

impl Collector {
    pub fn start() -> Collector {
        let sink = Sink::default();
        let service = TraceServiceServer::new(sink.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                    .await
                    .unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        Collector {
            endpoint: format!("http://{addr}"),
            sink,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.sink.0.lock().unwrap().clone()
    }

    /// The first span matching `what`, waiting up to `within`.
    pub fn wait_for(&self, within: Duration, what: impl Fn(&Span) -> bool) -> Received {
        let deadline = Instant::now() + within;
        loop {
            if let Some(r) = self.spans().into_iter().find(|r| what(&r.span)) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "no such span among {:#?}",
                self.spans()
                    .iter()
                    .map(|r| &r.span.name)
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// An address that accepts TCP connections and never says a word (a hung collector).
pub fn black_hole() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    format!("http://{addr}")
}

fn value_text(v: &AnyValue) -> Option<String> {
    match v {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        AnyValue::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A span attribute as text (strings and integers).
pub fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| value_text(kv.value.as_ref()?.value.as_ref()?))
}

/// Lowercase hex of an id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
