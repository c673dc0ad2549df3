//! The handle on a host that `seam a2a` serves.

use std::sync::Arc;
use std::time::Duration;

use seam_agent::agent::AgentRegistry;
use seam_core::approvals::Approvals;
use seam_core::events::EventBus;
use seam_core::subagent::SubagentService;

/// What `seam a2a` serves: a host's agent registry (whose `[agent]` defaults make each
/// context's top-level agent), the bus its trees emit on, the approvals engine their requests
/// go through, its providers (the card's skills), and how long a cancel may take.
/// `seam_host::Host::a2a_host` hands one out.
#[derive(Clone)]
pub struct A2aHost {
    pub(crate) events: Arc<EventBus>,
    pub(crate) agents: Arc<AgentRegistry>,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) subagents: Arc<SubagentService>,
    pub(crate) cancel_grace: Duration,
}

impl A2aHost {
    /// The agents of `agents`, whose trees emit on `events`, ask `approvals` and delegate to
    /// `subagents`; a cancelled task is waited for at most `cancel_grace`.
    pub fn new(
        events: Arc<EventBus>,
        agents: Arc<AgentRegistry>,
        approvals: Arc<Approvals>,
        subagents: Arc<SubagentService>,
        cancel_grace: Duration,
    ) -> Self {
        Self {
            events,
            agents,
            approvals,
            subagents,
            cancel_grace,
        }
    }
}
