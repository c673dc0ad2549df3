//! A provider behind its plugin's run limits: the one wrapper every provider, a component's or an
//! ACP agent's, is registered in.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use seam_agent::agent::AgentRegistry;
use seam_core::subagent::{Provider, RunContext, RunFailure};
use seam_core::types::{StartRequest, SubagentResult};

use crate::sandbox::gate::{result_size, Denied, RunGate};

/// A provider plugin behind its run limits: each run first takes a concurrency slot, then runs
/// within the wall-clock budget, and its result must fit the output cap.
pub struct LimitedProvider {
    inner: Arc<dyn Provider>,
    gate: RunGate,
    /// For the lineage of a waiting run's caller; weak, as the registry reaches providers.
    agents: Weak<AgentRegistry>,
}

impl LimitedProvider {
    /// `inner`, its runs passed through `gate`; `agents` names a waiting run's caller lineage.
    pub fn new(inner: Arc<dyn Provider>, gate: RunGate, agents: Weak<AgentRegistry>) -> Self {
        Self {
            inner,
            gate,
            agents,
        }
    }
}

impl Provider for LimitedProvider {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let inner = self.inner.clone();
        let gate = self.gate.clone();
        let agents = self.agents.clone();
        Box::pin(async move {
            let waiter = ctx.clone();
            let caller = ctx.parent().id.clone();
            let lineage = || match agents.upgrade() {
                Some(agents) => agents.lineage(&caller),
                None => vec![caller.clone()],
            };
            // Nothing is instantiated until the run has its slot.
            let _slot = match gate.enter(ctx.id(), lineage, waiter.cancelled()).await {
                Ok(slot) => slot,
                // The host sees the cancel and settles the run `aborted`.
                Err(Denied::Cancelled) => return Err(RunFailure::CancelledWaiting),
                Err(Denied::Refused(hit)) => return Err(hit.into()),
                Err(Denied::Deadlock(message)) => return Err(RunFailure::Deadlock(message)),
            };
            let result = gate.timed(inner.run(ctx, request)).await??;
            gate.check_size(result_size(&result))?;
            Ok(result)
        })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        self.inner.close()
    }
}
