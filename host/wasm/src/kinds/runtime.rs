//! What every kind is made with.

use std::sync::Arc;
use std::time::Duration;

use seam_core::agent::AgentRegistry;
use seam_core::live::LiveCounts;
use seam_core::subagent::SubagentService;
use wasmtime::Engine;

use crate::linkers::Linkers;

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
