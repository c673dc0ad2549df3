//! The session store on JetStream (`[sessions] store = "nats"`): sessions, run records,
//! inboxes and the journal in one key-value bucket of the cluster, so that a background run
//! started through one front-end can be listed, read and continued from another, also after
//! the first one died.
//!
//! [`JetStreamStore`] implements the synchronous [`SessionStore`] trait over a task of its own
//! (on a one-thread runtime it owns): every call is a job on one queue, so writes are applied
//! and reads answered in the order they were made, and writes nothing waits on
//! ([`SessionStore::commit_later`], [`SessionStore::start_run`]) are batched while the previous
//! batch is in flight. The layout is in [`layout`].
//!
//! Liveness: each opening takes a holder number (compare-and-set on a counter) and keeps a key
//! in the holders bucket, put at every heartbeat and expiring three heartbeats after the last
//! put. A run still `running` whose holder has no key is read as interrupted, as is a session
//! whose turn it left open; a clean close marks its own runs interrupted and lets go at once.
//!
//! What JetStream does not give: a commit is not one transaction. Every check runs before any
//! write, so a refused commit (a session's limit, a missing session) writes nothing; a process
//! that dies while publishing one may leave part of it, as a crash between two events would.

mod backend;
mod layout;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use futures::future::BoxFuture;
use seam_core::store::{
    RunKey, RunRecord, RunStart, SessionStore, SessionSummary, SpendRecord, StoreError,
    StoreLimits, StoredEvent, Write,
};

use backend::{Backend, Deferred};

use crate::connect::ClusterConfig;

/// Run keys of one opening are `holder << KEY_BITS` plus a count.
const KEY_BITS: u32 = 32;

/// How long a call waits for its answer: the backend's own deadlines end it sooner.
const ANSWER: Duration = Duration::from_secs(120);

/// A read or an immediate commit, run by the store's task.
type Task = Box<dyn for<'a> FnOnce(&'a mut Backend) -> BoxFuture<'a, ()> + Send>;

enum Job {
    /// Writes nothing waits on, batched with their neighbours.
    Later(Deferred),
    /// Anything that waits: runs after every write made before it.
    Now(Task),
    /// The close: the last job.
    Close(mpsc::SyncSender<()>),
}

/// Sessions, runs, inboxes and the journal in the JetStream key-value bucket
/// `seam-NAME-sessions` of a cluster.
pub struct JetStreamStore {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
    runtime: Option<tokio::runtime::Runtime>,
    prefix: String,
    last_key: AtomicI64,
    name: String,
}

impl std::fmt::Debug for JetStreamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamStore")
            .field("name", &self.name)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl JetStreamStore {
    /// Connects to the cluster `config` names, making its buckets if they are missing, and
    /// registers this opening. Fails, naming the server and the cluster, if it cannot connect
    /// or the server has no JetStream. May be called from inside or outside a Tokio runtime:
    /// the store runs on its own.
    pub fn open(config: &ClusterConfig, limits: StoreLimits) -> Result<Self, StoreError> {
        let name = format!("{} (cluster `{}`)", config.nats, config.name);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("seam-jetstream-store")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Connect {
                store: name.clone(),
                message: format!("cannot start the store's runtime: {e}"),
            })?;
        let (tx, rx) = mpsc::sync_channel(1);
        let cfg = config.clone();
        runtime.spawn(async move {
            let _ = tx.send(Backend::connect(&cfg, limits).await);
        });
        let connected = rx.recv_timeout(ANSWER).unwrap_or_else(|_| {
            Err(StoreError::Connect {
                store: name.clone(),
                message: "no answer in time".into(),
            })
        });
        let backend = match connected {
            Ok(backend) => backend,
            Err(e) => {
                runtime.shutdown_background();
                return Err(e);
            }
        };
        let holder = backend.holder;
        let holders = backend.holders();
        let heartbeat = config.heartbeat();
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(heartbeat);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = holders
                    .put(layout::holder_key(holder), bytes::Bytes::new())
                    .await
                {
                    tracing::warn!(error = %e, holder, "session store heartbeat failed");
                }
            }
        });
        let (jobs, queue) = tokio::sync::mpsc::unbounded_channel();
        runtime.spawn(serve(backend, queue));
        Ok(Self {
            jobs,
            runtime: Some(runtime),
            prefix: format!("j{holder}"),
            last_key: AtomicI64::new((holder as i64) << KEY_BITS),
            name,
        })
    }

    /// The server and cluster it is on, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `task` on the store's task after every job before it, and waits for its answer.
    fn ask<T: Send + 'static>(
        &self,
        task: impl for<'a> FnOnce(&'a mut Backend) -> BoxFuture<'a, Result<T, StoreError>>
            + Send
            + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Task = Box::new(move |b| {
            Box::pin(async move {
                let _ = tx.send(task(b).await);
            })
        });
        self.jobs.send(Job::Now(job)).map_err(|_| self.gone())?;
        rx.recv_timeout(ANSWER).map_err(|_| self.gone())?
    }

    fn later(&self, item: Deferred) {
        if self.jobs.send(Job::Later(item)).is_err() {
            tracing::warn!(store = %self.name, "session store closed: a write was dropped");
        }
    }

    fn gone(&self) -> StoreError {
        StoreError::Backend(format!("{}: the store's connection task ended", self.name))
    }
}

