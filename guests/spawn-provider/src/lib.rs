//! The `spawn` provider: the child runs on the host's agent runtime with a fresh, empty session.
//! It inherits the parent's working directory and model unless the request's agent options say
//! otherwise, and declares all four start-time capabilities.

use seam_plugin::bindings::seam::plugin::agents::Seed;
use seam_plugin::inprocess;

const SPAWN: inprocess::Flavour = inprocess::Flavour {
    default_name: "spawn",
    seed: Seed::None,
    inherits_parent_context: false,
};

seam_plugin::in_process_provider!(SpawnProvider, SPAWN);
