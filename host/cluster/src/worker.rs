//! `seam worker`: serves the providers its own config loaded to the cluster.
//!
//! Each provider listens on its queue-group subject, so that replicas share the starts; each
//! advert is put in the cluster's key-value bucket at every heartbeat. A start names a provider
//! and carries a request: nothing in it can make the worker load code or reach a provider its
//! config did not load. Every run the worker accepts is its own to end: settled, cancelled by its
//! front-end, or disposed when its front-end lets go or when it has been kept too long; and
//! cancelled, or let go of, when its front-end's lease runs out (the front-end is gone, or this
//! worker is cut off from it). A drain ends within its grace, broker or not.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use seam_core::events::{Event, EventBus, ListenerId};
use seam_core::subagent::{SubagentError, SubagentRun, SubagentService};
use seam_core::types::ContentBlock;

use crate::connect::{fits, ClusterConfig};
use crate::error::ClusterError;
use crate::names::{self, Subjects};
use crate::wire::{Advert, Control, Out, OutBody, Start, StartReply, PROTOCOL};

/// How long a worker keeps a finished, resumable run whose front-end has not let go of it.
pub const DEFAULT_KEEP_FINISHED: Duration = Duration::from_secs(600);

/// Progress updates a run may have waiting to be sent; past that they are dropped (counted in a
/// warning), never the run's end.
const PROGRESS_QUEUE: usize = 256;

/// How long a worker waits for a run's readiness before it answers a start that asked for it
/// ([`Start::early`]): far below any front-end's start timeout, and long enough for a run that
/// becomes ready at once to be told in the answer.
const EARLY_WAIT: Duration = Duration::from_millis(5);

/// How a run's driving begins: its lease, and what the start's answer told the front-end of
/// it already.
#[derive(Debug, Clone, Copy)]
struct Begun {
    /// How long the run lasts without word from its front-end, if the start gave a lease.
    lease: Option<Duration>,
    /// Its readiness was told.
    ready: bool,
    /// Its end was told.
    answered: bool,
}

/// The shortest lease a worker keeps to: a front-end asking for less (its heartbeat set very
/// low) would see its runs cancelled by any stall.
pub const MIN_LEASE: Duration = Duration::from_secs(1);

/// The longest lease a worker keeps to: past it a run nobody renews is cancelled whatever its
/// front-end asked.
pub const MAX_LEASE: Duration = Duration::from_secs(3600);

/// The part of a drain's grace kept for its end (cancelling the runs still going, their last
/// messages, disposal, withdrawing the adverts): a quarter of the grace, at most this.
const DRAIN_END: Duration = Duration::from_secs(2);

/// One provider a worker serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Its registry name.
    pub name: String,
    /// Most runs of it this worker takes at once.
    pub capacity: u32,
    /// Whether its entry says `on_concurrency = "wait"`.
    pub waits: bool,
}

/// How a worker serves.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Its id in the cluster (checked: letters, digits, `-`, `_`).
    pub id: String,
    /// The providers it serves (each must be in its registry).
    pub providers: Vec<Served>,
    /// The contract version it implements, for its adverts.
    pub contract: String,
    /// How long it keeps a finished, resumable run its front-end has not let go of.
    pub keep_finished: Duration,
}

/// A serving worker. [`Worker::drain`] ends it.
pub struct Worker {
    shared: Arc<Shared>,
    /// The tasks taking starts: aborted (their subscriptions dropped) when draining begins.
    takers: Vec<JoinHandle<()>>,
    heartbeat: JoinHandle<()>,
    listener: ListenerId,
    events: Arc<EventBus>,
}

