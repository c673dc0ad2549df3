//! Where the JetStream session store keeps what, and the documents it keeps there.
//!
//! One key-value bucket per cluster, `seam-NAME-sessions`, holds everything; ids are data, so
//! each id becomes one key token in base32hex (letters and digits only, one-to-one), never a
//! subject of its own making. The keys:
//!
//! | key                    | value                                                 |
//! |------------------------|-------------------------------------------------------|
//! | `s.SID`                | the session's [`SessionDoc`]                          |
//! | `e.SID.SEQ`            | one event ([`EventDoc`]), `SEQ` zero-padded from 1    |
//! | `r.PSID.KEY`           | a run started by session `PSID` ([`RunDoc`])          |
//! | `k.KEY`                | the `PSID` of run `KEY` (to find it by key)           |
//! | `c.CSID.KEY`           | the `PSID` of a run whose child session is `CSID`     |
//! | `i.SID`                | a child session's inbox (JSON)                        |
//! | `a.ID`                 | a request for approval (JSON `ApprovalRecord`)        |
//! | `t.ROOT.KEY.KIND.SEQ`  | a recorded input of a tree (JSON `cassette::Entry`)   |
//! | `j.HOLDER.N`           | one journaled bus event ([`JournalDoc`])              |
//! | `holders`              | the last holder number given out                      |
//!
//! A second bucket, `seam-NAME-holders`, holds one key per live opening (`h.HOLDER`), put again
//! at every heartbeat and expiring three heartbeats after the last put: a run still `running`
//! whose holder has no key there is read as interrupted.

use data_encoding::BASE32HEX_NOPAD;
use seam_core::store::{RunKey, RunRecord, RunStart, RunStatus, SessionSummary, StoredEvent};
use seam_core::types::RequestSnapshot;
use serde::{Deserialize, Serialize};

/// The key token of an id: base32hex, so any string (dots, spaces, quotes) maps to letters and
/// digits one-to-one. The empty id gets `_`, which no encoding yields.
pub fn token(id: &str) -> String {
    if id.is_empty() {
        return "_".into();
    }
    BASE32HEX_NOPAD.encode(id.as_bytes())
}

/// The id a [`token`] stands for, if it is one.
#[cfg(test)]
fn id_of(token: &str) -> Option<String> {
    if token == "_" {
        return Some(String::new());
    }
    let bytes = BASE32HEX_NOPAD.decode(token.as_bytes()).ok()?;
    String::from_utf8(bytes).ok()
}

/// The buckets of one cluster's store.
#[derive(Debug, Clone)]
pub struct Buckets {
    /// Sessions, runs, inboxes, the journal.
    pub data: String,
    /// Live openings.
    pub holders: String,
}

impl Buckets {
    /// The buckets of the cluster `name` (a checked name).
    pub fn of(name: &str) -> Self {
        Self {
            data: format!("seam-{name}-sessions"),
            holders: format!("seam-{name}-holders"),
        }
    }
}

/// The key of a session's document.
pub fn session_key(sid: &str) -> String {
    format!("s.{}", token(sid))
}

/// The key of a session's event `seq`.
pub fn event_key(sid: &str, seq: u64) -> String {
    format!("e.{}.{seq:012}", token(sid))
}

/// The filter of a session's events, under a bucket's subject prefix.
pub fn events_of(sid: &str) -> String {
    format!("e.{}.*", token(sid))
}

/// The key of a run's document.
pub fn run_key(psid: &str, key: RunKey) -> String {
    format!("r.{}.{key}", token(psid))
}

/// The filter of the runs a session started.
pub fn runs_of(psid: &str) -> String {
    format!("r.{}.*", token(psid))
}

/// The key that finds a run by its key.
pub fn by_key(key: RunKey) -> String {
    format!("k.{key}")
}

/// The key that finds a run by its child session.
pub fn child_key(csid: &str, key: RunKey) -> String {
    format!("c.{}.{key}", token(csid))
}

/// The filter of the runs that ran a child session.
pub fn runs_of_child(csid: &str) -> String {
    format!("c.{}.*", token(csid))
}

/// The key of a session's inbox.
pub fn inbox_key(sid: &str) -> String {
    format!("i.{}", token(sid))
}

/// The key of a request for approval ([`seam_core::approval::ApprovalRecord`]).
pub fn approval_key(id: &str) -> String {
    format!("a.{}", token(id))
}

/// The key of a recorded input of the tree under `root` (a listing returns them in the order
/// they were written, which is the order they were taken).
pub fn tape_key(root: &str, entry: &seam_core::cassette::Entry) -> String {
    format!(
        "t.{}.{}.{}.{}",
        token(root),
        token(&entry.key),
        entry.kind.as_str(),
        entry.seq
    )
}

/// The filter of the recorded inputs of the tree under `root`.
pub fn tape_of(root: &str) -> String {
    format!("t.{}.>", token(root))
}

/// The filter of every request for approval.
pub const APPROVALS: &str = "a.*";

/// The key of a journal entry.
pub fn journal_key(holder: u64, n: u64) -> String {
    format!("j.{holder}.{n:012}")
}

/// The filter of the journal.
pub const JOURNAL: &str = "j.>";

