//! The plugin loader, after cordis: config entries become plugin instances with states; siblings
//! load concurrently; unload runs in reverse order; a new config is diffed against the old.
//!
//! Loading has two phases. Every new entry is prepared concurrently (compiled, checked, linked,
//! asked what it declares); then the prepared plugins are committed one by one in config order
//! (providers registered, tools added, observers attached). So whichever entry compiles first,
//! the entry listed first wins a contested provider or tool name.
//!
//! - [`plan`]: the pure diff of the loaded plugins against a new config;
//! - [`prepare`]: compile, recognise, sandbox, link (phase one, touching no registry);
//! - [`commit`]: register what was prepared, and unload (phase two), by kind.

mod commit;
mod plan;
mod prepare;
mod status;

pub use status::{LoadError, LoadReport, PluginInfo, PluginState, Pulled, Reload};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use seam_agent::model::ModelRegistry;
use seam_core::events::EventBus;
use seam_core::sync::lock;
use seam_core::tool::ToolRegistry;

use crate::cache::CompileCache;
use crate::config::{Config, EntrySource, PluginEntry};
use crate::engine::EngineOptions;
use crate::kinds::Runtime;
use crate::sandbox::Limits;

/// What the loader remembers of a component file, to notice a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
}

impl FileStamp {
    /// The stamp of the file an entry names (a component, an agent program), if it is one.
    fn of(source: &EntrySource) -> Option<FileStamp> {
        let meta = std::fs::metadata(source.written()).ok()?;
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
    /// While Winch's code serves it on a tiered host: what its Cranelift code is made from.
    tier_up: Option<TierUp>,
}

pub(crate) use seam_wasm::tiering::TierUp;

impl PluginSlot {
    /// Whether the component file was rewritten since this version was prepared.
    fn rebuilt(&self) -> bool {
        self.stamp.is_some() && FileStamp::of(&self.entry.source) != self.stamp
    }
}

/// A prepared plugin of any kind of entry: a component linked by [`crate::kinds::link`] (or a
/// provider an entry kind made), or tools an entry kind mounts.
pub(crate) enum Linked {
    /// A linked plugin, with what it declared; committed by its kind (`commit.rs`).
    Plugin(crate::kinds::Linked),
    /// Tools an entry that is not a component mounts when committed (an MCP server's).
    Mounts(Box<dyn crate::entries::MountTools>),
}

/// A prepared entry, waiting to be committed.
struct Prepared {
    linked: Linked,
    sandbox_limits: Limits,
    /// Served by Winch's code until this is compiled by Cranelift.
    tier_up: Option<TierUp>,
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
    /// What committed plugins keep until unloaded (an observer's subscription), by plugin id.
    attached: Mutex<HashMap<String, crate::kinds::Attached>>,
    defaults: Limits,
    engine_options: EngineOptions,
    /// Where components from registries are pulled into and checked.
    #[cfg(feature = "oci")]
    oci: Arc<crate::oci::Oci>,
    /// Plugins committed on Winch's code whose Cranelift compile is yet to be started
    /// ([`Loader::take_tier_ups`]).
    tier_ups: Mutex<Vec<TierUp>>,
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
        // Pulled components are kept inside the compile cache directory, under its trust.
        #[cfg(feature = "oci")]
        let oci = Arc::new(crate::oci::Oci::new(cache.usable_dir()));
        Self {
            runtime,
            cache,
            tools,
            events,
            models,
            slots: tokio::sync::Mutex::new(Vec::new()),
            attached: Mutex::new(HashMap::new()),
            defaults,
            engine_options,
            #[cfg(feature = "oci")]
            oci,
            tier_ups: Mutex::new(Vec::new()),
        }
    }

    /// Where components from registries are pulled into and checked.
    #[cfg(feature = "oci")]
    pub(crate) fn oci(&self) -> &crate::oci::Oci {
        &self.oci
    }