struct Shared {
    client: async_nats::Client,
    subjects: Subjects,
    id: String,
    service: Arc<SubagentService>,
    served: Vec<(Served, String)>,
    contract: String,
    heartbeat: Duration,
    keep_finished: Duration,
    kv: kv::Store,
    draining: AtomicBool,
    /// Since when no heartbeat of this worker's was acknowledged, if one was not.
    unheard_since: Mutex<Option<std::time::Instant>>,
    /// Runs going or kept, by token.
    runs: Mutex<HashMap<String, Held>>,
    /// Where the progress of each going run is sent, by the worker's own run id.
    progress: Mutex<HashMap<String, mpsc::Sender<Vec<ContentBlock>>>>,
    /// The bus the progress is heard on: flushed at a run's end, so that a store that delivers
    /// a run's events after their group commit has delivered its progress.
    events: Arc<EventBus>,
    /// Live runs per provider, counted against its capacity.
    live: Mutex<HashMap<String, u32>>,
}

/// A run the worker holds: its handle, and its driver.
struct Held {
    run: SubagentRun,
    settled: bool,
}

/// Gets or makes the cluster's advert bucket. Entries live three heartbeats past their last
/// put at the least, so that an advert outlives no worker for long.
pub(crate) async fn bucket(
    js: &async_nats::jetstream::Context,
    subjects: &Subjects,
    heartbeat: Duration,
) -> Result<kv::Store, ClusterError> {
    let bad = |e: String| ClusterError::JetStream {
        bucket: subjects.bucket().to_string(),
        message: e,
    };
    if let Ok(store) = js.get_key_value(subjects.bucket()).await {
        return Ok(store);
    }
    js.create_key_value(kv::Config {
        bucket: subjects.bucket().to_string(),
        description: "Seam: providers served by the cluster's workers".into(),
        history: 1,
        max_age: (heartbeat * 30).max(Duration::from_secs(30)),
        ..Default::default()
    })
    .await
    .map_err(|e| bad(e.to_string()))
}

