//! A live run: readiness, result, cancel and dispose, owned by the host.
//!
//! Every run has one driver: the provider's future (which owns the run's store), polled first
//! on the caller's thread inside `start` and, if it still has work after its first wait, on a
//! task of its own. A run with nothing to wait for thus costs no task and no wake-up between
//! threads.
//! Readiness, settlement and event emission all go through [`RunShared`], whose phase lock makes
//! `subagent/start` precede `subagent/end` by construction and keeps both away from runs whose
//! readiness failed.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Waker};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::latch::Latch;
use super::talk::{Inbox, Progress};
use super::{Aborted, SubagentError};
use crate::events::{Event, EventBus};
use crate::ledger::Account;
use crate::live::LiveCounts;
use crate::spend::Exhausted;
use crate::store::{RunKey, RunStart, Write};
use crate::sync::lock;
use crate::types::{
    ContentBlock, ParentRef, ProviderDescriptor, RequestSnapshot, RunInfo, RunState,
    RuntimeFeatures, StartRequest, StopReason, SubagentResult,
};

/// What a provider implementation does with one run.
///
/// The host calls [`Provider::run`] once per run, after every start-time check has passed, on a
/// task it owns. The provider calls [`RunContext::ready`] once its child exists; returning a
/// result without having called it counts as ready at that point. Returning an error means the
/// attempt failed (before readiness: `started` rejects; after it: the run ends `error`).
pub trait Provider: Send + Sync + 'static {
    /// Runs one child to its end.
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>>;

    /// Lets go of what the provider keeps between runs (a component's shared instances), once
    /// it is unregistered and every run of it is disposed or settled: the host's quiescence
    /// includes it. Most providers keep nothing.
    fn close(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// A run's live child, as far as the run needs it: something that takes steering messages.
///
/// The agent runtime's agents implement it; the run holds it weakly, so that it never keeps a
/// child alive.
pub trait Steer: Send + Sync + 'static {
    /// Queues a message for the child; it reaches the child's model before its next call.
    fn steer(&self, content: Vec<ContentBlock>);

    /// How many messages wait for the child's next model call.
    fn queued(&self) -> usize;
}

/// Why a provider could not produce a result. Before readiness it rejects `started`; after it
/// the run ends `error` with this text in its diagnostic (after ``provider `NAME` failed: ``).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RunFailure {
    /// The provider declined the run, in its own words (a guest's `run` returned an error).
    #[error("{0}")]
    Refused(String),
    /// The provider's guest faulted: a trap, a panic, an exhausted resource.
    #[error("guest fault: {0}")]
    GuestFault(String),
    /// No instance of the provider could be made for the run.
    #[error("cannot instantiate: {0}")]
    Instantiate(String),
    /// The run hit one of its plugin's limits (`limit` is the config key).
    #[error("plugin `{plugin}` hit its limit `{limit}`: {detail}")]
    LimitHit {
        /// The plugin id.
        plugin: String,
        /// The limit's config key (`run_timeout_ms`, `max_output_bytes`, ...).
        limit: String,
        /// The limit and the value in force, in words.
        detail: String,
    },
    /// The host is shutting down: what the run needs is already gone.
    #[error("the host is shutting down")]
    ShuttingDown,
    /// The run was cancelled while it waited for a slot of its plugin.
    #[error("cancelled while waiting for a slot")]
    CancelledWaiting,
    /// Every slot is held by a run the caller descends from: waiting would never end.
    #[error("{0}")]
    Deadlock(String),
    /// The agent process the provider runs (ACP) could not be started, broke its protocol or
    /// exited mid-run.
    #[error("ACP agent `{plugin}`: {message}")]
    AgentProcess {
        /// The plugin id.
        plugin: String,
        /// What happened (with the tail of its stderr, when it wrote any).
        message: String,
    },
    /// The remote A2A agent the provider speaks to could not be reached, broke the protocol,
    /// or lost the task mid-run.
    #[error("A2A agent `{plugin}`: {message}")]
    A2aAgent {
        /// The plugin id.
        plugin: String,
        /// What happened.
        message: String,
    },
    /// The provider's future panicked: a host-side bug, contained to the run.
    #[error("the provider panicked: {0}")]
    Panicked(String),
    /// A cluster provider's run was lost or refused on the way: no worker answered, its worker
    /// went silent, a message was lost, too large or not one (the text names the worker).
    #[error("{0}")]
    Cluster(String),
    /// The provider refused the start with one of the registry's own errors (a cluster
    /// provider passes on its worker's registry's): `started` rejects with it, code and all.
    #[error("{0}")]
    Rejected(SubagentError),
}

/// What a finished child leaves behind for [`SubagentService::resume`](super::SubagentService):
/// opaque to the run, defined by the runtime the child ran on (the agent runtime keeps its
/// completed turns in it). Cloning shares it.
#[derive(Clone)]
pub struct ResumeSeed(Arc<dyn Any + Send + Sync>);

impl ResumeSeed {
    /// Wraps the state a resumed child will start from.
    pub fn new<T: Any + Send + Sync>(state: T) -> Self {
        Self(Arc::new(state))
    }

