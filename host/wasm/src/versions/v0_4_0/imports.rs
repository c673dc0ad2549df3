//! The host imports of `seam:plugin@0.4.0`: each converts its 0.4.0 arguments to the latest's
//! types, delegates to the latest implementation (`crate::interfaces`) and converts the answer
//! back, so that one implementation serves every supported version. The conversions are
//! declared here (`fields!`, `cases!`), and the imports as a list of signatures (`delegate!`);
//! the exports use the same conversions. The bindings are in the parent module.
//!
//! 0.4.0's types are 0.5.0's: 0.5.0 made `provider.run` async and added `runs`, neither of
//! which a 0.4.0 component sees.

use seam_agent::agent::RunChild;
use seam_core::SubagentRun;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::DynPollable;

use super::provider_world::seam::plugin::types as wit;
use super::provider_world::seam::plugin::{agents, host, run_context, subagents};
use crate::versions::convert::{AgentFailure, SubagentFailure};
use crate::versions::delegate::{cases, delegate, fields, linker};
use crate::versions::latest::provider_world::seam::plugin as new;

linker!("0.4.0", provider [run_context, agents, subagents], tool [subagents]);

// What the exports and imports pass both ways: 0.4.0's types and the latest's.
fields! {
    both wit::StartRequest, new::types::StartRequest {
        prompt, parent, agent_options, output_schema, max_depth, tool_filter, persona, scope
    }
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
    both wit::SubagentResult, new::types::SubagentResult {
        output, structured, stop_reason, diagnostic
    }
}
cases! {
    both wit::ContentBlock, new::types::ContentBlock { Text(s), Json(s) }
    wit::StopReason => new::types::StopReason {
        Completed, Aborted, Error, MaxTokens, Refusal, Budget, Other(s)
    }
    new::types::StopReason => wit::StopReason {
        Completed, Aborted, Error, MaxTokens, Refusal, Budget, Other(s)
    }
    wit::AgentStatus => new::types::AgentStatus { Running, Idle, Ready, Failed, Interrupted }
    new::types::AgentStatus => wit::AgentStatus { Running, Idle, Ready, Failed, Interrupted }
}

// 0.4.0's arguments as the latest's.
fields! {
    agents::ChildOptions => new::agents::ChildOptions {
        agent_options, persona, tool_filter, output_schema, seed
    }
    wit::ModelUsage => new::types::ModelUsage { input_tokens, output_tokens, cost_usd }
}
cases! {
    wit::LogLevel => new::types::LogLevel { Trace, Debug, Info, Warn, Error }
    wit::AgentScope => new::types::AgentScope { Children, Descendants }
    wit::ReportMode => new::types::ReportMode { Quiet, NextStep }
    agents::Seed => new::agents::Seed { None, ParentCompletedTurns }
}

// The latest's answers as 0.4.0's.
fields! {
    new::agents::ChildOutcome => agents::ChildOutcome { output, structured, stop_reason, diagnostic }
    new::types::RunInfo => wit::RunInfo { id, provider, label, state, started_at_ms, stop_reason }
    new::types::DepthInfo => wit::DepthInfo { attempted, max }
    new::types::AgentInfo => wit::AgentInfo {
        id, run_id, provider, label, parent_session, status, stop_reason, diagnostic, report,
        queued, started_at_ms, ended_at_ms
    }
    new::types::ApprovalRequest => wit::ApprovalRequest { id, path, what, subject }
}
cases! {
    new::types::RunState => wit::RunState { Running, Settled }
    new::types::Delivery => wit::Delivery { Queued, Woken, Resumed }
    new::agents::AgentError => agents::AgentError { DepthExceeded(d), Invalid(m), Busy, Idle, Aborted }
    new::types::SubagentError => wit::SubagentError {
        DuplicateProvider(n), NoProvider(n), UnsupportedCapability(c), InvalidRequest(m),
        DepthExceeded(d), Aborted(r), StartFailed(m), Disposed, Internal(m),
        UnsupportedFeature(f), InvalidState(m), NoRun(id), BudgetExhausted(m)
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
        fn progress(update: Vec<wit::ContentBlock>) -> wasmtime::Result<()>;
        fn cancelled() -> wasmtime::Result<Resource<DynPollable>>;
        fn next_message() -> wasmtime::Result<Option<Vec<wit::ContentBlock>>>;
        fn message_waiting() -> wasmtime::Result<Resource<DynPollable>>;
        fn report_usage(usage: wit::ModelUsage) -> Result<(), SubagentFailure>;
        fn output_tokens_left() -> wasmtime::Result<Option<u64>>;
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
        fn resume(run_id: String, prompt: Vec<wit::ContentBlock>)
            -> Result<Resource<SubagentRun>, SubagentFailure>;
        fn start_background(provider: String, request: wit::StartRequest, label: String)
            -> Result<wit::RunInfo, SubagentFailure>;
        fn list() -> wasmtime::Result<Vec<wit::RunInfo>>;
        fn get(id: String) -> Result<Resource<SubagentRun>, SubagentFailure>;
        fn provider(name: String) -> wasmtime::Result<Option<wit::ProviderDescriptor>>;
        fn list_providers() -> wasmtime::Result<Vec<wit::ProviderDescriptor>>;
        fn list_agents(scope: wit::AgentScope, status: Option<wit::AgentStatus>)
            -> Result<Vec<wit::AgentInfo>, SubagentFailure>;
        fn send_to_agent(id: String, prompt: Vec<wit::ContentBlock>)
            -> Result<wit::Delivery, SubagentFailure>;
        fn interrupt_agent(id: String) -> Result<wit::AgentInfo, SubagentFailure>;
        fn report(mode: wit::ReportMode, content: Vec<wit::ContentBlock>)
            -> Result<(), SubagentFailure>;
        fn pending_approvals(timeout_ms: u64) -> wasmtime::Result<Vec<wit::ApprovalRequest>>;
        fn answer_approval(id: Option<String>, allow: bool, always: bool, reason: Option<String>)
            -> Result<String, SubagentFailure>;
    }
    impl subagents::HostRun => new::subagents::HostRun {
        fn id(handle: Resource<SubagentRun>) -> wasmtime::Result<String>;
        fn started(handle: Resource<SubagentRun>) -> Result<(), SubagentFailure>;
        fn result(handle: Resource<SubagentRun>) -> Result<wit::SubagentResult, SubagentFailure>;
        fn cancel(handle: Resource<SubagentRun>, reason: Option<String>) -> wasmtime::Result<()>;
        fn dispose(handle: Resource<SubagentRun>) -> wasmtime::Result<()>;
        fn send_message(handle: Resource<SubagentRun>, prompt: Vec<wit::ContentBlock>)
            -> Result<(), SubagentFailure>;
        fn progress(handle: Resource<SubagentRun>) -> wasmtime::Result<Vec<wit::ContentBlock>>;
        fn wait_result(handle: Resource<SubagentRun>, timeout_ms: u64)
            -> wasmtime::Result<Option<Result<wit::SubagentResult, wit::SubagentError>>>;
        fn info(handle: Resource<SubagentRun>) -> wasmtime::Result<wit::RunInfo>;
        fn drop(handle: Resource<SubagentRun>) -> wasmtime::Result<()>;
    }
}
