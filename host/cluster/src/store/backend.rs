//! The async side of the JetStream store: one task owns the connection and the caches, and
//! applies writes and answers reads in the order they were made.
//!
//! A commit is staged in memory first (every check before any write), then published: the
//! session documents first, each with the revision it was read at (so that two processes never
//! number one session's events twice), then everything else, in order, on one connection (so
//! the journal's order is the stream's), and the acks awaited together.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv};
use bytes::Bytes;
use futures::StreamExt;
use seam_core::approval::{Answer, ApprovalRecord, Status as ApprovalStatus};
use seam_core::store::{
    now_ms, RunKey, RunRecord, RunStart, RunStatus, SessionSummary, SpendRecord, StoreError,
    StoreLimits, StoredEvent, Write,
};

use super::layout::{self, Buckets, EventDoc, JournalDoc, Opening, RunDoc, SessionDoc};
use crate::connect::ClusterConfig;

/// How long one read or write may take before it fails rather than hang the caller.
const DEADLINE: Duration = Duration::from_secs(30);

/// Sessions whose documents are kept between commits (the most recently written).
const SESSION_CACHE: usize = 1_000;

/// What a deferred write is.
#[derive(Debug)]
pub(super) enum Deferred {
    /// A run's start.
    Start(RunKey, Box<RunStart>),
    /// A write nothing waits on.
    Write(Write),
}

/// The connection, the buckets and what this opening remembers.
pub(super) struct Backend {
    client: async_nats::Client,
    js: jetstream::Context,
    data: kv::Store,
    holders: kv::Store,
    /// This opening's number.
    pub(super) holder: u64,
    limits: StoreLimits,
    /// Sessions this opening wrote: each document with the revision it was last written at.
    sessions: HashMap<String, (SessionDoc, u64)>,
    /// Runs this opening started and that have not ended.
    runs: HashMap<RunKey, RunDoc>,
    /// Journal entries this opening wrote.
    journaled: u64,
    /// What to call the store in errors.
    pub(super) name: String,
}

fn backend(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("{what}: {e}"))
}

fn json<T: serde::Serialize>(doc: &T) -> Bytes {
    // Plain data with string keys: serialising cannot fail.
    Bytes::from(serde_json::to_vec(doc).unwrap_or_default())
}

fn parse<T: serde::de::DeserializeOwned>(key: &str, body: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(body).map_err(|e| backend(&format!("unreadable entry `{key}`"), e))
}

/// One publish of a commit.
enum Op {
    Put(String, Bytes),
    Delete(String),
}

