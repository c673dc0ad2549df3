//! Bindings for `seam:plugin@0.2.0`, frozen (`wit/v0.2.0`), conversions between its types and
//! `seam-core`'s, and its host imports, which delegate to the latest implementation.
//!
//! The provider world owns the shared `types` and `host` interfaces; the tool and observer
//! worlds reuse them through `with`, so one Rust type stands for each WIT type. WIT resources map
//! onto types owned by `seam-core`, never onto the modules that use these bindings.

#![allow(missing_docs)]

pub mod imports;

pub mod provider_world {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.2.0",
        world: "provider-plugin",
        // Resource handles are looked up in a table, which can fail: imports may trap.
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "seam:plugin/agents.child": seam_core::agent::RunChild,
            "seam:plugin/subagents.run": seam_core::SubagentRun,
            "wasi:io/poll": wasmtime_wasi::p2::bindings::io::poll,
        },
    });
}

pub mod tool_world {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.2.0",
        world: "tool-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "seam:plugin/types": super::provider_world::seam::plugin::types,
            "seam:plugin/host": super::provider_world::seam::plugin::host,
            "seam:plugin/subagents": super::provider_world::seam::plugin::subagents,
        },
    });
}

pub mod observer_world {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.2.0",
        world: "observer-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "seam:plugin/types": super::provider_world::seam::plugin::types,
            "seam:plugin/host": super::provider_world::seam::plugin::host,
        },
    });
}

use provider_world::seam::plugin::types as wit;

use seam_core::subagent::SubagentError;
use seam_core::types::{
    AgentOptions, Capabilities, ContentBlock, ParentRef, ProviderDescriptor, RunInfo, RunState,
    RuntimeFeatures, StartRequest, StopReason, SubagentResult, ToolFilter,
};

/// The package version these bindings were generated from (the `wit/v0.2.0` folder's).
pub const VERSION: &str = "0.2.0";

impl From<wit::ContentBlock> for ContentBlock {
    fn from(b: wit::ContentBlock) -> Self {
        match b {
            wit::ContentBlock::Text(s) => Self::Text(s),
            wit::ContentBlock::Json(s) => Self::Json(s),
        }
    }
}

impl From<ContentBlock> for wit::ContentBlock {
    fn from(b: ContentBlock) -> Self {
        match b {
            ContentBlock::Text(s) => Self::Text(s),
            ContentBlock::Json(s) => Self::Json(s),
        }
    }
}

impl From<wit::StopReason> for StopReason {
    fn from(r: wit::StopReason) -> Self {
        match r {
            wit::StopReason::Completed => Self::Completed,
            wit::StopReason::Aborted => Self::Aborted,
            wit::StopReason::Error => Self::Error,
            wit::StopReason::MaxTokens => Self::MaxTokens,
            wit::StopReason::Refusal => Self::Refusal,
            wit::StopReason::Other(s) => Self::Other(s),
        }
    }
}

impl From<StopReason> for wit::StopReason {
    fn from(r: StopReason) -> Self {
        match r {
            StopReason::Completed => Self::Completed,
            StopReason::Aborted => Self::Aborted,
            StopReason::Error => Self::Error,
            StopReason::MaxTokens => Self::MaxTokens,
            StopReason::Refusal => Self::Refusal,
            StopReason::Other(s) => Self::Other(s),
        }
    }
}

impl From<wit::ProviderDescriptor> for ProviderDescriptor {
    fn from(d: wit::ProviderDescriptor) -> Self {
        Self {
            name: d.name,
            capabilities: Capabilities {
                output_schema: d.capabilities.output_schema,
                depth_limit: d.capabilities.depth_limit,
                tool_filter: d.capabilities.tool_filter,
                persona: d.capabilities.persona,
            },
            features: RuntimeFeatures {
                steering: d.features.steering,
                resume: d.features.resume,
            },
            inherits_parent_context: d.inherits_parent_context,
        }
    }
}

