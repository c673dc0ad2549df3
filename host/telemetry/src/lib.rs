//! OpenTelemetry traces of the delegation tree, exported by OTLP over HTTP/protobuf.
//!
//! Traces and metrics ([`metrics`]). Configured only by the standard variables: it is on when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`, and
//! `OTEL_TRACES_EXPORTER` is not `none`); `OTEL_SERVICE_NAME` (default `seam`),
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_EXPORTER_OTLP_HEADERS` and the
//! `OTEL_BSP_*` queue settings are the SDK's own.
//!
//! Export never blocks a run: spans go to the SDK's batch processor, a bounded queue drained by
//! a thread of its own; a full queue drops spans and counts them in a warning. The spans are
//! drawn from the lifecycle events ([`spans`]), which is what lets a background child's span
//! outlive the tool call that started it, and the spans the events cannot draw (a model call)
//! come through [`seam_core::trace`], the hook every outbound request also reads its
//! `traceparent` from.

pub mod metrics;
mod spans;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use thiserror::Error;

use seam_core::events::EventBus;

pub use spans::Spans;

/// Why traces could not be set up.
#[derive(Debug, Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built from the environment.
    #[error("cannot export traces to OTLP (check the OTEL_EXPORTER_OTLP_* variables): {0}")]
    Exporter(String),
    /// A protocol other than HTTP/protobuf was asked for.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL is `{0}`: seam exports traces by OTLP over HTTP/protobuf \
         only (`http/protobuf`)"
    )]
    Protocol(String),
}

/// The process's traces: the exporter, and the spans drawn from each host's events.
pub struct Telemetry {
    provider: SdkTracerProvider,
    /// Metrics, unless `OTEL_METRICS_EXPORTER=none`.
    meters: Option<SdkMeterProvider>,
    spans: Arc<Spans>,
}

static INSTALLED: OnceLock<Arc<Telemetry>> = OnceLock::new();

fn set(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

impl Telemetry {
    /// Whether the environment asks for traces.
    pub fn wanted() -> bool {
        let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let none = set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        let endpoint = set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
        endpoint && !disabled && !none
    }

    /// Sets traces up from the environment and installs them for the process (the hooks of
    /// [`seam_core::trace`], and every [`crate::Host`] made after this, draws its spans);
    /// `None` when the environment does not ask for them. Call it outside an async runtime:
    /// the exporter's blocking HTTP client makes a runtime of its own.
    pub fn install_from_env() -> Result<Option<Arc<Telemetry>>, TelemetryError> {
        if !Self::wanted() {
            return Ok(None);
        }
        if let Some(installed) = INSTALLED.get() {
            return Ok(Some(installed.clone()));
        }
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = set(var) {
                if protocol != "http/protobuf" {
                    return Err(TelemetryError::Protocol(protocol));
                }
                break;
            }
        }
        seam_core::tls::install_crypto_provider();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let mut resource = Resource::builder();
        if set("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("seam");
        }
        let resource = resource.build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.clone())
            .build();
        let meters = if set("OTEL_METRICS_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            None
        } else {
            let exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .build()
                .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
            Some(
                SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter)
                    .with_resource(resource)
                    .build(),
            )
        };
        let tracer = provider.tracer("seam");
        let spans = Arc::new(Spans::new(tracer));
        let telemetry = Arc::new(Telemetry {
            provider,
            meters,
            spans,
        });
        let installed = INSTALLED.get_or_init(|| telemetry.clone()).clone();
        seam_core::trace::install(installed.spans.clone());
        Ok(Some(installed))
    }

    /// The installed telemetry, if any.
    pub fn installed() -> Option<&'static Arc<Telemetry>> {
        INSTALLED.get()
    }

    /// Whether metrics are exported too.
    pub fn exports_metrics(&self) -> bool {
        self.meters.is_some()
    }

    /// The meter the hosts' metrics are recorded with, when metrics are exported.
    pub fn meter(&self) -> Option<opentelemetry::metrics::Meter> {
        self.meters.as_ref().map(|m| m.meter("seam"))
    }

    /// Draws spans from `bus`'s events, and counts them into `metrics` (every host does this
    /// when telemetry is installed): one listener, so one copy of each event.
    pub fn observe(&self, bus: &EventBus, metrics: Option<Arc<metrics::Metrics>>) {
        let spans = self.spans.clone();
        bus.subscribe(move |event| {
            spans.on_event(&event);
            if let Some(metrics) = &metrics {
                metrics.on_event(&event);
            }
            Ok(())
        });
    }

    /// Opens the command's root span, named `name` (`seam run`): the plugin loads, the top-level
    /// agent's turns and the runs the command starts lie under it, so that one command is one
    /// trace. It ends with [`Telemetry::end_command`], or at the latest at
    /// [`Telemetry::shutdown`]. A long-lived server (`seam acp`, `seam worker`) opens none: each
    /// request it answers is a trace of its own.
    pub fn begin_command(&self, name: &str) {
        self.spans.begin_command(name);
    }

    /// Ends the command's root span (and whatever is still open under it) with the command's
    /// exit code; a code other than 0 is the error status, with `error` (the command's error, if
    /// it failed with one) as its message.
    pub fn end_command(&self, exit_code: u8, error: Option<&str>) {
        self.spans.end_command(exit_code, error);
    }

    /// Draws a `plugin.load` span (under the command's root span if one is open, else a root
    /// of its own): entry `id`'s component at `path`,
    /// from `began` until now, `Ok` with where its code came from (`cache-hit`, `compiled`,
    /// `shared`) or failed.
    pub fn plugin_load<E: std::fmt::Display>(
        &self,
        id: &str,
        path: &std::path::Path,
        began: std::time::SystemTime,
        outcome: Result<&'static str, &E>,
    ) {
        self.spans.plugin_load(id, path, began, outcome);
    }

    /// Ends whatever is still open and exports what is queued, waiting at most `timeout`: for
    /// a process about to exit. Call it outside an async runtime.
    pub fn shutdown(&self, timeout: Duration) {
        self.spans.end_all();
        if let Err(e) = self.provider.shutdown_with_timeout(timeout) {
            tracing::warn!(error = %e, "traces could not all be exported");
        }
        if let Some(meters) = &self.meters {
            if let Err(e) = meters.shutdown_with_timeout(timeout) {
                tracing::warn!(error = %e, "metrics could not all be exported");
            }
        }
    }
}
