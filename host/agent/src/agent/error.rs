//! Why an agent could not be created or driven.

use thiserror::Error;

use crate::model::ModelError;

/// Why an agent could not be created or driven.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AgentError {
    /// The child would be deeper than allowed.
    #[error(
        "{}: a child at depth {attempted} exceeds max-depth {max}",
        seam_core::subagent::code::DEPTH_EXCEEDED
    )]
    DepthExceeded {
        /// The child's depth.
        attempted: u32,
        /// The cap.
        max: u32,
    },
    /// The options are malformed (unknown tool in a filter, bad schema, ...).
    #[error("invalid agent options: {0}")]
    Invalid(String),
    /// The model string cannot be resolved.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The agent was disposed.
    #[error("the agent was disposed")]
    Disposed,
    /// The host already has as many live agents as `[agent] max_live_agents` allows.
    #[error("the host already has {max} live agents (`[agent] max_live_agents`)")]
    TooManyAgents {
        /// The cap.
        max: usize,
    },
    /// The session store could not read or write the agent's session.
    #[error(transparent)]
    Store(#[from] seam_core::store::StoreError),
}
