//! A host's metrics, counted from its lifecycle events and read from it when asked: served as
//! Prometheus text (`--metrics ADDR` of the long-running commands, [`serve`]), and exported by
//! OTLP with the traces when the `OTEL_*` variables ask for it (the same names, dotted:
//! `seam.runs.started`, `seam.runs.ended`, `seam.run.duration`, `seam.runs.live`,
//! `seam.plugin.host_memory`, `seam.model.tokens`, `seam.model.cost`).
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `seam_runs_started_total` | `provider` | runs started |
//! | `seam_runs_ended_total` | `provider`, `stop_reason` | runs settled |
//! | `seam_run_duration_seconds` | `provider` | from start to settle (histogram) |
//! | `seam_live_runs` | | runs not yet disposed |
//! | `seam_plugin_host_memory_bytes` | `plugin` | host memory charged to the plugin |
//! | `seam_model_tokens_total` | `kind` (`input`, `output`), `provider`, `model` | tokens the model endpoints reported |
//! | `seam_model_cost_usd_total` | `provider`, `model` | what they cost, for models with prices |
//!
//! `provider` is the provider of the run whose agent called the model (empty for the
//! top-level agent), `model` the agent's model string.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use tokio_util::sync::CancellationToken;

use seam_core::budget::MemoryBudget;

use seam_core::events::{Event, EventBus};
use seam_core::live::LiveCounts;
use seam_core::sync::lock;

/// The loaded plugins' host memory budgets, by plugin id (set by the host after each load).
type Budgets = Arc<Mutex<Vec<(String, Arc<MemoryBudget>)>>>;
use opentelemetry::metrics::{Histogram as OtelHistogram, ObservableCounter, ObservableGauge};
use opentelemetry::KeyValue;

/// The OTLP side. The counters are observed when the SDK collects (read from the Prometheus
/// counts, so a run pays nothing for them); only the duration histogram is recorded per run.
struct Otel {
    duration: OtelHistogram<f64>,
    /// Kept for their callbacks: runs started, runs ended, tokens.
    _counters: [ObservableCounter<u64>; 3],
    /// Kept for its callback: cost.
    _cost: ObservableCounter<f64>,
    /// Kept for their callbacks: live runs, host memory per plugin.
    _gauges: [ObservableGauge<i64>; 2],
}

impl Otel {
    fn new(
        meter: &opentelemetry::metrics::Meter,
        live: Arc<LiveCounts>,
        state: Arc<Mutex<State>>,
        budgets: Budgets,
    ) -> Self {
        let (for_started, for_ended) = (state.clone(), state.clone());
        let (for_tokens, for_cost) = (state.clone(), state);
        Self {
            duration: meter
                .f64_histogram("seam.run.duration")
                .with_unit("s")
                .with_description("How long runs took, from start to settle")
                .build(),
            _counters: [
                meter
                    .u64_observable_counter("seam.runs.started")
                    .with_description("Runs started")
                    .with_callback(move |observer| {
                        for counters in lock(&for_started).providers.values() {
                            observer.observe(counters.started.get(), &counters.attributes);
                        }
                    })
                    .build(),
                meter
                    .u64_observable_counter("seam.runs.ended")
                    .with_description("Runs settled")
                    .with_callback(move |observer| {
                        for counters in lock(&for_ended).providers.values() {
                            for (counter, attributes) in counters.ended.values() {
                                observer.observe(counter.get(), attributes);
                            }
                        }
                    })
                    .build(),
                meter
                    .u64_observable_counter("seam.model.tokens")
                    .with_description("Tokens the model endpoints reported")
                    .with_callback(move |observer| {
                        for spend in lock(&for_tokens).spend.values() {
                            for (kind, counter) in
                                [("input", &spend.input), ("output", &spend.output)]
                            {
                                let mut attributes = spend.attributes.to_vec();
                                attributes.push(KeyValue::new("kind", kind));
                                observer.observe(counter.get(), &attributes);
                            }
                        }
                    })
                    .build(),
            ],
            _cost: meter
                .f64_observable_counter("seam.model.cost")
                .with_unit("USD")
                .with_description("What the model calls cost, for models with prices")
                .with_callback(move |observer| {
                    for spend in lock(&for_cost).spend.values() {
                        observer.observe(spend.cost.get(), &spend.attributes);
                    }
                })
                .build(),
            _gauges: [
                meter
                    .i64_observable_gauge("seam.runs.live")
                    .with_description("Runs not yet disposed")
                    .with_callback(move |gauge| gauge.observe(live.runs() as i64, &[]))
                    .build(),
                meter
                    .i64_observable_gauge("seam.plugin.host_memory")
                    .with_unit("By")
                    .with_description("Host memory charged to each plugin")
                    .with_callback(move |gauge| {
                        for (plugin, budget) in lock(&budgets).iter() {
                            gauge.observe(
                                budget.used() as i64,
                                &[KeyValue::new("plugin", plugin.clone())],
                            );
                        }
                    })
                    .build(),
            ],
        }
    }
}

