//! A run's child agent, as the run's store holds it.

use std::sync::Arc;

use super::{Agent, AgentRegistry, RunSessionSeed, TurnOutcome};
use seam_core::budget::Charge;
use seam_core::subagent::RunContext;
use seam_core::types::ContentBlock;

/// The child agent an in-process provider's run created. The run owns it: dropping it (with the
/// run's store, on dispose or an enforced cancel) records the child's completed turns for
/// `resume` and tears the child down, children first.
pub struct RunChild {
    agent: Arc<Agent>,
    agents: Arc<AgentRegistry>,
    ctx: RunContext,
    /// Prompts sent and not yet run (they run on the next `wait_idle`).
    pending: Vec<Vec<ContentBlock>>,
    /// What the run's plugin was charged for the messages it sent or steered: they stay in the
    /// child's session until the child goes, and so do the charges.
    held: Vec<Charge>,
    last: Option<TurnOutcome>,
}

impl RunChild {
    /// Takes ownership of `agent` for the run `ctx`, and records it as the run's child.
    pub fn new(agent: Arc<Agent>, agents: Arc<AgentRegistry>, ctx: RunContext) -> Self {
        ctx.set_child(&agent);
        ctx.link_child_session(&agent.as_parent().session_id);
        agent.report_progress_to(ctx.clone());
        Self {
            agent,
            agents,
            ctx,
            pending: Vec::new(),
            held: Vec::new(),
            last: None,
        }
    }

    /// The child agent.
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// Queues a prompt for the next [`RunChild::take_pending`].
    pub fn queue(&mut self, prompt: Vec<ContentBlock>) {
        self.pending.push(prompt);
    }

    /// Keeps `charge` for as long as the child lives.
    pub fn hold(&mut self, charge: Charge) {
        self.held.push(charge);
    }

    /// Prompts queued since the last call.
    pub fn take_pending(&mut self) -> Vec<Vec<ContentBlock>> {
        std::mem::take(&mut self.pending)
    }

    /// Prompts queued and not yet taken.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Records the outcome of the latest turn.
    pub fn set_last(&mut self, outcome: TurnOutcome) {
        self.last = Some(outcome);
    }

    /// The outcome of the latest turn, if any turn ran.
    pub fn last(&self) -> Option<&TurnOutcome> {
        self.last.as_ref()
    }
}

impl Drop for RunChild {
    fn drop(&mut self) {
        let session = self.agent.session();
        self.ctx.record_child_session(
            session.header.session_id.clone(),
            session.completed_prefix(),
        );
        if let Some(teardown) = self.agents.dispose_now(self.agent.id()) {
            self.ctx.wait_on_dispose(teardown);
        }
    }
}
