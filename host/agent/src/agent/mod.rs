//! The agent runtime: agents with a session, a model and a tool layer, registered in the host.
//!
//! A turn sends the conversation and the visible tools to the model, runs the tool calls it asks
//! for (concurrently), appends their results, and repeats until a final answer, the max-turns
//! bound, a model error or an abort. Agents form a tree; disposing one disposes its children
//! first.

pub mod child;
pub mod config;
mod error;
mod replay;
mod seed;
pub mod tool_layer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use crate::session::{Session, SessionEvent, SessionHeader};
pub use child::RunChild;
pub use config::AgentConfig;
pub use error::AgentError;
pub use seed::{ChildSession, RunSessionSeed};
use tool_layer::{CallOutcome, ToolLayer};

use crate::model::{
    ChatMessage, FinishReason, Model, ModelError, ModelRegistry, ModelRequest, Role,
};
use seam_core::events::{Event, EventBus};
use seam_core::ledger::{Account, Hold};
use seam_core::spend::{Budget, Dimension, Spent};
use seam_core::store::{StoreError, Write};
use seam_core::subagent::{RunContext, SubagentService};
use seam_core::sync::lock;
use seam_core::tool::ToolRegistry;
use seam_core::types::{blocks_text, ContentBlock, ParentRef, StopReason, ToolFilter};

/// The most output tokens one model call holds of a budget that bounds output (or cost) when
/// its endpoint sets no `max_tokens`: the call is sent this as its `max_tokens`, so that
/// parallel calls share what is left instead of the first taking all of it.
pub const DEFAULT_OUTPUT_HOLD: u64 = 8192;

/// How to create an agent.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    /// The agent id; a run's child takes the run's id. Generated when absent.
    pub id: Option<String>,
    /// Model string (`scripted:NAME`, `openai[:MODEL]`).
    pub model: String,
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Persona, appended to the system prompt (a child's shadows the deployment's).
    pub persona: Option<String>,
    /// Delegation depth: 0 at top level.
    pub depth: u32,
    /// Working directory.
    pub working_directory: String,
    /// The parent agent id, for a child.
    pub parent: Option<String>,
    /// The parent's session id (lineage).
    pub parent_session: Option<String>,
    /// Tool visibility.
    pub tool_filter: Option<ToolFilter>,
    /// A structured answer is required: adds the capture tool.
    pub output_schema: Option<Value>,
    /// Most model calls in one turn.
    pub max_turns: u32,
    /// Events the session starts with (a balanced prefix).
    pub seed: Vec<SessionEvent>,
    /// The session to keep: one the host's store has is continued (its completed turns are
    /// the seed); another is opened under this id. Generated when absent.
    pub session_id: Option<String>,
    /// A top-level agent's budget (`[agent.budget]`); a child's is its run's.
    pub budget: Option<Budget>,
}

impl AgentSpec {
    /// A top-level agent on `model`, working in `cwd`.
    pub fn top_level(model: impl Into<String>, cwd: impl Into<String>) -> Self {
        Self {
            id: None,
            model: model.into(),
            system_prompt: None,
            persona: None,
            depth: 0,
            working_directory: cwd.into(),
            parent: None,
            parent_session: None,
            tool_filter: None,
            output_schema: None,
            max_turns: 16,
            seed: Vec::new(),
            session_id: None,
            budget: None,
        }
    }
}

/// How a turn ended and what it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The agent's final text of this turn (its own, never a seeded parent's).
    pub output: Vec<ContentBlock>,
    /// The captured structured answer, if one was required and given.
    pub structured: Option<Value>,
    /// Why the turn ended.
    pub stop_reason: StopReason,
    /// Why the turn failed or was stopped, in words, if it was.
    pub diagnostic: Option<String>,
}

/// A live agent.
pub struct Agent {
    id: String,
    spec: AgentSpec,
    model: Arc<dyn Model>,
    session: Mutex<Session>,
    tools: ToolLayer,
    abort: CancellationToken,
    /// The token of the turn in progress, or of the next one: a child of `abort`, replaced when
    /// a turn ends, so that cancelling a turn leaves the agent able to take the next.
    turn_abort: Mutex<CancellationToken>,
    steering: Mutex<Vec<Vec<ContentBlock>>>,
    /// Held for the duration of a turn: one turn at a time, and disposal waits for it.
    turn: tokio::sync::Mutex<()>,
    events: Arc<EventBus>,
    /// The run this agent is the child of, which it reports its progress to.
    progress: Mutex<Option<RunContext>>,
    /// Where its background runs are, to tell it when one settles.
    subagents: Weak<SubagentService>,
    /// Session writes not yet committed: they go with the next event this agent emits (or
    /// before its next progress report), in one transaction.
    unsaved: Mutex<Vec<Write>>,
    /// Why the store refused this agent's session, once it has: the turn then ends `error`.
    refused: Mutex<Option<String>>,
    /// The tokens this turn's model calls used so far, when their endpoint said.
    turn_usage: Mutex<Option<seam_core::types::Usage>>,
    /// What this turn's model calls cost so far, in micro-dollars.
    turn_cost: Mutex<u64>,
    /// Its budget account: its run's, for a run's child; its own, at top level.
    account: Arc<Account>,
    /// Whether the account is its own (a top-level agent's), to forget with it.
    owns_account: bool,
    /// Replaying: children's reports that arrived before the step the recording told them at.
    held_notices: Mutex<Vec<(String, Write)>>,
}

impl Agent {
    /// The agent id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How it was created.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// Its budget account: what it and its tree spent, and what is left.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }

    /// A copy of its session.
    pub fn session(&self) -> Session {
        lock(&self.session).clone()
    }

    /// The agent as a caller of tools and a parent of runs.
    pub fn as_parent(&self) -> ParentRef {
        let session = lock(&self.session);
        ParentRef {
            id: self.id.clone(),
            session_id: session.header.session_id.clone(),
            working_directory: session.header.working_directory.clone(),
            depth: self.spec.depth,
        }
    }

    /// Queues a steering message; it reaches the model before its next call.
    pub fn steer(&self, content: Vec<ContentBlock>) {
        lock(&self.steering).push(content);
    }