    /// The state, if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for ResumeSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResumeSeed(..)")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The child does not exist yet.
    Pending,
    /// `started` fulfilled and `subagent/start` was emitted.
    Ready,
    /// The result is published.
    Settled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DisposeState {
    Live,
    Disposing,
    Disposed,
}

/// The state one run shares between its handle, its provider and its driver.
pub(crate) struct RunShared {
    id: String,
    provider: String,
    events: Arc<EventBus>,
    live: Arc<LiveCounts>,
    cancel: CancellationToken,
    cancel_reason: Mutex<Option<String>>,
    phase: Mutex<Phase>,
    started: Latch<Result<(), SubagentError>>,
    result: Latch<Result<SubagentResult, SubagentError>>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Whether the run's first poll is being made on its caller's thread (set and cleared
    /// under the `task` lock): a dispose from elsewhere waits for it to end.
    first_poll: AtomicBool,
    /// Notified when the first poll on the caller's thread has ended.
    first_poll_over: Latch<()>,
    dispose_state: Mutex<DisposeState>,
    disposed: Latch<()>,
    on_disposed: Box<dyn Fn(&str) + Send + Sync>,
    /// How long dispose lets a cancelled run wind down before dropping it.
    grace: Duration,
    /// The in-process child this run owns, for steering.
    child: Mutex<Option<Weak<dyn Steer>>>,
    /// What the child left when it was torn down, for `resume`.
    left_for_resume: Mutex<Option<ResumeSeed>>,
    /// Teardown the run's store started as it was dropped (the background runs of a child cut
    /// short): dispose waits for it, so that nothing below the run outlives its dispose.
    teardown: Mutex<Vec<JoinHandle<()>>>,
    /// For a resumed run: what its child starts from.
    resume_seed: Option<ResumeSeed>,
    /// The provider's runtime features, for `send-message` and `resume`.
    pub(crate) features: RuntimeFeatures,
    /// The request as started (without its signal), for `resume`.
    pub(crate) request: StartRequest,
    /// What the run reported while it ran.
    progress: Mutex<Progress>,
    /// Steering messages for a provider with no in-process child.
    inbox: Mutex<Inbox>,
    /// When the run started, in milliseconds since the Unix epoch.
    started_at_ms: u64,
    /// The run's record in the store, if the store took it.
    pub(crate) record: Option<RunKey>,
    /// The session its child agent keeps (in-process providers), once the child exists.
    child_session: Mutex<Option<String>>,
    /// Why its process let go of it, if it did: its record then ends interrupted, not ended.
    detached: Mutex<Option<String>>,
    /// How the host ended it `aborted`, once settled so.
    aborted: Mutex<Option<Aborted>>,
    /// Its budget account: what it and everything below it spent, under its caller's.
    pub(crate) account: Arc<Account>,
    /// What asks for a yes before the run uses a grant (`RunContext::approve_grant`).
    approvals: Arc<crate::approvals::Approvals>,
    /// Why its budget stopped it, once it did (its wall time ran out): it then ends `budget`,
    /// not `aborted`.
    budget_stop: Mutex<Option<Exhausted>>,
}

/// What a run gets from the service that starts it.
pub(crate) struct RunHooks {
    pub(crate) events: Arc<EventBus>,
    pub(crate) live: Arc<LiveCounts>,
    pub(crate) grace: Duration,
    /// Called once the run is disposed (it removes the run from its provider's table).
    pub(crate) on_disposed: Box<dyn Fn(&str) + Send + Sync>,
    /// The run's budget account.
    pub(crate) account: Arc<Account>,
    /// What asks for a yes before the run uses a grant.
    pub(crate) approvals: Arc<crate::approvals::Approvals>,
}

impl RunShared {
    pub(crate) fn new(
        id: String,
        descriptor: &ProviderDescriptor,
        request: &StartRequest,
        hooks: RunHooks,
        resume_seed: Option<ResumeSeed>,
        background: Option<&str>,
    ) -> Arc<Self> {
        let RunHooks {
            events,
            live,
            grace,
            on_disposed,
            account,
            approvals,
        } = hooks;
        live.run_started();
        let store = events.store();
        let record = store
            .keeps_runs_of(&request.parent.session_id)
            .then(|| {
                store
                    .start_run(RunStart {
                        run_id: id.clone(),
                        provider: descriptor.name.clone(),
                        parent_agent: request.parent.id.clone(),
                        parent_session: request.parent.session_id.clone(),
                        request: RequestSnapshot::of(request),
                        background: background.is_some(),
                        label: background.unwrap_or_default().to_string(),
                    })
                    .inspect_err(|e| tracing::warn!(run = %id, error = %e, "cannot record the run"))
                    .ok()
            })
            .flatten();
        Arc::new(Self {
            record,
            child_session: Mutex::new(None),
            detached: Mutex::new(None),
            aborted: Mutex::new(None),
            account,
            approvals,
            budget_stop: Mutex::new(None),
            id,
            provider: descriptor.name.clone(),
            events,
            live,
            cancel: CancellationToken::new(),
            cancel_reason: Mutex::new(None),
            phase: Mutex::new(Phase::Pending),
            started: Latch::new(),
            result: Latch::new(),
            task: Mutex::new(None),
            first_poll: AtomicBool::new(false),
            first_poll_over: Latch::new(),
            dispose_state: Mutex::new(DisposeState::Live),
            disposed: Latch::new(),
            on_disposed,
            grace,
            child: Mutex::new(None),
            left_for_resume: Mutex::new(None),
            teardown: Mutex::new(Vec::new()),
            resume_seed,
            features: descriptor.features,
            request: StartRequest {
                signal: None,
                ..request.clone()
            },
            progress: Mutex::default(),
            inbox: Mutex::default(),
            started_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        })
    }

