//! The `spawn` provider: the child runs on the host's agent runtime with a fresh, empty session.
//! It inherits the parent's working directory and model unless the request's agent options say
//! otherwise, and declares all four start-time capabilities.

#[allow(dead_code)]
#[path = "../../common/config.rs"]
mod config;
#[path = "../../common/inprocess.rs"]
mod inprocess;

wit_bindgen::generate!({ path: "../../wit", world: "provider-plugin" });

use exports::seam::plugin::provider::Guest;
use seam::plugin::agents::Seed;
use seam::plugin::types::{ProviderDescriptor, StartRequest, SubagentResult};

const SPAWN: inprocess::Flavour = inprocess::Flavour {
    default_name: "spawn",
    seed: Seed::None,
    inherits_parent_context: false,
};

in_process_provider!(SpawnProvider, SPAWN);
