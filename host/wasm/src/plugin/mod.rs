//! Components as plugins.
//!
//! - [`context`]: what a store serves (a run, a tool call), as data.
//! - [`state`]: the data of every plugin store, and how a store is made from a sandbox.
//! - One module per host-implemented WIT interface, each with its own `add_to_linker`: [`log`]
//!   (`host` and `types`), [`run_context`], [`agents`], [`subagents`].
//! - One module per plugin kind: [`wasm_provider`] behind `seam_core::Provider`, [`wasm_tool`] behind
//!   `seam_core::ToolSource`, [`wasm_observer`] as an event listener.
//!
//! [`Linkers`] assembles each world's linker from the interface modules, and [`link`] is the one
//! path from a compiled component to a linked plugin that has declared itself: loading and
//! `inspect` both go through it.

pub(crate) mod agents;
pub(crate) mod context;
pub(crate) mod log;
pub(crate) mod run_context;
pub(crate) mod state;
pub(crate) mod subagents;
pub(crate) mod wasm_observer;
pub(crate) mod wasm_provider;
pub(crate) mod wasm_tool;

use std::sync::Arc;
use std::time::Duration;

use seam_core::agent::AgentRegistry;
use seam_core::live::LiveCounts;
use seam_core::subagent::SubagentService;
use seam_core::tool::ToolBinding;
use seam_core::types::{PluginKind, ProviderDescriptor};
use thiserror::Error;
use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

use crate::sandbox::{LimitHit, Sandbox};
pub use state::StoreData;

/// What went wrong inside a guest: a limit it hit, a trap, or another engine error. Kept typed
/// until it is rendered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GuestFault {
    /// The guest hit one of its plugin's limits.
    #[error(transparent)]
    Limit(LimitHit),
    /// The guest trapped.
    #[error("{0}")]
    Trap(String),
    /// Any other failure while running guest code.
    #[error("{0}")]
    Other(String),
}

impl GuestFault {
    /// Classifies a wasmtime error (often a trap wrapped in a backtrace).
    pub fn from_error(e: &wasmtime::Error) -> Self {
        if let Some(hit) = LimitHit::find(e) {
            return Self::Limit(hit.clone());
        }
        if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
            if *trap == wasmtime::Trap::StackOverflow {
                return Self::Trap(format!("{trap} (the guest exceeded the wasm stack limit)"));
            }
            return Self::Trap(trap.to_string());
        }
        let text = format!("{e:#}");
        Self::Other(text.lines().next().unwrap_or("guest fault").to_string())
    }
}

/// Why a component could not become a plugin, or a call into it failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PluginError {
    /// The component imports something its world's linker does not provide.
    #[error("cannot link the {kind} component: {reason}")]
    Link {
        /// The component's kind.
        kind: PluginKind,
        /// The linker's explanation.
        reason: String,
    },
    /// A fresh instance could not be made.
    #[error("cannot instantiate: {0}")]
    Instantiate(GuestFault),
    /// The guest answered a call with an error of its own.
    #[error("{call} refused the config: {message}")]
    Refused {
        /// The export called (`describe`, `bind`).
        call: &'static str,
        /// The guest's message.
        message: String,
    },
    /// The guest faulted during a call.
    #[error("{call} failed: {fault}")]
    Fault {
        /// The export called.
        call: &'static str,
        /// What happened.
        fault: GuestFault,
    },
    /// The guest's answer breaks the contract (too large, empty, not JSON).
    #[error("{call} returned {problem}")]
    Malformed {
        /// The export called.
        call: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

/// One linker per world, each assembled from the interface modules its world imports.
pub(crate) struct Linkers {
    provider: Linker<StoreData>,
    tool: Linker<StoreData>,
    observer: Linker<StoreData>,
}

impl Linkers {
    /// The linkers of every world, on `engine`.
    pub(crate) fn new(engine: &Engine) -> wasmtime::Result<Self> {
        let base = || -> wasmtime::Result<Linker<StoreData>> {
            let mut linker = Linker::new(engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
            log::add_to_linker(&mut linker)?;
            Ok(linker)
        };
        let mut provider = base()?;
        run_context::add_to_linker(&mut provider)?;
        agents::add_to_linker(&mut provider)?;
        let mut tool = base()?;
        subagents::add_to_linker(&mut tool)?;
        let observer = base()?;
        Ok(Self {
            provider,
            tool,
            observer,
        })
    }

    /// The linker of `kind`'s world.
    pub(crate) fn of(&self, kind: PluginKind) -> &Linker<StoreData> {
        match kind {
            PluginKind::Provider => &self.provider,
            PluginKind::Tool => &self.tool,
            PluginKind::Observer => &self.observer,
        }
    }
}

/// What plugins are made with, owned by the host. Each kind copies what it needs: a provider
/// keeps the agent registry only weakly, since the registry reaches providers back through its
/// tools and a strong reference would keep the whole host alive.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linkers: Linkers,
    pub(crate) live: Arc<LiveCounts>,
    pub(crate) subagents: Arc<SubagentService>,
    /// The agent runtime in-process providers create their children on.
    pub(crate) agents: Arc<AgentRegistry>,
    /// How long a cancelled tool call may wind down before the host drops it.
    pub(crate) cancel_grace: Duration,
}

/// A linked plugin, with what it declared.
pub(crate) enum Linked {
    /// A provider and its frozen descriptor.
    Provider(ProviderDescriptor, wasm_provider::WasmProvider),
    /// A tool and its binding.
    Tool(ToolBinding, wasm_tool::WasmTool),
    /// An observer (it declares nothing).
    Observer(wasm_observer::WasmObserver),
}

/// Links `component` as a plugin of `kind` named `plugin`, and asks it what it declares with
/// `config` (a provider's descriptor, a tool's binding), in a throwaway instance.
pub(crate) async fn link(
    runtime: &Runtime,
    plugin: Arc<str>,
    kind: PluginKind,
    component: &Component,
    config: Arc<str>,
    sandbox: Sandbox,
) -> Result<Linked, PluginError> {
    let pre = runtime
        .linkers
        .of(kind)
        .instantiate_pre(component)
        .map_err(|e| PluginError::Link {
            kind,
            reason: format!("{e:#}"),
        })?;
    let link_err = |e: wasmtime::Error| PluginError::Link {
        kind,
        reason: format!("{e:#}"),
    };
    Ok(match kind {
        PluginKind::Provider => {
            let provider = wasm_provider::WasmProvider::new(runtime, plugin, pre, config, sandbox)
                .map_err(link_err)?;
            let descriptor = provider.describe().await?;
            Linked::Provider(descriptor, provider)
        }
        PluginKind::Tool => {
            let tool = wasm_tool::WasmTool::new(runtime, plugin, pre, config, sandbox)
                .map_err(link_err)?;
            let binding = tool.bind().await?;
            Linked::Tool(binding, tool)
        }
        PluginKind::Observer => Linked::Observer(
            wasm_observer::WasmObserver::new(runtime, plugin, pre, config, sandbox)
                .map_err(link_err)?,
        ),
    })
}
