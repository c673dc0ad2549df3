//! Bindings for `seam:plugin@0.4.0`, frozen (`wit/v0.4.0`), and its host imports, which convert
//! its types to and from the latest's and delegate to the latest implementation.

pub mod imports;

super::bindings!(
    "../../wit/v0.4.0",
    provider {
        "seam:plugin/subagents.run": seam_core::SubagentRun,
        "wasi:io/poll": wasmtime_wasi::p2::bindings::io::poll,
    },
    tool { "seam:plugin/subagents": super::provider_world::seam::plugin::subagents }
);

crate::versions::exports::blocking_run!();
