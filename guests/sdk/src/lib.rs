//! `seam-plugin`: the Seam guest SDK, for plugins written in Rust and built for `wasm32-wasip2`.
//!
//! A provider, tool or observer is one `impl` and one macro call:
//!
//! ```ignore
//! use seam_plugin::{Provider, Run, types::*};
//!
//! #[derive(serde::Deserialize)]
//! struct Config { name: String }
//!
//! struct Hello;
//! impl Provider for Hello {
//!     type Config = Config;
//!     fn describe(config: &Config) -> Result<ProviderDescriptor, String> {
//!         Ok(seam_plugin::descriptor(&config.name))
//!     }
//!     fn run(_config: Config, run: Run) -> Result<SubagentResult, String> {
//!         seam_plugin::ready();
//!         Ok(seam_plugin::answer(format!("hello: {}", run.prompt_text())))
//!     }
//! }
//! seam_plugin::export_provider!(Hello);
//! ```
//!
//! What is here:
//! - [`bindings`]: the imports of the blocking contract, `seam:plugin@0.4.0` (`host`,
//!   `run-context`, `agents`, `subagents`, `wasi:io/poll`) and its types, re-exported as
//!   [`types`], [`host`], [`run_context`], [`agents`], [`subagents`] and [`poll`] ([`subagents`]
//!   has the continuable children's `list_agents`, `send_to_agent`, `interrupt_agent` and
//!   `report`); 0.5.0's async `run` is written without the SDK (`seam new --async`);
//! - [`Provider`], [`Tool`] and [`Observer`], with [`export_provider!`], [`export_tool!`] and
//!   [`export_observer!`];
//! - [`config::typed`]: the plugin's JSON config into a serde type, unknown keys refused (and
//!   [`config::Section`], the same strictness by hand);
//! - shorthands: [`ready`], [`progress`], [`sleep`], [`is_cancelled`], [`log`], [`text`],
//!   [`answer`], [`aborted`], [`failed`], [`descriptor`], [`request`];
//! - [`inprocess`]: the body of the in-process providers (`spawn`, `fork`).
//!
//! A component uses either this crate's export macros or bindings it generates itself for the
//! same world, never both.

#![warn(missing_docs)]

pub mod config;
pub mod inprocess;
pub mod observer;
pub mod provider;
pub mod tool;

pub use observer::Observer;
pub use provider::{Provider, Run};
pub use tool::Tool;

/// The contract's imports, as one world that exports nothing.
///
/// Generating the imports apart from the three export worlds keeps one set of types for all of
/// them, and means a component carries the description of only the world it exports (an
/// import the component never calls is dropped when it is componentised).
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        inline: "
            package seam:sdk;
            world imports {
                import seam:plugin/host@0.4.0;
                import seam:plugin/run-context@0.4.0;
                import seam:plugin/agents@0.4.0;
                import seam:plugin/subagents@0.4.0;
            }
        ",
        path: "../../wit/v0.4.0",
        world: "seam:sdk/imports",
        generate_all,
    });
}

pub use bindings::seam::plugin::{agents, host, run_context, subagents, types};
pub use bindings::wasi::io::poll;

use types::{Capabilities, ContentBlock, LogLevel, ParentRef, ProviderDescriptor, RuntimeFeatures};
use types::{StartRequest, StopReason, SubagentResult};

/// The bindings the export macros implement (one module per world, sharing [`bindings`]'
/// types). Not for direct use.
#[doc(hidden)]
pub mod exports {
    /// The `provider-plugin` world's export.
    pub mod provider {
        wit_bindgen::generate!({
            path: "../../wit/v0.4.0",
            world: "seam:plugin/provider-plugin@0.4.0",
            with: {
                "seam:plugin/types@0.4.0": crate::bindings::seam::plugin::types,
                "seam:plugin/host@0.4.0": crate::bindings::seam::plugin::host,
                "seam:plugin/run-context@0.4.0": crate::bindings::seam::plugin::run_context,
                "seam:plugin/agents@0.4.0": crate::bindings::seam::plugin::agents,
                "seam:plugin/subagents@0.4.0": crate::bindings::seam::plugin::subagents,
                "wasi:io/poll@0.2.0": crate::bindings::wasi::io::poll,
            },
            pub_export_macro: true,
            export_macro_name: "export_provider_world",
            default_bindings_module: "seam_plugin::exports::provider",
        });
    }

    /// The `tool-plugin` world's export.
    pub mod tool {
        wit_bindgen::generate!({
            path: "../../wit/v0.4.0",
            world: "seam:plugin/tool-plugin@0.4.0",
            with: {
                "seam:plugin/types@0.4.0": crate::bindings::seam::plugin::types,
                "seam:plugin/host@0.4.0": crate::bindings::seam::plugin::host,
                "seam:plugin/subagents@0.4.0": crate::bindings::seam::plugin::subagents,
            },
            pub_export_macro: true,
            export_macro_name: "export_tool_world",
            default_bindings_module: "seam_plugin::exports::tool",
        });
    }

