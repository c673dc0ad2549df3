//! The spans of the delegation tree, drawn from the lifecycle events as they are delivered.
//!
//! - `agent.turn`: an agent's turn; a run's child's turns lie under the run.
//! - `tool.call`: a tool call, under the turn that made it.
//! - `subagent.run`: a run, under the tool call that started it (the calling agent's latest
//!   open call, else its turn), begun when the run is first seen: its child's creation, a
//!   `traceparent` asked for it, or its `subagent/start`, whichever comes first, so that what
//!   its provider sends before the start is announced already carries it. A background run
//!   outlives the call that started it, as its span does.
//! - `model.call`: begun and ended by the agent loop through [`seam_core::trace`].
//! - `plugin.load`: a component's load.
//!
//! A command's root span (`seam run`, [`Spans::begin_command`]) is the parent of whatever would
//! otherwise have none (the loads, the top-level agent's turns, a run the command starts itself),
//! so that one command is one trace. Without one (a server such as `seam acp`, which answers
//! many requests) those spans are roots of their own.
//!
//! A failed turn, call or run has the error status with its diagnostic.

use std::collections::HashMap;
use std::sync::Mutex;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracer;
use seam_core::trace::{OpenSpan, RunBegun, Scope, Tracer, Under};
use seam_core::types::{StopReason, Usage};

use seam_core::events::Event;
use seam_core::sync::lock;

#[derive(Default)]
struct AgentSpans {
    turn: Option<Context>,
    /// Open tool calls, oldest first.
    calls: Vec<(String, Context)>,
}

#[derive(Default)]
struct State {
    agents: HashMap<String, AgentSpans>,
    runs: HashMap<String, Context>,
    /// Requests for approval waiting for an answer, by id.
    approvals: HashMap<String, Context>,
    /// The command's root span, while it is open.
    root: Option<Context>,
}

/// The open spans of every agent, call and run.
pub struct Spans {
    tracer: SdkTracer,
    state: Mutex<State>,
}

fn traceparent_of(cx: &Context) -> Option<String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove("traceparent")
}

fn end(cx: &Context, failed: Option<&str>) {
    let span = cx.span();
    if let Some(why) = failed {
        span.set_status(Status::error(why.to_string()));
    }
    span.end();
}

fn usage_attributes(usage: &Usage) -> [KeyValue; 2] {
    [
        KeyValue::new("gen_ai.usage.input_tokens", usage.prompt_tokens as i64),
        KeyValue::new("gen_ai.usage.output_tokens", usage.completion_tokens as i64),
    ]
}

impl State {
    /// Where a span that has no other parent goes: under the command's root, if there is one.
    fn base(&self) -> Context {
        self.root.clone().unwrap_or_default()
    }

    /// Where a span of agent `agent`'s own work goes: its turn, else the run it is the child of.
    fn agent_context(&self, agent: &str) -> Option<Context> {
        self.agents
            .get(agent)
            .and_then(|a| a.turn.clone())
            .or_else(|| self.runs.get(agent).cloned())
    }

    /// Where a run started by `parent` goes: its latest open call, else its turn.
    fn caller_context(&self, parent: &str) -> Context {
        self.agents
            .get(parent)
            .and_then(|a| a.calls.last().map(|(_, cx)| cx.clone()))
            .or_else(|| self.agent_context(parent))
            .unwrap_or_else(|| self.base())
    }
}

impl Spans {
    /// Spans made with `tracer`.
    pub fn new(tracer: SdkTracer) -> Self {
        Self {
            tracer,
            state: Mutex::default(),
        }
    }

