//! The host: one engine, the event bus, the subagent service, the tool registry and the plugins
//! loaded from config. Cheap to clone; every clone is the same host.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, AgentError, AgentRegistry, AgentSpec};
use crate::engine::{EngineError, EngineOptions, PluginKind, SeamEngine};
use crate::events::EventBus;
use crate::live::LiveCounts;
use crate::loader::PluginSlot;
use crate::model::ModelRegistry;
use crate::plugin::observer::{ObserverHandle, WasmObserver};
use crate::plugin::provider::WasmProvider;
use crate::plugin::tool::WasmTool;
use crate::sandbox::Limits;
use crate::subagent::{Provider, SubagentError, SubagentService};
use crate::tool::{ToolError, ToolRegistry};
use crate::types::{ParentRef, ProviderDescriptor, ToolDescriptor, ToolResult};

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

pub(crate) struct Inner {
    pub(crate) engine: SeamEngine,
    pub(crate) events: Arc<EventBus>,
    pub(crate) live: Arc<LiveCounts>,
    pub(crate) subagents: Arc<SubagentService>,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) models: Arc<ModelRegistry>,
    pub(crate) agents: Arc<AgentRegistry>,
    pub(crate) plugins: tokio::sync::Mutex<Vec<PluginSlot>>,
    /// Listening observer plugins, by plugin id.
    pub(crate) observers: std::sync::Mutex<HashMap<String, ObserverHandle>>,
    pub(crate) options: HostOptions,
}

/// A Seam host. Must be created and used inside a tokio runtime.
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<Inner>,
}

/// What `inspect` learns about a component without loading it as a plugin.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ComponentInfo {
    /// The file.
    pub path: PathBuf,
    /// Provider or tool.
    pub kind: PluginKind,
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
    /// Why the descriptor or binding could not be read with the given config.
    pub config_error: Option<String>,
}

impl Host {
    /// Creates a host: the engine, its epoch ticker and empty registries.
    pub fn new(options: HostOptions) -> Result<Self, EngineError> {
        let engine = SeamEngine::new(&options.engine)?;
        let events = Arc::new(EventBus::default());
        let live = Arc::new(LiveCounts::default());
        let subagents = Arc::new(SubagentService::new(
            events.clone(),
            live.clone(),
            options.cancel_grace,
        ));
        let tools = Arc::new(ToolRegistry::new(events.clone(), subagents.clone()));
        let models = Arc::new(ModelRegistry::default());
        let agents = Arc::new(AgentRegistry::new(
            events.clone(),
            models.clone(),
            tools.clone(),
        ));
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                events,
                live,
                subagents,
                tools,
                models,
                agents,
                plugins: tokio::sync::Mutex::new(Vec::new()),
                observers: std::sync::Mutex::new(HashMap::new()),
                options,
            }),
        })
    }

    /// The lifecycle event bus.
    pub fn events(&self) -> &EventBus {
        &self.inner.events
    }

    /// The subagent service: start runs, list providers.
    pub fn subagents(&self) -> &SubagentService {
        &self.inner.subagents
    }

    /// The tool registry.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// The agent runtime's registry of live agents.
    pub fn agents(&self) -> &Arc<AgentRegistry> {
        &self.inner.agents
    }

    /// The model adapters, configured from `[models]`.
    pub fn models(&self) -> &ModelRegistry {
        &self.inner.models
    }

    /// Agents alive in the agent registry.
    pub fn live_agents(&self) -> usize {
        self.inner.agents.live()
    }

    /// Creates and publishes a top-level agent (depth 0) with the `[agent]` defaults, on `model`
    /// if given. Dispose it with [`AgentRegistry::dispose`].
    pub fn create_agent(
        &self,
        model: Option<&str>,
        working_directory: &str,
    ) -> Result<Arc<Agent>, AgentError> {
        let defaults = self.inner.agents.defaults();
        let mut spec = AgentSpec::top_level(
            model.map(str::to_string).unwrap_or(defaults.model.clone()),
            working_directory,
        );
        spec.system_prompt = defaults.system_prompt;
        spec.persona = defaults.persona;
        spec.max_turns = defaults.max_turns;
        self.inner.agents.create(spec, None)
    }

    /// Runs started and not yet disposed.
    pub fn live_runs(&self) -> usize {
        self.inner.live.runs()
    }

    /// Component instances alive (runs, calls, and descriptor reads in progress).
    pub fn live_instances(&self) -> usize {
        self.inner.live.instances()
    }

    /// Registers a provider implemented in Rust (no component). The tools that follow it mount.
    pub async fn register_provider(
        &self,
        descriptor: ProviderDescriptor,
        provider: Arc<dyn Provider>,
    ) -> Result<(), SubagentError> {
        let d = self
            .inner
            .subagents
            .register("native", descriptor, provider)?;
        self.inner.tools.provider_added(&d.name).await;
        Ok(())
    }

    /// Removes a provider: its runs are cancelled and disposed, the tools that follow it unmount.
    pub async fn unregister_provider(&self, name: &str) -> bool {
        let removed = self.inner.subagents.unregister(name).await;
        if removed {
            self.inner.tools.provider_removed(name).await;
        }
        removed
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

    /// Reads what a component is and declares, given an optional plugin config.
    pub async fn inspect(
        &self,
        path: &Path,
        config: Option<serde_json::Value>,
    ) -> Result<ComponentInfo, EngineError> {
        let engine = &self.inner.engine;
        let component = {
            let path = path.to_path_buf();
            let inner = self.inner.clone();
            tokio::task::spawn_blocking(move || inner.engine.compile(&path))
                .await
                .map_err(|e| EngineError::Config(format!("compile task failed: {e}")))??
        };
        let kind = engine.kind_of(path, &component)?;
        let ty = component.component_type();
        let imports = ty
            .imports(&engine.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let exports = ty
            .exports(&engine.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let config: Arc<str> = config
            .unwrap_or_else(|| serde_json::json!({}))
            .to_string()
            .into();
        let plugin: Arc<str> = "inspect".into();
        let limits = self.inner.options.limits.clone();
        let mut info = ComponentInfo {
            path: path.to_path_buf(),
            kind,
            imports,
            exports,
            provider: None,
            tool_name: None,
            binds_to: None,
            config_error: None,
        };
        match kind {
            PluginKind::Provider => {
                match WasmProvider::load(
                    engine,
                    &self.inner.live,
                    plugin,
                    &component,
                    config,
                    limits,
                    self.inner.agents.clone(),
                )
                .await
                {
                    Ok((d, _)) => info.provider = Some(d),
                    Err(e) => info.config_error = Some(e),
                }
            }
            PluginKind::Tool => {
                match WasmTool::load(
                    engine,
                    &self.inner.live,
                    self.inner.subagents.clone(),
                    plugin,
                    &component,
                    config,
                    limits,
                    self.inner.options.cancel_grace,
                )
                .await
                {
                    Ok((b, _)) => {
                        info.tool_name = Some(b.tool_name);
                        info.binds_to = b.provider;
                    }
                    Err(e) => info.config_error = Some(e),
                }
            }
            PluginKind::Observer => {
                // An observer declares nothing; linking it is the whole check.
                if let Err(e) = WasmObserver::load(
                    engine,
                    &self.inner.live,
                    plugin,
                    &component,
                    config,
                    limits.into(),
                ) {
                    info.config_error = Some(e);
                }
            }
        }
        Ok(info)
    }
}
