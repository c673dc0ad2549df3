//! The `[agent]` section of the config: the top-level agent of `seam run`, and the defaults a
//! child inherits when its options are silent.

use serde::Deserialize;

/// `[agent]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Model string of the top-level agent (and of children that name none and have no agent
    /// parent).
    #[serde(default = "default_model")]
    pub model: String,
    /// System prompt of the top-level agent.
    pub system_prompt: Option<String>,
    /// The deployment persona; a child's `persona` shadows it for that child.
    pub persona: Option<String>,
    /// Most model calls in one turn.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// The prompt `seam run` uses when none is given.
    pub prompt: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: default_model(),
            system_prompt: None,
            persona: None,
            max_turns: default_max_turns(),
            prompt: None,
        }
    }
}

fn default_model() -> String {
    "scripted:default".into()
}

fn default_max_turns() -> u32 {
    16
}
