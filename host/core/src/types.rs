//! The subagent seam's vocabulary on the host side.
//!
//! These mirror the WIT `types` interface but are plain Rust (serde-friendly) so that the public
//! API does not leak generated bindings; the host crate converts between the two.

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// One block of content in a prompt or an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "kebab-case")]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
    /// A JSON document, kept as text.
    Json(String),
}

impl ContentBlock {
    /// A text block.
    pub fn text(s: impl Into<String>) -> Self {
        Self::Text(s.into())
    }

    /// The block's text (JSON blocks give their source text).
    pub fn as_text(&self) -> &str {
        match self {
            Self::Text(s) | Self::Json(s) => s,
        }
    }
}

/// Joins the text of content blocks with newlines.
pub fn blocks_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a run ended. Open to extension: consumers treat [`StopReason::Other`] as a failure.
///
/// In JSON it is always one string: `completed`, `aborted`, `error`, `max-tokens`, `refusal`,
/// or the provider's own name for another reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The child finished its task.
    Completed,
    /// The run was cancelled.
    Aborted,
    /// The child failed.
    Error,
    /// The child ran out of output budget.
    MaxTokens,
    /// The model declined.
    Refusal,
    /// The tree's budget ran out (its diagnostic says which dimension, whose budget and how
    /// much was spent).
    Budget,
    /// A provider-specific reason.
    Other(String),
}

impl StopReason {
    /// The wire name (`completed`, `max-tokens`, or the provider's own name).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Completed => "completed",
            Self::Aborted => "aborted",
            Self::Error => "error",
            Self::MaxTokens => "max-tokens",
            Self::Refusal => "refusal",
            Self::Budget => "budget",
            Self::Other(s) => s,
        }
    }

    /// Only `completed` is success.
    pub fn is_success(&self) -> bool {
        matches!(self, Self::Completed)
    }
}

impl StopReason {
    /// The reason a wire name stands for: a known name, or a provider-specific one.
    pub fn from_name(name: &str) -> Self {
        match name {
            "completed" => Self::Completed,
            "aborted" => Self::Aborted,
            "error" => Self::Error,
            "max-tokens" => Self::MaxTokens,
            "refusal" => Self::Refusal,
            "budget" => Self::Budget,
            other => Self::Other(other.to_string()),
        }
    }
}

impl Serialize for StopReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(Self::from_name(&name))
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Start-time features a provider honours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Capabilities {
    /// Honours an output schema.
    pub output_schema: bool,
    /// Honours `max-depth`.
    pub depth_limit: bool,
    /// Honours a tool filter.
    pub tool_filter: bool,
    /// Honours a persona.
    pub persona: bool,
}

/// Runtime features of a live run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RuntimeFeatures {
    /// `send-message` steering.
    pub steering: bool,
    /// `resume` of a finished child.
    pub resume: bool,
}

/// What a provider declares, read once at registration and frozen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProviderDescriptor {
    /// Unique registry name.
    pub name: String,
    /// Start-time capabilities.
    pub capabilities: Capabilities,
    /// Runtime features.
    pub features: RuntimeFeatures,
    /// Whether the child sees the parent's conversation.
    pub inherits_parent_context: bool,
}

/// The agent that asks for a child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ParentRef {
    /// Agent id.
    pub id: String,
    /// Session id.
    pub session_id: String,
    /// Working directory.
    pub working_directory: String,
    /// Delegation depth (0 at top level).
    pub depth: u32,
}

impl ParentRef {
    /// A top-level caller (depth 0) with the given id, working in `cwd`.
    pub fn top_level(id: impl Into<String>, cwd: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            session_id: format!("{id}-session"),
            id,
            working_directory: cwd.into(),
            depth: 0,
        }
    }
}

/// Options for the child agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AgentOptions {
    /// Model name.
    pub model: Option<String>,
    /// System prompt.
    pub system_prompt: Option<String>,
}

/// Tool visibility for a child: at least one list must be present.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ToolFilter {
    /// Only these tools are visible.
    pub allow: Option<Vec<String>>,
    /// These tools are hidden.
    pub deny: Option<Vec<String>>,
}

/// What a caller asks for when it starts a run. Taken by value: the service works on its own
/// snapshot, so nothing the caller does afterwards reaches the run.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The task.
    pub prompt: Vec<ContentBlock>,
    /// The calling agent.
    pub parent: ParentRef,
    /// Cancels the run when triggered; an already-cancelled signal yields an `aborted` run.
    pub signal: Option<CancellationToken>,
    /// Child agent options.
    pub agent_options: Option<AgentOptions>,
    /// Object-rooted JSON Schema for a structured answer.
    pub output_schema: Option<serde_json::Value>,
    /// Absolute delegation-depth cap (signed so that a negative value can be refused).
    pub max_depth: Option<i64>,
    /// Tool visibility for the child.
    pub tool_filter: Option<ToolFilter>,
    /// Persona for this child only.
    pub persona: Option<String>,
    /// The most the run's tree may spend (the delegating entry's `config.budget`): carved from
    /// the caller's remainder, never more than it.
    pub budget: Option<crate::spend::Budget>,
    /// What the run's subtree may still reach (the delegating entry's `config.scope`):
    /// intersected with every ancestor's, never more than the caller's.
    pub scope: Option<crate::scope::Scope>,
    /// Who answers the requests for approval made in the run's subtree (the delegating entry's
    /// `config.approver`), instead of the host's surfaces.
    pub approver: Option<crate::approval::Approver>,
}

