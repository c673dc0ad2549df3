//! The `subagents` service: the registry of named providers and the runs started on them.
//!
//! Registration reads a provider's descriptor once and freezes it. `start` checks capabilities
//! and validates the request before anything is instantiated, then hands the run to a driver task
//! the host owns (see its `run` module).

mod background;
mod durable;
mod error;
mod held;
mod latch;
mod run;
pub mod structured;
pub mod talk;
pub mod validate;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

pub use background::{MAX_BACKGROUND_RUNS, MAX_SETTLED_BACKGROUND_RUNS};
pub use durable::{Notices, StoredSession, MAX_INBOX, MAX_REPORT_BYTES};
pub use error::{code, Aborted, SubagentError};
use run::{FirstPoll, RunHooks, RunShared};
pub use run::{Provider, ResumeSeed, RunContext, RunFailure, Steer, SubagentRun};

use crate::events::{Event, EventBus};
use crate::ledger::{Account, Accounts};
use crate::live::LiveCounts;
use crate::spend::Spent;
use crate::sync::{self, lock};
use crate::types::{ContentBlock, ProviderDescriptor, RunInfo, StartRequest};

/// Default of the agent tree's depth bound (`[agent] max_depth`).
pub const DEFAULT_MAX_TREE_DEPTH: u32 = 8;

/// Strong references: a run whose caller dropped its handle is still found (and disposed) when
/// its provider is removed.
type RunMap = Arc<Mutex<HashMap<String, Arc<RunShared>>>>;

struct Entry {
    descriptor: Arc<ProviderDescriptor>,
    provider: Arc<dyn Provider>,
    /// The plugin that registered it (for traces).
    plugin: Arc<str>,
    /// The runs started on this provider and not yet disposed.
    runs: RunMap,
}

/// The registry of providers and the entry point for starting runs.
pub struct SubagentService {
    providers: RwLock<Vec<Entry>>,
    events: Arc<EventBus>,
    live: Arc<LiveCounts>,
    next_run: AtomicU64,
    cancel_grace: Duration,
    /// Deepest child any start may create (`[agent] max_depth`).
    max_tree_depth: AtomicU32,
    /// Runs that belong to agents rather than calls.
    background: background::Backgrounds,
    /// What continuable children keep in memory.
    durable: held::Durable,
    /// The budget accounts of live agents and runs.
    accounts: Arc<Accounts>,
    /// Requests for approval made in its runs' trees.
    approvals: Arc<crate::approvals::Approvals>,
    /// Whether the trees of top-level agents are recorded, or the next one plays back.
    recording: crate::tape::Recording,
    /// What tools a calling agent may see: a child's are narrowed to them.
    ceiling: std::sync::OnceLock<std::sync::Weak<dyn ToolCeiling>>,
}

/// What tools a caller may see, asked when it starts a run: the child's tool filter is
/// narrowed to them, so that a tool filter is a ceiling and never a grant (the agent registry
/// answers for its agents; a caller it does not know, such as a tool call from outside any
/// agent, is not narrowed).
pub trait ToolCeiling: Send + Sync {
    /// The names of the tools `caller` may call, if `caller` is an agent this side knows.
    fn visible_tools(&self, caller: &str) -> Option<Vec<String>>;
}

impl SubagentService {
    /// An empty registry; `cancel_grace` is how long a cancelled run may wind down before the
    /// host drops it.
    pub fn new(events: Arc<EventBus>, live: Arc<LiveCounts>, cancel_grace: Duration) -> Self {
        Self {
            providers: RwLock::new(Vec::new()),
            approvals: Arc::new(crate::approvals::Approvals::new(events.clone())),
            recording: crate::tape::Recording::default(),
            events,
            live,
            next_run: AtomicU64::new(1),
            cancel_grace,
            max_tree_depth: AtomicU32::new(DEFAULT_MAX_TREE_DEPTH),
            background: background::Backgrounds::default(),
            durable: held::Durable::default(),
            accounts: Arc::default(),
            ceiling: std::sync::OnceLock::new(),
        }
    }

    /// Sets who says what tools a caller may see (the agent registry, once).
    pub fn set_tool_ceiling(&self, ceiling: std::sync::Weak<dyn ToolCeiling>) {
        let _ = self.ceiling.set(ceiling);
    }