    /// Steering messages queued and not yet seen by the model.
    pub fn queued_steering(&self) -> usize {
        lock(&self.steering).len()
    }

    /// Whether the agent was aborted or disposed.
    pub fn is_aborted(&self) -> bool {
        self.abort.is_cancelled()
    }

    /// Aborts the agent for good: the turn in progress (and everything it started) ends, and so
    /// does every later one.
    pub fn abort(&self) {
        self.abort.cancel();
    }

    /// Cancels the turn in progress (and everything it started), or, when called between a
    /// turn's request and its start, that turn; the agent takes the turn after it as usual.
    pub fn cancel_turn(&self) {
        lock(&self.turn_abort).cancel();
    }

    fn messages(&self) -> Vec<ChatMessage> {
        let mut system = self.spec.system_prompt.clone().unwrap_or_default();
        if let Some(persona) = &self.spec.persona {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str("Persona: ");
            system.push_str(persona);
        }
        let mut out = Vec::new();
        if !system.is_empty() {
            out.push(ChatMessage::new(Role::System, system));
        }
        for event in lock(&self.session).events() {
            match event {
                SessionEvent::UserMessage { content } => {
                    out.push(ChatMessage::new(Role::User, blocks_text(content)))
                }
                SessionEvent::AssistantMessage { text, tool_calls } => out.push(ChatMessage {
                    role: Role::Assistant,
                    content: text.clone(),
                    tool_calls: tool_calls.clone(),
                    tool_call_id: None,
                }),
                SessionEvent::ToolResult {
                    call_id, content, ..
                } => out.push(ChatMessage {
                    role: Role::Tool,
                    content: blocks_text(content),
                    tool_calls: Vec::new(),
                    tool_call_id: Some(call_id.clone()),
                }),
                SessionEvent::TurnStart { .. }
                | SessionEvent::TurnEnd { .. }
                | SessionEvent::RemoteTask { .. } => {}
            }
        }
        out
    }

    fn push(&self, event: SessionEvent) {
        let mut session = lock(&self.session);
        lock(&self.unsaved).push(Write::Append {
            session: session.header.session_id.clone(),
            kind: event.kind().to_string(),
            body: event.to_json(),
        });
        session.push(event);
    }

    /// Tells the agent what its children did (each notice a user message), recording that it
    /// was told in the same commit as the messages.
    fn tell(&self, notices: seam_core::subagent::Notices) {
        for text in notices.texts {
            self.push(SessionEvent::UserMessage {
                content: vec![ContentBlock::text(text)],
            });
        }
        lock(&self.unsaved).extend(notices.writes);
    }

    /// Emits `event` after committing the session writes that led to it.
    fn emit(&self, event: Event) {
        let writes = std::mem::take(&mut *lock(&self.unsaved));
        if let Err(e) = self.events.emit_with(&event, writes) {
            self.refuse(e);
        }
    }

    /// Commits the session writes not yet committed.
    fn save(&self) {
        let writes = std::mem::take(&mut *lock(&self.unsaved));
        if writes.is_empty() {
            return;
        }
        // Through the bus: a session whose write the store failed is written no more.
        if let Err(e) = self.events.commit(writes) {
            tracing::warn!(agent = %self.id, error = %e, "session store refused a write");
            self.refuse(e);
        }
    }

    fn refuse(&self, e: StoreError) {
        lock(&self.refused).get_or_insert_with(|| {
            if e.is_failure() {
                // It names the store already.
                e.to_string()
            } else {
                format!("the session store refused a write: {e}")
            }
        });
    }

    /// Why the store refused this agent's session, if it did.
    fn refusal(&self) -> Option<String> {
        lock(&self.refused).clone()
    }

    /// Reports this agent's progress (each model reply, tool call and result) to `run`.
    pub fn report_progress_to(&self, run: RunContext) {
        *lock(&self.progress) = Some(run);
    }

    /// Reports progress of this agent's run (a run's child agent; nothing for a top-level
    /// agent): what one of its tools says while a call goes, such as an MCP server's progress.
    pub fn report_progress(&self, text: String) {
        self.report(text);
    }

    fn report(&self, text: String) {
        // What the report tells of is durable before anyone hears of it.
        self.save();
        if let Some(run) = lock(&self.progress).as_ref() {
            run.progress(vec![ContentBlock::text(text)]);
        }
    }

    /// Runs one turn on `prompt` to its end. Background runs of this agent that settled since
    /// its last turn are announced first, each once.
    pub async fn run_turn(&self, prompt: Vec<ContentBlock>) -> TurnOutcome {
        let _turn = self.turn.lock().await;
        let abort = lock(&self.turn_abort).clone();
        let turn = lock(&self.session).turns() + 1;
        let taped = self
            .account
            .tape()
            .filter(|(_, key)| key == seam_core::cassette::ROOT_KEY);
        if let Some((tape, key)) = &taped {
            tape.turn_started(key, turn);
        }
        self.push(SessionEvent::TurnStart { turn });
        if let Some(subagents) = self.subagents.upgrade() {
            self.tell(subagents.announcements(&self.as_parent()));
        }
        self.push(SessionEvent::UserMessage { content: prompt });
        self.emit(Event::AgentTurnStart {
            id: self.id.clone(),
            turn,
        });
        *lock(&self.turn_usage) = None;
        *lock(&self.turn_cost) = 0;
        let began = std::time::Instant::now();
        let (stop_reason, diagnostic) = self.turn_loop(&abort).await;
        if let Some((tape, key)) = &taped {
            tape.turn_ended(key, turn);
        }
        let usage = lock(&self.turn_usage).take();
        let cost = std::mem::take(&mut *lock(&self.turn_cost));
        let ran = began.elapsed().as_millis() as u64;
        lock(&self.unsaved).extend(self.account.add_wall_time(ran));
        // A cancel from now on is for the next turn.
        *lock(&self.turn_abort) = self.abort.child_token();
        // A refused session ends its turn `error`, saying why.
        let (stop_reason, diagnostic) = match self.refusal() {
            Some(why) if stop_reason.is_success() => (StopReason::Error, Some(why)),
            _ => (stop_reason, diagnostic),
        };
        self.push(SessionEvent::TurnEnd {
            turn,
            reason: stop_reason.clone(),
            usage,
        });
        self.emit(Event::AgentTurnEnd {
            id: self.id.clone(),
            turn,
            stop_reason: stop_reason.clone(),
            diagnostic: diagnostic.clone(),
            usage,
            cost_usd: (cost > 0).then(|| seam_core::spend::micros_to_usd(cost)),
        });
        let output = self
            .last_text()
            .map(ContentBlock::text)
            .into_iter()
            .collect();
        TurnOutcome {
            output,
            diagnostic,
            structured: if stop_reason.is_success() {
                self.tools.captured()
            } else {
                None
            },
            stop_reason,
        }
    }

