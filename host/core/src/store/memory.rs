//! The in-memory store: the library's default. Nothing outlives the process, and nothing the
//! runtime does reads it back, so it keeps only the latest of everything, so that a long-lived
//! host does not grow without bound: [`MemoryStore::JOURNAL`] events, [`MemoryStore::RUNS`] run
//! records (a live run is never dropped) and [`MemoryStore::SESSIONS`] sessions (the least
//! recently written go first; once one has gone, an append to a session the store no longer
//! holds is dropped rather than refused).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use super::{
    now_ms, RunKey, RunRecord, RunStart, RunStatus, SessionStore, SessionSummary, SpendRecord,
    StoreError, StoreLimits, StoredEvent, Write,
};
use crate::sync::lock;

#[derive(Default)]
struct Inner {
    sessions: HashMap<String, (SessionSummary, Vec<StoredEvent>)>,
    /// By key, which only grows: the oldest first.
    runs: BTreeMap<RunKey, RunRecord>,
    next_run: RunKey,
    /// Whether a session was ever dropped to stay within [`MemoryStore::SESSIONS`]: from then
    /// on, an append to a session the store does not hold is taken as one to a dropped session
    /// (a live agent that has not written for long) and ignored, not refused.
    evicted: bool,
    journal: VecDeque<String>,
    /// How many entries were ever journaled (the oldest kept is the `journaled - len`th).
    journaled: u64,
    /// Each session's first opening: how many entries were journaled before it.
    opened_at: HashMap<String, u64>,
    inboxes: HashMap<String, String>,
    spend: HashMap<String, SpendRecord>,
    /// Requests for approval, oldest first (at most [`MemoryStore::APPROVALS`]).
    approvals: VecDeque<crate::approval::ApprovalRecord>,
    /// Recorded inputs by top-level session, in the order they were taken.
    tapes: HashMap<String, Vec<crate::cassette::Entry>>,
}

/// Sessions, runs and (if asked for) the journal in memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    limits: StoreLimits,
    /// Whether it keeps the journal: nothing in a process reads back the events it saw, so by
    /// default it does not (serialising every event cost a full run about a fifth).
    journal: bool,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// Journal entries kept (the oldest go first).
    pub const JOURNAL: usize = 10_000;
    /// Run records kept (the oldest ended ones go first).
    pub const RUNS: usize = 10_000;
    /// Requests for approval kept (the oldest go first).
    pub const APPROVALS: usize = 10_000;
    /// Sessions kept (the least recently written go first, a tenth at a time).
    pub const SESSIONS: usize = 1_000;

    /// An empty store enforcing `limits`, keeping no journal.
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            inner: Mutex::default(),
            limits,
            journal: false,
        }
    }

    /// [`MemoryStore::new`], keeping the latest [`MemoryStore::JOURNAL`] bus events too.
    pub fn journaling(limits: StoreLimits) -> Self {
        Self {
            journal: true,
            ..Self::new(limits)
        }
    }
}

