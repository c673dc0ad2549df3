//! The scripted model: deterministic replies, one script step per call, so that tests and the
//! demo run with no key and no network.
//!
//! A step is taken when a model call starts (a step with a `delay_ms` that is cancelled midway
//! is spent). A turn cancelled before it calls the model takes no step: the next call gets it.
//! So a test that cancels a turn and expects the next turn to see the step after must first
//! see proof that the cancelled turn's model call began (a tool call it made, say).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{
    ChatMessage, FinishReason, Model, ModelError, ModelReply, ModelRequest, Role, Script,
    ScriptStep, ToolCall, STRUCTURED_OUTPUT_TOOL,
};

/// A model that replays a script; each instance starts at the first step.
pub struct ScriptedModel {
    name: String,
    script: Script,
    next: AtomicUsize,
}

impl ScriptedModel {
    /// A model replaying `script` (named `name` in errors).
    pub fn new(name: &str, script: Script) -> Self {
        Self {
            name: name.to_string(),
            script,
            next: AtomicUsize::new(0),
        }
    }
}

fn last_user(messages: &[ChatMessage]) -> &str {
    messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
        .unwrap_or("")
}

fn last_tool_results(messages: &[ChatMessage]) -> String {
    let tail: Vec<&str> = messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

fn render(template: &str, request: &ModelRequest) -> String {
    let messages = &request.messages;
    let system = messages
        .iter()
        .find(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .unwrap_or("");
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    // How many messages of the conversation the model is shown (a fork's or a resumed
    // child's seed counts): lets a script show what its agent started from.
    let history = messages.iter().filter(|m| m.role != Role::System).count();
    // Every user message it is shown, so that a script can show what its agent was sent.
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
        .collect();
    template
        .replace("{history}", &history.to_string())
        .replace("{user_messages}", &users.join(" | "))
        .replace("{prompt}", last_user(messages))
        .replace("{tool_results}", &last_tool_results(messages))
        .replace("{system}", system)
        .replace("{tools}", &tools.join(","))
}

fn reply(step: &ScriptStep, index: usize, request: &ModelRequest) -> ModelReply {
    let text = step
        .text
        .as_deref()
        .map(|t| render(t, request))
        .unwrap_or_default();
    let mut tool_calls: Vec<ToolCall> = step
        .tool_calls
        .iter()
        .enumerate()
        .map(|(k, c)| ToolCall {
            id: format!("call-{index}-{k}"),
            name: c.name.clone(),
            arguments: c.arguments.to_string(),
        })
        .collect();
    if let Some(args) = &step.structured {
        tool_calls.push(ToolCall {
            id: format!("call-{index}-structured"),
            name: STRUCTURED_OUTPUT_TOOL.into(),
            arguments: args.to_string(),
        });
    }
    let finish = if step.refusal {
        FinishReason::Refusal
    } else if step.max_tokens {
        FinishReason::Length
    } else if !tool_calls.is_empty() {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    };
    ModelReply {
        text,
        tool_calls,
        finish,
        usage: step.usage,
        reasoning: String::new(),
    }
}

impl Model for ScriptedModel {
    fn prices(&self) -> Option<seam_core::spend::Prices> {
        self.script.prices
    }

    fn complete(
        &self,
        request: ModelRequest,
        abort: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelReply, ModelError>> {
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        let step = self.script.steps.get(index).cloned();
        let name = self.name.clone();
        Box::pin(async move {
            let Some(step) = step else {
                return Err(ModelError::Scripted(format!(
                    "script `{name}` has no step {} (it has {index})",
                    index + 1
                )));
            };
            if abort.is_cancelled() {
                return Err(ModelError::Aborted);
            }
            if step.delay_ms > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(step.delay_ms)) => {}
                    _ = abort.cancelled() => return Err(ModelError::Aborted),
                }
            }
            if let Some(message) = &step.error {
                return Err(ModelError::Scripted(message.clone()));
            }
            let mut reply = reply(&step, index, &request);
            // As an endpoint does: a reply longer than `max_tokens` is cut there.
            if let (Some(max), Some(usage)) = (request.max_tokens, reply.usage.as_mut()) {
                if usage.completion_tokens > max {
                    usage.completion_tokens = max;
                    reply.finish = FinishReason::Length;
                    reply.tool_calls.clear();
                }
            }
            Ok(reply)
        })
    }
}
