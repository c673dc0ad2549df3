//! The approvals engine: asks whichever surface is there whether a call (or a use of a grant)
//! may go ahead, keeps every request in the session store before anyone sees it, and hands the
//! answer back to the run that asked.
//!
//! A request is asked of the approver its delegation named (the parent agent), or else of every
//! surface the host has (a terminal, an ACP editor, an MCP client) at once: the first answer
//! wins. With `[approvals] from_store`, another process on the same store answers too (`seam
//! approvals allow ID`); the store is read for it every [`STORE_POLL`]. With no one to ask, a
//! request is denied at once, and the diagnostic says how to allow it. A request that outlives
//! its process (`kill -9`) stays pending in the store: answered from there, or still pending,
//! it is taken up by the same request made again when its session is continued.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use thiserror::Error;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::approval::{Answer, ApprovalRecord, GrantClass, Policy, Status, Subject, Surface};
use crate::events::{Event, EventBus};
use crate::store::{now_ms, StoreError, Write};
use crate::sync::{lock, read, write};

/// How often a request that another process may answer reads the store.
pub const STORE_POLL: Duration = Duration::from_millis(200);

/// Default of `[approvals] timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// `[approvals]`: how requests are answered, and which uses of grants need a yes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSettings {
    /// How long a request waits for an answer before it is denied.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Whether a request waits for an answer from another process on the same store (`seam
    /// approvals allow ID`) as well as from the surfaces of this one.
    #[serde(default)]
    pub from_store: bool,
    /// Whether writing in a granted directory needs a yes.
    #[serde(default)]
    pub write: Policy,
    /// Whether an HTTP request to a granted origin needs a yes.
    #[serde(default)]
    pub http: Policy,
    /// Whether starting a process (an ACP agent, an MCP server over stdio) needs a yes.
    #[serde(default)]
    pub process: Policy,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECS
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            from_store: false,
            write: Policy::Allow,
            http: Policy::Allow,
            process: Policy::Allow,
        }
    }
}

impl ApprovalSettings {
    /// The policy of a class of grant.
    pub fn for_grant(&self, class: GrantClass) -> Policy {
        match class {
            GrantClass::Write => self.write,
            GrantClass::Http => self.http,
            GrantClass::Process => self.process,
        }
    }
}

/// Who asks: the path of runs down to the one that asked, its session and its tree's, and the
/// approver its delegation named, if any.
#[derive(Clone)]
pub struct Asker {
    /// From the top of the tree down to the asker.
    pub path: Vec<String>,
    /// The asker's session.
    pub session: String,
    /// The top-level agent's session.
    pub root: String,
    /// The approver the nearest delegation named (the parent agent), asked instead of the
    /// host's surfaces.
    pub approver: Option<Arc<dyn Surface>>,
}

impl Asker {
    /// The asker holding `account`, working in `session`.
    pub fn of(account: &crate::ledger::Account, session: &str) -> Self {
        Self {
            path: account.path(),
            session: session.to_string(),
            root: account
                .root_session()
                .unwrap_or_else(|| session.to_string()),
            approver: account.approver(),
        }
    }
}

/// A request that was not allowed: the words the model (or the caller) reads.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct Refused {
    /// The request's id.
    pub id: String,
    /// Why, and how to allow it.
    pub message: String,
}

