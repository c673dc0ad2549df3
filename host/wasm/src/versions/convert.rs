//! The conversions between the latest version's WIT types and `seam-core`'s: the host's
//! interfaces and the exports speak the latest's types, and an older version converts its own
//! to and from the latest's (its `imports`, with `super::delegate`).

use super::latest::provider_world::seam::plugin::agents::AgentError;
use super::latest::provider_world::seam::plugin::types as wit;
use crate::store::view::ImportError;

/// Declares `From` both ways between a WIT enum or variant and `seam-core`'s of the same cases
/// (a case's payload converts with `Into`).
macro_rules! same_cases {
    ($($wit:ty, $core:ty { $($case:ident $(($x:ident))?),* $(,)? })*) => {
        $(
            same_cases!(@ $wit => $core { $($case $(($x))?),* });
            same_cases!(@ $core => $wit { $($case $(($x))?),* });
        )*
    };
    (@ $from:ty => $to:ty { $($case:ident $(($x:ident))?),* }) => {
        impl From<$from> for $to {
            fn from(value: $from) -> Self {
                type Source = $from;
                match value {
                    $(Source::$case $(($x))? => Self::$case $(($x.into()))?,)*
                }
            }
        }
    };
}

same_cases! {
    wit::ContentBlock, seam_core::types::ContentBlock { Text(s), Json(s) }
    wit::StopReason, seam_core::types::StopReason {
        Completed, Aborted, Error, MaxTokens, Refusal, Budget, Other(s)
    }
    wit::RunState, seam_core::types::RunState { Running, Settled }
    wit::AgentScope, seam_core::types::AgentScope { Children, Descendants }
    wit::AgentStatus, seam_core::types::AgentStatus { Running, Idle, Ready, Failed, Interrupted }
    wit::Delivery, seam_core::types::Delivery { Queued, Woken, Resumed }
    wit::ReportMode, seam_core::types::ReportMode { Quiet, NextStep }
}

impl From<wit::ProviderDescriptor> for seam_core::types::ProviderDescriptor {
    fn from(d: wit::ProviderDescriptor) -> Self {
        Self {
            name: d.name,
            capabilities: seam_core::types::Capabilities {
                output_schema: d.capabilities.output_schema,
                depth_limit: d.capabilities.depth_limit,
                tool_filter: d.capabilities.tool_filter,
                persona: d.capabilities.persona,
            },
            features: seam_core::types::RuntimeFeatures {
                steering: d.features.steering,
                resume: d.features.resume,
            },
            inherits_parent_context: d.inherits_parent_context,
        }
    }
}

impl From<&seam_core::types::ProviderDescriptor> for wit::ProviderDescriptor {
    fn from(d: &seam_core::types::ProviderDescriptor) -> Self {
        Self {
            name: d.name.clone(),
            capabilities: wit::Capabilities {
                output_schema: d.capabilities.output_schema,
                depth_limit: d.capabilities.depth_limit,
                tool_filter: d.capabilities.tool_filter,
                persona: d.capabilities.persona,
            },
            features: wit::RuntimeFeatures {
                steering: d.features.steering,
                resume: d.features.resume,
            },
            inherits_parent_context: d.inherits_parent_context,
        }
    }
}

impl From<wit::ParentRef> for seam_core::types::ParentRef {
    fn from(p: wit::ParentRef) -> Self {
        Self {
            id: p.id,
            session_id: p.session_id,
            working_directory: p.working_directory,
            depth: p.depth,
        }
    }
}

impl From<seam_core::types::ParentRef> for wit::ParentRef {
    fn from(p: seam_core::types::ParentRef) -> Self {
        Self {
            id: p.id,
            session_id: p.session_id,
            working_directory: p.working_directory,
            depth: p.depth,
        }
    }
}

/// The request as the provider guest sees it.
pub fn request_to_wit(r: &seam_core::types::StartRequest) -> wit::StartRequest {
    wit::StartRequest {
        prompt: r.prompt.iter().cloned().map(Into::into).collect(),
        parent: r.parent.clone().into(),
        agent_options: r.agent_options.clone().map(|o| wit::AgentOptions {
            model: o.model,
            system_prompt: o.system_prompt,
        }),
        output_schema: r.output_schema.as_ref().map(|v| v.to_string()),
        // validate::request bounds max-depth to 0..=64 before any provider sees it.
        max_depth: r.max_depth.map(|d| d.clamp(0, i32::MAX as i64) as i32),
        tool_filter: r.tool_filter.clone().map(|f| wit::ToolFilter {
            allow: f.allow,
            deny: f.deny,
        }),
        persona: r.persona.clone(),
        // The caller's to ask, not the provider's to read.
        scope: None,
    }
}

