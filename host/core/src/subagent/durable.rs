//! Continuable children: a background child keeps its session across activations (at most one
//! live at a time), is listed from the store without resuming anything, is sent messages
//! (queued while it runs, waking it when it waits, resuming it from the store when no process
//! holds it), is interrupted without losing its inbox, and reports to its parent.

use crate::types::{
    AgentInfo, AgentScope, AgentStatus, ContentBlock, Delivery, ParentRef, ReportMode,
};

use super::{SubagentError, SubagentService};

impl SubagentService {
    /// The caller's child agents (or all its descendants), optionally of one status, read from
    /// the store and the live runs; oldest first. Nothing is resumed.
    pub fn list_agents(
        &self,
        caller: &ParentRef,
        scope: AgentScope,
        status: Option<AgentStatus>,
    ) -> Result<Vec<AgentInfo>, SubagentError> {
        let _ = (caller, scope, status);
        Err(SubagentError::Internal("list_agents is being built".into()))
    }

    /// Sends `prompt` to one of the caller's child agents (`id`: its durable id, or the run id
    /// of one of the caller's background runs).
    pub fn send_to_agent(
        &self,
        caller: &ParentRef,
        id: &str,
        prompt: Vec<ContentBlock>,
    ) -> Result<Delivery, SubagentError> {
        let _ = (caller, id, prompt);
        Err(SubagentError::Internal(
            "send_to_agent is being built".into(),
        ))
    }

    /// Stops the current activation of one of the caller's child agents; its session and inbox
    /// are kept. Returns the agent as it now stands.
    pub fn interrupt_agent(
        &self,
        caller: &ParentRef,
        id: &str,
    ) -> Result<AgentInfo, SubagentError> {
        let _ = (caller, id);
        Err(SubagentError::Internal(
            "interrupt_agent is being built".into(),
        ))
    }

    /// A child agent's report to its parent; `caller` is the child.
    pub fn report(
        &self,
        caller: &ParentRef,
        mode: ReportMode,
        content: Vec<ContentBlock>,
    ) -> Result<(), SubagentError> {
        let _ = (caller, mode, content);
        Err(SubagentError::Internal("report is being built".into()))
    }
}
