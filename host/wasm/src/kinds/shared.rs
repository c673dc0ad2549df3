//! Instances shared by several runs: where a provider's entry sets `config.share_instance` and
//! its `run` is async (`seam:plugin@0.5.0` on), one instance serves up to that many runs at
//! once, each a concurrent call of `run` on one store, instead of an instance and a store per
//! run.
//!
//! Each instance is a task that owns its store and runs it concurrently
//! (`Store::run_concurrent`), fed runs by a channel. A run's [`RunEnv`] lives in the store's
//! `Serving::shared` under its id while its call lasts (the `runs` interface finds it there),
//! and leaves it when the call returns. The instance counts the calls it holds, so a run the
//! host gave up on (an enforced cancel drops its future; a single call of an instance cannot be
//! stopped) keeps its slot until the guest's call ends. A trap ends the instance and fails every
//! run it held; the next runs get a new one.
//!
//! What isolation gives up here is what sharing means: the runs of one instance share its
//! memory, its CPU budget (`cpu_ms_per_call` for each run it was given) and its state. A run
//! the instance cannot serve as its own — one under a scope, one that is recorded or replayed,
//! or one whose grants ask for approval — gets an instance of its own instead
//! ([`SharedPool::admits`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::{FuturesUnordered, StreamExt};
use seam_core::approval::{GrantClass, Policy};
use seam_core::subagent::RunFailure;
use seam_core::sync::lock;
use seam_core::types::{StartRequest, SubagentResult};
use tokio::sync::{mpsc, oneshot};

use super::provider_exports::{ProviderInstance, ProviderPre};
use crate::fault::GuestFault;
use crate::store::context::RunEnv;
use crate::store::{StoreData, Stores};
use crate::versions::exports::{Answer, GuestError, RunCall};
use wasmtime::component::Accessor;

/// Default of `config.share_instance = true`: the most runs one instance serves at once.
pub const DEFAULT_SHARED_RUNS: usize = 256;

/// A provider's shared instances.
pub(crate) struct SharedPool {
    pre: ProviderPre,
    stores: Stores,
    config: Arc<str>,
    /// The most runs one instance serves at once.
    per_instance: usize,
    instances: Mutex<Vec<Arc<Instance>>>,
    /// The instances' tasks, for [`SharedPool::close`].
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// One shared instance, as the pool sees it: only the pool holds its sender, so that dropping
/// the pool (the plugin unloaded) lets the instance end once its calls have.
struct Instance {
    runs: mpsc::UnboundedSender<Job>,
    state: Arc<InstanceState>,
}

/// What an instance's task and the pool both see of it.
#[derive(Default)]
struct InstanceState {
    /// Calls of `run` it holds, the ones the host gave up on included.
    load: AtomicUsize,
    /// It trapped, or could not be made: it takes no more runs.
    failed: AtomicBool,
}

/// The runs a shared instance owes an answer, by id.
type Waiting = Mutex<Vec<(String, oneshot::Sender<Result<SubagentResult, RunFailure>>)>>;

/// A run handed to an instance.
struct Job {
    env: RunEnv,
    request: Arc<StartRequest>,
    answer: oneshot::Sender<Result<SubagentResult, RunFailure>>,
}

impl SharedPool {
    /// The shared instances of a provider whose entry serves `per_instance` runs per instance.
    pub fn new(pre: ProviderPre, stores: Stores, config: Arc<str>, per_instance: usize) -> Self {
        Self {
            pre,
            stores,
            config,
            per_instance: per_instance.max(1),
            instances: Mutex::default(),
            tasks: Mutex::default(),
        }
    }

    /// Ends every instance: the provider is unregistered and its runs are disposed, so a call
    /// still in an instance is one the host gave up on, and goes with its store.
    pub async fn close(&self) {
        lock(&self.instances).clear();
        let tasks = std::mem::take(&mut *lock(&self.tasks));
        for task in tasks {
            task.abort();
            // Cancelled or ended: either way its store is gone.
            let _ = task.await;
        }
    }

