//! The handle on a host that `seam ui` serves, and the replays it asks for.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use seam_agent::agent::AgentRegistry;
use seam_core::approvals::Approvals;
use seam_core::events::EventBus;
use seam_core::store::SessionStore;
use seam_core::subagent::SubagentService;
use thiserror::Error;

/// Why a replay could not be made (the session has no recording, its config does not load).
#[derive(Debug, Error)]
#[error("{0}")]
pub struct ReplayFailed(pub String);

/// Runs a recorded session's tree again and reports where it diverges: `seam replay`, which
/// needs a host of its own (the CLI lends it to the console).
pub trait Replayer: Send + Sync {
    /// Replays the top-level session `session` of `store`, stopping after `until` model steps
    /// if given; the report as `seam replay --json` prints it.
    fn replay(
        &self,
        store: Arc<dyn SessionStore>,
        session: String,
        until: Option<u64>,
    ) -> BoxFuture<'static, Result<serde_json::Value, ReplayFailed>>;
}

/// What `seam ui` serves: a host's agent registry (whose `[agent]` defaults make each session's
/// top-level agent), the bus its trees emit on, its providers and their runs (with the
/// approvals engine their requests go through), how long a cancel may take, and who replays.
/// `seam_host::Host::console_host` hands one out.
#[derive(Clone)]
pub struct ConsoleHost {
    pub(crate) events: Arc<EventBus>,
    pub(crate) agents: Arc<AgentRegistry>,
    pub(crate) subagents: Arc<SubagentService>,
    pub(crate) cancel_grace: Duration,
    pub(crate) replayer: Option<Arc<dyn Replayer>>,
}

impl ConsoleHost {
    /// The agents of `agents`, whose trees emit on `events` and delegate to `subagents`; a
    /// cancelled turn or run is waited for at most `cancel_grace`.
    pub fn new(
        events: Arc<EventBus>,
        agents: Arc<AgentRegistry>,
        subagents: Arc<SubagentService>,
        cancel_grace: Duration,
    ) -> Self {
        Self {
            events,
            agents,
            subagents,
            cancel_grace,
            replayer: None,
        }
    }

    /// The same, replaying sessions with `replayer` (without one, a replay is refused).
    pub fn with_replayer(mut self, replayer: Arc<dyn Replayer>) -> Self {
        self.replayer = Some(replayer);
        self
    }

    pub(crate) fn approvals(&self) -> &Arc<Approvals> {
        self.subagents.approvals()
    }

    pub(crate) fn store(&self) -> &Arc<dyn SessionStore> {
        self.agents.store()
    }
}
