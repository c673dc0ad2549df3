//! What a model request is, as a recording keeps it: each message's role, size, digest and
//! opening words, and the tools offered. A replayed request is the recorded one when every
//! digest matches; the first message that does not is what the divergence shows.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::model::ModelRequest;
use seam_core::cassette::Kind;
use seam_core::tape::Divergence;

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

/// A call of a tool served outside Wasm, as a recording keeps it.
fn tool_call(call: &crate::model::ToolCall) -> Value {
    json!({ "id": call.id, "tool": call.name, "arguments": call.arguments })
}

/// Records the result of `call`, a tool served outside Wasm, under `key`.
pub(super) fn record_tool(
    tape: &seam_core::tape::Tape,
    key: &str,
    call: &crate::model::ToolCall,
    result: &seam_core::types::ToolResult,
) {
    tape.record(
        key,
        Kind::Tool,
        json!({ "call": tool_call(call), "result": result }),
    );
}

/// The recorded result of `call`, a tool served outside Wasm: what the recording has for this
/// agent's next such call, when it is the same call (else the divergence, and an error result).
pub(super) fn tool_result(
    tape: &seam_core::tape::Tape,
    key: &str,
    call: &crate::model::ToolCall,
) -> seam_core::types::ToolResult {
    use seam_core::tape::Played;
    let now = tool_call(call);
    match tape.play(key, Kind::Tool) {
        Played::Entry(step, body) => {
            if body["call"]["tool"] != now["tool"] || body["call"]["arguments"] != now["arguments"]
            {
                tape.diverge(Divergence {
                    key: key.to_string(),
                    kind: Kind::Tool,
                    step,
                    what: format!("the call of tool `{}` differs", call.name),
                    recorded: body["call"].clone(),
                    now,
                });
                return seam_core::types::ToolResult::error(
                    "replay: this call is not the recorded one",
                );
            }
            serde_json::from_value(body["result"].clone()).unwrap_or_else(|e| {
                seam_core::types::ToolResult::error(format!(
                    "replay: unreadable recorded result: {e}"
                ))
            })
        }
        Played::Missing | Played::Stopped => {
            seam_core::types::ToolResult::error("replay: no recorded result for this call")
        }
    }
}

/// Records the answer to a request for approval of `subject`, under `key`.
pub(super) fn record_approval(
    tape: &seam_core::tape::Tape,
    key: &str,
    subject: &seam_core::approval::Subject,
    outcome: &Result<(), seam_core::approvals::Refused>,
) {
    tape.record(
        key,
        Kind::Approval,
        json!({
            "subject": subject,
            "allowed": outcome.is_ok(),
            "refused": outcome.as_ref().err().map(|r| r.message.clone()),
        }),
    );
}

/// The recorded answer to the next request for approval of `key`, when it is about the same
/// thing (else the divergence, and a refusal).
pub(super) fn approval(
    tape: &seam_core::tape::Tape,
    key: &str,
    subject: &seam_core::approval::Subject,
) -> Result<(), seam_core::approvals::Refused> {
    use seam_core::tape::Played;
    let refused = |message: String| seam_core::approvals::Refused {
        id: String::new(),
        message,
    };
    let now = serde_json::to_value(subject).unwrap_or(Value::Null);
    match tape.play(key, Kind::Approval) {
        Played::Entry(step, body) => {
            if body["subject"] != now {
                tape.diverge(Divergence {
                    key: key.to_string(),
                    kind: Kind::Approval,
                    step,
                    what: "the request for approval differs".into(),
                    recorded: body["subject"].clone(),
                    now,
                });
                return Err(refused("replay: not the recorded request".into()));
            }
            if body["allowed"] == true {
                Ok(())
            } else {
                Err(refused(
                    body["refused"]
                        .as_str()
                        .unwrap_or("denied (recorded)")
                        .to_string(),
                ))
            }
        }
        Played::Missing | Played::Stopped => Err(refused(
            "replay: no recorded answer for this request".into(),
        )),
    }
}
