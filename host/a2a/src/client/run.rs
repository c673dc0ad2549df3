//! One run of an A2A provider: one remote task, followed to its end.
//!
//! The message starts a task (or, for a continued child, goes on with the task it followed, or
//! starts a new one in the same context). The agent's events are read in order: the task's
//! status messages are progress, its artifacts the answer (appended or replaced, as each update
//! says), and its terminal state, or a state that waits for input, ends the run. A stream that
//! drops before that is followed again (`SubscribeToTask`, or `GetTask` once the task ended);
//! the message itself is never sent twice.

use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use seam_core::subagent::{RunContext, RunFailure, StoredSession};
use seam_core::types::{ContentBlock, StartRequest, StopReason, SubagentResult};

use super::kept::{self, Followed, Kept};
use super::settings::A2aSettings;
use super::transport::Peer;
use super::transport::{CallError, Events};
use crate::wire::{
    self, error_code, methods, CancelTaskRequest, GetTaskRequest, Message, Part, Role,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task as RemoteTask, TaskState, TaskStatus,
};

/// What every run of an entry shares.
pub(super) struct Inner {
    pub(super) plugin: Arc<str>,
    pub(super) settings: A2aSettings,
    pub(super) peer: Peer,
    pub(super) streaming: bool,
    /// The entry's `max_output_bytes`: the answer, and the progress, may not exceed it.
    pub(super) max_output_bytes: usize,
}

impl Inner {
    /// A run: played back from the recording when replaying (the agent is not called: its
    /// answer is an outside result, as a model's is), else run for real and recorded.
    pub(super) async fn run(
        &self,
        ctx: RunContext,
        request: StartRequest,
    ) -> Result<SubagentResult, RunFailure> {
        use seam_core::cassette::Kind;
        let Some((tape, key)) = ctx.account().tape() else {
            return Task::new(self, &ctx).drive(&request).await;
        };
        if tape.replaying() {
            return match tape.play(&key, Kind::Run) {
                seam_core::tape::Played::Entry(_, body) => {
                    ctx.ready();
                    serde_json::from_value(body).map_err(|e| {
                        self.failure(format!("replay: the recorded outcome is unreadable: {e}"))
                    })
                }
                _ => Err(self.failure("replay: the recording has no outcome for this run".into())),
            };
        }
        let outcome = Task::new(self, &ctx).drive(&request).await;
        if let Ok(result) = &outcome {
            if let Ok(body) = serde_json::to_value(result) {
                tape.record(&key, Kind::Run, body);
            }
        }
        outcome
    }

    fn failure(&self, message: String) -> RunFailure {
        RunFailure::A2aAgent {
            plugin: self.plugin.to_string(),
            message,
        }
    }
}

/// Bytes each progress update is charged beyond its text, as a component's are.
const UPDATE_OVERHEAD: usize = 64;

/// A run's task, as far as it has been followed.
pub(super) struct Task<'a> {
    inner: &'a Inner,
    ctx: &'a RunContext,
    kept: Option<Kept>,
    /// The remote task and context, once the agent named them.
    followed: Option<Followed>,
    state: TaskState,
    /// Each artifact's text, in the order first seen.
    artifacts: Vec<(String, String)>,
    /// The latest status message's text.
    status_text: String,
    /// The answer of an agent that replied with a message instead of a task.
    direct: Option<String>,
    /// Progress bytes reported, overheads included.
    reported: usize,
    /// The run was cancelled; `cancel_sent` once `CancelTask` went out.
    cancelling: bool,
    cancel_sent: bool,
}

impl<'a> Task<'a> {
    pub(super) fn new(inner: &'a Inner, ctx: &'a RunContext) -> Self {
        Self {
            inner,
            ctx,
            kept: None,
            followed: None,
            state: TaskState::Unspecified,
            artifacts: Vec::new(),
            status_text: String::new(),
            direct: None,
            reported: 0,
            cancelling: false,
            cancel_sent: false,
        }
    }

    fn failure(&self, message: String) -> RunFailure {
        self.inner.failure(message)
    }

