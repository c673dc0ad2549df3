//! The plugin kinds: what each is made from and what it declares.
//!
//! One module per kind: [`provider`] (a component behind `seam_core::Provider`), [`tool`] (behind
//! `seam_core::ToolSource`), [`observer`] (an event listener), and [`limited`], the run gate
//! every provider, a component's or an ACP agent's, is wrapped in. [`link`] is the one path from
//! a compiled component to a linked plugin that has declared itself: loading and `inspect` both
//! go through it. Every place that treats the kinds differently (linking here, committing and
//! unloading in the loader, the CLI's reports) matches on [`PluginKind`] or [`Linked`]
//! exhaustively, so a new kind is a new variant and the compiler lists the rest.

pub(crate) mod limited;
pub(crate) mod observer;
pub(crate) mod provider;
pub(crate) mod tool;

use std::sync::Arc;
use std::time::Duration;

use seam_core::agent::AgentRegistry;
use seam_core::live::LiveCounts;
use seam_core::subagent::SubagentService;
use seam_core::tool::ToolBinding;
use seam_core::types::{PluginKind, ProviderDescriptor};
use thiserror::Error;
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::fault::GuestFault;
use crate::sandbox::Sandbox;
use crate::versions::linkers::Linkers;
use crate::versions::WitVersion;

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
    /// The guest answered a call (an observer's `on-event`) with an error of its own.
    #[error("{call} returned an error: {message}")]
    Answered {
        /// The export called.
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

/// A linker's refusal in words a plugin author can act on: which import the host does not
/// provide, or which function of it has another type than the host's.
fn explain_link(e: &wasmtime::Error) -> String {
    let text = crate::engine::one_line(&format!("{e:#}"));
    let between = |s: &str, start: &str, end: &str| {
        let from = s.find(start)? + start.len();
        let to = from + s[from..].find(end)?;
        Some(s[from..to].to_string())
    };
    let Some(instance) = between(&text, "component imports instance `", "`") else {
        return text;
    };
    let function = between(&text, "instance export `", "`");
    if text.contains("implementation is missing")
        || (text.contains("was not found") && function.is_none())
    {
        return match function {
            Some(f) => {
                format!("needs `{instance}` (its function `{f}`), which this host does not provide")
            }
            None => format!("needs `{instance}`, which this host does not provide"),
        };
    }
    let detail = text
        .rsplit_once("has the wrong type: ")
        .map_or(text.as_str(), |(_, d)| d);
    match function {
        Some(f) => format!(
            "imports `{instance}` with function `{f}` of another type than this host's: {detail}"
        ),
        None => format!("imports `{instance}` in a form this host does not provide: {detail}"),
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
    /// A provider (a component's, or an ACP agent's) and its frozen descriptor.
    Provider(ProviderDescriptor, Arc<dyn seam_core::subagent::Provider>),
    /// A tool and its binding.
    Tool(ToolBinding, tool::WasmTool),
    /// An observer (it declares nothing).
    Observer(observer::WasmObserver),
}

/// Links `component` as a plugin of `kind` named `plugin`, and asks it what it declares with
/// `config` (a provider's descriptor, a tool's binding), in a throwaway instance.
pub(crate) async fn link(
    runtime: &Runtime,
    plugin: Arc<str>,
    (kind, version): (PluginKind, WitVersion),
    component: &Component,
    config: Arc<str>,
    sandbox: Sandbox,
) -> Result<Linked, PluginError> {
    let pre = runtime
        .linkers
        .of(kind, version)
        .instantiate_pre(component)
        .map_err(|e| PluginError::Link {
            kind,
            reason: explain_link(&e),
        })?;
    let link_err = |e: wasmtime::Error| PluginError::Link {
        kind,
        reason: crate::engine::one_line(&format!("{e:#}")),
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