    /// The `observer-plugin` world's export.
    pub mod observer {
        wit_bindgen::generate!({
            path: "../../wit/v0.4.0",
            world: "seam:plugin/observer-plugin@0.4.0",
            with: {
                "seam:plugin/types@0.4.0": crate::bindings::seam::plugin::types,
                "seam:plugin/host@0.4.0": crate::bindings::seam::plugin::host,
            },
            pub_export_macro: true,
            export_macro_name: "export_observer_world",
            default_bindings_module: "seam_plugin::exports::observer",
        });
    }
}

/// Declares that the child exists (`run-context.ready`): the run's `started` resolves.
pub fn ready() {
    run_context::ready();
}

/// Reports progress as one text block (`run-context.progress`).
pub fn progress(update: impl Into<String>) {
    run_context::progress(&[ContentBlock::Text(update.into())]);
}

/// Waits `ms` milliseconds; false, early, if the run is cancelled meanwhile.
pub fn sleep(ms: u64) -> bool {
    run_context::sleep(ms)
}

/// Whether the run has been cancelled.
pub fn is_cancelled() -> bool {
    run_context::is_cancelled()
}

/// Reports a model call the run made itself (`run-context.report-usage`): its tokens, and its
/// cost when the run knows its model's prices, are charged to the run's tree. `Err` once the
/// tree's budget has nothing left for another call: the host then stops the run (it ends
/// `budget`), and the run should stop calling its model.
pub fn report_usage(
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: Option<f64>,
) -> Result<(), types::SubagentError> {
    run_context::report_usage(types::ModelUsage {
        input_tokens,
        output_tokens,
        cost_usd,
    })
}

/// The output tokens the run's tree may still spend, when its budget bounds them
/// (`run-context.output-tokens-left`): ask the model for at most this many.
pub fn output_tokens_left() -> Option<u64> {
    run_context::output_tokens_left()
}

/// A result for a run its budget stopped: stop reason `budget` with `why` as its diagnostic.
pub fn out_of_budget(why: impl Into<String>) -> SubagentResult {
    SubagentResult {
        output: Vec::new(),
        structured: None,
        stop_reason: StopReason::Budget,
        diagnostic: Some(why.into()),
    }
}

/// Writes a line to the host's log, tagged with the plugin id.
pub fn log(level: LogLevel, message: impl AsRef<str>) {
    host::log(level, message.as_ref());
}

/// The text of `blocks`: their text blocks joined with newlines (images and other blocks are
/// left out).
pub fn text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if let ContentBlock::Text(t) = block {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(t);
        }
    }
    out
}

/// A completed result answering `text`.
pub fn answer(text: impl Into<String>) -> SubagentResult {
    SubagentResult {
        output: vec![ContentBlock::Text(text.into())],
        structured: None,
        stop_reason: StopReason::Completed,
        diagnostic: None,
    }
}

/// An aborted result (the run was cancelled), with the cancel reason as its diagnostic.
pub fn aborted() -> SubagentResult {
    SubagentResult {
        output: Vec::new(),
        structured: None,
        stop_reason: StopReason::Aborted,
        diagnostic: Some(run_context::cancel_reason().unwrap_or_else(|| "cancelled".into())),
    }
}

/// A child-level failure: stop reason `error` with `why` as its diagnostic.
pub fn failed(why: impl Into<String>) -> SubagentResult {
    SubagentResult {
        output: Vec::new(),
        structured: None,
        stop_reason: StopReason::Error,
        diagnostic: Some(why.into()),
    }
}

/// A descriptor named `name` that declares no capability, no runtime feature and no inherited
/// context; set the fields it does support.
pub fn descriptor(name: impl Into<String>) -> ProviderDescriptor {
    ProviderDescriptor {
        name: name.into(),
        capabilities: Capabilities {
            output_schema: false,
            depth_limit: false,
            tool_filter: false,
            persona: false,
        },
        features: RuntimeFeatures {
            steering: false,
            resume: false,
        },
        inherits_parent_context: false,
    }
}

/// A start request for `parent` with a one-text-block `prompt` and no options (set the fields
/// you need).
pub fn request(parent: ParentRef, prompt: impl Into<String>) -> StartRequest {
    StartRequest {
        prompt: vec![ContentBlock::Text(prompt.into())],
        parent,
        agent_options: None,
        output_schema: None,
        max_depth: None,
        tool_filter: None,
        persona: None,
        scope: None,
    }
}
