//! What a store serves, as data: the run or the tool call the host interfaces answer from.
//! The interface modules read these; they never depend on each other.

use std::sync::{Arc, Mutex};

use seam_core::agent::AgentRegistry;
use seam_core::subagent::{RunContext, SubagentRun, SubagentService};
use seam_core::types::{ParentRef, StartRequest};
use tokio_util::sync::CancellationToken;

use crate::sandbox::gate::RunGate;

/// What a provider store serving one run holds: the run, its request, and the agent runtime
/// its child is created on (for `agents`).
pub(crate) struct RunEnv {
    pub(crate) ctx: RunContext,
    pub(crate) request: StartRequest,
    pub(crate) agents: Arc<AgentRegistry>,
}

/// What a tool store serving one call holds.
pub(crate) struct CallEnv {
    pub(crate) subagents: Arc<SubagentService>,
    pub(crate) caller: ParentRef,
    pub(crate) abort: CancellationToken,
    /// Every run this call started, shared with the host so that they are disposed when the
    /// call ends even if the guest forgot, trapped, or was dropped mid-call.
    pub(crate) runs: Arc<Mutex<Vec<SubagentRun>>>,
    /// The tool plugin's limits, for the size of the requests it sends.
    pub(crate) gate: RunGate,
}
