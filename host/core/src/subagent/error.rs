//! Typed failures of the subagent service.

use thiserror::Error;

/// The stable error codes, the one place they are spelled: the `Display` text of every
/// [`SubagentError`] starts with one, and [`SubagentError::code`] returns it.
pub mod code {
    /// `DUPLICATE_PROVIDER`.
    pub const DUPLICATE_PROVIDER: &str = "DUPLICATE_PROVIDER";
    /// `NO_PROVIDER`.
    pub const NO_PROVIDER: &str = "NO_PROVIDER";
    /// `UNSUPPORTED_CAPABILITY`.
    pub const UNSUPPORTED_CAPABILITY: &str = "UNSUPPORTED_CAPABILITY";
    /// `UNSUPPORTED_FEATURE`.
    pub const UNSUPPORTED_FEATURE: &str = "UNSUPPORTED_FEATURE";
    /// `INVALID_STATE`.
    pub const INVALID_STATE: &str = "INVALID_STATE";
    /// `INVALID_REQUEST`.
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    /// `INVALID_DESCRIPTOR`.
    pub const INVALID_DESCRIPTOR: &str = "INVALID_DESCRIPTOR";
    /// `DEPTH_EXCEEDED`.
    pub const DEPTH_EXCEEDED: &str = "DEPTH_EXCEEDED";
    /// `ABORTED`.
    pub const ABORTED: &str = "ABORTED";
    /// `START_FAILED`.
    pub const START_FAILED: &str = "START_FAILED";
    /// `DISPOSED`.
    pub const DISPOSED: &str = "DISPOSED";
    /// `INTERNAL`.
    pub const INTERNAL: &str = "INTERNAL";
    /// `NO_RUN`.
    pub const NO_RUN: &str = "NO_RUN";
    /// `BUDGET_EXHAUSTED`.
    pub const BUDGET_EXHAUSTED: &str = "BUDGET_EXHAUSTED";
}

/// Why the subagent service refused or could not complete an operation.
///
/// The `Display` text starts with a stable code (`DUPLICATE_PROVIDER`, `NO_PROVIDER`, ...) that
/// [`SubagentError::code`] also returns. It serializes as `{"code": CODE, "detail": ...}`, the
/// code spelled as [`SubagentError::code`] returns it (so that another host, a cluster's worker,
/// can pass it on typed).
#[derive(Debug, Clone, PartialEq, Eq, Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "code", content = "detail", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SubagentError {
    /// A provider with this name is already registered.
    #[error("{code}: a provider named `{0}` is already registered", code = code::DUPLICATE_PROVIDER)]
    DuplicateProvider(String),
    /// No provider with this name is registered.
    #[error("{code}: no provider named `{0}` is registered", code = code::NO_PROVIDER)]
    NoProvider(String),
    /// The provider lacks a start-time capability the request needs.
    #[error("{code}: provider `{provider}` does not support `{capability}`", code = code::UNSUPPORTED_CAPABILITY)]
    UnsupportedCapability {
        /// Provider name.
        provider: String,
        /// The missing capability (`output-schema`, `depth-limit`, `tool-filter`, `persona`).
        capability: String,
    },
    /// The provider does not declare this runtime feature (`steering`, `resume`).
    #[error("{code}: provider `{provider}` does not support `{feature}`", code = code::UNSUPPORTED_FEATURE)]
    UnsupportedFeature {
        /// Provider name.
        provider: String,
        /// The feature.
        feature: String,
    },
    /// The run is not in a state that allows the operation.
    #[error("{code}: {0}", code = code::INVALID_STATE)]
    InvalidState(String),
    /// The request is malformed.
    #[error("{code}: {0}", code = code::INVALID_REQUEST)]
    InvalidRequest(String),
    /// The descriptor a provider declared is malformed.
    #[error("{code}: plugin `{plugin}`: {reason}", code = code::INVALID_DESCRIPTOR)]
    InvalidDescriptor {
        /// The plugin that declared it.
        plugin: String,
        /// What is wrong.
        reason: String,
    },
    /// The child would be deeper than `max-depth` allows.
    #[error("{code}: a child at depth {attempted} exceeds max-depth {max}", code = code::DEPTH_EXCEEDED)]
    DepthExceeded {
        /// The child's depth.
        attempted: u32,
        /// The cap.
        max: u32,
    },
    /// The run was cancelled before its child existed.
    #[error("{code}: the run was cancelled before its child existed{suffix}", code = code::ABORTED, suffix = reason_suffix(.0))]
    Aborted(Option<String>),
    /// The provider failed before its child existed.
    #[error("{code}: {0}", code = code::START_FAILED)]
    StartFailed(String),
    /// The run was disposed.
    #[error("{code}: the run was disposed", code = code::DISPOSED)]
    Disposed,
    /// A fault the seam cannot represent otherwise.
    #[error("{code}: {0}", code = code::INTERNAL)]
    Internal(String),
    /// No run with this id belongs to the caller.
    #[error("{code}: no run `{0}` belongs to the caller", code = code::NO_RUN)]
    NoRun(String),
    /// The caller's budget cannot cover the run: refused before it started.
    #[error("{code}: {0}", code = code::BUDGET_EXHAUSTED)]
    BudgetExhausted(crate::spend::Exhausted),
}

/// Why the host ended a run `aborted`; its `Display` is the text the run's diagnostic starts
/// with (the cancel's reason follows it). [`SubagentRun::aborted`](super::SubagentRun::aborted)
/// returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Aborted {
    /// Cancelled before anything ran (the caller's signal was already aborted).
    #[error("aborted before start")]
    BeforeStart,
    /// Cancelled, and the provider stopped (or failed) by itself.
    #[error("cancelled")]
    Cancelled,
    /// Cancelled, and the provider ignored it: the host dropped it once the cancel grace was
    /// over.
    #[error("cancel enforced: the provider ignored it")]
    Enforced,
    /// Disposed before it settled.
    #[error("disposed before it settled")]
    Disposed,
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
            Self::DuplicateProvider(_) => code::DUPLICATE_PROVIDER,
            Self::NoProvider(_) => code::NO_PROVIDER,
            Self::UnsupportedCapability { .. } => code::UNSUPPORTED_CAPABILITY,
            Self::UnsupportedFeature { .. } => code::UNSUPPORTED_FEATURE,
            Self::InvalidState(_) => code::INVALID_STATE,
            Self::InvalidRequest(_) => code::INVALID_REQUEST,
            Self::InvalidDescriptor { .. } => code::INVALID_DESCRIPTOR,
            Self::DepthExceeded { .. } => code::DEPTH_EXCEEDED,
            Self::Aborted(_) => code::ABORTED,
            Self::StartFailed(_) => code::START_FAILED,
            Self::Disposed => code::DISPOSED,
            Self::Internal(_) => code::INTERNAL,
            Self::NoRun(_) => code::NO_RUN,
            Self::BudgetExhausted(_) => code::BUDGET_EXHAUSTED,
        }
    }
}