impl Inner {
    /// Applies one write to a copy-on-failure-free state: every check runs before any change.
    fn check(&self, writes: &[Write], limits: &StoreLimits) -> Result<(), StoreError> {
        let mut grown: HashMap<&str, u64> = HashMap::new();
        for w in writes {
            if let Write::Append { session, body, .. } = w {
                let opened = writes
                    .iter()
                    .any(|o| matches!(o, Write::OpenSession { id, .. } if id == session));
                let base = match self.sessions.get(session) {
                    Some((s, _)) => s.bytes,
                    None if opened || self.evicted => 0,
                    None => return Err(StoreError::NoSession(session.clone())),
                };
                let total = grown.entry(session).or_insert(base);
                *total += body.len() as u64;
                if *total > limits.max_session_bytes {
                    return Err(StoreError::SessionFull {
                        session: session.clone(),
                        limit_bytes: limits.max_session_bytes,
                    });
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, write: Write, now: u64) {
        match write {
            Write::OpenSession {
                id,
                agent,
                parent,
                working_directory,
            } => {
                self.opened_at.entry(id.clone()).or_insert(self.journaled);
                self.sessions.entry(id.clone()).or_insert_with(|| {
                    let summary = SessionSummary {
                        id,
                        agent,
                        parent,
                        working_directory,
                        created_ms: now,
                        updated_ms: now,
                        events: 0,
                        bytes: 0,
                        interrupted: false,
                    };
                    (summary, Vec::new())
                });
            }
            Write::Append {
                session,
                kind,
                body,
            } => {
                if let Some((summary, events)) = self.sessions.get_mut(&session) {
                    summary.events += 1;
                    summary.bytes += body.len() as u64;
                    summary.updated_ms = now;
                    events.push(StoredEvent {
                        seq: summary.events,
                        kind,
                        body,
                        at_ms: now,
                    });
                }
            }
            Write::Bus { body, .. } => {
                if self.journal.len() >= MemoryStore::JOURNAL {
                    self.journal.pop_front();
                }
                self.journal.push_back(body);
                self.journaled += 1;
            }
            Write::RunEnded {
                run,
                stop_reason,
                diagnostic,
            } => {
                if let Some(r) = self.runs.get_mut(&run) {
                    r.status = RunStatus::Ended;
                    r.stop_reason = Some(stop_reason);
                    r.diagnostic = diagnostic;
                    r.ended_ms = Some(now);
                }
            }
            Write::RunInterrupted { run, diagnostic } => {
                if let Some(r) = self.runs.get_mut(&run) {
                    r.status = RunStatus::Interrupted;
                    r.stop_reason = Some("aborted".into());
                    r.diagnostic = Some(diagnostic);
                    r.ended_ms = Some(now);
                }
            }
            Write::LinkChild { run, session } => {
                if let Some(r) = self.runs.get_mut(&run) {
                    r.child_session = Some(session);
                }
            }
            Write::Announced { run } => {
                if let Some(r) = self.runs.get_mut(&run) {
                    r.announced = true;
                }
            }
            Write::Report {
                run,
                text,
                next_step,
            } => {
                if let Some(r) = self.runs.get_mut(&run) {
                    r.report = Some(text);
                    r.report_pending |= next_step;
                }
            }
            Write::ReportDelivered { run } => {
                if let Some(r) = self.runs.get_mut(&run) {
                    r.report_pending = false;
                }
            }
            Write::Spend {
                session,
                added,
                limits,
            } => {
                let record = self.spend.entry(session).or_default();
                *record = record.add(added, limits);
            }
            Write::Tape { root, entry, .. } => {
                self.tapes.entry(root).or_default().push(*entry);
            }
            Write::Approval(record) => {
                match self.approvals.iter_mut().find(|r| r.id == record.id) {
                    Some(kept) => *kept = *record,
                    None => {
                        if self.approvals.len() == MemoryStore::APPROVALS {
                            self.approvals.pop_front();
                        }
                        self.approvals.push_back(*record);
                    }
                }
            }
            Write::Inbox { session, body } => match body {
                Some(body) => {
                    self.inboxes.insert(session, body);
                }
                None => {
                    self.inboxes.remove(&session);
                }
            },
        }
    }

    /// `session` and the sessions of every run below it.
    fn subtree(&self, session: &str) -> Vec<String> {
        let mut out = vec![session.to_string()];
        let mut i = 0;
        while i < out.len() {
            let children: Vec<String> = self
                .runs
                .values()
                .filter(|r| r.start.parent_session == out[i])
                .filter_map(|r| r.child_session.clone())
                .collect();
            out.extend(
                children
                    .into_iter()
                    .filter(|c| !out.contains(c))
                    .collect::<Vec<_>>(),
            );
            i += 1;
        }
        out
    }

    fn remove_tree(&mut self, session: &str) -> bool {
        let tree = self.subtree(session);
        let had = self.sessions.remove(session).is_some();
        for s in &tree {
            self.sessions.remove(s);
            self.inboxes.remove(s);
            self.opened_at.remove(s);
            self.spend.remove(s);
        }
        self.approvals.retain(|r| !tree.contains(&r.root));
        self.tapes.remove(session);
        self.runs
            .retain(|_, r| !tree.contains(&r.start.parent_session));
        had
    }

    /// Drops the oldest ended runs past [`MemoryStore::RUNS`], and the least recently written
    /// sessions past [`MemoryStore::SESSIONS`] (down to nine tenths of it, so that the scan is
    /// paid once per hundred new sessions).
    fn trim(&mut self) {
        while self.runs.len() > MemoryStore::RUNS {
            let oldest_ended = self
                .runs
                .iter()
                .find(|(_, r)| r.status != RunStatus::Running)
                .map(|(k, _)| *k);
            match oldest_ended {
                Some(key) => {
                    self.runs.remove(&key);
                }
                None => break,
            }
        }
        if self.sessions.len() > MemoryStore::SESSIONS {
            let mut by_age: Vec<(u64, String)> = self
                .sessions
                .values()
                .map(|(s, _)| (s.updated_ms, s.id.clone()))
                .collect();
            by_age.sort();
            let excess = self.sessions.len() - MemoryStore::SESSIONS * 9 / 10;
            for (_, id) in by_age.into_iter().take(excess) {
                self.sessions.remove(&id);
                self.opened_at.remove(&id);
                self.spend.remove(&id);
            }
            self.evicted = true;
        }
    }
}

impl SessionStore for MemoryStore {
    fn id_prefix(&self) -> &str {
        "session"
    }

    fn name(&self) -> &str {
        "in memory"
    }

    fn journals(&self) -> bool {
        self.journal
    }

    fn keeps_runs_of(&self, parent_session: &str) -> bool {
        // Only an agent's own session lists its children; a caller with no session here (an
        // embedder's, a benchmark's) has none to read them back with.
        lock(&self.inner).sessions.contains_key(parent_session)
    }

    fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        let mut inner = lock(&self.inner);
        inner.check(&writes, &self.limits)?;
        let now = now_ms();
        for w in writes {
            inner.apply(w, now);
        }
        inner.trim();
        Ok(())
    }

    fn start_run(&self, run: RunStart) -> Result<RunKey, StoreError> {
        let mut inner = lock(&self.inner);
        inner.next_run += 1;
        let key = inner.next_run;
        inner.runs.insert(
            key,
            RunRecord {
                key,
                start: run,
                status: RunStatus::Running,
                stop_reason: None,
                diagnostic: None,
                child_session: None,
                started_ms: now_ms(),
                ended_ms: None,
                announced: false,
                report: None,
                report_pending: false,
            },
        );
        inner.trim();
        Ok(key)
    }

    fn session(&self, id: &str) -> Result<Option<SessionSummary>, StoreError> {
        Ok(lock(&self.inner).sessions.get(id).map(|(s, _)| s.clone()))
    }

    fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let mut out: Vec<SessionSummary> = lock(&self.inner)
            .sessions
            .values()
            .map(|(s, _)| s.clone())
            .collect();
        out.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(b.id.cmp(&a.id)));
        Ok(out)
    }

