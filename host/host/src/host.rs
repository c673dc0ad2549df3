//! The host: one engine, the event bus, the subagent service, the tool registry and the plugins
//! loaded from config. Cheap to clone; every clone is the same host.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use seam_agent::agent::{Agent, AgentError, AgentRegistry};
use seam_agent::model::ModelRegistry;
use seam_core::events::EventBus;
use seam_core::live::LiveCounts;
use seam_core::subagent::{Provider, SubagentError, SubagentService};
use seam_core::tool::{ToolError, ToolRegistry};
use seam_core::types::{ParentRef, PluginKind, ProviderDescriptor, ToolDescriptor, ToolResult};
use tokio_util::sync::CancellationToken;

use crate::cache::{CacheStats, CompileCache, Tiering};
use crate::config::Config;
use crate::engine::{EngineError, EngineOptions, SeamEngine};
use crate::kinds::{link, Linked, PluginError, Runtime};
use crate::loader::{LoadReport, Loader, PluginInfo, Reload};
use crate::sandbox::{Granted, Limits, Sandbox};
use seam_wasm::linkers::Linkers;

/// How a host is set up.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Engine settings (cache, pooling, epoch tick).
    pub engine: EngineOptions,
    /// Limits applied to every plugin store.
    pub limits: Limits,
    /// How long a cancelled run or tool call may take to wind down before the host drops it.
    pub cancel_grace: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            engine: EngineOptions::default(),
            limits: Limits::default(),
            cancel_grace: Duration::from_millis(250),
        }
    }
}

pub(crate) struct HostShared {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) cache: Arc<CompileCache>,
    pub(crate) events: Arc<EventBus>,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) models: Arc<ModelRegistry>,
    pub(crate) loader: Loader,
    pub(crate) options: HostOptions,
    /// The cluster this host is a front-end of ([`Host::join_cluster`]).
    #[cfg(feature = "cluster")]
    pub(crate) cluster: tokio::sync::Mutex<Option<seam_cluster::ClusterFront>>,
    /// Its metrics, counted once asked for ([`Host::metrics`]) or when OTLP export is on.
    #[cfg(feature = "telemetry")]
    pub(crate) metrics: std::sync::OnceLock<Arc<crate::telemetry::metrics::Metrics>>,
    /// Last, so that the epoch ticker stops after everything that uses the engine is gone.
    _engine: SeamEngine,
}

/// A Seam host. Must be created and used inside a tokio runtime.
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<HostShared>,
}

/// What `inspect` learns about a component without loading it as a plugin.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ComponentInfo {
    /// The file.
    pub path: PathBuf,
    /// Provider, tool or observer.
    pub kind: PluginKind,
    /// The version of the `seam:plugin` package it was built against.
    pub version: crate::versions::WitVersion,
    /// Interfaces it imports.
    pub imports: Vec<String>,
    /// Interfaces it exports.
    pub exports: Vec<String>,
    /// A provider's descriptor (with the given config).
    pub provider: Option<ProviderDescriptor>,
    /// A tool's name and the provider it binds to (with the given config).
    pub tool_name: Option<String>,
    /// The provider a tool follows.
    pub binds_to: Option<String>,
    /// Why the component cannot run on this host at all: it cannot link (an import the host
    /// does not provide, or of another type) or cannot instantiate.
    pub link_error: Option<String>,
    /// Why the descriptor or binding could not be read with the given config.
    pub config_error: Option<String>,
}

impl Host {
    /// Creates a host: the engine, its epoch ticker and empty registries, keeping its sessions
    /// in memory.
    pub fn new(options: HostOptions) -> Result<Self, EngineError> {
        Self::with_store(options, Arc::new(seam_core::store::MemoryStore::default()))
    }