    /// The store's write that settles this run's record.
    fn record_end(&self, stop_reason: &StopReason, diagnostic: Option<String>) -> Vec<Write> {
        let detached = lock(&self.detached).clone();
        self.record
            .map(|run| match detached {
                Some(diagnostic) if !stop_reason.is_success() => {
                    Write::RunInterrupted { run, diagnostic }
                }
                _ => Write::RunEnded {
                    run,
                    stop_reason: stop_reason.as_str().to_string(),
                    diagnostic,
                },
            })
            .into_iter()
            .collect()
    }

    /// Marks the run as let go of by its process (`why`): if it ends other than `completed`
    /// from now on, its record says interrupted, and its child can be continued later.
    pub(crate) fn detach(&self, why: String) {
        *lock(&self.detached) = Some(why);
    }

    pub(crate) fn cancel(&self, reason: Option<String>) {
        {
            let mut slot = lock(&self.cancel_reason);
            if self.cancel.is_cancelled() {
                return;
            }
            *slot = reason;
        }
        self.cancel.cancel();
    }

    fn cancel_reason(&self) -> Option<String> {
        lock(&self.cancel_reason).clone()
    }

    /// Stops the run because its budget ran out: cancelled as any run is, it then ends
    /// `budget` with `why` as its diagnostic.
    fn stop_for_budget(&self, why: Exhausted) {
        let text = why.to_string();
        lock(&self.budget_stop).get_or_insert(why);
        self.cancel(Some(text));
    }

    /// What the run's tree spent, as its end event tells it: tokens when any were counted,
    /// cost when any was charged.
    fn spend_told(&self) -> (Option<crate::types::Usage>, Option<f64>) {
        let spent = self.account.spent();
        let usage = spent.usage();
        (
            (usage.total() > 0).then_some(usage),
            (spent.cost_micros > 0).then(|| spent.cost_usd()),
        )
    }

    /// Publishes readiness and emits `subagent/start`, unless the run was cancelled first.
    fn mark_ready(&self) {
        let mut phase = lock(&self.phase);
        if *phase != Phase::Pending || self.cancel.is_cancelled() {
            return;
        }
        *phase = Phase::Ready;
        self.started.set(Ok(()));
        // Emitted under the phase lock so that no settlement can slip in before it.
        let _emitting = Emitting::start(self);
        let _ = self.events.emit_made(
            || Event::SubagentStart {
                provider: self.provider.clone(),
                id: self.id.clone(),
                parent: self.request.parent.clone(),
            },
            Vec::new(),
        );
        let held = lock(&self.progress).take_pending();
        for update in held {
            self.emit_progress(update);
        }
    }

    /// Emits one progress update of a ready run (the caller holds the phase lock).
    fn emit_progress(&self, content: Vec<ContentBlock>) {
        let seq = lock(&self.progress).record(&content);
        let _ = self.events.emit_made(
            move || Event::SubagentProgress {
                provider: self.provider.clone(),
                id: self.id.clone(),
                parent: self.request.parent.clone(),
                seq,
                content,
            },
            Vec::new(),
        );
    }

    /// Reports progress: emitted now if the run is ready, held until it is if it is not yet,
    /// dropped once it has settled. Under the phase lock, so that every update falls between
    /// `subagent/start` and `subagent/end`.
    fn report_progress(&self, update: Vec<ContentBlock>) {
        let phase = lock(&self.phase);
        match *phase {
            Phase::Pending => lock(&self.progress).hold(update),
            Phase::Ready => {
                let _emitting = Emitting::start(self);
                self.emit_progress(update);
            }
            Phase::Settled => {}
        }
        drop(phase);
    }

    /// Emits `subagent/end` of `outcome` (made only if someone sees it), the run's record
    /// settled in the same commit.
    fn emit_end(&self, outcome: &Result<SubagentResult, SubagentError>) {
        let _emitting = Emitting::start(self);
        let record = self.end_record(outcome);
        let _ = self.events.emit_made(|| self.end_event(outcome), record);
    }

    /// Publishes the outcome once. A started run emits `subagent/end` first, so that a caller
    /// who awaited the result has also been preceded by the event; a run that never became ready
    /// rejects `started` and emits nothing.
    fn settle(&self, result: SubagentResult, not_started: SubagentError) {
        self.publish(Ok(result), not_started, None);
    }

    /// [`RunShared::settle`] for a run the host ended `aborted`, remembering `how`.
    fn settle_aborted(&self, how: Aborted, result: SubagentResult, not_started: SubagentError) {
        self.publish(Ok(result), not_started, Some(how));
    }

    /// Publishes an outcome, which is an error only for an infrastructure fault: then `result`
    /// fails, and `subagent/end` says `error` with no last assistant message.
    fn publish(
        &self,
        outcome: Result<SubagentResult, SubagentError>,
        not_started: SubagentError,
        aborted: Option<Aborted>,
    ) {
        let mut phase = lock(&self.phase);
        match *phase {
            Phase::Settled => return,
            Phase::Ready => self.emit_end(&outcome),
            Phase::Pending => {
                // No event tells of a run that never started: nobody waits on its record.
                let record = self.end_record(&outcome);
                self.events.store().commit_later(record);
                self.started.set(Err(not_started));
            }
        }
        *phase = Phase::Settled;
        // Before the result: whoever awaited it sees how it was aborted.
        *lock(&self.aborted) = aborted;
        self.result.set(outcome);
    }

