//! What a model request is, as a recording keeps it: each message's role, size, digest and
//! opening words, and the tools offered. A replayed request is the recorded one when every
//! digest matches; the first message that does not is what the divergence shows.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::cassette::Kind;
use crate::model::ModelRequest;
use crate::tape::Divergence;

/// How much of a message a recording keeps in words (the rest only in its digest).
const PREVIEW: usize = 240;

fn digest(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    hash.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

fn preview(text: &str) -> String {
    match text.char_indices().nth(PREVIEW) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A message's text with its tool calls, as the model saw it.
fn message_text(m: &crate::model::ChatMessage) -> String {
    let mut text = m.content.clone();
    for call in &m.tool_calls {
        text.push_str(&format!(
            "\n[call {} {} {}]",
            call.id, call.name, call.arguments
        ));
    }
    text
}

/// The request as a recording keeps it.
pub(super) fn summary(request: &ModelRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let text = message_text(m);
            json!({
                "role": m.role,
                "digest": digest(&text),
                "text": preview(&text),
            })
        })
        .collect();
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    json!({ "messages": messages, "tools": tools })
}

/// The divergence of a replayed request (`now`) from the recorded one, if they differ.
pub(super) fn compare(key: &str, step: u64, recorded: &Value, now: &Value) -> Option<Divergence> {
    let diverged = |what: String, recorded: Value, now: Value| {
        Some(Divergence {
            key: key.to_string(),
            kind: Kind::Model,
            step,
            what,
            recorded,
            now,
        })
    };
    if recorded["tools"] != now["tools"] {
        return diverged(
            "the tools offered to the model differ".into(),
            recorded["tools"].clone(),
            now["tools"].clone(),
        );
    }
    let empty = Vec::new();
    let was = recorded["messages"].as_array().unwrap_or(&empty);
    let is = now["messages"].as_array().unwrap_or(&empty);
    for (i, (a, b)) in was.iter().zip(is).enumerate() {
        if a["role"] != b["role"] || a["digest"] != b["digest"] {
            return diverged(
                format!(
                    "message {} of the request ({}) differs",
                    i + 1,
                    b["role"].as_str().unwrap_or("?")
                ),
                a["text"].clone(),
                b["text"].clone(),
            );
        }
    }
    if was.len() != is.len() {
        let extra = |m: &[Value]| m.get(was.len().min(is.len())).map(|m| m["text"].clone());
        return diverged(
            format!(
                "the request has {} messages, the recording {}",
                is.len(),
                was.len()
            ),
            extra(was).unwrap_or(Value::Null),
            extra(is).unwrap_or(Value::Null),
        );
    }
    None
}
