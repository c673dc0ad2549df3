//! Bindings for `seam:plugin@0.1.0`, frozen (`wit/v0.1.0`), conversions between its types and
//! `seam-core`'s, and its host imports, which delegate to the latest implementation.
//!
//! What 0.1.0 cannot carry is folded into what it can: a result's `diagnostic` becomes its
//! output when the child said nothing (as 0.1.0 hosts reported failures), and the error cases
//! 0.2.0 added become `internal` with their text.

pub mod imports;

super::bindings!(
    "../../wit/v0.1.0",
    provider {},
    tool { "seam:plugin/subagents.run": seam_core::SubagentRun }
);

super::convert::conversions!(base);

use seam_core::subagent::SubagentError;
use seam_core::types::{ContentBlock, StopReason, SubagentResult};

impl From<SubagentResult> for wit::SubagentResult {
    fn from(r: SubagentResult) -> Self {
        Self {
            output: folded(r.output, r.diagnostic),
            structured: r.structured.map(|v| v.to_string()),
            stop_reason: r.stop_reason.into(),
        }
    }
}

/// The child's words, or the diagnostic when it said nothing: 0.1.0 has one place for both.
pub fn folded(output: Vec<ContentBlock>, diagnostic: Option<String>) -> Vec<wit::ContentBlock> {
    let silent = output.iter().all(|b| b.as_text().trim().is_empty());
    match diagnostic {
        Some(d) if silent => vec![wit::ContentBlock::Text(d)],
        _ => output.into_iter().map(Into::into).collect(),
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
            diagnostic: None,
        },
    }
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
            e @ (SubagentError::InvalidDescriptor { .. }
            | SubagentError::Internal(_)
            | SubagentError::UnsupportedFeature { .. }
            | SubagentError::InvalidState(_)
            | SubagentError::NoRun(_)) => Self::Internal(e.to_string()),
        }
    }
}