    /// The agent's last assistant text of its current turn.
    fn last_text(&self) -> Option<String> {
        let session = lock(&self.session);
        let events = session.events();
        let turn_start = events
            .iter()
            .rposition(|e| matches!(e, SessionEvent::TurnStart { .. }))
            .unwrap_or(0);
        events[turn_start..].iter().rev().find_map(|e| match e {
            SessionEvent::AssistantMessage { text, .. } if !text.is_empty() => Some(text.clone()),
            _ => None,
        })
    }

    /// Why a turn was aborted: the agent, or only its turn.
    fn aborted(&self) -> String {
        if self.abort.is_cancelled() {
            "the agent was aborted".into()
        } else {
            "the turn was cancelled".into()
        }
    }

    /// Returns the stop reason and, for failures, why in words.
    async fn turn_loop(&self, abort: &CancellationToken) -> (StopReason, Option<String>) {
        let mut calls = 0;
        loop {
            if abort.is_cancelled() {
                return (StopReason::Aborted, Some(self.aborted()));
            }
            if let Some(why) = self.refusal() {
                return (StopReason::Error, Some(why));
            }
            for message in std::mem::take(&mut *lock(&self.steering)) {
                self.push(SessionEvent::UserMessage { content: message });
            }
            if let Some(subagents) = self.subagents.upgrade() {
                let notices = self.step_notices(&subagents, abort).await;
                self.tell(notices);
                // Requests from below that name this agent as their approver.
                for text in subagents.approvals().notices_for(&self.id) {
                    self.push(SessionEvent::UserMessage {
                        content: vec![ContentBlock::text(text)],
                    });
                }
            }
            if calls >= self.spec.max_turns {
                return (
                    StopReason::Error,
                    Some(format!(
                        "the agent hit its bound of {} model calls in one turn",
                        self.spec.max_turns
                    )),
                );
            }
            calls += 1;
            // Held before the call: refused when the tree's budget cannot cover it, and its
            // output clamped to what is left.
            // A call waiting for room in the budget still ends with its turn, or its time.
            let held = tokio::select! {
                held = self.hold_model_call() => held,
                _ = abort.cancelled() => return (StopReason::Aborted, Some(self.aborted())),
                _ = self.account.expired() => {
                    return (StopReason::Budget, Some(self.account.out_of_time().to_string()))
                }
            };
            let hold = match held {
                Ok(hold) => hold,
                Err(refused) => return refused,
            };
            let span = seam_core::trace::model_call(&self.id, &self.spec.model);
            let request = ModelRequest {
                messages: self.messages(),
                tools: self.tools.specs(),
                traceparent: span.as_ref().and_then(|s| s.traceparent()),
                max_tokens: self.clamp(&hold),
            };
            let call = abort.child_token();
            let mut out_of_time = false;
            let outcome = tokio::select! {
                outcome = self.complete(request, call.clone()) => outcome,
                _ = self.account.expired() => {
                    call.cancel();
                    out_of_time = true;
                    Err(ModelError::Aborted)
                }
            };
            if let Some(span) = span {
                match &outcome {
                    Ok(reply) => span.end(reply.usage.as_ref(), None),
                    Err(e) => span.end(None, Some(&e.to_string())),
                }
            }
            self.settle_model_call(hold, outcome.as_ref().ok().and_then(|r| r.usage));
            let reply = match outcome {
                Ok(r) => r,
                Err(_) if out_of_time => {
                    return (
                        StopReason::Budget,
                        Some(self.account.out_of_time().to_string()),
                    )
                }
                Err(ModelError::Aborted) => return (StopReason::Aborted, Some(self.aborted())),
                Err(e) => return (StopReason::Error, Some(format!("model error: {e}"))),
            };
            if let Some(used) = reply.usage {
                *lock(&self.turn_usage).get_or_insert_default() += used;
            }
            if abort.is_cancelled() {
                return (StopReason::Aborted, Some(self.aborted()));
            }
            self.push(SessionEvent::AssistantMessage {
                text: reply.text.clone(),
                tool_calls: reply.tool_calls.clone(),
            });
            if !reply.text.is_empty() {
                self.report(reply.text.clone());
            }
            match reply.finish {
                FinishReason::Length => return (StopReason::MaxTokens, None),
                FinishReason::Refusal => return (StopReason::Refusal, None),
                FinishReason::Stop | FinishReason::ToolCalls => {}
            }
            if reply.tool_calls.is_empty() {
                if self.tools.capture_pending() {
                    return (
                        StopReason::Error,
                        Some("the agent finished without calling structured_output".into()),
                    );
                }
                return (StopReason::Completed, None);
            }
            // The calls stop when the tree's wall time runs out, and the turn ends `budget`.
            let calls_abort = abort.child_token();
            let ran = self.run_tool_calls(&reply.tool_calls, &calls_abort);
            tokio::pin!(ran);
            let captured = tokio::select! {
                captured = &mut ran => captured,
                _ = self.account.expired() => {
                    calls_abort.cancel();
                    ran.await;
                    return (StopReason::Budget, Some(self.account.out_of_time().to_string()));
                }
            };
            if captured {
                // A valid capture ends the turn.
                return (StopReason::Completed, None);
            }
        }
    }

