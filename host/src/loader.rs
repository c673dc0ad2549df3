//! The plugin loader, after cordis: config entries become plugin instances with states; siblings
//! load concurrently; unload runs in reverse order; a new config is diffed against the old.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::config::{Config, PluginEntry};
use crate::engine::{EngineError, PluginKind};
use crate::events::Event;
use crate::host::Host;
use crate::plugin::observer::WasmObserver;
use crate::plugin::provider::WasmProvider;
use crate::plugin::tool::WasmTool;
use crate::sandbox::{Granted, LimitedProvider, Limits, RunGate, Sandbox, SandboxError};
use crate::subagent::SubagentError;
use crate::tool::ToolError;

/// Where a plugin is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "error")]
pub enum PluginState {
    /// Loading.
    Pending,
    /// Loaded and registered.
    Active,
    /// Loading failed; the message names the cause.
    Failed(String),
    /// Listed in the config with `disabled = true`.
    Disabled,
    /// Unloaded.
    Disposed,
}

/// Why a plugin failed to load.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The component could not be read, compiled or recognised.
    #[error("plugin `{id}`: {source}")]
    Engine {
        /// The plugin id.
        id: String,
        /// The engine's error.
        source: EngineError,
    },
    /// The component refused its config, trapped, or declared something malformed.
    #[error("plugin `{id}` ({}): {message}", component.display())]
    Guest {
        /// The plugin id.
        id: String,
        /// The component file.
        component: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The provider could not be registered.
    #[error("plugin `{id}`: {source}")]
    Provider {
        /// The plugin id.
        id: String,
        /// The registry's error.
        source: SubagentError,
    },
    /// A grant or limit of the entry cannot be honoured on this host.
    #[error("plugin `{id}`: {source}")]
    Sandbox {
        /// The plugin id.
        id: String,
        /// The key and the problem.
        source: SandboxError,
    },
    /// The tool could not be added.
    #[error("plugin `{id}`: {source}")]
    Tool {
        /// The plugin id.
        id: String,
        /// The registry's error.
        source: ToolError,
    },
}

/// A plugin as the loader sees it.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    /// The entry's id.
    pub id: String,
    /// The component file.
    pub component: PathBuf,
    /// Provider or tool, once known.
    pub kind: Option<PluginKind>,
    /// Its state.
    pub state: PluginState,
    /// The provider name it registered, or the tool name it mounts under.
    pub name: Option<String>,
    /// For a tool: the provider it follows.
    pub follows: Option<String>,
    /// What the plugin is granted, once checked against the host.
    pub grants: Option<Granted>,
    /// The limits in force for the plugin.
    pub limits: Option<Limits>,
}

pub(crate) struct PluginSlot {
    entry: PluginEntry,
    info: PluginInfo,
}

/// What a load or reconfigure did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct LoadReport {
    /// Entries loaded for the first time.
    pub loaded: Vec<String>,
    /// Entries unloaded because they left the config.
    pub unloaded: Vec<String>,
    /// Entries whose definition changed, unloaded and loaded again.
    pub reloaded: Vec<String>,
    /// Entries left as they were.
    pub kept: Vec<String>,
    /// Failures, by entry id.
    #[serde(skip)]
    pub failed: Vec<Arc<LoadError>>,
}

impl LoadReport {
    /// Whether every entry loaded.
    pub fn is_ok(&self) -> bool {
        self.failed.is_empty()
    }
}

impl Host {
    /// Loads every entry of `config` concurrently, replacing nothing: use
    /// [`Host::reconfigure`] to move from one config to another.
    pub async fn load(&self, config: &Config) -> LoadReport {
        self.reconfigure(config).await
    }