impl Worker {
    /// Connects and serves. Fails, naming what, if the id or a provider is bad, the server
    /// cannot be reached, or a subscription cannot be made.
    pub async fn serve(
        config: &ClusterConfig,
        service: Arc<SubagentService>,
        events: Arc<EventBus>,
        options: WorkerOptions,
    ) -> Result<Self, ClusterError> {
        names::check("worker id", &options.id)?;
        let subjects = Subjects::new(&config.name)?;
        let mut served = Vec::new();
        for p in options.providers {
            if service.descriptor(&p.name).is_none() {
                return Err(ClusterError::NotLoaded(p.name));
            }
            let token = names::provider_token(&p.name)?;
            served.push((p, token));
        }
        let (client, mut comebacks) = config
            .connect_watching(&format!("seam-worker-{}", options.id))
            .await?;
        let js = async_nats::jetstream::new(client.clone());
        let kv = bucket(&js, &subjects, config.heartbeat()).await?;
        let shared = Arc::new(Shared {
            client,
            subjects,
            id: options.id,
            service,
            served,
            contract: options.contract,
            heartbeat: config.heartbeat(),
            keep_finished: options.keep_finished,
            kv,
            draining: AtomicBool::new(false),
            unheard_since: Mutex::default(),
            runs: Mutex::default(),
            progress: Mutex::default(),
            events: events.clone(),
            live: Mutex::default(),
        });

        let listener = {
            let shared = Arc::downgrade(&shared);
            events.subscribe(move |event| {
                if let (Event::SubagentProgress { id, content, .. }, Some(shared)) =
                    (event, shared.upgrade())
                {
                    let sender = lock(&shared.progress).get(&id).cloned();
                    if let Some(sender) = sender {
                        if sender.try_send(content).is_err() {
                            tracing::warn!(run = %id, "a progress update was dropped: too many waiting to be sent");
                        }
                    }
                }
                Ok(())
            })
        };

        let mut takers = Vec::new();
        // Adverts first: a front-end may start a run as soon as it sees one, so the
        // subscriptions are made before.
        let mut subs = Vec::new();
        for (_, token) in &shared.served {
            let subject = shared.subjects.start(token);
            let sub = shared
                .client
                .queue_subscribe(subject.clone(), "workers".into())
                .await
                .map_err(|e| ClusterError::Subscribe {
                    subject,
                    message: e.to_string(),
                })?;
            subs.push(sub);
        }
        let direct = shared.subjects.worker_start(&shared.id);
        subs.push(shared.client.subscribe(direct.clone()).await.map_err(|e| {
            ClusterError::Subscribe {
                subject: direct,
                message: e.to_string(),
            }
        })?);
        shared.advertise().await;
        for mut sub in subs {
            let shared = shared.clone();
            takers.push(tokio::spawn(async move {
                while let Some(msg) = sub.next().await {
                    let shared = shared.clone();
                    tokio::spawn(async move { shared.on_start(msg).await });
                }
            }));
        }
        let heartbeat = {
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(shared.heartbeat);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => shared.advertise().await,
                        changed = comebacks.changed() => {
                            if changed.is_err() {
                                return;
                            }
                            // Back after losing the server: heard again at once, not a beat later.
                            shared.advertise().await;
                            tracing::info!(worker = %shared.id, "adverts put again after the connection came back");
                        }
                    }
                }
            })
        };
        tracing::info!(worker = %shared.id, providers = shared.served.len(), "serving the cluster");
        Ok(Self {
            shared,
            takers,
            heartbeat,
            listener,
            events,
        })
    }

    /// The worker's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// How many runs it holds (going, or finished and kept for a resume).
    pub fn runs(&self) -> usize {
        lock(&self.shared.runs).len()
    }

    /// Stops taking runs, lets live ones finish, cancels the rest, disposes of everything, and
    /// withdraws its adverts: all of it within `grace`, whether or not the broker answers.
    ///
    /// Live runs may finish until a quarter of the grace is left (at most 2 s); the
    /// rest is for cancelling those still going and the end. Each step that talks to the
    /// broker (the draining advert, the flushes, the adverts' withdrawal) waits no later than
    /// the grace's end: with the broker gone they are given up, and the adverts expire by
    /// themselves.
    pub async fn drain(self, grace: Duration) {
        let shared = &self.shared;
        let began = tokio::time::Instant::now();
        let end = began + grace;
        let reserve = (grace / 4).min(DRAIN_END);
        let runs_until = end - reserve;
        // Half of the reserve for the cancelled runs to settle, half for disposal and the
        // adverts.
        let cancelled_until = end - reserve / 2;
        shared.draining.store(true, Ordering::SeqCst);
        // Its start subscriptions go: the queue groups route new starts to other replicas.
        for task in &self.takers {
            task.abort();
        }
        tracing::info!(worker = %shared.id, grace_ms = grace.as_millis() as u64, "draining");
        if tokio::time::timeout_at(runs_until, shared.advertise())
            .await
            .is_err()
        {
            tracing::warn!(worker = %shared.id, "its draining advert was not acknowledged in time");
        }
        let going: Vec<SubagentRun> = lock(&shared.runs)
            .values()
            .filter(|h| !h.settled)
            .map(|h| h.run.clone())
            .collect();
        let all_settled = futures::future::join_all(going.iter().map(|r| r.result()));
        if tokio::time::timeout_at(runs_until, all_settled)
            .await
            .is_err()
        {
            for run in &going {
                run.cancel(Some(format!(
                    "worker `{}` drained: its grace of {} ms ran out",
                    shared.id,
                    grace.as_millis()
                )));
            }
            let settled = futures::future::join_all(going.iter().map(|r| r.result()));
            if tokio::time::timeout_at(cancelled_until, settled)
                .await
                .is_err()
            {
                tracing::warn!(worker = %shared.id, "a cancelled run had not settled when the grace ran out");
            }
        }
        self.heartbeat.abort();
        // Let every run's driver send its end before the connection goes (not past the grace:
        // with the broker gone a flush waits for ever).
        let _ = tokio::time::timeout_at(cancelled_until, shared.client.flush()).await;
        let held: Vec<SubagentRun> = lock(&shared.runs).drain().map(|(_, h)| h.run).collect();
        let disposed = futures::future::join_all(held.iter().map(|r| r.dispose()));
        if tokio::time::timeout_at(end, disposed).await.is_err() {
            tracing::warn!(worker = %shared.id, "a run was not disposed of when the grace ran out: the host's unloading ends it");
        }
        let withdrawn = async {
            let deletes = shared
                .served
                .iter()
                .map(|(_, token)| shared.kv.delete(names::advert_key(token, &shared.id)));
            futures::future::join_all(deletes).await;
            let _ = shared.client.flush().await;
        };
        if tokio::time::timeout_at(end, withdrawn).await.is_err() {
            tracing::warn!(worker = %shared.id, "its adverts were not withdrawn within the grace: they lapse by themselves");
        }
        self.events.unsubscribe(self.listener);
        tracing::info!(
            worker = %shared.id,
            took_ms = began.elapsed().as_millis() as u64,
            "drained"
        );
    }
}

