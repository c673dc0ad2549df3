//! The plugin loader, after cordis: config entries become plugin instances with states; siblings
//! load concurrently; unload runs in reverse order; a new config is diffed against the old.
//!
//! Loading has two phases. Every new entry is prepared concurrently (compiled, checked, linked,
//! asked what it declares); then the prepared plugins are committed one by one in config order
//! (providers registered, tools added, observers attached). So whichever entry compiles first,
//! the entry listed first wins a contested provider or tool name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use seam_core::events::{Event, EventBus};
use seam_core::model::ModelRegistry;
use seam_core::subagent::SubagentError;
use seam_core::tool::{ToolError, ToolRegistry};
use seam_core::types::PluginKind;
use serde::Serialize;
use thiserror::Error;

use crate::cache::CompileCache;
use crate::config::{Config, PluginEntry};
use crate::engine::{EngineError, EngineOptions};
use crate::plugin::wasm_observer::ObserverHandle;
use crate::plugin::{link, Linked, PluginError, Runtime};
use crate::sandbox::gate::{LimitedProvider, RunGate};
use crate::sandbox::{Granted, Limits, Sandbox, SandboxError};

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
    /// The component could not be linked, refused its config, trapped, or declared something
    /// malformed.
    #[error("plugin `{id}` ({}): {source}", component.display())]
    Guest {
        /// The plugin id.
        id: String,
        /// The component file.
        component: PathBuf,
        /// What went wrong.
        source: PluginError,
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
    /// An ACP entry's settings are wrong.
    #[error("plugin `{id}`: {message}")]
    Acp {
        /// The plugin id.
        id: String,
        /// What is wrong, naming the key.
        message: String,
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
    /// Provider, tool or observer, once known.
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
    /// For an ACP entry: the agent program and its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Why the entry's newer definition failed to load, while this (last good) version keeps
    /// serving ([`Reload::Swap`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
}

/// How a changed entry is reloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reload {
    /// Unload the old version (cancelling its runs), then load the new one; if the new one
    /// fails, the entry is `failed`.
    #[default]
    Restart,
    /// Prepare the new version while the old one serves, and swap only once it is ready: runs
    /// already going on a provider that keeps its name finish on the old version, and a new
    /// version that fails to load leaves the old one serving (listed in
    /// [`LoadReport::kept_last_good`], its [`PluginInfo::stale`] saying why).
    Swap,
}

/// What the loader remembers of a component file, to notice a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

struct PluginSlot {
    entry: PluginEntry,
    info: PluginInfo,
    /// The component file as it was when this version was prepared.
    stamp: Option<FileStamp>,
}

impl PluginSlot {
    /// Whether the component file was rewritten since this version was prepared.
    fn rebuilt(&self) -> bool {
        self.stamp.is_some() && FileStamp::of(&self.entry.component) != self.stamp
    }
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
    /// Entries that had failed and were tried again, unchanged.
    pub retried: Vec<String>,
    /// Changed entries whose new version failed to load, so the last good version keeps
    /// serving ([`Reload::Swap`] only; the failure is in `failed`).
    pub kept_last_good: Vec<String>,
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

