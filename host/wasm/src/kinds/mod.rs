//! The plugin kinds: what each is made from and what it declares.
//!
//! One module per kind: [`provider`] (a component behind `seam_core::Provider`), [`tool`] (behind
//! `seam_core::ToolSource`), [`observer`] (an event listener), and [`limited`], the run gate
//! every provider, a component's or an ACP agent's, is wrapped in; and [`shared`], the instances a
//! provider with an async `run` may share between runs. A kind's module owns its
//! world's exports in every version that has it (its `versioned!` enums and export calls).
//!
//! This module is the one place that treats the kinds differently, each an exhaustive `match`
//! on [`PluginKind`] or [`Linked`], so a new kind is a variant and the compiler lists the rest:
//! [`link`], the one path from a compiled component to a linked plugin (loading and `inspect`
//! go through it); [`Linked::commit`], [`Linked::swap_code`], [`Linked::replaces_in_place`] and
//! [`unload`], which the host's loader calls without naming a kind; and [`what`] and
//! [`not_called`], the words of `seam check` and `seam conformance`.

mod error;
pub mod limited;
pub mod observer;
pub mod provider;
mod provider_exports;
mod runtime;
pub mod shared;
pub mod tool;

pub use error::{LinkFailure, PluginError};
pub use runtime::Runtime;

use std::sync::Arc;

use seam_core::events::EventBus;
use seam_core::subagent::SubagentError;
use seam_core::tool::{ToolBinding, ToolError, ToolRegistry};
use seam_core::types::{PluginKind, ProviderDescriptor};
use wasmtime::component::Component;

use crate::sandbox::gate::RunGate;
use crate::sandbox::{Limits, Sandbox};
use crate::versions::WitVersion;

/// A linked plugin, with what it declared.
pub enum Linked {
    /// A provider (a component's, or an ACP agent's) and its frozen descriptor.
    Provider(ProviderDescriptor, Arc<dyn seam_core::subagent::Provider>),
    /// A tool and its binding.
    Tool(ToolBinding, tool::WasmTool),
    /// An observer (it declares nothing).
    Observer(observer::WasmObserver),
}

/// Links `component` as a plugin of `kind` named `plugin`, and asks it what it declares with
/// `config` (a provider's descriptor, a tool's binding), in a throwaway instance.
pub async fn link(
    runtime: &Runtime,
    plugin: Arc<str>,
    (kind, version): (PluginKind, WitVersion),
    component: &Component,
    config: Arc<str>,
    sandbox: Sandbox,
) -> Result<Linked, PluginError> {
    let linkers = runtime
        .linkers_for(component)
        .map_err(|e| PluginError::Link {
            kind,
            reason: Box::new(LinkFailure::other(&e)),
        })?;
    let pre = linkers
        .of(kind, version)
        .ok_or_else(|| PluginError::Link {
            kind,
            reason: Box::new(LinkFailure::NoWorld { version, kind }),
        })?
        .instantiate_pre(component)
        .map_err(|e| PluginError::Link {
            kind,
            reason: Box::new(LinkFailure::from_linker(&e)),
        })?;
    let link_err = |e: wasmtime::Error| PluginError::Link {
        kind,
        reason: Box::new(LinkFailure::other(&e)),
    };
    Ok(match kind {
        PluginKind::Provider => {
            let provider =
                provider::WasmProvider::new(runtime, plugin, version, pre, config, sandbox)
                    .map_err(link_err)?;
            let descriptor = provider.describe().await?;
            Linked::Provider(descriptor, Arc::new(provider))
        }
        PluginKind::Tool => {
            let tool = tool::WasmTool::new(runtime, plugin, version, pre, config, sandbox)
                .map_err(link_err)?;
            let binding = tool.bind().await?;
            Linked::Tool(binding, tool)
        }
        PluginKind::Observer => Linked::Observer(
            observer::WasmObserver::new(runtime, plugin, version, pre, config, sandbox)
                .map_err(link_err)?,
        ),
    })
}

/// What a component plugin declared, as the loader recorded it: what `seam check` words.
pub struct Declared<'a> {
    /// The name it registered or mounts (a provider's, a tool's).
    pub name: Option<&'a str>,
    /// The provider a tool follows.
    pub follows: Option<&'a str>,
    /// ` (not mounted)` for a tool the registry has not mounted, or empty.
    pub unmounted: &'a str,
    /// ` (last good version; see the error below)` when a newer version failed, or empty.
    pub stale: &'a str,
}

/// What `seam check` says a loaded component of `kind` registered or mounts, in a few words.
pub fn what(kind: PluginKind, d: &Declared<'_>) -> String {
    let Declared {
        name,
        follows,
        unmounted,
        stale,
    } = d;
    match (kind, name, follows) {
        (PluginKind::Provider, Some(name), _) => format!("provider `{name}`{stale}"),
        (PluginKind::Tool, Some(name), Some(follows)) => {
            format!("tool `{name}` follows provider `{follows}`{unmounted}{stale}")
        }
        (PluginKind::Tool, Some(name), None) => format!("tool `{name}`{unmounted}{stale}"),
        (PluginKind::Observer, _, _) => format!("observer{stale}"),
        // Not loaded (yet): nothing registered.
        (PluginKind::Provider | PluginKind::Tool, None, _) => String::new(),
    }
}