    fn start(&self, name: &'static str, parent: &Context, attributes: Vec<KeyValue>) -> Context {
        let span = self
            .tracer
            .span_builder(name)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, parent);
        parent.with_span(span)
    }

    /// The run's span, begun now if it has not been: under `parent`'s call, or the remote
    /// span, `under` names, else under what `parent` is doing.
    fn run(&self, state: &mut State, run: &str, parent: &str, under: Under<'_>) -> Context {
        self.run_with(state, run, parent, under, Vec::new())
    }

    /// [`Spans::run`], with `more` attributes on a span begun now.
    fn run_with(
        &self,
        state: &mut State,
        run: &str,
        parent: &str,
        under: Under<'_>,
        mut more: Vec<KeyValue>,
    ) -> Context {
        if let Some(cx) = state.runs.get(run) {
            return cx.clone();
        }
        let named = match under {
            Under::Call(call) => state
                .agents
                .get(parent)
                .and_then(|a| a.calls.iter().find(|(c, _)| c == call))
                .map(|(_, cx)| cx.clone()),
            Under::Remote(traceparent) => {
                let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
                let cx = TraceContextPropagator::new().extract(&carrier);
                cx.span().span_context().is_valid().then_some(cx)
            }
            Under::Unknown => None,
        };
        let caller = named.unwrap_or_else(|| state.caller_context(parent));
        more.push(KeyValue::new("seam.run.id", run.to_string()));
        more.push(KeyValue::new("seam.parent.agent", parent.to_string()));
        let cx = self.start("subagent.run", &caller, more);
        state.runs.insert(run.to_string(), cx.clone());
        cx
    }

    /// Draws what `event` begins or ends.
    pub fn on_event(&self, event: &Event) {
        let mut state = lock(&self.state);
        match event {
            Event::AgentCreated {
                id,
                parent: Some(parent),
                ..
            } => {
                self.run(&mut state, id, parent, Under::Unknown);
            }
            Event::AgentTurnStart { id, turn } => {
                let parent = state.runs.get(id).cloned().unwrap_or_else(|| state.base());
                let cx = self.start(
                    "agent.turn",
                    &parent,
                    vec![
                        KeyValue::new("seam.agent.id", id.clone()),
                        KeyValue::new("seam.turn", i64::from(*turn)),
                    ],
                );
                if let Some(old) = state.agents.entry(id.clone()).or_default().turn.replace(cx) {
                    end(&old, None);
                }
            }
            Event::AgentToolCall { id, call, tool } => {
                let parent = state.agent_context(id).unwrap_or_else(|| state.base());
                let cx = self.start(
                    "tool.call",
                    &parent,
                    vec![
                        KeyValue::new("seam.tool.name", tool.clone()),
                        KeyValue::new("seam.tool.call", call.clone()),
                        KeyValue::new("seam.agent.id", id.clone()),
                    ],
                );
                state
                    .agents
                    .entry(id.clone())
                    .or_default()
                    .calls
                    .push((call.clone(), cx));
            }
            Event::AgentToolResult {
                id, call, is_error, ..
            } => {
                let Some(agent) = state.agents.get_mut(id) else {
                    return;
                };
                if let Some(at) = agent.calls.iter().position(|(c, _)| c == call) {
                    let (_, cx) = agent.calls.remove(at);
                    end(&cx, is_error.then_some("the tool returned an error"));
                }
            }
            Event::AgentTurnEnd {
                id,
                stop_reason,
                diagnostic,
                usage,
                cost_usd,
                ..
            } => {
                let Some(cx) = state.agents.get_mut(id).and_then(|a| a.turn.take()) else {
                    return;
                };
                let span = cx.span();
                span.set_attribute(KeyValue::new(
                    "seam.stop_reason",
                    stop_reason.as_str().to_string(),
                ));
                if let Some(usage) = usage {
                    span.set_attributes(usage_attributes(usage));
                }
                if let Some(cost) = cost_usd {
                    span.set_attribute(KeyValue::new("seam.cost_usd", *cost));
                }
                let failed = (*stop_reason == StopReason::Error)
                    .then(|| diagnostic.as_deref().unwrap_or("the turn failed"));
                end(&cx, failed);
            }
            // The provider and plugin were set when the run was made (`run_begun`).
            Event::SubagentStart { id, parent, .. } => {
                let cx = self.run(&mut state, id, &parent.id, Under::Unknown);
                cx.span()
                    .set_attribute(KeyValue::new("seam.depth", i64::from(parent.depth) + 1));
            }
            Event::SubagentEnd {
                id,
                parent,
                stop_reason,
                diagnostic,
                usage,
                cost_usd,
                ..
            } => {
                let cx = self.run(&mut state, id, &parent.id, Under::Unknown);
                state.runs.remove(id);
                let span = cx.span();
                span.set_attribute(KeyValue::new(
                    "seam.stop_reason",
                    stop_reason.as_str().to_string(),
                ));
                if let Some(d) = diagnostic {
                    span.set_attribute(KeyValue::new("seam.diagnostic", d.clone()));
                }
                // What the run's whole subtree used.
                if let Some(usage) = usage {
                    span.set_attributes(usage_attributes(usage));
                }
                if let Some(cost) = cost_usd {
                    span.set_attribute(KeyValue::new("seam.cost_usd", *cost));
                }
                let failed = (*stop_reason == StopReason::Error)
                    .then(|| diagnostic.as_deref().unwrap_or("the run failed"));
                end(&cx, failed);
            }
            // A wait for a yes is a span of its own under the agent or run that asked.
            Event::ApprovalRequested {
                id, subject, path, ..
            } => {
                let asker = path.last().map(String::as_str).unwrap_or_default();
                let parent = state
                    .agent_context(asker)
                    .unwrap_or_else(|| state.caller_context(asker));
                let cx = self.start(
                    "approval",
                    &parent,
                    vec![
                        KeyValue::new("seam.approval.id", id.clone()),
                        KeyValue::new("seam.approval.subject", subject.describe()),
                        KeyValue::new("seam.approval.path", path.join(" > ")),
                    ],
                );
                if let Some(old) = state.approvals.insert(id.clone(), cx) {
                    end(&old, None);
                }
            }
            Event::ApprovalResolved {
                id,
                allowed,
                always,
                by,
                reason,
            } => {
                let Some(cx) = state.approvals.remove(id) else {
                    return;
                };
                let span = cx.span();
                span.set_attributes([
                    KeyValue::new("seam.approval.allowed", *allowed),
                    KeyValue::new("seam.approval.always", *always),
                    KeyValue::new("seam.approval.by", by.clone()),
                ]);
                if let Some(reason) = reason {
                    span.set_attribute(KeyValue::new("seam.approval.reason", reason.clone()));
                }
                end(&cx, None);
            }
            Event::AgentDisposed { id } => {
                if let Some(agent) = state.agents.remove(id) {
                    for (_, cx) in agent.calls {
                        end(&cx, None);
                    }
                    if let Some(cx) = agent.turn {
                        end(&cx, None);
                    }
                }
            }
            _ => {}
        }
    }

    /// Opens the command's root span, `name` (`seam run`), which the spans that have no other
    /// parent lie under until [`Spans::end_command`]. A second call is ignored: one command,
    /// one root.
    pub fn begin_command(&self, name: &str) {
        let mut state = lock(&self.state);
        if state.root.is_some() {
            return;
        }
        let span = self
            .tracer
            .span_builder(name.to_string())
            .with_attributes([KeyValue::new("seam.command", name.to_string())])
            .start_with_context(&self.tracer, &Context::new());
        state.root = Some(Context::new().with_span(span));
    }

    /// Ends the command's root span (what is still open under it first, marked unfinished),
    /// with the command's exit code, and the error status unless the code is 0: `error` says
    /// why, when the command failed with an error.
    pub fn end_command(&self, exit_code: u8, error: Option<&str>) {
        let mut state = lock(&self.state);
        Self::end_open(&mut state);
        let Some(cx) = state.root.take() else {
            return;
        };
        cx.span()
            .set_attribute(KeyValue::new("process.exit.code", i64::from(exit_code)));
        let failed = (exit_code != 0).then(|| {
            error.map_or_else(
                || format!("`seam` exited with code {exit_code}"),
                str::to_string,
            )
        });
        end(&cx, failed.as_deref());
    }

    /// A `plugin.load` span, begun at `began` and ended now, under the command's root.
    pub fn plugin_load<E: std::fmt::Display>(
        &self,
        id: &str,
        path: &std::path::Path,
        began: std::time::SystemTime,
        outcome: Result<&'static str, &E>,
    ) {
        let mut attributes = vec![
            KeyValue::new("seam.plugin.id", id.to_string()),
            KeyValue::new("seam.plugin.component", path.display().to_string()),
        ];
        if let Ok(origin) = outcome {
            attributes.push(KeyValue::new("seam.plugin.code", origin));
        }
        let parent = lock(&self.state).base();
        let span = self
            .tracer
            .span_builder("plugin.load")
            .with_start_time(began)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        let cx = parent.with_span(span);
        let failed = outcome.err().map(ToString::to_string);
        end(&cx, failed.as_deref());
    }

    /// Ends every span still open, marked unfinished (the process is exiting).
    pub fn end_all(&self) {
        let mut state = lock(&self.state);
        Self::end_open(&mut state);
        // Last: its children end within it.
        if let Some(cx) = state.root.take() {
            cx.span()
                .set_attribute(KeyValue::new("seam.unfinished", true));
            end(&cx, None);
        }
    }

    /// Ends every turn, call and run still open, marked unfinished.
    fn end_open(state: &mut State) {
        let unfinished = KeyValue::new("seam.unfinished", true);
        for (_, agent) in state.agents.drain() {
            for (_, cx) in agent
                .calls
                .into_iter()
                .chain(agent.turn.map(|t| (String::new(), t)))
            {
                cx.span().set_attribute(unfinished.clone());
                end(&cx, None);
            }
        }
        for (_, cx) in state.runs.drain() {
            cx.span().set_attribute(unfinished.clone());
            end(&cx, None);
        }
    }
}