/// Failures of answering a request by id.
#[derive(Debug, Error)]
pub enum ApprovalError {
    /// No request has that id.
    #[error("no approval request `{0}`")]
    Unknown(String),
    /// No request (or not this one) waits for this agent's answer.
    #[error("{} waits for the answer of `{agent}`", match id { Some(id) => format!("no approval request `{id}`"), None => "no approval request".to_string() })]
    NotForYou {
        /// The request named, if one was.
        id: Option<String>,
        /// The agent that tried to answer.
        agent: String,
    },
    /// It was answered already.
    #[error("approval request `{id}` was already answered: {status} by {by}")]
    Answered {
        /// The request.
        id: String,
        /// Its answer.
        status: &'static str,
        /// Who gave it.
        by: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The approvals of one host.
pub struct Approvals {
    events: Arc<EventBus>,
    settings: RwLock<ApprovalSettings>,
    surfaces: RwLock<Vec<Arc<dyn Surface>>>,
    /// Requests of this process waiting for an answer, by id.
    waiting: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    /// `(root session, key)` of the answers given "always".
    always: Mutex<HashSet<(String, String)>>,
    /// Requests waiting for a parent agent's answer, by the parent's id.
    parents: Mutex<HashMap<String, ParentQueue>>,
    /// Woken when a request is posted to a parent.
    posted: tokio::sync::Notify,
    next: AtomicU64,
}

/// The requests waiting for one parent agent's answer.
#[derive(Default)]
struct ParentQueue {
    /// Oldest first.
    pending: Vec<ApprovalRecord>,
    /// The ids the parent's model was not told of yet.
    untold: Vec<String>,
}

impl Approvals {
    /// An engine keeping its requests where `events` keeps everything.
    pub fn new(events: Arc<EventBus>) -> Self {
        Self {
            events,
            settings: RwLock::default(),
            surfaces: RwLock::default(),
            waiting: Mutex::default(),
            always: Mutex::default(),
            parents: Mutex::default(),
            posted: tokio::sync::Notify::new(),
            next: AtomicU64::new(1),
        }
    }

    /// Replaces the settings (from `[approvals]`).
    pub fn configure(&self, settings: ApprovalSettings) {
        *write(&self.settings) = settings;
    }

    /// The settings.
    pub fn settings(&self) -> ApprovalSettings {
        read(&self.settings).clone()
    }

    /// Adds a surface the host's requests are asked on (a terminal, an ACP client); returns a
    /// guard that removes it when dropped.
    pub fn add_surface(self: &Arc<Self>, surface: Arc<dyn Surface>) -> SurfaceGuard {
        write(&self.surfaces).push(surface.clone());
        SurfaceGuard {
            approvals: Arc::downgrade(self),
            surface,
        }
    }

    /// The approver of a delegation that names the agent `parent` as its approver: each request
    /// is posted for `parent`, whose model is told before its next step
    /// ([`Approvals::notices_for`]) and answers with [`Approvals::answer_for`].
    pub fn parent_approver(self: &Arc<Self>, parent: &str) -> Arc<dyn Surface> {
        Arc::new(ParentApprover {
            approvals: Arc::downgrade(self),
            parent: parent.to_string(),
        })
    }

    /// What the agent `agent` is to be told before its next model step: one message for each
    /// request posted for it since it was last told.
    pub fn notices_for(&self, agent: &str) -> Vec<String> {
        let mut parents = lock(&self.parents);
        let Some(queue) = parents.get_mut(agent) else {
            return Vec::new();
        };
        let untold = std::mem::take(&mut queue.untold);
        queue
            .pending
            .iter()
            .filter(|r| untold.contains(&r.id))
            .map(|r| {
                format!(
                    "[approval requested: {}] {} asks to {}. You are its approver: answer with \
                     the approve tool (id `{}`, allow true or false).",
                    r.id,
                    r.path_text(),
                    r.subject.describe(),
                    r.id
                )
            })
            .collect()
    }

    /// The requests waiting for the agent `agent`'s answer, oldest first; with a `wait`, waits
    /// up to it for one when there is none.
    pub async fn pending_for(&self, agent: &str, wait: Duration) -> Vec<ApprovalRecord> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let posted = self.posted.notified();
            let pending = lock(&self.parents)
                .get(agent)
                .map(|q| q.pending.clone())
                .unwrap_or_default();
            if !pending.is_empty() || tokio::time::Instant::now() >= deadline {
                return pending;
            }
            if tokio::time::timeout_at(deadline, posted).await.is_err() {
                return Vec::new();
            }
        }
    }

