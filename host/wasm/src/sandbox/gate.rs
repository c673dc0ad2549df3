//! The limits the host enforces around each run of a provider plugin and each call of a tool
//! plugin: how many may run at once, how long one may take, and how large its result may be.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Limit, LimitHit, Limits, OnConcurrency};
use seam_core::agent::AgentRegistry;
use seam_core::subagent::{Provider, RunContext, RunFailure};
use seam_core::types::{ContentBlock, StartRequest, SubagentResult};

/// Why a run could not get a slot.
pub(crate) enum Denied {
    /// It was cancelled while it waited.
    Cancelled,
    /// The plugin refuses excess runs.
    Refused(LimitHit),
    /// Every slot is held by a run the caller descends from: waiting would never end.
    Deadlock(String),
}

/// How often a waiting run checks whether it has become a deadlock (a slot holder that was not
/// its ancestor ended, and only ancestors are left).
const DEADLOCK_RECHECK: Duration = Duration::from_millis(50);

/// The holders of a gate's slots, by key, with how many slots each holds.
type Holders = Arc<Mutex<HashMap<String, usize>>>;

/// A concurrency slot; its key is listed as a holder until it is dropped.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    holders: Holders,
    key: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut holders = self.holders.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = holders.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                holders.remove(&self.key);
            }
        }
    }
}

/// One plugin's concurrency slots and run budgets. Clones share the slots.
#[derive(Clone)]
pub(crate) struct RunGate {
    plugin: Arc<str>,
    limits: Limits,
    slots: Arc<Semaphore>,
    /// Who holds the slots: a run by its id (which is also its child agent's id), a tool call
    /// by its caller's agent id.
    holders: Holders,
}

impl RunGate {
    pub(crate) fn new(plugin: Arc<str>, limits: &Limits) -> Self {
        let slots = limits.max_concurrent_runs.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            plugin,
            limits: limits.clone(),
            slots: Arc::new(Semaphore::new(slots)),
            holders: Arc::default(),
        }
    }

    fn hit(&self, limit: Limit) -> LimitHit {
        let hit = LimitHit::new(&self.plugin, limit);
        tracing::warn!(plugin = %self.plugin, limit = hit.limit.key(), "{hit}");
        hit
    }

    /// A slot held under `key`: at once if one is free; otherwise waits until one is (ending
    /// early when `cancelled` completes) or refuses, as the plugin's `on_concurrency` says.
    ///
    /// `waiting_on_me` lists the holder keys that wait for this entry to finish (the caller's
    /// ancestors): if every slot is held by one of them, waiting would never end, so the entry
    /// is refused at once. It is asked again while the entry waits, since a holder that was not
    /// an ancestor may leave.
    pub(crate) async fn enter(
        &self,
        key: &str,
        waiting_on_me: impl Fn() -> Vec<String>,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Slot, Denied> {
        let slot = |permit| {
            *self
                .holders
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key.to_string())
                .or_default() += 1;
            Slot {
                _permit: permit,
                holders: self.holders.clone(),
                key: key.to_string(),
            }
        };
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(slot(permit));
        }
        if self.limits.on_concurrency == OnConcurrency::Refuse {
            return Err(Denied::Refused(self.hit(Limit::Concurrency {
                max: self.limits.max_concurrent_runs,
            })));
        }
        tokio::pin!(cancelled);
        loop {
            if let Some(message) = self.deadlock(key, &waiting_on_me()) {
                tracing::warn!(plugin = %self.plugin, key, "{message}");
                return Err(Denied::Deadlock(message));
            }
            tokio::select! {
                permit = self.slots.clone().acquire_owned() => {
                    // The semaphore is never closed.
                    return permit.map(slot).map_err(|_| Denied::Cancelled);
                }
                () = &mut cancelled => return Err(Denied::Cancelled),
                () = tokio::time::sleep(DEADLOCK_RECHECK) => {}
            }
        }
    }

    /// Why waiting would never end, if every slot is held by one of `waiting_on_me`.
    fn deadlock(&self, key: &str, waiting_on_me: &[String]) -> Option<String> {
        let holders = self.holders.lock().unwrap_or_else(|p| p.into_inner());
        let held: usize = holders.values().sum();
        let full = held >= self.limits.max_concurrent_runs;
        if !full || !holders.keys().all(|h| waiting_on_me.contains(h)) {
            return None;
        }
        Some(format!(
            "plugin `{}`: all {} slots (`max_concurrent_runs`) are held by ancestors of the \
             caller of `{key}`, which wait for it: it would wait forever",
            self.plugin, self.limits.max_concurrent_runs,
        ))
    }

    /// Runs `work` within the wall-clock budget; past it, `work` is dropped (and with it the
    /// store it owns).
    pub(crate) async fn timed<F: Future>(&self, work: F) -> Result<F::Output, LimitHit> {
        let budget = self.limits.run_timeout;
        tokio::time::timeout(budget, work)
            .await
            .map_err(|_| self.hit(Limit::RunTimeout { budget }))
    }

    /// Refuses a result or request of `size` bytes if it is over the cap.
    pub(crate) fn check_size(&self, size: usize) -> Result<(), LimitHit> {
        let max = self.limits.max_output_bytes;
        if size > max {
            return Err(self.hit(Limit::Output { max, size }));
        }
        Ok(())
    }
}

