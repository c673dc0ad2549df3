//! What the subagent service keeps in memory about continuable children; the rest (their
//! records, sessions, inboxes and reports) is in the session store. Read and written by
//! `durable`.

use std::collections::HashSet;
use std::sync::Mutex;

/// What the service keeps in memory about continuable children (the rest is in the store).
#[derive(Default)]
pub(crate) struct Durable {
    /// Children interrupted by their parent: their inbox waits for the next message instead of
    /// waking them when the activation ends.
    pub(crate) held: Mutex<HashSet<String>>,
    /// Children whose live activation a task watches, to wake them on their inbox.
    pub(crate) watched: Mutex<HashSet<String>>,
    /// Parent sessions with a next-step report not yet delivered: the model step's fast path.
    pub(crate) reports_for: Mutex<HashSet<String>>,
    /// Woken by each next-step report: a replay waits on it for the reports a step recorded.
    pub(crate) reported: tokio::sync::Notify,
    /// Held while a message is delivered: an inbox is read, changed and written back whole,
    /// and two messages sent at once must not lose one.
    pub(crate) delivering: Mutex<()>,
}