type Labels = Vec<(String, String)>;

/// One provider's counters, taken from the families once.
struct PerProvider {
    started: Counter,
    duration: Histogram,
    /// By stop reason: the Prometheus counter and the OTLP attributes.
    ended: HashMap<String, (Counter, [KeyValue; 2])>,
    /// The OTLP attributes of its starts and durations.
    attributes: [KeyValue; 1],
}

/// One provider and model's spend counters, taken from the families once.
struct PerModel {
    input: Counter,
    output: Counter,
    cost: Counter<f64, AtomicU64>,
    /// The OTLP attributes: provider and model.
    attributes: [KeyValue; 2],
}

#[derive(Default)]
struct State {
    /// When each live run started, and its provider.
    open: HashMap<String, (Instant, String)>,
    providers: HashMap<String, PerProvider>,
    /// Each live agent's model string, by agent id (a run's child agent has the run's id).
    models: HashMap<String, String>,
    /// By provider and model.
    spend: HashMap<(String, String), PerModel>,
}

fn duration_histogram() -> Histogram {
    // 1 ms to about 9 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// The metrics of one host.
pub struct Metrics {
    registry: Registry,
    started: Family<Labels, Counter>,
    ended: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    live: Gauge,
    memory: Family<Labels, Gauge>,
    /// Input and output tokens, by kind, provider and model.
    tokens: Family<Labels, Counter>,
    /// Dollars, by provider and model.
    cost: Family<Labels, Counter<f64, AtomicU64>>,
    /// Requests for approval answered, by answer and by who answered.
    approvals: Family<Labels, Counter>,
    /// The live runs' starts, and each provider's counters (looked up once, then reused).
    state: Arc<Mutex<State>>,
    otel: Option<Otel>,
    /// The host's live counts.
    live_runs: Arc<LiveCounts>,
    budgets: Budgets,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Metrics of a host whose live runs `live_runs` counts, exported by OTLP too through
    /// `meter` when there is one; they count once subscribed to its bus
    /// ([`Metrics::subscribe`]), or fed its events.
    pub fn new(
        live_runs: Arc<LiveCounts>,
        meter: Option<opentelemetry::metrics::Meter>,
    ) -> Arc<Self> {
        let mut registry = Registry::with_prefix("seam");
        let started = Family::<Labels, Counter>::default();
        let ended = Family::<Labels, Counter>::default();
        let duration = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        let live = Gauge::default();
        let memory = Family::<Labels, Gauge>::default();
        let tokens = Family::<Labels, Counter>::default();
        let cost = Family::<Labels, Counter<f64, AtomicU64>>::default();
        let approvals = Family::<Labels, Counter>::default();
        registry.register("runs_started", "Runs started", started.clone());
        registry.register("runs_ended", "Runs settled", ended.clone());
        registry.register(
            "run_duration_seconds",
            "How long runs took, from start to settle",
            duration.clone(),
        );
        registry.register("live_runs", "Runs not yet disposed", live.clone());
        registry.register(
            "plugin_host_memory_bytes",
            "Host memory charged to each plugin",
            memory.clone(),
        );
        registry.register(
            "model_tokens",
            "Tokens the model endpoints reported",
            tokens.clone(),
        );
        registry.register(
            "model_cost_usd",
            "What the model calls cost, in dollars, for models with prices",
            cost.clone(),
        );
        registry.register(
            "approvals",
            "Requests for approval answered, by answer (allowed, denied) and who answered",
            approvals.clone(),
        );
        let state: Arc<Mutex<State>> = Arc::default();
        let budgets: Budgets = Arc::default();
        Arc::new(Self {
            registry,
            started,
            ended,
            duration,
            live,
            memory,
            otel: meter
                .map(|meter| Otel::new(&meter, live_runs.clone(), state.clone(), budgets.clone())),
            tokens,
            cost,
            approvals,
            state,
            live_runs,
            budgets,
        })
    }

    /// Counts the events of `bus` from now on (a host subscribes once).
    pub fn subscribe(self: &Arc<Self>, bus: &EventBus) {
        let counting = self.clone();
        bus.subscribe(move |event| {
            counting.on_event(&event);
            Ok(())
        });
    }

    fn provider<'a>(&self, state: &'a mut State, provider: &str) -> &'a mut PerProvider {
        if !state.providers.contains_key(provider) {
            let labels = vec![("provider".to_string(), provider.to_string())];
            let counters = PerProvider {
                started: self.started.get_or_create(&labels).clone(),
                duration: self.duration.get_or_create(&labels).clone(),
                ended: HashMap::new(),
                attributes: [KeyValue::new("provider", provider.to_string())],
            };
            state.providers.insert(provider.to_string(), counters);
        }
        state
            .providers
            .get_mut(provider)
            .expect("inserted just above")
    }

    fn per_model<'a>(
        &self,
        state: &'a mut State,
        provider: String,
        model: String,
    ) -> &'a mut PerModel {
        state
            .spend
            .entry((provider.clone(), model.clone()))
            .or_insert_with(|| {
                let labels = |kind: Option<&str>| {
                    let mut labels = vec![
                        ("provider".to_string(), provider.clone()),
                        ("model".to_string(), model.clone()),
                    ];
                    if let Some(kind) = kind {
                        labels.insert(0, ("kind".to_string(), kind.to_string()));
                    }
                    labels
                };
                // One statement each: a family's guard lives to the end of its statement, and
                // a second `get_or_create` in the same one would wait on it for ever.
                let input = self.tokens.get_or_create(&labels(Some("input"))).clone();
                let output = self.tokens.get_or_create(&labels(Some("output"))).clone();
                let cost = self.cost.get_or_create(&labels(None)).clone();
                PerModel {
                    input,
                    output,
                    cost,
                    attributes: [
                        KeyValue::new("provider", provider.clone()),
                        KeyValue::new("model", model.clone()),
                    ],
                }
            })
    }

    /// Counts what `event` says.
    pub fn on_event(&self, event: &Event) {
        match event {
            Event::SubagentStart { provider, id, .. } => {
                let mut state = lock(&self.state);
                state
                    .open
                    .insert(id.clone(), (Instant::now(), provider.clone()));
                self.provider(&mut state, provider).started.inc();
            }
            Event::SubagentEnd {
                provider,
                id,
                stop_reason,
                ..
            } => {
                let mut state = lock(&self.state);
                let took = state
                    .open
                    .remove(id)
                    .map(|(b, _)| b.elapsed().as_secs_f64());
                let reason = stop_reason.as_str();
                let counters = self.provider(&mut state, provider);
                if !counters.ended.contains_key(reason) {
                    let labels = vec![
                        ("provider".to_string(), provider.clone()),
                        ("stop_reason".to_string(), reason.to_string()),
                    ];
                    let counter = self.ended.get_or_create(&labels).clone();
                    let attributes = [
                        counters.attributes[0].clone(),
                        KeyValue::new("stop_reason", reason.to_string()),
                    ];
                    counters
                        .ended
                        .insert(reason.to_string(), (counter, attributes));
                }
                if let Some((counter, _)) = counters.ended.get(reason) {
                    counter.inc();
                }
                if let Some(took) = took {
                    counters.duration.observe(took);
                    if let Some(otel) = &self.otel {
                        otel.duration.record(took, &counters.attributes);
                    }
                }
            }
            Event::ApprovalResolved { allowed, by, .. } => {
                let labels = vec![
                    (
                        "answer".to_string(),
                        if *allowed { "allowed" } else { "denied" }.to_string(),
                    ),
                    ("by".to_string(), by.clone()),
                ];
                self.approvals.get_or_create(&labels).inc();
            }
            Event::AgentCreated { id, model, .. } => {
                lock(&self.state).models.insert(id.clone(), model.clone());
            }
            Event::AgentDisposed { id } => {
                lock(&self.state).models.remove(id);
            }
            Event::AgentTurnEnd {
                id,
                usage,
                cost_usd,
                ..
            } if usage.is_some() || cost_usd.is_some() => {
                let mut state = lock(&self.state);
                let provider = state
                    .open
                    .get(id)
                    .map(|(_, p)| p.clone())
                    .unwrap_or_default();
                let model = state.models.get(id).cloned().unwrap_or_default();
                let spend = self.per_model(&mut state, provider, model);
                if let Some(usage) = usage {
                    spend.input.inc_by(usage.prompt_tokens);
                    spend.output.inc_by(usage.completion_tokens);
                }
                if let Some(cost) = cost_usd {
                    spend.cost.inc_by(*cost);
                }
            }
            _ => {}
        }
    }

    /// Sets the plugins whose host memory the gauges report (the host does, after each load).
    pub fn set_plugins(&self, budgets: Vec<(String, Arc<MemoryBudget>)>) {
        *lock(&self.budgets) = budgets;
    }

    /// The metrics as Prometheus text, the gauges read now.
    pub fn render(&self) -> String {
        self.live.set(self.live_runs.runs() as i64);
        self.memory.clear();
        for (plugin, budget) in lock(&self.budgets).iter() {
            self.memory
                .get_or_create(&vec![("plugin".to_string(), plugin.clone())])
                .set(budget.used() as i64);
        }
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(error = %e, "cannot encode the metrics");
        }
        text
    }
}

