//! Durable sessions: the [`SessionStore`] trait every backend implements, what is written to it,
//! and what is read back.
//!
//! A store holds three things: sessions (an agent's log of turns, messages, tool calls and
//! results, each event as JSON), run records (a delegation: its request snapshot, its state,
//! its stop reason and diagnostic, and the child session it ran), and the journal of bus events.
//! The event bus commits an event's writes before any listener sees it (see
//! [`EventBus::emit_with`](crate::events::EventBus::emit_with)), so whatever an observer saw is in
//! the store after a crash. Bodies are opaque JSON text here: the layers above define them.
//!
//! [`MemoryStore`] is the library's default; the SQLite store (`seam-store-sqlite`) is the CLI's.

mod error;
mod memory;
pub mod tree;

pub use error::StoreError;
pub use memory::MemoryStore;

/// A run record's key in its store: assigned by the store, unique in it across processes (run
/// ids are not: every process numbers its runs from 1).
pub type RunKey = i64;

/// Default of `[sessions] max_session_mb`.
pub const DEFAULT_MAX_SESSION_MB: u64 = 64;

/// What a store enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// Most bytes of event bodies one session may hold; an append past it is refused.
    pub max_session_bytes: u64,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            max_session_bytes: DEFAULT_MAX_SESSION_MB * 1024 * 1024,
        }
    }
}

/// One write; a [`SessionStore::commit`] applies its writes all or none.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A new session.
    OpenSession {
        /// Its id.
        id: String,
        /// The agent whose session it is.
        agent: String,
        /// The parent's session, for a child.
        parent: Option<String>,
        /// The agent's working directory.
        working_directory: String,
    },
    /// One session event, appended after the session's last.
    Append {
        /// The session.
        session: String,
        /// The event's type (`turn/start`, `user-message`, ...).
        kind: String,
        /// The event as JSON.
        body: String,
    },
    /// A bus event, journaled before its listeners see it.
    Bus {
        /// The event's name (`subagent/start`, ...).
        name: String,
        /// The event as JSON (one line).
        body: String,
    },
    /// A run settled.
    RunEnded {
        /// The run.
        run: RunKey,
        /// Its stop reason.
        stop_reason: String,
        /// Why it failed or was stopped, if it was.
        diagnostic: Option<String>,
    },
    /// A run ended because its process let go of it (`seam run --detach`, Ctrl-C): it counts
    /// as interrupted, and its child can be continued.
    RunInterrupted {
        /// The run.
        run: RunKey,
        /// Why.
        diagnostic: String,
    },
    /// The session a run's child agent keeps.
    LinkChild {
        /// The run.
        run: RunKey,
        /// The child's session.
        session: String,
    },
    /// The run's parent was told that it ended (once: also after a restart).
    Announced {
        /// The run.
        run: RunKey,
    },
    /// The run's child reported to its parent.
    Report {
        /// The run.
        run: RunKey,
        /// What it reported (text).
        text: String,
        /// Whether the parent is to be told before its next model step.
        next_step: bool,
    },
    /// The parent was given the run's pending report.
    ReportDelivered {
        /// The run.
        run: RunKey,
    },
    /// What a session's account (its agent and everything below it) spent, added to what the
    /// store holds for it: additions commute, so the writes of parallel children can commit in
    /// any order. `limits`, when given, replaces the budget recorded for it.
    Spend {
        /// The session.
        session: String,
        /// What was spent since the last write.
        added: crate::spend::Spent,
        /// Its budget, when it is recorded.
        limits: Option<crate::spend::Budget>,
    },
    /// A request for approval, as it now stands (replacing what was kept under its id).
    Approval(Box<crate::approval::ApprovalRecord>),
    /// One recorded input of the tree under the top-level session `root` (see
    /// [`crate::tape`]).
    Tape {
        /// The top-level session.
        root: String,
        /// The entry.
        entry: Box<crate::cassette::Entry>,
        /// Its body as JSON text, serialised once for the bound and the store.
        body: String,
    },
    /// A child session's inbox: messages sent to it and not yet run (`None` empties it).
    Inbox {
        /// The child's session.
        session: String,
        /// The messages, as JSON.
        body: Option<String>,
    },
}

impl Write {
    /// The session it writes to, if it writes one's log or inbox.
    pub fn session(&self) -> Option<&str> {
        match self {
            Self::OpenSession { id, .. } => Some(id),
            Self::Append { session, .. } | Self::Inbox { session, .. } => Some(session),
            _ => None,
        }
    }

    /// Whether a limit can refuse it (a session's writes): such a write is committed at once,
    /// so that its writer hears of the refusal and stops.
    pub fn can_be_refused(&self) -> bool {
        matches!(self, Self::OpenSession { .. } | Self::Append { .. })
    }
}

