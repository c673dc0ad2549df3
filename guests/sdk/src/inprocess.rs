//! The shared body of the in-process providers (`spawn`, `fork`): a thin layer over the host's
//! `agents` interface. The host creates, owns and tears down the child; this code only decides
//! how the child's session is seeded and forwards the request.

use crate::bindings::seam::plugin::agents::{self, AgentError, ChildOptions, Seed};
use crate::bindings::seam::plugin::host::log;
use crate::bindings::seam::plugin::types::{
    Capabilities, LogLevel, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};
use crate::config::{self, Section};

const KEYS: &[&str] = &["name", "steering", "resume"];

/// What distinguishes one in-process provider from the other.
pub struct Flavour {
    /// Default registry name.
    pub default_name: &'static str,
    /// How the child's session starts.
    pub seed: Seed,
    /// Whether the child sees the parent's conversation.
    pub inherits_parent_context: bool,
}

/// Reads the descriptor from the config: all four start-time capabilities, runtime features
/// on unless turned off.
pub fn describe(flavour: &Flavour, text: &str) -> Result<ProviderDescriptor, String> {
    let fields = config::parse(text)?;
    let root = Section::root(&fields, KEYS)?;
    let name = root
        .non_empty_string("name")?
        .unwrap_or_else(|| flavour.default_name.to_string());
    Ok(ProviderDescriptor {
        name,
        capabilities: Capabilities {
            output_schema: true,
            depth_limit: true,
            tool_filter: true,
            persona: true,
        },
        features: RuntimeFeatures {
            steering: root.bool("steering")?.unwrap_or(true),
            resume: root.bool("resume")?.unwrap_or(true),
        },
        inherits_parent_context: flavour.inherits_parent_context,
    })
}

fn explain(e: AgentError) -> String {
    match e {
        AgentError::DepthExceeded(d) => format!(
            "DEPTH_EXCEEDED: a child at depth {} exceeds max-depth {}",
            d.attempted, d.max
        ),
        AgentError::Invalid(m) => m,
        AgentError::Busy => "the run already has a child".into(),
        AgentError::Idle => "nothing was sent to the child".into(),
        AgentError::Aborted => "aborted".into(),
    }
}

fn aborted() -> SubagentResult {
    SubagentResult {
        output: Vec::new(),
        structured: None,
        stop_reason: StopReason::Aborted,
        diagnostic: Some("cancelled".into()),
    }
}

/// One run: create the child (the run becomes ready), send the prompt, wait until the child is
/// idle, dispose it, and answer with the child's own outcome.
pub fn run(flavour: &Flavour, request: StartRequest) -> Result<SubagentResult, String> {
    let options = ChildOptions {
        agent_options: request.agent_options,
        persona: request.persona,
        tool_filter: request.tool_filter,
        output_schema: request.output_schema,
        seed: flavour.seed,
    };
    let child = match agents::create_child(&options) {
        Ok(child) => child,
        // Cancelled before the child existed: the host rejects readiness itself.
        Err(AgentError::Aborted) => return Ok(aborted()),
        Err(e) => return Err(explain(e)),
    };
    log(
        LogLevel::Debug,
        &format!("{} child {} created", flavour.default_name, child.id()),
    );
    let outcome = child.send(&request.prompt).and_then(|()| child.wait_idle());
    // Dispose on every path; the host would also do it when the run's instance goes.
    child.dispose();
    match outcome {
        Ok(o) => Ok(SubagentResult {
            output: o.output,
            structured: o.structured,
            stop_reason: o.stop_reason,
            diagnostic: o.diagnostic,
        }),
        Err(AgentError::Aborted) => Ok(aborted()),
        Err(e) => Ok(SubagentResult {
            output: Vec::new(),
            structured: None,
            stop_reason: StopReason::Error,
            diagnostic: Some(explain(e)),
        }),
    }
}

/// Defines the unit struct `$ty` implementing the `provider` export with `$flavour` (an
/// [`inprocess::Flavour`](crate::inprocess::Flavour) constant) and exports it: the one line a
/// component needs.
///
/// ```ignore
/// const SPAWN: inprocess::Flavour = inprocess::Flavour { /* ... */ };
/// seam_plugin::in_process_provider!(SpawnProvider, SPAWN);
/// ```
#[macro_export]
macro_rules! in_process_provider {
    ($ty:ident, $flavour:expr) => {
        struct $ty;

        impl $crate::exports::provider::exports::seam::plugin::provider::Guest for $ty {
            fn describe(
                config: ::std::string::String,
            ) -> ::std::result::Result<
                $crate::bindings::seam::plugin::types::ProviderDescriptor,
                ::std::string::String,
            > {
                $crate::inprocess::describe(&$flavour, &config)
            }

            fn run(
                _config: ::std::string::String,
                _run_id: ::std::string::String,
                request: $crate::bindings::seam::plugin::types::StartRequest,
            ) -> ::std::result::Result<
                $crate::bindings::seam::plugin::types::SubagentResult,
                ::std::string::String,
            > {
                $crate::inprocess::run(&$flavour, request)
            }
        }

        $crate::exports::provider::export_provider_world!($ty with_types_in $crate::exports::provider);
    };
}
