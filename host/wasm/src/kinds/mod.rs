//! The plugin kinds: what each is made from and what it declares.
//!
//! One module per kind: [`provider`] (a component behind `seam_core::Provider`), [`tool`] (behind
//! `seam_core::ToolSource`), [`observer`] (an event listener), and [`limited`], the run gate
//! every provider, a component's or an ACP agent's, is wrapped in. [`link`] is the one path from
//! a compiled component to a linked plugin that has declared itself: loading and `inspect` both
//! go through it. Every place that treats the kinds differently (linking here, committing and
//! unloading in the loader, the CLI's reports) matches on [`PluginKind`] or [`Linked`]
//! exhaustively, so a new kind is a new variant and the compiler lists the rest.

mod error;
pub mod limited;
pub mod observer;
pub mod provider;
mod runtime;
pub mod tool;

pub use error::{LinkFailure, PluginError};
pub use runtime::Runtime;

use std::sync::Arc;

use seam_core::tool::ToolBinding;
use seam_core::types::{PluginKind, ProviderDescriptor};
use wasmtime::component::Component;

use crate::sandbox::Sandbox;
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
