//! The lifecycle event bus: typed events, per-listener payload copies, per-listener containment.
//!
//! Events are observe-only. Each listener receives its own clone of the payload, so nothing a
//! listener does can reach the run or another listener; a listener that returns an error or
//! panics is logged and skipped, and the listeners after it still run.
//!
//! The bus owns the host's [`SessionStore`]: an event, and the session writes of the step that
//! led to it, are committed there in one transaction before any listener sees the event. An
//! event whose commit the store fails (a full disk, a lost server) is delivered to no listener,
//! and neither is any later event of a session whose write failed (see [`EventBus::emit_with`]),
//! so that what listeners saw is what the store holds.
//!
//! A run's events ([`EventBus::emit_made`]) do not wait for their commit on a store that
//! batches (SQLite): they are handed to [`SessionStore::commit_then`], committed with whatever
//! else is queued in one transaction (group commit), and delivered once it is durable, in the
//! order they were emitted. Every other event, commit or read of the store first commits and
//! delivers what is queued before it, so an emitter's events still reach each listener in the
//! order it emitted them, and no listener ever sees an event the store does not hold. A caller
//! awaiting a run's result may then have it before the listeners have `subagent/end`;
//! [`EventBus::flush`] waits for them.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;

use crate::store::{MemoryStore, SessionStore, StoreError, Then, Write};
use crate::sync;
use crate::types::{ContentBlock, ParentRef, PluginKind, StopReason};