impl Shared {
    /// Puts this worker's adverts (its heartbeat).
    async fn advertise(&self) {
        let draining = self.draining.load(Ordering::SeqCst);
        let mut puts = Vec::new();
        for (served, token) in &self.served {
            let Some(descriptor) = self.service.descriptor(&served.name) else {
                continue;
            };
            let advert = Advert {
                worker: self.id.clone(),
                descriptor: (*descriptor).clone(),
                contract: self.contract.clone(),
                protocol: PROTOCOL,
                capacity: served.capacity,
                waits: served.waits,
                heartbeat_ms: self.heartbeat.as_millis() as u64,
                draining,
            };
            match serde_json::to_vec(&advert) {
                Ok(body) => puts.push(self.kv.put(names::advert_key(token, &self.id), body.into())),
                Err(e) => tracing::error!(error = %e, "cannot encode an advert"),
            }
        }
        // Each put waits for the server's acknowledgement, for one beat at the most.
        let heard =
            match tokio::time::timeout(self.heartbeat, futures::future::join_all(puts)).await {
                Ok(outcomes) => {
                    let failed: Vec<String> = outcomes
                        .into_iter()
                        .filter_map(|o| o.err().map(|e| e.to_string()))
                        .collect();
                    for e in &failed {
                        tracing::warn!(worker = %self.id, error = %e, "cannot put an advert");
                    }
                    failed.is_empty()
                }
                Err(_) => {
                    tracing::warn!(worker = %self.id, "no advert acknowledged within a heartbeat");
                    false
                }
            };
        self.heard(heard);
    }

    /// Counts a heartbeat heard by the server or not. Unheard for three heartbeats, the
    /// worker is cut off: every front-end has ended its runs by then, so it cancels them.
    fn heard(&self, heard: bool) {
        let mut unheard = lock(&self.unheard_since);
        if heard {
            *unheard = None;
            return;
        }
        let since = *unheard.get_or_insert_with(std::time::Instant::now);
        let quiet = since.elapsed();
        if quiet < self.heartbeat * 3 {
            return;
        }
        let going: Vec<SubagentRun> = lock(&self.runs)
            .values()
            .filter(|h| !h.settled && h.run.try_result().is_none())
            .map(|h| h.run.clone())
            .collect();
        if going.is_empty() {
            return;
        }
        tracing::warn!(
            worker = %self.id,
            runs = going.len(),
            quiet_ms = quiet.as_millis() as u64,
            "cut off from the cluster: cancelling the runs its front-ends have ended"
        );
        for run in going {
            run.cancel(Some(format!(
                "worker `{}` was cut off from the cluster for {} ms: its front-end ended the run",
                self.id,
                quiet.as_millis()
            )));
        }
    }