    fn events(&self, session: &str) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(lock(&self.inner)
            .sessions
            .get(session)
            .map(|(_, e)| e.clone())
            .unwrap_or_default())
    }

    fn runs_of(&self, session: &str) -> Result<Vec<RunRecord>, StoreError> {
        Ok(lock(&self.inner)
            .runs
            .values()
            .filter(|r| r.start.parent_session == session)
            .cloned()
            .collect())
    }

    fn runs_of_child(&self, session: &str) -> Result<Vec<RunRecord>, StoreError> {
        Ok(lock(&self.inner)
            .runs
            .values()
            .filter(|r| r.child_session.as_deref() == Some(session))
            .cloned()
            .collect())
    }

    fn inbox(&self, session: &str) -> Result<Option<String>, StoreError> {
        Ok(lock(&self.inner).inboxes.get(session).cloned())
    }

    fn spend(&self, session: &str) -> Result<Option<SpendRecord>, StoreError> {
        Ok(lock(&self.inner).spend.get(session).copied())
    }

    fn journal(&self) -> Result<Vec<String>, StoreError> {
        Ok(lock(&self.inner).journal.iter().cloned().collect())
    }

    fn approvals(
        &self,
        root: Option<&str>,
    ) -> Result<Vec<crate::approval::ApprovalRecord>, StoreError> {
        Ok(lock(&self.inner)
            .approvals
            .iter()
            .filter(|r| root.is_none_or(|root| r.root == root))
            .cloned()
            .collect())
    }

    fn tape(&self, root: &str) -> Result<Vec<crate::cassette::Entry>, StoreError> {
        Ok(lock(&self.inner)
            .tapes
            .get(root)
            .cloned()
            .unwrap_or_default())
    }

    fn answer_approval(
        &self,
        id: &str,
        answer: &crate::approval::Answer,
    ) -> Result<Option<crate::approval::ApprovalRecord>, StoreError> {
        let mut inner = lock(&self.inner);
        let Some(record) = inner.approvals.iter_mut().find(|r| r.id == id) else {
            return Ok(None);
        };
        if record.status == crate::approval::Status::Pending {
            *record = record.clone().answered(answer, now_ms());
        }
        Ok(Some(record.clone()))
    }

    fn journal_of(&self, session: &str) -> Result<Vec<String>, StoreError> {
        let inner = lock(&self.inner);
        let Some(&from) = inner.opened_at.get(session) else {
            return Ok(Vec::new());
        };
        // One process, one opening: everything journaled since the session was first opened.
        let first_kept = inner.journaled - inner.journal.len() as u64;
        let skip = usize::try_from(from.saturating_sub(first_kept)).unwrap_or(usize::MAX);
        Ok(inner.journal.iter().skip(skip).cloned().collect())
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        Ok(lock(&self.inner).remove_tree(session))
    }

    fn gc(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        let mut inner = lock(&self.inner);
        let old: Vec<String> = inner
            .sessions
            .values()
            .filter(|(s, _)| s.parent.is_none() && s.updated_ms < cutoff_ms)
            .map(|(s, _)| s.id.clone())
            .collect();
        for id in &old {
            inner.remove_tree(id);
        }
        Ok(old.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(id: &str) -> Write {
        Write::OpenSession {
            id: id.into(),
            agent: "a".into(),
            parent: None,
            working_directory: "/".into(),
        }
    }

    fn append(id: &str) -> Write {
        Write::Append {
            session: id.into(),
            kind: "message".into(),
            body: "{}".into(),
        }
    }

    #[test]
    fn a_long_lived_store_keeps_only_the_latest_sessions_and_takes_writes_to_dropped_ones() {
        let store = MemoryStore::default();
        let sessions = MemoryStore::SESSIONS * 3;
        for i in 0..sessions {
            let id = format!("s{i}");
            store.commit(vec![open(&id), append(&id)]).expect("a write");
        }
        let kept = lock(&store.inner).sessions.len();
        assert!(kept <= MemoryStore::SESSIONS, "{kept} sessions kept");
        assert!(
            store.session("s0").expect("a lookup").is_none(),
            "the oldest went"
        );
        assert!(store
            .session(&format!("s{}", sessions - 1))
            .expect("a lookup")
            .is_some());
        // A live agent whose session went can still write: the append is dropped.
        store
            .commit(vec![append("s0")])
            .expect("an append to a dropped session");
    }

    fn bus(body: &str) -> Write {
        Write::Bus {
            name: "e".into(),
            body: body.into(),
        }
    }

    #[test]
    fn a_sessions_journal_is_what_was_journaled_from_its_opening_on() {
        let store = MemoryStore::journaling(StoreLimits::default());
        store.commit(vec![bus("before")]).expect("a write");
        store
            .commit(vec![open("s"), bus("created")])
            .expect("a write");
        store.commit(vec![bus("after")]).expect("a write");
        store
            .commit(vec![open("s"), bus("again")])
            .expect("a write");
        assert_eq!(
            store.journal_of("s").expect("the journal"),
            ["created", "after", "again"]
        );
        assert!(store.journal_of("t").expect("the journal").is_empty());
        store.remove("s").expect("a removal");
        assert!(store.journal_of("s").expect("the journal").is_empty());
    }
}
