//! An observer component: it receives every lifecycle event, in order, on a task of its own, so
//! that neither a slow nor a faulty observer can hold up or change a run.
//!
//! Each observer is bounded twice. Its queue holds at most [`QUEUE_BYTES`] of event JSON: an
//! event that does not fit is dropped, never waited for, and the drops are logged once per burst
//! (see [`Queue`]). And each delivery may take at most [`DELIVERY_LIMIT`] of wall-clock time (or
//! the plugin's `run_timeout_ms`, if shorter): past it the delivery is abandoned, its store (and
//! so its instance) dropped, and the next event is delivered to a fresh instance as always.
//!
//! A run's `subagent/progress` events are coalesced while they wait: the updates that arrive
//! while one of the run's progress events is still queued are merged into it (their content
//! appended, the latest `seq`), so a slow observer sees fewer, fuller progress events, always
//! after the run's `subagent/start` and before its `subagent/end`.

use seam_core::sync::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use seam_core::events::{Event, EventBus, ListenerId};
use wasmtime::component::InstancePre;

use super::error::PluginError;
use super::runtime::Runtime;
use crate::fault::GuestFault;
use crate::sandbox::Sandbox;
use crate::store::{Serving, StoreData, Stores};
use crate::versions::exports::{
    mismatched, per_version, per_version_arms, raw_instance, versioned, wit_result, Answer,
    GuestError,
};
use crate::versions::{for_each_version, rows_with};

/// Bytes of event JSON one observer may have waiting for delivery. An event is charged from
/// when it is queued until the observer's task takes it to deliver; one that does not fit is
/// dropped. A `subagent/end` carries its run's result (up to `max_output_bytes`, 1 MiB by
/// default), so this holds a handful of the largest events and thousands of ordinary ones.
pub const QUEUE_BYTES: usize = 8 * 1024 * 1024;

/// Longest one delivery (a fresh instance and its `on-event` call) may take, in wall-clock time;
/// a plugin whose `run_timeout_ms` is shorter gets that instead.
pub const DELIVERY_LIMIT: Duration = Duration::from_secs(5);

/// How long an unload waits for an observer to take the events already queued for it (the
/// last events of a short command, say) before dropping them.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(2);

struct ObserverParts {
    config: Arc<str>,
    pre: ObserverPre,
    stores: Stores,
}

/// A linked observer component, not yet listening.
pub struct WasmObserver(Arc<ObserverParts>);

/// A listening observer; [`ObserverHandle::detach`] stops it.
pub struct ObserverHandle {
    listener: ListenerId,
    task: tokio::task::JoinHandle<()>,
    queue: Arc<Queue>,
    /// The code each delivery runs: replaced by [`ObserverHandle::swap_code`].
    code: Arc<std::sync::Mutex<Arc<ObserverParts>>>,
}

