//! The host imports of `seam:plugin@0.2.0`: each converts its 0.2.0 arguments and delegates to
//! the latest implementation (`crate::interfaces`), so that one implementation serves every
//! supported version. The bindings and type conversions are in the parent module.
//!
//! 0.2.0 lacks what 0.3.0 added to `subagents` (the continuable-children calls), and its linker
//! registers only what its own world names: a 0.2.0 component needs nothing it never imported.

use wasmtime::component::{HasSelf, Linker, Resource};
use wasmtime_wasi::p2::DynPollable;

use seam_core::agent::RunChild;
use seam_core::types::{ContentBlock, ProviderDescriptor, RunInfo, StopReason};
use seam_core::SubagentRun;

use crate::store::StoreData;
use crate::versions::latest::provider_world::seam::plugin as new;
use crate::versions::v0_2_0::provider_world::seam::plugin::types as wit;
use crate::versions::v0_2_0::provider_world::seam::plugin::{agents, host, run_context, subagents};
use crate::versions::v0_2_0::request_from_wit;

/// Adds the 0.2.0 interfaces `kind`'s world imports to a linker (WASI is added by the caller).
pub fn add_to_linker(
    linker: &mut Linker<StoreData>,
    kind: seam_core::PluginKind,
) -> wasmtime::Result<()> {
    use seam_core::PluginKind;
    wit::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)?;
    host::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)?;
    match kind {
        PluginKind::Provider => {
            run_context::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)?;
            agents::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)?;
            subagents::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s)
        }
        PluginKind::Tool => subagents::add_to_linker::<_, HasSelf<StoreData>>(linker, |s| s),
        PluginKind::Observer => Ok(()),
        // A frozen version never gains a kind: the linkers ask it only for the kinds its row
        // in `for_each_version!` lists, so a kind added later needs no arm here.
        #[allow(unreachable_patterns)]
        other => Err(wasmtime::Error::msg(format!(
            "this version has no `{other}` world"
        ))),
    }
}

fn blocks(b: Vec<wit::ContentBlock>) -> Vec<new::types::ContentBlock> {
    b.into_iter()
        .map(|b| ContentBlock::from(b).into())
        .collect()
}

fn old_blocks(b: Vec<new::types::ContentBlock>) -> Vec<wit::ContentBlock> {
    b.into_iter()
        .map(|b| ContentBlock::from(b).into())
        .collect()
}

fn descriptor(d: new::types::ProviderDescriptor) -> wit::ProviderDescriptor {
    (&ProviderDescriptor::from(d)).into()
}

fn run_info(i: new::types::RunInfo) -> wit::RunInfo {
    RunInfo::from(i).into()
}

fn error(e: new::types::SubagentError) -> wit::SubagentError {
    use new::types::SubagentError as E;
    match e {
        E::DuplicateProvider(n) => wit::SubagentError::DuplicateProvider(n),
        E::NoProvider(n) => wit::SubagentError::NoProvider(n),
        E::UnsupportedCapability(c) => wit::SubagentError::UnsupportedCapability(c),
        E::InvalidRequest(m) => wit::SubagentError::InvalidRequest(m),
        E::DepthExceeded(d) => wit::SubagentError::DepthExceeded(wit::DepthInfo {
            attempted: d.attempted,
            max: d.max,
        }),
        E::Aborted(r) => wit::SubagentError::Aborted(r),
        E::StartFailed(m) => wit::SubagentError::StartFailed(m),
        E::Disposed => wit::SubagentError::Disposed,
        E::Internal(m) => wit::SubagentError::Internal(m),
        E::UnsupportedFeature(f) => wit::SubagentError::UnsupportedFeature(f),
        E::InvalidState(m) => wit::SubagentError::InvalidState(m),
        E::NoRun(id) => wit::SubagentError::NoRun(id),
    }
}

fn result(r: new::types::SubagentResult) -> wit::SubagentResult {
    crate::versions::latest::result_from_wit(r).into()
}

/// A 0.2.0 guest's request in the latest types, or the error its JSON text earns.
fn new_request(r: wit::StartRequest) -> Result<new::types::StartRequest, wit::SubagentError> {
    request_from_wit(r)
        .map(|r| crate::versions::latest::request_to_wit(&r))
        .map_err(Into::into)
}