    async fn reply(&self, msg: &async_nats::Message, reply: StartReply) {
        let Some(to) = msg.reply.clone() else {
            return;
        };
        match serde_json::to_vec(&reply) {
            Ok(body) => {
                if let Err(e) = self.client.publish(to, body.into()).await {
                    tracing::warn!(worker = %self.id, error = %e, "cannot answer a start");
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot encode a start's answer"),
        }
    }

    fn refused(&self, error: SubagentError) -> StartReply {
        StartReply::refused(self.id.clone(), error)
    }

    async fn on_start(self: Arc<Self>, msg: async_nats::Message) {
        let start: Start = match serde_json::from_slice(&msg.payload) {
            Ok(s) => s,
            Err(e) => {
                let answer = self.refused(SubagentError::InvalidRequest(format!(
                    "worker `{}`: a start that is not one: {e}",
                    self.id
                )));
                return self.reply(&msg, answer).await;
            }
        };
        if names::check("run token", &start.token).is_err() {
            let answer = self.refused(SubagentError::InvalidRequest(format!(
                "worker `{}`: a start whose token is not a name",
                self.id
            )));
            return self.reply(&msg, answer).await;
        }
        if self.draining.load(Ordering::SeqCst) {
            let answer = StartReply::Busy {
                worker: self.id.clone(),
                reason: format!("worker `{}` is draining", self.id),
            };
            return self.reply(&msg, answer).await;
        }
        let Some((served, _)) = self.served.iter().find(|(s, _)| s.name == start.provider) else {
            tracing::warn!(worker = %self.id, provider = %start.provider, "a start of a provider this worker does not serve");
            let answer = self.refused(SubagentError::NoProvider(start.provider.clone()));
            return self.reply(&msg, answer).await;
        };
        let full = {
            let mut live = lock(&self.live);
            let n = live.entry(served.name.clone()).or_default();
            let full = *n >= served.capacity;
            if !full {
                *n += 1;
            }
            full
        };
        if full {
            let answer = StartReply::Busy {
                worker: self.id.clone(),
                reason: format!(
                    "worker `{}` runs {} of provider `{}`, its max_concurrent_runs",
                    self.id, served.capacity, served.name
                ),
            };
            return self.reply(&msg, answer).await;
        }
        // Subscribed before the start is answered, so that no control message is missed.
        let control = match self
            .client
            .subscribe(self.subjects.control(&start.token))
            .await
        {
            Ok(s) => s,
            Err(e) => {
                self.release(&served.name);
                let answer = self.refused(SubagentError::StartFailed(format!(
                    "worker `{}` cannot subscribe to the run's control messages: {e}",
                    self.id
                )));
                return self.reply(&msg, answer).await;
            }
        };
        let (progress_tx, progress_rx) = mpsc::channel(PROGRESS_QUEUE);
        let started = {
            // Held while the run is made, so that its first progress finds its queue (the run
            // is started on its task, never inside this lock).
            let mut progress = lock(&self.progress);
            let started = match &start.resume {
                Some(previous) => {
                    let previous = lock(&self.runs).get(previous).map(|h| h.run.clone());
                    match previous {
                        Some(previous) => self
                            .service
                            .resume_on_task(&previous, start.request.prompt.clone()),
                        None => Err(seam_core::subagent::SubagentError::InvalidState(format!(
                            "worker `{}` no longer holds the run to resume (disposed, or kept past its time)",
                            self.id
                        ))),
                    }
                }
                None => {
                    let parent = start.request.parent.clone();
                    let prompt = start.request.prompt.clone();
                    // The front-end's run span, from the start's header: this run continues
                    // its trace.
                    let traceparent = msg
                        .headers
                        .as_ref()
                        .and_then(|h| h.get("traceparent"))
                        .map(|v| v.as_str().to_string());
                    seam_core::trace::under_remote(traceparent.as_deref(), || {
                        // On its task: the progress lock is held here, and the run's first
                        // progress takes it.
                        self.service.start_on_task(
                            &start.provider,
                            start.request.clone().into_request(parent, prompt),
                        )
                    })
                }
            };
            if let Ok(run) = &started {
                progress.insert(run.id().to_string(), progress_tx);
            }
            started
        };
        let run = match started {
            Ok(run) => run,
            Err(e) => {
                self.release(&served.name);
                let answer = self.refused(e);
                return self.reply(&msg, answer).await;
            }
        };
        let lease = start
            .lease_ms
            .map(|ms| Duration::from_millis(ms).clamp(MIN_LEASE, MAX_LEASE));
        lock(&self.runs).insert(
            start.token.clone(),
            Held {
                run: run.clone(),
                settled: false,
            },
        );
        // A front-end that takes them is told readiness, and the end of a run that settled at
        // once, in the answer: the run's task (started just above, on this thread) usually has
        // run by the time this one is polled again. A run not ready by `EARLY_WAIT` is answered
        // without, and tells its readiness on `out` as any run does.
        let mut ready = false;
        let mut settled = None;
        if start.early {
            ready = matches!(
                tokio::time::timeout(EARLY_WAIT, run.started()).await,
                Ok(Ok(()))
            );
            // Progress goes before the end, on `out`: a run that reported some is not ended here
            // (its progress is all in the queue once the bus has delivered what it holds).
            if ready && run.try_result().is_some() {
                if let Err(e) = self.events.flush() {
                    tracing::warn!(run = %run.id(), error = %e, "the session store could not write a run's events");
                }
            }
            if ready && progress_rx.is_empty() {
                settled = run
                    .try_result()
                    .map(|outcome| Box::new(self.end_of(&run, outcome)));
            }
        }
        let answered = settled.is_some();
        self.reply(
            &msg,
            StartReply::Accepted {
                worker: self.id.clone(),
                leases: lease.is_some(),
                ready,
                settled,
            },
        )
        .await;
        let provider = served.name.clone();
        let begun = Begun {
            lease,
            ready,
            answered,
        };
        self.drive(start.token, provider, run, control, progress_rx, begun)
            .await;
    }

    /// The message that tells a front-end how `run` ended.
    fn end_of(
        &self,
        run: &SubagentRun,
        outcome: Result<seam_core::types::SubagentResult, SubagentError>,
    ) -> OutBody {
        match outcome {
            Ok(result) => OutBody::Result {
                result,
                resumable: run.resume_state().is_some(),
                spent: Some(run.account().spent()),
            },
            Err(e) => OutBody::Failed {
                message: e.to_string(),
            },
        }
    }

    fn release(&self, provider: &str) {
        if let Some(n) = lock(&self.live).get_mut(provider) {
            *n = n.saturating_sub(1);
        }
    }

    /// Sends a run's messages until it settles, obeys its front-end's control messages, and
    /// disposes of it when the front-end lets go (or, for a kept run, when its time is up).
    ///
    /// With a `lease`, a front-end that says nothing for that long is gone (dead, or cut off
    /// from this worker): a going run is cancelled, as an explicit cancel would (it ends
    /// `aborted`, saying why), and a kept one is let go of.
    async fn drive(
        &self,
        token: String,
        provider: String,
        run: SubagentRun,
        mut control: async_nats::Subscriber,
        mut progress: mpsc::Receiver<Vec<ContentBlock>>,
        begun: Begun,
    ) {
        let lease = begun.lease;
        let out = self.subjects.out(&token);
        let mut seq = 0u64;
        let mut started = (!begun.ready).then(|| run.started());
        let mut result = run.result();
        let mut progress_open = true;
        // Renewed by every word from the front-end; without a lease it never runs out.
        let lease_for = lease.unwrap_or(MAX_LEASE);
        let expiry = tokio::time::sleep(lease_for);
        tokio::pin!(expiry);
        let mut lapsed = false;
        let resumable = loop {
            tokio::select! {
                biased;
                ready = async {
                    match started.as_mut() {
                        Some(f) => f.await.is_ok(),
                        None => false,
                    }
                }, if started.is_some() => {
                    started = None;
                    if ready {
                        self.send(&out, &mut seq, OutBody::Ready).await;
                    }
                }
                update = progress.recv(), if started.is_none() && progress_open => match update {
                    Some(content) => self.send(&out, &mut seq, OutBody::Progress { content }).await,
                    None => progress_open = false,
                },
                outcome = &mut result => {
                    // Whatever progress was queued before the end goes first: delivered by
                    // the bus (a batching store delivers after its commit), then sent.
                    if let Err(e) = self.events.flush() {
                        tracing::warn!(run = %run.id(), error = %e, "the session store could not write a run's events");
                    }
                    while let Ok(content) = progress.try_recv() {
                        self.send(&out, &mut seq, OutBody::Progress { content }).await;
                    }
                    let resumable = run.resume_state().is_some();
                    // An end told in the start's answer is not told again.
                    if !begun.answered {
                        let body = self.end_of(&run, outcome);
                        self.send(&out, &mut seq, body).await;
                    }
                    // A kept run whose front-end is gone has nobody to resume it.
                    break resumable && !lapsed;
                }
                msg = control.next() => {
                    if msg.is_some() {
                        expiry.as_mut().reset(tokio::time::Instant::now() + lease_for);
                    }
                    match msg.map(|m| serde_json::from_slice::<Control>(&m.payload)) {
                        Some(Ok(Control::Cancel { reason })) => run.cancel(reason),
                        Some(Ok(Control::Steer { content })) => {
                            if let Err(e) = run.send_message(content) {
                                tracing::debug!(run = %run.id(), error = %e, "a steering message was refused");
                            }
                        }
                        Some(Ok(Control::Lease)) => {}
                        Some(Ok(Control::Dispose)) | None => {
                            run.cancel(Some("its front-end let go of the run".into()));
                            let _ = (&mut result).await;
                            break false;
                        }
                        Some(Err(e)) => tracing::warn!(run = %run.id(), error = %e, "a control message that is not one"),
                    }
                }
                () = &mut expiry, if lease.is_some() && !lapsed => {
                    lapsed = true;
                    let reason = self.lease_ran_out(&token, lease_for, "cancelling its run");
                    run.cancel(Some(reason));
                }
            }
        };
        lock(&self.progress).remove(run.id());
        self.release(&provider);
        if resumable {
            if let Some(h) = lock(&self.runs).get_mut(&token) {
                h.settled = true;
            }
            // Kept for a resume until the front-end lets go, its lease runs out, or for
            // `keep_finished`.
            let _ = tokio::time::timeout(self.keep_finished, async {
                loop {
                    tokio::select! {
                        msg = control.next() => {
                            let Some(msg) = msg else { break };
                            expiry.as_mut().reset(tokio::time::Instant::now() + lease_for);
                            if let Ok(Control::Dispose) = serde_json::from_slice(&msg.payload) {
                                break;
                            }
                        }
                        () = &mut expiry, if lease.is_some() => {
                            self.lease_ran_out(&token, lease_for, "letting go of its finished run");
                            break;
                        }
                    }
                }
            })
            .await;
        }
        lock(&self.runs).remove(&token);
        let _ = control.unsubscribe().await;
        run.dispose().await;
    }

    /// Logs that the front-end of run `token` said nothing for `lease`; the reason, in words.
    fn lease_ran_out(&self, token: &str, lease: Duration, doing: &str) -> String {
        let cut_off = lock(&self.unheard_since).is_some();
        let why = if cut_off {
            "this worker is cut off from the cluster"
        } else {
            "its front-end is gone"
        };
        tracing::warn!(
            worker = %self.id,
            run = %token,
            lease_ms = lease.as_millis() as u64,
            cut_off,
            "its front-end's lease ran out: {doing}"
        );
        format!(
            "worker `{}` had no word from the run's front-end for {} ms (its lease): {why}, nobody waits for the run",
            self.id,
            lease.as_millis()
        )
    }

    /// Sends one message of a run; one over the server's `max_payload` is replaced, for a
    /// result, by a failure saying so, and dropped, for progress.
    async fn send(&self, subject: &str, seq: &mut u64, body: OutBody) {
        let mut message = Out {
            seq: *seq + 1,
            body,
        };
        let mut bytes = match serde_json::to_vec(&message) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot encode a run's message");
                return;
            }
        };
        if let Err(e) = fits(&self.client, || "the run's result".into(), &bytes) {
            match message.body {
                OutBody::Progress { .. } => {
                    tracing::warn!(worker = %self.id, error = %e, "a progress update was dropped");
                    return;
                }
                _ => {
                    message.body = OutBody::Failed {
                        message: format!("worker `{}`: {e}", self.id),
                    };
                    bytes = serde_json::to_vec(&message).unwrap_or_default();
                }
            }
        }
        *seq += 1;
        if let Err(e) = self
            .client
            .publish(subject.to_string(), Bytes::from(bytes))
            .await
        {
            tracing::warn!(worker = %self.id, error = %e, "cannot send a run's message");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