    /// The `subagent/end` of `outcome`.
    fn end_event(&self, outcome: &Result<SubagentResult, SubagentError>) -> Event {
        let (usage, cost_usd) = self.spend_told();
        match outcome {
            Ok(result) => Event::SubagentEnd {
                provider: self.provider.clone(),
                id: self.id.clone(),
                parent: self.request.parent.clone(),
                stop_reason: result.stop_reason.clone(),
                last_assistant_message: Some(result.output.clone()),
                diagnostic: result.diagnostic.clone(),
                usage,
                cost_usd,
            },
            Err(fault) => Event::SubagentEnd {
                provider: self.provider.clone(),
                id: self.id.clone(),
                parent: self.request.parent.clone(),
                stop_reason: StopReason::Error,
                last_assistant_message: None,
                diagnostic: Some(fault.to_string()),
                usage,
                cost_usd,
            },
        }
    }

    /// The write that settles the run's record as `outcome` ends it (none if no record).
    fn end_record(&self, outcome: &Result<SubagentResult, SubagentError>) -> Vec<Write> {
        if self.record.is_none() {
            return Vec::new();
        }
        match outcome {
            Ok(result) => self.record_end(&result.stop_reason, result.diagnostic.clone()),
            Err(fault) => self.record_end(&StopReason::Error, Some(fault.to_string())),
        }
    }

    fn aborted_result(&self, how: Aborted) -> (SubagentResult, SubagentError) {
        let reason = self.cancel_reason();
        let text = match &reason {
            Some(r) => format!("{how}: {r}"),
            None => how.to_string(),
        };
        (
            SubagentResult::failed(StopReason::Aborted, text),
            SubagentError::Aborted(reason),
        )
    }

    /// Settles from what the provider's future produced (`None`: the host gave up on it after
    /// the cancel grace period).
    fn finish(&self, outcome: Option<Result<SubagentResult, RunFailure>>) {
        if let Some(why) = lock(&self.budget_stop).clone() {
            // Stopped by its budget, however the provider wound down: the stop reason says so.
            let mut result = match outcome {
                Some(Ok(result)) => result,
                _ => SubagentResult::failed(StopReason::Budget, why.to_string()),
            };
            result.stop_reason = StopReason::Budget;
            result.structured = None;
            result.diagnostic = Some(why.to_string());
            self.settle(result, SubagentError::BudgetExhausted(why));
            return;
        }
        let cancelled = self.cancel.is_cancelled();
        match outcome {
            None => {
                let (r, e) = self.aborted_result(Aborted::Enforced);
                self.settle_aborted(Aborted::Enforced, r, e);
            }
            Some(Ok(mut result)) => {
                if cancelled {
                    let (r, e) = self.aborted_result(Aborted::Cancelled);
                    result.stop_reason = StopReason::Aborted;
                    result.structured = None;
                    // The host's words name the cancel's reason; the guest's follow, if any.
                    result.diagnostic = match (r.diagnostic, result.diagnostic.take()) {
                        (Some(host), Some(guest)) if guest != host => {
                            Some(format!("{host}; the provider said: {guest}"))
                        }
                        (host, guest) => host.or(guest),
                    };
                    self.settle_aborted(Aborted::Cancelled, result, e);
                } else {
                    super::structured::enforce(
                        &self.provider,
                        self.request.output_schema.as_ref(),
                        &mut result,
                    );
                    // Returning a result is proof the child existed.
                    self.mark_ready();
                    self.settle(result, SubagentError::Internal("unreachable".into()));
                }
            }
            Some(Err(failure)) => {
                if cancelled {
                    let (r, e) = self.aborted_result(Aborted::Cancelled);
                    self.settle_aborted(Aborted::Cancelled, r, e);
                } else if let RunFailure::Panicked(_) = failure {
                    // A host-side bug, not the child's failure: the seam cannot represent it as
                    // a result, so `result` fails.
                    let message = format!("provider `{}` failed: {failure}", self.provider);
                    tracing::error!(run = %self.id, "{message}");
                    let fault = SubagentError::Internal(message);
                    self.publish(Err(fault.clone()), fault, None);
                } else {
                    let message = format!("provider `{}` failed: {failure}", self.provider);
                    tracing::info!(run = %self.id, "{message}");
                    let not_started = match failure {
                        RunFailure::Rejected(e) => e,
                        _ => SubagentError::StartFailed(message.clone()),
                    };
                    self.settle(
                        SubagentResult::failed(StopReason::Error, message),
                        not_started,
                    );
                }
            }
        }
    }

    /// Settles a run that was cancelled before anything ran (an already-aborted signal).
    pub(crate) fn settle_pre_aborted(&self) {
        self.cancel(Some("the caller's signal was already aborted".into()));
        let (r, e) = self.aborted_result(Aborted::BeforeStart);
        self.settle_aborted(Aborted::BeforeStart, r, e);
    }

