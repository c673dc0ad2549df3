//! What a store serves, as data: the run or the tool call the host interfaces answer from.
//! The interface modules read these; they never depend on each other.

use seam_core::sync::lock;
use std::sync::{Arc, Mutex};

use seam_core::agent::AgentRegistry;
use seam_core::budget::{Charge, MemoryBudget, OverBudget};
use seam_core::subagent::{RunContext, SubagentRun, SubagentService};
use seam_core::types::{ParentRef, StartRequest};
use tokio_util::sync::CancellationToken;

use crate::sandbox::gate::RunGate;
use crate::sandbox::{Limit, LimitHit, Sandbox};

/// What a provider store serving one run holds: the run, its request, and the agent runtime
/// its child is created on (for `agents`).
pub(crate) struct RunEnv {
    pub(crate) ctx: RunContext,
    pub(crate) request: Arc<StartRequest>,
    pub(crate) agents: Arc<AgentRegistry>,
    /// What the run's plugin may make the host hold.
    pub(crate) quota: Quota,
    /// `max_output_bytes`: the run's progress counts against it.
    pub(crate) max_output_bytes: usize,
    /// Bytes of progress reported so far.
    pub(crate) progress_bytes: usize,
    /// Whether progress past the cap was already reported (logged once).
    pub(crate) progress_cut: bool,
    /// The runs this run started through `subagents`, disposed when it ends.
    pub(crate) runs: Arc<Mutex<CallRuns>>,
    /// The subagent service, for `subagents` from a provider.
    pub(crate) subagents: Arc<SubagentService>,
    /// The plugin's limits, for the size of the requests it sends.
    pub(crate) gate: RunGate,
}

impl Drop for RunEnv {
    /// The run is over (returned, or its store was dropped on dispose or an enforced cancel):
    /// the runs it started go with it, foreground and background.
    fn drop(&mut self) {
        let runs: Vec<SubagentRun> = std::mem::take(&mut *lock(&self.runs))
            .into_values()
            .map(|(run, _)| run)
            .collect();
        let owner = self.ctx.id().to_string();
        // The usual run starts nothing: no task for it.
        if runs.is_empty() && !self.subagents.has_background(&owner) {
            return;
        }
        let subagents = self.subagents.clone();
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            futures::future::join_all(runs.iter().map(|r| r.dispose())).await;
            subagents.dispose_background_of(&owner).await;
        });
    }
}

/// What a tool store serving one call holds.
pub(crate) struct CallEnv {
    pub(crate) subagents: Arc<SubagentService>,
    pub(crate) caller: ParentRef,
    pub(crate) abort: CancellationToken,
    /// The runs this call started and has not disposed, with what they cost the plugin; shared
    /// with the host so that they are disposed when the call ends even if the guest forgot,
    /// trapped, or was dropped mid-call. A run the guest disposes leaves the table.
    pub(crate) runs: Arc<Mutex<CallRuns>>,
    /// The tool plugin's limits, for the size of the requests it sends.
    pub(crate) gate: RunGate,
    /// What the tool plugin may make the host hold.
    pub(crate) quota: Quota,
}

/// The live runs of one tool call, by run id.
pub(crate) type CallRuns = std::collections::HashMap<String, (SubagentRun, Charge)>;

/// A plugin's host-memory budget and count caps, as one store's imports see them.
#[derive(Clone)]
pub(crate) struct Quota {
    pub(crate) plugin: Arc<str>,
    pub(crate) budget: Arc<MemoryBudget>,
    /// `max_runs_per_call`.
    pub(crate) max_runs_per_call: usize,
    /// `max_queued_messages`.
    pub(crate) max_queued_messages: usize,
}

/// Host bytes one run handle costs beyond its request: the run's shared state, its handle in
/// the call's table and the store's resource entry.
pub(crate) const RUN_OVERHEAD: usize = 4 << 10;

/// Host bytes one queued message costs beyond its text.
pub(crate) const MESSAGE_OVERHEAD: usize = 64;

impl Quota {
    /// The quota of `plugin` under `sandbox`'s limits and budget.
    pub(crate) fn of(plugin: Arc<str>, sandbox: &Sandbox) -> Self {
        Self {
            plugin,
            budget: sandbox.host_memory().clone(),
            max_runs_per_call: sandbox.limits().max_runs_per_call,
            max_queued_messages: sandbox.limits().max_queued_messages,
        }
    }

    /// Charges `bytes` to the plugin, or fails naming `host_memory_mb`.
    pub(crate) fn charge(&self, bytes: usize) -> Result<Charge, LimitHit> {
        self.budget
            .charge(bytes)
            .map_err(|OverBudget { limit, used, asked }| {
                self.hit(Limit::HostMemory {
                    max: limit,
                    used,
                    asked,
                })
            })
    }

    /// A limit hit of this plugin, logged.
    pub(crate) fn hit(&self, limit: Limit) -> LimitHit {
        LimitHit::logged(&self.plugin, limit)
    }
}