/// Bytes of text in content blocks.
pub(crate) fn blocks_size(blocks: &[ContentBlock]) -> usize {
    blocks.iter().map(|b| b.as_text().len()).sum()
}

/// Bytes a result carries across the boundary: its output and its structured answer.
pub(crate) fn result_size(r: &SubagentResult) -> usize {
    let structured = r.structured.as_ref().map_or(0, |v| v.to_string().len());
    blocks_size(&r.output).saturating_add(structured)
}

/// Bytes a request carries from a tool guest into the host.
pub(crate) fn request_size(r: &StartRequest) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let names = |l: &Option<Vec<String>>| l.iter().flatten().map(String::len).sum::<usize>();
    let mut size = blocks_size(&r.prompt) + opt(&r.persona);
    if let Some(o) = &r.agent_options {
        size += opt(&o.model) + opt(&o.system_prompt);
    }
    if let Some(f) = &r.tool_filter {
        size += names(&f.allow) + names(&f.deny);
    }
    if let Some(schema) = &r.output_schema {
        size += schema.to_string().len();
    }
    size
}

/// A provider plugin behind its run limits: each run first takes a concurrency slot, then runs
/// within the wall-clock budget, and its result must fit the output cap.
pub(crate) struct LimitedProvider {
    inner: Arc<dyn Provider>,
    gate: RunGate,
    /// For the lineage of a waiting run's caller; weak, as the registry reaches providers.
    agents: Weak<AgentRegistry>,
}

impl LimitedProvider {
    pub(crate) fn new(
        inner: Arc<dyn Provider>,
        gate: RunGate,
        agents: Weak<AgentRegistry>,
    ) -> Self {
        Self {
            inner,
            gate,
            agents,
        }
    }
}

impl From<LimitHit> for RunFailure {
    fn from(hit: LimitHit) -> Self {
        RunFailure::LimitHit {
            limit: hit.limit.key().to_string(),
            detail: hit.limit.to_string(),
            plugin: hit.plugin,
        }
    }
}

impl Provider for LimitedProvider {
    fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentResult, RunFailure>> {
        let inner = self.inner.clone();
        let gate = self.gate.clone();
        let agents = self.agents.clone();
        Box::pin(async move {
            let waiter = ctx.clone();
            let caller = ctx.parent().id.clone();
            let lineage = || match agents.upgrade() {
                Some(agents) => agents.lineage(&caller),
                None => vec![caller.clone()],
            };
            // Nothing is instantiated until the run has its slot.
            let _slot = match gate.enter(ctx.id(), lineage, waiter.cancelled()).await {
                Ok(slot) => slot,
                // The host sees the cancel and settles the run `aborted`.
                Err(Denied::Cancelled) => return Err(RunFailure::CancelledWaiting),
                Err(Denied::Refused(hit)) => return Err(hit.into()),
                Err(Denied::Deadlock(message)) => return Err(RunFailure::Deadlock(message)),
            };
            let result = gate.timed(inner.run(ctx, request)).await??;
            gate.check_size(result_size(&result))?;
            Ok(result)
        })
    }
}
