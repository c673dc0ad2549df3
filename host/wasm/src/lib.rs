//! Seam: a host in which subagent providers and model-facing tools are WebAssembly components.
//!
//! The [`Host`] loads plugins from a [`Config`], owns every run started on a provider (readiness,
//! result, cancel, dispose, quiescence), emits every lifecycle [`Event`], and sandboxes every
//! plugin. Start with [`Host::new`], then [`Host::load`], then
//! [`SubagentService::start`](subagent::SubagentService::start) or [`Host::call_tool`].
//!
//! Everything that does not need the engine lives in `seam-core` and is re-exported here under
//! the same module names ([`subagent`], [`tool`], [`agent`], [`model`], [`events`], [`types`]).

#![warn(missing_docs)]

pub mod acp;
mod cache;
pub mod config;
pub mod engine;
mod fault;
mod host;
mod interfaces;
mod kinds;
mod linkers;
pub mod loader;
pub mod mcp;
pub mod mcp_server;
pub mod oci;
pub mod probe;
pub mod process;
pub mod sandbox;
mod store;
pub mod telemetry;
mod tiering;
mod tls;
pub mod versions;
mod wasi;

/// `seam-core`'s session store (`store` there; here `store` is the plugin stores' module).
pub use seam_cluster as cluster;
pub use seam_core::store as session_store;
pub use seam_core::{agent, events, live, model, session, subagent, sync, tool, types};

pub use cache::{cache_entries, clear_cache, prune_cache, CacheEntry, CacheStats};
pub use config::{Config, ConfigError, PluginEntry};
pub use engine::{Compiler, EngineError, EngineOptions};
pub use events::{Event, EventBus, ListenerError, ListenerId};
pub use fault::GuestFault;
pub use host::{ComponentInfo, Host, HostOptions};
pub use kinds::PluginError;
pub use loader::{LoadError, LoadReport, PluginInfo, PluginState, Pulled, Reload};
pub use sandbox::Limits;
pub use subagent::{Provider, RunContext, RunFailure, SubagentError, SubagentRun, SubagentService};
pub use tool::{Tool, ToolError, ToolRegistry};
pub use types::*;
pub use versions::WitVersion;