    /// One line per failure, for messages.
    pub fn failures(&self) -> String {
        self.failed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A prepared entry, waiting to be committed.
struct Prepared {
    linked: Linked,
    sandbox_limits: Limits,
}

/// Owns the plugins of the current config: their slots, the compile cache, and the observers
/// listening on the bus.
pub(crate) struct Loader {
    runtime: Arc<Runtime>,
    cache: Arc<CompileCache>,
    tools: Arc<ToolRegistry>,
    events: Arc<EventBus>,
    models: Arc<ModelRegistry>,
    slots: tokio::sync::Mutex<Vec<PluginSlot>>,
    /// Listening observer plugins, by plugin id.
    observers: Mutex<HashMap<String, ObserverHandle>>,
    defaults: Limits,
    engine_options: EngineOptions,
}

impl Loader {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        cache: Arc<CompileCache>,
        tools: Arc<ToolRegistry>,
        events: Arc<EventBus>,
        models: Arc<ModelRegistry>,
        defaults: Limits,
        engine_options: EngineOptions,
    ) -> Self {
        Self {
            runtime,
            cache,
            tools,
            events,
            models,
            slots: tokio::sync::Mutex::new(Vec::new()),
            observers: Mutex::new(HashMap::new()),
            defaults,
            engine_options,
        }
    }

    /// Moves the loaded plugins to `config`: entries that left are unloaded (in reverse load
    /// order), changed ones are reloaded as `reload` says, failed ones retried, new ones loaded;
    /// unchanged active ones are not touched.
    pub(crate) async fn reconfigure(&self, config: &Config, reload: Reload) -> LoadReport {
        let mut slots = self.slots.lock().await;
        let mut report = LoadReport::default();
        self.models.configure(config.models.clone());
        self.runtime.agents.configure(config.agent.clone());
        self.runtime
            .subagents
            .set_max_tree_depth(config.agent.max_depth);

        // Unload what left or changed, last loaded first. With `Swap`, a changed active entry
        // goes on serving until its new version is ready.
        let mut keep: Vec<PluginSlot> = Vec::new();
        let mut serving: Vec<PluginSlot> = Vec::new();
        let mut old: Vec<PluginSlot> = std::mem::take(&mut *slots);
        while let Some(slot) = old.pop() {
            if slot.info.state == PluginState::Disposed {
                // Unloaded by `unload_all`: nothing to tear down; loaded afresh if still listed.
                continue;
            }
            match config.plugins.iter().find(|e| e.id == slot.entry.id) {
                Some(new) if *new == slot.entry && !slot.rebuilt() => {
                    if matches!(slot.info.state, PluginState::Failed(_)) {
                        // A failed entry holds nothing; its cause (a missing file, say) may be
                        // fixed by now.
                        report.retried.push(slot.entry.id.clone());
                    } else {
                        keep.push(slot);
                    }
                }
                Some(_) => {
                    report.reloaded.push(slot.entry.id.clone());
                    if reload == Reload::Swap && slot.info.state == PluginState::Active {
                        serving.push(slot);
                    } else {
                        self.unload_slot(&slot).await;
                    }
                }
                None => {
                    self.unload_slot(&slot).await;
                    report.unloaded.push(slot.entry.id.clone());
                }
            }
        }

        // Prepare new, changed and retried entries concurrently; siblings do not wait for each
        // other. Then commit them in config order.
        let fresh: Vec<&PluginEntry> = config
            .plugins
            .iter()
            .filter(|e| !keep.iter().any(|k| k.entry.id == e.id))
            .collect();
        // Stamped before compiling, so that a rewrite during the compile shows next time.
        let stamps: Vec<Option<FileStamp>> =
            fresh.iter().map(|e| FileStamp::of(&e.component)).collect();
        let prepared = futures::future::join_all(fresh.iter().map(|e| self.prepare_entry(e))).await;
        let mut loaded: Vec<PluginSlot> = Vec::new();
        for ((entry, stamp), prepared) in fresh.into_iter().zip(stamps).zip(prepared) {
            let previous = serving
                .iter()
                .position(|s| s.entry.id == entry.id)
                .map(|i| serving.swap_remove(i));
            let (prepared, in_place) = match (previous, prepared) {
                (Some(mut old), Some((_, Err(e)))) => {
                    // The new version is broken: the last good one goes on serving.
                    tracing::warn!(plugin = %entry.id, "{e}; the last good version keeps serving");
                    old.info.stale = Some(e.to_string());
                    report.reloaded.retain(|id| *id != entry.id);
                    report.kept_last_good.push(entry.id.clone());
                    report.failed.push(Arc::new(e));
                    loaded.push(old);
                    continue;
                }
                (Some(old), Some((info, Ok(new)))) => {
                    let in_place = self.give_way(&old, &new.linked).await;
                    (Some((info, Ok(new))), in_place)
                }
                (Some(old), None) => {
                    self.unload_slot(&old).await;
                    (None, false)
                }
                (None, prepared) => (prepared, false),
            };
            if !report.reloaded.contains(&entry.id) && !report.retried.contains(&entry.id) {
                report.loaded.push(entry.id.clone());
            }
            let (info, error) = self.commit_entry(entry, prepared, in_place).await;
            if let Some(e) = error {
                report.failed.push(Arc::new(e));
            }
            loaded.push(PluginSlot {
                entry: entry.clone(),
                info,
                stamp,
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

    /// Makes way for the new version of a changed entry, which is ready: a provider that keeps
    /// its name is replaced in place (returns true), anything else is unloaded first.
    async fn give_way(&self, old: &PluginSlot, new: &Linked) -> bool {
        let in_place = match new {
            Linked::Provider(descriptor, _) => {
                old.info.kind == Some(PluginKind::Provider)
                    && old.info.name.as_deref() == Some(descriptor.name.as_str())
            }
            _ => false,
        };
        if in_place {
            self.events.emit(&Event::PluginUnloaded {
                id: old.entry.id.clone(),
            });
            tracing::info!(plugin = %old.entry.id, "replacing; runs going finish on the old version");
        } else {
            self.unload_slot(old).await;
        }
        in_place
    }

    /// Unloads every plugin, last loaded first. The plugins stay listed, in state `disposed`,
    /// until the next load or reconfigure.
    pub(crate) async fn unload_all(&self) {
        let mut slots = self.slots.lock().await;
        for slot in slots.iter_mut().rev() {
            self.unload_slot(slot).await;
            slot.info.state = PluginState::Disposed;
        }
    }

    /// The plugins of the current config, in config order.
    pub(crate) async fn plugins(&self) -> Vec<PluginInfo> {
        self.slots
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
                    if self.runtime.subagents.unregister(name).await {
                        self.tools.provider_removed(name).await;
                    }
                }
            }
            Some(PluginKind::Tool) => self.tools.remove_plugin(&slot.entry.id).await,
            Some(PluginKind::Observer) => {
                let handle = self
                    .observers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&slot.entry.id);
                if let Some(handle) = handle {
                    handle.detach(&self.events).await;
                }
            }
            None => {}
        }
        self.events.emit(&Event::PluginUnloaded {
            id: slot.entry.id.clone(),
        });
        tracing::info!(plugin = %slot.entry.id, "unloaded");
    }

    fn info_for(entry: &PluginEntry) -> PluginInfo {
        PluginInfo {
            id: entry.id.clone(),
            component: entry.component.clone(),
            kind: None,
            state: PluginState::Pending,
            name: None,
            follows: None,
            grants: None,
            limits: None,
            command: entry.command.clone(),
            stale: None,
        }
    }

    /// Phase one: compile, recognise, sandbox, link and describe. Touches no registry.
    async fn prepare_entry(
        &self,
        entry: &PluginEntry,
    ) -> Option<(PluginInfo, Result<Prepared, LoadError>)> {
        if entry.disabled {
            return None;
        }
        let mut info = Self::info_for(entry);
        let result = self.prepare(entry, &mut info).await;
        Some((info, result))
    }

    async fn prepare(
        &self,
        entry: &PluginEntry,
        info: &mut PluginInfo,
    ) -> Result<Prepared, LoadError> {
        if let Some(argv) = &entry.command {
            return self.prepare_acp(entry, argv, info);
        }
        let id = entry.id.clone();
        let engine_err = |source| LoadError::Engine {
            id: id.clone(),
            source,
        };
        // Compilation is CPU-bound: keep it off the async workers.
        let component = {
            let path = entry.component.clone();
            let cache = self.cache.clone();
            tokio::task::spawn_blocking(move || cache.compile(&path))
                .await
                .map_err(|e| engine_err(EngineError::Config(format!("compile task: {e}"))))?
                .map_err(engine_err)?
        };
        let (kind, version) = self
            .cache
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
        let sandbox = self.sandbox_for(entry)?;
        info.grants = Some(sandbox.grants().clone());
        info.limits = Some(sandbox.limits().clone());
        let sandbox_limits = sandbox.limits().clone();
        let linked = link(
            &self.runtime,
            entry.id.as_str().into(),
            (kind, version),
            &component,
            entry.config.to_string().into(),
            sandbox,
        )
        .await
        .map_err(|source| LoadError::Guest {
            id: id.clone(),
            component: entry.component.clone(),
            source,
        })?;
        Ok(Prepared {
            linked,
            sandbox_limits,
        })
    }

    /// An ACP entry: no component, a process per run; `acp` says which grants apply to it and
    /// what its provider is made of.
    fn prepare_acp(
        &self,
        entry: &PluginEntry,
        argv: &[String],
        info: &mut PluginInfo,
    ) -> Result<Prepared, LoadError> {
        info.kind = Some(PluginKind::Provider);
        crate::acp::check_grants(&entry.grants).map_err(|source| LoadError::Sandbox {
            id: entry.id.clone(),
            source,
        })?;
        let sandbox = self.sandbox_for(entry)?;
        info.grants = Some(sandbox.grants().clone());
        info.limits = Some(sandbox.limits().clone());
        let (descriptor, provider) = crate::acp::provider(
            entry,
            argv,
            &sandbox,
            self.runtime.cancel_grace,
            self.runtime.live.clone(),
        )
        .map_err(|message| LoadError::Acp {
            id: entry.id.clone(),
            message,
        })?;
        Ok(Prepared {
            linked: Linked::Provider(descriptor, Arc::new(provider)),
            sandbox_limits: sandbox.limits().clone(),
        })
    }

    /// Phase two: registers what was prepared, and records the outcome.
    /// `in_place`: the entry's provider is still registered under the same name, and is to be
    /// replaced rather than registered.
    async fn commit_entry(
        &self,
        entry: &PluginEntry,
        prepared: Option<(PluginInfo, Result<Prepared, LoadError>)>,
        in_place: bool,
    ) -> (PluginInfo, Option<LoadError>) {
        let Some((mut info, prepared)) = prepared else {
            let mut info = Self::info_for(entry);
            info.state = PluginState::Disabled;
            return (info, None);
        };
        let result = match prepared {
            Ok(prepared) => self.commit(entry, prepared, &mut info, in_place).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                info.state = PluginState::Active;
                if let Some(kind) = info.kind {
                    self.events.emit(&Event::PluginLoaded {
                        id: entry.id.clone(),
                        kind,
                    });
                }
                tracing::info!(plugin = %entry.id, kind = ?info.kind, "loaded");
                (info, None)
            }
            Err(e) => {
                let message = e.to_string();
                info.state = PluginState::Failed(message.clone());
                self.events.emit(&Event::PluginFailed {
                    id: entry.id.clone(),
                    error: message.clone(),
                });
                tracing::warn!(plugin = %entry.id, "{message}");
                (info, Some(e))
            }
        }
    }

