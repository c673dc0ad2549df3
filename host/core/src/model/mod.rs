//! Model adapters behind one trait, chosen by an agent's `model` string.
//!
//! - `scripted:NAME`: deterministic replies from the script `NAME` in the config (tests, demo).
//! - `openai` or `openai:MODEL`: an OpenAI-compatible chat-completions endpoint (DeepSeek,
//!   OpenAI, local servers), configured under `[models.openai]`.

pub mod config;
pub mod openai;
pub mod scripted;

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio_util::sync::CancellationToken;

pub use config::{ModelsConfig, OpenAiConfig, Script, ScriptStep};

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

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, echoed in the tool's answer.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// JSON arguments, as text.
    pub arguments: String,
}

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelReply {
    /// Its text (possibly empty when it only calls tools).
    pub text: String,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub finish: FinishReason,
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
}

/// Resolves model strings to fresh adapter instances, from the current config.
#[derive(Default)]
pub struct ModelRegistry {
    config: RwLock<ModelsConfig>,
}

impl ModelRegistry {
    /// Replaces the config (on load or reconfigure).
    pub fn configure(&self, config: ModelsConfig) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = config;
    }

    /// A new model instance for `model` (each agent gets its own, so a script starts at its
    /// first step for every agent).
    pub fn resolve(&self, model: &str) -> Result<Arc<dyn Model>, ModelError> {
        let config = self.config.read().unwrap_or_else(|p| p.into_inner());
        let (kind, rest) = match model.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (model, None),
        };
        match kind {
            "scripted" => {
                let name = rest.unwrap_or("default");
                let script =
                    config
                        .scripts
                        .get(name)
                        .cloned()
                        .ok_or_else(|| ModelError::Config {
                            model: model.to_string(),
                            message: format!("no script `{name}` under [models.scripts]"),
                        })?;
                Ok(Arc::new(scripted::ScriptedModel::new(name, script)))
            }
            "openai" => {
                let mut openai = config.openai.clone().ok_or_else(|| ModelError::Config {
                    model: model.to_string(),
                    message: "no [models.openai] section in the config".into(),
                })?;
                if let Some(name) = rest.filter(|r| !r.is_empty()) {
                    openai.model = name.to_string();
                }
                Ok(Arc::new(openai::OpenAiModel::new(openai)?))
            }
            other => Err(ModelError::Config {
                model: model.to_string(),
                message: format!(
                    "unknown adapter `{other}` (expected `scripted:NAME` or `openai[:MODEL]`)"
                ),
            }),
        }
    }
}
