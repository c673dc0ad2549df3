//! The host imports of `seam:plugin@0.1.0`: each converts its 0.1.0 arguments to the latest's
//! types, delegates to the latest implementation (`crate::interfaces`) and converts the answer
//! back, so that one implementation serves every supported version. The conversions are
//! declared here (`fields!`, `cases!`), and the imports as a list of signatures (`delegate!`);
//! the exports use the same conversions. The bindings are in the parent module.
//!
//! 0.1.0 has no place for what later versions added (a result's or outcome's `diagnostic`,
//! newer error cases): those are folded into what it has ([`folded`], and `internal`).

use seam_agent::agent::RunChild;
use seam_core::SubagentRun;
use wasmtime::component::Resource;

use super::provider_world::seam::plugin::types as wit;
use super::provider_world::seam::plugin::{agents, host, run_context};
use super::tool_world::seam::plugin::subagents;
use crate::versions::delegate::{cases, delegate, fields, linker, Convert};
use crate::versions::latest::provider_world::seam::plugin as new;
use crate::versions::convert::{AgentFailure, SubagentFailure};

linker!("0.1.0", provider [run_context, agents], tool [subagents]);

// What the exports and imports pass both ways: 0.1.0's types and the latest's.
fields! {
    both wit::StartRequest, new::types::StartRequest {
        prompt, parent, agent_options, output_schema, max_depth, tool_filter, persona
    } new { scope: None }
    both wit::ParentRef, new::types::ParentRef { id, session_id, working_directory, depth }
    both wit::AgentOptions, new::types::AgentOptions { model, system_prompt }
    both wit::ToolFilter, new::types::ToolFilter { allow, deny }
    both wit::ProviderDescriptor, new::types::ProviderDescriptor {
        name, capabilities, features, inherits_parent_context
    }
    both wit::Capabilities, new::types::Capabilities {
        output_schema, depth_limit, tool_filter, persona
    }
    both wit::RuntimeFeatures, new::types::RuntimeFeatures { steering, resume }
}
cases! {
    both wit::ContentBlock, new::types::ContentBlock { Text(s), Json(s) }
    // A budget's stop reason reached this version as `other("budget")`: back, it is one again.
    wit::StopReason => new::types::StopReason { Completed, Aborted, Error, MaxTokens, Refusal } else {
        wit::StopReason::Other(s) if s == "budget" => new::types::StopReason::Budget,
        wit::StopReason::Other(s) => new::types::StopReason::Other(s),
    }
    new::types::StopReason => wit::StopReason {
        Completed, Aborted, Error, MaxTokens, Refusal, Other(s)
    } else {
        new::types::StopReason::Budget => wit::StopReason::Other("budget".into()),
    }
}

// 0.1.0's arguments as the latest's.
fields! {
    agents::ChildOptions => new::agents::ChildOptions {
        agent_options, persona, tool_filter, output_schema, seed
    }
}
cases! {
    wit::LogLevel => new::types::LogLevel { Trace, Debug, Info, Warn, Error }
    agents::Seed => new::agents::Seed { None, ParentCompletedTurns }
}

// The latest's answers as 0.1.0's.
fields! {
    new::types::DepthInfo => wit::DepthInfo { attempted, max }
}
cases! {
    new::agents::AgentError => agents::AgentError { DepthExceeded(d), Invalid(m), Busy, Idle, Aborted }
}

impl Convert<new::types::SubagentResult> for wit::SubagentResult {
    fn convert(self) -> new::types::SubagentResult {
        new::types::SubagentResult {
            output: self.output.convert(),
            structured: self.structured,
            stop_reason: self.stop_reason.convert(),
            diagnostic: None,
        }
    }
}

impl Convert<wit::SubagentResult> for new::types::SubagentResult {
    fn convert(self) -> wit::SubagentResult {
        wit::SubagentResult {
            output: folded(self.output, self.diagnostic),
            structured: self.structured,
            stop_reason: self.stop_reason.convert(),
        }
    }
}

impl Convert<agents::ChildOutcome> for new::agents::ChildOutcome {
    fn convert(self) -> agents::ChildOutcome {
        agents::ChildOutcome {
            output: folded(self.output, self.diagnostic),
            structured: self.structured,
            stop_reason: self.stop_reason.convert(),
        }
    }
}