    async fn commit(
        &self,
        entry: &PluginEntry,
        prepared: Prepared,
        info: &mut PluginInfo,
        in_place: bool,
    ) -> Result<(), LoadError> {
        let id = entry.id.clone();
        match prepared.linked {
            Linked::Provider(descriptor, provider) => {
                // Each run of the plugin passes its concurrency, time and output limits.
                let gate = RunGate::new(entry.id.as_str().into(), &prepared.sandbox_limits);
                let provider =
                    LimitedProvider::new(provider, gate, Arc::downgrade(&self.runtime.agents));
                let err = |source| LoadError::Provider {
                    id: id.clone(),
                    source,
                };
                let subagents = &self.runtime.subagents;
                if in_place {
                    let before = subagents.descriptor(&descriptor.name);
                    let d = subagents
                        .replace(&entry.id, descriptor, Arc::new(provider))
                        .map_err(err)?;
                    info.name = Some(d.name.clone());
                    if before.as_deref() != Some(&*d) {
                        // The tools that follow it word themselves after its descriptor.
                        self.tools.provider_removed(&d.name).await;
                        self.tools.provider_added(&d.name).await;
                    }
                } else {
                    let d = subagents
                        .register(&entry.id, descriptor, Arc::new(provider))
                        .map_err(err)?;
                    info.name = Some(d.name.clone());
                    self.tools.provider_added(&d.name).await;
                }
            }
            Linked::Tool(binding, tool) => {
                info.name = Some(binding.tool_name.clone());
                info.follows = binding.provider.clone();
                self.tools
                    .add_plugin(binding, Arc::new(tool))
                    .await
                    .map_err(|source| LoadError::Tool {
                        id: id.clone(),
                        source,
                    })?;
            }
            Linked::Observer(observer) => {
                let handle = observer.attach(&self.events);
                let previous = self
                    .observers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(entry.id.clone(), handle);
                if let Some(previous) = previous {
                    previous.detach(&self.events).await;
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
        let limits = entry.limits.apply(&self.defaults);
        let engine = &self.engine_options;
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
        // No grant may reach the compile cache: its artifacts are native code the host runs.
        let grants = entry
            .grants
            .resolve_avoiding(self.cache.guarded_dir())
            .map_err(|source| LoadError::Sandbox {
                id: entry.id.clone(),
                source,
            })?;
        Ok(Sandbox::new(limits, grants, engine.epoch_tick))
    }
}
