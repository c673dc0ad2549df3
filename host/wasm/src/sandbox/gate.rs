//! The limits the host enforces around each run of a provider plugin and each call of a tool
//! plugin: how many may run at once, how long one may take, and how large its result may be.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Limit, LimitHit, Limits, OnConcurrency};
use seam_core::subagent::{Provider, RunContext, RunFailure};
use seam_core::types::{ContentBlock, StartRequest, SubagentResult};

/// Why a run could not get a slot.
pub(crate) enum Denied {
    /// It was cancelled while it waited.
    Cancelled,
    /// The plugin refuses excess runs.
    Refused(LimitHit),
}

/// One plugin's concurrency slots and run budgets. Clones share the slots.
#[derive(Clone)]
pub(crate) struct RunGate {
    plugin: Arc<str>,
    limits: Limits,
    slots: Arc<Semaphore>,
}

impl RunGate {
    pub(crate) fn new(plugin: Arc<str>, limits: &Limits) -> Self {
        let slots = limits.max_concurrent_runs.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            plugin,
            limits: limits.clone(),
            slots: Arc::new(Semaphore::new(slots)),
        }
    }

    fn hit(&self, limit: Limit) -> LimitHit {
        let hit = LimitHit::new(&self.plugin, limit);
        tracing::warn!(plugin = %self.plugin, limit = hit.limit.key(), "{hit}");
        hit
    }

    /// A slot for one run: at once if one is free; otherwise waits until one is (ending early
    /// when `cancelled` completes) or refuses, as the plugin's `on_concurrency` says.
    pub(crate) async fn enter(
        &self,
        cancelled: impl Future<Output = ()>,
    ) -> Result<OwnedSemaphorePermit, Denied> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        if self.limits.on_concurrency == OnConcurrency::Refuse {
            return Err(Denied::Refused(self.hit(Limit::Concurrency {
                max: self.limits.max_concurrent_runs,
            })));
        }
        tokio::select! {
            permit = self.slots.clone().acquire_owned() => {
                // The semaphore is never closed.
                permit.map_err(|_| Denied::Cancelled)
            }
            () = cancelled => Err(Denied::Cancelled),
        }
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
}

impl LimitedProvider {
    pub(crate) fn new(inner: Arc<dyn Provider>, gate: RunGate) -> Self {
        Self { inner, gate }
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
        Box::pin(async move {
            let waiter = ctx.clone();
            // Nothing is instantiated until the run has its slot.
            let _slot = match gate.enter(waiter.cancelled()).await {
                Ok(slot) => slot,
                // The host sees the cancel and settles the run `aborted`.
                Err(Denied::Cancelled) => {
                    return Err(RunFailure("cancelled while waiting for a slot".into()))
                }
                Err(Denied::Refused(hit)) => return Err(RunFailure(hit.to_string())),
            };
            let result = gate
                .timed(inner.run(ctx, request))
                .await
                .map_err(|hit| RunFailure(hit.to_string()))??;
            gate.check_size(result_size(&result))
                .map_err(|hit| RunFailure(hit.to_string()))?;
            Ok(result)
        })
    }
}