impl wit::Host for StoreData {}

impl host::Host for StoreData {
    async fn log(&mut self, level: host::LogLevel, message: String) -> wasmtime::Result<()> {
        use host::LogLevel as Old;
        use new::host::LogLevel as New;
        let level = match level {
            Old::Trace => New::Trace,
            Old::Debug => New::Debug,
            Old::Info => New::Info,
            Old::Warn => New::Warn,
            Old::Error => New::Error,
        };
        new::host::Host::log(self, level, message).await
    }
}

impl run_context::Host for StoreData {
    async fn ready(&mut self) -> wasmtime::Result<()> {
        new::run_context::Host::ready(self).await
    }

    async fn cancel_reason(&mut self) -> wasmtime::Result<Option<String>> {
        new::run_context::Host::cancel_reason(self).await
    }

    async fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        new::run_context::Host::is_cancelled(self).await
    }

    async fn sleep(&mut self, ms: u64) -> wasmtime::Result<bool> {
        new::run_context::Host::sleep(self, ms).await
    }

    async fn progress(&mut self, update: Vec<wit::ContentBlock>) -> wasmtime::Result<()> {
        new::run_context::Host::progress(self, blocks(update)).await
    }

    async fn cancelled(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        new::run_context::Host::cancelled(self).await
    }

    async fn next_message(&mut self) -> wasmtime::Result<Option<Vec<wit::ContentBlock>>> {
        Ok(new::run_context::Host::next_message(self)
            .await?
            .map(old_blocks))
    }

    async fn message_waiting(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        new::run_context::Host::message_waiting(self).await
    }
}

fn agent_error(e: new::agents::AgentError) -> agents::AgentError {
    use new::agents::AgentError as E;
    match e {
        E::DepthExceeded(d) => agents::AgentError::DepthExceeded(wit::DepthInfo {
            attempted: d.attempted,
            max: d.max,
        }),
        E::Invalid(m) => agents::AgentError::Invalid(m),
        E::Busy => agents::AgentError::Busy,
        E::Idle => agents::AgentError::Idle,
        E::Aborted => agents::AgentError::Aborted,
    }
}

impl agents::Host for StoreData {
    async fn create_child(
        &mut self,
        options: agents::ChildOptions,
    ) -> wasmtime::Result<Result<Resource<RunChild>, agents::AgentError>> {
        let options = new::agents::ChildOptions {
            agent_options: options.agent_options.map(|o| new::types::AgentOptions {
                model: o.model,
                system_prompt: o.system_prompt,
            }),
            persona: options.persona,
            tool_filter: options.tool_filter.map(|f| new::types::ToolFilter {
                allow: f.allow,
                deny: f.deny,
            }),
            output_schema: options.output_schema,
            seed: match options.seed {
                agents::Seed::None => new::agents::Seed::None,
                agents::Seed::ParentCompletedTurns => new::agents::Seed::ParentCompletedTurns,
            },
        };
        Ok(new::agents::Host::create_child(self, options)
            .await?
            .map_err(agent_error))
    }
}

