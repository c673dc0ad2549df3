//! Bindings for `seam:plugin@0.3.0`, the latest version, and conversions between its types and
//! `seam-core`'s.

super::bindings!(
    "../../wit/v0.3.0",
    provider {
        "seam:plugin/subagents.run": seam_core::SubagentRun,
        "wasi:io/poll": wasmtime_wasi::p2::bindings::io::poll,
    },
    tool { "seam:plugin/subagents": super::provider_world::seam::plugin::subagents }
);

super::convert::conversions!(base, results, errors, runs, agents);

use crate::store::view::ImportError;
use provider_world::seam::plugin::agents::AgentError;

/// What an import returning `result<_, subagent-error>` fails with, in every version: this
/// version's error for the guest (an older version's `convert_subagent_error` converts it), or
/// a trap.
pub type SubagentFailure = ImportError<wit::SubagentError>;

/// What an import returning `result<_, agent-error>` fails with, in every version.
pub type AgentFailure = ImportError<AgentError>;

impl From<wit::SubagentError> for SubagentFailure {
    fn from(e: wit::SubagentError) -> Self {
        Self::Guest(e)
    }
}

impl From<seam_core::subagent::SubagentError> for SubagentFailure {
    fn from(e: seam_core::subagent::SubagentError) -> Self {
        Self::Guest(e.into())
    }
}

impl From<AgentError> for AgentFailure {
    fn from(e: AgentError) -> Self {
        Self::Guest(e)
    }
}
