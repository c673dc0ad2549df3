//! Continuable children: a child keeps its session across activations (at most one live at a
//! time), is listed from the store without resuming anything, is sent messages (queued while
//! it runs and waking it when that activation ends, starting a new activation when it waits,
//! resuming it from the store when no process holds it), is interrupted without losing its
//! inbox, and reports to its parent.
//!
//! A child's durable id is the session its agent keeps (the same across activations and
//! processes); each activation is a run whose record links that session. The store is the
//! source of truth for everything but the live runs of this process.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::store::{RunKey, RunRecord, RunStatus, SessionStore, StoreError, Write};
use crate::sync::lock;
use crate::types::{
    blocks_text, AgentInfo, AgentScope, AgentStatus, ContentBlock, Delivery, ParentRef, ReportMode,
    RequestSnapshot, StopReason,
};

use super::{ResumeSeed, SubagentError, SubagentRun, SubagentService};

/// Most messages one child's inbox holds; one more is refused.
pub const MAX_INBOX: usize = 64;

/// Longest report a child may make, in bytes.
pub const MAX_REPORT_BYTES: usize = 16 * 1024;

/// The seed of a child resumed from the store: the session it continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession(pub String);

/// What a parent is told at the start of a turn (or before a model step), and the writes that
/// record it was told, to be committed with the message.
#[derive(Debug, Default)]
pub struct Notices {
    /// One message each.
    pub texts: Vec<String>,
    /// `Announced` and `ReportDelivered` writes.
    pub writes: Vec<Write>,
}

/// One child, resolved from what a caller named.
struct Target {
    /// Its durable id.
    id: String,
    /// Its latest activation.
    latest: RunRecord,
    /// That activation's run, if this process has it.
    live: Option<SubagentRun>,
}

impl Target {
    fn running_here(&self) -> bool {
        self.live.as_ref().is_some_and(|r| r.try_result().is_none())
    }
}

fn store_error(e: StoreError) -> SubagentError {
    SubagentError::Internal(format!("the session store: {e}"))
}

/// A child's durable id: its session, or for one that keeps none, its run id.
fn durable_id(record: &RunRecord) -> String {
    record
        .child_session
        .clone()
        .unwrap_or_else(|| record.start.run_id.clone())
}

/// Where a child stands, from its latest activation's record and its live run.
fn status_of(latest: &RunRecord, live: Option<&SubagentRun>) -> AgentStatus {
    if live.is_some_and(|r| r.try_result().is_none()) {
        return AgentStatus::Running;
    }
    // Only a child that keeps a session can be continued: one stopped without one failed.
    let continuable = latest.child_session.is_some();
    match latest.status {
        RunStatus::Running => AgentStatus::Running,
        RunStatus::Interrupted if continuable => AgentStatus::Interrupted,
        RunStatus::Interrupted => AgentStatus::Failed,
        RunStatus::Ended if !continuable && latest.stop_reason.as_deref() == Some("aborted") => {
            AgentStatus::Failed
        }
        RunStatus::Ended => match latest.stop_reason.as_deref() {
            Some("completed") if latest.start.background && !latest.announced => AgentStatus::Ready,
            Some("completed") => AgentStatus::Idle,
            Some("aborted") => AgentStatus::Interrupted,
            _ => AgentStatus::Failed,
        },
    }
}

/// The prompts of an inbox, as the store keeps them.
fn read_inbox(body: Option<String>) -> Vec<Vec<ContentBlock>> {
    body.and_then(|b| serde_json::from_str(&b).ok())
        .unwrap_or_default()
}

/// A child's activations grouped by durable id, in the order each first started: the latest
/// record of each.
fn latest_by_child(records: Vec<RunRecord>) -> Vec<RunRecord> {
    let mut order: Vec<String> = Vec::new();
    let mut latest: HashMap<String, RunRecord> = HashMap::new();
    for r in records {
        let id = durable_id(&r);
        if !latest.contains_key(&id) {
            order.push(id.clone());
        }
        latest.insert(id, r);
    }
    order
        .into_iter()
        .filter_map(|id| latest.remove(&id))
        .collect()
}