/// Declares [`Event`] with each event's wire name written once: the name is both the serde tag
/// and what [`Event::name`] returns.
macro_rules! events {
    ($($(#[$doc:meta])* $name:literal => $variant:ident { $($fields:tt)* },)*) => {
        /// A lifecycle event.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "event")]
        pub enum Event {
            $($(#[$doc])* #[serde(rename = $name)] $variant { $($fields)* },)*
        }

        impl Event {
            /// The event's name, e.g. `subagent/start`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant { .. } => $name,)*
                }
            }
        }
    };
}

events! {
    /// A call (or a use of a grant) waits for a yes: asked of whichever surface is there.
    "approval/requested" => ApprovalRequested {
        /// The request's id (`seam approvals allow ID`).
        id: String,
        /// What it asks.
        subject: crate::approval::Subject,
        /// The agents and runs from the top of the tree down to the one that asked.
        path: Vec<String>,
        /// The session of the agent that asked.
        session: String,
    },
    /// A request was answered (or denied by its timeout, or because nobody could be asked).
    "approval/resolved" => ApprovalResolved {
        /// The request's id.
        id: String,
        /// Whether it was allowed.
        allowed: bool,
        /// Whether the answer holds for the rest of the session.
        always: bool,
        /// Who answered: a surface, `timeout`, `nobody`, `cancelled`.
        by: String,
        /// Why, for a denial.
        reason: Option<String>,
    },
    /// A run's child exists (emitted only after `started` fulfils).
    "subagent/start" => SubagentStart {
        /// Provider name.
        provider: String,
        /// Run id.
        id: String,
        /// The calling agent.
        parent: ParentRef,
    },
    /// A started run settled (always after its start).
    "subagent/end" => SubagentEnd {
        /// Provider name.
        provider: String,
        /// Run id.
        id: String,
        /// The calling agent.
        parent: ParentRef,
        /// Why it ended.
        #[serde(rename = "stop-reason")]
        stop_reason: StopReason,
        /// The child's final output; absent on an infrastructure failure.
        #[serde(rename = "last-assistant-message")]
        last_assistant_message: Option<Vec<ContentBlock>>,
        /// Why the run failed or was stopped, if it was.
        #[serde(skip_serializing_if = "Option::is_none")]
        diagnostic: Option<String>,
        /// The tokens the run's tree used (its child and everything below it), when any model
        /// call of it said.
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<crate::types::Usage>,
        /// What those tokens cost, in dollars, when the models have prices.
        #[serde(rename = "cost-usd", skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// A started run reported progress (always between its start and its end).
    "subagent/progress" => SubagentProgress {
        /// Provider name.
        provider: String,
        /// Run id.
        id: String,
        /// The calling agent.
        parent: ParentRef,
        /// 1 for the run's first update, then one more for each.
        seq: u64,
        /// What the run reported.
        content: Vec<ContentBlock>,
    },
    /// A provider was registered.
    "subagent/provider-added" => ProviderAdded {
        /// Provider name.
        name: String,
    },
    /// A provider was removed.
    "subagent/provider-removed" => ProviderRemoved {
        /// Provider name.
        name: String,
    },
    /// An agent was created and published in the agent registry.
    "agent/created" => AgentCreated {
        /// Agent id.
        id: String,
        /// The parent agent, for a child.
        parent: Option<String>,
        /// Delegation depth.
        depth: u32,
        /// Model string.
        model: String,
    },
    /// An agent began a turn.
    "agent/turn-start" => AgentTurnStart {
        /// Agent id.
        id: String,
        /// Turn number.
        turn: u32,
    },
    /// An agent called a tool.
    "agent/tool-call" => AgentToolCall {
        /// Agent id.
        id: String,
        /// Call id.
        call: String,
        /// Tool name.
        tool: String,
    },
    /// A tool answered an agent.
    "agent/tool-result" => AgentToolResult {
        /// Agent id.
        id: String,
        /// Call id.
        call: String,
        /// Tool name.
        tool: String,
        /// Whether it failed.
        #[serde(rename = "is-error")]
        is_error: bool,
    },
    /// An agent ended a turn.
    "agent/turn-end" => AgentTurnEnd {
        /// Agent id.
        id: String,
        /// Turn number.
        turn: u32,
        /// Why it ended.
        #[serde(rename = "stop-reason")]
        stop_reason: StopReason,
        /// Why it failed or was stopped, if it was.
        #[serde(skip_serializing_if = "Option::is_none")]
        diagnostic: Option<String>,
        /// The tokens the turn's model calls used, when the endpoint said.
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<crate::types::Usage>,
        /// What they cost, in dollars, when the model has prices.
        #[serde(rename = "cost-usd", skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// An agent was disposed.
    "agent/disposed" => AgentDisposed {
        /// Agent id.
        id: String,
    },
    /// A tool was mounted under its tool name.
    "tool/mounted" => ToolMounted {
        /// Tool name.
        name: String,
        /// Plugin id.
        plugin: String,
    },
    /// A tool was unmounted.
    "tool/unmounted" => ToolUnmounted {
        /// Tool name.
        name: String,
        /// Plugin id.
        plugin: String,
    },
    /// A plugin finished loading.
    "plugin/loaded" => PluginLoaded {
        /// Plugin id.
        id: String,
        /// Provider, tool or observer.
        kind: PluginKind,
    },
    /// A plugin failed to load.
    "plugin/failed" => PluginFailed {
        /// Plugin id.
        id: String,
        /// What went wrong.
        error: String,
    },
    /// A plugin was unloaded.
    "plugin/unloaded" => PluginUnloaded {
        /// Plugin id.
        id: String,
    },
}

impl Event {
    /// The session the event tells of, when it is not in the writes it comes with: the calling
    /// agent's, for a run's events.
    fn session(&self) -> Option<&str> {
        match self {
            Self::SubagentStart { parent, .. }
            | Self::SubagentEnd { parent, .. }
            | Self::SubagentProgress { parent, .. } => Some(&parent.session_id),
            _ => None,
        }
    }

    /// The event as one JSON line.
    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The error a listener may return; it is logged and otherwise ignored.
pub type ListenerError = Box<dyn std::error::Error + Send + Sync>;

type Listener = Arc<dyn Fn(Event) -> Result<(), ListenerError> + Send + Sync>;

/// Identifies a subscription, for [`EventBus::unsubscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

/// Delivers events to listeners, in subscription order, each contained, after writing them to
/// its store.
pub struct EventBus {
    listeners: RwLock<Vec<(ListenerId, Listener)>>,
    next_id: AtomicU64,
    store: Arc<dyn SessionStore>,
    /// What the store failed to write: shared with the deliveries of a batching store, which
    /// record a failure (and skip a session that failed) after the emitter has moved on.
    failures: Arc<FailureState>,
}

/// The store's failures, and whether there ever was one.
struct FailureState {
    /// Whether the store ever failed a write: until it does, no emit looks at `failed`.
    any_failed: AtomicBool,
    failed: Mutex<Failures>,
    /// The store's name, for the failures it reports without it.
    store: Arc<str>,
}

/// What the store failed to write.
#[derive(Default)]
struct Failures {
    /// The first failure, for [`EventBus::store_failure`].
    first: Option<StoreError>,
    /// The sessions whose writes the store failed, each with its failure: what this process
    /// holds of them is no longer what the store holds, so nothing more of them is written or
    /// delivered, until an agent opens the session again (reading it back from the store).
    sessions: HashMap<String, StoreError>,
}

impl Default for EventBus {
    /// A bus on an in-memory store.
    fn default() -> Self {
        Self::with_store(Arc::new(MemoryStore::default()))
    }
}

impl EventBus {
    /// A bus that journals to `store`, which the agents and runs on it write their sessions and
    /// records to.
    pub fn with_store(store: Arc<dyn SessionStore>) -> Self {
        Self {
            listeners: RwLock::default(),
            next_id: AtomicU64::new(0),
            failures: Arc::new(FailureState {
                any_failed: AtomicBool::new(false),
                failed: Mutex::default(),
                store: store.name().into(),
            }),
            store,
        }
    }

    /// Waits until every event emitted before has been committed and delivered (a batching
    /// store delivers a run's events after their commit, see the module's doc): for a process
    /// about to exit, or a caller that read a run's result and wants its listeners to have
    /// seen its end. Fails, naming the store, if what was queued could not be written.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.store.flush()
    }

    /// The first write the store failed (a full disk, a lost server), naming the store: events
    /// from then on may not have been delivered (see [`EventBus::emit_with`]). A session's write
    /// refused by a limit is not a failure.
    pub fn store_failure(&self) -> Option<StoreError> {
        if !self.failures.any_failed.load(Ordering::Acquire) {
            return None;
        }
        sync::lock(&self.failures.failed).first.clone()
    }

    /// Commits `writes` that no event tells of (an agent's step that nobody is to hear of yet),
    /// under the rules of [`EventBus::emit_with`]: refused at once if they are of a session whose
    /// write the store failed, and such a failure recorded.
    pub fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        let sessions = sessions_of(None, &writes);
        self.check(&writes, &sessions)?;
        self.store
            .commit(writes)
            .map_err(|e| self.record_failure(e, &sessions))
    }

    /// The store this bus writes to.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// Adds a listener. It is called synchronously on the emitting task, so it should be quick;
    /// to do async work, spawn a task from it.
    pub fn subscribe<F>(&self, listener: F) -> ListenerId
    where
        F: Fn(Event) -> Result<(), ListenerError> + Send + Sync + 'static,
    {
        let id = ListenerId(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.write().push((id, Arc::new(listener)));
        id
    }

    /// Removes a listener; returns whether it was subscribed.
    pub fn unsubscribe(&self, id: ListenerId) -> bool {
        let mut listeners = self.write();
        let before = listeners.len();
        listeners.retain(|(l, _)| *l != id);
        listeners.len() != before
    }

    /// Journals `event`, then delivers it to every listener, each with its own copy.
    pub fn emit(&self, event: &Event) {
        let _ = self.emit_with(event, Vec::new());
    }

    /// Commits `writes` and the journal entry of `event` in one transaction, then delivers the
    /// event. If a limit refuses the writes (a session past its size limit), the event alone is
    /// journaled and delivered all the same (an observer must not miss what happened) and the
    /// error is returned, for the writer to stop what it is doing.
    ///
    /// If the store fails the commit (a full disk, a lost server), the event is delivered to
    /// nobody and the error, naming the store, is returned. The sessions it was about (those it
    /// writes, and the calling agent's for a run's event) are then behind: each later event or
    /// commit about one of them is refused at once with that error, neither written nor
    /// delivered, until an agent opens the session again (continuing it from what the store
    /// holds). Listeners so see what the store holds, never an event the store lost, nor one
    /// that follows a lost one.
    ///
    /// With no listener subscribed and no write a limit could refuse, nothing waits on the
    /// commit: the writes go to [`SessionStore::commit_later`], for the store to batch.
    pub fn emit_with(&self, event: &Event, writes: Vec<Write>) -> Result<(), StoreError> {
        self.emit_inner(|| event, writes)
    }

    /// [`EventBus::emit_with`] for an event that is made only if someone is to see it: a
    /// listener, or the store's journal. With neither, only `writes` are committed, and an
    /// event that costs copies of its ids (a run's, on every run) costs nothing.
    ///
    /// Its emitter does not wait for the commit: with listeners and writes no limit can refuse,
    /// the event is handed to [`SessionStore::commit_then`] and delivered once its commit is
    /// durable, which a batching store makes for many events at once (see the module's doc).
    /// A failure of that commit is then recorded as [`EventBus::emit_with`] records one, but
    /// not returned.
    pub fn emit_made(
        &self,
        make: impl FnOnce() -> Event,
        mut writes: Vec<Write>,
    ) -> Result<(), StoreError> {
        if writes.iter().any(Write::can_be_refused) {
            return self.emit_inner(make, writes);
        }
        let listeners = self.listeners();
        if listeners.is_empty() {
            return self.emit_inner(make, writes);
        }
        let event = make();
        if self.failures.any_failed.load(Ordering::Acquire) {
            self.check(&writes, &sessions_of(Some(&event), &writes))?;
        }
        // The sessions the writes are about (an inbox's; most events have none, and an empty
        // list costs no allocation), for a failure found after the emitter has moved on.
        let written: Vec<String> = writes
            .iter()
            .filter_map(Write::session)
            .map(str::to_string)
            .collect();
        if self.store.journals() {
            writes.push(Write::Bus {
                name: event.name().to_string(),
                body: event.to_json(),
            });
        }
        // Nothing to commit (a store that keeps no journal, and no record of this run): the
        // listeners have it at once, the last of them this very copy.
        if writes.is_empty() {
            deliver_owned(event, listeners);
            return Ok(());
        }
        let failures = self.failures.clone();
        let then: Then = Box::new(move |outcome| {
            let sessions = || {
                let mut all = written.clone();
                all.extend(event.session().map(str::to_string));
                all
            };
            match outcome {
                // A session that failed since the event was emitted hears nothing more.
                Ok(()) if failures.any() && failures.behind(&sessions()) => {}
                Ok(()) => deliver_owned(event, listeners),
                Err(e) => {
                    let e = failures.record(e, &sessions());
                    tracing::error!(event = event.name(), error = %e, "the session store failed a write: the event is not delivered");
                }
            }
        });
        self.store.commit_then(writes, then);
        Ok(())
    }

    /// The listeners subscribed now.
    fn listeners(&self) -> Vec<Listener> {
        sync::read(&self.listeners)
            .iter()
            .map(|(_, f)| f.clone())
            .collect()
    }

    fn emit_inner<E: Borrow<Event>>(
        &self,
        make: impl FnOnce() -> E,
        mut writes: Vec<Write>,
    ) -> Result<(), StoreError> {
        // The listeners are those subscribed when the event is emitted: whoever is to see it
        // is known before the commit is made, so none sees it before it is durable.
        let listeners = self.listeners();
        if listeners.is_empty() && !self.store.journals() {
            return self.commit_unobserved(writes);
        }
        let made = make();
        let event: &Event = made.borrow();
        let sessions = sessions_of(Some(event), &writes);
        self.check(&writes, &sessions)?;
        if self.store.journals() {
            writes.push(Write::Bus {
                name: event.name().to_string(),
                body: event.to_json(),
            });
        }
        if writes.is_empty() {
            deliver(event, listeners);
            return Ok(());
        }
        if listeners.is_empty() && !writes.iter().any(Write::can_be_refused) {
            self.store.commit_later(writes);
            return Ok(());
        }
        // Kept to journal alone should the other writes be refused.
        let entry = (self.store.journals() && writes.len() > 1)
            .then(|| writes.last().cloned())
            .flatten();
        let refused = match self.store.commit(writes) {
            Ok(()) => {
                deliver(event, listeners);
                return Ok(());
            }
            Err(e) if e.is_failure() => {
                let e = self.record_failure(e, &sessions);
                tracing::error!(event = event.name(), error = %e, "the session store failed a write: the event is not delivered");
                return Err(e);
            }
            Err(e) => e,
        };
        tracing::warn!(event = event.name(), error = %refused, "session store refused a write");
        if let Some(entry) = entry {
            if let Err(e) = self.store.commit(vec![entry]) {
                let e = self.record_failure(e, &sessions);
                tracing::error!(event = event.name(), error = %e, "cannot journal an event: it is not delivered");
                return Err(e);
            }
        }
        deliver(event, listeners);
        Err(refused)
    }

    /// Commits the writes of an event nobody sees.
    fn commit_unobserved(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        let sessions = sessions_of(None, &writes);
        self.check(&writes, &sessions)?;
        if !writes.iter().any(Write::can_be_refused) {
            self.store.commit_later(writes);
            return Ok(());
        }
        let outcome = self
            .store
            .commit(writes)
            .map_err(|e| self.record_failure(e, &sessions));
        if let Err(e) = &outcome {
            tracing::warn!(error = %e, "session store refused a write");
        }
        outcome
    }

    /// Refuses writes of a session whose write the store failed, with that failure. A session
    /// opened again by these writes (an agent continuing it from the store) is written again.
    fn check(&self, writes: &[Write], sessions: &[String]) -> Result<(), StoreError> {
        if !self.failures.any_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut failed = sync::lock(&self.failures.failed);
        for w in writes {
            if let Write::OpenSession { id, .. } = w {
                failed.sessions.remove(id);
            }
        }
        match sessions.iter().find_map(|s| failed.sessions.get(s)) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Names the store in `e`; a failure of the store (not a limit's refusal) is recorded, and
    /// the `sessions` it was about are behind from now on.
    fn record_failure(&self, e: StoreError, sessions: &[String]) -> StoreError {
        self.failures.record(e, sessions)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<(ListenerId, Listener)>> {
        // A panicking listener never holds this lock, so poisoning cannot leave bad state.
        sync::write(&self.listeners)
    }
}

impl FailureState {
    /// Names the store in `e`; a failure of the store (not a limit's refusal) is recorded, and
    /// the `sessions` it was about are behind from now on.
    fn record(&self, e: StoreError, sessions: &[String]) -> StoreError {
        let e = e.in_store(&self.store);
        if e.is_failure() {
            let mut failed = sync::lock(&self.failed);
            failed.first.get_or_insert_with(|| e.clone());
            for s in sessions {
                failed
                    .sessions
                    .entry(s.clone())
                    .or_insert_with(|| e.clone());
            }
            self.any_failed.store(true, Ordering::Release);
        }
        e
    }

    /// Whether the store ever failed a write.
    fn any(&self) -> bool {
        self.any_failed.load(Ordering::Acquire)
    }

    /// Whether one of `sessions` is behind (a write of it failed).
    fn behind(&self, sessions: &[String]) -> bool {
        let failed = sync::lock(&self.failed);
        sessions.iter().any(|s| failed.sessions.contains_key(s))
    }
}

/// Delivers `event` to each of `listeners` in turn, each with its own copy, each contained.
fn deliver(event: &Event, listeners: Vec<Listener>) {
    for listener in listeners {
        call(listener, event.clone());
    }
}

/// [`deliver`], handing the last listener `event` itself rather than a copy of it.
fn deliver_owned(event: Event, mut listeners: Vec<Listener>) {
    let Some(last) = listeners.pop() else {
        return;
    };
    deliver(&event, listeners);
    call(last, event);
}

/// Calls one listener with its copy, containing its error or panic.
fn call(listener: Listener, copy: Event) {
    let name = copy.name();
    match catch_unwind(AssertUnwindSafe(|| listener(copy))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(event = name, error = %e, "event listener failed"),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            tracing::warn!(event = name, panic = %msg, "event listener panicked")
        }
    }
}

/// The sessions an event and its writes are about.
fn sessions_of(event: Option<&Event>, writes: &[Write]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let named = writes
        .iter()
        .filter_map(Write::session)
        .chain(event.and_then(Event::session));
    for s in named {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ParentRef;

    /// One event of every kind.
    fn every_event() -> Vec<Event> {
        let parent = ParentRef::top_level("p", "/");
        let s = String::new;
        vec![
            Event::SubagentStart {
                provider: s(),
                id: s(),
                parent: parent.clone(),
            },
            Event::SubagentProgress {
                provider: s(),
                id: s(),
                parent: parent.clone(),
                seq: 1,
                content: Vec::new(),
            },
            Event::SubagentEnd {
                provider: s(),
                id: s(),
                parent,
                stop_reason: StopReason::Completed,
                last_assistant_message: None,
                diagnostic: None,
                usage: None,
                cost_usd: None,
            },
            Event::ProviderAdded { name: s() },
            Event::ProviderRemoved { name: s() },
            Event::AgentCreated {
                id: s(),
                parent: None,
                depth: 0,
                model: s(),
            },
            Event::AgentTurnStart { id: s(), turn: 1 },
            Event::AgentToolCall {
                id: s(),
                call: s(),
                tool: s(),
            },
            Event::AgentToolResult {
                id: s(),
                call: s(),
                tool: s(),
                is_error: false,
            },
            Event::AgentTurnEnd {
                id: s(),
                turn: 1,
                stop_reason: StopReason::Completed,
                diagnostic: None,
                usage: None,
                cost_usd: None,
            },
            Event::AgentDisposed { id: s() },
            Event::ToolMounted {
                name: s(),
                plugin: s(),
            },
            Event::ToolUnmounted {
                name: s(),
                plugin: s(),
            },
            Event::PluginLoaded {
                id: s(),
                kind: PluginKind::Tool,
            },
            Event::PluginFailed {
                id: s(),
                error: s(),
            },
            Event::PluginUnloaded { id: s() },
        ]
    }

    #[test]
    fn an_event_nobody_sees_is_not_made_and_one_someone_sees_is_made_once() {
        let made = std::sync::atomic::AtomicUsize::new(0);
        let start = || {
            made.fetch_add(1, Ordering::SeqCst);
            Event::ProviderAdded { name: "p".into() }
        };
        let bus = EventBus::default();
        bus.emit_made(start, Vec::new()).unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 0, "no listener, no journal");

        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let id = bus.subscribe(move |e| {
            log.lock().unwrap().push(e.name());
            Ok(())
        });
        bus.emit_made(start, Vec::new()).unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(*seen.lock().unwrap(), ["subagent/provider-added"]);
        bus.unsubscribe(id);

        let store = Arc::new(crate::store::MemoryStore::journaling(Default::default()));
        let journaled = EventBus::with_store(store.clone());
        journaled.emit_made(start, Vec::new()).unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 2, "the journal sees it");
        let journal = crate::store::SessionStore::journal(&*store).unwrap();
        assert!(
            journal.iter().any(|e| e.contains("provider-added")),
            "{journal:?}"
        );
    }

    #[test]
    fn a_stop_reason_is_one_string_in_json_whatever_it_is() {
        for (reason, name) in [
            (StopReason::Completed, "completed"),
            (StopReason::MaxTokens, "max-tokens"),
            (StopReason::Budget, "budget"),
            (StopReason::Other("overheated".into()), "overheated"),
        ] {
            let event = Event::AgentTurnEnd {
                id: "a".into(),
                turn: 1,
                stop_reason: reason.clone(),
                diagnostic: None,
                usage: None,
                cost_usd: None,
            };
            let json: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
            assert_eq!(json["stop-reason"], serde_json::json!(name));
            let back: StopReason = serde_json::from_value(json["stop-reason"].clone()).unwrap();
            assert_eq!(back, reason);
        }
    }

    #[test]
    fn the_name_is_the_json_tag_for_every_event() {
        // The `events!` macro writes each name once into both; this checks the macro does.
        let mut seen = std::collections::HashSet::new();
        for event in every_event() {
            let json: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
            assert_eq!(json["event"], event.name(), "{event:?}");
            assert!(seen.insert(event.name()), "{} twice", event.name());
        }
    }
}