    /// Drives `provider`'s future for this run: first on the caller's thread when `first`
    /// allows it and nothing on this thread forbids it (see [`FirstPoll`]), then, if it still
    /// has work after its first wait, on a task of its own.
    pub(crate) fn drive(
        self: &Arc<Self>,
        provider: Arc<dyn Provider>,
        request: StartRequest,
        first: FirstPoll,
    ) {
        let grace = self.grace;
        let shared = self.clone();
        let mut driver: BoxFuture<'static, ()> = Box::pin(async move {
            let signal = request.signal.clone();
            // A panic in the provider is contained to its run, which then ends `error`.
            let work = crate::trace::in_run(
                &shared.id,
                &shared.request.parent.id,
                provider.run(RunContext(shared.clone()), request),
            );
            let fut = std::panic::AssertUnwindSafe(work)
                .catch_unwind()
                .map(|r| r.unwrap_or_else(|panic| Err(RunFailure::Panicked(panic_text(&*panic)))));
            let enforce = async {
                shared.cancel.cancelled().await;
                tokio::time::sleep(grace).await;
            };
            // Stops the run when its wall time runs out; never completes by itself (the cancel
            // it makes does, through `fut` or `enforce`).
            let expire = async {
                shared.account.expired().await;
                shared.stop_for_budget(shared.account.out_of_time());
                std::future::pending::<()>().await
            };
            // Bridges the caller's signal into this run; never completes by itself.
            let link = async {
                if let Some(signal) = signal {
                    signal.cancelled().await;
                    shared.cancel(Some("the caller's signal was aborted".into()));
                }
                std::future::pending::<()>().await
            };
            let outcome = tokio::select! {
                biased;
                r = fut => Some(r),
                _ = enforce => None,
                _ = link => None,
                _ = expire => None,
            };
            // The provider's future (and with it the run's store) is gone by now.
            shared.finish(outcome);
        });
        if first == FirstPoll::Caller && Driving::allowed() {
            {
                let _task = lock(&self.task);
                if *lock(&self.dispose_state) != DisposeState::Live {
                    // Disposed (its provider unloaded) before anything of it ran.
                    return;
                }
                self.first_poll.store(true, Ordering::Release);
            }
            let _over = FirstPollOver(self);
            // The waker is a no-op: should the driver wait, the task below polls it again
            // straight away, and every future it waits on then registers that task's waker
            // (a future wakes the waker of its latest poll only).
            let mut cx = Context::from_waker(Waker::noop());
            let polled = {
                let _driving = Driving::start(self);
                driver.as_mut().poll(&mut cx)
            };
            let mut task = lock(&self.task);
            if polled.is_pending() && *lock(&self.dispose_state) == DisposeState::Live {
                *task = Some(tokio::spawn(driver));
            } else {
                // It settled, or a dispose waits for this poll to settle it: its future, with
                // the run's store, ends before that dispose goes on.
                drop(driver);
            }
            drop(task);
            return;
        }
        let mut task = lock(&self.task);
        if *lock(&self.dispose_state) != DisposeState::Live {
            // Disposed (its provider unloaded) before anything of it ran.
            return;
        }
        *task = Some(tokio::spawn(driver));
    }

    /// The run's task, unless its first poll is being made on its caller's thread (`None`).
    fn try_take_task(&self) -> Option<Option<JoinHandle<()>>> {
        let mut task = lock(&self.task);
        (!self.first_poll.load(Ordering::Acquire)).then(|| task.take())
    }

    /// The run's task, once no first poll is being made on its caller's thread.
    async fn take_task(&self) -> Option<JoinHandle<()>> {
        match self.try_take_task() {
            Some(task) => task,
            None => {
                self.first_poll_over.wait().await;
                self.try_take_task().flatten()
            }
        }
    }

    async fn dispose(self: &Arc<Self>) {
        let first = {
            let mut state = lock(&self.dispose_state);
            if *state == DisposeState::Live {
                *state = DisposeState::Disposing;
                true
            } else {
                false
            }
        };
        if !first {
            self.disposed.wait().await;
            return;
        }
        self.cancel(Some("disposed".into()));
        let inside = Emitting::is(self) || Driving::is(self);
        let task = match self.try_take_task() {
            Some(task) => task,
            // From inside its own first poll: it has no task yet, and nothing here may wait.
            None if inside => None,
            None => return self.spawn_finish(Taken::AfterFirstPoll).await,
        };
        let own_task = task
            .as_ref()
            .is_some_and(|t| tokio::task::try_id() == Some(t.id()));
        if own_task || inside {
            // From inside the run (its provider, on its task or in its first poll on the
            // caller's thread, or a listener of its own event, which holds the phase lock on
            // this thread): nothing here may wait for the run.
            if let Some(task) = task {
                task.abort();
            }
            self.finish_dispose_from_inside();
            return;
        }
        // A run whose task has ended (the usual case) is disposed at once, with no await that
        // a caller could abandon halfway.
        let task = match task {
            Some(t) if t.is_finished() => match t.now_or_never() {
                Some(_) => None,
                None => return self.spawn_finish(Taken::Task(None)).await,
            },
            other => other,
        };
        if task.is_none() && lock(&self.teardown).is_empty() {
            self.settle_if_unsettled();
            self.mark_disposed();
            return;
        }
        self.spawn_finish(Taken::Task(task)).await;
    }

    /// Finishes disposing on a task of its own, so that a caller who stops waiting (a timeout,
    /// a `select!`) cannot leave the run half disposed.
    async fn spawn_finish(self: &Arc<Self>, task: Taken) {
        let shared = self.clone();
        let work = tokio::spawn(async move { shared.finish_dispose(task).await });
        if work.await.is_err() {
            // Only a panic inside the host gets here; later callers must not wait forever.
            self.mark_disposed();
        }
    }