/// The store's task: jobs in order, deferred writes batched until something waits.
async fn serve(mut backend: Backend, mut jobs: tokio::sync::mpsc::UnboundedReceiver<Job>) {
    let mut batch: Vec<Deferred> = Vec::new();
    while let Some(job) = jobs.recv().await {
        let mut next = Some(job);
        while let Some(job) = next.take() {
            match job {
                Job::Later(item) => batch.push(item),
                Job::Now(task) => {
                    flush(&mut backend, &mut batch).await;
                    task(&mut backend).await;
                }
                Job::Close(done) => {
                    flush(&mut backend, &mut batch).await;
                    backend.close().await;
                    let _ = done.send(());
                    return;
                }
            }
            next = jobs.try_recv().ok();
        }
        flush(&mut backend, &mut batch).await;
    }
}

async fn flush(backend: &mut Backend, batch: &mut Vec<Deferred>) {
    if batch.is_empty() {
        return;
    }
    if let Err(e) = backend.apply(std::mem::take(batch)).await {
        tracing::warn!(error = %e, store = %backend.name, "session store refused a write");
    }
}

impl SessionStore for JetStreamStore {
    fn id_prefix(&self) -> &str {
        &self.prefix
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        self.ask(move |b| Box::pin(b.apply(writes.into_iter().map(Deferred::Write).collect())))
    }

    fn commit_later(&self, writes: Vec<Write>) {
        for w in writes {
            self.later(Deferred::Write(w));
        }
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.ask(|_| Box::pin(async { Ok(()) }))
    }

    fn start_run(&self, run: RunStart) -> Result<RunKey, StoreError> {
        let key = self.last_key.fetch_add(1, Ordering::Relaxed) + 1;
        self.later(Deferred::Start(key, Box::new(run)));
        Ok(key)
    }

    fn session(&self, id: &str) -> Result<Option<SessionSummary>, StoreError> {
        let id = id.to_string();
        self.ask(move |b| Box::pin(async move { b.session(&id).await }))
    }

    fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.ask(|b| Box::pin(b.sessions()))
    }

    fn events(&self, session: &str) -> Result<Vec<StoredEvent>, StoreError> {
        let id = session.to_string();
        self.ask(move |b| Box::pin(async move { b.events(&id).await }))
    }

    fn runs_of(&self, session: &str) -> Result<Vec<RunRecord>, StoreError> {
        let id = session.to_string();
        self.ask(move |b| Box::pin(async move { b.runs_of(&id).await }))
    }

    fn runs_of_child(&self, session: &str) -> Result<Vec<RunRecord>, StoreError> {
        let id = session.to_string();
        self.ask(move |b| Box::pin(async move { b.runs_of_child(&id).await }))
    }

    fn spend(&self, session: &str) -> Result<Option<SpendRecord>, StoreError> {
        let id = session.to_string();
        self.ask(move |b| Box::pin(async move { b.spend(&id).await }))
    }

    fn tape(&self, root: &str) -> Result<Vec<seam_core::cassette::Entry>, StoreError> {
        let root = root.to_string();
        self.ask(move |b| Box::pin(async move { b.tape(&root).await }))
    }

    fn approvals(
        &self,
        root: Option<&str>,
    ) -> Result<Vec<seam_core::approval::ApprovalRecord>, StoreError> {
        let root = root.map(str::to_string);
        self.ask(move |b| Box::pin(async move { b.approvals(root.as_deref()).await }))
    }

    fn approval(
        &self,
        id: &str,
    ) -> Result<Option<seam_core::approval::ApprovalRecord>, StoreError> {
        let id = id.to_string();
        self.ask(move |b| Box::pin(async move { b.approval(&id).await }))
    }

    fn answer_approval(
        &self,
        id: &str,
        answer: &seam_core::approval::Answer,
    ) -> Result<Option<seam_core::approval::ApprovalRecord>, StoreError> {
        let (id, answer) = (id.to_string(), answer.clone());
        self.ask(move |b| Box::pin(async move { b.answer_approval(&id, &answer).await }))
    }

    fn inbox(&self, session: &str) -> Result<Option<String>, StoreError> {
        let id = session.to_string();
        self.ask(move |b| Box::pin(async move { b.inbox(&id).await }))
    }

    fn journal(&self) -> Result<Vec<String>, StoreError> {
        self.ask(|b| Box::pin(b.journal()))
    }

    fn journal_of(&self, session: &str) -> Result<Vec<String>, StoreError> {
        let id = session.to_string();
        self.ask(move |b| Box::pin(async move { b.journal_of(&id).await }))
    }

    fn remove(&self, session: &str) -> Result<bool, StoreError> {
        let id = session.to_string();
        self.ask(move |b| Box::pin(async move { b.remove(&id).await }))
    }

    fn gc(&self, cutoff_ms: u64) -> Result<usize, StoreError> {
        self.ask(move |b| Box::pin(b.gc(cutoff_ms)))
    }
}

impl Drop for JetStreamStore {
    fn drop(&mut self) {
        let (tx, rx) = mpsc::sync_channel(1);
        if self.jobs.send(Job::Close(tx)).is_ok() {
            // Bounded: a server that is gone must not hold the process at its exit.
            let _ = rx.recv_timeout(Duration::from_secs(10));
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
