//! Seam's agent runtime: what in-process providers run their children on.
//!
//! - [`agent`]: live agents, their turns, tool layer and registry; what a recording keeps of
//!   their model calls.
//! - [`session`]: an agent's session log, as the store keeps it.
//! - [`model`]: the model trait, its config, the scripted model and the registry that resolves
//!   a model string (the OpenAI-compatible adapter is `seam-model-openai`).
//!
//! Everything it builds on (the subagent service, tools, events, the store, budgets, approvals,
//! recordings) is `seam-core`, below it. Dependencies inside the crate run one way: `agent` >
//! `session`, `model`.

#![warn(missing_docs)]

pub mod agent;
pub mod model;
pub mod session;

pub use agent::RunChild;
pub use session::{Session, SessionEvent, SessionHeader};
