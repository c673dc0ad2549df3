//! Seam: a host in which subagent providers and model-facing tools are WebAssembly components.
//!
//! The [`Host`] loads plugins from a [`Config`], owns every run started on a provider (readiness,
//! result, cancel, dispose, quiescence), emits every lifecycle [`Event`], and sandboxes every
//! plugin. Start with [`Host::new`], then [`Host::load`], then
//! [`SubagentService::start`](subagent::SubagentService::start) or [`Host::call_tool`].

#![warn(missing_docs)]

pub mod agent;
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench;
mod bindings;
pub mod config;
pub mod engine;
pub mod events;
mod host;
pub mod live;
pub mod loader;
pub mod model;
mod plugin;
pub mod sandbox;
pub mod subagent;
pub mod tool;
pub mod types;

pub use config::{Config, ConfigError, PluginEntry};
pub use engine::{EngineError, EngineOptions, PluginKind};
pub use events::{Event, EventBus, ListenerError, ListenerId};
pub use host::{ComponentInfo, Host, HostOptions};
pub use loader::{LoadError, LoadReport, PluginInfo, PluginState};
pub use sandbox::Limits;
pub use subagent::{Provider, RunContext, RunFailure, SubagentError, SubagentRun, SubagentService};
pub use tool::{Tool, ToolError, ToolRegistry};
pub use types::*;