/// One event waiting for delivery.
enum Queued {
    /// An event, as JSON.
    Event { name: &'static str, json: String },
    /// The progress of this run waiting in [`Pending`], taken (with every update merged into it
    /// meanwhile) when its turn comes.
    Progress { run: String },
}

/// Bytes charged for one progress update beyond its text (its run, parent and framing).
const PROGRESS_OVERHEAD: usize = 256;

/// A run's progress waiting for delivery, and the bytes it is charged.
struct Coalesced {
    event: Event,
    charged: usize,
}

/// Progress waiting for delivery, by run id.
type Pending = Arc<Mutex<HashMap<String, Coalesced>>>;

fn lock_pending(p: &Pending) -> std::sync::MutexGuard<'_, HashMap<String, Coalesced>> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// Queues `event`, a `subagent/progress`, or merges it into its run's progress already waiting.
/// Returns false if it did not fit.
fn queue_progress(
    queue: &Queue,
    pending: &Pending,
    tx: &mpsc::UnboundedSender<Queued>,
    event: Event,
) -> bool {
    let Event::SubagentProgress {
        id, seq, content, ..
    } = &event
    else {
        return false;
    };
    let bytes = content.iter().map(|b| b.as_text().len()).sum::<usize>() + PROGRESS_OVERHEAD;
    if !queue.charge(event.name(), bytes) {
        return false;
    }
    let mut waiting = lock_pending(pending);
    if let Some(c) = waiting.get_mut(id) {
        if let Event::SubagentProgress {
            seq: last,
            content: merged,
            ..
        } = &mut c.event
        {
            merged.extend(content.iter().cloned());
            *last = *seq;
        }
        c.charged += bytes;
        return true;
    }
    let run = id.clone();
    waiting.insert(
        run.clone(),
        Coalesced {
            event,
            charged: bytes,
        },
    );
    drop(waiting);
    if tx.send(Queued::Progress { run: run.clone() }).is_err() {
        // The task is gone (detached): nothing will take it.
        if let Some(c) = lock_pending(pending).remove(&run) {
            queue.release(c.charged);
        }
    }
    true
}

/// The byte account of one observer's queue, and its drop bursts.
///
/// A burst begins with the first event dropped (logged at `warn`, naming the plugin) and ends
/// once the queue has drained to half of [`QUEUE_BYTES`] (logged with how many events the burst
/// dropped), or when the observer is detached; drops in between are only counted.
struct Queue {
    plugin: Arc<str>,
    cap: usize,
    /// Bytes charged for the events in the channel.
    queued: AtomicUsize,
    /// Whether a burst is under way: a hint, read without the lock; the lock decides.
    dropping: AtomicBool,
    /// Events dropped in the current burst.
    burst: Mutex<u64>,
    /// Events dropped since the observer was attached.
    dropped: AtomicU64,
}

impl Queue {
    fn new(plugin: Arc<str>, cap: usize) -> Self {
        Self {
            plugin,
            cap,
            queued: AtomicUsize::new(0),
            dropping: AtomicBool::new(false),
            burst: Mutex::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Charges `len` bytes for an event if they fit; otherwise counts it dropped (and, if it
    /// begins a burst, logs it). Never waits on the observer.
    fn charge(&self, name: &str, len: usize) -> bool {
        let charged = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                queued.checked_add(len).filter(|total| *total <= self.cap)
            });
        let queued = match charged {
            Ok(_) => return true,
            Err(queued) => queued,
        };
        let total = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        let mut burst = lock(&self.burst);
        *burst += 1;
        if *burst == 1 {
            self.dropping.store(true, Ordering::Release);
            tracing::warn!(
                plugin = %self.plugin,
                event = name,
                event_bytes = len,
                queued_bytes = queued,
                cap_bytes = self.cap,
                dropped_total = total,
                "observer queue full: {queued} of {} bytes queued, the {len}-byte event does not \
                 fit; dropping events until it drains",
                self.cap
            );
        }
        false
    }

    /// While a burst is under way and the queue is still over half full, counts the event
    /// dropped at once and returns true, so the listener skips copying it to JSON: a stuck
    /// observer then costs each event a load, not a copy of its payload. (A burst begun by one
    /// event larger than the whole cap, on an emptier queue, does not skip the next events.)
    fn dropped_in_burst(&self) -> bool {
        if !self.dropping.load(Ordering::Acquire)
            || self.queued.load(Ordering::Acquire) <= self.cap / 2
        {
            return false;
        }
        let mut burst = lock(&self.burst);
        if *burst == 0 {
            // The burst ended between the hint and the lock: charge the event normally.
            return false;
        }
        *burst += 1;
        self.dropped.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Releases `len` bytes of an event taken for delivery; ends the burst, if any, once the
    /// queue has drained to half its cap.
    fn release(&self, len: usize) {
        let queued = self.queued.fetch_sub(len, Ordering::AcqRel) - len;
        if self.dropping.load(Ordering::Acquire) && queued <= self.cap / 2 {
            self.end_burst("the queue has drained");
        }
    }

    /// Logs how many events the current burst dropped, if one is under way, and ends it.
    fn end_burst(&self, why: &str) {
        let mut burst = lock(&self.burst);
        if *burst > 0 {
            let total = self.dropped.load(Ordering::Relaxed);
            tracing::warn!(
                plugin = %self.plugin,
                dropped = *burst,
                dropped_total = total,
                "observer queue: {why}; {} events were dropped while it was full",
                *burst
            );
        }
        *burst = 0;
        self.dropping.store(false, Ordering::Release);
    }
}

impl WasmObserver {
    /// An observer over a component linked with the observer world's linker; it is first
    /// entered on the first event.
    pub fn new(
        runtime: &Runtime,
        plugin: Arc<str>,
        version: crate::versions::WitVersion,
        pre: InstancePre<StoreData>,
        config: Arc<str>,
        sandbox: Sandbox,
    ) -> wasmtime::Result<Self> {
        // A tiered host serves a component from the engine that compiled it.
        let engine = pre.engine().clone();
        Ok(Self(Arc::new(ObserverParts {
            config,
            pre: ObserverPre::new(version, pre)?,
            stores: Stores::new(&engine, &runtime.live, plugin, sandbox),
        })))
    }

    /// Subscribes to `events`: each event is queued (a copy, as JSON) if it fits in the queue's
    /// bytes, and delivered in order.
    pub fn attach(self, events: &EventBus) -> ObserverHandle {
        let (tx, mut rx) = mpsc::unbounded_channel::<Queued>();
        let queue = Arc::new(Queue::new(self.0.stores.plugin.clone(), QUEUE_BYTES));
        let pending: Pending = Arc::default();
        let listener = {
            let queue = queue.clone();
            let pending = pending.clone();
            events.subscribe(move |event| {
                if queue.dropped_in_burst() {
                    return Ok(());
                }
                if matches!(event, Event::SubagentProgress { .. }) {
                    queue_progress(&queue, &pending, &tx, event);
                    return Ok(());
                }
                let json = event.to_json();
                let len = json.len();
                if queue.charge(event.name(), len)
                    && tx
                        .send(Queued::Event {
                            name: event.name(),
                            json,
                        })
                        .is_err()
                {
                    // The task is gone (detached): nothing will take it.
                    queue.release(len);
                }
                Ok(())
            })
        };
        let limit = self
            .0
            .stores
            .sandbox
            .limits()
            .run_timeout
            .min(DELIVERY_LIMIT);
        let code = Arc::new(std::sync::Mutex::new(self.0));
        let task = {
            let queue = queue.clone();
            let code = code.clone();
            tokio::spawn(async move {
                while let Some(queued) = rx.recv().await {
                    let inner = seam_core::sync::lock(&code).clone();
                    let (name, json) = match queued {
                        Queued::Event { name, json } => {
                            queue.release(json.len());
                            (name, json)
                        }
                        Queued::Progress { run } => {
                            let Some(c) = lock_pending(&pending).remove(&run) else {
                                continue;
                            };
                            queue.release(c.charged);
                            (c.event.name(), c.event.to_json())
                        }
                    };
                    match tokio::time::timeout(limit, deliver(&inner, &json)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(plugin = %inner.stores.plugin, event = name, "observer failed: {e}")
                        }
                        // The delivery's future, and the store in it, are dropped here.
                        Err(_) => tracing::warn!(
                            plugin = %inner.stores.plugin,
                            event = name,
                            limit_ms = limit.as_millis() as u64,
                            "observer delivery abandoned: it took longer than {} ms; its \
                             instance is dropped and the next event gets a fresh one",
                            limit.as_millis()
                        ),
                    }
                }
            })
        };
        ObserverHandle {
            listener,
            task,
            queue,
            code,
        }
    }
}

async fn deliver(inner: &ObserverParts, event: &str) -> Result<(), PluginError> {
    let mut store = inner.stores.make(Serving::default());
    let instance =
        inner.pre.instantiate(&mut store).await.map_err(|e| {
            PluginError::Instantiate(GuestFault::from_store_error(&e, store.data()))
        })?;
    match instance.on_event(&mut store, &inner.config, event).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(GuestError(message))) => Err(PluginError::Answered {
            call: "on-event",
            message,
        }),
        Err(e) => Err(PluginError::Fault {
            call: "on-event",
            fault: GuestFault::from_store_error(&e, store.data()),
        }),
    }
}

