//! Phase two of a load: what was prepared is registered, by kind, in config order; and the way
//! back, unloading a plugin from the registry its kind joined.

use seam_core::sync::lock;

use seam_core::events::Event;
use seam_core::types::PluginKind;

use super::{Linked, LoadError, Loader, PluginInfo, PluginSlot, PluginState, Prepared};
use crate::config::PluginEntry;
use crate::kinds;

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
            Linked::Plugin(linked) => {
                let mut committed = kinds::Committed::default();
                let result = linked
                    .commit(
                        &id,
                        &prepared.sandbox_limits,
                        in_place,
                        &self.registries(),
                        &mut committed,
                    )
                    .await;
                info.name = committed.name;
                info.follows = committed.follows;
                if let Some(attached) = committed.attached {
                    let previous = lock(&self.attached).insert(id.clone(), attached);
                    if let Some(previous) = previous {
                        previous.detach(&self.events).await;
                    }
                }
                result.map_err(|source| LoadError::Commit { id, source })?;
            }
            Linked::Mounts(mounts) => {
                // No one name: the tools it mounts are the registry's to list (and change).
                mounts
                    .mount(&self.tools)
                    .await
                    .map_err(|source| LoadError::Mount { id, source })?;
            }
        }
        Ok(())
    }

    /// The registries a plugin joins and leaves.
    fn registries(&self) -> kinds::Registries<'_> {
        kinds::Registries {
            runtime: &self.runtime,
            tools: &self.tools,
            events: &self.events,
        }
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
        let Linked::Plugin(linked) = prepared.linked else {
            // An entry that is not a component has no code to tier.
            return None;
        };
        // Taken out while it swaps (the slots are locked meanwhile), and put back.
        let attached = lock(&self.attached).remove(&entry.id);
        let swapped = linked
            .swap_code(&entry.id, attached.as_ref(), &self.registries())
            .await;
        if let Some(attached) = attached {
            lock(&self.attached).insert(entry.id.clone(), attached);
        }
        match swapped {
            Ok(true) => {
                self.emit_loaded(&entry.id, kind);
                Some(info)
            }
            Ok(false) => None,
            // Committed in place, as `seam dev` replaces a rebuilt provider.
            Err(linked) => {
                let prepared = Prepared {
                    linked: Linked::Plugin(linked),
                    ..prepared
                };
                let in_place = self.give_way(old, &prepared.linked).await;
                let (info, error) = self
                    .commit_entry(entry, Some((info, Ok(prepared))), in_place)
                    .await;
                if let Some(e) = error {
                    // The provider it was to replace goes on serving, on Winch's code.
                    tracing::warn!(plugin = %entry.id, "the Cranelift code did not load: {e}");
                    return None;
                }
                Some(info)
            }
        }
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
            Linked::Plugin(linked) => {
                linked.replaces_in_place(old.info.kind, old.info.name.as_deref())
            }
            Linked::Mounts(_) => false,
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
        if let Some(kind) = slot.info.kind {
            let attached = lock(&self.attached).remove(&slot.entry.id);
            kinds::unload(
                kind,
                &slot.entry.id,
                slot.info.name.as_deref(),
                attached,
                &self.registries(),
            )
            .await;
        }
        self.events.emit(&Event::PluginUnloaded {
            id: slot.entry.id.clone(),
        });
        tracing::info!(plugin = %slot.entry.id, "unloaded");
    }
}