impl StartRequest {
    /// What goes before the prompt for a child whose model Seam does not run (an ACP or A2A
    /// agent): the request's system prompt, then its persona, each if given.
    pub fn preamble(&self) -> impl Iterator<Item = &str> {
        let system = self
            .agent_options
            .as_ref()
            .and_then(|o| o.system_prompt.as_deref());
        [system, self.persona.as_deref()].into_iter().flatten()
    }

    /// A request with just a text prompt and a parent.
    pub fn new(prompt: impl Into<String>, parent: ParentRef) -> Self {
        Self {
            prompt: vec![ContentBlock::text(prompt)],
            parent,
            signal: None,
            agent_options: None,
            output_schema: None,
            max_depth: None,
            tool_filter: None,
            persona: None,
            budget: None,
            scope: None,
            approver: None,
        }
    }
}

pub use crate::spend::Usage;

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SubagentResult {
    /// The child's own final words; never failure text from the host or the guest.
    pub output: Vec<ContentBlock>,
    /// The structured answer, only when a requested schema was satisfied.
    pub structured: Option<serde_json::Value>,
    /// Why the run ended.
    pub stop_reason: StopReason,
    /// Why the run failed or was stopped, in words (a trap, a limit hit, an enforced cancel,
    /// a schema violation); `None` for a clean run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
}

impl SubagentResult {
    /// A result with one text block.
    pub fn text(stop_reason: StopReason, text: impl Into<String>) -> Self {
        Self {
            output: vec![ContentBlock::text(text)],
            structured: None,
            stop_reason,
            diagnostic: None,
        }
    }

    /// A result with no words of the child's, only a diagnostic.
    pub fn failed(stop_reason: StopReason, diagnostic: impl Into<String>) -> Self {
        Self {
            output: Vec::new(),
            structured: None,
            stop_reason,
            diagnostic: Some(diagnostic.into()),
        }
    }

    /// The child's words, or, when it said nothing, the diagnostic: what a reader who gets one
    /// text (a model, a terminal, a 0.1 plugin) should see.
    pub fn answer_text(&self) -> String {
        let text = self.output_text();
        match &self.diagnostic {
            Some(d) if text.trim().is_empty() => d.clone(),
            _ => text,
        }
    }

    /// The output's text.
    pub fn output_text(&self) -> String {
        blocks_text(&self.output)
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    /// Started and not settled.
    Running,
    /// Its result is final.
    Settled,
}

/// What a caller can see of one of its runs without waiting on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunInfo {
    /// Run id.
    pub id: String,
    /// Provider name.
    pub provider: String,
    /// The label given at start (empty for a foreground run).
    pub label: String,
    /// Where it stands.
    pub state: RunState,
    /// Start time, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// Why it ended, once settled.
    pub stop_reason: Option<StopReason>,
}

/// A tool's description for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ToolDescriptor {
    /// Name the model calls.
    pub name: String,
    /// Wording for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// A tool call a model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, echoed in the tool's answer.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// JSON arguments, as text.
    pub arguments: String,
}

/// What a tool call returns to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ToolResult {
    /// The answer.
    pub content: Vec<ContentBlock>,
    /// Whether the call failed.
    pub is_error: bool,
}

impl ToolResult {
    /// A failed call with a message.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(message)],
            is_error: true,
        }
    }

    /// The content's text.
    pub fn text(&self) -> String {
        blocks_text(&self.content)
    }
}

/// What kind of plugin a component is, by the world it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(strum::EnumIter))]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    /// Exports `seam:plugin/provider`: registers a subagent provider.
    Provider,
    /// Exports `seam:plugin/tool`: mounts a model-facing tool.
    Tool,
    /// Exports `seam:plugin/observer`: receives every lifecycle event.
    Observer,
}

impl PluginKind {
    /// Every kind, in the order the host checks a component's exports.
    pub const ALL: [PluginKind; 3] = [Self::Provider, Self::Tool, Self::Observer];

    /// The kind's name, as config files and events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provider => "provider",
            Self::Tool => "tool",
            Self::Observer => "observer",
        }
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which of the caller's agents [`list_agents`](crate::SubagentService::list_agents) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentScope {
    /// The agents the caller started.
    Children,
    /// Those, their children, and so on down.
    Descendants,
}

