//! [`Meters`]: the SDK's meter provider, installed as the global one so every layer's
//! instruments record into it, read by the OTLP push exporter every
//! `OTEL_METRIC_EXPORT_INTERVAL` (default 60 s) and/or by the Prometheus scrape.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::exporter::{Target, resource};
use super::push::{Push, PushState};

/// The metrics pipeline of a running bridge.
pub struct Meters {
    provider: SdkMeterProvider,
    push: Option<Arc<PushState>>,
    scrape: Option<Scrape>,
}

/// The Prometheus registry the provider fills, rendered on request.
#[derive(Clone)]
pub struct Scrape {
    registry: prometheus::Registry,
}

impl Scrape {
    /// The metrics in the Prometheus text exposition format.
    ///
    /// # Errors
    /// The registry could not be encoded.
    pub fn render(&self) -> anyhow::Result<String> {
        prometheus::TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .map_err(anyhow::Error::from)
    }
}

impl Meters {
    /// Builds the provider with a reader per way out (OTLP to `push`, the scrape when
    /// `scrape`) and installs it as the global meter provider.
    ///
    /// # Errors
    /// The OTLP endpoint is unusable, or a reader could not start.
    pub fn start(push: Option<&Target>, scrape: bool) -> anyhow::Result<Meters> {
        let mut builder = SdkMeterProvider::builder().with_resource(resource());
        let mut state = None;
        if let Some(target) = push {
            let shared = Arc::new(PushState::default());
            let exporter = Push::start(target, Arc::clone(&shared))?;
            builder = builder.with_reader(PeriodicReader::builder(exporter).build());
            state = Some(shared);
        }
        let mut scraped = None;
        if scrape {
            let registry = prometheus::Registry::new();
            let reader = opentelemetry_prometheus::exporter()
                .with_registry(registry.clone())
                .build()
                .map_err(|e| anyhow::anyhow!("cannot set up the Prometheus scrape: {e}"))?;
            builder = builder.with_reader(reader);
            scraped = Some(Scrape { registry });
        }
        let provider = builder.build();
        opentelemetry::global::set_meter_provider(provider.clone());
        Ok(Meters {
            provider,
            push: state,
            scrape: scraped,
        })
    }

    /// The scrape, when one was asked for.
    pub fn scrape(&self) -> Option<Scrape> {
        self.scrape.clone()
    }

    /// Starts the last export (OTLP) and the provider's shutdown on a thread of its own:
    /// the SDK waits up to 5 s whatever it is told. [`Flushing::wait`] bounds the wait.
    pub fn shutdown(self) -> Flushing {
        let (done, finished) = std::sync::mpsc::sync_channel(1);
        let push = self.push;
        let provider = self.provider;
        let _ = std::thread::Builder::new()
            .name("metrics-flush".into())
            .spawn(move || {
                let _ = provider.shutdown();
                let _ = done.send(());
            });
        Flushing { finished, push }
    }
}

/// A shutdown under way.
pub struct Flushing {
    finished: std::sync::mpsc::Receiver<()>,
    push: Option<Arc<PushState>>,
}

impl Flushing {
    /// Waits until `deadline` at most; warns when the last metrics did not reach the
    /// collector.
    pub fn wait(self, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        let finished = self.finished.recv_timeout(left).is_ok();
        let failed = self
            .push
            .as_ref()
            .is_some_and(|s| s.failing.load(Ordering::Acquire));
        if self.push.is_some() && (!finished || failed) {
            tracing::warn!(
                wait_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
                "the last metrics did not reach the OTLP collector"
            );
        }
    }
}