    /// Moves the loaded plugins to `config`: entries that left are unloaded (in reverse load
    /// order), changed ones are reloaded, new ones loaded; unchanged ones are not touched.
    pub async fn reconfigure(&self, config: &Config) -> LoadReport {
        let mut slots = self.inner.plugins.lock().await;
        let mut report = LoadReport::default();
        self.inner.models.configure(config.models.clone());
        self.inner.agents.configure(config.agent.clone());

        // Unload what left or changed, last loaded first.
        let mut keep: Vec<PluginSlot> = Vec::new();
        let mut old: Vec<PluginSlot> = std::mem::take(&mut *slots);
        while let Some(slot) = old.pop() {
            if slot.info.state == PluginState::Disposed {
                // Unloaded by `unload_all`: nothing to tear down; loaded afresh if still listed.
                continue;
            }
            match config.plugins.iter().find(|e| e.id == slot.entry.id) {
                Some(new) if *new == slot.entry => keep.push(slot),
                Some(_) => {
                    self.unload_slot(&slot).await;
                    report.reloaded.push(slot.entry.id.clone());
                }
                None => {
                    self.unload_slot(&slot).await;
                    report.unloaded.push(slot.entry.id.clone());
                }
            }
        }

        // Load new and changed entries concurrently; siblings do not wait for each other.
        let fresh: Vec<&PluginEntry> = config
            .plugins
            .iter()
            .filter(|e| !keep.iter().any(|k| k.entry.id == e.id))
            .collect();
        let results =
            futures::future::join_all(fresh.iter().map(|e| self.load_entry((*e).clone()))).await;
        let mut loaded: Vec<PluginSlot> = Vec::new();
        for (entry, result) in fresh.into_iter().zip(results) {
            if !report.reloaded.contains(&entry.id) {
                report.loaded.push(entry.id.clone());
            }
            let (info, error) = result;
            if let Some(e) = error {
                report.failed.push(Arc::new(e));
            }
            loaded.push(PluginSlot {
                entry: entry.clone(),
                info,
            });
        }

        // The table follows the new config's order, which is also the unload order reversed.
        for entry in &config.plugins {
            if let Some(i) = keep.iter().position(|k| k.entry.id == entry.id) {
                report.kept.push(entry.id.clone());
                slots.push(keep.swap_remove(i));
            } else if let Some(i) = loaded.iter().position(|l| l.entry.id == entry.id) {
                slots.push(loaded.swap_remove(i));
            }
        }
        report
    }

    /// Unloads every plugin, last loaded first.
    /// The plugins stay listed, in state `disposed`, until the next load or reconfigure.
    pub async fn unload_all(&self) {
        let mut slots = self.inner.plugins.lock().await;
        for slot in slots.iter_mut().rev() {
            self.unload_slot(slot).await;
            slot.info.state = PluginState::Disposed;
        }
    }

    /// The plugins of the current config, in config order.
    pub async fn plugins(&self) -> Vec<PluginInfo> {
        self.inner
            .plugins
            .lock()
            .await
            .iter()
            .map(|s| s.info.clone())
            .collect()
    }