impl agents::HostChild for StoreData {
    async fn id(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<String> {
        new::agents::HostChild::id(self, handle).await
    }

    async fn send(
        &mut self,
        handle: Resource<RunChild>,
        prompt: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<Result<(), agents::AgentError>> {
        Ok(new::agents::HostChild::send(self, handle, blocks(prompt))
            .await?
            .map_err(agent_error))
    }

    async fn wait_idle(
        &mut self,
        handle: Resource<RunChild>,
    ) -> wasmtime::Result<Result<agents::ChildOutcome, agents::AgentError>> {
        let outcome = new::agents::HostChild::wait_idle(self, handle).await?;
        Ok(outcome.map_err(agent_error).map(|o| agents::ChildOutcome {
            output: old_blocks(o.output),
            structured: o.structured,
            stop_reason: StopReason::from(o.stop_reason).into(),
            diagnostic: o.diagnostic,
        }))
    }

    async fn steer(
        &mut self,
        handle: Resource<RunChild>,
        message: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<()> {
        new::agents::HostChild::steer(self, handle, blocks(message)).await
    }

    async fn dispose(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<()> {
        new::agents::HostChild::dispose(self, handle).await
    }

    async fn drop(&mut self, handle: Resource<RunChild>) -> wasmtime::Result<()> {
        new::agents::HostChild::drop(self, handle).await
    }
}

impl subagents::Host for StoreData {
    async fn start(
        &mut self,
        provider: String,
        request: wit::StartRequest,
    ) -> wasmtime::Result<Result<Resource<SubagentRun>, wit::SubagentError>> {
        let request = match new_request(request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        Ok(new::subagents::Host::start(self, provider, request)
            .await?
            .map_err(error))
    }

    async fn resume(
        &mut self,
        run_id: String,
        prompt: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<Result<Resource<SubagentRun>, wit::SubagentError>> {
        Ok(new::subagents::Host::resume(self, run_id, blocks(prompt))
            .await?
            .map_err(error))
    }

    async fn start_background(
        &mut self,
        provider: String,
        request: wit::StartRequest,
        label: String,
    ) -> wasmtime::Result<Result<wit::RunInfo, wit::SubagentError>> {
        let request = match new_request(request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        Ok(
            new::subagents::Host::start_background(self, provider, request, label)
                .await?
                .map(run_info)
                .map_err(error),
        )
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<wit::RunInfo>> {
        Ok(new::subagents::Host::list(self)
            .await?
            .into_iter()
            .map(run_info)
            .collect())
    }

    async fn get(
        &mut self,
        id: String,
    ) -> wasmtime::Result<Result<Resource<SubagentRun>, wit::SubagentError>> {
        Ok(new::subagents::Host::get(self, id).await?.map_err(error))
    }

    async fn provider(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Option<wit::ProviderDescriptor>> {
        Ok(new::subagents::Host::provider(self, name)
            .await?
            .map(descriptor))
    }

    async fn list_providers(&mut self) -> wasmtime::Result<Vec<wit::ProviderDescriptor>> {
        Ok(new::subagents::Host::list_providers(self)
            .await?
            .into_iter()
            .map(descriptor)
            .collect())
    }
}

impl subagents::HostRun for StoreData {
    async fn id(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<String> {
        new::subagents::HostRun::id(self, handle).await
    }

    async fn started(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> wasmtime::Result<Result<(), wit::SubagentError>> {
        Ok(new::subagents::HostRun::started(self, handle)
            .await?
            .map_err(error))
    }

    async fn result(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> wasmtime::Result<Result<wit::SubagentResult, wit::SubagentError>> {
        Ok(new::subagents::HostRun::result(self, handle)
            .await?
            .map(result)
            .map_err(error))
    }

    async fn cancel(
        &mut self,
        handle: Resource<SubagentRun>,
        reason: Option<String>,
    ) -> wasmtime::Result<()> {
        new::subagents::HostRun::cancel(self, handle, reason).await
    }

    async fn dispose(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<()> {
        new::subagents::HostRun::dispose(self, handle).await
    }

    async fn send_message(
        &mut self,
        handle: Resource<SubagentRun>,
        prompt: Vec<wit::ContentBlock>,
    ) -> wasmtime::Result<Result<(), wit::SubagentError>> {
        Ok(
            new::subagents::HostRun::send_message(self, handle, blocks(prompt))
                .await?
                .map_err(error),
        )
    }

    async fn progress(
        &mut self,
        handle: Resource<SubagentRun>,
    ) -> wasmtime::Result<Vec<wit::ContentBlock>> {
        Ok(old_blocks(
            new::subagents::HostRun::progress(self, handle).await?,
        ))
    }

    async fn wait_result(
        &mut self,
        handle: Resource<SubagentRun>,
        timeout_ms: u64,
    ) -> wasmtime::Result<Option<Result<wit::SubagentResult, wit::SubagentError>>> {
        Ok(
            new::subagents::HostRun::wait_result(self, handle, timeout_ms)
                .await?
                .map(|r| r.map(result).map_err(error)),
        )
    }

    async fn info(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<wit::RunInfo> {
        Ok(run_info(new::subagents::HostRun::info(self, handle).await?))
    }

    async fn drop(&mut self, handle: Resource<SubagentRun>) -> wasmtime::Result<()> {
        new::subagents::HostRun::drop(self, handle).await
    }
}
