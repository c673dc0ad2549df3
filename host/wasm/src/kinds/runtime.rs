//! What every kind is made with.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use seam_agent::agent::AgentRegistry;
use seam_core::live::LiveCounts;
use seam_core::subagent::SubagentService;
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::linkers::Linkers;

/// What plugins are made with, owned by the host. Each kind copies what it needs: a provider
/// keeps the agent registry only weakly, since the registry reaches providers back through its
/// tools and a strong reference would keep the whole host alive.
pub struct Runtime {
    /// The engine plugins run on.
    pub engine: Engine,
    /// One linker per world and version, for `engine`.
    pub linkers: Linkers,
    /// A tiered host's Winch engine, and its linkers, made on first use (most hosts never
    /// compile a component large enough to need them).
    pub baseline: Option<(Engine, OnceLock<Linkers>)>,
    /// The host's live counts (runs, instances, processes).
    pub live: Arc<LiveCounts>,
    /// The registry of providers runs start on.
    pub subagents: Arc<SubagentService>,
    /// The agent runtime in-process providers create their children on.
    pub agents: Arc<AgentRegistry>,
    /// How long a cancelled tool call may wind down before the host drops it.
    pub cancel_grace: Duration,
}

impl Runtime {
    /// The linkers for `component`'s engine: the main one's, or the Winch engine's for a
    /// component a tiered host compiled with Winch.
    pub fn linkers_for(&self, component: &Component) -> wasmtime::Result<&Linkers> {
        match &self.baseline {
            Some((engine, linkers)) if Engine::same(engine, component.engine()) => {
                if let Some(linkers) = linkers.get() {
                    return Ok(linkers);
                }
                let made = Linkers::new(engine)?;
                Ok(linkers.get_or_init(|| made))
            }
            _ => Ok(&self.linkers),
        }
    }
}
