//! The JSON-RPC methods of A2A 1.0, over the served contexts and the session store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use a2a::{
    A2AError, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    JsonRpcId, ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
};
use seam_agent::agent::{Agent, TurnOutcome};
use seam_core::types::{blocks_text, ContentBlock, StopReason};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::wire::{
    methods, CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, Message,
    PartContent, SendMessageRequest, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};

use super::approval::answer_of;
use seam_core::sync::lock;

use super::contexts::{Context, Contexts, Running};
use super::host::A2aHost;
use super::push::Push;
use super::stream::{self, SseBody};
use super::tasks::{self, Overlay, TurnRecord, View};

/// `ListTasks`' page size when none is asked, and the largest.
const PAGE_SIZE: usize = 50;
const MAX_PAGE_SIZE: usize = 100;

/// Idle contexts whose agents stay open; past it the least recently used is closed (its
/// session stays in the store, and a later message reopens it). Each open agent counts
/// against `[agent] max_live_agents`.
const IDLE_CONTEXTS: usize = 64;

/// Diagnostics of failed turns kept for `GetTask` (the store keeps only the stop reason).
const DIAGNOSTICS: usize = 1024;

/// A method's answer: one JSON-RPC response, or a stream of them.
pub(crate) enum Answer {
    Json(Result<Value, A2AError>),
    Stream(SseBody),
}

/// Everything the methods share.
pub(crate) struct Served {
    pub host: A2aHost,
    pub contexts: Arc<Contexts>,
    pub push: Push,
    pub cwd: String,
    diagnostics: Mutex<HashMap<String, String>>,
    turns: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

fn params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, A2AError> {
    serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|e| A2AError::invalid_params(format!("invalid params: {e}")))
}

fn store_error(e: impl std::fmt::Display) -> A2AError {
    A2AError::internal(format!("the session store: {e}"))
}

/// The prompt a message gives: its text parts, and its data parts as JSON.
fn prompt_of(message: &Message) -> Result<Vec<ContentBlock>, A2AError> {
    let blocks: Vec<ContentBlock> = message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            PartContent::Text(t) if !t.trim().is_empty() => Some(ContentBlock::text(t.clone())),
            PartContent::Data(d) => Some(ContentBlock::text(d.to_string())),
            _ => None,
        })
        .collect();
    if blocks.is_empty() {
        return Err(A2AError::invalid_params(
            "the message has no text or data part: seam takes text (and data parts as JSON)",
        ));
    }
    Ok(blocks)
}

fn history_length(n: Option<i32>) -> Option<usize> {
    n.and_then(|n| usize::try_from(n).ok())
}

impl Served {
    pub fn new(host: A2aHost, contexts: Arc<Contexts>, push: Push, cwd: String) -> Self {
        Self {
            host,
            contexts,
            push,
            cwd,
            diagnostics: Mutex::default(),
            turns: Mutex::default(),
        }
    }