/// A run as it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStart {
    /// The run id (unique in its process only).
    pub run_id: String,
    /// The provider.
    pub provider: String,
    /// The calling agent.
    pub parent_agent: String,
    /// The calling agent's session.
    pub parent_session: String,
    /// The request (prompt, options, schema, filter; no signal). Typed, so that a store that
    /// does not write it out (the memory store) pays for no serialisation.
    pub request: crate::types::RequestSnapshot,
    /// Whether the run belongs to its parent agent rather than to a call (a background run).
    pub background: bool,
    /// The label it was started with (empty for a foreground run).
    pub label: String,
}

/// A run record's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Started in a process that still holds the store.
    Running,
    /// Settled; its stop reason says how.
    Ended,
    /// The process running it ended before it did.
    Interrupted,
}

impl RunStatus {
    /// Its name in listings and in the SQLite schema.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ended => "ended",
            Self::Interrupted => "interrupted",
        }
    }

    /// Parses [`RunStatus::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(Self::Running),
            "ended" => Some(Self::Ended),
            "interrupted" => Some(Self::Interrupted),
            _ => None,
        }
    }
}

/// A run record, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Its key.
    pub key: RunKey,
    /// What it started with.
    pub start: RunStart,
    /// Its state.
    pub status: RunStatus,
    /// Its stop reason, once settled.
    pub stop_reason: Option<String>,
    /// Why it failed, was stopped or was interrupted.
    pub diagnostic: Option<String>,
    /// The session its child agent kept, if it had one.
    pub child_session: Option<String>,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// When it settled or was found interrupted.
    pub ended_ms: Option<u64>,
    /// Whether its parent was told that it ended.
    pub announced: bool,
    /// The child's latest report.
    pub report: Option<String>,
    /// Whether that report waits to be given to the parent at its next model step.
    pub report_pending: bool,
}

/// A session, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// Its id.
    pub id: String,
    /// The agent whose session it is.
    pub agent: String,
    /// The parent's session, for a child.
    pub parent: Option<String>,
    /// The agent's working directory.
    pub working_directory: String,
    /// When it was opened, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it was last written.
    pub updated_ms: u64,
    /// How many events it holds.
    pub events: u64,
    /// Bytes of event bodies it holds (what `max_session_mb` bounds).
    pub bytes: u64,
    /// Whether its last turn was cut short by the end of the process that ran it.
    pub interrupted: bool,
}

/// What a session's account spent (its agent and everything below it, over every process that
/// ran it), and the budget it was last given.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SpendRecord {
    /// The budget, if one was set.
    #[serde(default)]
    pub budget: Option<crate::spend::Budget>,
    /// What was spent.
    #[serde(default)]
    pub spent: crate::spend::Spent,
}

impl SpendRecord {
    /// The record after a [`Write::Spend`] of `added` and `limits`.
    pub fn add(self, added: crate::spend::Spent, limits: Option<crate::spend::Budget>) -> Self {
        Self {
            budget: limits.or(self.budget),
            spent: self.spent + added,
        }
    }
}

/// One session event, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its place in the session, from 1.
    pub seq: u64,
    /// Its type.
    pub kind: String,
    /// The event as JSON.
    pub body: String,
    /// When it was written, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// What [`SessionStore::commit_then`] calls once its writes are durable (or were not made).
