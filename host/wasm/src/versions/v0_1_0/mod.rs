//! Bindings for `seam:plugin@0.1.0`, frozen (`wit/v0.1.0`), and its host imports, which convert
//! its types to and from the latest's and delegate to the latest implementation.
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

crate::versions::exports::blocking_run!();