    async fn unload_slot(&self, slot: &PluginSlot) {
        if slot.info.state != PluginState::Active {
            return;
        }
        match slot.info.kind {
            Some(PluginKind::Provider) => {
                if let Some(name) = &slot.info.name {
                    self.unregister_provider(name).await;
                }
            }
            Some(PluginKind::Tool) => self.inner.tools.remove_plugin(&slot.entry.id).await,
            Some(PluginKind::Observer) => {
                let handle = self
                    .inner
                    .observers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&slot.entry.id);
                if let Some(handle) = handle {
                    handle.detach(&self.inner.events);
                }
            }
            None => {}
        }
        self.inner.events.emit(&Event::PluginUnloaded {
            id: slot.entry.id.clone(),
        });
        tracing::info!(plugin = %slot.entry.id, "unloaded");
    }

    async fn load_entry(&self, entry: PluginEntry) -> (PluginInfo, Option<LoadError>) {
        let mut info = PluginInfo {
            id: entry.id.clone(),
            component: entry.component.clone(),
            kind: None,
            state: PluginState::Pending,
            name: None,
            follows: None,
            grants: None,
            limits: None,
        };
        if entry.disabled {
            info.state = PluginState::Disabled;
            return (info, None);
        }
        match self.try_load(&entry, &mut info).await {
            Ok(()) => {
                info.state = PluginState::Active;
                self.inner.events.emit(&Event::PluginLoaded {
                    id: entry.id.clone(),
                    kind: info.kind.map(|k| k.to_string()).unwrap_or_default(),
                });
                tracing::info!(plugin = %entry.id, kind = ?info.kind, "loaded");
                (info, None)
            }
            Err(e) => {
                let message = e.to_string();
                info.state = PluginState::Failed(message.clone());
                self.inner.events.emit(&Event::PluginFailed {
                    id: entry.id.clone(),
                    error: message.clone(),
                });
                tracing::warn!(plugin = %entry.id, "{message}");
                (info, Some(e))
            }
        }
    }

    async fn try_load(&self, entry: &PluginEntry, info: &mut PluginInfo) -> Result<(), LoadError> {
        let inner = &self.inner;
        let id = entry.id.clone();
        let engine_err = |source| LoadError::Engine {
            id: id.clone(),
            source,
        };
        let guest_err = |message| LoadError::Guest {
            id: id.clone(),
            component: entry.component.clone(),
            message,
        };
        // Compilation is CPU-bound: keep it off the async workers.
        let component = {
            let path = entry.component.clone();
            let host = self.inner.clone();
            tokio::task::spawn_blocking(move || host.engine.compile(&path))
                .await
                .map_err(|e| engine_err(EngineError::Config(format!("compile task: {e}"))))?
                .map_err(engine_err)?
        };
        let kind = inner
            .engine
            .kind_of(&entry.component, &component)
            .map_err(engine_err)?;
        info.kind = Some(kind);
        if let Some(expected) = entry.kind.filter(|k| *k != kind) {
            return Err(engine_err(EngineError::KindMismatch {
                path: entry.component.clone(),
                expected,
                found: kind,
            }));
        }
        let config: Arc<str> = entry.config.to_string().into();
        let plugin: Arc<str> = entry.id.as_str().into();
        let sandbox = self.sandbox_for(entry)?;
        info.grants = Some(sandbox.grants().clone());
        info.limits = Some(sandbox.limits().clone());
        let gate = RunGate::new(plugin.clone(), sandbox.limits());
        match kind {
            PluginKind::Provider => {
                let (descriptor, provider) = WasmProvider::load(
                    &inner.engine,
                    &inner.live,
                    plugin,
                    &component,
                    config,
                    sandbox,
                    inner.agents.clone(),
                )
                .await
                .map_err(guest_err)?;
                // Each run of the plugin passes its concurrency, time and output limits.
                let provider = LimitedProvider::new(Arc::new(provider), gate);
                let d = inner
                    .subagents
                    .register(&entry.id, descriptor, Arc::new(provider))
                    .map_err(|source| LoadError::Provider {
                        id: id.clone(),
                        source,
                    })?;
                info.name = Some(d.name.clone());
                inner.tools.provider_added(&d.name).await;
            }
            PluginKind::Tool => {
                let (binding, tool) = WasmTool::load(
                    &inner.engine,
                    &inner.live,
                    inner.subagents.clone(),
                    plugin,
                    &component,
                    config,
                    sandbox,
                    inner.options.cancel_grace,
                )
                .await
                .map_err(guest_err)?;
                info.name = Some(binding.tool_name.clone());
                info.follows = binding.provider.clone();
                inner
                    .tools
                    .add_plugin(binding, tool)
                    .await
                    .map_err(|source| LoadError::Tool {
                        id: id.clone(),
                        source,
                    })?;
            }
            PluginKind::Observer => {
                let observer = WasmObserver::load(
                    &inner.engine,
                    &inner.live,
                    plugin,
                    &component,
                    config,
                    sandbox,
                )
                .map_err(guest_err)?;
                let handle = observer.attach(&inner.events);
                let previous = inner
                    .observers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(entry.id.clone(), handle);
                if let Some(previous) = previous {
                    previous.detach(&inner.events);
                }
            }
        }
        Ok(())
    }

    /// The entry's sandbox: its limits over the host's defaults, its grants checked against the
    /// host (directories exist and open, environment values read now).
    fn sandbox_for(&self, entry: &PluginEntry) -> Result<Sandbox, LoadError> {
        let err = |key: &str, message: String| LoadError::Sandbox {
            id: entry.id.clone(),
            source: SandboxError {
                key: key.to_string(),
                message,
            },
        };
        let limits = entry.limits.apply(&self.inner.options.limits);
        let engine = &self.inner.options.engine;
        if engine.pooling && limits.memory_bytes > engine.pool_memory_bytes {
            return Err(err(
                "limits.memory_mb",
                format!(
                    "{} MiB is more than the engine's memory slot of {} MiB",
                    limits.memory_bytes >> 20,
                    engine.pool_memory_bytes >> 20
                ),
            ));
        }
        if engine.pooling && limits.table_elements > engine.pool_table_elements {
            return Err(err(
                "limits.table_elements",
                format!(
                    "{} is more than the engine's table slot of {} elements",
                    limits.table_elements, engine.pool_table_elements
                ),
            ));
        }
        let grants = entry
            .grants
            .resolve()
            .map_err(|source| LoadError::Sandbox {
                id: entry.id.clone(),
                source,
            })?;
        Ok(Sandbox::new(limits, grants, engine.epoch_tick))
    }
}
