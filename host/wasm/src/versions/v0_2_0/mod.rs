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
        trappable_error_type: {
            "seam:plugin/types.subagent-error" => crate::versions::latest::SubagentFailure,
            "seam:plugin/agents.agent-error" => crate::versions::latest::AgentFailure,
        },
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
        trappable_error_type: {
            "seam:plugin/types.subagent-error" => crate::versions::latest::SubagentFailure,
            "seam:plugin/agents.agent-error" => crate::versions::latest::AgentFailure,
        },
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
        trappable_error_type: {
            "seam:plugin/types.subagent-error" => crate::versions::latest::SubagentFailure,
            "seam:plugin/agents.agent-error" => crate::versions::latest::AgentFailure,
        },
        with: {
            "seam:plugin/types": super::provider_world::seam::plugin::types,
            "seam:plugin/host": super::provider_world::seam::plugin::host,
        },
    });
}

use provider_world::seam::plugin::types as wit;

super::convert::conversions!(base, results, errors, runs);