    /// [`Host::new`], keeping sessions, run records and the event journal in `store`.
    pub fn with_store(
        options: HostOptions,
        store: Arc<dyn seam_core::store::SessionStore>,
    ) -> Result<Self, EngineError> {
        seam_core::tls::install_crypto_provider();
        let engine = SeamEngine::new(&options.engine)?;
        let linkers = Linkers::new(&engine.engine)
            .map_err(|e| EngineError::Config(format!("cannot build the linkers: {e:#}")))?;
        let events = Arc::new(EventBus::with_store(store));
        let live = Arc::new(LiveCounts::default());
        // With OTLP export on, spans and metrics are drawn by one listener (one copy of each
        // event), from the host's creation on.
        #[cfg(feature = "telemetry")]
        let metrics = std::sync::OnceLock::new();
        #[cfg(feature = "telemetry")]
        if let Some(telemetry) = crate::telemetry::Telemetry::installed() {
            let counted = telemetry
                .meter()
                .map(|meter| crate::telemetry::metrics::Metrics::new(live.clone(), Some(meter)));
            telemetry.observe(&events, counted.clone());
            if let Some(counted) = counted {
                let _ = metrics.set(counted);
            }
        }
        let subagents = Arc::new(SubagentService::new(
            events.clone(),
            live.clone(),
            options.cancel_grace,
        ));
        let tools = Arc::new(ToolRegistry::new(events.clone(), subagents.clone()));
        let models = Arc::new(ModelRegistry::default());
        #[cfg(feature = "openai")]
        models.set_endpoints(seam_model_openai::adapter());
        let agents = Arc::new(AgentRegistry::new(
            events.clone(),
            models.clone(),
            tools.clone(),
        ));
        agents.attach_subagents(&subagents);
        let runtime = Arc::new(Runtime {
            engine: engine.engine.clone(),
            linkers,
            baseline: engine
                .baseline
                .clone()
                .map(|e| (e, std::sync::OnceLock::new())),
            live,
            subagents,
            agents,
            cancel_grace: options.cancel_grace,
        });
        let cache = Arc::new(CompileCache::new(
            engine.engine.clone(),
            engine
                .baseline
                .clone()
                .map(|e| (e, options.engine.tier_min_bytes)),
            options.engine.cache_dir.clone(),
            options.engine.cache_max_bytes,
        ));
        let loader = Loader::new(
            runtime.clone(),
            cache.clone(),
            tools.clone(),
            events.clone(),
            models.clone(),
            options.limits.clone(),
            options.engine.clone(),
        );
        let host = Self {
            inner: Arc::new(HostShared {
                runtime,
                cache,
                events,
                tools,
                models,
                loader,
                options,
                #[cfg(feature = "cluster")]
                cluster: tokio::sync::Mutex::new(None),
                #[cfg(feature = "telemetry")]
                metrics,
                _engine: engine,
            }),
        };
        Ok(host)
    }

    /// The host's metrics, counted from its events from the first call on (or from its
    /// creation, when OTLP metrics are exported).
    #[cfg(feature = "telemetry")]
    pub fn metrics(&self) -> Arc<crate::telemetry::metrics::Metrics> {
        self.inner
            .metrics
            .get_or_init(|| {
                let meter = crate::telemetry::Telemetry::installed().and_then(|t| t.meter());
                let metrics =
                    crate::telemetry::metrics::Metrics::new(self.inner.runtime.live.clone(), meter);
                metrics.subscribe(&self.inner.events);
                metrics
            })
            .clone()
    }

    /// Pulls and checks components from registries into this host's OCI store (beside its
    /// compile cache), as loading an `oci://` entry does: for `seam pull`, `seam lock` and
    /// `seam inspect oci://...`.
    #[cfg(feature = "oci")]
    pub fn oci(&self) -> &crate::oci::Oci {
        self.inner.loader.oci()
    }

    /// Loads every entry of `config`. On a host that already has plugins this is
    /// [`Host::reconfigure`]: entries not in `config` are unloaded.
    pub async fn load(&self, config: &Config) -> LoadReport {
        self.reconfigure(config).await
    }

    /// Moves the loaded plugins to `config`: entries that left are unloaded (in reverse load
    /// order), changed ones are reloaded, failed ones retried, new ones loaded; unchanged
    /// active ones are not touched. An entry counts as changed when its definition differs or
    /// its component file was rewritten since it loaded. Changed entries [`Reload::Restart`].
    pub async fn reconfigure(&self, config: &Config) -> LoadReport {
        self.reconfigure_with(config, Reload::Restart).await
    }

    /// [`Host::reconfigure`], with changed entries reloaded as `reload` says: `seam dev` swaps
    /// them, so that a broken rebuild leaves the last good version serving.
    pub async fn reconfigure_with(&self, config: &Config, reload: Reload) -> LoadReport {
        let report = self.inner.loader.reconfigure(config, reload).await;
        self.start_tier_ups();
        #[cfg(feature = "telemetry")]
        self.refresh_metrics().await;
        report
    }

    /// Starts Cranelift's background compile of every plugin the last load committed on
    /// Winch's code; each is swapped in when it is ready, if the host is still there.
    fn start_tier_ups(&self) {
        for tier_up in self.inner.loader.take_tier_ups() {
            let Some(compiled) = seam_wasm::tiering::compile(&self.inner.cache, &tier_up) else {
                return;
            };
            let shared = Arc::downgrade(&self.inner);
            tokio::spawn(async move {
                let Ok(result) = compiled.await else {
                    return;
                };
                // A host dropped meanwhile has nothing to swap.
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                match result {
                    Ok(component) => shared.loader.swap_in(&tier_up, component).await,
                    Err(e) => tracing::warn!(
                        plugin = %tier_up.id,
                        "the background Cranelift compile failed; Winch's code goes on serving: {e}"
                    ),
                }
            });
        }
    }