    /// Answers, as the agent `agent`, a request posted for it: `id`, or the oldest when `None`.
    pub fn answer_for(
        &self,
        agent: &str,
        id: Option<&str>,
        answer: Answer,
    ) -> Result<ApprovalRecord, ApprovalError> {
        let id = {
            let parents = lock(&self.parents);
            let pending = parents.get(agent).map(|q| &q.pending[..]).unwrap_or(&[]);
            let found = match id {
                Some(id) => pending.iter().find(|r| r.id == id),
                None => pending.first(),
            };
            match found {
                Some(r) => r.id.clone(),
                None => {
                    return Err(ApprovalError::NotForYou {
                        id: id.map(str::to_string),
                        agent: agent.to_string(),
                    })
                }
            }
        };
        self.answer(&id, answer)
    }

    fn post(&self, parent: &str, record: ApprovalRecord) {
        {
            let mut parents = lock(&self.parents);
            let queue = parents.entry(parent.to_string()).or_default();
            queue.untold.push(record.id.clone());
            queue.pending.push(record);
        }
        self.posted.notify_waiters();
    }

    fn withdraw(&self, parent: &str, id: &str) {
        let mut parents = lock(&self.parents);
        if let Some(queue) = parents.get_mut(parent) {
            queue.pending.retain(|r| r.id != id);
            queue.untold.retain(|u| u != id);
            if queue.pending.is_empty() {
                parents.remove(parent);
            }
        }
    }