impl SubagentService {
    fn store(&self) -> &Arc<dyn SessionStore> {
        self.events.store()
    }

    /// The run of this process whose record in the store is `key`, if it is not yet disposed
    /// (run ids are unique in their process only; record keys in the store): what a console
    /// acts on.
    pub fn live_run(&self, key: RunKey) -> Option<SubagentRun> {
        self.read().iter().find_map(|e| {
            lock(&e.runs)
                .values()
                .find(|r| r.record == Some(key))
                .map(|r| SubagentRun(r.clone()))
        })
    }

    /// A run of this process by its id.
    fn run_by_id(&self, id: &str) -> Option<SubagentRun> {
        self.read()
            .iter()
            .find_map(|e| lock(&e.runs).get(id).map(|r| SubagentRun(r.clone())))
    }

    fn info(&self, latest: &RunRecord, live: Option<&SubagentRun>) -> AgentInfo {
        let id = durable_id(latest);
        let status = status_of(latest, live);
        let queued = match &latest.child_session {
            Some(session) => self
                .store()
                .inbox(session)
                .map(read_inbox)
                .unwrap_or_default()
                .len(),
            None => 0,
        };
        let settled = status != AgentStatus::Running;
        AgentInfo {
            id,
            run_id: latest.start.run_id.clone(),
            provider: latest.start.provider.clone(),
            label: latest.start.label.clone(),
            parent_session: latest.start.parent_session.clone(),
            status,
            stop_reason: latest
                .stop_reason
                .as_deref()
                .filter(|_| settled)
                .map(StopReason::from_name),
            diagnostic: latest.diagnostic.clone().filter(|_| settled),
            report: latest.report.clone(),
            queued: u32::try_from(queued).unwrap_or(u32::MAX),
            started_at_ms: latest.started_ms,
            ended_at_ms: latest.ended_ms.filter(|_| settled),
        }
    }

    /// Finds the child `id` names among the caller's: a background run id of the caller's in
    /// this process, a durable id (the child's session), or the id of a run the caller's session
    /// started in an earlier process (the latest by that id).
    fn resolve(&self, caller: &ParentRef, id: &str) -> Result<Target, SubagentError> {
        let store = self.store();
        let mut session = self
            .background_run(&caller.id, id)
            .and_then(|(run, _)| run.child_session_id());
        if session.is_none() && store.session(id).map_err(store_error)?.is_some() {
            session = Some(id.to_string());
        }
        if session.is_none() {
            // A run id of an earlier process: the latest run by that id in the caller's session.
            session = store
                .runs_of(&caller.session_id)
                .map_err(store_error)?
                .into_iter()
                .rfind(|r| r.start.run_id == id)
                .and_then(|r| r.child_session);
        }
        let records = match &session {
            Some(s) => store.runs_of_child(s).map_err(store_error)?,
            None => store
                .runs_of(&caller.session_id)
                .map_err(store_error)?
                .into_iter()
                .filter(|r| r.start.run_id == id && r.child_session.is_none())
                .collect(),
        };
        // Only the caller's own children: another session's are not there for it.
        let latest = records
            .into_iter()
            .rfind(|r| r.start.parent_session == caller.session_id)
            .ok_or_else(|| SubagentError::NoRun(id.to_string()))?;
        let live = self.live_run(latest.key);
        Ok(Target {
            id: durable_id(&latest),
            latest,
            live,
        })
    }

    /// The caller's child agents (or all its descendants), optionally of one status, read from
    /// the store and the live runs: children in the order they first started, each followed
    /// level by level by its own for `descendants`. Nothing is resumed.
    pub fn list_agents(
        &self,
        caller: &ParentRef,
        scope: AgentScope,
        status: Option<AgentStatus>,
    ) -> Result<Vec<AgentInfo>, SubagentError> {
        let mut out = Vec::new();
        let mut frontier = std::collections::VecDeque::from([caller.session_id.clone()]);
        let mut seen = HashSet::from([caller.session_id.clone()]);
        while let Some(session) = frontier.pop_front() {
            let records = self.store().runs_of(&session).map_err(store_error)?;
            for latest in latest_by_child(records) {
                let live = self.live_run(latest.key);
                let info = self.info(&latest, live.as_ref());
                if scope == AgentScope::Descendants {
                    if let Some(child) = &latest.child_session {
                        if seen.insert(child.clone()) {
                            frontier.push_back(child.clone());
                        }
                    }
                }
                if status.is_none_or(|s| s == info.status) {
                    out.push(info);
                }
            }
        }
        Ok(out)
    }