impl Backend {
    /// Connects, makes the buckets if they are missing, and takes a holder number.
    pub(super) async fn connect(
        config: &ClusterConfig,
        limits: StoreLimits,
    ) -> Result<Self, StoreError> {
        let name = format!("{} (cluster `{}`)", config.nats, config.name);
        let opening = |message: String| StoreError::Connect {
            store: name.clone(),
            message,
        };
        let client = config
            .connect("seam-sessions")
            .await
            .map_err(|e| opening(e.to_string()))?;
        let js = jetstream::new(client.clone());
        let buckets = Buckets::of(&config.name);
        let data = bucket(
            &js,
            kv::Config {
                bucket: buckets.data.clone(),
                description: "Seam sessions, runs and journal".into(),
                history: 1,
                storage: jetstream::stream::StorageType::File,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| opening(e.to_string()))?;
        // A lease: an opening's key expires three heartbeats after its last put.
        let lease = config
            .heartbeat()
            .saturating_mul(3)
            .max(Duration::from_secs(1));
        let holders = bucket(
            &js,
            kv::Config {
                bucket: buckets.holders.clone(),
                description: "Seam session store openings that are alive".into(),
                history: 1,
                max_age: lease,
                storage: jetstream::stream::StorageType::Memory,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| opening(e.to_string()))?;
        let holder = take_holder(&data)
            .await
            .map_err(|e| opening(e.to_string()))?;
        holders
            .put(layout::holder_key(holder), Bytes::new())
            .await
            .map_err(|e| opening(format!("cannot register this opening: {e}")))?;
        Ok(Self {
            client,
            js,
            data,
            holders,
            holder,
            limits,
            sessions: HashMap::new(),
            runs: HashMap::new(),
            journaled: 0,
            name,
        })
    }

    /// The holders bucket, for the heartbeat.
    pub(super) fn holders(&self) -> kv::Store {
        self.holders.clone()
    }

    /// Applies `items` all or none as far as checks go (a refusal writes nothing).
    pub(super) async fn apply(&mut self, items: Vec<Deferred>) -> Result<(), StoreError> {
        let now = now_ms();
        let mut sessions: HashMap<String, (SessionDoc, Option<u64>)> = HashMap::new();
        let mut session_order: Vec<String> = Vec::new();
        let mut runs: HashMap<RunKey, RunDoc> = HashMap::new();
        let mut run_order: Vec<RunKey> = Vec::new();
        let mut ops: Vec<Op> = Vec::new();
        let mut journaled = self.journaled;
        for item in items {
            let write = match item {
                Deferred::Start(key, run) => {
                    let doc = RunDoc::start(key, *run, self.holder, now);
                    ops.push(Op::Put(
                        layout::by_key(key),
                        Bytes::from(doc.parent_session.clone()),
                    ));
                    if runs.insert(key, doc).is_none() {
                        run_order.push(key);
                    }
                    continue;
                }
                Deferred::Write(w) => w,
            };
            match write {
                Write::OpenSession {
                    id,
                    agent,
                    parent,
                    working_directory,
                } => {
                    let holder = self.holder;
                    // Its journal starts after what this opening journaled so far (a second
                    // opening by the same holder keeps the first's start).
                    let opening = Opening {
                        holder,
                        after: journaled,
                    };
                    match self.staged_session(&mut sessions, &id).await? {
                        Some(doc) => {
                            doc.holder = holder;
                            doc.interrupted = false;
                            if !doc.openings.iter().any(|o| o.holder == holder) {
                                doc.openings.push(opening);
                            }
                        }
                        None => {
                            let doc = SessionDoc {
                                id: id.clone(),
                                agent,
                                parent,
                                working_directory,
                                created_ms: now,
                                updated_ms: now,
                                events: 0,
                                bytes: 0,
                                interrupted: false,
                                open_turn: false,
                                holder,
                                openings: vec![opening],
                                spend: Default::default(),
                            };
                            sessions.insert(id.clone(), (doc, None));
                        }
                    }
                    if !session_order.contains(&id) {
                        session_order.push(id);
                    }
                }
                Write::Append {
                    session,
                    kind,
                    body,
                } => {
                    let (holder, limit) = (self.holder, self.limits.max_session_bytes);
                    let Some(doc) = self.staged_session(&mut sessions, &session).await? else {
                        return Err(StoreError::NoSession(session));
                    };
                    let grown = doc.bytes + body.len() as u64;
                    if grown > limit {
                        return Err(StoreError::SessionFull {
                            session,
                            limit_bytes: limit,
                        });
                    }
                    doc.events += 1;
                    doc.bytes = grown;
                    doc.updated_ms = now;
                    doc.holder = holder;
                    match kind.as_str() {
                        "turn/start" => doc.open_turn = true,
                        "turn/end" => doc.open_turn = false,
                        _ => {}
                    }
                    let seq = doc.events;
                    ops.push(Op::Put(
                        layout::event_key(&session, seq),
                        json(&EventDoc {
                            kind,
                            body,
                            at_ms: now,
                        }),
                    ));
                    if !session_order.contains(&session) {
                        session_order.push(session);
                    }
                }
                Write::Bus { name, body } => {
                    journaled += 1;
                    ops.push(Op::Put(
                        layout::journal_key(self.holder, journaled),
                        json(&JournalDoc {
                            name,
                            body,
                            at_ms: now,
                        }),
                    ));
                }
                Write::Spend {
                    session,
                    added,
                    limits,
                } => {
                    // Kept in the session's document: it is staged and published with the
                    // same revision check as its events.
                    let Some(doc) = self.staged_session(&mut sessions, &session).await? else {
                        continue;
                    };
                    doc.spend = doc.spend.add(added, limits);
                    if !session_order.contains(&session) {
                        session_order.push(session);
                    }
                }
                Write::Tape { root, entry, .. } => {
                    ops.push(Op::Put(layout::tape_key(&root, &entry), json(&entry)));
                }
                Write::Approval(record) => {
                    let key = layout::approval_key(&record.id);
                    ops.retain(|op| !matches!(op, Op::Put(k, _) | Op::Delete(k) if *k == key));
                    ops.push(Op::Put(key, json(&record)));
                }
                Write::Inbox { session, body } => {
                    let key = layout::inbox_key(&session);
                    ops.retain(|op| !matches!(op, Op::Put(k, _) | Op::Delete(k) if *k == key));
                    ops.push(match body {
                        Some(body) => Op::Put(key, Bytes::from(body)),
                        None => Op::Delete(key),
                    });
                }
                Write::RunEnded { run, .. }
                | Write::RunInterrupted { run, .. }
                | Write::LinkChild { run, .. }
                | Write::Announced { run }
                | Write::Report { run, .. }
                | Write::ReportDelivered { run } => {
                    // A run the store has no record of has nothing to update (as in SQLite).
                    let Some(doc) = self.staged_run(&mut runs, run).await? else {
                        continue;
                    };
                    if !run_order.contains(&run) {
                        run_order.push(run);
                    }
                    update_run(doc, write, now, &mut ops);
                }
            }
        }

        for key in &run_order {
            if let Some(doc) = runs.get(key) {
                ops.push(Op::Put(
                    layout::run_key(&doc.parent_session, *key),
                    json(doc),
                ));
            }
        }
        // Every size is checked before anything is published.
        let mut docs = Vec::with_capacity(session_order.len());
        for id in &session_order {
            if let Some((doc, revision)) = sessions.get(id) {
                let body = json(doc);
                self.fits(&format!("session `{id}`"), &body)?;
                docs.push((id, body, *revision));
            }
        }
        for op in &ops {
            if let Op::Put(key, body) = op {
                self.fits(&format!("entry `{key}`"), body)?;
            }
        }

        // Session documents first, each at the revision it was read at.
        let mut acks = Vec::new();
        for (id, body, revision) in docs {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(
                "Nats-Expected-Last-Subject-Sequence",
                revision.unwrap_or(0).to_string().as_str(),
            );
            let subject = format!("{}{}", self.data.prefix, layout::session_key(id));
            let ack = self
                .js
                .publish_with_headers(subject, headers, body)
                .await
                .map_err(|e| backend(&self.name, e))?;
            acks.push((id.clone(), ack));
        }
        for (id, ack) in acks {
            match tokio::time::timeout(DEADLINE, ack).await {
                Ok(Ok(ack)) => {
                    if let Some((doc, _)) = sessions.remove(&id) {
                        self.remember(id, doc, ack.sequence);
                    }
                }
                Ok(Err(e)) => {
                    // Most likely another process wrote the session since it was read.
                    self.sessions.remove(&id);
                    return Err(StoreError::Backend(format!(
                        "session `{id}` could not be written (another process may be writing \
                         it): {e}"
                    )));
                }
                Err(_) => return Err(backend(&self.name, "no acknowledgement in time")),
            }
        }

        let mut pending = Vec::with_capacity(ops.len());
        for op in ops {
            let (subject, headers, body) = match op {
                Op::Put(key, body) => (format!("{}{key}", self.data.prefix), None, body),
                Op::Delete(key) => {
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert("KV-Operation", "DEL");
                    (
                        format!("{}{key}", self.data.prefix),
                        Some(headers),
                        Bytes::new(),
                    )
                }
            };
            let ack = match headers {
                Some(h) => self.js.publish_with_headers(subject, h, body).await,
                None => self.js.publish(subject, body).await,
            }
            .map_err(|e| backend(&self.name, e))?;
            pending.push(ack);
        }
        for ack in pending {
            match tokio::time::timeout(DEADLINE, ack).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(backend(&self.name, e)),
                Err(_) => return Err(backend(&self.name, "no acknowledgement in time")),
            }
        }
        self.journaled = journaled;
        for (key, doc) in runs {
            if doc.status == RunStatus::Running.as_str() && doc.holder == self.holder {
                self.runs.insert(key, doc);
            } else {
                self.runs.remove(&key);
            }
        }
        Ok(())
    }

    /// Checks a value against the server's `max_payload`: refused, never truncated.
    fn fits(&self, what: &str, body: &[u8]) -> Result<(), StoreError> {
        crate::connect::fits(&self.client, || what.to_string(), body)
            .map_err(|e| StoreError::Backend(e.to_string()))
    }

    fn remember(&mut self, id: String, doc: SessionDoc, revision: u64) {
        if self.sessions.len() >= SESSION_CACHE && !self.sessions.contains_key(&id) {
            // The least recently written go: they are read again when written again.
            let mut by_age: Vec<(u64, String)> = self
                .sessions
                .iter()
                .map(|(k, (d, _))| (d.updated_ms, k.clone()))
                .collect();
            by_age.sort();
            for (_, k) in by_age.into_iter().take(SESSION_CACHE / 10) {
                self.sessions.remove(&k);
            }
        }
        self.sessions.insert(id, (doc, revision));
    }

    /// The staged document of a session: as staged, else as this opening last wrote it, else
    /// as the bucket has it; `None` if there is none.
    async fn staged_session<'a>(
        &mut self,
        staged: &'a mut HashMap<String, (SessionDoc, Option<u64>)>,
        id: &str,
    ) -> Result<Option<&'a mut SessionDoc>, StoreError> {
        if !staged.contains_key(id) {
            let found = match self.sessions.get(id) {
                Some((doc, revision)) => Some((doc.clone(), Some(*revision))),
                None => match self.entry(&layout::session_key(id)).await? {
                    Some((body, revision)) => {
                        let doc: SessionDoc = parse(id, &body)?;
                        Some((doc, Some(revision)))
                    }
                    None => None,
                },
            };
            match found {
                Some(found) => {
                    staged.insert(id.to_string(), found);
                }
                None => return Ok(None),
            }
        }
        Ok(staged.get_mut(id).map(|(doc, _)| doc))
    }

    /// The staged document of a run: as staged, else as this opening holds it, else as the
    /// bucket has it.
    async fn staged_run<'a>(
        &mut self,
        staged: &'a mut HashMap<RunKey, RunDoc>,
        key: RunKey,
    ) -> Result<Option<&'a mut RunDoc>, StoreError> {
        if let std::collections::hash_map::Entry::Vacant(slot) = staged.entry(key) {
            let found = match self.runs.get(&key) {
                Some(doc) => Some(doc.clone()),
                None => self.run_by_key(key).await?,
            };
            match found {
                Some(doc) => {
                    slot.insert(doc);
                }
                None => return Ok(None),
            }
        }
        Ok(staged.get_mut(&key))
    }

    async fn run_by_key(&self, key: RunKey) -> Result<Option<RunDoc>, StoreError> {
        let Some((psid, _)) = self.entry(&layout::by_key(key)).await? else {
            return Ok(None);
        };
        let psid = String::from_utf8_lossy(&psid).into_owned();
        let k = layout::run_key(&psid, key);
        match self.entry(&k).await? {
            Some((body, _)) => Ok(Some(parse(&k, &body)?)),
            None => Ok(None),
        }
    }

    /// A key's value and revision, if it has a value.
    async fn entry(&self, key: &str) -> Result<Option<(Bytes, u64)>, StoreError> {
        let entry = tokio::time::timeout(DEADLINE, self.data.entry(key))
            .await
            .map_err(|_| backend(&self.name, "no answer in time"))?
            .map_err(|e| backend(&self.name, e))?;
        Ok(entry.and_then(|e| match e.operation {
            kv::Operation::Put => Some((e.value, e.revision)),
            _ => None,
        }))
    }

    /// Every live key under `filter` (a key pattern) in `store`, with its value, in the order
    /// they were last written.
    async fn list_in(
        &self,
        store: &kv::Store,
        filter: &str,
    ) -> Result<Vec<(String, Bytes)>, StoreError> {
        let listing = async {
            let consumer = store
                .stream
                .create_consumer(consumer::push::OrderedConfig {
                    deliver_subject: self.client.new_inbox(),
                    filter_subject: format!("{}{filter}", store.prefix),
                    deliver_policy: consumer::DeliverPolicy::LastPerSubject,
                    replay_policy: consumer::ReplayPolicy::Instant,
                    ..Default::default()
                })
                .await
                .map_err(|e| backend(&self.name, e))?;
            let mut out = Vec::new();
            if consumer.cached_info().num_pending == 0 {
                return Ok(out);
            }
            let mut messages = consumer
                .messages()
                .await
                .map_err(|e| backend(&self.name, e))?;
            while let Some(message) = messages.next().await {
                let message = message.map_err(|e| backend(&self.name, e))?;
                let pending = message.info().map_err(|e| backend(&self.name, e))?.pending;
                let deleted = message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("KV-Operation"))
                    .is_some_and(|op| matches!(op.as_str(), "DEL" | "PURGE"));
                if !deleted {
                    let key = message
                        .subject
                        .strip_prefix(store.prefix.as_str())
                        .unwrap_or(message.subject.as_str())
                        .to_string();
                    out.push((key, message.payload.clone()));
                }
                if pending == 0 {
                    break;
                }
            }
            Ok(out)
        };
        tokio::time::timeout(DEADLINE, listing)
            .await
            .map_err(|_| backend(&self.name, "a listing took too long"))?
    }

    async fn list(&self, filter: &str) -> Result<Vec<(String, Bytes)>, StoreError> {
        self.list_in(&self.data, filter).await
    }

    /// The openings alive now.
    async fn live(&self) -> Result<HashSet<u64>, StoreError> {
        Ok(self
            .list_in(&self.holders, "h.*")
            .await?
            .into_iter()
            .filter_map(|(k, _)| layout::last_token(&k).parse().ok())
            .collect())
    }

    pub(super) async fn session(&self, id: &str) -> Result<Option<SessionSummary>, StoreError> {
        let Some((body, _)) = self.entry(&layout::session_key(id)).await? else {
            return Ok(None);
        };
        let doc: SessionDoc = parse(id, &body)?;
        let live = doc.holder == self.holder || self.live().await?.contains(&doc.holder);
        Ok(Some(doc.summary(live)))
    }

    pub(super) async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let live = self.live().await?;
        let mut out = Vec::new();
        for (key, body) in self.list(layout::SESSIONS).await? {
            let doc: SessionDoc = parse(&key, &body)?;
            let alive = doc.holder == self.holder || live.contains(&doc.holder);
            out.push(doc.summary(alive));
        }
        out.sort_by(|a, b| {
            b.updated_ms
                .cmp(&a.updated_ms)
                .then_with(|| b.id.cmp(&a.id))
        });
        Ok(out)
    }

    pub(super) async fn events(&self, id: &str) -> Result<Vec<StoredEvent>, StoreError> {
        let mut out = Vec::new();
        for (key, body) in self.list(&layout::events_of(id)).await? {
            let Ok(seq) = layout::last_token(&key).parse::<u64>() else {
                continue;
            };
            let doc: EventDoc = parse(&key, &body)?;
            out.push(doc.stored(seq));
        }
        out.sort_by_key(|e| e.seq);
        Ok(out)
    }

    async fn records(&self, docs: Vec<RunDoc>) -> Result<Vec<RunRecord>, StoreError> {
        let live = if docs.iter().any(|d| d.status == RunStatus::Running.as_str()) {
            self.live().await?
        } else {
            HashSet::new()
        };
        let mut out: Vec<RunRecord> = docs
            .into_iter()
            .map(|d| {
                let alive = d.holder == self.holder || live.contains(&d.holder);
                d.record(alive)
            })
            .collect();
        out.sort_by_key(|r| r.key);
        Ok(out)
    }

    async fn run_docs_of(&self, psid: &str) -> Result<Vec<RunDoc>, StoreError> {
        self.list(&layout::runs_of(psid))
            .await?
            .into_iter()
            .map(|(key, body)| parse(&key, &body))
            .collect()
    }

    pub(super) async fn runs_of(&self, psid: &str) -> Result<Vec<RunRecord>, StoreError> {
        let docs = self.run_docs_of(psid).await?;
        self.records(docs).await
    }

    pub(super) async fn runs_of_child(&self, csid: &str) -> Result<Vec<RunRecord>, StoreError> {
        let mut docs = Vec::new();
        for (key, psid) in self.list(&layout::runs_of_child(csid)).await? {
            let Ok(run) = layout::last_token(&key).parse::<RunKey>() else {
                continue;
            };
            let k = layout::run_key(&String::from_utf8_lossy(&psid), run);
            if let Some((body, _)) = self.entry(&k).await? {
                docs.push(parse(&k, &body)?);
            }
        }
        self.records(docs).await
    }

    pub(super) async fn spend(&self, id: &str) -> Result<Option<SpendRecord>, StoreError> {
        let Some((body, _)) = self.entry(&layout::session_key(id)).await? else {
            return Ok(None);
        };
        let doc: SessionDoc = parse(id, &body)?;
        Ok((doc.spend != SpendRecord::default()).then_some(doc.spend))
    }

    pub(super) async fn approvals(
        &self,
        root: Option<&str>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let mut out = Vec::new();
        for (key, body) in self.list(layout::APPROVALS).await? {
            let record: ApprovalRecord = parse(&key, &body)?;
            if root.is_none_or(|root| record.root == root) {
                out.push(record);
            }
        }
        out.sort_by(|a, b| (a.requested_ms, &a.id).cmp(&(b.requested_ms, &b.id)));
        Ok(out)
    }

    pub(super) async fn tape(
        &self,
        root: &str,
    ) -> Result<Vec<seam_core::cassette::Entry>, StoreError> {
        self.list(&layout::tape_of(root))
            .await?
            .into_iter()
            .map(|(key, body)| parse(&key, &body))
            .collect()
    }

    pub(super) async fn approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let key = layout::approval_key(id);
        match self.entry(&key).await? {
            Some((body, _)) => Ok(Some(parse(&key, &body)?)),
            None => Ok(None),
        }
    }

    /// Answers a pending request; the write is conditional on the revision read, so that of two
    /// answers (or an answer and the asker's own write) only one wins, and the other reads again.
    pub(super) async fn answer_approval(
        &self,
        id: &str,
        answer: &Answer,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let key = layout::approval_key(id);
        for _ in 0..8 {
            let Some((body, revision)) = self.entry(&key).await? else {
                return Ok(None);
            };
            let record: ApprovalRecord = parse(&key, &body)?;
            if record.status != ApprovalStatus::Pending {
                return Ok(Some(record));
            }
            let record = record.answered(answer, now_ms());
            let written =
                tokio::time::timeout(DEADLINE, self.data.update(&key, json(&record), revision))
                    .await
                    .map_err(|_| backend(&self.name, "no answer in time"))?;
            if written.is_ok() {
                return Ok(Some(record));
            }
        }
        Err(backend(
            &self.name,
            format!("approval request `{id}` kept changing while it was answered"),
        ))
    }

    pub(super) async fn inbox(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .entry(&layout::inbox_key(id))
            .await?
            .map(|(body, _)| String::from_utf8_lossy(&body).into_owned()))
    }

    pub(super) async fn journal(&self) -> Result<Vec<String>, StoreError> {
        self.list(layout::JOURNAL)
            .await?
            .into_iter()
            .map(|(key, body)| parse::<JournalDoc>(&key, &body).map(|d| d.body))
            .collect()
    }

    pub(super) async fn journal_of(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let Some((body, _)) = self.entry(&layout::session_key(id)).await? else {
            return Ok(Vec::new());
        };
        let doc: SessionDoc = parse(id, &body)?;
        let mut out = Vec::new();
        for opening in &doc.openings {
            let mut entries = Vec::new();
            for (key, body) in self.list(&layout::journal_of(opening.holder)).await? {
                let Ok(n) = layout::last_token(&key).parse::<u64>() else {
                    continue;
                };
                if n > opening.after {
                    entries.push((n, parse::<JournalDoc>(&key, &body)?.body));
                }
            }
            entries.sort_by_key(|(n, _)| *n);
            out.extend(entries.into_iter().map(|(_, body)| body));
        }
        Ok(out)
    }

    /// Removes every message of the keys `filter` matches.
    async fn purge(&self, filter: &str) -> Result<(), StoreError> {
        tokio::time::timeout(
            DEADLINE,
            self.data
                .stream
                .purge()
                .filter(format!("{}{filter}", self.data.prefix)),
        )
        .await
        .map_err(|_| backend(&self.name, "a purge took too long"))?
        .map_err(|e| backend(&self.name, e))?;
        Ok(())
    }

    pub(super) async fn remove(&mut self, id: &str) -> Result<bool, StoreError> {
        let had = self.entry(&layout::session_key(id)).await?.is_some();
        let mut tree = vec![id.to_string()];
        let mut i = 0;
        while i < tree.len() {
            let session = tree[i].clone();
            for run in self.run_docs_of(&session).await? {
                self.purge(&layout::by_key(run.key)).await?;
                if let Some(child) = &run.child_session {
                    self.purge(&layout::child_key(child, run.key)).await?;
                    if !tree.contains(child) {
                        tree.push(child.clone());
                    }
                }
                self.runs.remove(&run.key);
            }
            self.purge(&layout::runs_of(&session)).await?;
            self.purge(&layout::events_of(&session)).await?;
            self.purge(&layout::inbox_key(&session)).await?;
            self.purge(&layout::session_key(&session)).await?;
            self.sessions.remove(&session);
            i += 1;
        }
        for record in self.approvals(None).await? {
            if tree.contains(&record.root) {
                self.purge(&layout::approval_key(&record.id)).await?;
            }
        }
        self.purge(&layout::tape_of(id)).await?;
        Ok(had)
    }

    pub(super) async fn gc(&mut self, cutoff_ms: u64) -> Result<usize, StoreError> {
        let old: Vec<String> = self
            .sessions()
            .await?
            .into_iter()
            .filter(|s| s.parent.is_none() && s.updated_ms < cutoff_ms)
            .map(|s| s.id)
            .collect();
        for id in &old {
            self.remove(id).await?;
        }
        for (key, body) in self.list(layout::JOURNAL).await? {
            let doc: JournalDoc = parse(&key, &body)?;
            if doc.at_ms < cutoff_ms {
                self.purge(&key).await?;
            }
        }
        Ok(old.len())
    }

    /// A clean close: the runs this opening still holds did not settle, and it holds nothing
    /// now.
    pub(super) async fn close(&mut self) {
        let running: Vec<RunKey> = self.runs.keys().copied().collect();
        let writes = running
            .into_iter()
            .map(|run| {
                Deferred::Write(Write::RunInterrupted {
                    run,
                    diagnostic: "interrupted: the host closed its session store before the run \
                                 settled"
                        .into(),
                })
            })
            .collect::<Vec<_>>();
        if !writes.is_empty() {
            if let Err(e) = self.apply(writes).await {
                tracing::warn!(error = %e, "cannot mark the runs left running as interrupted");
            }
        }
        let _ = self.holders.purge(layout::holder_key(self.holder)).await;
    }
}