    /// Runs the task to its end, or to a state that waits for input.
    pub(super) async fn drive(
        mut self,
        request: &StartRequest,
    ) -> Result<SubagentResult, RunFailure> {
        let inner = self.inner;
        // Reaching the agent is a use of an `http` grant `[approvals] http` may ask for.
        self.ctx
            .approve_grant(
                seam_core::approval::GrantClass::Http,
                &inner.plugin,
                inner.peer.endpoint(),
            )
            .await
            .map_err(|refused| self.failure(refused.to_string()))?;
        let continued = self
            .ctx
            .resumed_from()
            .and_then(|seed| seed.downcast_ref::<StoredSession>().cloned())
            .map(|StoredSession(session)| session);
        let earlier = continued
            .as_deref()
            .and_then(|session| kept::followed(self.ctx, session));
        if inner.settings.resume {
            self.kept = Kept::open(
                self.ctx,
                &inner.plugin,
                continued,
                &request.parent.session_id,
                &request.parent.working_directory,
                &request.prompt,
            );
        }
        let mut message = Message::new(Role::User, message_parts(request));
        let mut running = None;
        if let Some(earlier) = earlier {
            message.context_id = Some(earlier.context.clone());
            match self.get(&earlier.task).await {
                Ok(task) if waits_for_input(&task.status.state) => {
                    message.task_id = Some(task.id);
                }
                Ok(task) if !task.status.state.is_terminal() => {
                    message.task_id = Some(task.id.clone());
                    running = Some(task);
                }
                // Ended (or forgotten by the agent): a new task in the same context.
                Ok(_) => {}
                Err(e) if e.code() == Some(error_code::TASK_NOT_FOUND) => {}
                Err(e) => {
                    return Err(self.failure(format!(
                        "cannot read the task `{}` this child followed: {e}",
                        earlier.task
                    )))
                }
            }
        }
        let outcome = match running {
            // The task still runs (the process that followed it ended): the new prompt joins
            // it, and the task is followed from where it is.
            Some(task) => {
                self.apply(StreamResponse::Task(task))?;
                self.send_follow_up(message).await;
                let events = self.resubscribe().await?;
                self.follow(events).await
            }
            None if inner.streaming => self.stream(message).await,
            None => self.blocking(message).await,
        };
        if let Err(e) = outcome {
            // The agent's task is not left working for nobody.
            if matches!(e, RunFailure::LimitHit { .. }) {
                self.cancel().await;
            }
            return Err(e);
        }
        Ok(self.result())
    }

    /// `SendStreamingMessage`, then its events.
    async fn stream(&mut self, message: Message) -> Result<(), RunFailure> {
        let request = send_request(message, None);
        let events = self
            .inner
            .peer
            .stream(methods::SEND_STREAMING_MESSAGE, &request)
            .await
            .map_err(|e| self.failure(format!("cannot start the task: {e}")))?;
        self.follow(events).await
    }

    /// `SendMessage` to an agent that does not stream: the answer is the task as it ended.
    async fn blocking(&mut self, message: Message) -> Result<(), RunFailure> {
        let request = send_request(message, Some(answered(false)));
        let call = self
            .inner
            .peer
            .call_until_answered::<SendMessageResponse>(methods::SEND_MESSAGE, &request);
        let answer = tokio::select! {
            answer = call => answer,
            // Without a stream the task's id comes only with its end: there is nothing to
            // cancel but the call itself.
            () = self.ctx.cancelled() => {
                self.state = TaskState::Canceled;
                return Ok(());
            }
        };
        let answer = answer.map_err(|e| self.failure(format!("the task failed: {e}")))?;
        self.apply(match answer {
            SendMessageResponse::Task(task) => StreamResponse::Task(task),
            SendMessageResponse::Message(message) => StreamResponse::Message(message),
        })?;
        if !self.done() {
            return Err(self.failure(format!(
                "it answered `SendMessage` with the task in state {:?} and does not stream: \
                 Seam cannot follow it",
                self.state
            )));
        }
        Ok(())
    }