/// For a kind whose exports `seam conformance` does not call (an observer's, called by events),
/// the step it reports and why it skips it.
pub fn not_called(kind: PluginKind) -> Option<(&'static str, &'static str)> {
    match kind {
        PluginKind::Provider | PluginKind::Tool => None,
        PluginKind::Observer => Some((
            "observe",
            "an observer declares nothing and is called by events; it linked",
        )),
    }
}

/// The host's registries a plugin joins when committed and leaves when unloaded.
pub struct Registries<'a> {
    /// The runtime: its providers (`subagents`) and agents.
    pub runtime: &'a Runtime,
    /// The model-facing tools.
    pub tools: &'a Arc<ToolRegistry>,
    /// The event bus observers listen on.
    pub events: &'a EventBus,
}

/// What a committed plugin keeps beside the registries until it is unloaded (an observer's
/// subscription); the loader holds it by plugin id.
pub struct Attached(observer::ObserverHandle);

impl Attached {
    /// Ends it (an observer stops listening, after draining what is queued).
    pub async fn detach(self, events: &EventBus) {
        self.0.detach(events).await;
    }
}

/// What a plugin registered when committed.
#[derive(Default)]
pub struct Committed {
    /// The name it registered (a provider's, a tool's).
    pub name: Option<String>,
    /// The provider a tool follows.
    pub follows: Option<String>,
    /// What it keeps until unloaded.
    pub attached: Option<Attached>,
}

/// Why a registry refused a plugin.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The provider could not be registered.
    #[error(transparent)]
    Provider(#[from] SubagentError),
    /// The tool could not be added.
    #[error(transparent)]
    Tool(#[from] ToolError),
}

impl Linked {
    /// Whether it replaces the plugin of kind `old` and name `name` in place rather than after
    /// it is unloaded: a provider that keeps its name (runs going finish on the old one).
    pub fn replaces_in_place(&self, old: Option<PluginKind>, name: Option<&str>) -> bool {
        match self {
            Linked::Provider(descriptor, _) => {
                old == Some(PluginKind::Provider) && name == Some(descriptor.name.as_str())
            }
            Linked::Tool(..) | Linked::Observer(_) => false,
        }
    }

    /// Registers it for plugin `id` with `limits`: a provider behind its run gate (replacing the
    /// one of its name if `in_place`), a tool added, an observer listening. `committed` gets
    /// what it registered, as far as it got (a refused tool still names itself).
    pub async fn commit(
        self,
        id: &str,
        limits: &Limits,
        in_place: bool,
        to: &Registries<'_>,
        committed: &mut Committed,
    ) -> Result<(), CommitError> {
        match self {
            Linked::Provider(descriptor, provider) => {
                // Each run of the plugin passes its concurrency, time and output limits.
                let gate = RunGate::new(id.into(), limits);
                let provider = limited::LimitedProvider::new(
                    provider,
                    gate,
                    Arc::downgrade(&to.runtime.agents),
                );
                let subagents = &to.runtime.subagents;
                let d = if in_place {
                    let before = subagents.descriptor(&descriptor.name);
                    let d = subagents.replace(id, descriptor, Arc::new(provider))?;
                    if before.as_deref() != Some(&*d) {
                        // The tools that follow it word themselves after its descriptor.
                        to.tools.provider_removed(&d.name).await;
                        to.tools.provider_added(&d.name).await;
                    }
                    d
                } else {
                    let d = subagents.register(id, descriptor, Arc::new(provider))?;
                    to.tools.provider_added(&d.name).await;
                    d
                };
                committed.name = Some(d.name.clone());
            }
            Linked::Tool(mut binding, tool) => {
                binding.approve = tool.approve(&binding.tool_name);
                committed.name = Some(binding.tool_name.clone());
                committed.follows = binding.provider.clone();
                to.tools.add_plugin(binding, Arc::new(tool)).await?;
            }
            Linked::Observer(observer) => {
                committed.attached = Some(Attached(observer.attach(to.events)));
            }
        }
        Ok(())
    }

    /// Swaps it, the same plugin on other code, in behind what plugin `id` registered, keeping
    /// its registration: a tool stays mounted, an observer keeps its subscription and queue.
    /// `Ok(false)` if what it registered is gone; `Err(self)` for a kind swapped by committing
    /// it in place (a provider).
    pub async fn swap_code(
        self,
        id: &str,
        attached: Option<&Attached>,
        to: &Registries<'_>,
    ) -> Result<bool, Linked> {
        let unloaded = seam_core::events::Event::PluginUnloaded { id: id.to_string() };
        match self {
            Linked::Provider(..) => Err(self),
            Linked::Tool(_, tool) => {
                to.events.emit(&unloaded);
                Ok(to.tools.replace_source(id, Arc::new(tool)).await)
            }
            Linked::Observer(observer) => {
                to.events.emit(&unloaded);
                match attached {
                    Some(Attached(handle)) => {
                        handle.swap_code(observer);
                        Ok(true)
                    }
                    None => Ok(false),
                }
            }
        }
    }
}

/// Unregisters plugin `id` of `kind`, which registered `name` and keeps `attached`.
pub async fn unload(
    kind: PluginKind,
    id: &str,
    name: Option<&str>,
    attached: Option<Attached>,
    from: &Registries<'_>,
) {
    match kind {
        PluginKind::Provider => {
            if let Some(name) = name {
                if from.runtime.subagents.unregister(name).await {
                    from.tools.provider_removed(name).await;
                }
            }
        }
        PluginKind::Tool => from.tools.remove_plugin(id).await,
        PluginKind::Observer => {}
    }
    if let Some(attached) = attached {
        attached.detach(from.events).await;
    }
}