    /// Holds what the next model call may spend: one call, and as many output tokens (and
    /// their cost) as the tree has left, or the model's own `max_tokens`. Refused, the turn
    /// ends `budget` saying what ran out; a cost budget over a model with no prices ends it
    /// `error`.
    async fn hold_model_call(&self) -> Result<Hold, (StopReason, Option<String>)> {
        let prices = self.model.prices();
        let own_max = self.model.max_tokens().unwrap_or(DEFAULT_OUTPUT_HOLD);
        let mut unpriced = false;
        let held = self
            .account
            .hold_model_call(|left| {
                if left.get(Dimension::InputTokens) == Some(0) {
                    return Err(Dimension::InputTokens);
                }
                let mut output = left.get(Dimension::OutputTokens);
                if output == Some(0) {
                    return Err(Dimension::OutputTokens);
                }
                let mut cost = 0;
                if let Some(money) = left.get(Dimension::Cost) {
                    let Some(prices) = prices else {
                        unpriced = true;
                        return Err(Dimension::Cost);
                    };
                    if money == 0 {
                        return Err(Dimension::Cost);
                    }
                    let per_token = prices.output_micros_per_token();
                    // A free output token (a price of 0) leaves the output to the other bounds.
                    if let Some(affordable) = money.checked_div(per_token) {
                        if affordable == 0 {
                            return Err(Dimension::Cost);
                        }
                        output = Some(output.map_or(affordable, |o| o.min(affordable)));
                    }
                    cost = output.map_or(0, |o| o.saturating_mul(per_token));
                }
                // Bounded output: the call holds at most its own share, so that parallel calls
                // share what is left.
                let output = output.map(|o| o.min(own_max));
                if let (Some(o), Some(prices)) = (output, prices) {
                    cost = cost.min(o.saturating_mul(prices.output_micros_per_token()));
                }
                Ok(Spent {
                    output_tokens: output.unwrap_or(0),
                    cost_micros: cost,
                    model_calls: 1,
                    ..Spent::default()
                })
            })
            .await;
        match held {
            Ok(hold) => Ok(hold),
            Err(_) if unpriced => Err((
                StopReason::Error,
                Some(format!(
                    "model `{}` has no prices: the budget's cost bound cannot be kept (give \
                     its endpoint or script `prices = {{ input_per_mtok = .., output_per_mtok \
                     = .. }}`)",
                    self.spec.model
                )),
            )),
            Err(refused) => Err((StopReason::Budget, Some(refused.to_string()))),
        }
    }

    /// The `max_tokens` of a call holding `hold`: what it holds of output tokens when a
    /// budget bounds them, else the model's own bound, if any.
    fn clamp(&self, hold: &Hold) -> Option<u64> {
        let held = hold.amount().output_tokens;
        if held > 0 {
            Some(held)
        } else {
            self.model.max_tokens()
        }
    }