    /// Reads `events` until the task ends or waits for input, cancelling and steering it as
    /// the run asks, and following it again when the stream drops.
    async fn follow(&mut self, mut events: Events) -> Result<(), RunFailure> {
        loop {
            if self.done() {
                return Ok(());
            }
            if self.cancelling && !self.cancel_sent && self.followed.is_some() {
                self.cancel().await;
                continue;
            }
            let steerable = self.followed.is_some() && !self.cancelling;
            let next = tokio::select! {
                biased;
                () = self.ctx.cancelled(), if !self.cancelling => {
                    // Let go of, not cancelled: the task goes on, for a later process to
                    // follow again from the kept session.
                    if self.ctx.is_detached() {
                        return Ok(());
                    }
                    self.cancelling = true;
                    continue;
                }
                () = self.ctx.message_waiting(), if steerable => {
                    self.steer().await;
                    continue;
                }
                next = events.next() => next,
            };
            match next {
                Some(Ok(event)) => self.apply(event)?,
                Some(Err(e)) if !e.is_connection() => {
                    return Err(self.failure(format!("its event stream broke: {e}")));
                }
                // The stream ended (or broke) before the task did: followed again.
                Some(Err(_)) | None => {
                    if self.followed.is_none() {
                        return Err(self.failure(
                            "the stream ended before the agent named a task; the message is \
                             not sent again (the agent may or may not have received it)"
                                .into(),
                        ));
                    }
                    events = self.resubscribe().await?;
                }
            }
        }
    }

