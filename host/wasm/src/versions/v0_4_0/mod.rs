//! Bindings for `seam:plugin@0.4.0`, the latest version (`super::convert` converts its types to
//! and from `seam-core`'s).

super::bindings!(
    "../../wit/v0.4.0",
    provider {
        "seam:plugin/subagents.run": seam_core::SubagentRun,
        "wasi:io/poll": wasmtime_wasi::p2::bindings::io::poll,
    },
    tool { "seam:plugin/subagents": super::provider_world::seam::plugin::subagents }
);
