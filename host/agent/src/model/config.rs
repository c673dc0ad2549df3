//! The `[models]` section of the config: scripts for the scripted model, and the OpenAI-compatible
//! endpoint.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[models]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsConfig {
    /// `[models.scripts.NAME]`: scripts for `scripted:NAME`.
    #[serde(default)]
    pub scripts: BTreeMap<String, Script>,
    /// `[models.openai]`: the endpoint for `openai` and `openai:MODEL`.
    #[serde(default)]
    pub openai: Option<OpenAiConfig>,
    /// `[models.endpoints.NAME]`: more endpoints, each picked by the model string `NAME` (so
    /// that children can run on a cheaper model than their parent).
    #[serde(default)]
    pub endpoints: BTreeMap<String, OpenAiConfig>,
}

impl ModelsConfig {
    /// Checks the prices and names of every script and endpoint, naming the key at fault.
    pub fn validate(&self) -> Result<(), seam_core::spend::BudgetError> {
        for (name, script) in &self.scripts {
            if let Some(p) = &script.prices {
                p.validate(&format!("models.scripts.{name}.prices"))?;
            }
        }
        if let Some(p) = self.openai.as_ref().and_then(|o| o.prices.as_ref()) {
            p.validate("models.openai.prices")?;
        }
        for (name, endpoint) in &self.endpoints {
            if let Some(p) = &endpoint.prices {
                p.validate(&format!("models.endpoints.{name}.prices"))?;
            }
        }
        Ok(())
    }

    /// The config keys of the endpoints and scripts that have no prices: with a cost budget,
    /// a call to one of them could not be charged.
    pub fn unpriced(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .scripts
            .iter()
            .filter(|(_, s)| s.prices.is_none())
            .map(|(name, _)| format!("models.scripts.{name}"))
            .collect();
        if self.openai.as_ref().is_some_and(|o| o.prices.is_none()) {
            out.push("models.openai".into());
        }
        out.extend(
            self.endpoints
                .iter()
                .filter(|(_, e)| e.prices.is_none())
                .map(|(name, _)| format!("models.endpoints.{name}")),
        );
        out
    }
}

/// A script: one step per model call, in order.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The steps.
    pub steps: Vec<ScriptStep>,
    /// What its tokens cost, as an endpoint's would (for cost budgets in tests and demos).
    #[serde(default)]
    pub prices: Option<seam_core::spend::Prices>,
}

/// One scripted reply. Exactly one of the reply kinds should be set; text may accompany tool
/// calls. In text, `{prompt}` is the latest user message, `{tool_results}` the results of the
/// latest tool calls (one per line), `{system}` the system prompt and `{tools}` the names of the
/// tools offered, comma-separated.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptStep {
    /// Reply text.
    pub text: Option<String>,
    /// Tool calls to make.
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Shorthand for a `structured_output` call with these arguments.
    pub structured: Option<serde_json::Value>,
    /// Fail the model call with this message.
    pub error: Option<String>,
    /// Reply `text` but stop for lack of tokens.
    #[serde(default)]
    pub max_tokens: bool,
    /// Decline with `text`.
    #[serde(default)]
    pub refusal: bool,
    /// Wait this long before replying (to make cancellation observable).
    #[serde(default)]
    pub delay_ms: u64,
    /// The usage to report for this reply (`{ prompt-tokens = N, completion-tokens = M }`), as
    /// an endpoint would.
    #[serde(default)]
    pub usage: Option<seam_core::types::Usage>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments (any JSON; objects are typical).
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// `[models.openai]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Base URL up to and excluding `/chat/completions`, e.g. `https://api.deepseek.com/v1`.
    pub base_url: String,
    /// Name of the environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Model name sent to the endpoint.
    pub model: String,
    /// Stream the reply with server-sent events.
    #[serde(default = "yes")]
    pub stream: bool,
    /// Per-request timeout, for each attempt: without streaming, for the whole reply; with
    /// streaming, for the reply to start and then for each next piece of the stream (so a long
    /// answer that keeps arriving is not cut off).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Retries on 429 and 5xx, with exponential backoff.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// First backoff delay; doubles each retry (a `Retry-After` header in seconds wins). Each
    /// wait is capped at 60 s.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// The most completion tokens one reply may use (sent as `max_tokens`; a budget may lower
    /// it further).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// What its tokens cost, in dollars per million (`{ input_per_mtok, output_per_mtok }`):
    /// needed when a budget bounds cost.
    #[serde(default)]
    pub prices: Option<seam_core::spend::Prices>,
}

fn yes() -> bool {
    true
}
fn default_timeout_ms() -> u64 {
    60_000
}
fn default_retries() -> u32 {
    3
}
fn default_backoff_ms() -> u64 {
    500
}