struct ModelCall(Context);

impl OpenSpan for ModelCall {
    fn traceparent(&self) -> Option<String> {
        traceparent_of(&self.0)
    }

    fn end(self: Box<Self>, usage: Option<&Usage>, error: Option<&str>) {
        if let Some(usage) = usage {
            self.0.span().set_attributes(usage_attributes(usage));
        }
        end(&self.0, error);
    }
}

impl Tracer for Spans {
    fn traceparent(&self, scope: Scope<'_>) -> Option<String> {
        let mut state = lock(&self.state);
        let cx = match scope {
            Scope::Run { run, parent } => Some(self.run(&mut state, run, parent, Under::Unknown)),
            Scope::ToolCall { agent, call } => state
                .agents
                .get(agent)
                .and_then(|a| a.calls.iter().find(|(c, _)| c == call))
                .map(|(_, cx)| cx.clone())
                .or_else(|| state.agent_context(agent)),
            Scope::Agent(agent) => {
                Some(state.caller_context(agent)).filter(|cx| cx.has_active_span())
            }
        }?;
        traceparent_of(&cx)
    }

    fn run_begun(&self, begun: &RunBegun<'_>) {
        let mut state = lock(&self.state);
        let attributes = vec![
            KeyValue::new("seam.provider", begun.provider.to_string()),
            KeyValue::new("seam.plugin", begun.plugin.to_string()),
        ];
        self.run_with(&mut state, begun.run, begun.parent, begun.under, attributes);
    }

    fn model_call(&self, agent: &str, model: &str) -> Box<dyn OpenSpan> {
        let state = lock(&self.state);
        let parent = state.agent_context(agent).unwrap_or_else(|| state.base());
        drop(state);
        Box::new(ModelCall(self.start(
            "model.call",
            &parent,
            vec![
                KeyValue::new("gen_ai.request.model", model.to_string()),
                KeyValue::new("seam.agent.id", agent.to_string()),
            ],
        )))
    }
}
