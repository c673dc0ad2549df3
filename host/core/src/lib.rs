//! Seam's core: everything about subagents that does not need a WebAssembly engine.
//!
//! - [`types`]: the seam's vocabulary (content blocks, stop reasons, descriptors, requests).
//! - [`store`]: durable sessions: the [`SessionStore`](store::SessionStore) trait, in memory
//!   (the default) and in SQLite; the bus writes an event to it before any listener sees it.
//! - [`events`]: the lifecycle event bus, with contained listeners.
//! - [`subagent`]: the registry of providers behind the [`Provider`] trait, and the runs the
//!   host owns (readiness, result, cancel, dispose).
//! - [`tool`]: the registry of model-facing tools behind the [`Tool`] and [`ToolSource`] traits,
//!   mounted while the provider they follow is registered.
//!
//! The agent runtime that in-process providers run their children on (agents, their session
//! logs, models) is the crate `seam-agent`, above this one.
//!
//! Dependencies inside the crate run one way, layer by layer (`scripts/module-cycles.py` checks
//! it): `tool` > `subagent` > `approvals` > `events`, `ledger` > `tape` > `store`, `trace` >
//! `types`, `sync`, `live`, `budget` > `scope` > `spend`, `approval`, `cassette`. `subagent` talks to a run's child only
//! through the [`Steer`] trait, and keeps what a child leaves for `resume` as an opaque
//! [`ResumeSeed`](subagent::ResumeSeed).
//!
//! - [`approval`] and [`approvals`]: requests a person (or the parent agent) must allow, kept
//!   in the store, asked on whichever surface is there.
//! - [`cassette`] and [`tape`]: recording every input a tree's outcome depends on, and playing
//!   it back (`seam replay`).
//! - [`spend`] and [`ledger`]: budgets over the delegation tree (what a tree may spend, held
//!   before each call and charged to every ancestor).

#![warn(missing_docs)]

pub mod approval;
pub mod approvals;
pub mod budget;
pub mod cassette;
pub mod events;
pub mod ledger;
pub mod live;
pub mod scope;
pub mod spend;
pub mod store;
pub mod subagent;
pub mod sync;
pub mod tape;
pub mod tls;
pub mod tool;
pub mod trace;
pub mod types;

pub use events::{Event, EventBus, ListenerError, ListenerId};
pub use live::LiveCounts;
pub use subagent::{
    Provider, RunContext, RunFailure, Steer, SubagentError, SubagentRun, SubagentService,
};
pub use tool::{Tool, ToolBinding, ToolError, ToolRegistry, ToolSource};
pub use types::*;
