//! The registry of model-facing tools, mounted by tool name.
//!
//! A tool plugin bound to a provider is mounted only while that provider is registered: it
//! follows provider-added and provider-removed, so plugins may load in any order.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::events::{Event, EventBus};
use crate::subagent::SubagentService;
use crate::sync;
use crate::types::{ParentRef, ProviderDescriptor, ToolDescriptor, ToolResult};

/// Something a model can call.
pub trait Tool: Send + Sync + 'static {
    /// Executes one call with JSON `arguments` on behalf of `caller`. `abort` is linked to every
    /// run the call starts. Failures are reported as an `is_error` result.
    fn execute(
        &self,
        caller: ParentRef,
        arguments: String,
        abort: CancellationToken,
    ) -> BoxFuture<'static, ToolResult>;

    /// Whether the tool is served outside Wasm (an MCP server's): what it answers cannot be
    /// run again, so a recording keeps its results and a replay answers from them.
    fn served_outside(&self) -> bool {
        false
    }
}

/// A tool plugin, as the registry needs it while the plugin waits for its provider: who it is
/// and how it describes itself to the model once its provider is known.
pub trait ToolSource: Tool {
    /// The id of the plugin that provides the tool.
    fn plugin(&self) -> &str;

    /// The model-facing description, given the descriptor of the provider the tool follows.
    /// The error names what went wrong; the registry adds the plugin id.
    fn describe(
        &self,
        provider: Option<Arc<ProviderDescriptor>>,
    ) -> BoxFuture<'static, Result<ToolDescriptor, DescribeError>>;
}

/// Why a tool source could not describe itself: its own error, whatever its type.
pub type DescribeError = Box<dyn std::error::Error + Send + Sync>;

/// How a tool plugin binds: the tool name it mounts under and the provider it follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolBinding {
    /// The name the model calls; unique among tools.
    pub tool_name: String,
    /// The provider the tool follows; it is mounted only while that provider is registered.
    pub provider: Option<String>,
    /// Whether a call needs a yes first (the entry's `config.approve`).
    pub approve: crate::approval::Policy,
}

/// Failures of the tool registry.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ToolError {
    /// No tool is mounted under this name.
    #[error("no tool named `{0}` is mounted")]
    NotMounted(String),
    /// Another plugin already uses this tool name.
    #[error("tool name `{name}` is already used by plugin `{other}`")]
    DuplicateToolName {
        /// The contested name.
        name: String,
        /// The plugin that has it.
        other: String,
    },
    /// The tool's description could not be read.
    #[error("plugin `{plugin}`: {message}")]
    Describe {
        /// The plugin.
        plugin: String,
        /// What went wrong.
        message: String,
    },
}

/// A mounted tool, as the model sees it.
#[derive(Clone)]
pub struct MountedTool {
    /// The description given to the model.
    pub descriptor: ToolDescriptor,
    /// The plugin that provides it.
    pub plugin: String,
    /// Whether a call needs a yes first.
    pub approve: crate::approval::Policy,
    tool: Arc<dyn Tool>,
}

impl MountedTool {
    /// Whether it is served outside Wasm (see [`Tool::served_outside`]).
    pub fn served_outside(&self) -> bool {
        self.tool.served_outside()
    }
}

/// A tool plugin waiting for its provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingTool {
    /// The plugin id.
    pub plugin: String,
    /// The tool name it will mount under.
    pub tool_name: String,
    /// The provider it follows.
    pub provider: Option<String>,
}

struct Waiting {
    binding: ToolBinding,
    tool: Arc<dyn ToolSource>,
}

/// Mounted tools and the tool plugins waiting for their providers.
pub struct ToolRegistry {
    /// Serialises (un)mounting so that a provider arriving while a tool loads is never missed.
    plugins: tokio::sync::Mutex<Vec<Waiting>>,
    mounted: RwLock<Vec<MountedTool>>,
    events: Arc<EventBus>,
    subagents: Arc<SubagentService>,
}

impl ToolRegistry {
    /// An empty registry whose tools follow the providers of `subagents`.
    pub fn new(events: Arc<EventBus>, subagents: Arc<SubagentService>) -> Self {
        Self {
            plugins: tokio::sync::Mutex::new(Vec::new()),
            mounted: RwLock::new(Vec::new()),
            events,
            subagents,
        }
    }