    /// Follows the task again after its stream dropped: `SubscribeToTask`, retried while the
    /// agent cannot be reached (`config.reconnects` times); a task that ended meanwhile is read
    /// with `GetTask`.
    async fn resubscribe(&mut self) -> Result<Events, RunFailure> {
        let Some(followed) = self.followed.clone() else {
            return Err(self.failure("no task to follow".into()));
        };
        let peer = &self.inner.peer;
        let request = SubscribeToTaskRequest {
            id: followed.task.clone(),
            tenant: None,
        };
        let attempts = self.inner.settings.reconnects as usize;
        let subscribe = || peer.stream(methods::SUBSCRIBE_TO_TASK, &request);
        let subscribed = subscribe
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(50))
                    .with_max_delay(Duration::from_secs(2))
                    .with_max_times(attempts),
            )
            .when(CallError::is_connection)
            .await;
        match subscribed {
            Ok(events) => Ok(events),
            // The task ended between the drop and now (an ended task has no stream).
            Err(e) if e.code() == Some(error_code::UNSUPPORTED_OPERATION) => {
                let task = self.get(&followed.task).await.map_err(|e| {
                    self.failure(format!("cannot read the task `{}`: {e}", followed.task))
                })?;
                self.apply(StreamResponse::Task(task))?;
                Ok(Box::pin(futures::stream::empty()))
            }
            Err(e) => Err(self.failure(format!(
                "the stream of task `{}` dropped and following it again failed \
                 ({attempts} retries): {e}",
                followed.task
            ))),
        }
    }

    async fn get(&self, task: &str) -> Result<RemoteTask, CallError> {
        let request = GetTaskRequest {
            id: task.to_string(),
            history_length: Some(0),
            tenant: None,
        };
        self.inner.peer.call(methods::GET_TASK, &request).await
    }

    /// `CancelTask` (once the agent named the task): the stream then says it was cancelled.
    async fn cancel(&mut self) {
        let Some(followed) = &self.followed else {
            return;
        };
        self.cancel_sent = true;
        let request = CancelTaskRequest {
            id: followed.task.clone(),
            metadata: None,
            tenant: None,
        };
        match self
            .inner
            .peer
            .call::<RemoteTask>(methods::CANCEL_TASK, &request)
            .await
        {
            Ok(task) => {
                // Its state, not its artifacts: those the stream already gave.
                self.state = task.status.state;
            }
            Err(e) => tracing::warn!(
                plugin = %self.inner.plugin,
                task = %followed.task,
                error = %e,
                "the A2A agent did not take the cancel"
            ),
        }
    }

    /// Sends the waiting steering message to the task, as a follow-up in it.
    async fn steer(&mut self) {
        let Some(content) = self.ctx.next_message() else {
            return;
        };
        if let Some(kept) = &self.kept {
            kept.steered(self.ctx, &content);
        }
        let mut message = Message::new(Role::User, content.iter().map(part).collect());
        if let Some(followed) = &self.followed {
            message.task_id = Some(followed.task.clone());
            message.context_id = Some(followed.context.clone());
        }
        self.send_follow_up(message).await;
    }

    /// A message to a task that runs: answered at once, its effect seen on the task's stream.
    async fn send_follow_up(&self, message: Message) {
        let request = send_request(message, Some(answered(true)));
        let sent = self
            .inner
            .peer
            .call::<SendMessageResponse>(methods::SEND_MESSAGE, &request)
            .await;
        if let Err(e) = sent {
            tracing::warn!(plugin = %self.inner.plugin, error = %e, "the A2A agent refused a follow-up message");
            self.ctx.progress(vec![ContentBlock::text(format!(
                "the agent refused a follow-up message: {e}"
            ))]);
        }
    }

    /// Takes one event of the task.
    fn apply(&mut self, event: StreamResponse) -> Result<(), RunFailure> {
        match event {
            StreamResponse::Task(task) => {
                self.named(&task.id, &task.context_id);
                // A snapshot: its artifacts are all there are.
                if let Some(artifacts) = task.artifacts {
                    self.artifacts = artifacts
                        .into_iter()
                        .map(|a| (a.artifact_id, wire::parts_text(&a.parts)))
                        .collect();
                    self.check_size()?;
                }
                self.status(task.status);
            }
            StreamResponse::Message(message) => {
                if self.followed.is_none() && self.direct.is_none() {
                    self.ctx.ready();
                }
                self.direct = Some(wire::parts_text(&message.parts));
                self.check_size()?;
                self.state = TaskState::Completed;
            }
            StreamResponse::StatusUpdate(update) => {
                self.named(&update.task_id, &update.context_id);
                self.status(update.status);
            }
            StreamResponse::ArtifactUpdate(update) => {
                self.named(&update.task_id, &update.context_id);
                let text = wire::parts_text(&update.artifact.parts);
                let id = update.artifact.artifact_id;
                match self.artifacts.iter_mut().find(|(a, _)| *a == id) {
                    Some((_, kept)) if update.append == Some(true) => kept.push_str(&text),
                    Some((_, kept)) => *kept = text,
                    None => self.artifacts.push((id, text)),
                }
                self.check_size()?;
            }
        }
        Ok(())
    }

    /// The task's id and context, the first time the agent names them: the run is ready, and
    /// the task is kept before anything else of it is read.
    fn named(&mut self, task: &str, context: &str) {
        if self.followed.is_some() {
            return;
        }
        let followed = Followed {
            task: task.to_string(),
            context: context.to_string(),
        };
        if let Some(kept) = &self.kept {
            kept.task(self.ctx, &followed);
        }
        self.followed = Some(followed);
        self.ctx.ready();
    }

    fn status(&mut self, status: TaskStatus) {
        let text = status
            .message
            .as_ref()
            .map(|m| wire::parts_text(&m.parts))
            .unwrap_or_default();
        if !text.is_empty() {
            if matches!(status.state, TaskState::Working | TaskState::Submitted) {
                self.report(text.clone());
            }
            self.status_text = text;
        }
        // A state the agent did not set stays as it was.
        if status.state != TaskState::Unspecified {
            self.state = status.state;
        }
    }

    /// Reports `text` as progress while the run's progress budget (`max_output_bytes`, each
    /// update charged [`UPDATE_OVERHEAD`]) lasts; past it progress is dropped, not kept.
    fn report(&mut self, text: String) {
        let cost = text.len().saturating_add(UPDATE_OVERHEAD);
        if self.reported.saturating_add(cost) <= self.inner.max_output_bytes {
            self.reported += cost;
            self.ctx.progress(vec![ContentBlock::text(text)]);
        }
    }

    /// The answer so far may not exceed `max_output_bytes`.
    fn check_size(&self) -> Result<(), RunFailure> {
        let limit = self.inner.max_output_bytes;
        let size = self.direct.as_ref().map_or(0, String::len)
            + self.artifacts.iter().map(|(_, t)| t.len()).sum::<usize>();
        if size > limit {
            return Err(RunFailure::LimitHit {
                plugin: self.inner.plugin.to_string(),
                limit: "max_output_bytes".into(),
                detail: format!(
                    "the A2A agent's answer exceeds max_output_bytes ({limit} bytes); its task \
                     was cancelled"
                ),
            });
        }
        Ok(())
    }

    /// Whether the task has ended, or waits for input the run cannot give.
    fn done(&self) -> bool {
        self.direct.is_some() || self.state.is_terminal() || waits_for_input(&self.state)
    }

    /// The run's result from the task as it ended.
    fn result(&self) -> SubagentResult {
        let answer = match &self.direct {
            Some(direct) => direct.clone(),
            None if self.artifacts.is_empty() => self.status_text.clone(),
            None => self
                .artifacts
                .iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        let task = self
            .followed
            .as_ref()
            .map(|f| format!("`{}`", f.task))
            .unwrap_or_default();
        let (stop_reason, diagnostic) = match &self.state {
            TaskState::Completed => (StopReason::Completed, None),
            TaskState::Canceled => (StopReason::Aborted, None),
            TaskState::Rejected => (StopReason::Refusal, None),
            TaskState::InputRequired => (StopReason::Other("input-required".into()), None),
            TaskState::AuthRequired => (StopReason::Other("auth-required".into()), None),
            TaskState::Failed => (
                StopReason::Error,
                Some(format!(
                    "the A2A agent's task {task} failed: {}",
                    if self.status_text.is_empty() {
                        "it gave no reason"
                    } else {
                        &self.status_text
                    }
                )),
            ),
            // Still running: the run was let go of (its task goes on).
            TaskState::Submitted | TaskState::Working | TaskState::Unspecified => {
                (StopReason::Aborted, None)
            }
        };
        if let Some(kept) = &self.kept {
            kept.answered(self.ctx, &answer, stop_reason.clone());
        }
        let output = if answer.is_empty() || stop_reason == StopReason::Error {
            Vec::new()
        } else {
            vec![ContentBlock::text(answer)]
        };
        SubagentResult {
            output,
            structured: None,
            stop_reason,
            diagnostic,
        }
    }
}