    /// What the agent is told before a model step: its children's next-step reports. They
    /// arrive when the children get there, so a recording keeps which ones each step was told,
    /// and a replay tells each step those, waiting for them and holding back the others.
    async fn step_notices(
        &self,
        subagents: &SubagentService,
        abort: &CancellationToken,
    ) -> seam_core::subagent::Notices {
        let parent = self.as_parent();
        let Some((tape, key)) = self.account.tape() else {
            return subagents.pending_reports(&parent, false);
        };
        if !tape.replaying() {
            let notices = subagents.pending_reports(&parent, false);
            tape.record(
                &key,
                seam_core::cassette::Kind::Finish,
                serde_json::json!({ "texts": notices.texts }),
            );
            return notices;
        }
        let wanted: Vec<String> = match tape.play(&key, seam_core::cassette::Kind::Finish) {
            seam_core::tape::Played::Entry(_, body) => {
                serde_json::from_value(body["texts"].clone()).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        loop {
            // Made before looking: a report or a divergence in between still wakes it.
            let reported = subagents.next_report();
            let diverged = tape.on_divergence();
            let got = subagents.pending_reports(&parent, false);
            {
                let mut held = lock(&self.held_notices);
                held.extend(got.texts.into_iter().zip(got.writes));
                if wanted.iter().all(|w| held.iter().any(|(t, _)| t == w)) {
                    let mut told = seam_core::subagent::Notices::default();
                    for w in &wanted {
                        if let Some(at) = held.iter().position(|(t, _)| t == w) {
                            let (text, write) = held.remove(at);
                            told.texts.push(text);
                            told.writes.push(write);
                        }
                    }
                    return told;
                }
            }
            if tape.divergence().is_some() {
                return seam_core::subagent::Notices::default();
            }
            // Only a background child can still report while this agent steps.
            let going = subagents
                .background_runs(&self.id)
                .iter()
                .any(|r| r.state != seam_core::types::RunState::Settled);
            if !going {
                tape.diverge(seam_core::tape::Divergence {
                    key: key.clone(),
                    kind: seam_core::cassette::Kind::Finish,
                    step: 0,
                    what: "the recording told this step of reports no child made on the replay"
                        .into(),
                    recorded: serde_json::json!(wanted),
                    now: serde_json::json!(lock(&self.held_notices)
                        .iter()
                        .map(|(t, _)| t.clone())
                        .collect::<Vec<_>>()),
                });
                return seam_core::subagent::Notices::default();
            }
            // Woken by a report, a divergence, or a child settling (then looked at again).
            let settling: Vec<_> = subagents
                .background_runs(&self.id)
                .into_iter()
                .filter(|r| r.state != seam_core::types::RunState::Settled)
                .filter_map(|r| subagents.background_run(&self.id, &r.id))
                .map(|(run, _)| {
                    Box::pin(async move {
                        let _ = run.result().await;
                    })
                })
                .collect();
            let settled = async {
                if settling.is_empty() {
                    return;
                }
                futures::future::select_all(settling).await;
            };
            tokio::select! {
                _ = reported => {}
                _ = diverged => {}
                () = settled => {}
                _ = abort.cancelled() => return seam_core::subagent::Notices::default(),
            }
        }
    }

    /// Asks for a yes for every call whose tool needs one (its entry's `config.approve`),
    /// concurrently; a call refused gets words the model reads, and is not made.
    async fn approve_calls(
        &self,
        calls: &[crate::model::ToolCall],
        results: &mut [Option<seam_core::types::ToolResult>],
        caller: &ParentRef,
        abort: &CancellationToken,
    ) {
        use seam_core::approval::{Policy, Subject};
        let asked: Vec<(usize, Policy, Subject)> = calls
            .iter()
            .enumerate()
            .filter(|(i, _)| results[*i].is_none())
            .filter_map(|(i, call)| {
                let (policy, plugin) = self.tools.policy(&call.name)?;
                let arguments = serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| Value::String(call.arguments.clone()));
                (policy != Policy::Allow).then(|| {
                    let subject = Subject::Tool {
                        tool: call.name.clone(),
                        plugin,
                        arguments,
                    };
                    (i, policy, subject)
                })
            })
            .collect();
        if asked.is_empty() {
            return;
        }
        let Some(engine) = self.subagents.upgrade().map(|s| s.approvals().clone()) else {
            for (i, _, subject) in asked {
                results[i] = Some(seam_core::types::ToolResult::error(format!(
                    "refused: {} needs approval, and this agent has no approvals engine to ask",
                    subject.describe()
                )));
            }
            return;
        };
        let asker = seam_core::approvals::Asker::of(&self.account, &caller.session_id);
        let taped = self.account.tape();
        // Replaying, the answers are the recorded ones: nobody is asked again.
        let outcomes = match taped.as_ref().filter(|(t, _)| t.replaying()) {
            Some((tape, key)) => asked
                .iter()
                .map(|(_, _, subject)| replay::approval(tape, key, subject))
                .collect(),
            None => {
                futures::future::join_all(asked.iter().map(|(_, policy, subject)| {
                    engine.check(*policy, &asker, subject.clone(), abort)
                }))
                .await
            }
        };
        if let Some((tape, key)) = taped.as_ref().filter(|(t, _)| !t.replaying()) {
            for ((_, _, subject), outcome) in asked.iter().zip(&outcomes) {
                replay::record_approval(tape, key, subject, outcome);
            }
        }
        for ((i, _, _), outcome) in asked.iter().zip(outcomes) {
            if let Err(refused) = outcome {
                results[*i] = Some(seam_core::types::ToolResult::error(format!(
                    "refused: {refused}; tool `{}` was not called",
                    calls[*i].name
                )));
            }
        }
    }

    /// Calls the model, or plays its reply back: recording, the reply is taken down under the
    /// agent's tape key; replaying, the recorded reply is handed back once the request is the
    /// one recorded (else the difference is the replay's divergence).
    async fn complete(
        &self,
        request: ModelRequest,
        abort: CancellationToken,
    ) -> Result<crate::model::ModelReply, ModelError> {
        let Some((tape, key)) = self.account.tape() else {
            return self.model.complete(request, abort).await;
        };
        let asked = replay::summary(&request);
        if !tape.replaying() {
            let reply = self.model.complete(request, abort).await?;
            tape.record(
                &key,
                seam_core::cassette::Kind::Model,
                serde_json::json!({ "request": asked, "reply": reply }),
            );
            return Ok(reply);
        }
        match tape.play(&key, seam_core::cassette::Kind::Model) {
            seam_core::tape::Played::Entry(step, body) => {
                if let Some(d) = replay::compare(&key, step, &body["request"], &asked) {
                    tape.diverge(d);
                    return Err(ModelError::Replay(format!(
                        "diverged at `{key}`, model step {step}"
                    )));
                }
                serde_json::from_value(body["reply"].clone()).map_err(|e| {
                    ModelError::Replay(format!(
                        "the recorded reply at `{key}`, model step {step}, is unreadable: {e}"
                    ))
                })
            }
            seam_core::tape::Played::Missing => Err(ModelError::Replay(format!(
                "the recording has no model reply at `{key}`"
            ))),
            seam_core::tape::Played::Stopped => Err(ModelError::Replay(
                "the replay stopped at its --until step".into(),
            )),
        }
    }

    /// Replaces a model call's hold with what it spent: its tokens (and their cost) when the
    /// endpoint said, and the call itself in any case.
    fn settle_model_call(&self, hold: Hold, usage: Option<seam_core::types::Usage>) {
        let usage = usage.unwrap_or_default();
        let cost = self.model.prices().map_or(0, |p| p.cost_micros(usage));
        *lock(&self.turn_cost) += cost;
        let writes = hold.settle(Spent::model_call(usage, cost));
        lock(&self.unsaved).extend(writes);
    }

    /// Runs the calls of one reply; returns whether a structured answer was captured. Calls after
    /// a successful capture are refused; the rest run concurrently.
    async fn run_tool_calls(
        &self,
        calls: &[crate::model::ToolCall],
        abort: &CancellationToken,
    ) -> bool {
        let mut results: Vec<Option<seam_core::types::ToolResult>> = vec![None; calls.len()];
        let mut captured = false;
        for (i, call) in calls.iter().enumerate() {
            if captured {
                results[i] = Some(seam_core::types::ToolResult::error(
                    "refused: the structured answer was already captured, the turn is over",
                ));
                continue;
            }
            match self.tools.try_capture(&call.name, &call.arguments) {
                Some(CallOutcome::Captured(r)) => {
                    captured = true;
                    results[i] = Some(r);
                }
                Some(CallOutcome::Result(r)) => results[i] = Some(r),
                None => {}
            }
        }
        let caller = self.as_parent();
        // A call that needs a yes waits for it first, holding nothing of the budget.
        self.approve_calls(calls, &mut results, &caller, abort)
            .await;
        // Each call holds one tool call of the tree's budget; a call it cannot cover is refused
        // with words the model reads, and not made.
        let mut holds = Vec::new();
        for (i, result) in results.iter_mut().enumerate() {
            if result.is_some() {
                continue;
            }
            match self.account.hold(Spent::tool_call()) {
                Ok(hold) => holds.push(hold),
                Err(refused) => {
                    *result = Some(seam_core::types::ToolResult::error(format!(
                        "refused: {refused}; tool `{}` was not called",
                        calls[i].name
                    )))
                }
            }
        }
        let mut pending: Vec<usize> = (0..calls.len()).filter(|i| results[*i].is_none()).collect();
        // A tool served outside Wasm is answered from the recording when replaying.
        let taped = self.account.tape();
        let outside: Vec<usize> = pending
            .iter()
            .copied()
            .filter(|i| taped.is_some() && self.tools.served_outside(&calls[*i].name))
            .collect();
        if let Some((tape, key)) = taped.as_ref().filter(|(t, _)| t.replaying()) {
            for i in &outside {
                results[*i] = Some(replay::tool_result(tape, key, &calls[*i]));
            }
            pending.retain(|i| !outside.contains(i));
        }
        for i in &pending {
            self.emit(Event::AgentToolCall {
                id: self.id.clone(),
                call: calls[*i].id.clone(),
                tool: calls[*i].name.clone(),
            });
            self.report(format!("calling tool `{}`", calls[*i].name));
        }
        let ran = futures::future::join_all(pending.iter().map(|i| {
            let call = &calls[*i];
            let run = self.tools.run(
                &call.name,
                caller.clone(),
                call.arguments.clone(),
                abort.child_token(),
            );
            // Whatever the call starts (a run) knows which call it is under.
            seam_core::trace::in_call(&self.id, &call.id, run)
        }))
        .await;
        for (i, r) in pending.into_iter().zip(ran) {
            results[i] = Some(r);
        }
        if let Some((tape, key)) = taped.as_ref().filter(|(t, _)| !t.replaying()) {
            for i in outside {
                if let Some(result) = &results[i] {
                    replay::record_tool(tape, key, &calls[i], result);
                }
            }
        }
        for hold in holds {
            let writes = hold.settle(Spent::tool_call());
            lock(&self.unsaved).extend(writes);
        }
        for (call, result) in calls.iter().zip(results) {
            let result = result.unwrap_or_else(|| seam_core::types::ToolResult::error("not run"));
            let is_error = result.is_error;
            self.push(SessionEvent::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: result.content,
                is_error,
            });
            self.emit(Event::AgentToolResult {
                id: self.id.clone(),
                call: call.id.clone(),
                tool: call.name.clone(),
                is_error,
            });
            self.report(format!(
                "tool `{}` {}",
                call.name,
                if is_error { "failed" } else { "answered" }
            ));
        }
        captured
    }
}

