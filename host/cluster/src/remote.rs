//! A provider that runs on the cluster: each run is a start request to the provider's queue
//! group, then the run's messages from the worker that took it, numbered so that a lost one is
//! seen, and control messages back (cancel, steer, dispose).
//!
//! The run's contract is the registry's, exactly as for a local provider; this side only turns
//! what the worker says into `ready`, progress and a result, and every fault into an `error`
//! end naming the worker: a worker silent for three heartbeats, a lost message, a message that
//! is not one, the connection gone.
//!
//! While it holds a run (its future, or the seed of a resume), the front-end renews the run's
//! lease every heartbeat of its own: a worker that hears nothing for [`LEASE_BEATS`] of them
//! counts the front-end gone and cancels the run, so that none is left live that nobody waits
//! for. A worker's refusal comes back typed: the start fails with the code a local one would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::client::RequestErrorKind;
use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::StreamExt;

use seam_core::subagent::{Provider, ResumeSeed, RunContext, RunFailure};
use seam_core::types::{RequestSnapshot, StartRequest, SubagentResult};

use crate::connect::fits;
use crate::members::{plugin_name, FrontShared};
use crate::names;
use crate::wire::{Control, Out, OutBody, Start, StartReply};

/// How many busy answers a start takes before it waits or is refused: enough for a start to
/// meet every replica of a small pool (each try lands on one of them at random).
const BUSY_TRIES: usize = 8;

/// How many of the front-end's heartbeats a run's lease lasts: a worker that hears nothing for
/// that long cancels the run.
pub(crate) const LEASE_BEATS: u32 = 3;

/// A cluster provider, as registered in a front-end's registry.
pub(crate) struct RemoteProvider {
    front: Arc<FrontShared>,
    name: String,
}

impl RemoteProvider {
    pub(crate) fn new(front: Arc<FrontShared>, name: String) -> Self {
        Self { front, name }
    }
}

/// A run held on a worker: while it lives its lease is renewed; when the last holder lets go
/// (the run's future, or the resume seed it left), the worker is told to dispose of it.
struct Held {
    client: async_nats::Client,
    control: String,
    worker: String,
    token: String,
    /// Renews the run's lease, for a worker that takes leases.
    lease: Option<tokio::task::JoinHandle<()>>,
    /// Whether the worker let go of the run by itself (it ended, not to be resumed): nothing
    /// is left there to dispose of, so no message is sent for it.
    let_go: AtomicBool,
}

impl Held {
    /// Renews the lease on `control` every `every`, until aborted.
    fn renew(
        client: async_nats::Client,
        control: String,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let Ok(body) = serde_json::to_vec(&Control::Lease) else {
                return;
            };
            let body = Bytes::from(body);
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = client.publish(control.clone(), body.clone()).await {
                    tracing::debug!(error = %e, "cannot renew a run's lease");
                }
            }
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.abort();
        }
        if self.let_go.load(Ordering::Acquire) {
            return;
        }
        let client = self.client.clone();
        let control = std::mem::take(&mut self.control);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Ok(body) = serde_json::to_vec(&Control::Dispose) {
                    let _ = client.publish(control, body.into()).await;
                }
            });
        }
    }
}

/// What a resumable remote run leaves: the worker and token of the run to continue.
struct RemoteSeed(Arc<Held>);

/// Why a start did not take.
enum NotTaken {
    Busy(String),
    Failed(RunFailure),
}

impl Provider for RemoteProvider {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let front = self.front.clone();
        let name = self.name.clone();
        Box::pin(async move { run(front, name, ctx, request).await })
    }
}

fn failure(message: String) -> RunFailure {
    RunFailure::Cluster(message)
}