impl ObserverHandle {
    /// Replaces the code the deliveries run, keeping the subscription and the queue: the
    /// delivery going finishes on the old code, the next event is delivered by the new. For
    /// the same component compiled anew (a tiered host's tier-up), so no event is missed or
    /// delivered twice.
    pub fn swap_code(&self, observer: WasmObserver) {
        *seam_core::sync::lock(&self.code) = observer.0;
    }

    /// Unsubscribes, delivers what is already queued within [`DRAIN_LIMIT`], and stops: the
    /// events still queued after that are dropped, and counted in a warning. Returns once the
    /// delivery task, and with it any instance it held, is gone, so that an unloaded observer
    /// leaves nothing alive.
    pub async fn detach(mut self, events: &EventBus) {
        // The listener held the queue's only sender: without it, the task ends once the queue
        // is empty.
        events.unsubscribe(self.listener);
        if tokio::time::timeout(DRAIN_LIMIT, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
            let _ = (&mut self.task).await;
            let left = self.queue.queued.load(Ordering::Relaxed);
            if left > 0 {
                tracing::warn!(
                    plugin = %self.queue.plugin,
                    "observer detached before it took every event: {left} bytes of queued \
                     events were dropped after {} ms",
                    DRAIN_LIMIT.as_millis()
                );
            }
        }
        self.queue.end_burst("the observer is detached");
    }
}

