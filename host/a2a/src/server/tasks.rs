//! Tasks are turns: a task's id is `"{session}.{turn}"` (the session of a context's top-level
//! agent, and the turn's place among the session's `turn/start` events, from 1), and everything
//! about a task is read back from the session store, so that `GetTask` and `ListTasks` answer
//! alike after a restart and on every store backend. What only the serving process knows (a
//! turn running here, an approval it waits for, a failed turn's diagnostic) is laid over it.

use std::collections::HashMap;

use seam_agent::session::SessionEvent;
use seam_core::store::{SessionStore, StoreError};
use seam_core::types::{blocks_text, StopReason};
use serde_json::Value;

use crate::wire::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};

/// The id of the task that is turn `turn` of `session`.
pub fn task_id(session: &str, turn: u32) -> String {
    format!("{session}.{turn}")
}

/// The session and turn a task id names (`None` for an id that is not one of ours).
pub fn parse_task_id(id: &str) -> Option<(&str, u32)> {
    let (session, turn) = id.rsplit_once('.')?;
    let turn: u32 = turn.parse().ok()?;
    (!session.is_empty() && turn > 0).then_some((session, turn))
}

/// One turn of a session, as the store has it.
#[derive(Debug, Clone, Default)]
pub struct TurnRecord {
    /// Its place among the session's `turn/start`s, from 1.
    pub turn: u32,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// When it was last written.
    pub updated_ms: u64,
    /// Its messages in order: `true` for the user's (the prompt, steering), `false` for the
    /// agent's (each non-empty reply).
    pub messages: Vec<(bool, String)>,
    /// How it ended, if it did.
    pub end: Option<StopReason>,
}

impl TurnRecord {
    /// The turn's final assistant text: its answer.
    pub fn answer(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|(user, _)| !user)
            .map(|(_, t)| t.as_str())
    }
}

/// The turns of `session`, oldest first.
pub fn turns_of(store: &dyn SessionStore, session: &str) -> Result<Vec<TurnRecord>, StoreError> {
    let mut turns: Vec<TurnRecord> = Vec::new();
    for stored in store.events(session)? {
        // A body this version cannot read is skipped: the rest of the turn still reads.
        let Ok(event) = serde_json::from_str::<SessionEvent>(&stored.body) else {
            continue;
        };
        if let SessionEvent::TurnStart { .. } = event {
            turns.push(TurnRecord {
                turn: turns.len() as u32 + 1,
                started_ms: stored.at_ms,
                ..Default::default()
            });
            continue;
        }
        // What comes before the first turn (a child's seed) belongs to no task.
        let Some(current) = turns.last_mut() else {
            continue;
        };
        current.updated_ms = stored.at_ms;
        match event {
            SessionEvent::UserMessage { content } => {
                current.messages.push((true, blocks_text(&content)));
            }
            SessionEvent::AssistantMessage { text, .. } if !text.is_empty() => {
                current.messages.push((false, text));
            }
            SessionEvent::TurnEnd { reason, .. } => current.end = Some(reason),
            _ => {}
        }
    }
    Ok(turns)
}

/// What the serving process knows of a task beyond the store.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    /// The turn runs in this process: `WORKING`, or `INPUT_REQUIRED` with the approval's
    /// status message.
    pub running: Option<RunningView>,
    /// Why the turn ended, in words, if this process ran it and it failed.
    pub diagnostic: Option<String>,
}

/// A running task's state.
#[derive(Debug, Clone)]
pub struct RunningView {
    /// `WORKING` or `INPUT_REQUIRED`.
    pub state: TaskState,
    /// The status message (the approval asked, the last thing the tree did).
    pub message: Option<Message>,
    /// The prompt, for a task whose turn the store does not hold yet.
    pub prompt: String,
}

/// How a task reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct View {
    /// The most recent messages of the history to include (`None`: all).
    pub history_length: Option<usize>,
    /// Whether to include the answer artifact.
    pub artifacts: bool,
}

/// The state and status text of a turn that ended with `reason`.
pub fn terminal(reason: &StopReason, diagnostic: Option<&str>) -> (TaskState, Option<String>) {
    let said = |default: String| Some(diagnostic.map(str::to_string).unwrap_or(default));
    match reason {
        StopReason::Completed => (TaskState::Completed, None),
        StopReason::Aborted => (
            TaskState::Canceled,
            said("the turn was cancelled".to_string()),
        ),
        StopReason::Refusal => (TaskState::Rejected, said("the model refused".to_string())),
        other => (
            TaskState::Failed,
            said(format!("the turn ended with stop reason `{other}`")),
        ),
    }
}