    /// The requests of this process that wait for an answer.
    pub fn waiting(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.waiting).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Answers a request of this process, or one kept in the store by another (which the asker
    /// finds there); returns the record as answered.
    pub fn answer(&self, id: &str, answer: Answer) -> Result<ApprovalRecord, ApprovalError> {
        let store = self.events.store();
        let record = store
            .approval(id)?
            .ok_or_else(|| ApprovalError::Unknown(id.to_string()))?;
        if record.status != Status::Pending {
            return Err(ApprovalError::Answered {
                id: id.to_string(),
                status: record.status.as_str(),
                by: record.by.unwrap_or_default(),
            });
        }
        if let Some(tx) = lock(&self.waiting).remove(id) {
            let _ = tx.send(answer.clone());
            return Ok(record.answered(&answer, now_ms()));
        }
        // Another process's request (or one whose process ended): the store keeps the answer.
        match store.answer_approval(id, &answer)? {
            Some(record) => Ok(record),
            None => Err(ApprovalError::Unknown(id.to_string())),
        }
    }

    /// Asks whether `subject` may go ahead under `policy`; `Ok` when it may.
    pub async fn check(
        &self,
        policy: Policy,
        asker: &Asker,
        subject: Subject,
        abort: &CancellationToken,
    ) -> Result<(), Refused> {
        match policy {
            Policy::Allow => Ok(()),
            Policy::Deny => Err(Refused {
                id: String::new(),
                message: format!(
                    "denied: the config says `deny` to this: {}. To allow it: {}",
                    subject.describe(),
                    subject.how_to_allow()
                ),
            }),
            Policy::Ask => self.ask(asker, subject, abort).await,
        }
    }

    /// Asks whether `subject` may go ahead; `Ok` when a surface allowed it.
    pub async fn ask(
        &self,
        asker: &Asker,
        subject: Subject,
        abort: &CancellationToken,
    ) -> Result<(), Refused> {
        let key = subject.key();
        if lock(&self.always).contains(&(asker.root.clone(), key.clone())) {
            return Ok(());
        }
        let store = self.events.store().clone();
        // Kept answers of this tree: "always" from an earlier process, or the answer to this
        // very request, made before a restart and not yet given to a run.
        let kept = store.approvals(Some(&asker.root)).unwrap_or_default();
        let earlier = kept
            .iter()
            .find(|r| !r.delivered && r.subject == subject && !self.is_waiting(&r.id))
            .cloned();
        if let Some(record) = &earlier {
            if record.status != Status::Pending {
                return self.deliver(record.clone(), asker);
            }
        }
        if kept
            .iter()
            .any(|r| r.always && r.status == Status::Allowed && r.subject.key() == key)
        {
            lock(&self.always).insert((asker.root.clone(), key));
            return Ok(());
        }
        let record = match earlier {
            Some(record) => record,
            None => ApprovalRecord {
                id: self.next_id(&store),
                session: asker.session.clone(),
                root: asker.root.clone(),
                path: asker.path.clone(),
                subject,
                status: Status::Pending,
                always: false,
                by: None,
                reason: None,
                delivered: false,
                requested_ms: now_ms(),
                answered_ms: None,
            },
        };
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(record.id.clone(), tx);
        let _ = self.events.emit_with(
            &Event::ApprovalRequested {
                id: record.id.clone(),
                subject: record.subject.clone(),
                path: record.path.clone(),
                session: record.session.clone(),
            },
            vec![Write::Approval(Box::new(record.clone()))],
        );
        let answer = self.wait(&record, asker, rx, abort).await;
        lock(&self.waiting).remove(&record.id);
        let record = record.answered(&answer, now_ms());
        self.deliver(record, asker)
    }

    fn is_waiting(&self, id: &str) -> bool {
        lock(&self.waiting).contains_key(id)
    }

    fn next_id(&self, store: &Arc<dyn crate::store::SessionStore>) -> String {
        format!(
            "{}apr-{}",
            store.id_prefix(),
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Waits for the first answer: from the approver or the surfaces, from [`Approvals::answer`],
    /// from the store (when another process may answer), the timeout or the asker's end.
    async fn wait(
        &self,
        record: &ApprovalRecord,
        asker: &Asker,
        local: oneshot::Receiver<Answer>,
        abort: &CancellationToken,
    ) -> Answer {
        let settings = self.settings();
        let surfaces: Vec<Arc<dyn Surface>> = match &asker.approver {
            Some(approver) => vec![approver.clone()],
            None => read(&self.surfaces).clone(),
        };
        // Nobody could be asked (no surface, or none that can answer this one, and no other
        // process): denied, saying how to allow it.
        let nobody = || {
            Answer::deny(
                "nobody",
                Some(format!(
                    "no one could be asked: no terminal, no ACP editor or MCP client that \
                     can answer, and `[approvals] from_store` is off. To allow it: {}; or run \
                     it on a terminal; or set `from_store = true` under `[approvals]` and \
                     answer with `seam approvals allow {}`",
                    record.subject.how_to_allow(),
                    record.id
                )),
            )
        };
        if surfaces.is_empty() && !settings.from_store {
            return nobody();
        }
        let asks: Vec<BoxFuture<'static, Option<Answer>>> =
            surfaces.iter().map(|s| s.ask(record)).collect();
        // A surface that cannot answer this one gives up (`None`); the others still may. When
        // all gave up, it is as if there were none.
        let from_store_on = settings.from_store;
        let surfaces_answer = async move {
            let mut asks = futures::stream::FuturesUnordered::from_iter(asks);
            use futures::StreamExt;
            while let Some(answer) = asks.next().await {
                if let Some(answer) = answer {
                    return answer;
                }
            }
            if from_store_on {
                return futures::future::pending().await;
            }
            nobody()
        };
        let from_store = async {
            if !settings.from_store {
                return futures::future::pending().await;
            }
            let store = self.events.store().clone();
            loop {
                tokio::time::sleep(STORE_POLL).await;
                if let Ok(Some(kept)) = store.approval(&record.id) {
                    if kept.status != Status::Pending {
                        return Answer {
                            allow: kept.status == Status::Allowed,
                            always: kept.always,
                            by: kept.by.unwrap_or_else(|| "seam approvals".into()),
                            reason: kept.reason,
                        };
                    }
                }
            }
        };
        let timeout = Duration::from_secs(settings.timeout_secs);
        tokio::select! {
            answer = surfaces_answer => answer,
            Ok(answer) = local => answer,
            answer = from_store => answer,
            _ = tokio::time::sleep(timeout) => Answer::deny(
                "timeout",
                Some(format!(
                    "no answer in {}s (`[approvals] timeout_secs`)",
                    settings.timeout_secs
                )),
            ),
            _ = abort.cancelled() => Answer::deny("cancelled", Some("the run that asked was cancelled".into())),
        }
    }

    /// Records that the asker was given `record`'s answer, tells the bus, and returns it.
    fn deliver(&self, mut record: ApprovalRecord, asker: &Asker) -> Result<(), Refused> {
        record.delivered = true;
        if record.always && record.status == Status::Allowed {
            lock(&self.always).insert((asker.root.clone(), record.subject.key()));
        }
        let allowed = record.status == Status::Allowed;
        let by = record.by.clone().unwrap_or_default();
        let _ = self.events.emit_with(
            &Event::ApprovalResolved {
                id: record.id.clone(),
                allowed,
                always: record.always,
                by: by.clone(),
                reason: record.reason.clone(),
            },
            vec![Write::Approval(Box::new(record.clone()))],
        );
        if allowed {
            return Ok(());
        }
        Err(Refused {
            message: format!(
                "denied by {by}: {} was not approved (request {}){}",
                record.subject.describe(),
                record.id,
                record
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
            id: record.id,
        })
    }
}

/// A parent agent, as the approver its delegation named.
struct ParentApprover {
    approvals: std::sync::Weak<Approvals>,
    parent: String,
}

/// A request posted for a parent: withdrawn when its question is (answered, timed out).
struct Posted {
    approvals: std::sync::Weak<Approvals>,
    parent: String,
    id: String,
}

impl Drop for Posted {
    fn drop(&mut self) {
        if let Some(approvals) = self.approvals.upgrade() {
            approvals.withdraw(&self.parent, &self.id);
        }
    }
}

impl Surface for ParentApprover {
    fn name(&self) -> &str {
        "parent"
    }

    fn ask(&self, request: &ApprovalRecord) -> BoxFuture<'static, Option<Answer>> {
        let Some(approvals) = self.approvals.upgrade() else {
            return futures::future::ready(None).boxed();
        };
        approvals.post(&self.parent, request.clone());
        let posted = Posted {
            approvals: self.approvals.clone(),
            parent: self.parent.clone(),
            id: request.id.clone(),
        };
        // The answer comes through `Approvals::answer_for`; this only keeps it posted.
        async move {
            let _posted = posted;
            futures::future::pending().await
        }
        .boxed()
    }
}

/// Keeps a surface added; removes it when dropped.
pub struct SurfaceGuard {
    approvals: std::sync::Weak<Approvals>,
    surface: Arc<dyn Surface>,
}

impl Drop for SurfaceGuard {
    fn drop(&mut self) {
        if let Some(approvals) = self.approvals.upgrade() {
            write(&approvals.surfaces).retain(|s| !Arc::ptr_eq(s, &self.surface));
        }
    }
}

/// A surface answering from a function: for a library's embedder and for tests.
pub struct FnSurface<F> {
    name: String,
    answer: F,
}

impl<F> FnSurface<F>
where
    F: Fn(&ApprovalRecord) -> BoxFuture<'static, Option<Answer>> + Send + Sync + 'static,
{
    /// A surface named `name` answering with `answer`.
    pub fn new(name: impl Into<String>, answer: F) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            answer,
        })
    }
}

impl<F> Surface for FnSurface<F>
where
    F: Fn(&ApprovalRecord) -> BoxFuture<'static, Option<Answer>> + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn ask(&self, request: &ApprovalRecord) -> BoxFuture<'static, Option<Answer>> {
        (self.answer)(request).boxed()
    }
}