/// Serves `metrics` as Prometheus text on `GET /metrics` at `listener`, until `cancel` fires.
/// Any other path is 404.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
    use hyper::service::service_fn;
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "the metrics listener failed");
                    return;
                }
            },
            () = cancel.cancelled() => return,
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let response = if request.uri().path() == "/metrics" {
                        hyper::Response::builder()
                            .header(
                                "content-type",
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            )
                            .body(http_body_util::Full::new(bytes::Bytes::from(
                                metrics.render(),
                            )))
                    } else {
                        hyper::Response::builder()
                            .status(404)
                            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                                b"only /metrics is here\n",
                            )))
                    };
                    response.map_err(|e| e.to_string())
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_are_counted_by_answer_and_by_who_answered() {
        let metrics = Metrics::new(Arc::new(LiveCounts::default()), None);
        let resolved = |allowed: bool, by: &str| Event::ApprovalResolved {
            id: "a".into(),
            allowed,
            always: false,
            by: by.into(),
            reason: None,
        };
        metrics.on_event(&resolved(true, "terminal"));
        metrics.on_event(&resolved(true, "terminal"));
        metrics.on_event(&resolved(false, "nobody"));
        let text = metrics.render();
        assert!(
            text.contains("seam_approvals_total{answer=\"allowed\",by=\"terminal\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("seam_approvals_total{answer=\"denied\",by=\"nobody\"} 1"),
            "{text}"
        );
    }
}