    /// Sends `prompt` to one of the caller's children (`id`: its durable id, or the run id of
    /// one of the caller's background runs). A running child gets it in its inbox, and the
    /// inbox wakes it when that activation ends; a waiting one is woken in a new background
    /// activation with its inbox and `prompt`; one no process holds is resumed from the store.
    /// Waking or resuming needs a provider declaring `resume` (else `UNSUPPORTED_CAPABILITY`)
    /// and a child that keeps a session.
    pub fn send_to_agent(
        self: &Arc<Self>,
        caller: &ParentRef,
        id: &str,
        prompt: Vec<ContentBlock>,
    ) -> Result<Delivery, SubagentError> {
        if prompt.is_empty() || blocks_text(&prompt).trim().is_empty() {
            return Err(SubagentError::InvalidRequest("the message is empty".into()));
        }
        self.deliver(caller, id, prompt, false)
    }

    /// `wake`: no call of the caller's is behind it (the inbox woke the child), so a caller
    /// being disposed gets no new run.
    fn deliver(
        self: &Arc<Self>,
        caller: &ParentRef,
        id: &str,
        prompt: Vec<ContentBlock>,
        wake: bool,
    ) -> Result<Delivery, SubagentError> {
        // Resolved under the lock: a message delivered at the same time cannot have started a
        // second activation meanwhile.
        let _delivering = lock(&self.durable.delivering);
        let target = self.resolve(caller, id)?;
        let store = self.store().clone();
        let running_elsewhere = target.live.is_none() && target.latest.status == RunStatus::Running;
        if running_elsewhere {
            return Err(SubagentError::InvalidState(format!(
                "agent `{}` is running in another process",
                target.id
            )));
        }
        let session = target.latest.child_session.clone();
        if target.running_here() {
            let Some(session) = session else {
                return Err(SubagentError::InvalidState(format!(
                    "agent `{}` keeps no session: a message cannot wait for it",
                    target.id
                )));
            };
            let mut inbox = read_inbox(store.inbox(&session).map_err(store_error)?);
            if inbox.len() >= MAX_INBOX {
                return Err(SubagentError::InvalidState(format!(
                    "agent `{}` already has {MAX_INBOX} messages waiting",
                    target.id
                )));
            }
            inbox.push(prompt);
            store
                .commit(vec![Write::Inbox {
                    session: session.clone(),
                    body: Some(serde_json::to_string(&inbox).unwrap_or_default()),
                }])
                .map_err(store_error)?;
            lock(&self.durable.held).remove(&session);
            if let Some(run) = target.live {
                self.watch(caller.clone(), session, run);
            }
            return Ok(Delivery::Queued);
        }

        let provider = target.latest.start.provider.clone();
        let descriptor = self
            .descriptor(&provider)
            .ok_or_else(|| SubagentError::NoProvider(provider.clone()))?;
        if !descriptor.features.resume {
            return Err(SubagentError::UnsupportedCapability {
                provider,
                capability: "resume".into(),
            });
        }
        let Some(session) = session.filter(|s| store.session(s).ok().flatten().is_some()) else {
            return Err(SubagentError::InvalidState(format!(
                "agent `{}` keeps no session to continue",
                target.id
            )));
        };
        let snapshot = match &target.live {
            Some(run) => RequestSnapshot::of(&run.0.request),
            None => target.latest.start.request.clone(),
        };
        // An activation that ended before its child began a turn (let go of, or interrupted,
        // that early) never delivered its prompt: it goes first, so that nothing sent is lost.
        let began = store
            .events(&session)
            .map_err(store_error)?
            .iter()
            .any(|e| e.kind == "turn/start" && e.at_ms >= target.latest.started_ms);
        let mut blocks: Vec<ContentBlock> = if began {
            Vec::new()
        } else {
            snapshot.prompt.clone()
        };
        blocks.extend(
            read_inbox(store.inbox(&session).map_err(store_error)?)
                .into_iter()
                .flatten(),
        );
        blocks.extend(prompt);
        let request = snapshot.into_request(caller.clone(), blocks);
        let label = target.latest.start.label.clone();
        self.start_background_inner(
            &caller.id,
            &provider,
            request,
            label,
            Some(ResumeSeed::new(StoredSession(session.clone()))),
            wake,
        )?;
        // The activation it replaces is known to the parent now: it is not announced.
        let mut writes = vec![Write::Inbox {
            session: session.clone(),
            body: None,
        }];
        if target.latest.start.background && !target.latest.announced {
            writes.push(Write::Announced {
                run: target.latest.key,
            });
        }
        store.commit(writes).map_err(store_error)?;
        lock(&self.durable.held).remove(&session);
        Ok(if target.live.is_some() {
            Delivery::Woken
        } else {
            Delivery::Resumed
        })
    }