    /// `request` with its tool filter narrowed to what its caller may see, for a provider that
    /// honours a tool filter: a child never sees a tool its parent could not call. A filter the
    /// request had keeps its deny list, and its allow list becomes the names in both.
    fn narrowed(&self, mut request: StartRequest, descriptor: &ProviderDescriptor) -> StartRequest {
        if !descriptor.capabilities.tool_filter {
            return request;
        }
        let Some(visible) = self
            .ceiling
            .get()
            .and_then(std::sync::Weak::upgrade)
            .and_then(|c| c.visible_tools(&request.parent.id))
        else {
            return request;
        };
        let mut filter = request.tool_filter.take().unwrap_or_default();
        filter.allow = Some(match filter.allow.take() {
            Some(asked) => asked.into_iter().filter(|n| visible.contains(n)).collect(),
            None => visible,
        });
        request.tool_filter = Some(filter);
        request
    }

    /// The budget accounts of live agents and runs, by id: an agent registry shares them, so
    /// that a run's child agent finds its run's account and a run its caller's.
    pub fn accounts(&self) -> &Arc<Accounts> {
        &self.accounts
    }

    /// Whether the trees of top-level agents are recorded (`[recording]`), or the next one
    /// plays a recording back (`seam replay`).
    pub fn recording(&self) -> &crate::tape::Recording {
        &self.recording
    }

    /// The approvals engine: what asks whether a call in its runs' trees may go ahead.
    pub fn approvals(&self) -> &Arc<crate::approvals::Approvals> {
        &self.approvals
    }

