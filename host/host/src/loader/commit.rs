//! Phase two of a load: what was prepared is registered, by kind, in config order; and the way
//! back, unloading a plugin from the registry its kind joined.

use seam_core::sync::lock;
use std::sync::Arc;

use seam_core::events::Event;
use seam_core::types::PluginKind;

use super::{Linked, LoadError, Loader, PluginInfo, PluginSlot, PluginState, Prepared};
use crate::config::PluginEntry;
use crate::kinds;
use crate::kinds::limited::LimitedProvider;
use crate::sandbox::gate::RunGate;

impl Loader {
    /// Phase two: registers what was prepared, and records the outcome.
    /// `in_place`: the entry's provider is still registered under the same name, and is to be
    /// replaced rather than registered.
    pub(super) async fn commit_entry(
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
            Linked::Plugin(kinds::Linked::Provider(descriptor, provider)) => {
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
            Linked::Plugin(kinds::Linked::Tool(binding, tool)) => {
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
            Linked::Mounts(mounts) => {
                // No one name: the tools it mounts are the registry's to list (and change).
                mounts
                    .mount(&self.tools)
                    .await
                    .map_err(|source| LoadError::Mount {
                        id: id.clone(),
                        source,
                    })?;
            }
            Linked::Plugin(kinds::Linked::Observer(observer)) => {
                let handle = observer.attach(&self.events);
                let previous = lock(&self.observers).insert(entry.id.clone(), handle);
                if let Some(previous) = previous {
                    previous.detach(&self.events).await;
                }
            }
        }
        Ok(())
    }

    /// Swaps `prepared`, the Cranelift code of the plugin in `old`, in behind what its kind
    /// registered (see [`Loader::swap_in`]); the new info, or `None` if nothing was swapped.
    pub(super) async fn swap_code(
        &self,
        old: &PluginSlot,
        entry: &PluginEntry,
        kind: PluginKind,
        info: PluginInfo,
        prepared: Prepared,
    ) -> Option<PluginInfo> {
        let unloaded = Event::PluginUnloaded {
            id: entry.id.clone(),
        };
        Some(match prepared.linked {
            Linked::Plugin(kinds::Linked::Provider(..)) => {
                let in_place = self.give_way(old, &prepared.linked).await;
                let (info, error) = self
                    .commit_entry(entry, Some((info, Ok(prepared))), in_place)
                    .await;
                if let Some(e) = error {
                    // The provider it was to replace goes on serving, on Winch's code.
                    tracing::warn!(plugin = %entry.id, "the Cranelift code did not load: {e}");
                    return None;
                }
                info
            }
            Linked::Plugin(kinds::Linked::Tool(_, tool)) => {
                self.events.emit(&unloaded);
                if !self.tools.replace_source(&entry.id, Arc::new(tool)).await {
                    return None;
                }
                self.emit_loaded(&entry.id, kind);
                info
            }
            Linked::Plugin(kinds::Linked::Observer(observer)) => {
                self.events.emit(&unloaded);
                match lock(&self.observers).get(&entry.id) {
                    Some(handle) => handle.swap_code(observer),
                    None => return None,
                }
                self.emit_loaded(&entry.id, kind);
                info
            }
            // An entry that is not a component has no code to tier.
            Linked::Mounts(_) => return None,
        })
    }

    fn emit_loaded(&self, id: &str, kind: PluginKind) {
        self.events.emit(&Event::PluginLoaded {
            id: id.to_string(),
            kind,
        });
    }

    /// Makes way for the new version of a changed entry, which is ready: a provider that keeps
    /// its name is replaced in place (returns true), anything else is unloaded first.
    pub(super) async fn give_way(&self, old: &PluginSlot, new: &Linked) -> bool {
        let in_place = match new {
            Linked::Plugin(kinds::Linked::Provider(descriptor, _)) => {
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

    pub(super) async fn unload_slot(&self, slot: &PluginSlot) {
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
                let handle = lock(&self.observers).remove(&slot.entry.id);
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
}