    fn mounted_read(&self) -> std::sync::RwLockReadGuard<'_, Vec<MountedTool>> {
        sync::read(&self.mounted)
    }

    fn mounted_write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<MountedTool>> {
        sync::write(&self.mounted)
    }

    /// Mounted tools, in mount order.
    pub fn list(&self) -> Vec<ToolDescriptor> {
        self.mounted_read()
            .iter()
            .map(|m| m.descriptor.clone())
            .collect()
    }

    /// A mounted tool by name.
    pub fn get(&self, name: &str) -> Option<MountedTool> {
        self.mounted_read()
            .iter()
            .find(|m| m.descriptor.name == name)
            .cloned()
    }

    /// Executes the tool mounted under `name`.
    pub async fn execute(
        &self,
        name: &str,
        caller: ParentRef,
        arguments: String,
        abort: CancellationToken,
    ) -> Result<ToolResult, ToolError> {
        let tool = self
            .get(name)
            .ok_or_else(|| ToolError::NotMounted(name.to_string()))?;
        Ok(tool.tool.execute(caller, arguments, abort).await)
    }

    /// Tool plugins that are loaded but not mounted, because their provider is not registered.
    pub async fn unmounted(&self) -> Vec<WaitingTool> {
        let plugins = self.plugins.lock().await;
        let mounted = self.mounted_read();
        plugins
            .iter()
            .filter(|w| {
                !mounted.iter().any(|m| {
                    m.plugin == w.tool.plugin() && m.descriptor.name == w.binding.tool_name
                })
            })
            .map(|w| WaitingTool {
                plugin: w.tool.plugin().to_string(),
                tool_name: w.binding.tool_name.clone(),
                provider: w.binding.provider.clone(),
            })
            .collect()
    }

    /// Adds a tool plugin; mounts it now if its provider is registered (or it has none).
    pub async fn add_plugin(
        &self,
        binding: ToolBinding,
        tool: Arc<dyn ToolSource>,
    ) -> Result<(), ToolError> {
        let mut plugins = self.plugins.lock().await;
        if let Some(other) = plugins
            .iter()
            .find(|w| w.binding.tool_name == binding.tool_name)
        {
            return Err(ToolError::DuplicateToolName {
                name: binding.tool_name,
                other: other.tool.plugin().to_string(),
            });
        }
        let waiting = Waiting { binding, tool };
        self.try_mount(&waiting).await?;
        plugins.push(waiting);
        Ok(())
    }

    /// Replaces the code behind a tool plugin's tools, which stay mounted as they are (the same
    /// binding and descriptors): calls going finish on the old code, later calls run the new.
    /// For the same component compiled anew (a tiered host's tier-up). Returns whether the
    /// plugin was there.
    pub async fn replace_source(&self, plugin: &str, tool: Arc<dyn ToolSource>) -> bool {
        let mut plugins = self.plugins.lock().await;
        let Some(waiting) = plugins.iter_mut().find(|w| w.tool.plugin() == plugin) else {
            return false;
        };
        waiting.tool = tool.clone();
        for mounted in self
            .mounted_write()
            .iter_mut()
            .filter(|m| m.plugin == plugin)
        {
            mounted.tool = tool.clone();
        }
        true
    }

    /// Removes one tool of a plugin that mounts several (an MCP server's), unmounting it.
    pub async fn remove_tool(&self, plugin: &str, tool_name: &str) {
        let mut plugins = self.plugins.lock().await;
        plugins.retain(|w| !(w.tool.plugin() == plugin && w.binding.tool_name == tool_name));
        self.unmount_where(|m| m.plugin == plugin && m.descriptor.name == tool_name);
    }

    /// Removes a tool plugin, unmounting its tools.
    pub async fn remove_plugin(&self, plugin: &str) {
        let mut plugins = self.plugins.lock().await;
        plugins.retain(|w| w.tool.plugin() != plugin);
        self.unmount_where(|m| m.plugin == plugin);
    }

    /// Mounts the tools that follow `provider`.
    pub async fn provider_added(&self, provider: &str) {
        let plugins = self.plugins.lock().await;
        for waiting in plugins
            .iter()
            .filter(|w| w.binding.provider.as_deref() == Some(provider))
        {
            if let Err(e) = self.try_mount(waiting).await {
                tracing::warn!(error = %e, "cannot mount tool");
            }
        }
    }

    /// Unmounts the tools that follow `provider`.
    pub async fn provider_removed(&self, provider: &str) {
        let plugins = self.plugins.lock().await;
        let followers: Vec<String> = plugins
            .iter()
            .filter(|w| w.binding.provider.as_deref() == Some(provider))
            .map(|w| w.tool.plugin().to_string())
            .collect();
        self.unmount_where(|m| followers.contains(&m.plugin));
    }

    async fn try_mount(&self, waiting: &Waiting) -> Result<(), ToolError> {
        let plugin = waiting.tool.plugin().to_string();
        // A plugin may mount several tools (an MCP server's), each under its own binding.
        if self
            .mounted_read()
            .iter()
            .any(|m| m.plugin == plugin && m.descriptor.name == waiting.binding.tool_name)
        {
            return Ok(());
        }
        let provider = match &waiting.binding.provider {
            Some(name) => match self.subagents.descriptor(name) {
                Some(d) => Some(d),
                None => return Ok(()), // waits for provider-added
            },
            None => None,
        };
        let mut descriptor =
            waiting
                .tool
                .describe(provider)
                .await
                .map_err(|e| ToolError::Describe {
                    plugin: plugin.clone(),
                    message: e.to_string(),
                })?;
        // The binding's name is what uniqueness was checked against; it wins.
        descriptor.name = waiting.binding.tool_name.clone();
        self.mounted_write().push(MountedTool {
            descriptor,
            plugin: plugin.clone(),
            approve: waiting.binding.approve,
            tool: waiting.tool.clone(),
        });
        self.events.emit(&Event::ToolMounted {
            name: waiting.binding.tool_name.clone(),
            plugin,
        });
        Ok(())
    }

    fn unmount_where(&self, pred: impl Fn(&MountedTool) -> bool) {
        let removed: Vec<MountedTool> = {
            let mut mounted = self.mounted_write();
            let (gone, kept) = mounted.drain(..).partition(|m| pred(m));
            *mounted = kept;
            gone
        };
        for m in removed {
            self.events.emit(&Event::ToolUnmounted {
                name: m.descriptor.name,
                plugin: m.plugin,
            });
        }
    }
}
