//! Why a component could not become a plugin, or a call into it failed.

use seam_core::types::PluginKind;
use thiserror::Error;

use crate::fault::GuestFault;

/// Why a component could not become a plugin, or a call into it failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PluginError {
    /// The component imports something its world's linker does not provide.
    #[error("cannot link the {kind} component: {reason}")]
    Link {
        /// The component's kind.
        kind: PluginKind,
        /// The linker's explanation.
        reason: String,
    },
    /// A fresh instance could not be made.
    #[error("cannot instantiate: {0}")]
    Instantiate(GuestFault),
    /// The guest answered a call with an error of its own.
    #[error("{call} refused the config: {message}")]
    Refused {
        /// The export called (`describe`, `bind`).
        call: &'static str,
        /// The guest's message.
        message: String,
    },
    /// The guest answered a call (an observer's `on-event`) with an error of its own.
    #[error("{call} returned an error: {message}")]
    Answered {
        /// The export called.
        call: &'static str,
        /// The guest's message.
        message: String,
    },
    /// The guest faulted during a call.
    #[error("{call} failed: {fault}")]
    Fault {
        /// The export called.
        call: &'static str,
        /// What happened.
        fault: GuestFault,
    },
    /// The guest's answer breaks the contract (too large, empty, not JSON).
    #[error("{call} returned {problem}")]
    Malformed {
        /// The export called.
        call: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}