    async fn finish_dispose(&self, task: Taken) {
        let task = match task {
            Taken::Task(task) => task,
            Taken::AfterFirstPoll => self.take_task().await,
        };
        if let Some(mut task) = task {
            // Cooperative first, so that the run unwinds (its child's tool calls dispose their
            // own runs); then the run's future, and with it its store, is dropped. A task that
            // has already ended (the usual case) needs no grace timer.
            if task.is_finished() {
                let _ = task.await;
            } else if tokio::time::timeout(self.grace, &mut task).await.is_err() {
                task.abort();
                let _ = task.await;
            }
        }
        // The store is gone; what its drop started ends before the run counts as disposed.
        let teardown = std::mem::take(&mut *lock(&self.teardown));
        futures::future::join_all(teardown).await;
        self.settle_if_unsettled();
        self.mark_disposed();
    }

    /// Disposes without waiting for anything the caller may be holding. A listener of this
    /// run's own event holds the phase lock: the settling is then left to a task that takes
    /// the lock once the emission is over.
    fn finish_dispose_from_inside(self: &Arc<Self>) {
        match self.phase.try_lock() {
            Ok(phase) => {
                drop(phase);
                self.settle_if_unsettled();
            }
            Err(_) => {
                let shared = self.clone();
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { shared.settle_if_unsettled() });
                }
            }
        }
        self.mark_disposed();
    }

    fn settle_if_unsettled(&self) {
        // Only an unsettled run needs its `aborted` result built; `settle` ignores it otherwise.
        if *lock(&self.phase) != Phase::Settled {
            let (r, e) = self.aborted_result(Aborted::Disposed);
            self.settle_aborted(Aborted::Disposed, r, e);
        }
    }

    fn mark_disposed(&self) {
        {
            let mut state = lock(&self.dispose_state);
            if *state == DisposeState::Disposed {
                return;
            }
            *state = DisposeState::Disposed;
        }
        (self.on_disposed)(&self.id);
        self.live.run_disposed();
        self.disposed.set(());
    }
}

/// The message a panic carried.
fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".into())
}

/// Ends a run's first poll on its caller's thread when dropped, even by a panic (a spawn outside
/// a runtime): a dispose waiting for it goes on.
struct FirstPollOver<'a>(&'a RunShared);

impl Drop for FirstPollOver<'_> {
    fn drop(&mut self) {
        self.0.first_poll.store(false, Ordering::Release);
        self.0.first_poll_over.set(());
    }
}

/// What a dispose finishing on a task of its own has of the run's task.
enum Taken {
    /// The task (none if the run never had one or it was reaped).
    Task(Option<JoinHandle<()>>),
    /// Nothing yet: the run's first poll is being made on its caller's thread.
    AfterFirstPoll,
}

/// Where a run's provider is first polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstPoll {
    /// On the thread that starts the run, inside `start`, up to the provider's first wait.
    Caller,
    /// On the run's own task.
    Task,
}