impl seam_core::subagent::Steer for Agent {
    fn steer(&self, content: Vec<ContentBlock>) {
        Agent::steer(self, content);
    }

    fn queued(&self) -> usize {
        self.queued_steering()
    }
}

impl seam_core::subagent::ToolCeiling for AgentRegistry {
    fn visible_tools(&self, caller: &str) -> Option<Vec<String>> {
        self.get(caller).map(|agent| agent.tools.visible_names())
    }
}

/// A stored session as the agent continues it (see [`replay`]).
fn stored_prefix(
    session: &str,
    events: &[seam_core::store::StoredEvent],
) -> Result<Vec<SessionEvent>, AgentError> {
    let mut parsed = Vec::with_capacity(events.len());
    for e in events {
        let event: SessionEvent = serde_json::from_str(&e.body).map_err(|err| {
            AgentError::Store(StoreError::Backend(format!(
                "session `{session}`, event {}: cannot read it: {err}",
                e.seq
            )))
        })?;
        parsed.push(event);
    }
    Ok(replay(parsed))
}

/// What an agent continuing a session starts from: its completed turns whole, and of each turn
/// cut short by the end of a process (a `turn/start` with no `turn/end` before the next one,
/// or at the end), wherever it is, only its user messages, in place and outside any turn. So
/// everything ever sent to the agent (the cut turn's prompt, and whatever reached it during
/// that turn) is seen again, and the cut turn's partial output (assistant messages, tool
/// calls and results: a call could be left with no result) is dropped. Events before the first
/// turn (a seed) stay.
fn replay(events: Vec<SessionEvent>) -> Vec<SessionEvent> {
    let mut out = Vec::with_capacity(events.len());
    let mut turn: Vec<SessionEvent> = Vec::new();
    let mut in_turn = false;
    let keep_prompts = |out: &mut Vec<SessionEvent>, turn: &mut Vec<SessionEvent>| {
        out.extend(
            turn.drain(..)
                .filter(|e| matches!(e, SessionEvent::UserMessage { .. })),
        );
    };
    for event in events {
        match event {
            SessionEvent::TurnStart { .. } => {
                // An open turn here never ended: cut short.
                keep_prompts(&mut out, &mut turn);
                in_turn = true;
                turn.push(event);
            }
            SessionEvent::TurnEnd { .. } if in_turn => {
                turn.push(event);
                out.append(&mut turn);
                in_turn = false;
            }
            other if in_turn => turn.push(other),
            other => out.push(other),
        }
    }
    keep_prompts(&mut out, &mut turn);
    out
}

/// The host's live agents.
pub struct AgentRegistry {
    agents: Mutex<HashMap<String, Arc<Agent>>>,
    defaults: std::sync::RwLock<AgentConfig>,
    next: AtomicU64,
    events: Arc<EventBus>,
    models: Arc<ModelRegistry>,
    tools: Arc<ToolRegistry>,
    /// The runs' service, for the agents' background runs.
    subagents: std::sync::OnceLock<Weak<SubagentService>>,
}

impl AgentRegistry {
    /// An empty registry creating agents on `models`, with the tools mounted in `tools`.
    pub fn new(
        events: Arc<EventBus>,
        models: Arc<ModelRegistry>,
        tools: Arc<ToolRegistry>,
    ) -> Self {
        Self {
            agents: Mutex::new(HashMap::new()),
            defaults: std::sync::RwLock::new(AgentConfig::default()),
            next: AtomicU64::new(1),
            events,
            models,
            tools,
            subagents: std::sync::OnceLock::new(),
        }
    }

    /// Connects the service whose background runs belong to this registry's agents: they are
    /// disposed with their owner, and announced to it when they settle; and a run an agent
    /// starts has its child's tools narrowed to the agent's own.
    pub fn attach_subagents(self: &Arc<Self>, subagents: &Arc<SubagentService>) {
        let _ = self.subagents.set(Arc::downgrade(subagents));
        let ceiling: Weak<dyn seam_core::subagent::ToolCeiling> = Arc::downgrade(self) as _;
        subagents.set_tool_ceiling(ceiling);
    }

    fn subagents(&self) -> Option<Arc<SubagentService>> {
        self.subagents.get().and_then(Weak::upgrade)
    }