/// What a turn with no end that no process here runs says.
pub const ORPHANED: &str = "the process serving this task ended before the turn did; send a new \
                            message in its context (contextId) to continue the conversation";

/// An agent message of task `task` in `context`.
pub fn agent_message(context: &str, task: &str, id: String, text: String) -> Message {
    let mut m = Message::new(Role::Agent, vec![Part::text(text)]);
    m.message_id = id;
    m.context_id = Some(context.to_string());
    m.task_id = Some(task.to_string());
    m
}

/// The answer artifact of a task.
pub fn answer_artifact(task: &str, text: &str) -> Artifact {
    Artifact {
        artifact_id: format!("{task}.answer"),
        name: Some("answer".into()),
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
    }
}

/// The status a task shows, from the store's `record` (if it has the turn yet) and the
/// `overlay`.
pub fn status_of(
    context: &str,
    task: &str,
    record: Option<&TurnRecord>,
    overlay: &Overlay,
) -> TaskStatus {
    let status = |state: TaskState, message: Option<Message>, at: Option<u64>| TaskStatus {
        state,
        message,
        timestamp: at.and_then(|ms| chrono::DateTime::from_timestamp_millis(ms as i64)),
    };
    if let Some(running) = &overlay.running {
        return status(
            running.state.clone(),
            running.message.clone(),
            Some(seam_core::store::now_ms()),
        );
    }
    let at = record.map(|r| r.updated_ms.max(r.started_ms));
    let said = |text: String| Some(agent_message(context, task, format!("{task}.status"), text));
    match record.and_then(|r| r.end.as_ref()) {
        Some(reason) => {
            let (state, text) = terminal(reason, overlay.diagnostic.as_deref());
            status(state, text.and_then(said), at)
        }
        None => status(TaskState::Failed, said(ORPHANED.to_string()), at),
    }
}

/// Task `turn` of `context`.
pub fn task_of(
    context: &str,
    record: Option<&TurnRecord>,
    turn: u32,
    overlay: &Overlay,
    view: View,
) -> Task {
    let id = task_id(context, turn);
    let status = status_of(context, &id, record, overlay);
    let mut history: Vec<Message> = match record {
        Some(r) => r
            .messages
            .iter()
            .enumerate()
            .map(|(i, (user, text))| {
                let mut m = agent_message(context, &id, format!("{id}.m{}", i + 1), text.clone());
                if *user {
                    m.role = Role::User;
                }
                m
            })
            .collect(),
        None => overlay
            .running
            .iter()
            .map(|r| {
                let mut m = agent_message(context, &id, format!("{id}.m1"), r.prompt.clone());
                m.role = Role::User;
                m
            })
            .collect(),
    };
    if let Some(n) = view.history_length {
        let skip = history.len().saturating_sub(n);
        history.drain(..skip);
    }
    let artifacts = match (
        view.artifacts,
        &status.state,
        record.and_then(|r| r.answer()),
    ) {
        (true, TaskState::Completed, Some(answer)) => Some(vec![answer_artifact(&id, answer)]),
        _ => None,
    };
    Task {
        id,
        context_id: context.to_string(),
        status,
        artifacts,
        history: (!history.is_empty()).then_some(history),
        metadata: None,
    }
}

/// The approval metadata of an `INPUT_REQUIRED` status message.
pub fn approval_metadata(id: &str) -> HashMap<String, Value> {
    HashMap::from([("approval".to_string(), Value::String(id.to_string()))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_round_trip() {
        assert_eq!(task_id("s-1.x", 3), "s-1.x.3");
        assert_eq!(parse_task_id("s-1.x.3"), Some(("s-1.x", 3)));
        assert_eq!(parse_task_id("nope"), None);
        assert_eq!(parse_task_id("s.0"), None);
        assert_eq!(parse_task_id(".2"), None);
    }

    #[test]
    fn ends_map_onto_states() {
        assert_eq!(
            terminal(&StopReason::Completed, None).0,
            TaskState::Completed
        );
        assert_eq!(terminal(&StopReason::Aborted, None).0, TaskState::Canceled);
        assert_eq!(terminal(&StopReason::Refusal, None).0, TaskState::Rejected);
        let (state, text) = terminal(&StopReason::Budget, Some("out of tokens"));
        assert_eq!(state, TaskState::Failed);
        assert_eq!(text.as_deref(), Some("out of tokens"));
        assert_eq!(terminal(&StopReason::Error, None).0, TaskState::Failed);
    }
}