/// Whether a task in `state` waits for what only its requester can give.
fn waits_for_input(state: &TaskState) -> bool {
    matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// A send request for `message`.
fn send_request(
    message: Message,
    configuration: Option<SendMessageConfiguration>,
) -> SendMessageRequest {
    SendMessageRequest {
        message,
        configuration,
        metadata: None,
        tenant: None,
    }
}

/// A send's configuration: no history back, and the answer at once (`immediately`) or when the
/// task ends or waits.
fn answered(immediately: bool) -> SendMessageConfiguration {
    SendMessageConfiguration {
        accepted_output_modes: None,
        task_push_notification_config: None,
        history_length: Some(0),
        return_immediately: Some(immediately),
    }
}

/// The message of a start request: the system prompt and persona the request carries, then the
/// prompt's blocks.
fn message_parts(request: &StartRequest) -> Vec<Part> {
    let mut parts: Vec<Part> = request.preamble().map(Part::text).collect();
    parts.extend(request.prompt.iter().map(part));
    parts
}

/// A content block as a part: text as text, JSON as data when it parses.
fn part(block: &ContentBlock) -> Part {
    match block {
        ContentBlock::Text(text) => Part::text(text.clone()),
        ContentBlock::Json(json) => match serde_json::from_str(json) {
            Ok(value) => Part::data(value),
            Err(_) => Part::text(json.clone()),
        },
    }
}