    /// Answers one request.
    pub async fn call(self: &Arc<Self>, id: &JsonRpcId, method: &str, p: Option<Value>) -> Answer {
        let json = |r: Result<Value, A2AError>| Answer::Json(r);
        let to_value =
            |r: Result<Task, A2AError>| r.map(|t| serde_json::to_value(t).unwrap_or(Value::Null));
        match method {
            methods::SEND_MESSAGE => match params(p) {
                Ok(request) => json(self.send(request).await),
                Err(e) => json(Err(e)),
            },
            methods::SEND_STREAMING_MESSAGE => match params(p) {
                Ok(request) => match self.send_streaming(id, request) {
                    Ok(body) => Answer::Stream(body),
                    Err(e) => json(Err(e)),
                },
                Err(e) => json(Err(e)),
            },
            methods::GET_TASK => json(to_value(params(p).and_then(|r: GetTaskRequest| {
                self.task(
                    &r.id,
                    View {
                        history_length: history_length(r.history_length),
                        artifacts: true,
                    },
                )
            }))),
            methods::LIST_TASKS => json(
                params(p)
                    .and_then(|r| self.list(r))
                    .map(|l| serde_json::to_value(l).unwrap_or(Value::Null)),
            ),
            methods::CANCEL_TASK => match params::<CancelTaskRequest>(p) {
                Ok(r) => json(to_value(self.cancel(&r.id).await)),
                Err(e) => json(Err(e)),
            },
            methods::SUBSCRIBE_TO_TASK => {
                match params::<SubscribeToTaskRequest>(p).and_then(|r| self.subscribe(id, &r.id)) {
                    Ok(body) => Answer::Stream(body),
                    Err(e) => json(Err(e)),
                }
            }
            methods::CREATE_PUSH_CONFIG => json(
                params::<TaskPushNotificationConfig>(p)
                    .and_then(|c| {
                        self.task(&c.task_id, View::default())?;
                        let task = c.task_id.clone();
                        self.push.add(&task, c)
                    })
                    .map(|c| serde_json::to_value(c).unwrap_or(Value::Null)),
            ),
            methods::GET_PUSH_CONFIG => json(
                params::<GetTaskPushNotificationConfigRequest>(p)
                    .and_then(|r| {
                        self.push.get(&r.task_id, &r.id).ok_or_else(|| {
                            A2AError::invalid_params(format!(
                                "task `{}` has no push notification config `{}`",
                                r.task_id, r.id
                            ))
                        })
                    })
                    .map(|c| serde_json::to_value(c).unwrap_or(Value::Null)),
            ),
            methods::LIST_PUSH_CONFIGS => json(
                params::<ListTaskPushNotificationConfigsRequest>(p)
                    .and_then(|r| {
                        self.task(&r.task_id, View::default())?;
                        Ok(ListTaskPushNotificationConfigsResponse {
                            configs: self.push.list(&r.task_id),
                            next_page_token: None,
                        })
                    })
                    .map(|l| serde_json::to_value(l).unwrap_or(Value::Null)),
            ),
            methods::DELETE_PUSH_CONFIG => json(
                params::<DeleteTaskPushNotificationConfigRequest>(p).and_then(|r| {
                    if self.push.delete(&r.task_id, &r.id) {
                        Ok(Value::Object(Default::default()))
                    } else {
                        Err(A2AError::invalid_params(format!(
                            "task `{}` has no push notification config `{}`",
                            r.task_id, r.id
                        )))
                    }
                }),
            ),
            other => json(Err(A2AError::method_not_found(other))),
        }
    }

    /// The running task `task` of this process, if it is one.
    fn running(&self, session: &str, turn: u32) -> Option<Arc<Running>> {
        lock(&self.contexts)
            .get(session)
            .and_then(|c| c.running.clone())
            .filter(|r| r.turn == turn)
    }

    /// Task `id`, read from the store with what this process knows laid over it.
    pub fn task(&self, id: &str, view: View) -> Result<Task, A2AError> {
        let (session, turn) =
            tasks::parse_task_id(id).ok_or_else(|| A2AError::task_not_found(id))?;
        let running = self.running(session, turn);
        let store = self.host.agents.store();
        let top_level = store
            .session(session)
            .map_err(store_error)?
            .is_some_and(|s| s.parent.is_none());
        if !top_level && running.is_none() {
            return Err(A2AError::task_not_found(id));
        }
        let turns = if top_level {
            tasks::turns_of(store.as_ref(), session).map_err(store_error)?
        } else {
            Vec::new()
        };
        let record = turns.get(turn as usize - 1);
        if record.is_none() && running.is_none() {
            return Err(A2AError::task_not_found(id));
        }
        let overlay = Overlay {
            running: running.map(|r| r.view()),
            diagnostic: lock(&self.diagnostics).get(id).cloned(),
        };
        Ok(tasks::task_of(session, record, turn, &overlay, view))
    }