    /// Wakes `session`'s child on its inbox once `run` ends, unless it was interrupted, its
    /// parent is gone, or its inbox is empty by then.
    fn watch(self: &Arc<Self>, caller: ParentRef, session: String, run: SubagentRun) {
        if !lock(&self.durable.watched).insert(session.clone()) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            lock(&self.durable.watched).remove(&session);
            return;
        };
        let service = Arc::downgrade(self);
        rt.spawn(async move {
            let _ = run.result().await;
            let Some(service) = service.upgrade() else {
                return;
            };
            lock(&service.durable.watched).remove(&session);
            if lock(&service.durable.held).contains(&session) || !service.has_background(&caller.id)
            {
                return;
            }
            let waiting = service
                .store()
                .inbox(&session)
                .map(|b| !read_inbox(b).is_empty())
                .unwrap_or(false);
            if !waiting {
                return;
            }
            let woken = service.deliver(&caller, &session, Vec::new(), true);
            if let Err(e) = woken {
                tracing::warn!(agent = %session, error = %e, "cannot wake the agent on its inbox");
            }
        });
    }

    /// Stops the current activation of one of the caller's children, waiting (at most the
    /// cancel grace) for it to end; its session and inbox are kept, and the inbox waits for the
    /// next message. Returns the child as it now stands.
    pub async fn interrupt_agent(
        &self,
        caller: &ParentRef,
        id: &str,
    ) -> Result<AgentInfo, SubagentError> {
        let target = self.resolve(caller, id)?;
        let Some(run) = target.live.clone().filter(|_| target.running_here()) else {
            let info = self.info(&target.latest, target.live.as_ref());
            return Err(SubagentError::InvalidState(
                if info.status == AgentStatus::Running {
                    format!("agent `{}` is running in another process", target.id)
                } else {
                    format!(
                        "agent `{}` is not running (it is {})",
                        target.id,
                        info.status.as_str()
                    )
                },
            ));
        };
        lock(&self.durable.held).insert(target.id.clone());
        run.cancel(Some("interrupted by its parent".into()));
        let _ = tokio::time::timeout(self.cancel_grace, run.result()).await;
        let latest = self.resolve(caller, &target.id)?;
        Ok(self.info(&latest.latest, latest.live.as_ref()))
    }

    /// A child's report to its parent (`caller` is the child: the agent of a run). It is kept
    /// with the run (the parent's `list_agents` shows the latest); `next-step` also gives it to
    /// the parent before its next model step.
    pub fn report(
        &self,
        caller: &ParentRef,
        mode: ReportMode,
        content: Vec<ContentBlock>,
    ) -> Result<(), SubagentError> {
        let text = blocks_text(&content);
        if text.trim().is_empty() {
            return Err(SubagentError::InvalidRequest("the report is empty".into()));
        }
        if text.len() > MAX_REPORT_BYTES {
            return Err(SubagentError::InvalidRequest(format!(
                "the report is {} bytes, more than {MAX_REPORT_BYTES}",
                text.len()
            )));
        }
        let run = self.run_by_id(&caller.id).ok_or_else(|| {
            SubagentError::InvalidState(format!(
                "`{}` is not the child of a run: only a child agent reports",
                caller.id
            ))
        })?;
        let Some(key) = run.record() else {
            return Err(SubagentError::Internal(
                "the run has no record in the session store".into(),
            ));
        };
        let next_step = mode == ReportMode::NextStep;
        self.store()
            .commit(vec![Write::Report {
                run: key,
                text,
                next_step,
            }])
            .map_err(store_error)?;
        if next_step {
            lock(&self.durable.reports_for).insert(run.parent().session_id.clone());
            self.durable.reported.notify_waiters();
        }
        Ok(())
    }

    /// Resolves at the next next-step report any child makes (create it before looking, so
    /// that a report in between is not missed).
    pub fn next_report(&self) -> tokio::sync::futures::Notified<'_> {
        self.durable.reported.notified()
    }

    /// What `parent` is told before a model step: its children's next-step reports not yet
    /// delivered. `all` reads the store whatever this process saw (at a turn's start, for
    /// reports a previous process left).
    pub fn pending_reports(&self, parent: &ParentRef, all: bool) -> Notices {
        let mut notices = Notices::default();
        let flagged = lock(&self.durable.reports_for).remove(&parent.session_id);
        if !flagged && !all {
            return notices;
        }
        let Ok(records) = self.store().runs_of(&parent.session_id) else {
            return notices;
        };
        for r in records.into_iter().filter(|r| r.report_pending) {
            let label = if r.start.label.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.start.label)
            };
            notices.texts.push(format!(
                "[report from agent `{}`{label}: {}]",
                durable_id(&r),
                r.report.as_deref().unwrap_or_default()
            ));
            notices.writes.push(Write::ReportDelivered { run: r.key });
        }
        notices
    }

    /// What `parent` is told at the start of a turn: each of its background children whose
    /// activation ended and was not announced yet (in this process or, from the store, in one
    /// that is gone), once; and its pending reports.
    pub fn announcements(&self, parent: &ParentRef) -> Notices {
        let mut notices = self.pending_reports(parent, true);
        let records = self.store().runs_of(&parent.session_id).unwrap_or_default();
        let in_store: HashSet<RunKey> = records.iter().map(|r| r.key).collect();
        // Runs the store does not hold (it refused them, or dropped them to stay bounded).
        for (run, label) in self.background.take_settled_runs(&parent.id) {
            if run.record().is_some_and(|k| in_store.contains(&k)) {
                continue;
            }
            let info = run.info(&label);
            let reason = info
                .stop_reason
                .as_ref()
                .map_or("unknown", StopReason::as_str);
            notices.texts.push(format!(
                "[background run `{}` ({}) on `{}` has settled: {reason}]",
                info.id, info.label, info.provider
            ));
        }
        let latest: HashSet<RunKey> = latest_by_child(records.clone())
            .iter()
            .map(|r| r.key)
            .collect();
        for r in records {
            if !r.start.background || r.announced || r.status == RunStatus::Running {
                continue;
            }
            if self
                .live_run(r.key)
                .is_some_and(|run| run.try_result().is_none())
            {
                continue;
            }
            notices.writes.push(Write::Announced { run: r.key });
            // A later activation of the same child supersedes it.
            if !latest.contains(&r.key) {
                continue;
            }
            let label = &r.start.label;
            notices.texts.push(match r.status {
                RunStatus::Interrupted => format!(
                    "[background run `{}` ({label}) on `{}` was interrupted: {}; \
                     send_message to `{}` continues it]",
                    r.start.run_id,
                    r.start.provider,
                    r.diagnostic.as_deref().unwrap_or("no diagnostic"),
                    durable_id(&r)
                ),
                _ => format!(
                    "[background run `{}` ({label}) on `{}` has settled: {}]",
                    r.start.run_id,
                    r.start.provider,
                    r.stop_reason.as_deref().unwrap_or("unknown")
                ),
            });
        }
        notices
    }
}