/// Where a child agent stands, as its latest activation left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentStatus {
    /// An activation is going (in this process or another that holds the store).
    Running,
    /// Finished, its answer already announced to its parent: it waits for a message.
    Idle,
    /// Finished with an answer its parent has not been told of yet.
    Ready,
    /// Its latest activation failed (error, refusal, max-tokens or a provider's own reason),
    /// or was stopped before it kept a session to continue.
    Failed,
    /// Its turn was stopped (`interrupt_agent`, a cancel) or the process running it ended
    /// first; it keeps its session and inbox and can be sent a message.
    Interrupted,
}

impl AgentStatus {
    /// Every status, in the order the tools list them.
    pub const ALL: [AgentStatus; 5] = [
        Self::Running,
        Self::Idle,
        Self::Ready,
        Self::Failed,
        Self::Interrupted,
    ];

    /// Its name in tool arguments and listings.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Idle => "idle",
            Self::Ready => "ready",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
        }
    }
}

/// A child agent, read from the session store and the live runs; reading it resumes nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AgentInfo {
    /// Its durable id: the child's session id, the same across activations and restarts (a run
    /// id for a child that keeps no session, such as a remote provider's).
    pub id: String,
    /// The run of its latest activation (an id in the process that ran it).
    pub run_id: String,
    /// The provider it runs on.
    pub provider: String,
    /// The label it was started with (empty for a foreground run).
    pub label: String,
    /// The session of the agent that started it.
    pub parent_session: String,
    /// Where it stands.
    pub status: AgentStatus,
    /// How its latest activation ended, once it has.
    pub stop_reason: Option<StopReason>,
    /// Why it failed or was stopped, if it was.
    pub diagnostic: Option<String>,
    /// Its latest report (`report`), if it made one.
    pub report: Option<String>,
    /// Messages waiting in its inbox for its next activation.
    pub queued: u32,
    /// When its latest activation started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// When its latest activation ended, if it has.
    pub ended_at_ms: Option<u64>,
}

/// What [`send_to_agent`](crate::SubagentService::send_to_agent) did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// The child is running: the message waits in its inbox and wakes it when its activation
    /// ends.
    Queued,
    /// The child was waiting in this process: a new activation runs the message (and any
    /// inbox).
    Woken,
    /// No process held the child: it was resumed from the store in a new activation.
    Resumed,
}

impl Delivery {
    /// Its name in tool answers.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Woken => "woken",
            Self::Resumed => "resumed",
        }
    }
}

/// How a child's [`report`](crate::SubagentService::report) reaches its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportMode {
    /// Stored with the child's run: its parent sees it in `list_agents`.
    Quiet,
    /// Stored, and delivered to the parent before its next model step.
    NextStep,
}

/// A run's request as its record keeps it: everything but the signal. Read back to continue
/// the run's child in a later process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RequestSnapshot {
    /// The task.
    pub prompt: Vec<ContentBlock>,
    /// The calling agent, as it was.
    pub parent: ParentRef,
    /// Child agent options.
    pub agent_options: Option<AgentOptions>,
    /// The structured answer's schema.
    pub output_schema: Option<serde_json::Value>,
    /// The depth cap.
    pub max_depth: Option<i64>,
    /// Tool visibility.
    pub tool_filter: Option<ToolFilter>,
    /// The persona.
    pub persona: Option<String>,
    /// The budget cap it was started with (absent from records written before budgets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::spend::Budget>,
    /// The scope it was started with (absent from records written before scopes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<crate::scope::Scope>,
    /// Who answers its subtree's requests for approval, if its delegation named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<crate::approval::Approver>,
}

impl RequestSnapshot {
    /// The snapshot of `request`.
    pub fn of(request: &StartRequest) -> Self {
        Self {
            prompt: request.prompt.clone(),
            parent: request.parent.clone(),
            agent_options: request.agent_options.clone(),
            output_schema: request.output_schema.clone(),
            max_depth: request.max_depth,
            tool_filter: request.tool_filter.clone(),
            persona: request.persona.clone(),
            budget: request.budget,
            scope: request.scope.clone(),
            approver: request.approver,
        }
    }

    /// As the store keeps it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The request again, for `parent` and with `prompt`.
    pub fn into_request(self, parent: ParentRef, prompt: Vec<ContentBlock>) -> StartRequest {
        StartRequest {
            prompt,
            parent,
            signal: None,
            agent_options: self.agent_options,
            output_schema: self.output_schema,
            max_depth: self.max_depth,
            tool_filter: self.tool_filter,
            persona: self.persona,
            budget: self.budget,
            scope: self.scope,
            approver: self.approver,
        }
    }
}

#[cfg(test)]
mod kind_tests {
    use super::PluginKind;
    use strum::IntoEnumIterator;

    #[test]
    fn plugin_kind_all_lists_every_variant_once_in_order() {
        let every: Vec<PluginKind> = PluginKind::iter().collect();
        assert_eq!(every, PluginKind::ALL.to_vec());
    }
}