    fn list(&self, r: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        let size = match r.page_size {
            None | Some(0) => PAGE_SIZE,
            Some(n) if n < 0 => {
                return Err(A2AError::invalid_params("`pageSize` must not be negative"))
            }
            Some(n) => (n as usize).min(MAX_PAGE_SIZE),
        };
        let offset = match r.page_token.as_deref() {
            None | Some("") => 0,
            Some(token) => token
                .strip_prefix("o")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    A2AError::invalid_params(format!("`{token}` is not a page token of seam's"))
                })?,
        };
        let view = View {
            history_length: history_length(r.history_length),
            artifacts: r.include_artifacts.unwrap_or(false),
        };
        let store = self.host.agents.store();
        let mut all: Vec<(u64, u32, Task)> = Vec::new();
        for session in store.sessions().map_err(store_error)? {
            if session.parent.is_some() || r.context_id.as_deref().is_some_and(|c| c != session.id)
            {
                continue;
            }
            let turns = tasks::turns_of(store.as_ref(), &session.id).map_err(store_error)?;
            for record in &turns {
                let id = tasks::task_id(&session.id, record.turn);
                let overlay = Overlay {
                    running: self.running(&session.id, record.turn).map(|r| r.view()),
                    diagnostic: lock(&self.diagnostics).get(&id).cloned(),
                };
                let task = tasks::task_of(&session.id, Some(record), record.turn, &overlay, view);
                if r.status.as_ref().is_some_and(|s| *s != task.status.state) {
                    continue;
                }
                all.push((record.started_ms, record.turn, task));
            }
        }
        // Newest first; within one millisecond, the later turn first.
        all.sort_by(|a, b| (b.0, b.1, &b.2.id).cmp(&(a.0, a.1, &a.2.id)));
        let total = all.len();
        let tasks: Vec<Task> = all
            .into_iter()
            .skip(offset)
            .take(size)
            .map(|(_, _, t)| t)
            .collect();
        let next = offset + tasks.len();
        Ok(ListTasksResponse {
            tasks,
            next_page_token: if next < total {
                format!("o{next}")
            } else {
                String::new()
            },
            page_size: size as i32,
            total_size: total as i32,
        })
    }

    /// The context `id` names (continued from the store if it is not open here), or a new one.
    fn open(
        &self,
        contexts: &mut HashMap<String, Context>,
        id: Option<&str>,
    ) -> Result<String, A2AError> {
        let agents = &self.host.agents;
        let Some(id) = id.filter(|i| !i.is_empty()) else {
            let agent = agents
                .create_top_level(None, &self.cwd, None)
                .map_err(|e| A2AError::internal(format!("cannot create the agent: {e}")))?;
            let session = agent.as_parent().session_id;
            contexts.insert(
                session.clone(),
                Context {
                    agent,
                    running: None,
                    used_ms: seam_core::store::now_ms(),
                },
            );
            return Ok(session);
        };
        if contexts.contains_key(id) {
            return Ok(id.to_string());
        }
        let kept = agents.store().session(id).map_err(store_error)?;
        match kept {
            Some(s) if s.parent.is_none() => {
                let agent = agents
                    .create_top_level(None, &s.working_directory, Some(id))
                    .map_err(|e| {
                        A2AError::internal(format!("cannot continue context `{id}`: {e}"))
                    })?;
                contexts.insert(
                    id.to_string(),
                    Context {
                        agent,
                        running: None,
                        used_ms: seam_core::store::now_ms(),
                    },
                );
                Ok(id.to_string())
            }
            _ => Err(A2AError::invalid_params(format!(
                "no context `{id}`: send without contextId to start one"
            ))),
        }
    }

    /// A message to a running task (steering it, or answering its approval); an ended task's
    /// or an unknown one's is refused.
    fn to_task(&self, task: &str, message: &Message) -> Result<Arc<Running>, A2AError> {
        let (session, turn) =
            tasks::parse_task_id(task).ok_or_else(|| A2AError::task_not_found(task))?;
        let Some(running) = self.running(session, turn) else {
            let ended = self.task(task, View::default())?;
            return Err(A2AError::unsupported_operation(format!(
                "task `{task}` has ended ({}): a terminal task takes no message; send without \
                 taskId in its context (contextId `{session}`) to continue the conversation",
                serde_json::to_value(&ended.status.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            )));
        };
        if let Some(approval) = running.approval() {
            if let Some(answer) = answer_of(message) {
                self.host
                    .approvals
                    .answer(&approval, answer)
                    .map_err(|e| A2AError::invalid_params(e.to_string()))?;
                // Answered: the task works again from now (the engine wakes the asker next).
                running.answered(&approval);
                return Ok(running);
            }
        }
        running.agent.steer(prompt_of(message)?);
        Ok(running)
    }

    /// Starts a turn in the message's context (a new one without `contextId`).
    fn start(self: &Arc<Self>, request: &SendMessageRequest) -> Result<Arc<Running>, A2AError> {
        let message = &request.message;
        let prompt = prompt_of(message)?;
        let push = request
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.clone());
        let running = {
            let mut contexts = lock(&self.contexts);
            let session = self.open(&mut contexts, message.context_id.as_deref())?;
            let Some(context) = contexts.get_mut(&session) else {
                return Err(A2AError::internal("the context went away"));
            };
            if let Some(busy) = &context.running {
                return Err(A2AError::unsupported_operation(format!(
                    "a turn is already running in context `{session}` (task `{}`): send to \
                     that taskId to steer it, or wait for it to end",
                    busy.task
                )));
            }
            let store = self.host.agents.store();
            let turn = tasks::turns_of(store.as_ref(), &session)
                .map_err(store_error)?
                .len() as u32
                + 1;
            let running = Running::new(
                session,
                turn,
                blocks_text(&prompt),
                context.agent.clone(),
                self.push.clone(),
            );
            if let Some(config) = push {
                self.push.add(&running.task, config)?;
            }
            context.running = Some(running.clone());
            context.used_ms = seam_core::store::now_ms();
            running
        };
        running.started();
        let (served, turn) = (self.clone(), running.clone());
        let handle = tokio::spawn(async move {
            let outcome = turn.agent.run_turn(prompt).await;
            served.ended(&turn, outcome);
        });
        let mut turns = lock(&self.turns);
        turns.retain(|h| !h.is_finished());
        turns.push(handle);
        Ok(running)
    }

    /// A turn ended: it leaves its context, and its task, read back from the store, goes to
    /// whoever follows it.
    fn ended(&self, running: &Running, outcome: TurnOutcome) {
        let closed = {
            let mut contexts = lock(&self.contexts);
            if let Some(context) = contexts.get_mut(&running.context) {
                if context
                    .running
                    .as_ref()
                    .is_some_and(|r| r.task == running.task)
                {
                    context.running = None;
                }
            }
            close_idle(&mut contexts)
        };
        for agent in closed {
            let agents = self.host.agents.clone();
            tokio::spawn(async move { agents.dispose(agent.id()).await });
        }
        if outcome.stop_reason != StopReason::Completed {
            if let Some(d) = &outcome.diagnostic {
                let mut kept = lock(&self.diagnostics);
                if kept.len() >= DIAGNOSTICS {
                    kept.clear();
                }
                kept.insert(running.task.clone(), d.clone());
            }
        }
        let store = self.host.agents.store();
        let record = tasks::turns_of(store.as_ref(), &running.context)
            .ok()
            .and_then(|t| t.into_iter().nth(running.turn as usize - 1))
            .filter(|r| r.end.is_some())
            // A store that refused the turn's end: the outcome itself says how it went.
            .unwrap_or_else(|| TurnRecord {
                turn: running.turn,
                started_ms: seam_core::store::now_ms(),
                updated_ms: seam_core::store::now_ms(),
                messages: vec![
                    (true, running.prompt.clone()),
                    (false, blocks_text(&outcome.output)),
                ],
                end: Some(outcome.stop_reason.clone()),
            });
        let overlay = Overlay {
            running: None,
            diagnostic: outcome.diagnostic.clone(),
        };
        let task = tasks::task_of(
            &running.context,
            Some(&record),
            running.turn,
            &overlay,
            View {
                history_length: None,
                artifacts: true,
            },
        );
        running.finish(task);
    }

    async fn send(self: &Arc<Self>, request: SendMessageRequest) -> Result<Value, A2AError> {
        let config = request.configuration.clone();
        let view = View {
            history_length: history_length(config.as_ref().and_then(|c| c.history_length)),
            artifacts: true,
        };
        let immediately = config
            .as_ref()
            .and_then(|c| c.return_immediately)
            .unwrap_or(false);
        let task_id = request.message.task_id.clone().filter(|t| !t.is_empty());
        let running = match &task_id {
            Some(task) => {
                let running = self.to_task(task, &request.message)?;
                if let Some(push) = config.and_then(|c| c.task_push_notification_config) {
                    self.push.add(task, push)?;
                }
                // A message to a running task is answered with the task as it stands.
                return self.answer(&running.task, view);
            }
            None => self.start(&request)?,
        };
        if !immediately {
            let mut done = running.done.subscribe();
            // Ends when the turn does; the sender lives as long as `running`.
            let _ = done.wait_for(Option::is_some).await;
        }
        self.answer(&running.task, view)
    }

    fn answer(&self, task: &str, view: View) -> Result<Value, A2AError> {
        let task = self.task(task, view)?;
        Ok(
            serde_json::to_value(crate::wire::SendMessageResponse::Task(task))
                .unwrap_or(Value::Null),
        )
    }

    fn send_streaming(
        self: &Arc<Self>,
        id: &JsonRpcId,
        request: SendMessageRequest,
    ) -> Result<SseBody, A2AError> {
        let task_id = request.message.task_id.clone().filter(|t| !t.is_empty());
        let running = match &task_id {
            Some(task) => {
                let running = self.to_task(task, &request.message)?;
                if let Some(push) = request
                    .configuration
                    .as_ref()
                    .and_then(|c| c.task_push_notification_config.clone())
                {
                    self.push.add(task, push)?;
                }
                running
            }
            None => self.start(&request)?,
        };
        self.follow(id, &running)
    }

    /// A stream of `running`: the task as it stands, then its updates.
    fn follow(&self, id: &JsonRpcId, running: &Running) -> Result<SseBody, A2AError> {
        // Subscribed before the task is read: nothing that happens in between is lost.
        let updates = running.subscribe();
        let done = running.done.subscribe();
        let first = match done.borrow().clone() {
            Some(ended) => ended,
            None => self.task(&running.task, View::default())?,
        };
        Ok(stream::sse(id.clone(), first, updates, done))
    }

    fn subscribe(&self, id: &JsonRpcId, task: &str) -> Result<SseBody, A2AError> {
        let (session, turn) =
            tasks::parse_task_id(task).ok_or_else(|| A2AError::task_not_found(task))?;
        match self.running(session, turn) {
            Some(running) => self.follow(id, &running),
            None => {
                self.task(task, View::default())?;
                Err(A2AError::unsupported_operation(format!(
                    "task `{task}` has ended: a terminal task cannot be subscribed to; GetTask \
                     reads it"
                )))
            }
        }
    }

    async fn cancel(&self, task: &str) -> Result<Task, A2AError> {
        let (session, turn) =
            tasks::parse_task_id(task).ok_or_else(|| A2AError::task_not_found(task))?;
        let Some(running) = self.running(session, turn) else {
            self.task(task, View::default())?;
            return Err(A2AError::task_not_cancelable(task));
        };
        let mut done = running.done.subscribe();
        running.agent.cancel_turn();
        // The turn ends once its tree has: within the host's cancel grace, or it is answered
        // as it stands.
        let _ = tokio::time::timeout(self.host.cancel_grace, done.wait_for(Option::is_some)).await;
        let ended = done.borrow().clone();
        match ended {
            Some(task) => Ok(task),
            None => self.task(
                task,
                View {
                    history_length: None,
                    artifacts: true,
                },
            ),
        }
    }

    /// The end of serving: every running turn is cancelled and every context's agent disposed.
    pub async fn shut_down(&self) {
        let agents: Vec<Arc<Agent>> = lock(&self.contexts).drain().map(|(_, c)| c.agent).collect();
        for agent in &agents {
            agent.cancel_turn();
        }
        for agent in agents {
            self.host.agents.dispose(agent.id()).await;
        }
        let turns: Vec<_> = lock(&self.turns).drain(..).collect();
        for turn in turns {
            let _ = turn.await;
        }
    }
}

/// Takes the least recently used idle contexts out of `contexts` while more than
/// [`IDLE_CONTEXTS`] are idle; returns their agents, to dispose.
fn close_idle(contexts: &mut HashMap<String, Context>) -> Vec<Arc<Agent>> {
    let mut idle: Vec<(u64, String)> = contexts
        .iter()
        .filter(|(_, c)| c.running.is_none())
        .map(|(id, c)| (c.used_ms, id.clone()))
        .collect();
    if idle.len() <= IDLE_CONTEXTS {
        return Vec::new();
    }
    idle.sort();
    let excess = idle.len() - IDLE_CONTEXTS;
    idle.into_iter()
        .take(excess)
        .filter_map(|(_, id)| contexts.remove(&id).map(|c| c.agent))
        .collect()
}
