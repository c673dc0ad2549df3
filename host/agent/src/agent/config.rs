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
    /// Deepest delegation depth in the agent tree: a start whose child would be deeper fails
    /// with `DEPTH_EXCEEDED`, whatever the provider and the request say.
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// Most agents alive in the host at once; creating one more fails.
    #[serde(default = "default_max_live_agents")]
    pub max_live_agents: usize,
    /// `[agent.budget]`: the most the top-level agent's whole tree may spend.
    #[serde(default)]
    pub budget: Option<seam_core::spend::Budget>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: default_model(),
            system_prompt: None,
            persona: None,
            max_turns: default_max_turns(),
            prompt: None,
            max_depth: default_max_depth(),
            max_live_agents: default_max_live_agents(),
            budget: None,
        }
    }
}

fn default_model() -> String {
    "scripted:default".into()
}

fn default_max_turns() -> u32 {
    16
}

/// Default of `[agent] max_depth`.
pub const DEFAULT_MAX_DEPTH: u32 = seam_core::subagent::DEFAULT_MAX_TREE_DEPTH;

fn default_max_depth() -> u32 {
    DEFAULT_MAX_DEPTH
}

/// Default of `[agent] max_live_agents`.
pub const DEFAULT_MAX_LIVE_AGENTS: usize = 1024;

fn default_max_live_agents() -> usize {
    DEFAULT_MAX_LIVE_AGENTS
}