/// Applies one write to the run it names (a write of another kind changes nothing).
fn update_run(doc: &mut RunDoc, write: Write, now: u64, ops: &mut Vec<Op>) {
    match write {
        Write::RunEnded {
            stop_reason,
            diagnostic,
            ..
        } => {
            doc.status = RunStatus::Ended.as_str().into();
            doc.stop_reason = Some(stop_reason);
            doc.diagnostic = diagnostic;
            doc.ended_ms = Some(now);
        }
        Write::RunInterrupted { diagnostic, .. } => {
            doc.status = RunStatus::Interrupted.as_str().into();
            doc.stop_reason = Some("aborted".into());
            doc.diagnostic = Some(diagnostic);
            doc.ended_ms = Some(now);
        }
        Write::LinkChild { session, .. } => {
            ops.push(Op::Put(
                layout::child_key(&session, doc.key),
                Bytes::from(doc.parent_session.clone()),
            ));
            doc.child_session = Some(session);
        }
        Write::Announced { .. } => doc.announced = true,
        Write::Report {
            text, next_step, ..
        } => {
            doc.report = Some(text);
            doc.report_pending |= next_step;
        }
        Write::ReportDelivered { .. } => doc.report_pending = false,
        _ => {}
    }
}

/// Why an opening could not get its buckets or its holder number.
#[derive(Debug, thiserror::Error)]
enum Setup {
    #[error(
        "cannot make the JetStream bucket `{bucket}` (is JetStream enabled on the server? \
         `nats-server -js`): {reason}"
    )]
    Bucket { bucket: String, reason: String },
    #[error("cannot read the holder counter: {0}")]
    Counter(String),
    #[error("the holder counter is exhausted")]
    Exhausted,
    #[error("the holder counter is contended: too many openings at once")]
    Contended,
}

