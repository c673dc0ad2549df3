//! Model adapters behind one trait, chosen by an agent's `model` string.
//!
//! - `scripted:NAME`: deterministic replies from the script `NAME` in the config (tests, demo).
//! - `openai` or `openai:MODEL`: an OpenAI-compatible chat-completions endpoint (DeepSeek,
//!   OpenAI, local servers), configured under `[models.openai]`, and `NAME` for
//!   `[models.endpoints.NAME]`: built by the [`EndpointAdapter`] a host gives the registry (the
//!   `seam-model-openai` crate's).

pub mod config;
mod registry;
pub mod scripted;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio_util::sync::CancellationToken;

pub use config::{ModelsConfig, OpenAiConfig, Script, ScriptStep};
pub use registry::{EndpointAdapter, ModelRegistry};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The user (or the delegating parent).
    User,
    /// The model.
    Assistant,
    /// A tool's answer.
    Tool,
}

pub use seam_core::types::ToolCall;

/// Name of the capture tool an agent asked for a structured answer offers its model (and a
/// scripted step's `structured` shorthand calls).
pub const STRUCTURED_OUTPUT_TOOL: &str = "structured_output";

/// One message of the conversation sent to a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// For assistant messages: the tool calls it made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the call answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message with just text.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// Wording for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// What is sent to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRequest {
    /// The conversation, system prompt first.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The W3C `traceparent` of the call's span, for an endpoint that traces (see
    /// [`seam_core::trace`]).
    pub traceparent: Option<String>,
    /// The most completion tokens the reply may use: what the tree's budget holds for it, or
    /// the endpoint's own `max_tokens`, whichever is less (`None`: the endpoint's default).
    pub max_tokens: Option<u64>,
}

/// Why the model stopped producing this reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// A final answer (or a turn that only calls tools).
    Stop,
    /// It wants tools to run.
    ToolCalls,
    /// It ran out of output tokens.
    Length,
    /// It declined (content filter or refusal).
    Refusal,
}

/// A model's reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelReply {
    /// Its text (possibly empty when it only calls tools).
    pub text: String,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub finish: FinishReason,
    /// The tokens it used, when the endpoint said.
    pub usage: Option<seam_core::types::Usage>,
    /// What a reasoning model said before its answer (`reasoning_content`): never part of the
    /// answer.
    pub reasoning: String,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModelError {
    /// The model string names no adapter, or its config is missing.
    #[error("model `{model}`: {message}")]
    Config {
        /// The model string.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// The endpoint answered with an error status.
    #[error("HTTP {status} from the model endpoint: {body}")]
    Http {
        /// Status code.
        status: u16,
        /// The (shortened) response body.
        body: String,
    },
    /// No answer in time.
    #[error("the model endpoint did not answer within {0} ms")]
    Timeout(u64),
    /// The connection failed.
    #[error("cannot reach the model endpoint: {0}")]
    Transport(String),
    /// The connection failed after the answer began (a streamed reply cut off).
    #[error("the model endpoint's stream broke after the answer began: {0}")]
    StreamBroke(String),
    /// The answer could not be understood.
    #[error("unexpected answer from the model endpoint: {0}")]
    Protocol(String),
    /// A replay found no recorded reply that fits, or reached its `--until` step (the
    /// divergence is kept on the replay's tape).
    #[error("replay: {0}")]
    Replay(String),
    /// A scripted model was told to fail, or ran out of steps.
    #[error("scripted model: {0}")]
    Scripted(String),
    /// The call was aborted.
    #[error("the model call was aborted")]
    Aborted,
}

/// A chat model.
pub trait Model: Send + Sync {
    /// Produces the next reply for `request`. Resolves `Aborted` soon after `abort` fires.
    fn complete(
        &self,
        request: ModelRequest,
        abort: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelReply, ModelError>>;

    /// What its tokens cost, when its config says (a cost budget needs it).
    fn prices(&self) -> Option<seam_core::spend::Prices> {
        None
    }

    /// The most completion tokens one reply may use, when its config bounds it.
    fn max_tokens(&self) -> Option<u64> {
        None
    }
}