    /// The session store the agents write to (the bus's).
    pub fn store(&self) -> &Arc<dyn seam_core::store::SessionStore> {
        self.events.store()
    }

    /// The `[agent]` config: defaults for children and the top-level agent.
    pub fn defaults(&self) -> AgentConfig {
        seam_core::sync::read(&self.defaults).clone()
    }

    /// Replaces the `[agent]` defaults.
    pub fn configure(&self, config: AgentConfig) {
        *seam_core::sync::write(&self.defaults) = config;
    }

    /// A top-level agent in `working_directory` made from the `[agent]` defaults (its model, or
    /// `model`), keeping the session `session`: one the store has is continued from its
    /// completed turns.
    pub fn create_top_level(
        &self,
        model: Option<&str>,
        working_directory: &str,
        session: Option<&str>,
    ) -> Result<Arc<Agent>, AgentError> {
        let defaults = self.defaults();
        let mut spec = AgentSpec::top_level(
            model.map(str::to_string).unwrap_or(defaults.model.clone()),
            working_directory,
        );
        spec.system_prompt = defaults.system_prompt;
        spec.persona = defaults.persona;
        spec.max_turns = defaults.max_turns;
        spec.session_id = session.map(str::to_string);
        spec.budget = defaults.budget;
        self.create(spec, None)
    }

    /// Creates an agent and publishes it. `abort` (if given) aborts it along with its owner.
    pub fn create(
        &self,
        spec: AgentSpec,
        abort: Option<CancellationToken>,
    ) -> Result<Arc<Agent>, AgentError> {
        let defaults = self.defaults();
        if spec.depth > defaults.max_depth {
            return Err(AgentError::DepthExceeded {
                attempted: spec.depth,
                max: defaults.max_depth,
            });
        }
        if self.live() >= defaults.max_live_agents {
            tracing::warn!(
                max = defaults.max_live_agents,
                "agent refused: the host is at `[agent] max_live_agents`"
            );
            return Err(AgentError::TooManyAgents {
                max: defaults.max_live_agents,
            });
        }
        let model = self.models.resolve(&spec.model)?;
        let tools = ToolLayer::new(
            self.tools.clone(),
            spec.tool_filter.clone(),
            spec.output_schema.clone(),
        )?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // `:` cannot appear in a provider name, so a generated id never collides with a run id.
        let id = spec.id.clone().unwrap_or_else(|| format!("agent:{n}"));
        if lock(&self.agents).contains_key(&id) {
            return Err(AgentError::Invalid(format!(
                "an agent `{id}` already exists"
            )));
        }
        let store = self.events.store();
        let fresh = || format!("{}-{n}", store.id_prefix());
        // A run's child on a recorded tree keeps its recorded session id (its durable id, which
        // models see) on a replay.
        let run_tape = self
            .subagents()
            .and_then(|s| s.accounts().get(&id))
            .and_then(|run| run.tape());
        let session_id = match (spec.session_id.clone(), run_tape) {
            (Some(session), _) => session,
            (None, Some((tape, key))) => tape.session_id(&key, fresh),
            (None, None) => fresh(),
        };
        let stored = store.session(&session_id)?;
        let mut seed = spec.seed.clone();
        let mut unsaved = Vec::new();
        let header = match stored {
            Some(stored) => {
                if !seed.is_empty() {
                    return Err(AgentError::Invalid(format!(
                        "session `{session_id}` is in the store: it cannot also be seeded"
                    )));
                }
                seed = stored_prefix(&session_id, &store.events(&session_id)?)?;
                // The session moves to this process: a later crash marks it, not the last.
                unsaved.push(Write::OpenSession {
                    id: session_id.clone(),
                    agent: id.clone(),
                    parent: stored.parent.clone(),
                    working_directory: stored.working_directory.clone(),
                });
                SessionHeader {
                    session_id,
                    working_directory: stored.working_directory,
                    parent_session: stored.parent,
                }
            }
            None => {
                unsaved.push(Write::OpenSession {
                    id: session_id.clone(),
                    agent: id.clone(),
                    parent: spec.parent_session.clone(),
                    working_directory: spec.working_directory.clone(),
                });
                for event in &seed {
                    unsaved.push(Write::Append {
                        session: session_id.clone(),
                        kind: event.kind().to_string(),
                        body: event.to_json(),
                    });
                }
                SessionHeader {
                    session_id,
                    working_directory: spec.working_directory.clone(),
                    parent_session: spec.parent_session.clone(),
                }
            }
        };
        let (account, owns_account) = self.account_for(&id, &spec, &header.session_id)?;
        unsaved.extend(account.limits_write());
        // Its run's scope was set as the run started, before its provider made this agent.
        let tools = tools.under_scopes(account.scopes());
        let abort: CancellationToken = abort.map(|a| a.child_token()).unwrap_or_default();
        let agent = Arc::new(Agent {
            id: id.clone(),
            session: Mutex::new(Session::new(header, seed)),
            spec,
            model,
            tools,
            turn_abort: Mutex::new(abort.child_token()),
            abort,
            steering: Mutex::new(Vec::new()),
            turn: tokio::sync::Mutex::new(()),
            events: self.events.clone(),
            progress: Mutex::new(None),
            subagents: self.subagents.get().cloned().unwrap_or_default(),
            unsaved: Mutex::new(unsaved),
            refused: Mutex::new(None),
            turn_usage: Mutex::new(None),
            turn_cost: Mutex::new(0),
            account,
            owns_account,
            held_notices: Mutex::default(),
        });
        lock(&self.agents).insert(id.clone(), agent.clone());
        agent.emit(Event::AgentCreated {
            id,
            parent: agent.spec.parent.clone(),
            depth: agent.spec.depth,
            model: agent.spec.model.clone(),
        });
        Ok(agent)
    }

