//! The limits the host enforces around each run of a provider plugin and each call of a tool
//! plugin: how many may run at once, how long one may take, and how large its result may be.

use seam_core::sync::lock;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::{Limit, LimitHit, Limits, OnConcurrency};
use seam_core::types::{ContentBlock, StartRequest, SubagentResult};

/// Why a run could not get a slot.
pub enum Denied {
    /// It was cancelled while it waited.
    Cancelled,
    /// The plugin refuses excess runs.
    Refused(LimitHit),
    /// Every slot is held by a run that waits, through its descendants, on a run queued for
    /// this gate: waiting would never end.
    Deadlock(String),
}

/// Who holds a gate's slots and who waits for one.
#[derive(Default)]
struct GateState {
    /// Holders by key (a run by its id, which is also its child agent's id; a tool call by its
    /// caller's agent id), with how many slots each holds.
    holders: HashMap<String, usize>,
    /// Waiting entries by arrival, each with the keys that wait for it to finish (its caller's
    /// ancestors).
    waiters: BTreeMap<u64, Vec<String>>,
    next_waiter: u64,
}

/// A concurrency slot; its key is listed as a holder until it is dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    gate: RunGate,
    key: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut state = lock(&self.gate.state);
            if let Some(n) = state.holders.get_mut(&self.key) {
                *n -= 1;
                if *n == 0 {
                    state.holders.remove(&self.key);
                }
            }
        }
        self.gate.changed.notify_waiters();
    }
}

/// A waiting entry's place in the queue; leaving it (with a slot, cancelled or refused) tells
/// the others, since the newest waiter may change.
struct Waiting<'a> {
    gate: &'a RunGate,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.gate.state).waiters.remove(&self.id);
        self.gate.changed.notify_waiters();
    }
}

/// One plugin's concurrency slots and run budgets. Clones share the slots.
#[derive(Clone)]
pub struct RunGate {
    plugin: Arc<str>,
    limits: Limits,
    slots: Arc<Semaphore>,
    state: Arc<Mutex<GateState>>,
    /// Notified whenever a holder or a waiter leaves or a waiter arrives: a waiter then checks
    /// again whether the gate is deadlocked.
    changed: Arc<Notify>,
}

impl RunGate {
    pub fn new(plugin: Arc<str>, limits: &Limits) -> Self {
        let slots = limits.max_concurrent_runs.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            plugin,
            limits: limits.clone(),
            slots: Arc::new(Semaphore::new(slots)),
            state: Arc::default(),
            changed: Arc::new(Notify::new()),
        }
    }

    fn hit(&self, limit: Limit) -> LimitHit {
        LimitHit::logged(&self.plugin, limit)
    }

    /// A slot held under `key`: at once if one is free; otherwise waits until one is (ending
    /// early when `cancelled` completes) or refuses, as the plugin's `on_concurrency` says.
    ///
    /// `waiting_on_me` lists the holder keys that wait for this entry to finish (the caller's
    /// ancestors). If every slot is held by a key that some waiting entry's ancestors include,
    /// no holder can finish before a waiter gets a slot: the gate is deadlocked, whether by a
    /// chain (a run waiting on its own ancestors) or by a fan-out (parents holding every slot,
    /// each waiting on children queued behind them). Then the newest waiter is refused at
    /// once; the others check again as things change.
    pub async fn enter(
        &self,
        key: &str,
        waiting_on_me: impl Fn() -> Vec<String>,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Slot, Denied> {
        let slot = |permit| {
            *lock(&self.state)
                .holders
                .entry(key.to_string())
                .or_default() += 1;
            Slot {
                _permit: permit,
                gate: self.clone(),
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
        let waiting = {
            let mut state = lock(&self.state);
            let id = state.next_waiter;
            state.next_waiter += 1;
            state.waiters.insert(id, waiting_on_me());
            Waiting { gate: self, id }
        };
        tokio::pin!(cancelled);
        loop {
            // Registered before the check, so that a change between the two still wakes us.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(message) = self.deadlock(key, waiting.id) {
                tracing::warn!(plugin = %self.plugin, key, "{message}");
                return Err(Denied::Deadlock(message));
            }
            tokio::select! {
                permit = self.slots.clone().acquire_owned() => {
                    drop(waiting);
                    // The semaphore is never closed.
                    return permit.map(slot).map_err(|_| Denied::Cancelled);
                }
                () = &mut cancelled => return Err(Denied::Cancelled),
                () = &mut changed => {}
            }
        }
    }

    /// Why waiting would never end, when `waiter` is the newest of a deadlocked gate's.
    fn deadlock(&self, key: &str, waiter: u64) -> Option<String> {
        let state = lock(&self.state);
        let held: usize = state.holders.values().sum();
        if held < self.limits.max_concurrent_runs
            || state.waiters.keys().next_back() != Some(&waiter)
        {
            return None;
        }
        let blocked = |holder: &String| state.waiters.values().any(|w| w.contains(holder));
        if !state.holders.keys().all(blocked) {
            return None;
        }
        let chain = state
            .waiters
            .get(&waiter)
            .is_some_and(|mine| state.holders.keys().all(|h| mine.contains(h)));
        Some(if chain {
            format!(
                "plugin `{}`: all {} slots (`max_concurrent_runs`) are held by ancestors of the \
                 caller of `{key}`, which wait for it: it would wait forever",
                self.plugin, self.limits.max_concurrent_runs,
            )
        } else {
            format!(
                "plugin `{}`: all {} slots (`max_concurrent_runs`) are held by runs that each \
                 wait on a run queued for a slot ({} queued, `{key}` the newest): none can \
                 finish, so `{key}` would wait forever; raise `max_concurrent_runs` or delegate \
                 to fewer children at once",
                self.plugin,
                self.limits.max_concurrent_runs,
                state.waiters.len(),
            )
        })
    }

    /// Runs `work` within the wall-clock budget; past it, `work` is dropped (and with it the
    /// store it owns).
    pub async fn timed<F: Future>(&self, work: F) -> Result<F::Output, LimitHit> {
        let budget = self.limits.run_timeout;
        tokio::time::timeout(budget, work)
            .await
            .map_err(|_| self.hit(Limit::RunTimeout { budget }))
    }

    /// Refuses a result or request of `size` bytes if it is over the cap.
    pub fn check_size(&self, size: usize) -> Result<(), LimitHit> {
        let max = self.limits.max_output_bytes;
        if size > max {
            return Err(self.hit(Limit::Output { max, size }));
        }
        Ok(())
    }
}

/// Bytes of text in content blocks.
pub fn blocks_size(blocks: &[ContentBlock]) -> usize {
    blocks.iter().map(|b| b.as_text().len()).sum()
}

/// Bytes a result carries across the boundary: its output and its structured answer.
pub fn result_size(r: &SubagentResult) -> usize {
    let structured = r.structured.as_ref().map_or(0, |v| v.to_string().len());
    blocks_size(&r.output).saturating_add(structured)
}

/// Bytes a request carries from a tool guest into the host.
pub fn request_size(r: &StartRequest) -> usize {
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