/// The child's words, or the diagnostic when it said nothing: 0.1.0 has one place for both.
pub fn folded(
    output: Vec<new::types::ContentBlock>,
    diagnostic: Option<String>,
) -> Vec<wit::ContentBlock> {
    use new::types::ContentBlock::{Json, Text};
    let silent = output
        .iter()
        .all(|(Text(t) | Json(t))| t.trim().is_empty());
    match diagnostic {
        Some(d) if silent => vec![wit::ContentBlock::Text(d)],
        _ => output.convert(),
    }
}

impl Convert<wit::SubagentError> for new::types::SubagentError {
    fn convert(self) -> wit::SubagentError {
        use new::types::SubagentError as E;
        use wit::SubagentError as Old;
        match self {
            E::DuplicateProvider(n) => Old::DuplicateProvider(n),
            E::NoProvider(n) => Old::NoProvider(n),
            E::UnsupportedCapability(c) => Old::UnsupportedCapability(c),
            E::InvalidRequest(m) => Old::InvalidRequest(m),
            E::DepthExceeded(d) => Old::DepthExceeded(d.convert()),
            E::Aborted(r) => Old::Aborted(r),
            E::StartFailed(m) | E::BudgetExhausted(m) => Old::StartFailed(m),
            E::Disposed => Old::Disposed,
            E::Internal(m) => Old::Internal(m),
            E::UnsupportedFeature(f) => Old::Internal(format!("unsupported feature `{f}`")),
            E::InvalidState(m) => Old::Internal(format!("invalid state: {m}")),
            E::NoRun(id) => Old::Internal(format!("no run `{id}`")),
        }
    }
}

delegate! {
    impl wit::Host => new::types::Host {
        errors { convert_subagent_error(SubagentFailure) -> wit::SubagentError }
    }
    impl host::Host => new::host::Host {
        fn log(level: wit::LogLevel, message: String) -> wasmtime::Result<()>;
    }
    impl run_context::Host => new::run_context::Host {
        fn ready() -> wasmtime::Result<()>;
        fn cancel_reason() -> wasmtime::Result<Option<String>>;
        fn is_cancelled() -> wasmtime::Result<bool>;
        fn sleep(ms: u64) -> wasmtime::Result<bool>;
    }
    impl agents::Host => new::agents::Host {
        errors { convert_agent_error(AgentFailure) -> agents::AgentError }
        fn create_child(options: agents::ChildOptions) -> Result<Resource<RunChild>, AgentFailure>;
    }
    impl agents::HostChild => new::agents::HostChild {
        fn id(handle: Resource<RunChild>) -> wasmtime::Result<String>;
        fn send(handle: Resource<RunChild>, prompt: Vec<wit::ContentBlock>) -> Result<(), AgentFailure>;
        fn wait_idle(handle: Resource<RunChild>) -> Result<agents::ChildOutcome, AgentFailure>;
        fn steer(handle: Resource<RunChild>, message: Vec<wit::ContentBlock>) -> wasmtime::Result<()>;
        fn dispose(handle: Resource<RunChild>) -> wasmtime::Result<()>;
        fn drop(handle: Resource<RunChild>) -> wasmtime::Result<()>;
    }
    impl subagents::Host => new::subagents::Host {
        fn start(provider: String, request: wit::StartRequest)
            -> Result<Resource<SubagentRun>, SubagentFailure>;
        fn provider(name: String) -> wasmtime::Result<Option<wit::ProviderDescriptor>>;
        fn list_providers() -> wasmtime::Result<Vec<wit::ProviderDescriptor>>;
    }
    impl subagents::HostRun => new::subagents::HostRun {
        fn id(handle: Resource<SubagentRun>) -> wasmtime::Result<String>;
        fn started(handle: Resource<SubagentRun>) -> Result<(), SubagentFailure>;
        fn result(handle: Resource<SubagentRun>) -> Result<wit::SubagentResult, SubagentFailure>;
        fn cancel(handle: Resource<SubagentRun>, reason: Option<String>) -> wasmtime::Result<()>;
        fn dispose(handle: Resource<SubagentRun>) -> wasmtime::Result<()>;
        fn drop(handle: Resource<SubagentRun>) -> wasmtime::Result<()>;
    }
}
