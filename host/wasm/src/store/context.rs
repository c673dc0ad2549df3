//! What a store serves, as data: the run or the tool call the host interfaces answer from.
//! The interface modules read these; they never depend on each other.

use seam_core::sync::lock;
use std::sync::{Arc, Mutex};

use seam_agent::agent::AgentRegistry;
use seam_core::budget::{Charge, MemoryBudget, OverBudget};
use seam_core::subagent::{RunContext, SubagentRun, SubagentService};
use seam_core::types::{ParentRef, StartRequest};
use tokio_util::sync::CancellationToken;

use crate::sandbox::gate::RunGate;
use crate::sandbox::{Limit, LimitHit, Sandbox};

/// What a provider store serving one run holds: the run, its request, and the agent runtime
/// its child is created on (for `agents`).
pub struct RunEnv {
    /// The run.
    pub ctx: RunContext,
    /// What the run was started with.
    pub request: Arc<StartRequest>,
    /// The agent runtime the run's child is created on.
    pub agents: Arc<AgentRegistry>,
    /// What the run's plugin may make the host hold.
    pub quota: Quota,
    /// `max_output_bytes`: the run's progress counts against it.
    pub max_output_bytes: usize,
    /// Bytes of progress reported so far.
    pub progress_bytes: usize,
    /// Whether progress past the cap was already reported (logged once).
    pub progress_cut: bool,
    /// The runs this run started through `subagents`, disposed when it ends.
    pub runs: Arc<Mutex<CallRuns>>,
    /// The subagent service, for `subagents` from a provider.
    pub subagents: Arc<SubagentService>,
    /// The plugin's limits, for the size of the requests it sends.
    pub gate: RunGate,
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
pub struct CallEnv {
    /// The registry the call's runs start on.
    pub subagents: Arc<SubagentService>,
    /// Who made the call (the parent of the runs it starts).
    pub caller: ParentRef,
    /// Cancelled when the call is.
    pub abort: CancellationToken,
    /// The runs this call started and has not disposed, with what they cost the plugin; shared
    /// with the host so that they are disposed when the call ends even if the guest forgot,
    /// trapped, or was dropped mid-call. A run the guest disposes leaves the table.
    pub runs: Arc<Mutex<CallRuns>>,
    /// The tool plugin's limits, for the size of the requests it sends.
    pub gate: RunGate,
    /// What the tool plugin may make the host hold.
    pub quota: Quota,
    /// The cap of each run the call starts (the entry's `config.budget`): carved from the
    /// caller's remainder.
    pub budget: Option<seam_core::spend::Budget>,
    /// What each run the call starts may reach (the entry's `config.scope`).
    pub scope: Option<seam_core::scope::Scope>,
    /// Who answers the requests for approval below each run the call starts (the entry's
    /// `config.approver`).
    pub approver: Option<seam_core::approval::Approver>,
}

/// The live runs of one tool call, by run id.
pub type CallRuns = std::collections::HashMap<String, (SubagentRun, Charge)>;

/// A plugin's host-memory budget and count caps, as one store's imports see them.
#[derive(Clone)]
pub struct Quota {
    /// The plugin's id.
    pub plugin: Arc<str>,
    /// Its host-memory budget, shared by all its stores.
    pub budget: Arc<MemoryBudget>,
    /// `max_runs_per_call`.
    pub max_runs_per_call: usize,
    /// `max_queued_messages`.
    pub max_queued_messages: usize,
}

/// Host bytes one run handle costs beyond its request: the run's shared state, its handle in
/// the call's table and the store's resource entry.
pub const RUN_OVERHEAD: usize = 4 << 10;

/// Host bytes one queued message costs beyond its text.
pub const MESSAGE_OVERHEAD: usize = 64;

impl Quota {
    /// The quota of `plugin` under `sandbox`'s limits and budget.
    pub fn of(plugin: Arc<str>, sandbox: &Sandbox) -> Self {
        Self {
            plugin,
            budget: sandbox.host_memory().clone(),
            max_runs_per_call: sandbox.limits().max_runs_per_call,
            max_queued_messages: sandbox.limits().max_queued_messages,
        }
    }

    /// Charges `bytes` to the plugin, or fails naming `host_memory_mb`.
    pub fn charge(&self, bytes: usize) -> Result<Charge, LimitHit> {
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
    pub fn hit(&self, limit: Limit) -> LimitHit {
        LimitHit::logged(&self.plugin, limit)
    }
}
