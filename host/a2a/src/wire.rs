//! The A2A 1.0 wire, in one module: the protocol's types are those of `a2a-lf` (the official
//! `a2aproject/a2a-rs` types crate, re-exported here as they are used), with the JSON-RPC
//! binding's framing and its server-sent events.
//!
//! The same project's client and server crates (`a2a-client-lf`, `a2a-server-lf`) are not
//! used: both bring `a2a-pb` (tonic, prost and pbjson, for the gRPC binding Seam does not
//! speak) and reqwest 0.13 beside the workspace's 0.12, and the server's task store and
//! executor own tasks, where in Seam the session store and the host own every run.

use a2a::{A2AError, JsonRpcError, JsonRpcId, JsonRpcRequest, JsonRpcResponse};
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

pub use a2a::{
    methods, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Artifact, CancelTaskRequest,
    GetTaskRequest, ListTasksRequest, ListTasksResponse, Message, Part, PartContent, Role,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};

/// The protocol version Seam speaks, as the `A2A-Version` header and an interface's
/// `protocolVersion` carry it.
pub const VERSION: &str = a2a::VERSION;

/// The header a 1.0 request carries (without it a server takes the request for 0.3's).
pub const VERSION_HEADER: &str = a2a::SVC_PARAM_VERSION;

/// Where an agent's card is served, below its base URL.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The only binding Seam speaks, as a card's interfaces name it.
pub const JSONRPC: &str = a2a::TRANSPORT_PROTOCOL_JSONRPC;

/// The JSON-RPC error codes of A2A and of JSON-RPC itself.
pub use a2a::error_code;

/// What could not be read off the wire.
#[derive(Debug, Error)]
pub enum WireError {
    /// The body is not JSON, or not the JSON-RPC shape.
    #[error("not a JSON-RPC response: {0}")]
    NotJsonRpc(String),
    /// The response answers another request.
    #[error("a response to request {got:?}, not to {want:?}")]
    OtherId {
        /// The id it carries.
        got: JsonRpcId,
        /// The id asked with.
        want: JsonRpcId,
    },
    /// The peer answered with a JSON-RPC error.
    #[error("{} ({})", .0.message, .0.code)]
    Remote(JsonRpcError),
    /// The result is not what the method returns.
    #[error("a `{method}` result that is not one: {detail}")]
    Shape {
        /// The method.
        method: String,
        /// Why.
        detail: String,
    },
}

impl WireError {
    /// The JSON-RPC error code, when the peer answered with one.
    pub fn code(&self) -> Option<i32> {
        match self {
            Self::Remote(e) => Some(e.code),
            _ => None,
        }
    }
}

/// A JSON-RPC request's body.
pub fn request(id: &JsonRpcId, method: &str, params: &impl Serialize) -> Vec<u8> {
    let request = JsonRpcRequest::new(id.clone(), method, serde_json::to_value(params).ok());
    serde_json::to_vec(&request).unwrap_or_default()
}

/// The result of the JSON-RPC response `body` to request `id`, read as `T`.
pub fn result<T: serde::de::DeserializeOwned>(
    method: &str,
    id: &JsonRpcId,
    body: &[u8],
) -> Result<T, WireError> {
    let value = result_value(id, body)?;
    serde_json::from_value(value).map_err(|e| WireError::Shape {
        method: method.to_string(),
        detail: e.to_string(),
    })
}

/// The raw result of the JSON-RPC response `body` to request `id`.
pub fn result_value(id: &JsonRpcId, body: &[u8]) -> Result<Value, WireError> {
    let response: JsonRpcResponse =
        serde_json::from_slice(body).map_err(|e| WireError::NotJsonRpc(e.to_string()))?;
    if response.id != *id && response.id != JsonRpcId::Null {
        return Err(WireError::OtherId {
            got: response.id,
            want: id.clone(),
        });
    }
    match (response.result, response.error) {
        (_, Some(error)) => Err(WireError::Remote(error)),
        (Some(result), None) => Ok(result),
        (None, None) => Err(WireError::NotJsonRpc(
            "it has neither `result` nor `error`".into(),
        )),
    }
}

/// A success response's body.
pub fn success(id: JsonRpcId, result: &impl Serialize) -> Vec<u8> {
    let result = serde_json::to_value(result).unwrap_or(Value::Null);
    serde_json::to_vec(&JsonRpcResponse::success(id, result)).unwrap_or_default()
}

/// An error response's body.
pub fn failure(id: JsonRpcId, error: &A2AError) -> Vec<u8> {
    serde_json::to_vec(&JsonRpcResponse::error(id, error.to_jsonrpc_error())).unwrap_or_default()
}

/// One server-sent event carrying a JSON-RPC response (a stream's every event is one).
pub fn sse_event(response: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(response.len() + 8);
    frame.extend_from_slice(b"data: ");
    // serde_json escapes every newline inside strings: the JSON is one line, one `data:`.
    frame.extend_from_slice(response);
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

/// The text of `parts`, joined by newlines (data parts as JSON; files by their URL or name).
pub fn parts_text(parts: &[Part]) -> String {
    let mut out = Vec::new();
    for part in parts {
        match &part.content {
            PartContent::Text(t) => out.push(t.clone()),
            PartContent::Data(d) => out.push(d.to_string()),
            PartContent::Url(u) => out.push(u.clone()),
            PartContent::Raw(_) => out.push(format!(
                "[file{}]",
                part.filename
                    .as_deref()
                    .map(|f| format!(" `{f}`"))
                    .unwrap_or_default()
            )),
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_to_another_request_or_with_an_error_is_refused() {
        let id = JsonRpcId::String("1".into());
        let ok = success(id.clone(), &serde_json::json!({"x": 1}));
        assert_eq!(result_value(&id, &ok).unwrap()["x"], 1);
        let other = JsonRpcId::String("2".into());
        assert!(matches!(
            result_value(&other, &ok),
            Err(WireError::OtherId { .. })
        ));
        let err = failure(id.clone(), &A2AError::task_not_found("t"));
        let e = result_value(&id, &err).unwrap_err();
        assert_eq!(e.code(), Some(error_code::TASK_NOT_FOUND));
        assert!(matches!(
            result_value(&id, b"<html>"),
            Err(WireError::NotJsonRpc(_))
        ));
    }

    #[test]
    fn the_wire_is_1_0s() {
        let mut message = Message::new(Role::User, vec![Part::text("hi")]);
        message.message_id = "m".into();
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(json["role"], "ROLE_USER");
        assert_eq!(json["parts"][0]["text"], "hi");
        let state = serde_json::to_value(TaskState::InputRequired).unwrap();
        assert_eq!(state, "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(methods::SEND_STREAMING_MESSAGE, "SendStreamingMessage");
        assert_eq!((VERSION_HEADER, VERSION), ("A2A-Version", "1.0"));
        assert_eq!(&sse_event(b"{}")[..], b"data: {}\n\n");
    }
}