// The observer world's exports, in every version that has it: the versions' bindings are
// dispatched on here, so that the kind is one module.
for_each_version!(
    rows_with,
    Observer,
    versioned,
    ObserverPre,
    ObserverInstance,
    observer_world::ObserverPluginPre,
    ObserverPlugin
);

impl ObserverPre {
    async fn mismatch(&self, store: &mut wasmtime::Store<StoreData>) -> Option<String> {
        use seam_core::PluginKind::Observer;
        let version = self.version();
        per_version!(Observer: self, pre, v => {
            let i = raw_instance(pre.instance_pre(), store).await?;
            mismatched!(store, &i, (Observer, version), "observer",
                "on-event": (&str, &str) -> wit_result!(()),
            )
        })
    }
}

impl ObserverInstance {
    /// `observer.on-event`.
    pub async fn on_event(
        &self,
        store: &mut wasmtime::Store<StoreData>,
        config: &str,
        event: &str,
    ) -> Answer<()> {
        per_version!(Observer: self, i, _v => Ok(i
            .seam_plugin_observer()
            .call_on_event(store, config, event)
            .await?
            .map_err(GuestError)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_in_bytes_and_logs_each_burst_once() {
        let queue = Queue::new("p".into(), 100);
        assert!(queue.charge("a", 60));
        assert!(queue.charge("b", 40));
        assert_eq!(queue.queued.load(Ordering::Relaxed), 100);
        // Full: dropped, whatever the size, and counted in one burst.
        assert!(!queue.charge("c", 1));
        assert!(!queue.charge("d", 50));
        assert_eq!(*queue.burst.lock().unwrap(), 2);
        assert!(queue.dropping.load(Ordering::Relaxed));
        // Draining to 40 (under half the cap) ends the burst.
        queue.release(60);
        assert!(!queue.dropping.load(Ordering::Relaxed));
        assert_eq!(*queue.burst.lock().unwrap(), 0);
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 2);
        // An event larger than the whole cap never fits.
        assert!(!queue.charge("huge", 101));
        assert!(
            !queue.dropped_in_burst(),
            "an empty queue takes the next event"
        );
        assert!(queue.charge("e", 60));
        queue.release(40);
        queue.release(60);
        assert_eq!(queue.queued.load(Ordering::Relaxed), 0);
        assert!(!queue.dropping.load(Ordering::Relaxed));
        assert_eq!(queue.dropped.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_burst_lasts_until_the_queue_is_half_empty() {
        let queue = Queue::new("p".into(), 100);
        assert!(queue.charge("a", 30));
        assert!(queue.charge("b", 30));
        assert!(queue.charge("c", 30));
        assert!(!queue.charge("d", 30));
        queue.release(30);
        // 60 queued: still above half, the burst goes on.
        assert!(queue.dropping.load(Ordering::Relaxed));
        assert!(!queue.charge("e", 50));
        assert_eq!(*queue.burst.lock().unwrap(), 2);
        // Over half full in a burst: the listener drops without copying.
        assert!(queue.dropped_in_burst());
        assert_eq!(*queue.burst.lock().unwrap(), 3);
        queue.release(30);
        assert!(!queue.dropping.load(Ordering::Relaxed));
        assert!(!queue.dropped_in_burst());
        queue.end_burst("detached");
        assert_eq!(*queue.burst.lock().unwrap(), 0);
    }
}