pub type Then = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// Where sessions, run records and journaled events are kept.
///
/// Every method is synchronous and quick (a local write); a backend that is remote batches
/// behind it. Ids are data: a backend never formats them into a query or a path.
pub trait SessionStore: Send + Sync + std::fmt::Debug + 'static {
    /// The prefix of the session ids this store's agents get; unique per opening of a durable
    /// store, so that ids never collide across processes.
    fn id_prefix(&self) -> &str;

    /// What diagnostics call it: its file, its server. A failure the store reports without
    /// saying which store it is about is named with it (see [`StoreError::in_store`]).
    fn name(&self) -> &str {
        "(unnamed)"
    }

    /// Whether it keeps the journal of bus events ([`Write::Bus`]): a store that does not is
    /// not handed them, so an event is not serialised for nothing.
    fn journals(&self) -> bool {
        true
    }

    /// Applies `writes` atomically, in order. An append past the session's size limit refuses
    /// the whole batch with [`StoreError::SessionFull`].
    fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError>;

    /// Applies `writes` soon, after everything written before them: for writes that nothing
    /// waits on (no listener is to see them, no limit can refuse them), which a backend may then
    /// batch with others. Every later commit and read finds them applied. A failure is logged,
    /// as nobody is left to tell. The default commits at once.
    fn commit_later(&self, writes: Vec<Write>) {
        if let Err(e) = self.commit(writes) {
            tracing::warn!(error = %e, "session store refused a write");
        }
    }

    /// Commits `writes` (none of which a limit can refuse), then calls `then` with the outcome:
    /// for an event that listeners are to see once it is durable, and whose emitter does not
    /// wait for it. The default commits at once and calls `then` before it returns.
    ///
    /// A store that batches (SQLite) may queue them instead, after everything written before
    /// them, commit them in one transaction with whatever else is queued (group commit), and call
    /// `then` once that transaction is durable: the callbacks of a batch are called in the order
    /// they were queued, and every callback queued before a [`SessionStore::commit`],
    /// [`SessionStore::flush`] or read has been called when that returns. `then` may be called
    /// on another thread (the store's writer); it is called exactly once, with the failure
    /// naming the store when the writes were not made.
    fn commit_then(&self, writes: Vec<Write>, then: Then) {
        then(self.commit(writes));
    }

    /// Commits whatever [`SessionStore::commit_later`], [`SessionStore::commit_then`] and
    /// [`SessionStore::start_run`] left queued, and calls the callbacks waiting for it: for a
    /// process about to exit, which may not drop its store. The default has nothing queued.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether it keeps the records of runs started by the session `parent_session`: a store
    /// may skip those nothing can read back (the memory store keeps only the runs of sessions
    /// it holds). A run whose record is not kept has none to update.
    fn keeps_runs_of(&self, parent_session: &str) -> bool {
        let _ = parent_session;
        true
    }

    /// Records a run as started and running. Like [`SessionStore::commit_later`], the record may
    /// be written in a later batch, before any write that follows it.
    fn start_run(&self, run: RunStart) -> Result<RunKey, StoreError>;

    /// A session's summary, if the store has it.
    fn session(&self, id: &str) -> Result<Option<SessionSummary>, StoreError>;

    /// Every session, most recently written first.
    fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError>;

    /// A session's events, oldest first.
    fn events(&self, session: &str) -> Result<Vec<StoredEvent>, StoreError>;

    /// The runs a session's agent started, oldest first.
    fn runs_of(&self, session: &str) -> Result<Vec<RunRecord>, StoreError>;

    /// The runs that ran the child session `session` (its activations), oldest first.
    fn runs_of_child(&self, session: &str) -> Result<Vec<RunRecord>, StoreError>;

    /// What a session's account spent, and its budget (`None`: nothing recorded).
    fn spend(&self, session: &str) -> Result<Option<SpendRecord>, StoreError>;

    /// A child session's inbox (JSON), if it has one.
    fn inbox(&self, session: &str) -> Result<Option<String>, StoreError>;

    /// The requests for approval kept for the tree of the top-level session `root` (every
    /// tree's, with `None`), oldest first. The default, for a store that keeps none, has none.
    fn approvals(
        &self,
        root: Option<&str>,
    ) -> Result<Vec<crate::approval::ApprovalRecord>, StoreError> {
        let _ = root;
        Ok(Vec::new())
    }

    /// The inputs recorded for the tree under the top-level session `root`, in the order they
    /// were taken. The default, for a store that keeps no recordings, has none.
    fn tape(&self, root: &str) -> Result<Vec<crate::cassette::Entry>, StoreError> {
        let _ = root;
        Ok(Vec::new())
    }

    /// One request for approval, by id.
    fn approval(&self, id: &str) -> Result<Option<crate::approval::ApprovalRecord>, StoreError> {
        Ok(self.approvals(None)?.into_iter().find(|r| r.id == id))
    }

    /// Answers a pending request kept here, for the process that asked to find (it reads the
    /// store); returns the record as it stands after (unchanged when it was not pending), or
    /// `None` when there is no such request. The check and the write are one transaction, so
    /// that two answers cannot both win. The default, for a store that keeps no approvals,
    /// fails saying so.
    fn answer_approval(
        &self,
        id: &str,
        answer: &crate::approval::Answer,
    ) -> Result<Option<crate::approval::ApprovalRecord>, StoreError> {
        let _ = answer;
        Err(StoreError::Backend(format!(
            "{} keeps no approval requests (asked for `{id}`)",
            self.name()
        )))
    }

    /// The journaled bus events (JSON lines), oldest first.
    fn journal(&self) -> Result<Vec<String>, StoreError>;

    /// The journaled bus events (JSON lines) of the openings of the store that opened
    /// `session` (an agent created on it, or continuing it), each from the moment it did, oldest
    /// first: for a process that ran one session's tree (`seam run`), the events an `--events`
    /// listener subscribed before the agent was created printed (in commit order, which for
    /// emitters going at once may differ from the order they were delivered in). Entries
    /// journaled before this was kept (an older SQLite schema) are not found. The default, for
    /// a store that cannot tell, fails saying so.
    fn journal_of(&self, session: &str) -> Result<Vec<String>, StoreError> {
        Err(StoreError::Backend(format!(
            "{} cannot tell which journal entries are those of session `{session}`",
            self.name()
        )))
    }

    /// Removes a session, its runs and the sessions of their children; returns whether it was
    /// there.
    fn remove(&self, session: &str) -> Result<bool, StoreError>;

    /// Removes every top-level session (with its descendants) last written before `cutoff_ms`,
    /// and journal entries older than it; returns how many top-level sessions went.
    fn gc(&self, cutoff_ms: u64) -> Result<usize, StoreError>;
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