/// A tool guest's request, checked for JSON where the WIT carries JSON as text.
pub fn request_from_wit(
    r: wit::StartRequest,
) -> Result<seam_core::types::StartRequest, seam_core::subagent::SubagentError> {
    let output_schema = match r.output_schema {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
            seam_core::subagent::SubagentError::InvalidRequest(format!(
                "output-schema is not valid JSON: {e}"
            ))
        })?),
        None => None,
    };
    let scope = match r.scope {
        Some(text) => {
            let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                seam_core::subagent::SubagentError::InvalidRequest(format!(
                    "scope is not valid JSON: {e}"
                ))
            })?;
            Some(
                seam_core::scope::Scope::from_value(&value, "scope").map_err(|e| {
                    seam_core::subagent::SubagentError::InvalidRequest(e.to_string())
                })?,
            )
        }
        None => None,
    };
    Ok(seam_core::types::StartRequest {
        prompt: r.prompt.into_iter().map(Into::into).collect(),
        parent: r.parent.into(),
        signal: None,
        agent_options: r.agent_options.map(|o| seam_core::types::AgentOptions {
            model: o.model,
            system_prompt: o.system_prompt,
        }),
        output_schema,
        max_depth: r.max_depth.map(i64::from),
        tool_filter: r.tool_filter.map(|f| seam_core::types::ToolFilter {
            allow: f.allow,
            deny: f.deny,
        }),
        persona: r.persona,
        // A guest never sets a budget: the host takes it from the calling entry's.
        budget: None,
        // The scope a guest asks for only narrows: the host meets it with the calling entry's.
        scope,
        approver: None,
    })
}
impl From<seam_core::types::SubagentResult> for wit::SubagentResult {
    fn from(r: seam_core::types::SubagentResult) -> Self {
        Self {
            output: r.output.into_iter().map(Into::into).collect(),
            structured: r.structured.map(|v| v.to_string()),
            stop_reason: r.stop_reason.into(),
            diagnostic: r.diagnostic,
        }
    }
}

/// Converts a guest's result. Structured output that is not JSON is a provider fault, reported
/// as an `error` run rather than passed on.
pub fn result_from_wit(r: wit::SubagentResult) -> seam_core::types::SubagentResult {
    let output: Vec<seam_core::types::ContentBlock> =
        r.output.into_iter().map(Into::into).collect();
    match r.structured.map(|s| serde_json::from_str(&s)) {
        Some(Err(e)) => seam_core::types::SubagentResult {
            output,
            structured: None,
            stop_reason: seam_core::types::StopReason::Error,
            diagnostic: Some(format!(
                "the provider returned structured output that is not JSON: {e}"
            )),
        },
        structured => seam_core::types::SubagentResult {
            output,
            structured: structured.and_then(Result::ok),
            stop_reason: r.stop_reason.into(),
            diagnostic: r.diagnostic,
        },
    }
}
impl From<seam_core::subagent::SubagentError> for wit::SubagentError {
    fn from(e: seam_core::subagent::SubagentError) -> Self {
        match e {
            seam_core::subagent::SubagentError::DuplicateProvider(n) => Self::DuplicateProvider(n),
            seam_core::subagent::SubagentError::NoProvider(n) => Self::NoProvider(n),
            seam_core::subagent::SubagentError::UnsupportedCapability { capability, .. } => {
                Self::UnsupportedCapability(capability)
            }
            seam_core::subagent::SubagentError::InvalidRequest(m) => Self::InvalidRequest(m),
            seam_core::subagent::SubagentError::DepthExceeded { attempted, max } => {
                Self::DepthExceeded(wit::DepthInfo { attempted, max })
            }
            seam_core::subagent::SubagentError::Aborted(r) => Self::Aborted(r),
            seam_core::subagent::SubagentError::StartFailed(m) => Self::StartFailed(m),
            // The text starts with its code (`BUDGET_EXHAUSTED`) and says what ran out.
            e @ seam_core::subagent::SubagentError::BudgetExhausted(_) => {
                Self::BudgetExhausted(e.to_string())
            }
            seam_core::subagent::SubagentError::Disposed => Self::Disposed,
            seam_core::subagent::SubagentError::UnsupportedFeature { feature, .. } => {
                Self::UnsupportedFeature(feature)
            }
            seam_core::subagent::SubagentError::InvalidState(m) => Self::InvalidState(m),
            seam_core::subagent::SubagentError::NoRun(id) => Self::NoRun(id),
            e @ (seam_core::subagent::SubagentError::InvalidDescriptor { .. }
            | seam_core::subagent::SubagentError::Internal(_)) => Self::Internal(e.to_string()),
        }
    }
}
impl From<seam_core::types::RunInfo> for wit::RunInfo {
    fn from(i: seam_core::types::RunInfo) -> Self {
        Self {
            id: i.id,
            provider: i.provider,
            label: i.label,
            state: i.state.into(),
            started_at_ms: i.started_at_ms,
            stop_reason: i.stop_reason.map(Into::into),
        }
    }
}
impl From<seam_core::types::AgentInfo> for wit::AgentInfo {
    fn from(i: seam_core::types::AgentInfo) -> Self {
        Self {
            id: i.id,
            run_id: i.run_id,
            provider: i.provider,
            label: i.label,
            parent_session: i.parent_session,
            status: i.status.into(),
            stop_reason: i.stop_reason.map(Into::into),
            diagnostic: i.diagnostic,
            report: i.report,
            queued: i.queued,
            started_at_ms: i.started_at_ms,
            ended_at_ms: i.ended_at_ms,
        }
    }
}

/// What an import returning `result<_, subagent-error>` fails with, in every version: the
/// latest's error for the guest (an older version's `convert_subagent_error` converts it), or
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