thread_local! {
    /// The run whose first poll this thread is making inside `start`, if any.
    static DRIVING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Marks this thread as making a run's first poll for as long as it lives.
///
/// Only one at a time, and never while this thread emits an event: a run started by a run's
/// first poll or by an event listener goes to its own task, so the caller's stack carries at
/// most one child's work and no listener waits on a child.
struct Driving;

impl Driving {
    fn allowed() -> bool {
        DRIVING.with(|d| d.get() == 0) && EMITTING.with(|e| e.borrow().is_empty())
    }

    fn start(run: &RunShared) -> Self {
        DRIVING.with(|d| d.set(run as *const RunShared as usize));
        Self
    }

    fn is(run: &RunShared) -> bool {
        DRIVING.with(|d| d.get() == run as *const RunShared as usize)
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with(|d| d.set(0));
    }
}

thread_local! {
    /// The runs whose events this thread is emitting right now (under their phase lock).
    static EMITTING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks this thread as emitting an event of `run` for as long as it lives.
struct Emitting(usize);

impl Emitting {
    fn start(run: &RunShared) -> Self {
        let key = run as *const RunShared as usize;
        EMITTING.with(|e| e.borrow_mut().push(key));
        Self(key)
    }

    fn is(run: &RunShared) -> bool {
        let key = run as *const RunShared as usize;
        EMITTING.with(|e| e.borrow().contains(&key))
    }
}

impl Drop for Emitting {
    fn drop(&mut self) {
        EMITTING.with(|e| {
            let mut e = e.borrow_mut();
            if let Some(i) = e.iter().rposition(|k| *k == self.0) {
                e.remove(i);
            }
        });
    }
}

/// The provider's view of its run.
#[derive(Clone)]
pub struct RunContext(Arc<RunShared>);

impl RunContext {
    /// The session store the run's records are kept in (a provider that keeps its child's
    /// session itself writes it there, through [`RunContext::link_child_session`]).
    pub fn store(&self) -> &Arc<dyn crate::store::SessionStore> {
        self.0.events.store()
    }

    /// Waits for the yes `[approvals]` asks before the run's plugin uses its grant of `class` on
    /// `target` (an ACP provider starting its agent's program); `Err` says why not, and how to
    /// allow it.
    pub async fn approve_grant(
        &self,
        class: crate::approval::GrantClass,
        plugin: &str,
        target: &str,
    ) -> Result<(), crate::approvals::Refused> {
        let policy = self.0.approvals.settings().for_grant(class);
        let subject = crate::approval::Subject::Grant {
            class,
            plugin: plugin.to_string(),
            target: target.to_string(),
        };
        self.approve(policy, subject).await
    }

    /// Asks, under `policy`, whether the run may do `subject` (an ACP agent's own permission
    /// request, with its entry's `permissions = "ask"`): asked as a call of the run's tree, on
    /// whichever surface is there.
    pub async fn approve(
        &self,
        policy: crate::approval::Policy,
        subject: crate::approval::Subject,
    ) -> Result<(), crate::approvals::Refused> {
        if policy == crate::approval::Policy::Allow {
            return Ok(());
        }
        let asker = crate::approvals::Asker::of(&self.0.account, &self.0.request.parent.session_id);
        self.0
            .approvals
            .check(policy, &asker, subject, &self.0.cancel)
            .await
    }

    /// A token cancelled when the run is cancelled or disposed; link what the run owns to it.
    pub fn token(&self) -> CancellationToken {
        self.0.cancel.clone()
    }

    /// Records the in-process child this run owns (for steering).
    pub fn set_child<S: Steer>(&self, child: &Arc<S>) {
        let child: Weak<S> = Arc::downgrade(child);
        let child: Weak<dyn Steer> = child;
        *lock(&self.0.child) = Some(child);
    }

    /// Records that the run's child keeps the session `session`: in the store (the run's
    /// activations of one child are found by it) and on the run.
    pub fn link_child_session(&self, session: &str) {
        *lock(&self.0.child_session) = Some(session.to_string());
        if let Some(run) = self.0.record {
            let link = Write::LinkChild {
                run,
                session: session.to_string(),
            };
            if let Err(e) = self.0.events.store().commit(vec![link]) {
                tracing::warn!(run = %self.0.id, error = %e, "cannot link the run to its child's session");
            }
        }
    }

    /// Whether the run already owns a child.
    pub fn has_child(&self) -> bool {
        lock(&self.0.child).is_some()
    }

    /// Keeps what the child leaves when it is torn down, so that the run can be resumed.
    pub fn keep_for_resume(&self, seed: ResumeSeed) {
        *lock(&self.0.left_for_resume) = Some(seed);
    }

    /// Makes the run's dispose wait for `teardown`: what dropping the run's store started and
    /// could not wait for (a child cut short by an enforced cancel leaves its background runs
    /// to a task).
    pub fn wait_on_dispose(&self, teardown: JoinHandle<()>) {
        lock(&self.0.teardown).push(teardown);
    }

    /// For a resumed run: what its child must start from.
    pub fn resumed_from(&self) -> Option<ResumeSeed> {
        self.0.resume_seed.clone()
    }

    /// The run id (the child's agent id).
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// Stops the run because its tree's budget ran out (a provider that reported spending
    /// past it): it is cancelled, and ends `budget` with `why` as its diagnostic.
    pub fn stop_for_budget(&self, why: Exhausted) {
        self.0.stop_for_budget(why);
    }

    /// The run's budget account (see [`SubagentRun::account`]).
    pub fn account(&self) -> &Arc<Account> {
        &self.0.account
    }

    /// The run's record in the host's session store, if it took it.
    pub fn record(&self) -> Option<RunKey> {
        self.0.record
    }

    /// The calling agent.
    pub fn parent(&self) -> &ParentRef {
        &self.0.request.parent
    }

    /// The run's W3C `traceparent`, when the process traces (see [`crate::trace`]): for what
    /// its provider sends on its behalf (an ACP agent's requests, a worker's start).
    pub fn traceparent(&self) -> Option<String> {
        crate::trace::traceparent(crate::trace::Scope::Run {
            run: &self.0.id,
            parent: &self.0.request.parent.id,
        })
    }

    /// Declares that the child exists. Ignored once cancelled or already ready.
    pub fn ready(&self) {
        self.0.mark_ready();
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancel.is_cancelled()
    }

    /// The reason given to `cancel`, if any.
    pub fn cancel_reason(&self) -> Option<String> {
        self.0.cancel_reason()
    }

    /// Whether the run's process let go of it (`seam run --detach`, Ctrl-C while waiting): its
    /// cancel then ends only this process's part, and what the child runs elsewhere (a remote
    /// agent's task) is left for a later process to continue.
    pub fn is_detached(&self) -> bool {
        lock(&self.0.detached).is_some()
    }

    /// Completes when the run is cancelled.
    pub async fn cancelled(&self) {
        self.0.cancel.cancelled().await
    }

    /// Reports progress (`subagent/progress`); see the contract's ordering rules.
    pub fn progress(&self, update: Vec<ContentBlock>) {
        self.0.report_progress(update);
    }

    /// The oldest steering message waiting for this run's provider.
    pub fn next_message(&self) -> Option<Vec<ContentBlock>> {
        lock(&self.0.inbox).pop()
    }

    /// Completes once a steering message is waiting (at once if one already is).
    pub fn message_waiting(&self) -> BoxFuture<'static, ()> {
        let mut rx = lock(&self.0.inbox).watch();
        Box::pin(async move {
            // The sender lives as long as the run; if it is gone, nothing will ever arrive.
            if rx.wait_for(|n| *n > 0).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    /// Whether a steering message is waiting.
    pub fn has_message(&self) -> bool {
        *lock(&self.0.inbox).watch().borrow() > 0
    }
}

/// The caller's handle on a live run. Cloning shares the same run.
///
/// [`SubagentRun::dispose`] must be called on every path; it is idempotent, and when it returns
/// nothing of the run is left (its store is dropped and the host's live-run count is decremented).
#[derive(Clone)]
pub struct SubagentRun(pub(crate) Arc<RunShared>);

impl std::fmt::Debug for SubagentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentRun")
            .field("id", &self.0.id)
            .field("provider", &self.0.provider)
            .finish()
    }
}

impl SubagentRun {
    /// The run's budget account: what it and everything below it spent, under its caller's.
    /// A provider whose child spends elsewhere (a remote worker) charges what it reports here.
    pub fn account(&self) -> &Arc<Account> {
        &self.0.account
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// The provider's name.
    pub fn provider(&self) -> &str {
        &self.0.provider
    }

    /// Waits until the child exists; fails if the attempt failed or was cancelled first.
    pub fn started(&self) -> BoxFuture<'static, Result<(), SubagentError>> {
        let shared = self.0.clone();
        Box::pin(async move { shared.started.wait().await })
    }

    /// Waits for the outcome. A child-level failure resolves with a non-`completed` reason; only
    /// an infrastructure fault the seam cannot represent otherwise (a panic in a host-side
    /// provider) fails, with `INTERNAL`.
    pub fn result(&self) -> BoxFuture<'static, Result<SubagentResult, SubagentError>> {
        let shared = self.0.clone();
        Box::pin(async move { shared.result.wait().await })
    }

    /// The outcome if it has settled.
    pub fn try_result(&self) -> Option<Result<SubagentResult, SubagentError>> {
        self.0.result.get()
    }

    /// How the host ended the run `aborted` (a cancel it enforced, one the provider obeyed, a
    /// dispose), once it has settled so; `None` while it runs and for a run that ended
    /// otherwise, including a provider that answered `aborted` by itself.
    pub fn aborted(&self) -> Option<Aborted> {
        *lock(&self.0.aborted)
    }

    /// Cancels the run. Before readiness, `started` rejects and no child is left; after it, the
    /// provider is told at once and the host enforces the cancel after its grace period.
    pub fn cancel(&self, reason: Option<String>) {
        self.0.cancel(reason);
    }

    /// Tears the run down. Idempotent and safe to call concurrently.
    pub async fn dispose(&self) {
        self.0.dispose().await
    }

    /// Whether dispose has completed.
    pub fn is_disposed(&self) -> bool {
        self.0.disposed.is_set()
    }

    /// Steers the run with an extra message (providers declaring `steering`): an in-process
    /// child sees it in its current or next turn; a component provider takes it from its
    /// inbox (`run-context.next-message`).
    pub fn send_message(&self, content: Vec<ContentBlock>) -> Result<(), SubagentError> {
        if !self.0.features.steering {
            return Err(SubagentError::UnsupportedFeature {
                provider: self.0.provider.clone(),
                feature: "steering".into(),
            });
        }
        if self.try_result().is_some() || self.0.cancel.is_cancelled() {
            return Err(SubagentError::InvalidState(format!(
                "run `{}` has already settled or been cancelled",
                self.0.id
            )));
        }
        match self.child() {
            Some(child) if child.queued() >= super::talk::INBOX_MESSAGES => {
                Err(SubagentError::InvalidState(format!(
                    "run `{}` cannot take it: its child already has {} messages waiting",
                    self.0.id,
                    super::talk::INBOX_MESSAGES
                )))
            }
            Some(child) => {
                child.steer(content);
                Ok(())
            }
            None => lock(&self.0.inbox).push(content).map_err(|why| {
                SubagentError::InvalidState(format!("run `{}` cannot take it: {why}", self.0.id))
            }),
        }
    }

    /// Whether the run takes steering messages ([`SubagentRun::send_message`]): its provider
    /// declares `steering`.
    pub fn steerable(&self) -> bool {
        self.0.features.steering
    }

    /// The progress the run reported so far (bounded; the oldest updates go first).
    pub fn progress(&self) -> Vec<ContentBlock> {
        lock(&self.0.progress).so_far()
    }

    /// What a caller can see of the run without waiting on it.
    pub fn info(&self, label: &str) -> RunInfo {
        let stop_reason = self
            .try_result()
            .map(|r| r.map_or(StopReason::Error, |r| r.stop_reason));
        RunInfo {
            id: self.0.id.clone(),
            provider: self.0.provider.clone(),
            label: label.to_string(),
            state: if stop_reason.is_some() {
                RunState::Settled
            } else {
                RunState::Running
            },
            started_at_ms: self.0.started_at_ms,
            stop_reason,
        }
    }

    /// The live child, for an in-process provider.
    fn child(&self) -> Option<Arc<dyn Steer>> {
        lock(&self.0.child).as_ref().and_then(Weak::upgrade)
    }

    /// The run's record in the store, if the store took it.
    pub fn record(&self) -> Option<RunKey> {
        self.0.record
    }

    /// The calling agent.
    pub fn parent(&self) -> &ParentRef {
        &self.0.request.parent
    }

    /// The session its child agent keeps, once the child exists (in-process providers).
    pub fn child_session_id(&self) -> Option<String> {
        lock(&self.0.child_session).clone()
    }

    /// What the child left for `resume`, once it was torn down (in-process providers).
    pub fn resume_state(&self) -> Option<ResumeSeed> {
        lock(&self.0.left_for_resume).clone()
    }
}