    /// Moves the loaded plugins to `config`: entries that left are unloaded (in reverse load
    /// order), changed ones are reloaded as `reload` says, failed ones retried, new ones loaded;
    /// unchanged active ones are not touched. What happens to each is decided by
    /// [`plan::Plan`]; this carries it out.
    pub(crate) async fn reconfigure(&self, config: &Config, reload: Reload) -> LoadReport {
        let mut slots = self.slots.lock().await;
        let mut report = LoadReport::default();
        self.models.configure(config.models.clone());
        self.runtime.agents.configure(config.agent.clone());
        self.runtime
            .subagents
            .set_max_tree_depth(config.agent.max_depth);
        self.runtime
            .subagents
            .approvals()
            .configure(config.approvals.clone());
        self.runtime
            .subagents
            .recording()
            .configure(config.recording.enabled, config.recording.max_mb);

        let old: Vec<PluginSlot> = std::mem::take(&mut *slots);
        let views: Vec<plan::Loaded<'_>> = old
            .iter()
            .map(|s| plan::Loaded {
                entry: &s.entry,
                state: &s.info.state,
                rebuilt: s.rebuilt(),
            })
            .collect();
        let plan = plan::Plan::new(&views, &config.plugins, reload);
        drop(views);
        for &i in &plan.unload {
            self.unload_slot(&old[i]).await;
        }
        report.unloaded = plan
            .removed
            .iter()
            .map(|&i| old[i].entry.id.clone())
            .collect();
        for &(at, why) in &plan.prepare {
            let id = config.plugins[at].id.clone();
            match why {
                plan::Why::Load => report.loaded.push(id),
                plan::Why::Reload => report.reloaded.push(id),
                plan::Why::Retry => report.retried.push(id),
            }
        }
        let mut old: Vec<Option<PluginSlot>> = old.into_iter().map(Some).collect();
        let mut keep: Vec<(usize, PluginSlot)> = plan
            .keep
            .iter()
            .filter_map(|&(i, at)| Some((at, old[i].take()?)))
            .collect();
        let mut serving: Vec<PluginSlot> =
            plan.serving.iter().filter_map(|&i| old[i].take()).collect();

        // Prepare concurrently; siblings do not wait for each other. Then commit in config
        // order, so the first entry wins a contested name whatever compiled first.
        let fresh: Vec<&PluginEntry> = plan
            .prepare
            .iter()
            .map(|&(at, _)| &config.plugins[at])
            .collect();
        // Stamped before compiling, so that a rewrite during the compile shows next time.
        let stamps: Vec<Option<FileStamp>> =
            fresh.iter().map(|e| FileStamp::of(&e.source)).collect();
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
            let tier_up = prepared
                .as_ref()
                .and_then(|(_, p)| p.as_ref().ok())
                .and_then(|p| p.tier_up.clone());
            let (info, error) = self.commit_entry(entry, prepared, in_place).await;
            let tier_up = tier_up.filter(|_| info.state == PluginState::Active);
            if let Some(e) = error {
                report.failed.push(Arc::new(e));
            }
            if let Some(tier_up) = &tier_up {
                lock(&self.tier_ups).push(tier_up.clone());
            }
            loaded.push(PluginSlot {
                entry: entry.clone(),
                info,
                stamp,
                tier_up,
            });
        }

        // The table follows the new config's order, which is also the unload order reversed.
        for (at, entry) in config.plugins.iter().enumerate() {
            if let Some(i) = keep.iter().position(|(k, _)| *k == at) {
                report.kept.push(entry.id.clone());
                slots.push(keep.swap_remove(i).1);
            } else if let Some(i) = loaded.iter().position(|l| l.entry.id == entry.id) {
                slots.push(loaded.swap_remove(i));
            }
        }
        report
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

    fn info_for(entry: &PluginEntry) -> PluginInfo {
        PluginInfo {
            id: entry.id.clone(),
            component: entry.component(),
            entry: entry.source.kind(),
            kind: None,
            version: None,
            state: PluginState::Pending,
            name: None,
            follows: None,
            grants: None,
            limits: None,
            command: entry.source.command().map(<[String]>::to_vec),
            shared_runs: entry.share_instance,
            about: None,
            host_memory: None,
            stale: None,
            pulled: None,
            compiler: None,
        }
    }
}

impl Loader {
    /// The plugins committed on Winch's code since the last call, for the host to compile with
    /// Cranelift in the background.
    pub(crate) fn take_tier_ups(&self) -> Vec<TierUp> {
        std::mem::take(&mut *lock(&self.tier_ups))
    }

    /// Swaps in the Cranelift code of a plugin that Winch's code serves, keeping everything else
    /// as it is: a provider is replaced in place (as `seam dev` replaces a rebuilt one), a
    /// tool's tools stay mounted and an observer keeps its subscription and queue, each with
    /// the new code behind it. Calls and runs going finish on the old code. The plugin's
    /// `plugin/unloaded` and `plugin/loaded` mark the swap. Nothing happens if the plugin was
    /// reloaded or unloaded since (its slot no longer awaits this tier-up).
    pub(crate) async fn swap_in(
        &self,
        tier_up: &TierUp,
        component: wasmtime::component::Component,
    ) {
        let mut slots = self.slots.lock().await;
        let Some(at) = slots.iter().position(|s| {
            s.tier_up.as_ref() == Some(tier_up) && s.info.state == PluginState::Active
        }) else {
            return;
        };
        slots[at].tier_up = None;
        let entry = slots[at].entry.clone();
        let (Some(kind), Some(version)) = (slots[at].info.kind, slots[at].info.version) else {
            return;
        };
        let mut info = slots[at].info.clone();
        info.compiler = Some(crate::engine::Compiler::Cranelift);
        let prepared = match self
            .link_compiled(&entry, &mut info, &component, kind, version, None)
            .await
        {
            Ok(prepared) => prepared,
            Err(e) => {
                // Winch's code goes on serving; a later load starts on Cranelift's artifact.
                tracing::warn!(plugin = %entry.id, "cannot swap in the Cranelift code: {e}");
                return;
            }
        };
        let Some(info) = self
            .swap_code(&slots[at], &entry, kind, info, prepared)
            .await
        else {
            return;
        };
        tracing::info!(plugin = %entry.id, "tiered up: what starts now runs Cranelift's code");
        slots[at].info = info;
    }
}