    /// Tells the metrics, if counted, which plugins' host memory to report.
    #[cfg(feature = "telemetry")]
    async fn refresh_metrics(&self) {
        let Some(metrics) = self.inner.metrics.get() else {
            return;
        };
        let budgets = self
            .plugins()
            .await
            .into_iter()
            .filter(|p| p.state == crate::PluginState::Active)
            .filter_map(|p| Some((p.id, p.host_memory?)))
            .collect();
        metrics.set_plugins(budgets);
    }

    /// Unloads every plugin, last loaded first. The plugins stay listed, in state `disposed`,
    /// until the next load or reconfigure. Returns once every process its providers started
    /// has been ended and reaped, with what those processes started.
    pub async fn unload_all(&self) {
        #[cfg(feature = "cluster")]
        if let Some(front) = self.inner.cluster.lock().await.take() {
            front.leave().await;
        }
        self.inner.loader.unload_all().await;
        self.inner.runtime.live.processes_reaped().await;
        // The metrics keep reporting the plugins (their memory released) until the next load:
        // an export at the exit still says what each plugin was charged last.
    }

    /// The plugins of the current config, in config order.
    pub async fn plugins(&self) -> Vec<PluginInfo> {
        self.inner.loader.plugins().await
    }

    /// What the compile cache did so far (compilations, hits, rewritten entries).
    pub fn cache_stats(&self) -> &CacheStats {
        self.inner.cache.stats()
    }

    /// Compiles the component at `path` through the cache, so that loading it later starts at
    /// once; returns whether it was already there.
    pub async fn precompile(&self, path: &Path) -> Result<bool, EngineError> {
        let cache = self.inner.cache.clone();
        let hits = cache
            .stats()
            .hits
            .load(std::sync::atomic::Ordering::Relaxed);
        cache
            .compile_and_recognise(path, None, Tiering::Optimised)
            .await?;
        Ok(cache
            .stats()
            .hits
            .load(std::sync::atomic::Ordering::Relaxed)
            > hits)
    }

    /// The lifecycle event bus.
    pub fn events(&self) -> &Arc<EventBus> {
        &self.inner.events
    }

    /// Joins a cluster as a front-end (`[cluster]`): the providers its workers serve become
    /// providers of this host, checked and run like local ones; a local provider keeps its name.
    /// Joining again is a no-op. [`Host::unload_all`] leaves it.
    #[cfg(feature = "cluster")]
    pub async fn join_cluster(
        &self,
        config: &seam_cluster::ClusterConfig,
    ) -> Result<Vec<String>, seam_cluster::ClusterError> {
        let mut cluster = self.inner.cluster.lock().await;
        if let Some(front) = cluster.as_ref() {
            return Ok(front.providers());
        }
        let front = seam_cluster::ClusterFront::join(
            config,
            self.subagents().clone(),
            self.inner.tools.clone(),
        )
        .await?;
        let names = front.providers();
        *cluster = Some(front);
        Ok(names)
    }

    /// The subagent service: start runs, list providers.
    pub fn subagents(&self) -> &Arc<SubagentService> {
        &self.inner.runtime.subagents
    }

    /// The tool registry.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// The agent runtime's registry of live agents.
    pub fn agents(&self) -> &Arc<AgentRegistry> {
        &self.inner.runtime.agents
    }

    /// The model adapters, configured from `[models]`.
    pub fn models(&self) -> &ModelRegistry {
        &self.inner.models
    }

    /// Agents alive in the agent registry.
    pub fn live_agents(&self) -> usize {
        self.inner.runtime.agents.live()
    }

    /// Creates and publishes a top-level agent (depth 0) with the `[agent]` defaults, on `model`
    /// if given. Dispose it with [`AgentRegistry::dispose`].
    pub fn create_agent(
        &self,
        model: Option<&str>,
        working_directory: &str,
    ) -> Result<Arc<Agent>, AgentError> {
        self.create_agent_in(model, working_directory, None)
    }

    /// [`Host::create_agent`], keeping the session `session`: one the store has is continued
    /// from its completed turns.
    pub fn create_agent_in(
        &self,
        model: Option<&str>,
        working_directory: &str,
        session: Option<&str>,
    ) -> Result<Arc<Agent>, AgentError> {
        self.inner
            .runtime
            .agents
            .create_top_level(model, working_directory, session)
    }

    /// Runs started and not yet disposed.
    pub fn live_runs(&self) -> usize {
        self.inner.runtime.live.runs()
    }

    /// Component instances alive (runs, calls, and descriptor reads in progress).
    pub fn live_instances(&self) -> usize {
        self.inner.runtime.live.instances()
    }

    /// Agent processes of ACP providers not yet reaped.
    pub fn live_processes(&self) -> usize {
        self.inner.runtime.live.processes()
    }

