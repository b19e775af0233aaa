//! [`Push`]: the OTLP metric exporter as the SDK's periodic reader calls it. The reader
//! calls from a plain thread of its own, while tonic and reqwest need a Tokio reactor: the
//! exporter lives in a current-thread runtime that each export drives (the reader's
//! thread is its only caller). Each export is bounded, so a collector that never answers
//! costs that thread a timeout per interval and the request path nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;

use super::exporter::Target;
use super::worker::EXPORT_TIMEOUT;

/// Whether the last export failed, shared with `Meters` for the exit warning.
#[derive(Debug, Default)]
pub(super) struct PushState {
    pub(super) failing: AtomicBool,
}

/// The OTLP metric exporter on a runtime of its own.
#[derive(Debug)]
pub(super) struct Push {
    inner: opentelemetry_otlp::MetricExporter,
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    state: Arc<PushState>,
}

impl Push {
    /// Builds the exporter for `target` inside a new runtime.
    pub(super) fn start(target: &Target, state: Arc<PushState>) -> anyhow::Result<Push> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| anyhow::anyhow!("cannot start the metric export runtime: {e}"))?;
        let inner = {
            let _inside = runtime.enter();
            super::exporter::metrics(target)?
        };
        Ok(Push {
            inner,
            runtime: Some(runtime),
            state,
        })
    }

    fn run<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        self.runtime.as_ref().map(|rt| rt.block_on(work))
    }
}

impl PushMetricExporter for Push {
    /// Always `Ok`: the SDK would log every failed interval at error level; this logs when
    /// export starts failing and when it recovers, and `Meters` reports a failed last
    /// export at exit.
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        // The timer is made inside the runtime (it needs its time driver).
        let sent = self
            .run(async { tokio::time::timeout(EXPORT_TIMEOUT, self.inner.export(metrics)).await });
        let failure = match sent {
            Some(Ok(Ok(()))) => None,
            Some(Ok(Err(e))) => Some(crate::domain::text::clip(&e.to_string(), 200).into_owned()),
            Some(Err(_)) => Some("the collector did not answer in time".to_owned()),
            None => Some("the exporter is stopping".to_owned()),
        };
        match failure {
            None if self.state.failing.swap(false, Ordering::AcqRel) => {
                tracing::info!("metrics reach the OTLP collector again");
            }
            None => {}
            Some(why) if !self.state.failing.swap(true, Ordering::AcqRel) => {
                tracing::warn!(reason = %why, "metrics cannot reach the OTLP collector; retrying every export interval (tool calls are unaffected)");
            }
            Some(_) => {}
        }
        Ok(())
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _inside = self.runtime.as_ref().map(|rt| rt.enter());
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

impl Drop for Push {
    fn drop(&mut self) {
        // The reader may be dropped on any thread, a runtime's included, where a blocking
        // runtime shutdown would panic.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
