//! The chat-completions wire format: the request body, and the reply read from one JSON body or
//! put together from stream deltas. Every reply field is optional: servers differ in what they
//! include.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use seam_agent::model::{
    ChatMessage, FinishReason, ModelError, ModelReply, ModelRequest, OpenAiConfig, Role, ToolCall,
    ToolSpec,
};

/// Characters of an error body kept in [`ModelError::Http`].
pub(super) const ERROR_BODY_CHARS: usize = 300;

// ---------------------------------------------------------------------------------------------
// Request

/// The JSON body of a chat-completions request.
pub(super) fn request_body(config: &OpenAiConfig, request: &ModelRequest) -> Value {
    let mut body = json!({
        "model": config.model,
        "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
        "stream": config.stream,
    });
    if config.stream {
        // The usage of a streamed reply comes in a last chunk, only when asked for.
        body["stream_options"] = json!({ "include_usage": true });
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(wire_tool).collect();
    }
    if let Some(t) = config.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(max) = request.max_tokens {
        body["max_tokens"] = json!(max);
    }
    body
}

fn wire_message(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = json!({ "role": role, "content": message.content });
    if message.role == Role::Assistant && !message.tool_calls.is_empty() {
        // The wire format's way to say "this turn only called tools".
        if message.content.is_empty() {
            out["content"] = Value::Null;
        }
        out["tool_calls"] = message
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
    }
    if let Some(id) = &message.tool_call_id {
        out["tool_call_id"] = json!(id);
    }
    out
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Reply

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    error: Option<Value>,
    /// The tokens used: in the body, or in a stream's last chunk.
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl WireUsage {
    fn usage(self) -> seam_core::types::Usage {
        seam_core::types::Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
        }
    }
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    /// Non-streaming.
    #[serde(default)]
    message: Option<WireMessage>,
    /// Streaming.
    #[serde(default)]
    delta: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireMessage {
    /// A string, or an array of parts (`{"type":"text","text":..}`) that some servers send.
    #[serde(default)]
    content: Option<Value>,
    /// What a reasoning model thought (DeepSeek's, and servers that copy it).
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    /// Present in stream deltas; some servers leave it out.
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    /// A JSON string per the spec; some local servers send the object itself.
    #[serde(default)]
    arguments: Option<Value>,
}

fn arguments_text(value: Option<Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}

/// An error object the endpoint put in a 200 answer (or a stream chunk).
fn embedded_error(error: Option<Value>) -> Result<(), ModelError> {
    match error {
        None | Some(Value::Null) => Ok(()),
        Some(e) => Err(ModelError::Protocol(format!(
            "the endpoint reported an error: {}",
            shorten(&error_message(&e.to_string()), ERROR_BODY_CHARS)
        ))),
    }
}

/// A reply being put together (from one message or from many deltas).
#[derive(Default)]
pub(super) struct Builder {
    text: String,
    refusal: String,
    /// Tool calls by their stream index.
    calls: BTreeMap<u32, PartialCall>,
    finish: Option<String>,
    usage: Option<seam_core::types::Usage>,
    reasoning: String,
}

/// The text of a message's `content`: a string, or the text parts of an array of parts.
fn content_text(content: Value, out: &mut String) {
    match content {
        Value::String(s) => out.push_str(&s),
        Value::Array(parts) => {
            for part in parts {
                match part {
                    Value::String(s) => out.push_str(&s),
                    Value::Object(map) => {
                        let is_text = map
                            .get("type")
                            .and_then(Value::as_str)
                            .is_none_or(|t| t == "text");
                        if let (true, Some(Value::String(text))) = (is_text, map.get("text")) {
                            out.push_str(text);
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl Builder {
    /// Whether a finish reason arrived (a stream may end without `[DONE]` once it has).
    pub(super) fn has_finish(&self) -> bool {
        self.finish.is_some()
    }

    fn add(&mut self, message: WireMessage) {
        if let Some(content) = message.content {
            content_text(content, &mut self.text);
        }
        if let Some(reasoning) = message.reasoning_content {
            self.reasoning.push_str(&reasoning);
        }
        if let Some(refusal) = message.refusal {
            self.refusal.push_str(&refusal);
        }
        for (position, call) in message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let index = self.call_index(&call, position);
            let slot = self.calls.entry(index).or_default();
            // Id and name come once, first; a repeated one (some servers resend) is not appended.
            if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                if slot.id.is_empty() {
                    slot.id = id;
                }
            }
            if let Some(function) = call.function {
                if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                    if slot.name.is_empty() {
                        slot.name = name;
                    }
                }
                slot.arguments.push_str(&arguments_text(function.arguments));
            }
        }
    }

    /// Which call a tool-call entry belongs to: its `index` when given; otherwise a new call when
    /// it brings a new id, else the latest call (servers that omit `index` send calls in order).
    fn call_index(&self, call: &WireToolCall, position: usize) -> u32 {
        if let Some(index) = call.index {
            return index;
        }
        let last = self.calls.iter().next_back();
        match (last, call.id.as_deref().filter(|id| !id.is_empty())) {
            (None, _) => u32::try_from(position).unwrap_or(u32::MAX),
            (Some((&i, slot)), Some(id)) if slot.id != id => i.saturating_add(1),
            (Some((&i, _)), _) => i,
        }
    }

    /// The reply, once everything arrived.
    pub(super) fn finish(self) -> Result<ModelReply, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (n, (index, call)) in self.calls.into_iter().enumerate() {
            if call.name.is_empty() {
                return Err(ModelError::Protocol(format!(
                    "tool call {index} has no function name"
                )));
            }
            tool_calls.push(ToolCall {
                // Some local servers send no id; the answer still needs one to refer to.
                id: if call.id.is_empty() {
                    format!("call_{n}")
                } else {
                    call.id
                },
                name: call.name,
                // A call with no arguments means `{}`, which every tool can parse.
                arguments: if call.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    call.arguments
                },
            });
        }
        let refused = !self.refusal.is_empty();
        let finish = match self.finish.as_deref() {
            _ if refused => FinishReason::Refusal,
            Some("stop") => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            // DeepSeek's "insufficient_system_resource" also means the reply was cut short.
            Some("length" | "insufficient_system_resource") => FinishReason::Length,
            Some("content_filter") => FinishReason::Refusal,
            // Missing or unknown: infer from what arrived.
            _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        let text = if refused && self.text.is_empty() {
            self.refusal
        } else {
            self.text
        };
        Ok(ModelReply {
            text,
            tool_calls,
            finish,
            usage: self.usage,
            reasoning: self.reasoning,
        })
    }
}

/// Parses a non-streaming completion body.
pub(super) fn parse_completion(bytes: &[u8]) -> Result<ModelReply, ModelError> {
    let completion: Completion = serde_json::from_slice(bytes).map_err(|e| {
        ModelError::Protocol(format!(
            "the completion is not valid JSON ({e}): {}",
            shorten(&String::from_utf8_lossy(bytes), 120)
        ))
    })?;
    embedded_error(completion.error)?;
    let choice = completion
        .choices
        .into_iter()
        .min_by_key(|c| c.index)
        .ok_or_else(|| ModelError::Protocol("the completion has no choices".into()))?;
    let message = choice
        .message
        .ok_or_else(|| ModelError::Protocol("the completion's choice has no message".into()))?;
    let mut builder = Builder::default();
    builder.add(message);
    builder.finish = choice.finish_reason;
    builder.usage = completion.usage.map(WireUsage::usage);
    builder.finish()
}

/// Applies one stream event's data to the reply; true once `[DONE]` arrived.
pub(super) fn apply_event(builder: &mut Builder, data: &str) -> Result<bool, ModelError> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(true);
    }
    if data.is_empty() {
        return Ok(false);
    }
    let chunk: Completion = serde_json::from_str(data).map_err(|e| {
        ModelError::Protocol(format!(
            "a stream event is not valid JSON ({e}): {}",
            shorten(data, 120)
        ))
    })?;
    embedded_error(chunk.error)?;
    if let Some(usage) = chunk.usage {
        builder.usage = Some(usage.usage());
    }
    // Only the first choice is asked for; a final usage-only chunk has none.
    for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
        if let Some(delta) = choice.delta.or(choice.message) {
            builder.add(delta);
        }
        if let Some(reason) = choice.finish_reason {
            builder.finish = Some(reason);
        }
    }
    Ok(false)
}

/// The message inside an OpenAI-style error body (`{"error":{"message":..}}`), else the body.
pub(super) fn error_message(raw: &str) -> String {
    let from_json = serde_json::from_str::<Value>(raw).ok().and_then(|v| {
        let error = v.get("error").unwrap_or(&v);
        match error {
            Value::String(s) => Some(s.clone()),
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    });
    from_json.unwrap_or_else(|| raw.split_whitespace().collect::<Vec<_>>().join(" "))
}

pub(super) fn shorten(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_shortened() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"auth"}}"#),
            "bad key"
        );
        assert_eq!(error_message("  plain\n text "), "plain text");
        let long = "é".repeat(500);
        assert_eq!(shorten(&long, 10).chars().count(), 11);
    }
}