/// The filter of one opening's journal entries.
pub fn journal_of(holder: u64) -> String {
    format!("j.{holder}.*")
}

/// The filter of every session.
pub const SESSIONS: &str = "s.*";

/// The key of the holder counter.
pub const HOLDERS: &str = "holders";

/// The key of a live opening in the holders bucket.
pub fn holder_key(holder: u64) -> String {
    format!("h.{holder}")
}

/// The last token of a key (a run key, a sequence number).
pub fn last_token(key: &str) -> &str {
    key.rsplit('.').next().unwrap_or(key)
}

/// A session as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionDoc {
    pub id: String,
    pub agent: String,
    pub parent: Option<String>,
    pub working_directory: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub events: u64,
    pub bytes: u64,
    /// Cut short by the end of its process (as written by a clean close).
    pub interrupted: bool,
    /// A turn has started and not ended.
    pub open_turn: bool,
    /// The opening that last wrote it.
    pub holder: u64,
    /// Each opening that opened it, with how many entries it had journaled before: its
    /// entries after those are the session's journal. Absent from documents written before.
    #[serde(default)]
    pub openings: Vec<Opening>,
    /// What the session's account spent, and its budget. Absent from documents written before.
    #[serde(default)]
    pub spend: seam_core::store::SpendRecord,
}

/// An opening of the store that opened a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opening {
    /// Its holder number.
    pub holder: u64,
    /// Its journal entries up to this count came before.
    pub after: u64,
}

impl SessionDoc {
    /// Its summary; `live` says whether its holder still holds the store.
    pub fn summary(&self, live: bool) -> SessionSummary {
        SessionSummary {
            id: self.id.clone(),
            agent: self.agent.clone(),
            parent: self.parent.clone(),
            working_directory: self.working_directory.clone(),
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            events: self.events,
            bytes: self.bytes,
            interrupted: self.interrupted || (self.open_turn && !live),
        }
    }
}

/// One session event as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventDoc {
    pub kind: String,
    pub body: String,
    pub at_ms: u64,
}

impl EventDoc {
    /// The event read back as the `seq`th of its session.
    pub fn stored(self, seq: u64) -> StoredEvent {
        StoredEvent {
            seq,
            kind: self.kind,
            body: self.body,
            at_ms: self.at_ms,
        }
    }
}

/// One journaled bus event as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalDoc {
    pub name: String,
    pub body: String,
    pub at_ms: u64,
}

/// A run as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDoc {
    pub key: RunKey,
    pub run_id: String,
    pub provider: String,
    pub parent_agent: String,
    pub parent_session: String,
    pub request: RequestSnapshot,
    pub background: bool,
    pub label: String,
    /// `running`, `ended` or `interrupted`.
    pub status: String,
    pub stop_reason: Option<String>,
    pub diagnostic: Option<String>,
    pub child_session: Option<String>,
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
    pub announced: bool,
    pub report: Option<String>,
    pub report_pending: bool,
    /// The opening that started it.
    pub holder: u64,
}

/// What a run still `running` reads as once its holder is gone.
pub const INTERRUPTED: &str = "interrupted: the process running it ended before the run did";

impl RunDoc {
    /// A run as it starts, held by `holder`.
    pub fn start(key: RunKey, run: RunStart, holder: u64, now: u64) -> Self {
        Self {
            key,
            run_id: run.run_id,
            provider: run.provider,
            parent_agent: run.parent_agent,
            parent_session: run.parent_session,
            request: run.request,
            background: run.background,
            label: run.label,
            status: RunStatus::Running.as_str().into(),
            stop_reason: None,
            diagnostic: None,
            child_session: None,
            started_ms: now,
            ended_ms: None,
            announced: false,
            report: None,
            report_pending: false,
            holder,
        }
    }

    /// Its record; `live` says whether its holder still holds the store (a run still
    /// `running` in a store nobody holds is interrupted).
    pub fn record(self, live: bool) -> RunRecord {
        let mut status = RunStatus::parse(&self.status).unwrap_or(RunStatus::Interrupted);
        let mut diagnostic = self.diagnostic;
        if status == RunStatus::Running && !live {
            status = RunStatus::Interrupted;
            diagnostic = Some(INTERRUPTED.into());
        }
        RunRecord {
            key: self.key,
            start: RunStart {
                run_id: self.run_id,
                provider: self.provider,
                parent_agent: self.parent_agent,
                parent_session: self.parent_session,
                request: self.request,
                background: self.background,
                label: self.label,
            },
            status,
            stop_reason: self.stop_reason,
            diagnostic,
            child_session: self.child_session,
            started_ms: self.started_ms,
            ended_ms: self.ended_ms,
            announced: self.announced,
            report: self.report,
            report_pending: self.report_pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_id_becomes_one_safe_token_and_back() {
        for id in [
            "",
            "s1-lead-1",
            "a.b c",
            "s'; DROP TABLE sessions; --",
            "é*>",
        ] {
            let t = token(id);
            assert!(
                t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{id:?} -> {t:?}"
            );
            assert_eq!(id_of(&t).as_deref(), Some(id));
        }
        assert_ne!(token("a"), token("b"));
        assert_eq!(last_token(&run_key("p", 42)), "42");
    }
}
