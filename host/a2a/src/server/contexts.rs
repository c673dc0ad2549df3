//! What the serving process holds: the contexts open here (a top-level agent each, keyed by its
//! session) and the turn running in each, whose updates streams and webhooks follow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use seam_agent::agent::Agent;
use seam_core::sync::lock;
use tokio::sync::{broadcast, watch};

use crate::wire::{Message, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};

use super::push::Push;
use super::tasks::{self, RunningView};

/// Updates a running task keeps for a subscriber that reads slowly; one that falls further
/// behind skips what it missed (its stream still ends with the final status).
const UPDATES: usize = 1024;

/// A context open in this process.
pub(crate) struct Context {
    pub agent: Arc<Agent>,
    pub running: Option<Arc<Running>>,
    /// When a turn last started here (milliseconds), to close the least recently used idle
    /// contexts first.
    pub used_ms: u64,
}

/// The contexts open here, by session.
pub(crate) type Contexts = Mutex<HashMap<String, Context>>;

/// A turn running in this process: its task.
pub(crate) struct Running {
    pub context: String,
    pub task: String,
    pub turn: u32,
    pub prompt: String,
    pub agent: Arc<Agent>,
    state: Mutex<State>,
    updates: broadcast::Sender<StreamResponse>,
    /// The task as it ended, once it has.
    pub done: watch::Sender<Option<Task>>,
    push: Push,
}

struct State {
    state: TaskState,
    /// The approval waited for, and its status message.
    approval: Option<(String, Message)>,
    /// The last thing the tree did.
    last: Option<Message>,
    /// The state the webhooks were last told.
    pushed: Option<TaskState>,
    next_message: u64,
}

impl Running {
    pub fn new(
        context: String,
        turn: u32,
        prompt: String,
        agent: Arc<Agent>,
        push: Push,
    ) -> Arc<Self> {
        Arc::new(Self {
            task: tasks::task_id(&context, turn),
            context,
            turn,
            prompt,
            agent,
            state: Mutex::new(State {
                state: TaskState::Working,
                approval: None,
                last: None,
                pushed: None,
                next_message: 1,
            }),
            updates: broadcast::channel(UPDATES).0,
            done: watch::channel(None).0,
            push,
        })
    }

    /// Follows the task's updates from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<StreamResponse> {
        self.updates.subscribe()
    }

    /// The task's state as the overlay on the store's record.
    pub fn view(&self) -> RunningView {
        let state = lock(&self.state);
        RunningView {
            state: state.state.clone(),
            message: state
                .approval
                .as_ref()
                .map(|(_, m)| m.clone())
                .or_else(|| state.last.clone()),
            prompt: self.prompt.clone(),
        }
    }

    /// The approval this task waits for, if any.
    pub fn approval(&self) -> Option<String> {
        lock(&self.state)
            .approval
            .as_ref()
            .map(|(id, _)| id.clone())
    }

    fn message(&self, state: &mut State, text: String) -> Message {
        let id = format!("{}.s{}", self.task, state.next_message);
        state.next_message += 1;
        tasks::agent_message(&self.context, &self.task, id, text)
    }

    /// The tree did something worth saying (a tool call, a delegation, a child's progress).
    pub fn said(&self, text: String) {
        let mut state = lock(&self.state);
        let message = self.message(&mut state, text);
        state.last = Some(message.clone());
        let current = state.state.clone();
        self.publish(&mut state, current, Some(message));
    }

    /// The tree waits for approval `id`: the task needs input.
    pub fn asks(&self, id: &str, text: String) {
        let mut state = lock(&self.state);
        let mut message = self.message(&mut state, text);
        message.metadata = Some(tasks::approval_metadata(id));
        state.approval = Some((id.to_string(), message.clone()));
        state.state = TaskState::InputRequired;
        self.publish(&mut state, TaskState::InputRequired, Some(message));
    }

    /// Approval `id` was answered (here or elsewhere): the task works again.
    pub fn answered(&self, id: &str) {
        let mut state = lock(&self.state);
        if state.approval.as_ref().is_none_or(|(a, _)| a != id) {
            return;
        }
        state.approval = None;
        state.state = TaskState::Working;
        let message = self.message(&mut state, format!("approval {id} answered"));
        self.publish(&mut state, TaskState::Working, Some(message));
    }

    /// The start: webhooks configured with the send hear that the task works.
    pub fn started(&self) {
        let mut state = lock(&self.state);
        self.push_state(&mut state, TaskState::Working, None);
    }

    fn publish(&self, state: &mut State, now: TaskState, message: Option<Message>) {
        let update = self.status_update(now.clone(), message.clone());
        // Nobody listening is not an error: the update is for whoever follows.
        let _ = self.updates.send(update);
        self.push_state(state, now, message);
    }

    fn push_state(&self, state: &mut State, now: TaskState, message: Option<Message>) {
        if state.pushed.as_ref() != Some(&now) {
            state.pushed = Some(now.clone());
            self.push
                .notify(&self.task, self.status_update(now, message));
        }
    }

    /// A status update of this task.
    pub fn status_update(&self, state: TaskState, message: Option<Message>) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task.clone(),
            context_id: self.context.clone(),
            status: TaskStatus {
                state,
                message,
                timestamp: chrono::DateTime::from_timestamp_millis(
                    seam_core::store::now_ms() as i64
                ),
            },
            metadata: None,
        })
    }

    /// The end: the answer (if any) and the final status go to the streams, the task to the
    /// webhooks, and whoever waits for the end gets it.
    pub fn finish(&self, task: Task) {
        if let Some(artifact) = task.artifacts.iter().flatten().next() {
            let _ = self.updates.send(StreamResponse::ArtifactUpdate(
                crate::wire::TaskArtifactUpdateEvent {
                    task_id: self.task.clone(),
                    context_id: self.context.clone(),
                    artifact: artifact.clone(),
                    append: None,
                    last_chunk: Some(true),
                    metadata: None,
                },
            ));
        }
        let _ = self
            .updates
            .send(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: self.task.clone(),
                context_id: self.context.clone(),
                status: task.status.clone(),
                metadata: None,
            }));
        self.push
            .notify(&self.task, StreamResponse::Task(task.clone()));
        self.done.send_replace(Some(task));
    }
}