/// The bucket of `config`, made if missing (another opener may make it at the same moment).
async fn bucket(js: &jetstream::Context, config: kv::Config) -> Result<kv::Store, Setup> {
    let name = config.bucket.clone();
    if let Ok(store) = js.get_key_value(&name).await {
        return Ok(store);
    }
    match js.create_key_value(config).await {
        Ok(store) => Ok(store),
        Err(created) => js.get_key_value(&name).await.map_err(|_| Setup::Bucket {
            bucket: name.clone(),
            reason: created.to_string(),
        }),
    }
}

/// The next holder number, taken with compare-and-set on the counter so that two openers never
/// get the same one.
async fn take_holder(data: &kv::Store) -> Result<u64, Setup> {
    for _ in 0..64 {
        let current = data
            .entry(layout::HOLDERS)
            .await
            .map_err(|e| Setup::Counter(e.to_string()))?;
        let (last, revision) = match current {
            Some(e) if e.operation == kv::Operation::Put => (
                std::str::from_utf8(&e.value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0),
                e.revision,
            ),
            Some(e) => (0, e.revision),
            None => (0, 0),
        };
        let next = last + 1;
        if next >= 1 << 31 {
            return Err(Setup::Exhausted);
        }
        if data
            .update(layout::HOLDERS, Bytes::from(next.to_string()), revision)
            .await
            .is_ok()
        {
            return Ok(next);
        }
    }
    Err(Setup::Contended)
}