    /// Registers a provider implemented in Rust (no component). The tools that follow it mount.
    pub async fn register_provider(
        &self,
        descriptor: ProviderDescriptor,
        provider: Arc<dyn Provider>,
    ) -> Result<(), SubagentError> {
        let d = self
            .inner
            .runtime
            .subagents
            .register("native", descriptor, provider)?;
        self.inner.tools.provider_added(&d.name).await;
        Ok(())
    }

    /// Removes a provider: its runs are cancelled and disposed, the tools that follow it unmount.
    pub async fn unregister_provider(&self, name: &str) -> bool {
        let removed = self.inner.runtime.subagents.unregister(name).await;
        if removed {
            self.inner.tools.provider_removed(name).await;
        }
        removed
    }

    /// The host's tools and bus, as `seam mcp` serves them.
    #[cfg(feature = "mcp")]
    pub fn tool_host(&self) -> seam_mcp::ToolHost {
        seam_mcp::ToolHost::new(
            self.inner.tools.clone(),
            self.inner.events.clone(),
            self.inner.runtime.subagents.approvals().clone(),
        )
    }

    /// The host's agents and bus, as `seam acp` serves them.
    #[cfg(feature = "acp")]
    pub fn agent_host(&self) -> seam_acp::server::AgentHost {
        seam_acp::server::AgentHost::new(
            self.inner.events.clone(),
            self.inner.runtime.agents.clone(),
            self.inner.runtime.subagents.approvals().clone(),
        )
    }

    /// The host's agents, bus, approvals and providers, as `seam a2a` serves them.
    #[cfg(feature = "a2a")]
    pub fn a2a_host(&self) -> seam_a2a::server::A2aHost {
        seam_a2a::server::A2aHost::new(
            self.inner.events.clone(),
            self.inner.runtime.agents.clone(),
            self.inner.runtime.subagents.approvals().clone(),
            self.inner.runtime.subagents.clone(),
            self.inner.runtime.cancel_grace,
        )
    }

    /// The handle `seam ui` serves: this host's agents, events, approvals and providers.
    #[cfg(feature = "console")]
    pub fn console_host(&self) -> seam_console::ConsoleHost {
        seam_console::ConsoleHost::new(
            self.inner.events.clone(),
            self.inner.runtime.agents.clone(),
            self.inner.runtime.subagents.clone(),
            self.inner.runtime.cancel_grace,
        )
    }

    /// Mounted tools, as the model sees them.
    pub fn tool_descriptors(&self) -> Vec<ToolDescriptor> {
        self.inner.tools.list()
    }

    /// Calls the tool mounted under `name` on behalf of `caller`.
    pub async fn call_tool(
        &self,
        name: &str,
        caller: ParentRef,
        arguments: &str,
        abort: CancellationToken,
    ) -> Result<ToolResult, ToolError> {
        self.inner
            .tools
            .execute(name, caller, arguments.to_string(), abort)
            .await
    }

    /// Reads what a component is and declares, given an optional plugin config: the same
    /// compile, link and describe as loading, with the host's default limits and no grants.
    pub async fn inspect(
        &self,
        path: &Path,
        config: Option<serde_json::Value>,
    ) -> Result<ComponentInfo, EngineError> {
        let (crate::cache::Compiled { component, .. }, kind, version) = self
            .inner
            .cache
            .compile_and_recognise(path, None, Tiering::Allowed)
            .await?;
        let engine = &self.inner.runtime.engine;
        let ty = component.component_type();
        let imports = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        let config: Arc<str> = config
            .unwrap_or_else(|| serde_json::json!({}))
            .to_string()
            .into();
        let sandbox = Sandbox::new(
            self.inner.options.limits.clone(),
            Granted::default(),
            self.inner.options.engine.epoch_tick,
        );
        let mut info = ComponentInfo {
            path: path.to_path_buf(),
            kind,
            version,
            imports,
            exports,
            provider: None,
            tool_name: None,
            binds_to: None,
            link_error: None,
            config_error: None,
        };
        match link(
            &self.inner.runtime,
            "inspect".into(),
            (kind, version),
            &component,
            config,
            sandbox,
        )
        .await
        {
            Ok(Linked::Provider(d, _)) => info.provider = Some(d),
            Ok(Linked::Tool(b, _)) => {
                info.tool_name = Some(b.tool_name);
                info.binds_to = b.provider;
            }
            // A kind that declares nothing (an observer); linking it is the whole check.
            Ok(_) => {}
            Err(e @ (PluginError::Link { .. } | PluginError::Instantiate(_))) => {
                info.link_error = Some(e.to_string())
            }
            Err(e) => info.config_error = Some(e.to_string()),
        }
        Ok(info)
    }
}
