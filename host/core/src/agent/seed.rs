//! What an in-process child leaves for `resume`: its completed turns. The subagent layer keeps
//! it as an opaque [`ResumeSeed`]; these traits put the agent runtime's session events in and
//! take them out.

use crate::session::SessionEvent;
use crate::subagent::{ResumeSeed, RunContext, SubagentRun};

/// The session a resumed child starts from, as the provider's side of a run sees it.
pub trait RunSessionSeed {
    /// For a resumed run: the completed turns its child must start from.
    fn resume_seed(&self) -> Option<Vec<SessionEvent>>;

    /// Keeps the child's completed turns when it is torn down, so that the run can be resumed.
    fn record_child_session(&self, events: Vec<SessionEvent>);
}

impl RunSessionSeed for RunContext {
    fn resume_seed(&self) -> Option<Vec<SessionEvent>> {
        events_of(self.resumed_from()?)
    }

    fn record_child_session(&self, events: Vec<SessionEvent>) {
        self.keep_for_resume(ResumeSeed::new(events));
    }
}

/// The child's session, as the caller's side of a run sees it.
pub trait ChildSession {
    /// The child's completed turns, once it was torn down (in-process providers).
    fn child_session(&self) -> Option<Vec<SessionEvent>>;
}

impl ChildSession for SubagentRun {
    fn child_session(&self) -> Option<Vec<SessionEvent>> {
        events_of(self.resume_state()?)
    }
}

fn events_of(seed: ResumeSeed) -> Option<Vec<SessionEvent>> {
    seed.downcast_ref::<Vec<SessionEvent>>().cloned()
}
