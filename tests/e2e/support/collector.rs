//! Real OTLP receivers for the export tests, each on a thread and runtime of its own,
//! bound to 127.0.0.1:0: the generated collector services (traces and metrics) on a tonic
//! server (OTLP/gRPC), and the same messages decoded with prost from the bodies POSTed to
//! `/v1/traces` and `/v1/metrics` (OTLP/HTTP); and a "collector" that accepts connections
//! and never answers.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
use opentelemetry_proto::tonic::trace::v1::Span;

/// A span as received, with its resource's `service.name`.
#[derive(Clone, Debug)]
pub struct Received {
    pub span: Span,
    pub service: String,
}

/// A metric data point as received: its metric's name, its attributes as text, and its
/// value (a sum's or gauge's value, a histogram's count).
#[derive(Clone, Debug)]
pub struct Point {
    pub metric: String,
    pub attrs: Vec<(String, String)>,
    pub value: f64,
}

impl Point {
    /// The attribute `key` as text.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Sink {
    spans: Arc<Mutex<Vec<Received>>>,
    /// Notified when spans arrive.
    new_spans: Arc<Condvar>,
    points: Arc<Mutex<Vec<Point>>>,
    /// Notified when points arrive.
    new_points: Arc<Condvar>,
    /// The `Content-Type` of each OTLP/HTTP request.
    content_types: Arc<Mutex<Vec<String>>>,
}

fn text_attrs(attrs: &[KeyValue]) -> Vec<(String, String)> {
    attrs
        .iter()
        .filter_map(|kv| {
            Some((
                kv.key.clone(),
                value_text(kv.value.as_ref()?.value.as_ref()?)?,
            ))
        })
        .collect()
}

impl Sink {
    fn take_spans(&self, request: ExportTraceServiceRequest) {
        let mut got = self.spans.lock().unwrap();
        for rs in request.resource_spans {
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
        self.new_spans.notify_all();
    }

    fn take_metrics(&self, request: ExportMetricsServiceRequest) {
        let mut got = self.points.lock().unwrap();
        let metrics = request
            .resource_metrics
            .into_iter()
            .flat_map(|rm| rm.scope_metrics)
            .flat_map(|sm| sm.metrics);
        for metric in metrics {
            let points: Vec<(Vec<(String, String)>, f64)> = match metric.data {
                Some(Data::Sum(sum)) => number_points(sum.data_points),
                Some(Data::Gauge(gauge)) => number_points(gauge.data_points),
                Some(Data::Histogram(h)) => h
                    .data_points
                    .into_iter()
                    .map(|p| (text_attrs(&p.attributes), p.count as f64))
                    .collect(),
                _ => Vec::new(),
            };
            got.extend(points.into_iter().map(|(attrs, value)| Point {
                metric: metric.name.clone(),
                attrs,
                value,
            }));
        }
        self.new_points.notify_all();
    }
}

fn number_points(
    points: Vec<opentelemetry_proto::tonic::metrics::v1::NumberDataPoint>,
) -> Vec<(Vec<(String, String)>, f64)> {
    points
        .into_iter()
        .map(|p| {
            let value = match p.value {
                Some(Number::AsDouble(d)) => d,
                Some(Number::AsInt(i)) => i as f64,
                None => f64::NAN,
            };
            (text_attrs(&p.attributes), value)
        })
        .collect()
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take_spans(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

#[tonic::async_trait]
impl MetricsService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.take_metrics(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

/// Runs `serve` on a thread with a runtime of its own, on a listener bound to
/// 127.0.0.1:0; returns the bound address. (Here rather than in `support`: the stdio bench
/// includes this file alone.)
pub fn serve_on_loopback<F, Fut>(serve: F) -> std::net::SocketAddr
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener).await;
        });
    });
    rx.recv().unwrap()
}

/// Decodes an OTLP/HTTP protobuf body into `take`, answering with an empty `response`.
fn otlp_http<M: prost::Message + Default>(
    sink: &Sink,
    headers: &axum::http::HeaderMap,
    body: &[u8],
    take: fn(&Sink, M),
    response: impl prost::Message,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    sink.content_types
        .lock()
        .unwrap()
        .push(content_type.to_owned());
    match M::decode(body) {
        Ok(request) => take(sink, request),
        Err(e) => return (axum::http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
    (
        [("content-type", "application/x-protobuf")],
        response.encode_to_vec(),
    )
        .into_response()
}

/// A running receiver.
pub struct Collector {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    sink: Sink,
}

impl Collector {
    /// An OTLP/gRPC receiver of traces and metrics.
    pub fn start() -> Collector {
        let sink = Sink::default();
        let traces = TraceServiceServer::new(sink.clone());
        let metrics = MetricsServiceServer::new(sink.clone());
        let addr = serve_on_loopback(move |listener| async move {
            tonic::transport::Server::builder()
                .add_service(traces)
                .add_service(metrics)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        });
        Collector {
            endpoint: format!("http://{addr}"),
            sink,
        }
    }

    /// An OTLP/HTTP receiver (protobuf bodies on `/v1/traces` and `/v1/metrics`).
    pub fn start_http() -> Collector {
        use axum::routing::post;
        let sink = Sink::default();
        let (traces, metrics) = (sink.clone(), sink.clone());
        let routes = axum::Router::new()
            .route(
                "/v1/traces",
                post(
                    move |h: axum::http::HeaderMap, body: axum::body::Bytes| async move {
                        let empty = ExportTraceServiceResponse::default();
                        otlp_http(&traces, &h, &body, Sink::take_spans, empty)
                    },
                ),
            )
            .route(
                "/v1/metrics",
                post(
                    move |h: axum::http::HeaderMap, body: axum::body::Bytes| async move {
                        let empty = ExportMetricsServiceResponse::default();
                        otlp_http(&metrics, &h, &body, Sink::take_metrics, empty)
                    },
                ),
            );
        let addr = serve_on_loopback(move |listener| async move {
            axum::serve(listener, routes).await.unwrap();
        });
        Collector {
            endpoint: format!("http://{addr}"),
            sink,
        }
    }

    /// The `Content-Type` of every OTLP/HTTP request so far.
    pub fn content_types(&self) -> Vec<String> {
        self.sink.content_types.lock().unwrap().clone()
    }

    /// The first point matching `what`, waiting up to `within`.
    pub fn wait_for_point(&self, within: Duration, what: impl Fn(&Point) -> bool) -> Point {
        let points = self.sink.points.lock().unwrap();
        let (points, _) = self
            .sink
            .new_points
            .wait_timeout_while(points, within, |points| !points.iter().any(&what))
            .unwrap();
        let found = points.iter().find(|p| what(p)).cloned();
        found.unwrap_or_else(|| panic!("no such point among {points:#?}"))
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.sink.spans.lock().unwrap().clone()
    }

    /// The first span matching `what`, waiting up to `within`.
    pub fn wait_for(&self, within: Duration, what: impl Fn(&Span) -> bool) -> Received {
        let spans = self.sink.spans.lock().unwrap();
        let (spans, _) = self
            .sink
            .new_spans
            .wait_timeout_while(spans, within, |spans| !spans.iter().any(|r| what(&r.span)))
            .unwrap();
        let found = spans.iter().find(|r| what(&r.span)).cloned();
        found.unwrap_or_else(|| {
            panic!(
                "no such span among {:#?}",
                spans.iter().map(|r| &r.span.name).collect::<Vec<_>>()
            )
        })
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
