//! Typed failures of the subagent service.

use thiserror::Error;

/// Why the subagent service refused or could not complete an operation.
///
/// The `Display` text starts with a stable code (`DUPLICATE_PROVIDER`, `NO_PROVIDER`, ...) that
/// [`SubagentError::code`] also returns.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SubagentError {
    /// A provider with this name is already registered.
    #[error("DUPLICATE_PROVIDER: a provider named `{0}` is already registered")]
    DuplicateProvider(String),
    /// No provider with this name is registered.
    #[error("NO_PROVIDER: no provider named `{0}` is registered")]
    NoProvider(String),
    /// The provider lacks a start-time capability the request needs.
    #[error("UNSUPPORTED_CAPABILITY: provider `{provider}` does not support `{capability}`")]
    UnsupportedCapability {
        /// Provider name.
        provider: String,
        /// The missing capability (`output-schema`, `depth-limit`, `tool-filter`, `persona`).
        capability: String,
    },
    /// The provider does not declare this runtime feature (`steering`, `resume`).
    #[error("UNSUPPORTED_FEATURE: provider `{provider}` does not support `{feature}`")]
    UnsupportedFeature {
        /// Provider name.
        provider: String,
        /// The feature.
        feature: String,
    },
    /// The run is not in a state that allows the operation.
    #[error("INVALID_STATE: {0}")]
    InvalidState(String),
    /// The request is malformed.
    #[error("INVALID_REQUEST: {0}")]
    InvalidRequest(String),
    /// The descriptor a provider declared is malformed.
    #[error("INVALID_DESCRIPTOR: plugin `{plugin}`: {reason}")]
    InvalidDescriptor {
        /// The plugin that declared it.
        plugin: String,
        /// What is wrong.
        reason: String,
    },
    /// The child would be deeper than `max-depth` allows.
    #[error("DEPTH_EXCEEDED: a child at depth {attempted} exceeds max-depth {max}")]
    DepthExceeded {
        /// The child's depth.
        attempted: u32,
        /// The cap.
        max: u32,
    },
    /// The run was cancelled before its child existed.
    #[error("ABORTED: the run was cancelled before its child existed{}", reason_suffix(.0))]
    Aborted(Option<String>),
    /// The provider failed before its child existed.
    #[error("START_FAILED: {0}")]
    StartFailed(String),
    /// The run was disposed.
    #[error("DISPOSED: the run was disposed")]
    Disposed,
    /// A fault the seam cannot represent otherwise.
    #[error("INTERNAL: {0}")]
    Internal(String),
}

fn reason_suffix(reason: &Option<String>) -> String {
    reason
        .as_ref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

impl SubagentError {
    /// The stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::DuplicateProvider(_) => "DUPLICATE_PROVIDER",
            Self::NoProvider(_) => "NO_PROVIDER",
            Self::UnsupportedCapability { .. } => "UNSUPPORTED_CAPABILITY",
            Self::UnsupportedFeature { .. } => "UNSUPPORTED_FEATURE",
            Self::InvalidState(_) => "INVALID_STATE",
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::InvalidDescriptor { .. } => "INVALID_DESCRIPTOR",
            Self::DepthExceeded { .. } => "DEPTH_EXCEEDED",
            Self::Aborted(_) => "ABORTED",
            Self::StartFailed(_) => "START_FAILED",
            Self::Disposed => "DISPOSED",
            Self::Internal(_) => "INTERNAL",
        }
    }
}