    /// Whether a shared instance may serve `env`'s run: not one under a scope (its grants are
    /// narrowed for it alone), not one on a tape (its clock, random and HTTP are its own), not
    /// one whose grants ask for approval first (the approval is the run's).
    pub fn admits(&self, env: &RunEnv) -> bool {
        let account = env.ctx.account();
        let approvals = env.subagents.approvals().settings();
        account.scopes().is_empty()
            && account.tape().is_none()
            && [GrantClass::Write, GrantClass::Http]
                .into_iter()
                .all(|class| approvals.for_grant(class) == Policy::Allow)
    }

    /// Serves `env`'s run on an instance with room for it, made if none has.
    pub async fn run(
        &self,
        env: RunEnv,
        request: Arc<StartRequest>,
    ) -> Result<SubagentResult, RunFailure> {
        let (answer, answered) = oneshot::channel();
        let job = Job {
            env,
            request,
            answer,
        };
        if let Err(mpsc::error::SendError(job)) = self.instance().runs.send(job) {
            // The instance ended between the pick and the send: a fresh one takes the run.
            self.instance()
                .runs
                .send(job)
                .map_err(|_| RunFailure::ShuttingDown)?;
        }
        answered.await.unwrap_or(Err(RunFailure::ShuttingDown))
    }

    /// An instance with room for one more run (its load counted), a new one if none has.
    fn instance(&self) -> Arc<Instance> {
        let mut instances = lock(&self.instances);
        instances.retain(|i| !i.state.failed.load(Ordering::Acquire));
        let open = instances
            .iter()
            .find(|i| i.state.load.load(Ordering::Acquire) < self.per_instance);
        let instance = match open {
            Some(i) => i.clone(),
            None => {
                let (runs, jobs) = mpsc::unbounded_channel();
                let instance = Arc::new(Instance {
                    runs,
                    state: Arc::default(),
                });
                let task = tokio::spawn(serve(
                    self.pre.clone(),
                    self.stores.clone(),
                    self.config.clone(),
                    instance.state.clone(),
                    jobs,
                ));
                let mut tasks = lock(&self.tasks);
                tasks.retain(|t| !t.is_finished());
                tasks.push(task);
                instances.push(instance.clone());
                instance
            }
        };
        instance.state.load.fetch_add(1, Ordering::AcqRel);
        instance
    }
}

/// An instance's task: makes its store and instance, then serves the runs it is sent, each a
/// concurrent call of `run`, until the pool lets go of it and its last call has returned, or it
/// traps.
async fn serve(
    pre: ProviderPre,
    stores: Stores,
    config: Arc<str>,
    shared: Arc<InstanceState>,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) {
    let ticks = stores.sandbox.cpu_ticks();
    // One call's worth for making the instance (its start functions run guest code), then one
    // more for each run it is given.
    let budget = Arc::new(AtomicU64::new(ticks));
    let mut store = stores.make_shared(budget.clone());
    let instance = match pre.instantiate(&mut store).await {
        Ok(instance) => instance,
        Err(e) => {
            let fault = GuestFault::from_store_error(&e, store.data()).to_string();
            return fail_all(&shared, &mut jobs, Vec::new(), &fault);
        }
    };
    // Whom each call owes an answer: kept outside the concurrent loop, so that a trap, which
    // ends the loop with every call in it, is still answered.
    let waiting = Waiting::default();
    let outcome = store
        .run_concurrent(async |accessor| {
            let shared = Shared {
                instance: &instance,
                config: &config,
                state: &shared,
                budget: &budget,
                ticks,
                waiting: &waiting,
            };
            shared.serve_calls(accessor, &mut jobs).await
        })
        .await;
    let fault = match outcome {
        Ok(None) => return,
        Ok(Some(fault)) => fault,
        Err(e) => GuestFault::from_store_error(&e, store.data()).to_string(),
    };
    let waiting = std::mem::take(&mut *lock(&waiting));
    fail_all(&shared, &mut jobs, waiting, &fault);
}

/// What the loop of a shared store works with.
struct Shared<'a> {
    instance: &'a ProviderInstance,
    config: &'a str,
    state: &'a InstanceState,
    /// The store's CPU budget in ticks, raised by `ticks` for each run.
    budget: &'a AtomicU64,
    ticks: u64,
    waiting: &'a Waiting,
}