impl From<&ProviderDescriptor> for wit::ProviderDescriptor {
    fn from(d: &ProviderDescriptor) -> Self {
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

/// A provider's descriptor as a tool's `describe` takes it.
pub fn wit_descriptor(d: &ProviderDescriptor) -> wit::ProviderDescriptor {
    d.into()
}

impl From<wit::ParentRef> for ParentRef {
    fn from(p: wit::ParentRef) -> Self {
        Self {
            id: p.id,
            session_id: p.session_id,
            working_directory: p.working_directory,
            depth: p.depth,
        }
    }
}

impl From<ParentRef> for wit::ParentRef {
    fn from(p: ParentRef) -> Self {
        Self {
            id: p.id,
            session_id: p.session_id,
            working_directory: p.working_directory,
            depth: p.depth,
        }
    }
}

impl From<SubagentResult> for wit::SubagentResult {
    fn from(r: SubagentResult) -> Self {
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
pub fn result_from_wit(r: wit::SubagentResult) -> SubagentResult {
    let output: Vec<ContentBlock> = r.output.into_iter().map(Into::into).collect();
    match r.structured.map(|s| serde_json::from_str(&s)) {
        Some(Err(e)) => SubagentResult {
            output,
            structured: None,
            stop_reason: StopReason::Error,
            diagnostic: Some(format!(
                "the provider returned structured output that is not JSON: {e}"
            )),
        },
        structured => SubagentResult {
            output,
            structured: structured.and_then(Result::ok),
            stop_reason: r.stop_reason.into(),
            diagnostic: r.diagnostic,
        },
    }
}

/// The request as the provider guest sees it.
pub fn request_to_wit(r: &StartRequest) -> wit::StartRequest {
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
    }
}

/// A tool guest's request, checked for JSON where the WIT carries JSON as text.
pub fn request_from_wit(r: wit::StartRequest) -> Result<StartRequest, SubagentError> {
    let output_schema = match r.output_schema {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
            SubagentError::InvalidRequest(format!("output-schema is not valid JSON: {e}"))
        })?),
        None => None,
    };
    Ok(StartRequest {
        prompt: r.prompt.into_iter().map(Into::into).collect(),
        parent: r.parent.into(),
        signal: None,
        agent_options: r.agent_options.map(|o| AgentOptions {
            model: o.model,
            system_prompt: o.system_prompt,
        }),
        output_schema,
        max_depth: r.max_depth.map(i64::from),
        tool_filter: r.tool_filter.map(|f| ToolFilter {
            allow: f.allow,
            deny: f.deny,
        }),
        persona: r.persona,
    })
}

impl From<SubagentError> for wit::SubagentError {
    fn from(e: SubagentError) -> Self {
        match e {
            SubagentError::DuplicateProvider(n) => Self::DuplicateProvider(n),
            SubagentError::NoProvider(n) => Self::NoProvider(n),
            SubagentError::UnsupportedCapability { capability, .. } => {
                Self::UnsupportedCapability(capability)
            }
            SubagentError::InvalidRequest(m) => Self::InvalidRequest(m),
            SubagentError::DepthExceeded { attempted, max } => {
                Self::DepthExceeded(wit::DepthInfo { attempted, max })
            }
            SubagentError::Aborted(r) => Self::Aborted(r),
            SubagentError::StartFailed(m) => Self::StartFailed(m),
            SubagentError::Disposed => Self::Disposed,
            SubagentError::UnsupportedFeature { feature, .. } => Self::UnsupportedFeature(feature),
            SubagentError::InvalidState(m) => Self::InvalidState(m),
            SubagentError::NoRun(id) => Self::NoRun(id),
            e @ (SubagentError::InvalidDescriptor { .. } | SubagentError::Internal(_)) => {
                Self::Internal(e.to_string())
            }
        }
    }
}

impl From<RunInfo> for wit::RunInfo {
    fn from(i: RunInfo) -> Self {
        Self {
            id: i.id,
            provider: i.provider,
            label: i.label,
            state: match i.state {
                RunState::Running => wit::RunState::Running,
                RunState::Settled => wit::RunState::Settled,
            },
            started_at_ms: i.started_at_ms,
            stop_reason: i.stop_reason.map(Into::into),
        }
    }
}
