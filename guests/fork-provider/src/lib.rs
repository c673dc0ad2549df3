//! The `fork` provider: the child runs on the host's agent runtime, its session seeded with the
//! parent's balanced completed-turn prefix (the turn in flight is left out). Its answer is read
//! only from its own events after the seed.
//! Like `spawn`, it inherits the parent's working directory and model unless the request's agent options say
//! otherwise, and declares all four start-time capabilities.

use seam_plugin::bindings::seam::plugin::agents::Seed;
use seam_plugin::inprocess;

const FORK: inprocess::Flavour = inprocess::Flavour {
    default_name: "fork",
    seed: Seed::ParentCompletedTurns,
    inherits_parent_context: true,
};

seam_plugin::in_process_provider!(ForkProvider, FORK);