impl Shared<'_> {
    /// Takes runs from `jobs` and answers each as its call returns. Ends when the pool has let
    /// go and no call is left (`None`), or with the fault of a call that trapped.
    async fn serve_calls(
        &self,
        accessor: &Accessor<StoreData>,
        jobs: &mut mpsc::UnboundedReceiver<Job>,
    ) -> Option<String> {
        let mut calls = FuturesUnordered::new();
        let mut open = true;
        loop {
            tokio::select! {
                job = jobs.recv(), if open => match job {
                    Some(job) => calls.push(self.start(accessor, job)),
                    None => open = false,
                },
                Some((id, answer)) = calls.next() => {
                    if let Some(fault) = self.answer(accessor, id, answer) {
                        return Some(fault);
                    }
                }
            }
            if !open && calls.is_empty() {
                return None;
            }
        }
    }

    /// Puts `job`'s run in the store and calls `run` for it.
    fn start<'b>(
        &'b self,
        accessor: &'b Accessor<StoreData>,
        job: Job,
    ) -> impl Future<Output = (String, Answer<SubagentResult>)> + 'b {
        let ctx = job.env.ctx.clone();
        let id = ctx.id().to_string();
        self.budget.fetch_add(self.ticks, Ordering::Relaxed);
        accessor.with(|mut store| {
            if let Some(runs) = store.data_mut().serving.shared.as_mut() {
                runs.insert(id.clone(), job.env);
            }
        });
        lock(self.waiting).push((id.clone(), job.answer));
        let request = job.request;
        async move {
            let call = RunCall {
                config: self.config,
                ctx: &ctx,
                request: &request,
            };
            let answer = self.instance.run_concurrent(accessor, call).await;
            (id, answer)
        }
    }

    /// Answers the run `id`, whose call returned `answer`, and takes it out of the store (the
    /// runs it started go with it). Returns the fault when the call trapped.
    fn answer(
        &self,
        accessor: &Accessor<StoreData>,
        id: String,
        answer: Answer<SubagentResult>,
    ) -> Option<String> {
        let (env, fault) = accessor.with(|mut store| {
            let fault = answer
                .as_ref()
                .err()
                .map(|e| GuestFault::from_store_error(e, store.data_mut()).to_string());
            let env = store
                .data_mut()
                .serving
                .shared
                .as_mut()
                .and_then(|runs| runs.remove(&id));
            (env, fault)
        });
        drop(env);
        self.state.load.fetch_sub(1, Ordering::AcqRel);
        let to = {
            let mut waiting = lock(self.waiting);
            let at = waiting.iter().position(|(w, _)| *w == id);
            at.map(|at| waiting.swap_remove(at).1)
        };
        if let Some(to) = to {
            let _ = to.send(match (answer, &fault) {
                (Ok(Ok(result)), _) => Ok(result),
                (Ok(Err(GuestError(message))), _) => Err(RunFailure::Refused(message)),
                (Err(_), fault) => Err(RunFailure::GuestFault(fault.clone().unwrap_or_default())),
            });
        }
        fault
    }
}

/// Fails every run an instance holds or was sent with `fault`: it trapped, or could not be made.
fn fail_all(
    shared: &InstanceState,
    jobs: &mut mpsc::UnboundedReceiver<Job>,
    waiting: Vec<(String, oneshot::Sender<Result<SubagentResult, RunFailure>>)>,
    fault: &str,
) {
    shared.failed.store(true, Ordering::Release);
    jobs.close();
    let sent = std::iter::from_fn(|| jobs.try_recv().ok()).map(|job| job.answer);
    for to in waiting.into_iter().map(|(_, to)| to).chain(sent) {
        let _ = to.send(Err(RunFailure::GuestFault(fault.to_string())));
    }
}
