//! What an in-process child leaves for `resume`, and what a resumed child starts from. The
//! subagent layer keeps it as an opaque [`ResumeSeed`]; these traits put the agent runtime's
//! session in and take it out.

use crate::session::SessionEvent;
use seam_core::store::{SessionStore, StoreError};
use seam_core::subagent::{ResumeSeed, RunContext, StoredSession, SubagentRun};

/// What a torn-down child left: its session's id and completed turns.
struct LeftChild {
    session: String,
    events: Vec<SessionEvent>,
}

/// Where a resumed child starts: the session it continues, if the store still has it, else the
/// completed turns it is seeded with in a new one.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildResume {
    /// The session to continue.
    pub session: Option<String>,
    /// The completed turns, for a store that no longer has the session.
    pub events: Vec<SessionEvent>,
}

impl ChildResume {
    /// The agent's seed and session id: the stored session continued (its completed turns are
    /// read from `store`), or the kept turns in a new session when the store no longer has it.
    pub fn start_from(
        self,
        store: &dyn SessionStore,
    ) -> Result<(Vec<SessionEvent>, Option<String>), StoreError> {
        match self.session {
            Some(id) if store.session(&id)?.is_some() => Ok((Vec::new(), Some(id))),
            _ => Ok((self.events, None)),
        }
    }
}

/// The session a resumed child starts from, as the provider's side of a run sees it.
pub trait RunSessionSeed {
    /// For a resumed run: where its child starts.
    fn resume_seed(&self) -> Option<ChildResume>;

    /// Keeps the child's session (`session`, with its completed turns) when the child is torn
    /// down, so that the run can be resumed.
    fn record_child_session(&self, session: String, events: Vec<SessionEvent>);
}

impl RunSessionSeed for RunContext {
    fn resume_seed(&self) -> Option<ChildResume> {
        let seed = self.resumed_from()?;
        if let Some(left) = seed.downcast_ref::<LeftChild>() {
            return Some(ChildResume {
                session: Some(left.session.clone()),
                events: left.events.clone(),
            });
        }
        // A child resumed from the store by a later process: its session is all there is.
        seed.downcast_ref::<StoredSession>().map(|s| ChildResume {
            session: Some(s.0.clone()),
            events: Vec::new(),
        })
    }

    fn record_child_session(&self, session: String, events: Vec<SessionEvent>) {
        self.keep_for_resume(ResumeSeed::new(LeftChild { session, events }));
    }
}

/// The child's session, as the caller's side of a run sees it.
pub trait ChildSession {
    /// The child's completed turns, once it was torn down (in-process providers).
    fn child_session(&self) -> Option<Vec<SessionEvent>>;
}

impl ChildSession for SubagentRun {
    fn child_session(&self) -> Option<Vec<SessionEvent>> {
        self.resume_state()?
            .downcast_ref::<LeftChild>()
            .map(|left| left.events.clone())
    }
}
