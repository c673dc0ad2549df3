//! Seam: a host in which subagent providers and model-facing tools are WebAssembly components.
//!
//! The [`Host`] loads plugins from a [`Config`], owns every run started on a provider (readiness,
//! result, cancel, dispose, quiescence), emits every lifecycle [`Event`], and sandboxes every
//! plugin. Start with [`Host::new`], then [`Host::load`], then
//! [`SubagentService::start`](subagent::SubagentService::start) or [`Host::call_tool`].
//!
//! `seam-host` composes Seam's crates, and re-exports them under one name so that an embedder
//! depends on this crate alone: `seam-core` (the seam's vocabulary, runs, events, tools, agents;
//! its modules keep their names here), `seam-wasm` (the engine and the plugin kinds),
//! `seam-sandbox` and `seam-process`, and behind cargo features (all on by default) `seam-acp`
//! (`acp`), `seam-mcp` (`mcp`), `seam-a2a` (`a2a`), `seam-console` (`console`), `seam-oci` (`oci`), `seam-telemetry` (`telemetry`) and
//! `seam-cluster` (`cluster`). With `--no-default-features` it runs components and in-process
//! agents with none of those stacks; an entry that needs one is refused by name.

#![warn(missing_docs)]

pub mod config;
pub mod entries;
mod host;
pub mod loader;
pub mod probe;

#[cfg(feature = "a2a")]
pub use seam_a2a as a2a;
#[cfg(feature = "acp")]
pub use seam_acp as acp;
#[cfg(feature = "cluster")]
pub use seam_cluster as cluster;
#[cfg(feature = "console")]
pub use seam_console as console;
#[cfg(feature = "mcp")]
pub use seam_mcp as mcp;
#[cfg(feature = "oci")]
pub use seam_oci as oci;
pub use seam_process as process;
pub use seam_sandbox as sandbox;
#[cfg(feature = "telemetry")]
pub use seam_telemetry as telemetry;
pub use seam_wasm::{cache, engine, fault, kinds, versions};

/// `seam-core`'s session store (`store` in `seam-wasm` is the plugin stores' module).
/// Durable sessions: `seam-core`'s store trait, what is written and read, the memory store, and
/// (feature `sqlite`) the SQLite store.
pub mod session_store {
    pub use seam_core::store::*;
    #[cfg(feature = "sqlite")]
    pub use seam_store_sqlite::{SqliteStore, SCHEMA_VERSION};
}
pub use seam_agent::{agent, model, session};
pub use seam_core::{
    approval, approvals, cassette, events, ledger, live, scope, spend, subagent, sync, tape, tool,
    types,
};

pub use config::{Config, ConfigError, PluginEntry};
pub use events::{Event, EventBus, ListenerError, ListenerId};
pub use host::{ComponentInfo, Host, HostOptions};
pub use loader::{LoadError, LoadReport, PluginInfo, PluginState, Pulled, Reload};
pub use sandbox::Limits;
pub use seam_wasm::{
    cache_entries, clear_cache, prune_cache, CacheEntry, CacheStats, Compiler, EngineError,
    EngineOptions, GuestFault, PluginError, WitVersion,
};
pub use subagent::{Provider, RunContext, RunFailure, SubagentError, SubagentRun, SubagentService};
pub use tool::{Tool, ToolError, ToolRegistry};
pub use types::*;