async fn run(
    front: Arc<FrontShared>,
    name: String,
    ctx: RunContext,
    request: StartRequest,
) -> Result<SubagentResult, RunFailure> {
    let token = format!(
        "{}-{}",
        front.id,
        front.next_run.fetch_add(1, Ordering::Relaxed)
    );
    names::check("run token", &token).map_err(|e| failure(e.to_string()))?;
    let seed = ctx
        .resumed_from()
        .and_then(|s| s.downcast_ref::<RemoteSeed>().map(|r| r.0.clone()));
    let mut snapshot = RequestSnapshot::of(&request);
    // The worker holds the run to what is left of its budget here (its cap and every
    // ancestor's remainder, the wall time as what is left of it), and says what it spent.
    if ctx.account().is_bounded() {
        snapshot.budget = Some(ctx.account().remaining().as_budget());
    }
    // And narrows it as every scope over it here does (the run's own and its ancestors'), as
    // one scope: the worker holds none of the ancestors' accounts.
    snapshot.scope = seam_core::scope::Scope::merged(&ctx.account().scopes());
    let start = Start {
        token: token.clone(),
        provider: name.clone(),
        request: snapshot,
        resume: seed.as_ref().map(|h| h.token.clone()),
        lease_ms: Some((front.heartbeat * LEASE_BEATS).as_millis() as u64),
        early: true,
    };
    let body = serde_json::to_vec(&start).map_err(|e| failure(e.to_string()))?;
    fits(
        &front.client,
        || format!("the start of provider `{name}`"),
        &body,
    )
    .map_err(|e| failure(e.to_string()))?;
    let body = Bytes::from(body);
    // Subscribed before the start goes, so that none of the run's messages is missed.
    let mut out = front
        .client
        .subscribe(front.subjects.out(&token))
        .await
        .map_err(|e| failure(format!("cannot subscribe to the run's messages: {e}")))?;
    let subject = match &seed {
        Some(held) => front.subjects.worker_start(&held.worker),
        None => {
            let token = names::provider_token(&name).map_err(|e| failure(e.to_string()))?;
            front.subjects.start(&token)
        }
    };

    // The run's trace, for a worker that traces: W3C trace context in a NATS header.
    let traceparent = ctx.traceparent();
    let ask = || {
        let front = front.clone();
        let subject = subject.clone();
        let body = body.clone();
        let name = name.clone();
        let traceparent = traceparent.clone();
        async move { ask(&front, &name, subject, body, traceparent).await }
    };
    let waits = front.waits(&name);
    let tries = BUSY_TRIES.max(front.replicas(&name) * 2);
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(5))
        .with_max_delay(Duration::from_millis(250))
        .with_jitter();
    let backoff = if waits {
        backoff.without_max_times()
    } else {
        backoff.with_max_times(tries)
    };
    let taken = tokio::select! {
        taken = ask.retry(backoff).when(|e| matches!(e, NotTaken::Busy(_))) => taken,
        () = ctx.cancelled() => return Err(RunFailure::CancelledWaiting),
    };
    let Taken {
        worker,
        leases,
        ready,
        settled,
    } = match taken {
        Ok(taken) => taken,
        Err(NotTaken::Busy(reason)) => {
            return Err(RunFailure::LimitHit {
                plugin: plugin_name(&front.cluster),
                limit: "max_concurrent_runs".into(),
                detail: format!("every worker serving provider `{name}` is at capacity ({reason})"),
            })
        }
        Err(NotTaken::Failed(f)) => return Err(f),
    };
    let control = front.subjects.control(&token);
    let lease = leases.then(|| Held::renew(front.client.clone(), control.clone(), front.heartbeat));
    let held = Arc::new(Held {
        client: front.client.clone(),
        control,
        worker: worker.clone(),
        token,
        lease,
        let_go: AtomicBool::new(false),
    });
    drop(seed);
    if ready {
        ctx.ready();
    }
    // Settled before the worker answered: its end came with the answer.
    if let Some(body) = settled {
        return settle(&ctx, &held, &worker, *body);
    }

    let send = |control: Control| {
        let client = front.client.clone();
        let subject = held.control.clone();
        async move {
            match serde_json::to_vec(&control) {
                Ok(body) => client
                    .publish(subject, body.into())
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let beat = front.heartbeat_of(&worker);
    let mut watchdog = tokio::time::interval(beat);
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seq = 0u64;
    let mut told_cancel = false;
    loop {
        tokio::select! {
            biased;
            msg = out.next() => {
                let Some(msg) = msg else {
                    return Err(failure(format!(
                        "the connection to the cluster closed while worker `{worker}` ran the run"
                    )));
                };
                let message: Out = serde_json::from_slice(&msg.payload).map_err(|e| {
                    failure(format!("worker `{worker}` sent a message that is not one: {e}"))
                })?;
                if message.seq != seq + 1 {
                    let _ = send(Control::Cancel { reason: Some("messages were lost".into()) }).await;
                    return Err(failure(format!(
                        "messages from worker `{worker}` were lost: expected message {}, got {}",
                        seq + 1,
                        message.seq
                    )));
                }
                seq = message.seq;
                match message.body {
                    OutBody::Ready => ctx.ready(),
                    OutBody::Progress { content } => ctx.progress(content),
                    end => return settle(&ctx, &held, &worker, end),
                }
            }
            () = ctx.cancelled(), if !told_cancel => {
                told_cancel = true;
                if let Err(e) = send(Control::Cancel { reason: ctx.cancel_reason() }).await {
                    tracing::warn!(worker = %worker, error = %e, "cannot pass a cancel on");
                }
            }
            () = ctx.message_waiting() => {
                while let Some(content) = ctx.next_message() {
                    if let Err(e) = send(Control::Steer { content }).await {
                        tracing::warn!(worker = %worker, error = %e, "cannot pass a steering message on");
                    }
                }
            }
            _ = watchdog.tick() => {
                if let Some(quiet) = front.silence(&worker) {
                    let _ = send(Control::Cancel { reason: Some("its worker went silent".into()) }).await;
                    return Err(failure(format!(
                        "worker `{worker}` stopped answering: no heartbeat for {} ms (it beats every {} ms)",
                        quiet.as_millis(),
                        beat.as_millis()
                    )));
                }
            }
        }
    }
}

/// How a run ends on the worker's word: its result (what it spent charged here, its child kept
/// for a resume), or its failure. `end` is a [`OutBody::Result`] or [`OutBody::Failed`].
fn settle(
    ctx: &RunContext,
    held: &Arc<Held>,
    worker: &str,
    end: OutBody,
) -> Result<SubagentResult, RunFailure> {
    match end {
        OutBody::Result {
            result,
            resumable,
            spent,
        } => {
            // Spent on the worker, spent here: by the run and every ancestor. Its wall time is
            // the run's own, which this side counts.
            if let Some(spent) = spent {
                let spent = seam_core::spend::Spent {
                    wall_ms: 0,
                    ..spent
                };
                ctx.store().commit_later(ctx.account().charge(spent));
            }
            if resumable {
                ctx.keep_for_resume(ResumeSeed::new(RemoteSeed(held.clone())));
            } else {
                held.let_go.store(true, Ordering::Release);
            }
            Ok(result)
        }
        OutBody::Failed { message } => Err(failure(format!("worker `{worker}`: {message}"))),
        OutBody::Ready | OutBody::Progress { .. } => Err(failure(format!(
            "worker `{worker}` answered a start with a run's end that is not one"
        ))),
    }
}

/// A worker's acceptance of a start: who took it, whether it keeps leases, and what the answer
/// told of the run already ([`Start::early`](crate::wire::Start::early)).
struct Taken {
    worker: String,
    leases: bool,
    ready: bool,
    settled: Option<Box<OutBody>>,
}

/// Asks for a start once.
async fn ask(
    front: &FrontShared,
    name: &str,
    subject: String,
    body: Bytes,
    traceparent: Option<String>,
) -> Result<Taken, NotTaken> {
    let mut request = async_nats::Request::new()
        .payload(body)
        .timeout(Some(front.start_timeout));
    if let Some(traceparent) = traceparent {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("traceparent", traceparent.as_str());
        request = request.headers(headers);
    }
    let reply = match front.client.send_request(subject, request).await {
        Ok(reply) => reply,
        Err(e) => {
            let message = match e.kind() {
                RequestErrorKind::NoResponders => format!(
                    "no worker of cluster `{}` serves provider `{name}`",
                    front.cluster
                ),
                RequestErrorKind::TimedOut => format!(
                    "no worker of cluster `{}` answered the start of provider `{name}` within {} ms",
                    front.cluster,
                    front.start_timeout.as_millis()
                ),
                _ => format!("the start of provider `{name}` could not be sent: {e}"),
            };
            return Err(NotTaken::Failed(failure(message)));
        }
    };
    match serde_json::from_slice::<StartReply>(&reply.payload) {
        Ok(StartReply::Accepted {
            worker,
            leases,
            ready,
            settled,
        }) => Ok(Taken {
            worker,
            leases,
            // A run's end comes only after its readiness.
            settled: settled.filter(|_| ready),
            ready,
        }),
        Ok(StartReply::Busy { reason, .. }) => Err(NotTaken::Busy(reason)),
        // The worker's registry's own error: the start fails with its code, as a local one.
        Ok(StartReply::Refused {
            worker,
            error: Some(error),
            ..
        }) => {
            tracing::info!(worker = %worker, provider = %name, error = %error, "a worker refused a start");
            Err(NotTaken::Failed(RunFailure::Rejected(error)))
        }
        // An older worker's (or a code this side does not know): in words.
        Ok(StartReply::Refused {
            worker, message, ..
        }) => Err(NotTaken::Failed(RunFailure::Refused(format!(
            "worker `{worker}`: {message}"
        )))),
        Err(e) => Err(NotTaken::Failed(failure(format!(
            "a worker answered the start of provider `{name}` with something that is not an answer: {e}"
        )))),
    }
}