    /// Sets the deepest child any start may create, whatever the request's `max-depth` says.
    pub fn set_max_tree_depth(&self, max: u32) {
        self.max_tree_depth.store(max, Ordering::Relaxed);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Entry>> {
        sync::read(&self.providers)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Entry>> {
        sync::write(&self.providers)
    }

    /// Registers a provider under its descriptor's name and emits `subagent/provider-added`.
    /// `plugin` names the registering plugin in errors.
    pub fn register(
        &self,
        plugin: &str,
        descriptor: ProviderDescriptor,
        provider: Arc<dyn Provider>,
    ) -> Result<Arc<ProviderDescriptor>, SubagentError> {
        validate::descriptor(plugin, &descriptor)?;
        let descriptor = Arc::new(descriptor);
        {
            let mut providers = self.write();
            if providers
                .iter()
                .any(|e| e.descriptor.name == descriptor.name)
            {
                return Err(SubagentError::DuplicateProvider(descriptor.name.clone()));
            }
            providers.push(Entry {
                descriptor: descriptor.clone(),
                provider,
                plugin: plugin.into(),
                runs: Arc::default(),
            });
        }
        self.events.emit(&Event::ProviderAdded {
            name: descriptor.name.clone(),
        });
        Ok(descriptor)
    }

    /// Swaps the implementation behind the registered provider of `descriptor`'s name: runs
    /// already going finish on the implementation they started with, and stay the registry's
    /// to dispose; new runs start on `provider` and see `descriptor`. Nothing is emitted: the
    /// provider never left the registry. Fails with `NO_PROVIDER` if the name is not registered.
    pub fn replace(
        &self,
        plugin: &str,
        descriptor: ProviderDescriptor,
        provider: Arc<dyn Provider>,
    ) -> Result<Arc<ProviderDescriptor>, SubagentError> {
        validate::descriptor(plugin, &descriptor)?;
        let descriptor = Arc::new(descriptor);
        let mut providers = self.write();
        let entry = providers
            .iter_mut()
            .find(|e| e.descriptor.name == descriptor.name)
            .ok_or_else(|| SubagentError::NoProvider(descriptor.name.clone()))?;
        entry.descriptor = descriptor.clone();
        entry.provider = provider;
        entry.plugin = plugin.into();
        Ok(descriptor)
    }

    /// Removes a provider: its live runs are cancelled and disposed first, then
    /// `subagent/provider-removed` is emitted. Returns whether it was registered.
    pub async fn unregister(&self, name: &str) -> bool {
        let entry = {
            let mut providers = self.write();
            match providers.iter().position(|e| e.descriptor.name == name) {
                Some(i) => providers.remove(i),
                None => return false,
            }
        };
        let runs: Vec<Arc<RunShared>> = {
            let map = lock(&entry.runs);
            map.values().cloned().collect()
        };
        for run in &runs {
            run.cancel(Some(format!("provider `{name}` was removed")));
        }
        futures::future::join_all(runs.into_iter().map(|r| async move {
            SubagentRun(r).dispose().await;
        }))
        .await;
        entry.provider.close().await;
        self.events.emit(&Event::ProviderRemoved {
            name: name.to_string(),
        });
        true
    }

    /// Removes a provider whose runs end by themselves (a cluster provider whose last worker is
    /// gone: each of its runs ends `error`, naming the worker): starts fail at once with
    /// `NO_PROVIDER`, and the returned future emits `subagent/provider-removed` once every live
    /// run has settled. Nothing is cancelled, so that no run ends `aborted` for what was a
    /// fault; the runs stay their callers' to dispose. `None` if it was not registered.
    pub fn retire(&self, name: &str) -> Option<futures::future::BoxFuture<'static, ()>> {
        let entry = {
            let mut providers = self.write();
            let i = providers.iter().position(|e| e.descriptor.name == name)?;
            providers.remove(i)
        };
        let runs: Vec<Arc<RunShared>> = lock(&entry.runs).values().cloned().collect();
        let events = self.events.clone();
        let name = name.to_string();
        Some(Box::pin(async move {
            futures::future::join_all(runs.into_iter().map(|r| async move {
                let _ = SubagentRun(r).result().await;
            }))
            .await;
            entry.provider.close().await;
            events.emit(&Event::ProviderRemoved { name });
        }))
    }

    /// The frozen descriptor of a registered provider.
    pub fn descriptor(&self, name: &str) -> Option<Arc<ProviderDescriptor>> {
        self.read()
            .iter()
            .find(|e| e.descriptor.name == name)
            .map(|e| e.descriptor.clone())
    }

    /// Registered providers, in registration order.
    pub fn list(&self) -> Vec<Arc<ProviderDescriptor>> {
        self.read().iter().map(|e| e.descriptor.clone()).collect()
    }

    /// Starts a run on the named provider.
    ///
    /// Fails with `NO_PROVIDER`, `UNSUPPORTED_CAPABILITY` (checked in the contract's order),
    /// `INVALID_REQUEST` or `DEPTH_EXCEEDED` before any instance exists. An already-aborted
    /// signal yields a run that has settled `aborted` without running anything.
    ///
    /// The provider's work begins on the caller's thread, before this returns, up to its first
    /// wait: a run with nothing to wait for (a scripted provider, a component that answers at
    /// once) has settled by then and never costs a task or a wake-up between threads. Whatever
    /// the provider still has to do after its first wait goes on the run's own task. On a stack
    /// that must not carry a child's work (a guest's fiber) use [`SubagentService::start_on_task`].
    pub fn start(&self, name: &str, request: StartRequest) -> Result<SubagentRun, SubagentError> {
        self.start_inner(name, request, None, None, FirstPoll::Caller)
    }

    /// Starts a run as [`SubagentService::start`] does, with all of the provider's work on the
    /// run's own task: for a caller whose stack is borrowed (a host import running on a guest's
    /// fiber) or who must not be held up at all.
    pub fn start_on_task(
        &self,
        name: &str,
        request: StartRequest,
    ) -> Result<SubagentRun, SubagentError> {
        self.start_inner(name, request, None, None, FirstPoll::Task)
    }

    /// Continues a finished run's child with a new prompt, as a new run on the same provider
    /// (providers declaring `resume`). The new child starts from the old one's completed turns.
    /// Its provider's work begins on the caller's thread, as [`SubagentService::start`]'s does.
    pub fn resume(
        &self,
        run: &SubagentRun,
        prompt: Vec<ContentBlock>,
    ) -> Result<SubagentRun, SubagentError> {
        self.resume_inner(run, prompt, FirstPoll::Caller)
    }

    /// Resumes as [`SubagentService::resume`] does, with all of the provider's work on the
    /// run's own task (see [`SubagentService::start_on_task`]).
    pub fn resume_on_task(
        &self,
        run: &SubagentRun,
        prompt: Vec<ContentBlock>,
    ) -> Result<SubagentRun, SubagentError> {
        self.resume_inner(run, prompt, FirstPoll::Task)
    }

    fn resume_inner(
        &self,
        run: &SubagentRun,
        prompt: Vec<ContentBlock>,
        first: FirstPoll,
    ) -> Result<SubagentRun, SubagentError> {
        let shared = &run.0;
        if !shared.features.resume {
            return Err(SubagentError::UnsupportedFeature {
                provider: run.provider().to_string(),
                feature: "resume".into(),
            });
        }
        if run.try_result().is_none() {
            return Err(SubagentError::InvalidState(format!(
                "run `{}` is still running",
                run.id()
            )));
        }
        let seed = run.resume_state().ok_or_else(|| {
            SubagentError::InvalidState(format!(
                "run `{}` has no finished child to resume",
                run.id()
            ))
        })?;
        let mut request = shared.request.clone();
        request.prompt = prompt;
        self.start_inner(run.provider(), request, Some(seed), None, first)
    }

    /// `background` is the label of a run that belongs to its parent agent.
    fn start_inner(
        &self,
        name: &str,
        request: StartRequest,
        resume_seed: Option<ResumeSeed>,
        background: Option<&str>,
        first: FirstPoll,
    ) -> Result<SubagentRun, SubagentError> {
        let (descriptor, provider, runs, plugin) = {
            let providers = self.read();
            let entry = providers
                .iter()
                .find(|e| e.descriptor.name == name)
                .ok_or_else(|| SubagentError::NoProvider(name.to_string()))?;
            (
                entry.descriptor.clone(),
                entry.provider.clone(),
                entry.runs.clone(),
                entry.plugin.clone(),
            )
        };
        validate::capabilities(&descriptor, &request)?;
        validate::request(&request)?;
        let request = self.narrowed(request, &descriptor);
        let attempted = request.parent.depth.saturating_add(1);
        let tree_max = self.max_tree_depth.load(Ordering::Relaxed);
        if attempted > tree_max {
            return Err(SubagentError::DepthExceeded {
                attempted,
                max: tree_max,
            });
        }
        if let Some(max) = request.max_depth {
            // `validate::request` bounded `max` to 0..=MAX_DEPTH_LIMIT.
            let max = max as u32;
            if attempted > max {
                return Err(SubagentError::DepthExceeded { attempted, max });
            }
        }

        // A recorded tree keys the run by where it was made, and keeps its id: a replay gives
        // it the recorded one, whatever order concurrent starts come in.
        let caller = self.accounts.get(&request.parent.id);
        let taped = caller
            .as_ref()
            .and_then(|c| c.child_tape(crate::trace::current_call(&request.parent.id).as_deref()));
        let fresh = || {
            format!(
                "{}-{}",
                descriptor.name,
                self.next_run.fetch_add(1, Ordering::Relaxed)
            )
        };
        let id = match &taped {
            Some((tape, key)) => tape.run_id(key, fresh),
            None => fresh(),
        };
        let account = self.open_account(&id, &request, caller, taped)?;
        // Its span begins now, under the tool call that asks for it: what its provider sends
        // before the start is announced carries it.
        crate::trace::run_begun(&id, &request.parent.id, &descriptor.name, &plugin);
        let registry = Arc::downgrade(&runs);
        let accounts = Arc::downgrade(&self.accounts);
        let hooks = RunHooks {
            events: self.events.clone(),
            live: self.live.clone(),
            grace: self.cancel_grace,
            on_disposed: Box::new(move |id| {
                if let Some(runs) = registry.upgrade() {
                    lock(&runs).remove(id);
                }
                if let Some(accounts) = accounts.upgrade() {
                    accounts.remove(id);
                }
            }),
            account,
            approvals: self.approvals.clone(),
        };
        let shared = RunShared::new(
            id.clone(),
            &descriptor,
            &request,
            hooks,
            resume_seed,
            background,
        );
        lock(&runs).insert(id, shared.clone());

        if request.signal.as_ref().is_some_and(|s| s.is_cancelled()) {
            shared.settle_pre_aborted();
        } else {
            shared.drive(provider, request, first);
        }
        Ok(SubagentRun(shared))
    }

    /// Opens the account of run `id`: one more run charged to its caller's account (refused if
    /// the caller's budget, or an ancestor's, has no run left), and the run's own account
    /// under it, capped by the request's budget. A caller with no account (a tool call from
    /// outside any agent) gives the run a top-level account.
    fn open_account(
        &self,
        id: &str,
        request: &StartRequest,
        caller: Option<Arc<Account>>,
        taped: Option<(Arc<crate::tape::Tape>, String)>,
    ) -> Result<Arc<Account>, SubagentError> {
        let cap = request.budget.unwrap_or_default();
        let account = match caller {
            Some(caller) => {
                let writes = caller
                    .hold(Spent::run())
                    .map_err(SubagentError::BudgetExhausted)?
                    .settle(Spent::run());
                self.events.store().commit_later(writes);
                let child = caller.child(id, cap, Spent::default());
                if let Some((tape, key)) = taped {
                    child.set_tape(tape, key);
                }
                child
            }
            None => Account::root(id, cap, Spent::default()),
        };
        if let Some(scope) = &request.scope {
            account.set_scope(scope.clone());
        }
        if request.approver == Some(crate::approval::Approver::Parent) {
            account.set_approver(self.approvals.parent_approver(&request.parent.id));
        }
        self.accounts.insert(account.clone());
        Ok(account)
    }

    /// Starts a run that belongs to the agent `owner` rather than to the call that started it:
    /// it is listed, read and stopped through `owner`, and disposed with it
    /// ([`SubagentService::dispose_background_of`]). At most [`MAX_BACKGROUND_RUNS`] of an
    /// owner's runs may be going at once.
    pub fn start_background(
        &self,
        owner: &str,
        name: &str,
        request: StartRequest,
        label: String,
    ) -> Result<SubagentRun, SubagentError> {
        self.start_background_inner(owner, name, request, label, None, false)
    }

    fn start_background_inner(
        &self,
        owner: &str,
        name: &str,
        mut request: StartRequest,
        label: String,
        resume_seed: Option<ResumeSeed>,
        wake: bool,
    ) -> Result<SubagentRun, SubagentError> {
        if self.background.running(owner) >= MAX_BACKGROUND_RUNS {
            return Err(SubagentError::InvalidState(format!(
                "`{owner}` already has {MAX_BACKGROUND_RUNS} background runs going"
            )));
        }
        // Not tied to the call's signal: the owner's disposal ends it.
        request.signal = None;
        // Nobody waits on it: the caller's thread is not held up by it.
        let run = self.start_inner(name, request, resume_seed, Some(&label), FirstPoll::Task)?;
        // A wake (no call of the owner's behind it) must not outlive an owner being disposed:
        // checked under the lock its disposal takes the runs with.
        let evicted = match self.background.add(owner, run.clone(), label, wake) {
            Ok(evicted) => evicted,
            Err(run) => {
                tokio::spawn(async move { run.dispose().await });
                return Err(SubagentError::InvalidState(format!(
                    "`{owner}` is gone: its child is not woken"
                )));
            }
        };
        if !evicted.is_empty() {
            tokio::spawn(async move {
                for run in evicted {
                    run.dispose().await;
                }
            });
        }
        Ok(run)
    }

    /// Whether `owner` has background runs (going or settled).
    pub fn has_background(&self, owner: &str) -> bool {
        self.background.has(owner)
    }

    /// How many background runs of any owner are going.
    pub fn running_background(&self) -> usize {
        self.background.running_total()
    }

    /// `owner`'s background runs, oldest first.
    pub fn background_runs(&self, owner: &str) -> Vec<RunInfo> {
        self.background.list(owner)
    }

    /// One of `owner`'s background runs and its label; `None` for any other id.
    pub fn background_run(&self, owner: &str, id: &str) -> Option<(SubagentRun, String)> {
        self.background.get(owner, id)
    }

    /// `owner`'s background runs that settled since the last call: each is reported once.
    pub fn settled_background(&self, owner: &str) -> Vec<RunInfo> {
        self.background.take_settled(owner)
    }

    /// Lets go of `owner`'s background runs that are going (`seam run --detach`, Ctrl-C): once
    /// they are disposed, their records say interrupted with `why`, and their children can be
    /// continued with `send_to_agent` by a later process. Returns them.
    pub fn detach_background_of(&self, owner: &str, why: &str) -> Vec<RunInfo> {
        let runs = self.background.running_runs(owner);
        for (run, _) in &runs {
            run.0.detach(why.to_string());
        }
        runs.iter().map(|(run, label)| run.info(label)).collect()
    }

    /// Cancels and disposes every background run of `owner`.
    pub async fn dispose_background_of(&self, owner: &str) {
        // Disposed before they are forgotten: a teardown of the same owner that overlaps this
        // one (the drop of a run cut short while its child was being disposed) still finds
        // them, and its dispose waits for theirs.
        let runs = self.background.runs_of(owner);
        futures::future::join_all(runs.iter().map(|r| r.dispose())).await;
        let runs = self.background.remove_owner(owner);
        futures::future::join_all(runs.iter().map(|r| r.dispose())).await;
    }

    /// Runs of `name` not yet disposed.
    pub fn live_runs_of(&self, name: &str) -> usize {
        self.read()
            .iter()
            .find(|e| e.descriptor.name == name)
            .map(|e| {
                let map = lock(&e.runs);
                map.len()
            })
            .unwrap_or(0)
    }
}