    /// The budget account of agent `id` keeping `session`, and whether it is the agent's own:
    /// a run's child uses its run's account (same id); another agent opens one under its
    /// parent's, or at top level with its spec's budget. Either starts from what its session
    /// spent in earlier processes, so a continued session never gets a fresh budget.
    fn account_for(
        &self,
        id: &str,
        spec: &AgentSpec,
        session: &str,
    ) -> Result<(Arc<Account>, bool), AgentError> {
        let already = self
            .events
            .store()
            .spend(session)?
            .map(|r| r.spent)
            .unwrap_or_default();
        let accounts = self.subagents().map(|s| s.accounts().clone());
        if let Some(run) = accounts.as_ref().and_then(|a| a.get(id)) {
            run.preload(already);
            run.keep_in(session);
            return Ok((run, false));
        }
        let parent = spec
            .parent
            .as_ref()
            .and_then(|p| accounts.as_ref().and_then(|a| a.get(p)));
        let account = match parent {
            Some(parent) => {
                let child = parent.child(id, Budget::default(), already);
                let call = seam_core::trace::current_call(parent.id());
                if let Some((tape, key)) = parent.child_tape(call.as_deref()) {
                    child.set_tape(tape, key);
                }
                child
            }
            None => {
                // A session that spent nothing before is new: it recorded nothing either.
                let continued = already != seam_core::spend::Spent::default();
                let root = Account::root(id, spec.budget.unwrap_or_default(), already);
                if let Some(tape) = self.subagents().and_then(|s| {
                    s.recording()
                        .tape_for(session, self.events.store(), continued)
                }) {
                    root.set_tape(tape, seam_core::cassette::ROOT_KEY.to_string());
                }
                root
            }
        };
        account.keep_in(session);
        if let Some(accounts) = &accounts {
            accounts.insert(account.clone());
        }
        Ok((account, true))
    }

    /// A live agent by id.
    pub fn get(&self, id: &str) -> Option<Arc<Agent>> {
        lock(&self.agents).get(id).cloned()
    }

    /// `id` and its ancestors, nearest first (the ids of live agents only).
    pub fn lineage(&self, id: &str) -> Vec<String> {
        let agents = lock(&self.agents);
        let mut out = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(current) = next.take() {
            if out.contains(&current) {
                break;
            }
            next = agents.get(&current).and_then(|a| a.spec.parent.clone());
            out.push(current);
        }
        out
    }

    /// How many agents are live.
    pub fn live(&self) -> usize {
        lock(&self.agents).len()
    }

    fn children_of(&self, id: &str) -> Vec<Arc<Agent>> {
        lock(&self.agents)
            .values()
            .filter(|a| a.spec.parent.as_deref() == Some(id))
            .cloned()
            .collect()
    }

    /// Disposes an agent, its children first; returns once its turn (if any) has wound down.
    pub async fn dispose(&self, id: &str) {
        let Some(agent) = self.get(id) else { return };
        agent.abort.cancel();
        for child in self.children_of(id) {
            Box::pin(self.dispose(child.id())).await;
        }
        // The turn in progress sees the abort and ends; tool calls dispose their runs.
        drop(agent.turn.lock().await);
        if let Some(subagents) = self.subagents() {
            subagents.dispose_background_of(id).await;
        }
        self.forget(id);
    }

    /// Disposes an agent without waiting (its turn is being dropped by its owner): it and its
    /// descendants are aborted and forgotten at once, and their background runs are disposed on
    /// a task, whose handle is returned for the owner to wait on (`None` outside a runtime,
    /// where there is nothing left to run them on and the runs end with it).
    pub fn dispose_now(&self, id: &str) -> Option<tokio::task::JoinHandle<()>> {
        let mut owners = Vec::new();
        self.forget_tree(id, &mut owners);
        let subagents = self.subagents()?;
        let rt = tokio::runtime::Handle::try_current().ok()?;
        Some(rt.spawn(async move {
            futures::future::join_all(owners.iter().map(|o| subagents.dispose_background_of(o)))
                .await;
        }))
    }

    /// Aborts and forgets `id` and its descendants, children first; collects their ids.
    fn forget_tree(&self, id: &str, ids: &mut Vec<String>) {
        for child in self.children_of(id) {
            self.forget_tree(child.id(), ids);
        }
        if let Some(agent) = self.get(id) {
            agent.abort.cancel();
        }
        ids.push(id.to_string());
        self.forget(id);
    }

    fn forget(&self, id: &str) {
        let agent = lock(&self.agents).remove(id);
        if let Some(agent) = agent {
            if agent.owns_account {
                if let Some(subagents) = self.subagents() {
                    subagents.accounts().remove(id);
                }
            }
            self.events
                .emit(&Event::AgentDisposed { id: id.to_string() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> SessionEvent {
        SessionEvent::UserMessage {
            content: vec![ContentBlock::text(text)],
        }
    }

    #[test]
    fn a_turn_a_dead_process_cut_short_keeps_only_its_user_messages_wherever_it_is() {
        let call = crate::model::ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: "{}".into(),
        };
        let events = vec![
            user("seed"),
            SessionEvent::TurnStart { turn: 1 },
            user("one"),
            SessionEvent::TurnEnd {
                turn: 1,
                reason: StopReason::Completed,
                usage: None,
            },
            // Cut short: a call with no result, no end.
            SessionEvent::TurnStart { turn: 2 },
            user("two"),
            SessionEvent::AssistantMessage {
                text: String::new(),
                tool_calls: vec![call],
            },
            SessionEvent::TurnStart { turn: 2 },
            user("three"),
            SessionEvent::TurnEnd {
                turn: 2,
                reason: StopReason::Completed,
                usage: None,
            },
            SessionEvent::TurnStart { turn: 3 },
            user("four"),
        ];
        let kept = replay(events);
        let texts: Vec<String> = kept
            .iter()
            .filter_map(|e| match e {
                SessionEvent::UserMessage { content } => Some(blocks_text(content)),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["seed", "one", "two", "three", "four"]);
        assert!(!kept
            .iter()
            .any(|e| matches!(e, SessionEvent::AssistantMessage { .. })));
        // Only completed turns are turns: two starts, two ends, balanced.
        let starts = kept
            .iter()
            .filter(|e| matches!(e, SessionEvent::TurnStart { .. }))
            .count();
        let ends = kept
            .iter()
            .filter(|e| matches!(e, SessionEvent::TurnEnd { .. }))
            .count();
        assert_eq!((starts, ends), (2, 2));
    }
}
